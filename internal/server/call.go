package server

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
)

// A command a transaction may hold is described once, by its parser
// (cmdSpec.parse): the changes it makes, the keys it reads and how it
// replies. Run at once, it reads, accepts its changes and replies
// (runCall); queued inside MULTI, EXEC runs the same description for
// every queued command with one all-or-nothing accept (multi_exec.go),
// as Redis's EXEC runs each queued command through the same call() a
// plain command takes.

// parser checks a call and describes it (now is the clock for expiries),
// or returns the error reply.
type parser func(args [][]byte, now time.Time) (call, string)

// call is one command as its parser describes it.
type call struct {
	// changes are accepted all or none, after the reads; a change of the
	// plain kind is sampled when accepted (Server.sample).
	changes []change.Change
	// reads are the keys the command reads, at its position: before its
	// own changes.
	reads []string
	// arg is what the reply echoes (PING's message). It aliases the read
	// buffer; a transaction keeps a copy.
	arg []byte
	// reply appends the reply from the accepted changes and the reads.
	reply func(s *Server, out []byte, c call, reads []read) []byte
	// alone, when set, answers the call at once instead, and the parser's
	// message is its refusal inside MULTI (COUNT ... SINCE).
	alone handler
}

// read is one key's value as a command reads it.
type read struct {
	pending.Estimate
	err string // the error reply instead, if any
}

// readsOf makes reads of estimates: a total beyond int64 is its key's
// error.
func readsOf(est []pending.Estimate) []read {
	rs := make([]read, len(est))
	for i, e := range est {
		rs[i] = read{Estimate: e}
		if e.Overflow != nil {
			rs[i].err = "ERR read totals: " + e.Overflow.Error()
		}
	}
	return rs
}

// runCall runs a described command at once: a batch of one call.
func (c *session) runCall(ctx context.Context, spec *cmdSpec, args [][]byte) error {
	s := c.s
	cl, msg := spec.parse(args, s.now())
	switch {
	case cl.alone != nil:
		return cl.alone(c, ctx, args)
	case msg != "":
		c.fail(msg)
		return nil
	case len(cl.reads) == 0 && len(cl.changes) == 0: // PING, HOT: nothing to run
		c.out = cl.reply(s, c.out, cl, nil)
		return nil
	}
	b := batch{calls: []call{cl}}
	reads, ok := b.run(ctx, s)
	switch {
	case b.acceptErr != nil:
		c.fail(s.acceptError(b.acceptErr, b.errs))
	case !ok:
		c.fail(fmt.Sprintf("ERR read totals: %v", b.readErr))
	case b.afterErr != nil:
		c.fail(fmt.Sprintf("ERR read totals: %v", b.afterErr))
	default:
		c.out = cl.reply(s, c.out, b.calls[0], reads[0])
	}
	return nil
}

// batch is calls run as one (runCall's one, EXEC's queued ones): their
// changes are accepted with one pending.Buffer.AddAll, so they are one
// journal record, applied whole or not at all, and each call's reads are
// answered as of its position: they see the changes of the calls before
// it and not its own nor those after it, as in Redis.
//
// A key whose changes in the batch all add up is read once, after they
// were accepted, and the later ones are taken off. A key one replaces (a
// change of a kind that does not add up: SET, DEL) is read before the
// batch applies and worked forward by each change's own read rule
// (change.Reading.Fold); increments other connections make between that
// read and the accept are not in its reads.
type batch struct {
	calls  []call
	kinds  []change.Kind   // the cells a read of a key takes in
	repl   map[string]bool // the keys a change replaces
	before map[string]read // the replaced keys' reads, worked forward
	// readErr and acceptErr are why run applied nothing: a read before
	// the accept failed, or the accept did (but for a TIMEOUT: applied,
	// not confirmed); afterErr is the error of the read after it, which
	// every read of it then is.
	readErr, acceptErr, afterErr error
	errs                         []error // each change's refusal, when AddAll refused one
}

// run runs the batch and returns each call's reads, or false.
func (b *batch) run(ctx context.Context, s *Server) ([][]read, bool) {
	var items []change.Change
	b.kinds, b.repl = change.Reads(change.Plain()), map[string]bool{}
	for _, cl := range b.calls {
		s.sampleAll(cl.changes)
		items = append(items, cl.changes...)
		for _, ch := range cl.changes {
			if !ch.Kind.Additive() && b.reads(ch) {
				b.repl[ch.Key] = true
			}
		}
	}
	if b.before, b.readErr = b.read(ctx, s, true); b.readErr != nil {
		return nil, false
	}
	if len(items) > 0 {
		b.errs = make([]error, len(items))
		tk, err := s.buf.AddAll(items, b.errs)
		if err == nil {
			err = s.confirm(ctx, tk)
		}
		if b.acceptErr = err; err != nil {
			return nil, false
		}
	}
	var after map[string]read
	after, b.afterErr = b.read(ctx, s, false)
	reads := make([][]read, len(b.calls))
	for i := range b.calls {
		reads[i] = make([]read, len(b.calls[i].reads))
	}
	b.back(after, reads)
	b.forward(reads)
	return reads, true
}

// reads reports whether ch lands on a cell a read of its key takes in.
func (b *batch) reads(ch change.Change) bool { return slices.Contains(b.kinds, ch.Cell().Kind) }

// read reads, once each, the keys the batch reads that are replaced (or
// not); a failed read is each key's error.
func (b *batch) read(ctx context.Context, s *Server, replaced bool) (map[string]read, error) {
	var names []string
	got := map[string]read{}
	for _, cl := range b.calls {
		for _, k := range cl.reads {
			if _, dup := got[k]; !dup && b.repl[k] == replaced {
				got[k] = read{}
				names = append(names, k)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, names)
	for i, k := range names {
		if err != nil {
			got[k] = read{err: fmt.Sprintf("ERR read totals: %v", err)}
		} else {
			got[k] = readsOf(est[i : i+1])[0]
		}
	}
	return got, err
}

// back answers the reads of keys no change replaces from after, read
// after the accept, taking off what the changes from each read's call
// on added.
func (b *batch) back(after map[string]read, reads [][]read) {
	later := map[string]change.Reading{}
	for i := len(b.calls) - 1; i >= 0; i-- {
		for _, ch := range b.calls[i].changes {
			if !b.repl[ch.Key] && b.reads(ch) {
				l := later[ch.Key]
				l.Fold(change.NetOf(ch))
				later[ch.Key] = l
			}
		}
		for n, k := range b.calls[i].reads {
			r, l := after[k], later[k]
			d, ok := subChecked(r.Total, l.N)
			switch {
			case b.repl[k]:
			case r.err != "":
				reads[i][n] = r
			case !ok || l.Wide != nil:
				reads[i][n] = beyondInt64(k)
			default:
				reads[i][n] = read{Estimate: pending.Estimate{Total: d, Var: max(r.Var-l.V, 0), Expires: r.Expires}}
			}
		}
	}
}

// forward answers the reads of replaced keys from before, read before the
// accept, folding in each change in turn.
func (b *batch) forward(reads [][]read) {
	for i, cl := range b.calls {
		for n, k := range cl.reads {
			if r, ok := b.before[k]; ok {
				reads[i][n] = r
			}
		}
		for _, ch := range cl.changes {
			r, ok := b.before[ch.Key]
			if !ok || !b.reads(ch) || (r.err != "" && ch.Kind.Additive()) {
				continue // an increment of a total beyond int64 leaves it reported as that
			}
			v := change.Reading{N: r.Total, V: r.Var, Expires: r.Expires}
			v.Fold(change.NetOf(ch))
			b.before[ch.Key] = read{Estimate: pending.Estimate{Total: v.N, Var: v.V, Expires: v.Expires}}
			if v.Wide != nil {
				b.before[ch.Key] = beyondInt64(ch.Key)
			}
		}
	}
}

// callOf is the index of the call of the batch's jth change.
func (b *batch) callOf(j int) int {
	for i, cl := range b.calls {
		if j < len(cl.changes) {
			return i
		}
		j -= len(cl.changes)
	}
	return -1
}

// beyondInt64 is the read of key k whose total passed int64 at its
// position in the batch.
func beyondInt64(k string) read {
	err := fmt.Errorf("total of %q at this point of the transaction: %w", k, store.ErrOverflow)
	return read{Estimate: pending.Estimate{Overflow: err}, err: "ERR read totals: " + err.Error()}
}

func subChecked(a, b int64) (int64, bool) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, false
	}
	return d, true
}

// sampleAll samples the changes of the plain kind as they are accepted
// (Server.sample).
func (s *Server) sampleAll(changes []change.Change) {
	for i, ch := range changes {
		if ch.Kind == change.Plain() {
			changes[i] = s.sample(unsafe.Slice(unsafe.StringData(ch.Key), len(ch.Key)), ch.Delta)
		}
	}
}

// keyCount is how many keys a call of spec with args names, by the
// table's key positions: what a transaction counts against maxTxKeys.
func (spec *cmdSpec) keyCount(args [][]byte) int {
	if spec.firstKey == 0 {
		return 0
	}
	last := spec.lastKey
	if last < 0 {
		last += len(args)
	}
	return (last-spec.firstKey)/spec.step + 1
}
