// Command counterd-deb builds counterd's .deb for one architecture from
// binaries already built for it (scripts/release.sh runs it; see
// deploy/release), and prints the package's path.
//
//	counterd-deb -version v1.2.3 -arch amd64 -counterd DIR/counterd -rollup DIR/rollup -out dist
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/counterd/counterd/deploy/release"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "counterd-deb:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, stdout io.Writer) (err error) {
	fl := flag.NewFlagSet("counterd-deb", flag.ContinueOnError)
	var d release.Deb
	fl.StringVar(&d.Version, "version", "", "version as make stamps it (git describe --always --dirty)")
	fl.StringVar(&d.Arch, "arch", "", "GOARCH of the binaries: amd64 or arm64")
	fl.StringVar(&d.Counterd, "counterd", "", "path of the counterd binary")
	fl.StringVar(&d.Rollup, "rollup", "", "path of the rollup binary")
	fl.StringVar(&d.Maintainer, "maintainer", "counterd maintainers <maintainers@counterd.invalid>", "the package's Maintainer field")
	out := fl.String("out", ".", "directory to write the package into")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if d.Version == "" || d.Arch == "" || d.Counterd == "" || d.Rollup == "" {
		return errors.New("-version, -arch, -counterd and -rollup are required")
	}
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		d.MTime = time.Unix(sec, 0).UTC()
	}
	name, err := d.FileName()
	if err != nil {
		return err
	}
	path := filepath.Join(*out, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if err := d.Write(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintln(stdout, path)
	return nil
}
