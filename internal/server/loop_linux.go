package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// Event loops (Options.IO "loop"). Options.Loops loops each own an epoll
// instance and the connections the accept goroutine hands them round
// robin. One pass of a loop reads every readable connection once, parses
// the increments each has buffered, accepts all of them with ONE
// AddGroup call on the loop's own pending.Shard (one journal record, one
// write(2); rounds are cut between two of its passes), then
// appends every connection's replies and writes them: Redis's beforeSleep
// order, journal then replies. See doc.go for why the loop is ours and not
// gnet's.
//
// A connection that reaches any other command stops there for the pass.
// Commands that cannot wait on anything (PING, HELLO, CLIENT, queueing
// inside MULTI...) run on the loop after the pass's group is accepted;
// those the command table marks blocking (GET, FLUSH, EXEC, TAKE's slow
// path, SET...) and every
// confirmation wait (COUNTERD_FSYNC=always, COUNTERD_ACK=commit) runs on
// a goroutine while the loop neither reads nor parses that connection,
// which then comes back through the loop's inbox; replies stay in order.

// loopTick bounds how long a loop sleeps, so write timeouts are noticed.
const loopTick = 250 * time.Millisecond

// loops are the event loops of one Serve call.
type loops struct {
	ls   []*eloop
	next atomic.Uint64
	wg   sync.WaitGroup
}

// loopCount is how many loops to start.
func (o Options) loopCount() int {
	if o.Loops > 0 {
		return o.Loops
	}
	return DefaultLoops()
}

// startLoops starts Options.Loops loops serving connections under ctx.
func (s *Server) startLoops(ctx context.Context) (*loops, error) {
	ls := &loops{}
	n := s.opts.loopCount()
	for i := range n {
		l, err := newLoop(s, ctx, s.buf.Shard(i))
		if err != nil {
			ls.stop()
			return nil, err
		}
		ls.ls = append(ls.ls, l)
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			l.run()
		}()
	}
	return ls, nil
}

// add hands c, admitted and counted in Server.nloop, to the next loop.
func (ls *loops) add(s *Server, c net.Conn) {
	sess := s.newSession(c)
	fd, err := dupFD(c)
	if err != nil {
		// Out of descriptors, as an accept can be: counted the same way,
		// and the client is told, as one past MaxConns.
		s.m.acceptErrors.Inc()
		s.opts.Logger.Warn("cannot serve connection", "err", err)
		refuse(c)
		s.removeSession(sess)
		s.loopConnDone()
		return
	}
	c.Close()
	sess.conn.fd = fd
	l := ls.ls[ls.next.Add(1)%uint64(len(ls.ls))]
	l.send(&lconn{fd: fd, sess: sess, fresh: true})
}

// dupFD returns a non-blocking close-on-exec copy of c's descriptor, owned
// by the caller, so the runtime's poller and the loop never share one.
func dupFD(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.New("connection has no descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("connection descriptor: %w", err)
	}
	fd := -1
	var derr error
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, fmt.Errorf("connection descriptor: %w", err)
	}
	if derr != nil {
		return -1, fmt.Errorf("dup connection: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("non-blocking connection: %w", err)
	}
	return fd, nil
}

// drain makes every loop answer what it has read and close its
// connections.
func (ls *loops) drain() {
	for _, l := range ls.ls {
		l.draining.Store(true)
		l.wake()
	}
}

// closeAll makes every loop close its connections at once.
func (ls *loops) closeAll() {
	for _, l := range ls.ls {
		l.hard.Store(true)
		l.wake()
	}
}

// stop ends the loops, once their connections are closed, and waits.
func (ls *loops) stop() {
	for _, l := range ls.ls {
		l.exit.Store(true)
		l.hard.Store(true)
		l.wake()
	}
	ls.wg.Wait()
}

// loopConnDone accounts for the end of a connection served by a loop.
func (s *Server) loopConnDone() {
	s.mu.Lock()
	s.nloop--
	s.mu.Unlock()
	s.wg.Done()
}

// loop is one event loop: an epoll instance and its connections. Only
// its goroutine touches a connection, except one handed to a goroutine
// (busy) until it comes back through the inbox.
type eloop struct {
	s     *Server
	ctx   context.Context
	shard pending.Shard // the loop's own part of the accept path
	epfd  int
	evfd  int // eventfd: wakes epoll_wait for the inbox and shutdown

	mu    sync.Mutex
	inbox []*lconn // new connections, and busy ones whose command ended

	draining, hard, exit atomic.Bool
	drainSeen            bool // the loop has queued every connection for its last pass

	conns  map[int]*lconn
	events [256]unix.EpollEvent
	ready  []*lconn // connections with work for the next pass
	work   []*lconn // the pass's connections
	batch  []*lconn // the pass's connections with a group
	items  []change.Change
	errs   []error
	// hook, when set (tests), runs before each wait.
	hook func(*eloop)
}

func newLoop(s *Server, ctx context.Context, shard pending.Shard) (*eloop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, fmt.Errorf("epoll add eventfd: %w", err)
	}
	return &eloop{s: s, ctx: ctx, shard: shard, epfd: epfd, evfd: evfd, conns: map[int]*lconn{}, hook: s.loopHook}, nil
}

// send queues c for the loop's goroutine and wakes it.
func (l *eloop) send(c *lconn) {
	l.mu.Lock()
	l.inbox = append(l.inbox, c)
	l.mu.Unlock()
	l.wake()
}

func (l *eloop) wake() {
	var one = [8]byte{1}
	_, _ = unix.Write(l.evfd, one[:])
}

// run serves until stop, then closes what is left.
func (l *eloop) run() {
	defer func() {
		for _, c := range l.conns {
			l.close(c)
		}
		unix.Close(l.epfd)
		unix.Close(l.evfd)
	}()
	lastTick := time.Now()
	for {
		if l.hook != nil {
			l.hook(l)
		}
		timeout := int(loopTick / time.Millisecond)
		if len(l.ready) > 0 {
			timeout = 0
		}
		n, err := unix.EpollWait(l.epfd, l.events[:], timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.s.opts.Logger.Error("epoll_wait failed; closing the loop's connections", "err", err)
			return
		}
		l.handle(l.events[:max(n, 0)])
		l.takeInbox()
		if l.stopping() {
			return
		}
		l.pass()
		if now := time.Now(); now.Sub(lastTick) >= loopTick {
			lastTick = now
			l.writeTimeouts(now)
		}
	}
}

// handle takes what epoll reported: input to read (the next pass), room
// for replies waiting, or the eventfd's wake-up.
func (l *eloop) handle(events []unix.EpollEvent) {
	for _, ev := range events {
		if int(ev.Fd) == l.evfd {
			var b [8]byte
			_, _ = unix.Read(l.evfd, b[:])
			continue
		}
		c := l.conns[int(ev.Fd)]
		if c == nil {
			continue
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			c.readable = true
			c.hup = c.hup || ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
			l.mark(c)
		}
		if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 && len(c.pend) > 0 {
			l.flushPend(c)
		}
	}
}

// stopping acts on shutdown: closeAll and stop close every connection not
// busy (stop also ends the loop: stopping reports true); drain queues
// each connection once more to answer what it read, then close.
func (l *eloop) stopping() bool {
	if l.hard.Load() {
		for _, c := range l.conns {
			if !c.busy {
				l.close(c)
			}
		}
		if l.exit.Load() {
			return true
		}
	}
	if l.draining.Load() && !l.drainSeen {
		l.drainSeen = true
		for _, c := range l.conns {
			l.mark(c) // each answers what it read, then closes
		}
	}
	return false
}

// mark queues c for the next pass.
func (l *eloop) mark(c *lconn) {
	if !c.queued {
		c.queued = true
		l.ready = append(l.ready, c)
	}
}

// takeInbox registers new connections and takes back busy ones.
func (l *eloop) takeInbox() {
	l.mu.Lock()
	in := l.inbox
	l.inbox = nil
	l.mu.Unlock()
	for _, c := range in {
		if c.fresh {
			c.fresh = false
			c.rd = newFDReader(c)
			ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
			if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
				l.s.opts.Logger.Warn("cannot serve connection", "err", fmt.Errorf("epoll add: %w", err))
				_, _ = writeFD(c.fd, resp.AppendError(nil, errMaxClients))
				l.conns[c.fd] = c
				l.close(c)
				continue
			}
			l.conns[c.fd] = c
			c.readable = true // data may have arrived before registration
		} else {
			c.busy = false
			if c.doomed {
				l.close(c)
				continue
			}
			if !l.back(c) {
				continue
			}
		}
		l.mark(c)
	}
}
