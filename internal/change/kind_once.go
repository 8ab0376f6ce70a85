package change

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Once is one view of INCRONCE key visitor window: it adds 1 to key's
// total unless the visitor's last counted view of key is less than window
// before this one. Whether it counts is decided by the store, in the
// round's transaction, against the seen set in PostgreSQL, so a view
// accepted here is not a count yet: no read folds it in (ReadBy is 0).
//
// Its fields are the record's own, so the journal format does not change:
//
//	Key    the counter's key, then the visitor's hash (VisitorHash) and
//	       the window in microseconds (1 µs..MaxOnceWindow), 8 bytes
//	       each, big endian: a view's cell is its key, visitor, window
//	       and accept time, so views of different visitors, or of one
//	       visitor at different times, never net together;
//	Bucket the accept time, in unix microseconds (PostgreSQL's
//	       resolution): journaled, so a replayed round decides with the
//	       time the live one would have;
//	Delta  how many views the cell holds (1 for each);
//	Var    0.
//
// The kind is additive, so it takes the accumulator's shared path, not
// the exclusive one: views that share a cell (one visitor, key and window
// in the same microsecond) add up, and are decided as one view, since
// all but the first could never count (each is 0 after the first, less
// than any window).
const Once Kind = 12

// onceSuffixLen is the length of the visitor hash and window at the end
// of a Once change's Key.
const onceSuffixLen = 16

// MaxOnceWindow bounds an INCRONCE window: about 100 years, far from
// overflowing microseconds when added to an accept time.
const MaxOnceWindow = 100 * 365 * 24 * time.Hour

func onceSpec() Spec {
	return Spec{Name: "once", Check: checkOnce, Suffix: onceSuffixLen}
}

func checkOnce(c Change) error {
	// The key is not checked: a replay checks a record's fields without
	// it (the journal does not copy keys to check them). OnceOf does.
	switch {
	case c.Bucket <= 0:
		return fmt.Errorf("once: accept time %d is not a positive unix microsecond", c.Bucket)
	case c.Delta <= 0:
		return fmt.Errorf("once: %d views; want at least 1", c.Delta)
	case c.Var != 0:
		return fmt.Errorf("once: variance %v; a view is exact", c.Var)
	}
	return nil
}

// VisitorHash is the 64 bits a visitor is known by: the first 8 bytes of
// its SHA-256, as a signed integer (PostgreSQL's bigint). A stable,
// unseeded hash, so every daemon, and every restart, hashes a visitor
// alike; a cryptographic one, so nobody can pick a visitor name that
// collides with someone else's and have their view skipped (a random
// collision among n visitors of one key has probability about n²/2⁶⁵).
// Its cost (about 0.3 µs for a short visitor) is small beside the
// journal's.
func VisitorHash(visitor []byte) int64 {
	sum := sha256.Sum256(visitor)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// OnceView returns the change of one INCRONCE view of key by the visitor
// of hash vh, accepted at at, with window w.
func OnceView(key string, vh int64, at time.Time, w time.Duration) Change {
	b := make([]byte, 0, len(key)+onceSuffixLen)
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(vh))
	b = binary.BigEndian.AppendUint64(b, uint64(w.Microseconds()))
	return Change{Key: string(b), Kind: Once, Bucket: at.UnixMicro(), Delta: 1}
}

// View is a Once change's fields, decoded.
type View struct {
	Key     string
	Visitor int64 // VisitorHash
	At      int64 // accept time, unix microseconds
	Window  int64 // microseconds
}

// OnceOf decodes a Once change; it says what is wrong with one whose Key
// does not hold a counter key, a visitor hash and a window.
func OnceOf(c Change) (View, error) {
	cut := len(c.Key) - onceSuffixLen
	if cut <= 0 {
		return View{}, fmt.Errorf("once: key %q is too short to hold a key, a visitor hash and a window", c.Key)
	}
	suffix := []byte(c.Key[cut:])
	v := View{
		Key:     c.Key[:cut],
		Visitor: int64(binary.BigEndian.Uint64(suffix)),
		At:      c.Bucket,
		Window:  int64(binary.BigEndian.Uint64(suffix[8:])),
	}
	if v.Window <= 0 || v.Window > MaxOnceWindow.Microseconds() {
		return View{}, fmt.Errorf("once: key %q: window of %d µs is not within 1 µs..%v", c.Key, v.Window, MaxOnceWindow)
	}
	return v, nil
}
