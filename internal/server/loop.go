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
// Options.Loops says otherwise: half of the cores the runtime found
// (its default GOMAXPROCS, before Oversubscribe), at least one. The
// other half is left to the flusher, the Go runtime and the processes a
// sidecar shares its machine with (the app, often PostgreSQL). Measured
// on 2 cores with redis-benchmark and PostgreSQL on the same machine, one
// loop took 12–13 µs of CPU per unpipelined INCR and two loops 20–33 µs,
// and served more requests per second at -P 1 and -P 16 (see Event loops
// in docs/performance.md): two loops contending for the core the client
// leaves each handle fewer events per epoll_wait, and wake each other's
// threads.
func DefaultLoops() int { return max(1, cores/2) }

// cores is the runtime's GOMAXPROCS when the process started: the CPUs it
// may use (the cgroup's limit, if lower), or the GOMAXPROCS setting.
var cores = runtime.GOMAXPROCS(0)

// Oversubscribe gives the Go scheduler twice as many Ps as cores and
// returns how many, unless the GOMAXPROCS setting (procs, "" when unset)
// chose already; the daemon calls it once, at start.
//
// With one P per core an event loop that returns from epoll_wait finds
// both Ps busy while a round is prepared (the writers sort, encode and
// allocate; the garbage collector marks what they allocated) and waits in
// the run queue until the scheduler's 10 ms preemption frees one; on two
// cores at 50,000 unpipelined INCR/s that put p50 at 286-412 µs. With a
// spare P the loop's thread runs at once and the kernel shares the cores
// among threads as it does between processes, favouring the one that
// just woke: p50 93-158 µs in the same session, p99 lower in 3 of 3
// alternated pairs (docs/performance.md, "Latency and stalls"). Setting
// GOMAXPROCS this way, as setting it in the environment, stops the
// runtime from following later changes of a cgroup's CPU limit: a
// daemon whose limit changes is restarted to follow it.
func Oversubscribe(procs string) int {
	if procs != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(2 * cores)
	return 2 * cores
}

// hasFD reports whether c is a socket the loops can serve (net.Pipe, in
// tests, is not).
func hasFD(c net.Conn) bool {
	_, ok := c.(syscall.Conn)
	return ok
}
