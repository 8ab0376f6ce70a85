package config

// EventLoops reports whether this system serves COUNTERD_IO=loop, its
// default: the event loops need epoll (internal/server's loop_linux.go).
const EventLoops = true
