// Package change defines the one value every layer of counterd passes
// along: an accepted change to a counter. The parser builds it, the journal
// records it, the accumulator coalesces it, and the store writes it.
//
// Each kind of change is declared once, in a kind_*.go file of this
// package, as a Spec: how its changes net (add, replace, ...), what is
// checked when one is accepted or replayed, which cell it lands on and how
// a read folds its pending value into the stored one. One list (kinds.go's
// builtin), not init functions, registers them. The journal and the
// accumulator net changes with the same function (Fold) and name no kind;
// a new kind is a new Spec here, its line in the list and a writer in the
// store.
package change

import (
	"fmt"
	"time"
)

// Kind says which sort of counter a change applies to. Its value is
// written to the journal: a kind's number never changes.
type Kind uint8

// Valid reports whether k is a kind this build knows.
func (k Kind) Valid() bool { return kinds.specs[k] != nil }

// Spec returns k's declaration, nil for a kind this build does not know.
func (k Kind) Spec() *Spec { return kinds.specs[k] }

// Windowed reports whether k is a time bucket kind.
func (k Kind) Windowed() bool { return k.Width() != 0 }

// Width is the width of a windowed kind's buckets, 0 for other kinds.
func (k Kind) Width() time.Duration {
	if s := kinds.specs[k]; s != nil {
		return s.Width
	}
	return 0
}

// Additive reports whether changes of kind k net by adding up (Spec.Merge
// is nil), so a change of 0 does nothing and nets held apart (in shards)
// can be summed in any order.
func (k Kind) Additive() bool {
	if k == kinds.plain {
		return true
	}
	s := kinds.specs[k]
	return s == nil || s.Merge == nil
}

// Members reports whether k's changes are members of a set, not amounts
// (Spec.Members).
func (k Kind) Members() bool {
	s := kinds.specs[k]
	return s != nil && s.Members
}

// CheckBucket reports whether bucket is a valid bucket for kind k (see
// Spec.Check).
func (k Kind) CheckBucket(bucket int64) error {
	return Change{Kind: k, Bucket: bucket}.Check()
}

func (k Kind) String() string {
	if s := kinds.specs[k]; s != nil {
		return s.Name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// WindowKind returns the windowed kind whose name is s ("minute", "hour",
// "day").
func WindowKind(s string) (Kind, bool) {
	for k, sp := range kinds.specs {
		if sp != nil && sp.Width != 0 && sp.Name == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Change is one accepted change, or the net of several to one counter.
//
// On the accept path Key aliases the connection's read buffer; whoever keeps
// a Change beyond the call that received it must clone Key.
type Change struct {
	Key  string
	Kind Kind
	// Bucket is the start of the time bucket the change falls in, in unix
	// seconds, for windowed kinds; what else it means, if anything, is up
	// to the kind (a budget grant's lease id); 0 for most.
	Bucket int64
	// Delta is the change to the count (or what the kind makes of it: for
	// a Set the new total, for an Expire the unix second it expires at).
	Delta int64
	// Var is the variance this change adds to its counter's estimate: 0
	// for an exact increment, N(N-1)d² for one sampled at 1/N and
	// recorded as N·d.
	Var float64
}

// Check says what is wrong with c, if anything: an unknown kind, or what
// its kind's Spec.Check refuses. The journal checks every change it
// records and every one it replays.
func (c Change) Check() error {
	if c.Kind == kinds.plain && c.Bucket == 0 {
		return nil // the plain kind has no buckets and nothing else to check
	}
	return c.check()
}

func (c Change) check() error {
	s := kinds.specs[c.Kind]
	if s == nil {
		return fmt.Errorf("unknown change kind %d", uint8(c.Kind))
	}
	if s.Check != nil {
		return s.Check(c)
	}
	return noBucket(c)
}

// noBucket is the check of a kind without buckets.
func noBucket(c Change) error {
	if c.Bucket != 0 {
		return fmt.Errorf("kind %v has no buckets, got bucket %d", c.Kind, c.Bucket)
	}
	return nil
}

// ID is what changes are coalesced by: two changes with the same ID add up.
type ID struct {
	Key    string
	Kind   Kind
	Bucket int64
}

// ID returns the counter c applies to.
func (c Change) ID() ID { return ID{Key: c.Key, Kind: c.Kind, Bucket: c.Bucket} }

// Cell returns the cell c lands on: its own ID, or, for a kind whose Spec
// says Lands, the cell of that kind of its key (a Set lands on the key's
// Total).
func (c Change) Cell() ID {
	if c.Kind == kinds.plain {
		return c.ID()
	}
	if s := kinds.specs[c.Kind]; s != nil && s.Lands != 0 {
		return ID{Key: c.Key, Kind: s.Lands}
	}
	return c.ID()
}
