// Package change defines the one value every layer of counterd passes
// along: an accepted change to a counter. The parser builds it, the journal
// records it, the accumulator coalesces it, and the store writes it; a new
// kind of counter is a new Kind, not a new type in each layer.
package change

import "fmt"

// Kind says which sort of counter a change applies to.
type Kind uint8

const (
	// Total is the all-time total of a key, the only kind so far.
	Total Kind = 1
)

// Valid reports whether k is a kind this version knows.
func (k Kind) Valid() bool { return k == Total }

func (k Kind) String() string {
	switch k {
	case Total:
		return "total"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Change is one accepted change, or the net of several to one counter.
//
// On the accept path Key aliases the connection's read buffer; whoever keeps
// a Change beyond the call that received it must clone Key.
type Change struct {
	Key  string
	Kind Kind
	// Bucket is the start of the time bucket the change falls in, in unix
	// seconds, for kinds that have buckets; 0 for Total.
	Bucket int64
	// Delta is the change to the count.
	Delta int64
	// Var is the variance this change adds to its counter's estimate: 0
	// for an exact increment, N(N-1)d² for one sampled at 1/N and
	// recorded as N·d.
	Var float64
}

// ID is what changes are coalesced by: two changes with the same ID add up.
type ID struct {
	Key    string
	Kind   Kind
	Bucket int64
}

// ID returns the counter c applies to.
func (c Change) ID() ID { return ID{Key: c.Key, Kind: c.Kind, Bucket: c.Bucket} }
