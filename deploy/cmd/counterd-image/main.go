// Command counterd-image writes counterd's OCI image from two static
// binaries, without a container daemon: make image builds the binaries
// (CGO_ENABLED=0) and runs it. See deploy/image/README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/counterd/counterd/deploy/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "counterd-image:", err)
		os.Exit(1)
	}
}

// run builds the image args describe and reports what it wrote to stdout.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("counterd-image", flag.ContinueOnError)
	var (
		opts    image.Options
		created string
		layout  = fs.String("layout", "", "write the OCI image layout directory here (replaced) (required)")
		archive = fs.String("archive", "", "also write a docker-archive tar here, for docker load")
		tag     = fs.String("tag", "", "the image's name in the layout and archive (default counterd:VERSION)")
	)
	fs.StringVar(&opts.Counterd, "counterd", "", "static counterd binary (required)")
	fs.StringVar(&opts.Rollup, "rollup", "", "static rollup binary (required)")
	fs.StringVar(&opts.Version, "version", "", "org.opencontainers.image.version: make build's VERSION (required)")
	fs.StringVar(&opts.Revision, "revision", "", "org.opencontainers.image.revision: the commit")
	fs.StringVar(&opts.Source, "source", "https://github.com/counterd/counterd", "org.opencontainers.image.source")
	fs.StringVar(&opts.Licenses, "licenses", "", "org.opencontainers.image.licenses, an SPDX expression (left out when empty)")
	fs.StringVar(&opts.CACertificates, "ca-certificates", "", "CA bundle to copy to "+image.CACertificates+" (none when empty)")
	fs.StringVar(&created, "created", "", "creation time and file mtimes, Unix seconds or RFC 3339 (default: the Unix epoch, for a reproducible image)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *layout == "" {
		return errors.New("-layout is required")
	}
	var err error
	if opts.Created, err = parseTime(created); err != nil {
		return err
	}
	if *tag == "" {
		*tag = "counterd:" + tagSafe(opts.Version)
	}

	img, err := image.Build(opts)
	if err != nil {
		return err
	}
	if err := image.WriteLayout(*layout, *tag, img); err != nil {
		return err
	}
	if *archive != "" {
		if err := image.WriteArchive(*archive, *tag, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	compressed, unpacked, err := image.Sizes(img)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "counterd-image: wrote %s (OCI layout, %s, %s)\n", *layout, *tag, digest)
	if *archive != "" {
		fmt.Fprintf(stdout, "counterd-image: wrote %s (docker-archive)\n", *archive)
	}
	fmt.Fprintf(stdout, "counterd-image: %s compressed, %s unpacked\n", mb(compressed), mb(unpacked))
	return nil
}

// parseTime reads -created: empty is the Unix epoch.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-created %q: want Unix seconds or RFC 3339", s)
	}
	return t.UTC(), nil
}

// tagSafe makes a version usable as an image tag ([A-Za-z0-9_.-], not
// starting with . or -, at most 128 characters).
func tagSafe(v string) string {
	v = regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(v, "_")
	if v == "" || v[0] == '.' || v[0] == '-' {
		v = "v" + v
	}
	if len(v) > 128 {
		v = v[:128]
	}
	return v
}

// mb formats a byte count as megabytes, with the bytes.
func mb(n int64) string {
	return fmt.Sprintf("%.1f MB (%d bytes)", float64(n)/1e6, n)
}
