package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of the image's only layer.
type file struct {
	path     string // absolute, in the image
	src      string // a regular file's content on the host
	dir      bool
	mode     int64
	uid, gid int
}

// newLayer returns a gzip-compressed OCI layer holding files and every
// parent directory they need (root-owned, 0755), in path order, each dated
// mtime, so the same inputs give the same digest.
func newLayer(files []file, mtime time.Time) (v1.Layer, error) {
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	byPath := map[string]file{}
	for _, f := range files {
		byPath[f.path] = f
		for d := path.Dir(f.path); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = file{path: d, dir: true, mode: 0o755}
			}
		}
	}
	// Explicit directories win over the parents implied above, whatever
	// the order files came in.
	for _, f := range files {
		byPath[f.path] = f
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := writeEntry(tw, byPath[p], mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return layer, nil
}

// writeEntry writes f's header (and content) to tw.
func writeEntry(tw *tar.Writer, f file, mtime time.Time) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(f.path, "/"),
		Mode:    f.mode,
		Uid:     f.uid,
		Gid:     f.gid,
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	if f.dir {
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		return tw.WriteHeader(h)
	}
	content, err := os.ReadFile(f.src)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	h.Typeflag = tar.TypeReg
	h.Size = int64(len(content))
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("image: %s: %w", f.path, err)
	}
	if _, err := tw.Write(content); err != nil {
		return fmt.Errorf("image: %s: %w", f.path, err)
	}
	return nil
}
