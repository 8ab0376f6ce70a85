//go:build !linux

package server

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/counterd/counterd/internal/pending"
)

// ioModes are the Options.IO modes this system serves.
var ioModes = []string{IOGoroutines}

// Without epoll, Serve refuses IO "loop" at once rather than serving
// some other way than asked.
func TestLoopRefusedWithoutEpoll(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := New(pending.New(emptyStore{}, pending.Options{}), Options{IO: IOLoop})
	if err := s.Serve(context.Background(), ln); !errors.Is(err, errNoLoops) {
		t.Fatalf("Serve with IO loop: got %v; want %v", err, errNoLoops)
	}
}
