// Package image builds counterd's OCI image without a container daemon:
// the static counterd and rollup binaries in one layer, a numeric non-root
// user, and the settings a container needs, written as an OCI image layout
// directory (and, if asked, a docker-archive tar) with
// github.com/google/go-containerregistry.
//
// The one idea to hold first: the image holds the two binaries and the
// directories they write, nothing else. There is no shell and no libc, so
// Build refuses a binary that is not statically linked (it could not start
// there), and the user is a number (65532, distroless's "nonroot"), so a
// runtime can tell it is not root without an /etc/passwd to look it up in.
//
// cmd/counterd-image is the command make image runs; deploy/image/Containerfile
// builds the same image with podman or buildah.
package image
