package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout writes img as the only image of a fresh OCI image layout
// directory at dir (replacing what was there), its index entry annotated
// with tag as org.opencontainers.image.ref.name, so
// `podman load -i dir` or `skopeo copy oci:dir:tag ...` finds it.
func WriteLayout(dir, tag string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the only image of the OCI image layout at dir.
func ReadLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image: layout %s holds %d manifests; want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// WriteArchive writes img as a docker-archive tar at file, tagged ref
// (such as counterd:v1.2.3), for `docker load` and `podman load`.
func WriteArchive(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("image: archive %s: %w", file, err)
	}
	return nil
}

// Sizes returns what img costs to ship (its compressed layers' bytes) and
// to hold unpacked (its regular files' bytes).
func Sizes(img v1.Image) (compressed, unpacked int64, err error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, fmt.Errorf("image: layers: %w", err)
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, 0, fmt.Errorf("image: layer size: %w", err)
		}
		compressed += n
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, fmt.Errorf("image: layer: %w", err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return 0, 0, fmt.Errorf("image: layer: %w", err)
			}
			if h.Typeflag == tar.TypeReg {
				unpacked += h.Size
			}
		}
		rc.Close()
	}
	return compressed, unpacked, nil
}
