// Package change defines the one value every layer of counterd passes
// along: an accepted change to a counter. The parser builds it, the journal
// records it, the accumulator coalesces it, and the store writes it; a new
// kind of counter is a new Kind, not a new type in each layer.
package change

import (
	"fmt"
	"time"
)

// Kind says which sort of counter a change applies to.
type Kind uint8

const (
	// Total is the all-time total of a key.
	Total Kind = 1
	// Minute, Hour and Day are a key's count in one time bucket of that
	// width, UTC-aligned; Bucket is the bucket's start in unix seconds.
	Minute Kind = 2
	Hour   Kind = 3
	Day    Kind = 4
	// Set replaces a key's total: Delta is the value the total becomes
	// (DEL is a Set to 0). It applies to the Total counter of its key and
	// is ordered with increments: those accepted before it are replaced,
	// those after it add to the new value.
	Set Kind = 5
	// Expire sets when a key's total expires: Delta is the unix second,
	// or 0 to remove an expiry (PERSIST).
	Expire Kind = 6
	// Grant records units granted by TAKE from a leased share of a budget
	// (internal/budget): Key is the budget, Bucket the lease's id in
	// budget_leases, Delta the units granted. It is a separate keyspace
	// from the counters: a round writes it against the lease, never into
	// a counter.
	Grant Kind = 7
)

// Valid reports whether k is a kind this version knows.
func (k Kind) Valid() bool { return k >= Total && k <= Grant }

// Windowed reports whether k is a time bucket kind.
func (k Kind) Windowed() bool { return k >= Minute && k <= Day }

// Width is the width of a windowed kind's buckets, 0 for other kinds.
func (k Kind) Width() time.Duration {
	switch k {
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	}
	return 0
}

// WindowKind returns the windowed kind whose name is s ("minute", "hour",
// "day").
func WindowKind(s string) (Kind, bool) {
	for _, k := range []Kind{Minute, Hour, Day} {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// CheckBucket reports whether bucket is a valid bucket for kind k: 0 for
// kinds without buckets, a non-negative multiple of the width for
// windowed kinds.
func (k Kind) CheckBucket(bucket int64) error {
	w := int64(k.Width() / time.Second)
	switch {
	case k == Grant:
		if bucket <= 0 {
			return fmt.Errorf("grant needs a lease id, got bucket %d", bucket)
		}
	case w == 0 && bucket != 0:
		return fmt.Errorf("kind %v has no buckets, got bucket %d", k, bucket)
	case w != 0 && (bucket < 0 || bucket%w != 0):
		return fmt.Errorf("bucket %d is not the start of a %v bucket", bucket, k)
	}
	return nil
}

func (k Kind) String() string {
	switch k {
	case Total:
		return "total"
	case Minute:
		return "minute"
	case Hour:
		return "hour"
	case Day:
		return "day"
	case Set:
		return "set"
	case Expire:
		return "expire"
	case Grant:
		return "grant"
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
	// seconds, for windowed kinds; 0 for the others.
	Bucket int64
	// Delta is the change to the count (for Set, the new total; for
	// Expire, the unix second it expires at).
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
