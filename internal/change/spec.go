package change

import (
	"math"
	"math/big"
	"time"
)

// Spec declares one kind: everything the layers need to know about it
// besides its bytes (the journal) and its SQL (the store's writer). Each
// kind declares its Spec in the kind_*.go file of its family, and
// builtin (kinds.go) lists them all.
type Spec struct {
	// Name names the kind in errors, logs and configuration.
	Name string
	// Plain marks the kind of a plain increment of a key's value (INCR),
	// by far the most common change: additive, without buckets, landing
	// on its own cell. Exactly one kind is plain; layers may keep a fast
	// path for it (Plain).
	Plain bool
	// Lands is the kind of the cell (of the same key, bucket 0) a change
	// lands on when that is not its own: a Set replaces the value of its
	// key's Total cell.
	Lands Kind
	// Width is the width of the kind's UTC-aligned time buckets; 0 for a
	// kind without.
	Width time.Duration
	// Merge nets a change into its cell's net; it reports false if the
	// result does not fit. Nil means the kind is additive: values and
	// variances add up (AddNet).
	Merge func(n Net, ch Change) (Net, bool)
	// Check says what is wrong with a change of the kind, checked when it
	// is journaled and when it is replayed; nil accepts exactly the
	// changes whose Bucket is 0.
	Check func(ch Change) error
	// Cancels lists kinds whose cell of the same key a change resets, if
	// it has one in the same round: the cell then nets a change of Delta
	// 0 of its kind (SET and DEL remove an expiry accepted before them).
	Cancels []Kind
	// ReadBy is the kind whose reads fold this kind's cell of the same
	// key in, after the reader's own (a key's expiry is read with its
	// total); 0 when only reads of the kind itself do.
	ReadBy Kind
	// Read folds a pending net of the kind into a read's value; nil adds
	// it (AddReading).
	Read func(r *Reading, n Net)
	// Suffix is how many bytes a change's Key carries after the
	// counter's key (a kind packing more into its cell, as Once its
	// visitor and window); CounterKey strips them.
	Suffix int
	// Counter, when set, returns the counter's key of a change's Key,
	// for a kind that packs bytes of varying length after it (SetOp its
	// member); CounterKey calls it instead of stripping Suffix.
	Counter func(packed string) string
	// Members marks a kind whose changes are members of a key's set, not
	// amounts: a change's Bucket names its member (a hash), so repeats
	// of a member collapse into one cell, and the store keeps each set
	// as one value, so a round writes one row per set, not per member
	// (PFADD's sketches).
	Members bool
	// Window is, for a member kind whose sets are kept per time bucket,
	// the window kind of its buckets; 0 for other kinds. At most one
	// member kind has each window (MembersIn).
	Window Kind
	// Start returns the counter's key and the bucket start (unix
	// seconds) a kind with Window packs into a change's Key; false if
	// the Key is too short to hold them.
	Start func(packed string) (key string, start int64, ok bool)
	// InBucket is the change ch makes in the bucket of window kind w
	// that starts at start (unix seconds), for a key with time windows
	// (internal/windows expands an accepted change into one per window
	// of its key); nil for a kind that windows do not expand.
	InBucket func(ch Change, w Kind, start int64) Change
}

// CounterKey is the key of the counter c changes: its Key without the
// bytes its kind packs after it (Spec.Suffix). A store of partitions
// places c by it, so all of a key's rows share its partition.
func (c Change) CounterKey() string {
	if c.Kind == kinds.plain {
		return c.Key
	}
	s := kinds.specs[c.Kind]
	if s != nil && s.Counter != nil {
		return s.Counter(c.Key)
	}
	if s != nil && s.Suffix > 0 && len(c.Key) >= s.Suffix {
		return c.Key[:len(c.Key)-s.Suffix]
	}
	return c.Key
}

// Plain returns the kind of a plain increment of a key's value (see
// Spec.Plain).
func Plain() Kind { return kinds.plain }

// MembersIn returns the member kind whose sets are kept per bucket of
// window kind w (Spec.Window), false if none is.
func MembersIn(w Kind) (Kind, bool) { return kinds.membersIn(w) }

// Net is the net of the changes to one cell (of one round, or one journal
// segment): what a round writes for it.
type Net struct {
	N int64
	V float64
	// Kind is the kind the net is written as: the kind of the changes
	// netted, or of the last one that replaced the cell's value (a Set on
	// a Total cell); 0 for a cell nothing was netted into yet.
	Kind Kind
}

// NetOf is the net of ch alone.
func NetOf(ch Change) Net { return Net{N: ch.Delta, V: ch.Var, Kind: ch.Kind} }

// Change returns the change a round writes for net n of the cell id.
func (n Net) Change(id ID) Change {
	return Change{Key: id.Key, Kind: n.Kind, Bucket: id.Bucket, Delta: n.N, Var: n.V}
}

// Written reports whether a round writes n: a net of an additive kind
// that sums to nothing is not.
func (n Net) Written() bool {
	return n.Kind != 0 && (n.N != 0 || n.V != 0 || !n.Kind.Additive())
}

// Merge nets ch into n, by ch's kind's rule; it reports false if the
// result would not fit (an additive sum past int64).
func (n Net) Merge(ch Change) (Net, bool) {
	if ch.Kind != kinds.plain { // the plain kind adds, without a look at the table
		return n.mergeBy(ch)
	}
	return AddNet(n, ch)
}

func (n Net) mergeBy(ch Change) (Net, bool) {
	if s := kinds.specs[ch.Kind]; s != nil && s.Merge != nil {
		return s.Merge(n, ch)
	}
	return AddNet(n, ch)
}

// AddNet is the merge of an additive kind: ch's value and variance add to
// n's.
func AddNet(n Net, ch Change) (Net, bool) {
	sum, ok := CheckedAdd(n.N, ch.Delta)
	if !ok {
		return n, false
	}
	if n.Kind == 0 {
		n.Kind = ch.Kind
	}
	n.N, n.V = sum, n.V+ch.Var
	return n, true
}

// ReplaceNet is the merge of a kind whose change replaces what its cell
// held.
func ReplaceNet(_ Net, ch Change) (Net, bool) { return NetOf(ch), true }

// Cells is where Fold finds the other cells of a round a change cancels.
type Cells interface {
	// Lookup returns the net of cell id, nil if the round has none.
	Lookup(id ID) *Net
}

// Fold nets ch into n, the net of its cell (ch.Cell()) in a round, and
// resets the cells of cs that ch cancels (Spec.Cancels). It reports false,
// changing nothing, if the merge would overflow. The journal nets a
// segment and the accumulator a round with it, so a replayed round nets
// exactly as the live one did.
func Fold(n *Net, ch Change, cs Cells) bool {
	if ch.Kind != kinds.plain { // the plain kind adds and cancels nothing
		return foldBy(n, ch, cs)
	}
	m, ok := AddNet(*n, ch)
	if ok {
		*n = m
	}
	return ok
}

func foldBy(n *Net, ch Change, cs Cells) bool {
	m, ok := n.mergeBy(ch)
	if !ok {
		return false
	}
	*n = m
	if s := kinds.specs[ch.Kind]; s != nil {
		for _, k := range s.Cancels {
			if o := cs.Lookup(ID{Key: ch.Key, Kind: k}); o != nil {
				*o, _ = o.Merge(Change{Key: ch.Key, Kind: k})
			}
		}
	}
	return true
}

// Reads returns the kinds whose cells of a key a read of kind k folds in,
// in order: k itself, then those read by it (Spec.ReadBy).
func Reads(k Kind) []Kind {
	out := []Kind{k}
	for o, s := range kinds.specs {
		if s != nil && s.ReadBy == k {
			out = append(out, Kind(o))
		}
	}
	return out
}

// Reading is a read's value of one key: what the store has, with the nets
// pending in memory folded in, oldest first.
type Reading struct {
	N int64
	// Wide, when not nil, is the value instead of N: beyond int64.
	Wide *big.Int
	V    float64
	// Expires is when the key expires, in unix milliseconds; 0 for none.
	Expires int64
}

// Fold folds net n, pending for one of the cells the read takes in
// (Reads), into r by its kind's rule.
func (r *Reading) Fold(n Net) {
	if s := kinds.specs[n.Kind]; s != nil && s.Read != nil {
		s.Read(r, n)
		return
	}
	AddReading(r, n)
}

// AddReading is the read rule of an additive kind: n adds to the value
// (exact at any size) and its variance to the variance.
func AddReading(r *Reading, n Net) {
	r.V += n.V
	if r.Wide == nil {
		if t, ok := CheckedAdd(r.N, n.N); ok {
			r.N = t
			return
		}
		r.Wide = big.NewInt(r.N)
	}
	r.Wide.Add(r.Wide, big.NewInt(n.N))
	if r.Wide.IsInt64() {
		r.N, r.Wide = r.Wide.Int64(), nil
	}
}

// CheckedAdd returns a+b, or false if that overflows int64.
func CheckedAdd(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
