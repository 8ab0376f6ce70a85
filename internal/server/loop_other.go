//go:build !linux

package server

import (
	"context"
	"errors"
	"net"
)

// errNoLoops refuses Options.IO "loop" where there is no epoll. The
// daemon's configuration refuses COUNTERD_IO=loop there first.
var errNoLoops = errors.New(`IO "loop" needs epoll, which only Linux has; use "goroutines"`)

// loops stands in for the event loops: startLoops refuses to start them,
// so Server.loops stays nil and admit serves every connection with
// serveConn. The methods exist only for the code that checks for loops.
type loops struct{}

// eloop is the type of Server.loopHook, which no loop calls here.
type eloop struct{}

func (s *Server) startLoops(context.Context) (*loops, error) { return nil, errNoLoops }

func (*loops) add(*Server, net.Conn) {
	panic("BUG: a connection handed to event loops that never start")
}
func (*loops) drain()    {}
func (*loops) closeAll() {}
func (*loops) stop()     {}
