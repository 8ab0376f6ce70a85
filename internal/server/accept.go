package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// Accept retry delays, as net/http's: running out of file descriptors or
// memory is usually passing, and exiting would drop every connection.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// errMaxClients is Redis's reply past maxclients.
const errMaxClients = "ERR max number of clients reached"

// acceptLoop accepts connections until ctx ends (nil) or the listener is
// closed by someone else (an error). Every other accept error is logged,
// counted and retried after a capped backoff.
func (s *Server) acceptLoop(ctx, connCtx context.Context, ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept: %w", err)
			}
			delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
			s.m.acceptErrors.Inc()
			s.opts.Logger.Warn("accept failed; retrying", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		delay = 0
		s.admit(connCtx, c)
	}
}

// admit starts serving c, or refuses it when the server is full or
// shutting down.
func (s *Server) admit(ctx context.Context, c net.Conn) {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		c.Close()
		return
	case len(s.conns)+s.nloop >= s.opts.MaxConns:
		s.mu.Unlock()
		s.m.refused.Inc()
		// At once, not on a goroutine: a flood of refused clients then
		// holds one descriptor at a time, never the ones kept in
		// reserve for the journal and PostgreSQL.
		refuse(c)
		return
	}
	if s.loops != nil && hasFD(c) {
		s.nloop++
		s.wg.Add(1)
		s.mu.Unlock()
		s.loops.add(s, c)
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(ctx, c)
}

// refuseWait bounds writing the refusal. A new connection has an empty
// socket buffer, so the write does not wait in practice.
const refuseWait = 100 * time.Millisecond

// refuse tells a client past MaxConns why, as Redis does, and closes it.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(refuseWait))
	_, _ = c.Write(resp.AppendError(nil, errMaxClients))
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	if err := s.session(ctx, c); err != nil {
		s.opts.Logger.Debug("connection ended", "err", err)
	}
}
