package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/resp"
)

// Unique counts (change.Unique): PFADD, PFCOUNT and PFMERGE. A key's
// members are a keyspace of their own: GET of the key reads a counter.
//
// PFADD journals each member as its hash, one change each, in one journal
// record, before it replies. Adding a member twice changes nothing, so a
// PFADD that failed part way is safe to send again.

// uniqueCommands are the unique counts' entries of the command table.
var uniqueCommands = []*cmdSpec{
	{name: "pfadd", arity: -2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "INSERT"}, acl: []string{"@write", "@hyperloglog", "@fast"},
		group: "hyperloglog", since: "2.8.9", complexity: "O(1) to add every element.",
		summary: "Adds members to a key's HyperLogLog sketch once journaled; replies 1 if this daemon's sketch of the key changed or the key is new to it, else 0.",
		run:     onServer((*Server).pfadd), fast: (*session).pfaddFast, blocking: true, refusal: notInMulti("pfadd"),
		groupKind: change.Unique, groupReply: (*Server).memberReply},
	{name: "pfcount", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@hyperloglog", "@slow"},
		group: "hyperloglog", since: "2.8.9", complexity: "O(N) where N is the number of keys; with SINCE, the number of keys and buckets",
		summary: "Returns the estimated number of distinct members of the union of the keys' sketches (exact up to 1,280), stored and pending; with SINCE span, of the union of the keys' time-bucket sketches covering the span.",
		run:     onServer((*Server).pfcount), blocking: true, refusal: notInMulti("pfcount")},
	{name: "pfmerge", arity: -2, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "INSERT"}, acl: []string{"@write", "@hyperloglog", "@slow"},
		group: "hyperloglog", since: "2.8.9", complexity: "O(N) to merge N HyperLogLogs, but with high constant times.",
		summary: "Adds the members of the source keys' sketches (stored and pending) to the destination key's; replies OK once journaled.",
		run:     onServer((*Server).pfmerge), blocking: true, refusal: notInMulti("pfmerge")},
}

// maxViewKeys bounds the keys whose sketch this daemon keeps to answer
// PFADD's "changed" (a tracker takes at most 16 KiB, its exact set or
// its registers, so at most 64 MiB): past it the view starts afresh, and a key it forgot answers 1
// once more, as a key new to this daemon does.
const maxViewKeys = 4096

// uniqueView is this daemon's sketch of each key it added members to since
// it started: PFADD's reply says whether it changed. It keeps an
// hll.Tracker per key, which answers as the sketch would but looks a
// member up with one probe instead of a binary search of the exact form.
//
// A member enters the sketch only once its PFADD is accepted (journaled:
// answered with its reply, or -TIMEOUT under an acknowledgement mode that
// waits), never when it is read: a PFADD refused (-BUSY, a full disk)
// adds nothing to the key, so the same member sent again must answer 1.
//
// It also marks, in each key's sketch, the members whose PFADD was
// accepted and confirmed (journaled, and fsynced or committed when the
// acknowledgement mode waits for that; hll.Tracker.Confirm keeps them as
// a set of their own): a member already confirmed changes no sketch this
// daemon writes (a union takes it once), so pfaddFast answers 0 and
// records nothing for it, as redis-server leaves its append-only file
// alone for such a PFADD.
type uniqueView struct {
	mu    sync.Mutex
	byKey map[string]*hll.Tracker
}

// sketch returns key's sketch, made (with a copy of key) if the view has
// none, and whether it was made. The caller holds v.mu.
func (v *uniqueView) sketch(key string) (*hll.Tracker, bool) {
	if sk, ok := v.byKey[key]; ok {
		return sk, false
	}
	if v.byKey == nil || len(v.byKey) >= maxViewKeys {
		v.byKey = make(map[string]*hll.Tracker)
	}
	sk := hll.NewTracker()
	v.byKey[strings.Clone(key)] = sk
	return sk, true
}

// add adds hashes, accepted for key, to key's sketch and reports whether
// the key was new to the view or its sketch changed.
func (v *uniqueView) add(key string, hashes ...uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	sk, changed := v.sketch(key)
	for _, h := range hashes {
		changed = sk.Add(h) || changed
	}
	return changed
}

// known reports whether h is among key's confirmed members (see
// pfaddFast). It adds nothing: the PFADD asking may yet be refused.
func (v *uniqueView) known(key string, h uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	sk := v.byKey[key]
	return sk != nil && sk.Confirmed(h)
}

// accepted adds h, whose PFADD key member was accepted, to key's sketch,
// marks it confirmed if confirmed says so, and reports, as add, whether
// the key was new to the view or its sketch changed: PFADD's reply.
func (v *uniqueView) accepted(key string, h uint64, confirmed bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	sk, made := v.sketch(key)
	changed := sk.Add(h) || made
	if confirmed {
		sk.Confirm(h)
	}
	return changed
}

// pfaddFast adds PFADD key member, the common form, to the session's
// group, as INCR's fast path does, so a pipeline's PFADDs and increments
// are one journal append and no goroutine switch. The member is journaled
// unless the view has it confirmed; its reply is decided once the group
// is accepted (groupReplies), in the group's order, so a refused PFADD
// leaves the view as it was. A confirmed member has Delta 0: it records
// nothing and replies 0. Other forms are left to pfadd.
func (c *session) pfaddFast(spec *cmdSpec, args [][]byte) bool {
	if len(args) != 3 || checkKey(args[1]) != nil {
		return false
	}
	h := hll.Hash(args[2])
	// The key aliases the read buffer until the group ends: AddGroup
	// copies it, and the view copies it when it keeps it.
	key := unsafe.String(unsafe.SliceData(args[1]), len(args[1]))
	ch := change.Member(key, h)
	// A key with time windows is never skipped: its member is new to
	// each bucket.
	if c.windowless(key) && c.s.uniques.known(key, h) {
		// Confirmed before: Delta 0 records nothing (an idle change)
		// and replies 0.
		ch.Delta = 0
		c.s.m.uniquesKnown.Inc()
	}
	c.conn.lastCmd.Store(spec)
	c.group = append(c.group, ch)
	return true
}

// pfadd answers PFADD key member [member ...]: 1 if this daemon's sketch of
// the key changed or the key is new to it, else 0, once the members are
// journaled.
func (s *Server) pfadd(ctx context.Context, out []byte, args [][]byte) []byte {
	if err := checkKey(args[1]); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	key := string(args[1])
	hashes := make([]uint64, len(args)-2)
	items := make([]change.Change, len(hashes))
	for i, m := range args[2:] {
		hashes[i] = hll.Hash(m)
		items[i] = change.Member(key, hashes[i])
	}
	msg, in := "", true
	if len(items) > 0 {
		msg, in = s.journalMembers(ctx, items)
	}
	// Only members the key has enter the view (see uniqueView).
	changed := in && s.uniques.add(key, hashes...)
	switch {
	case msg != "":
		return resp.AppendError(out, msg)
	case changed:
		return resp.AppendInt(out, 1)
	}
	return resp.AppendInt(out, 0)
}

// memberReply is the reply of PFADD key member, its group accepted: 1 if
// this daemon's view of the key changed, else 0 (always 0 for a member
// confirmed before, which recorded nothing: Delta 0). Only now does the
// member enter the view, and a later PFADD of it may record nothing
// (pfaddFast). Accepted but not confirmed (confirmed false), it is in the
// key, so a retry answers 0, but it is journaled again.
func (s *Server) memberReply(it change.Change, confirmed bool) (int64, string) {
	if it.Delta == 0 || !s.uniques.accepted(it.Key, uint64(it.Bucket), confirmed) {
		return 0, ""
	}
	return 1, ""
}

// journalMembers accepts items as one group and waits for what the
// acknowledgement mode promises; it returns the error reply, "" when all
// were accepted and confirmed, and whether all were accepted (journaled,
// confirmed or not).
func (s *Server) journalMembers(ctx context.Context, items []change.Change) (msg string, in bool) {
	if need, most := s.membersNeed(items), s.buf.MaxPendingKeys(); need > most {
		// -BUSY says retry; this can never fit, however idle the daemon.
		s.m.commandErrors.Inc()
		return fmt.Sprintf("ERR %d members need %d pending keys, more than COUNTERD_MAX_PENDING_KEYS (%d) allows at once: send fewer members a command (nothing was added)", len(items), need, most), false
	}
	errs := make([]error, len(items))
	t, err := s.buf.AddGroup(items, errs)
	if err == nil {
		err = s.confirm(ctx, t)
	}
	refused := slices.ContainsFunc(errs, func(e error) bool { return e != nil })
	if err != nil {
		s.m.commandErrors.Inc()
		return groupError(err), accepted(err) && !refused
	}
	for _, e := range errs {
		if e != nil {
			s.m.commandErrors.Inc()
			return itemError(e) + " (members before it may be added; adding them again is harmless)", false
		}
	}
	return "", true
}

// union returns the sketch of the union of keys' members: what the store
// has with what this daemon holds.
func (s *Server) union(ctx context.Context, keys []string) (*hll.Sketch, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	stored, held, err := s.buf.Members(ctx, change.Unique, keys)
	if err != nil {
		return nil, err
	}
	u := hll.NewDefault()
	if err := addSketches(u, keys, stored, held); err != nil {
		return nil, err
	}
	return u, nil
}

// addSketches unions into u each key's stored sketch (nil: none) and the
// members held for it.
func addSketches(u *hll.Sketch, keys []string, stored [][]byte, held [][]int64) error {
	for i, b := range stored {
		if b != nil {
			sk, err := hll.Parse(b)
			if err != nil {
				return fmt.Errorf("stored sketch of %q: %w", keys[i], err)
			}
			if err := u.Union(sk); err != nil {
				return fmt.Errorf("stored sketch of %q: %w", keys[i], err)
			}
		}
		for _, h := range held[i] {
			u.Add(uint64(h))
		}
	}
	return nil
}

// pfcount answers PFCOUNT key [key ...]: the estimated number of distinct
// members of the union of the keys (hll.Sketch.Estimate: exact while the
// union holds at most 1,280 members); and PFCOUNT key [key ...] SINCE
// span (uniques_since.go).
func (s *Server) pfcount(ctx context.Context, out []byte, args [][]byte) []byte {
	if n := len(args); n >= 4 && is(args[n-2], "SINCE") {
		return s.pfcountSince(ctx, out, args[1:n-2], args[n-1])
	}
	keys, msg := keyNames(args[1:])
	if msg != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, msg)
	}
	u, err := s.union(ctx, keys)
	if err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, "ERR read unique members: "+err.Error())
	}
	return resp.AppendInt(out, int64(u.Estimate()))
}

// pfmerge answers PFMERGE dest [src ...]: dest gets the members of every
// source and keeps its own. The sources' union is read as PFCOUNT reads
// it and journaled into dest as members (hll.Sketch.Members: the hashes
// of an exact union, else one hash per register that sets it, plus hashes
// that set none but make dest switch to registers), so dest's sketch
// becomes exactly its union with the sources'.
func (s *Server) pfmerge(ctx context.Context, out []byte, args [][]byte) []byte {
	keys, msg := keyNames(args[1:])
	if msg != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, msg)
	}
	var hashes []uint64
	if len(keys) > 1 {
		u, err := s.union(ctx, keys[1:])
		if err != nil {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, "ERR read unique members: "+err.Error())
		}
		hashes = u.Members()
	}
	if len(hashes) > 0 {
		items := make([]change.Change, len(hashes))
		for i, h := range hashes {
			items[i] = change.Member(keys[0], h)
		}
		msg, in := s.journalMembers(ctx, items)
		if !in {
			return resp.AppendError(out, msg)
		}
		// Accepted: dest has them, confirmed or not.
		s.uniques.add(keys[0], hashes...)
		if msg != "" {
			return resp.AppendError(out, msg)
		}
		return resp.AppendOK(out)
	}
	s.uniques.add(keys[0])
	return resp.AppendOK(out)
}

// windowless reports whether key has no time windows (COUNTERD_WINDOWS),
// so a member confirmed for it is in every sketch PFADD writes.
func (c *session) windowless(key string) bool {
	w := c.s.buf.Windows()
	return w == nil || w.Match(key) == nil
}

// membersNeed is how many pending keys items (members of one key) take
// at most when none is pending yet: a cell each distinct member, and one
// each bucket of each width its key's windows have.
func (s *Server) membersNeed(items []change.Change) int64 {
	if int64(len(items)) <= s.buf.MaxPendingKeys()/4 {
		return int64(len(items)) // the common case: far from the limit
	}
	distinct := make(map[int64]struct{}, len(items))
	for _, it := range items {
		distinct[it.Bucket] = struct{}{}
	}
	per := int64(1)
	if w := s.buf.Windows(); w != nil && len(items) > 0 {
		per += int64(len(w.Match(items[0].Key)))
	}
	return int64(len(distinct)) * per
}
