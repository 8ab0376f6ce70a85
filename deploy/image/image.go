package image

import (
	"errors"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless's "nonroot". A number, so that runtimes
// (Kubernetes' runAsNonRoot) can check it is not root without a passwd
// file, and the same number the Containerfile uses.
const (
	UID  = 65532
	GID  = 65532
	User = "65532:65532"
)

// Where things are in the image.
const (
	// BinDir holds counterd and rollup; PATH names it, so
	// `--entrypoint rollup` works.
	BinDir = "/usr/local/bin"
	// SocketDir is a volume: the app's container mounts the same one to
	// reach the socket.
	SocketDir = "/run/counterd"
	// Socket is COUNTERD_SOCKET. It sits in a subdirectory of the volume
	// that counterd creates 0700 itself, because counterd refuses a socket
	// directory that group or others can write, and a Kubernetes emptyDir
	// is mounted 0777: a socket directly in the volume would work with a
	// podman named volume (which copies the image's 65532-owned directory)
	// and be refused in a pod.
	Socket = SocketDir + "/sock/counterd.sock"
	// StateDir is a volume, and the working directory.
	StateDir = "/var/lib/counterd"
	// JournalDir is COUNTERD_JOURNAL_DIR, a subdirectory of the volume for
	// the same reason as Socket's.
	JournalDir = StateDir + "/journal"
	// MetricsAddr is COUNTERD_METRICS_ADDR in the image. counterd's own
	// default is 127.0.0.1:9464, but in a container loopback is the
	// container's own: the kubelet probes /readyz on the pod's IP and
	// Prometheus scrapes it there, and a published podman port reaches the
	// container's interface, not its loopback. ":9464" (every address,
	// IPv6 too, for IPv6-only clusters) exposes it no further than the
	// pod's or container's network does. It serves no pprof unless
	// COUNTERD_PPROF is set; set COUNTERD_METRICS_ADDR=127.0.0.1:9464 with
	// host networking.
	MetricsAddr = ":9464"
	// CACertificates is where Go's crypto/x509 looks first on Linux: with
	// it, DATABASE_URL can use sslmode=verify-full against a server whose
	// certificate a public CA signed.
	CACertificates = "/etc/ssl/certs/ca-certificates.crt"
)

// Options say what goes into the image.
type Options struct {
	// Counterd and Rollup are the paths of the two binaries, statically
	// linked (CGO_ENABLED=0) for the image's platform.
	Counterd, Rollup string
	// Version is org.opencontainers.image.version: what make build stamps
	// (git describe --always --dirty). Required.
	Version string
	// Revision is org.opencontainers.image.revision, the commit; empty
	// leaves the label out.
	Revision string
	// Source is org.opencontainers.image.source, the repository's URL.
	Source string
	// Licenses is org.opencontainers.image.licenses, an SPDX expression;
	// empty (the repository has no LICENSE) leaves the label out.
	Licenses string
	// CACertificates is a CA bundle to copy to /etc/ssl/certs; empty adds
	// none (then only sslrootcert=... in DATABASE_URL can verify a server).
	CACertificates string
	// Created is the image's creation time and every file's mtime: the
	// commit's time gives the same image from the same commit.
	Created time.Time
}

// Build returns the image Options describe, with OCI media types.
func Build(opts Options) (v1.Image, error) {
	if opts.Counterd == "" || opts.Rollup == "" {
		return nil, errors.New("image: the counterd and rollup binaries are both required")
	}
	if opts.Version == "" {
		return nil, errors.New("image: a version is required (make image passes make build's VERSION)")
	}
	platform, err := checkStatic(opts.Counterd)
	if err != nil {
		return nil, err
	}
	rplatform, err := checkStatic(opts.Rollup)
	if err != nil {
		return nil, err
	}
	if rplatform != platform {
		return nil, fmt.Errorf("image: counterd is built for %s and rollup for %s", platform, rplatform)
	}

	files := []file{
		{path: BinDir + "/counterd", src: opts.Counterd, mode: 0o755},
		{path: BinDir + "/rollup", src: opts.Rollup, mode: 0o755},
		{path: SocketDir, dir: true, mode: 0o755, uid: UID, gid: GID},
		{path: StateDir, dir: true, mode: 0o755, uid: UID, gid: GID},
	}
	if opts.CACertificates != "" {
		files = append(files, file{path: CACertificates, src: opts.CACertificates, mode: 0o644})
	}
	layer, err := newLayer(files, opts.Created)
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: opts.Created},
			CreatedBy: "counterd-image: " + BinDir + "/counterd, " + BinDir + "/rollup",
			Comment:   "static binaries only: no shell, no libc",
		},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = platform.os
	cf.Architecture = platform.arch
	cf.Created = v1.Time{Time: opts.Created}
	cf.Config = config(opts)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: set config: %w", err)
	}
	return img, nil
}

// config is the image's runtime configuration.
func config(opts Options) v1.Config {
	return v1.Config{
		User:       User,
		Entrypoint: []string{BinDir + "/counterd"},
		WorkingDir: StateDir,
		Env: []string{
			"PATH=" + BinDir,
			"COUNTERD_SOCKET=" + Socket,
			"COUNTERD_JOURNAL_DIR=" + JournalDir,
			"COUNTERD_METRICS_ADDR=" + MetricsAddr,
		},
		Volumes:      map[string]struct{}{SocketDir: {}, StateDir: {}},
		ExposedPorts: map[string]struct{}{"9464/tcp": {}},
		// counterd drains on SIGTERM (the runtimes' default too): it
		// answers what clients sent and writes every acknowledged
		// increment to PostgreSQL before it exits 0.
		StopSignal: "SIGTERM",
		Labels:     Labels(opts),
	}
}

// Labels returns the image's OCI annotations as labels.
func Labels(opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "counterd",
		"org.opencontainers.image.description": "counterd (a Redis-protocol counting sidecar that writes to PostgreSQL) and rollup",
		"org.opencontainers.image.version":     opts.Version,
	}
	set := func(k, v string) {
		if v != "" {
			l[k] = v
		}
	}
	set("org.opencontainers.image.revision", opts.Revision)
	set("org.opencontainers.image.source", opts.Source)
	set("org.opencontainers.image.licenses", opts.Licenses)
	if opts.Created.Unix() > 0 { // the epoch stands for "not known"
		l["org.opencontainers.image.created"] = opts.Created.UTC().Format(time.RFC3339)
	}
	return l
}
