package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// directWait is how long a session writes replies itself before handing
// them to the connection's writer: long enough for any client that reads,
// short enough that a client still busy writing its pipeline (and so not
// reading) is never waited for. Waiting would deadlock: the client blocks
// writing to us while we block writing to it.
const directWait = 5 * time.Millisecond

// maxKeptQueue is the largest writer buffer kept for reuse.
const maxKeptQueue = 1 << 20

// outbox holds the replies of one connection that could not be written
// at once, and the goroutine that writes them, so the session goes on
// reading (and journaling) while a client that pipelines without reading
// catches up. The session stops reading only while more than half of
// Options.OutputLimit is unsent. The writer runs only while there is
// something to write, so an idle connection has no extra goroutine.
type outbox struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu; set by newSession
	queued  []byte    // replies waiting for the writer
	writing int       // bytes the writer is writing now
	spare   []byte
	err     error // the first write error; the connection is done
	running bool
	exited  chan struct{}
}

// unsent is the reply bytes not yet written. The caller holds mu.
func (o *outbox) unsent() int { return len(o.queued) + o.writing }

// held is the reply bytes not yet written, for the output limit.
func (o *outbox) held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unsent()
}

// idle reports whether nothing is waiting to be written and no write
// failed, so the session may write directly without reordering replies.
func (o *outbox) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unsent() == 0 && o.err == nil
}

// send queues b (copied) for the writer, starting it if needed.
func (o *outbox) send(c *session, conn net.Conn, b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	o.queued = append(o.queued, b...)
	if !o.running {
		o.running = true
		o.exited = make(chan struct{})
		go o.run(c, conn)
	}
	o.cond.Broadcast()
	return nil
}

// run writes queued replies until none are left or a write fails.
func (o *outbox) run(c *session, conn net.Conn) {
	defer close(o.exited)
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		if o.err != nil || len(o.queued) == 0 {
			// Caught up: a client that was slow once does not keep a
			// large buffer while it idles.
			if cap(o.spare) > maxKeptOut {
				o.spare = nil
			}
			if cap(o.queued) > maxKeptOut {
				o.queued = nil
			}
			o.running = false
			o.cond.Broadcast()
			return
		}
		buf := o.queued
		o.queued, o.spare = o.spare[:0], nil
		o.writing = len(buf)
		o.mu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
		_, err := conn.Write(buf)
		if err != nil {
			c.writeFailed(err, len(buf))
			// Disconnect now: the session may be waiting for input (a
			// client that sent its whole pipeline and reads nothing) or
			// running a command, and would not notice the error until it
			// next writes. Closing wakes its read; the runtime closes the
			// descriptor once that read has returned.
			_ = conn.Close()
		}
		o.mu.Lock()
		o.writing = 0
		if err != nil {
			o.err = fmt.Errorf("write replies: %w", err)
		}
		if cap(buf) <= maxKeptQueue {
			o.spare = buf[:0]
		}
		o.cond.Broadcast()
	}
}

// waitBelow blocks while stop says the bytes unsent are too many
// (session.readStop): the session reads nothing meanwhile, which pushes
// back on the client. It returns the write error that ended the
// connection, if any.
func (o *outbox) waitBelow(stop func(held int) bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.err == nil && stop(o.unsent()) {
		o.cond.Wait()
	}
	return o.err
}

// close waits for the writer to write what is queued (each write is
// bounded by Options.WriteTimeout) and to exit.
func (o *outbox) close() error {
	o.mu.Lock()
	ch, running := o.exited, o.running
	o.mu.Unlock()
	if running {
		<-ch
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// write sends the session's pending replies: directly when nothing is
// queued and the client takes them at once, else through the outbox. It
// empties c.out, giving a large buffer back.
func (c *session) write(conn net.Conn) error {
	if len(c.out) == 0 {
		return nil
	}
	defer c.resetOut()
	out := c.out
	if c.ob.idle() {
		_ = conn.SetWriteDeadline(time.Now().Add(directWait))
		n, err := conn.Write(out)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("write replies: %w", err)
		}
		out = out[n:] // the client is not reading right now
	}
	if err := c.ob.send(c, conn, out); err != nil {
		return err
	}
	return c.ob.waitBelow(c.readStop)
}

func (c *session) resetOut() {
	if cap(c.out) > maxKeptOut {
		c.out = make([]byte, 0, outStartSize)
	} else {
		c.out = c.out[:0]
	}
}
