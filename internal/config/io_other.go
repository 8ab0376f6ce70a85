//go:build !linux

package config

// EventLoops reports whether this system serves COUNTERD_IO=loop: the
// event loops need epoll, which only Linux has, so here COUNTERD_IO
// defaults to goroutines and loop is refused.
const EventLoops = false
