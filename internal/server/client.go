package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// connState is what CLIENT, HELLO and AUTH know about one connection.
type connState struct {
	id       int64
	resp3    bool // speaks RESP3 since HELLO 3; written under mu
	needAuth bool // COUNTERD_PASSWORD is set and not yet given
	fd       int
	addr     string
	flags    string // "U" for a Unix socket, "N" otherwise, as Redis
	created  time.Time

	lastRead atomic.Int64            // unix nanoseconds of the last read
	lastCmd  atomic.Pointer[cmdSpec] // the last command, for CLIENT LIST

	// mu guards what CLIENT LIST on another connection reads; the
	// connection's own goroutine is the only writer.
	mu              sync.Mutex
	name            string
	libName, libVer string
}

// registry numbers connections and lists them for CLIENT LIST and INFO.
type registry struct {
	now     func() time.Time // the clock; tests replace it
	started time.Time
	nextID  atomic.Int64
	total   atomic.Int64 // connections ever served (INFO total_connections_received)

	mu       sync.Mutex
	sessions map[int64]*session
	socket   string // the listener's address, once Serve runs
}

func (r *registry) init(now func() time.Time) {
	r.now = now
	r.started = now()
	r.sessions = map[int64]*session{}
}

// newSession registers a session for conn; call removeSession when it ends.
func (s *Server) newSession(conn net.Conn) *session {
	id := s.reg.nextID.Add(1)
	s.reg.total.Add(1)
	sess := &session{s: s, out: make([]byte, 0, outStartSize)}
	sess.ob.cond.L = &sess.ob.mu
	st := &sess.conn
	st.id, st.fd, st.flags = id, fdOf(conn), "N"
	st.needAuth = s.opts.Password != ""
	st.created = s.reg.now()
	st.lastRead.Store(st.created.UnixNano())
	if a := conn.LocalAddr(); a != nil {
		st.addr = a.String() + ":0"
		if a.Network() == "unix" {
			st.flags = "U"
		}
	}
	s.reg.mu.Lock()
	s.reg.sessions[id] = sess
	s.reg.mu.Unlock()
	return sess
}

func (s *Server) removeSession(sess *session) {
	s.reg.mu.Lock()
	delete(s.reg.sessions, sess.conn.id)
	s.reg.mu.Unlock()
}

// touch records a read, for CLIENT LIST's idle.
func (st *connState) touch(t time.Time) { st.lastRead.Store(t.UnixNano()) }

func fdOf(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// CLIENT subcommands.

func (c *session) clientID(context.Context, [][]byte) error {
	c.out = resp.AppendInt(c.out, c.conn.id)
	return nil
}

func (c *session) clientGetName(context.Context, [][]byte) error {
	st := &c.conn
	st.mu.Lock()
	name := st.name
	st.mu.Unlock()
	if name == "" {
		c.out = appendNull(c.out, st.resp3)
		return nil
	}
	c.out = resp.AppendBulkString(c.out, name)
	return nil
}

func (c *session) clientSetName(_ context.Context, args [][]byte) error {
	if !validName(args[2]) {
		c.fail(errBadName)
		return nil
	}
	st := &c.conn
	st.mu.Lock()
	st.name = string(args[2])
	st.mu.Unlock()
	c.out = resp.AppendOK(c.out)
	return nil
}

func (c *session) clientInfo(context.Context, [][]byte) error {
	c.out = appendText(c.out, c.conn.resp3, c.s.clientLine(c)+"\n")
	return nil
}

// clientTracking refuses client-side caching; turning it off is fine.
func (c *session) clientTracking(_ context.Context, args [][]byte) error {
	if len(args) == 3 && is(args[2], "OFF") {
		c.out = resp.AppendOK(c.out) // nothing to turn off
		return nil
	}
	c.fail("ERR client-side caching is not supported: counterd's counts change without notice " +
		"and it sends no invalidations, so cached values would go stale; disable client-side caching (client tracking) for counterd")
	return nil
}

// errBadName is Redis's reply to a client name it refuses.
const errBadName = "ERR Client names cannot contain spaces, newlines or special characters."

// validName reports whether b is a name Redis accepts: printable ASCII
// without spaces. An empty name clears the name.
func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// clientSetInfo answers CLIENT SETINFO LIB-NAME|LIB-VER value.
func (c *session) clientSetInfo(_ context.Context, args [][]byte) error {
	attr, val := args[2], args[3]
	st := &c.conn
	var dst *string
	switch {
	case is(attr, "LIB-NAME"):
		dst = &st.libName
	case is(attr, "LIB-VER"):
		dst = &st.libVer
	default:
		c.fail(fmt.Sprintf("ERR Unrecognized option '%s'", clip(attr)))
		return nil
	}
	if !validName(val) {
		c.fail(fmt.Sprintf("ERR %s cannot contain spaces, newlines or special characters.", strings.ToLower(string(attr))))
		return nil
	}
	st.mu.Lock()
	*dst = string(val)
	st.mu.Unlock()
	c.out = resp.AppendOK(c.out)
	return nil
}

// clientList answers CLIENT LIST [TYPE type] [ID id ...].
func (c *session) clientList(_ context.Context, args [][]byte) error {
	ids, normal, msg := clientListOptions(args[2:])
	if msg != "" {
		c.fail(msg)
		return nil
	}
	var b strings.Builder
	if normal {
		for _, sess := range c.s.sessions(ids) {
			b.WriteString(c.s.clientLine(sess))
			b.WriteByte('\n')
		}
	}
	c.out = appendText(c.out, c.conn.resp3, b.String())
	return nil
}

// clientListOptions parses CLIENT LIST's options: the ids asked for (all
// when none), whether normal clients (the only kind counterd has) are
// asked for, or the error reply.
func clientListOptions(opts [][]byte) (ids []int64, normal bool, msg string) {
	normal = true
	for i := 0; i < len(opts); i++ {
		switch {
		case is(opts[i], "TYPE") && i+1 < len(opts):
			t := opts[i+1]
			switch {
			case is(t, "normal"):
			case is(t, "master"), is(t, "replica"), is(t, "slave"), is(t, "pubsub"):
				normal = false
			default:
				return nil, false, fmt.Sprintf("ERR Unknown client type '%s'", clip(t))
			}
			i++
		case is(opts[i], "ID") && i+1 < len(opts):
			for _, a := range opts[i+1:] {
				id, ok := resp.ParseInt(a)
				if !ok || id < 1 {
					return nil, false, "ERR Invalid client ID"
				}
				ids = append(ids, id)
			}
			i = len(opts)
		default:
			return nil, false, "ERR syntax error"
		}
	}
	return ids, normal, ""
}

// sessions returns the open sessions with the given ids (all when ids is
// empty), by id.
func (s *Server) sessions(ids []int64) []*session {
	s.reg.mu.Lock()
	out := make([]*session, 0, len(s.reg.sessions))
	for id, sess := range s.reg.sessions {
		if len(ids) == 0 || slices.Contains(ids, id) {
			out = append(out, sess)
		}
	}
	s.reg.mu.Unlock()
	slices.SortFunc(out, func(a, b *session) int { return int(a.conn.id - b.conn.id) })
	return out
}

// clientLine is sess's line of CLIENT LIST, with every field of Redis
// 7.2's line in its order (clients such as redis-py 4 parse some of them
// as integers and fail without them): the buffer and memory fields
// counterd does not track read 0, multi -1 and events r.
func (s *Server) clientLine(sess *session) string {
	st := &sess.conn
	now := s.reg.now()
	st.mu.Lock()
	name, libName, libVer, proto := st.name, st.libName, st.libVer, 2
	if st.resp3 {
		proto = 3
	}
	st.mu.Unlock()
	cmd := "NULL"
	if last := st.lastCmd.Load(); last != nil {
		cmd = last.name
	}
	idle := now.Sub(time.Unix(0, st.lastRead.Load()))
	var b strings.Builder
	fmt.Fprintf(&b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=0 psub=0 ssub=0",
		st.id, st.addr, st.addr, st.fd, name, int64(now.Sub(st.created).Seconds()), max(0, int64(idle.Seconds())), st.flags)
	b.WriteString(" multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r")
	b.WriteString(" cmd=" + cmd + " user=default redir=-1 resp=" + strconv.Itoa(proto))
	b.WriteString(" lib-name=" + libName + " lib-ver=" + libVer)
	return b.String()
}

func (r *registry) setSocket(addr string) {
	r.mu.Lock()
	r.socket = addr
	r.mu.Unlock()
}
