package server

import (
	"net"
	"runtime"
	"syscall"
)

// Event loops (Options.IO "loop") need epoll, so they live in
// loop_linux.go and loop_pass_linux.go, as Redis's ae.c picks its
// multiplexer per system. Elsewhere (loop_other.go) Serve refuses IO
// "loop" and every connection is served by its own goroutine. What
// follows is what both need.

// DefaultLoops is how many event loops serve connections unless
// Options.Loops says otherwise: half of GOMAXPROCS, at least one. The
// other half is left to the flusher, the Go runtime and the processes a
// sidecar shares its machine with (the app, often PostgreSQL). Measured
// on 2 cores with redis-benchmark and PostgreSQL on the same machine, one
// loop took 12–13 µs of CPU per unpipelined INCR and two loops 20–33 µs,
// and served more requests per second at -P 1 and -P 16 (see Event loops
// in docs/performance.md): two loops contending for the core the client
// leaves each handle fewer events per epoll_wait, and wake each other's
// threads.
func DefaultLoops() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// hasFD reports whether c is a socket the loops can serve (net.Pipe, in
// tests, is not).
func hasFD(c net.Conn) bool {
	_, ok := c.(syscall.Conn)
	return ok
}
