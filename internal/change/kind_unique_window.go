package change

import (
	"encoding/binary"
	"fmt"
)

// UniqueMinute, UniqueHour and UniqueDay are one member of a key's set of
// distinct members in one time bucket of that width (PFADD to a key
// COUNTERD_WINDOWS covers), kept in the store as one HyperLogLog sketch
// per key, width and bucket, so a span's count is the union of its
// buckets' sketches, never a sum.
//
// As for Unique, Bucket is the member's hash, so repeats of a member in a
// bucket collapse into one cell. The bucket's start cannot go there too,
// so it goes into Key, as Once packs its visitor and window: the counter's
// key, then the bucket's start in unix seconds, 8 bytes big endian. A
// cell is then (key and bucket, width, member): one member in two buckets
// of a round is two cells, never one. No field of the journal record
// changes.
//
// They add up like Unique (Delta counts additions; only its being
// positive means anything), so they take the accumulator's shared path.
const (
	UniqueMinute Kind = 9
	UniqueHour   Kind = 10
	UniqueDay    Kind = 11
)

// uniqueBucketSuffixLen is the length of the bucket start at the end of a
// windowed unique change's Key.
const uniqueBucketSuffixLen = 8

// uniqueWindowSpec is the Spec of the windowed unique kind named name,
// whose sets are kept per bucket of window kind window.
func uniqueWindowSpec(name string, window Kind) Spec {
	return Spec{Name: name, Check: checkUnique, Suffix: uniqueBucketSuffixLen,
		Members: true, Window: window, Start: BucketStart}
}

// UniqueWindow returns the windowed unique kind of window kind k (Minute,
// Hour or Day), and false for any other kind.
func UniqueWindow(k Kind) (Kind, bool) {
	switch k {
	case Minute:
		return UniqueMinute, true
	case Hour:
		return UniqueHour, true
	case Day:
		return UniqueDay, true
	}
	return 0, false
}

// WindowOfUnique is UniqueWindow's inverse: the window kind of a windowed
// unique kind, false for any other kind.
func WindowOfUnique(k Kind) (Kind, bool) {
	switch k {
	case UniqueMinute:
		return Minute, true
	case UniqueHour:
		return Hour, true
	case UniqueDay:
		return Day, true
	}
	return 0, false
}

// BucketMember is the change adding the member whose hash is h to key's
// set in the bucket of window kind w (Minute, Hour or Day) starting at
// start (unix seconds). It panics for a w that is not a window kind.
func BucketMember(key string, w Kind, start int64, h uint64) Change {
	k, ok := UniqueWindow(w)
	if !ok {
		panic(fmt.Sprintf("BUG: %v is not a window kind", w))
	}
	b := make([]byte, 0, len(key)+uniqueBucketSuffixLen)
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return Change{Key: string(b), Kind: k, Bucket: int64(h), Delta: 1}
}

// UniqueBucket is a windowed unique change's fields, decoded.
type UniqueBucket struct {
	Key    string
	Window Kind  // Minute, Hour or Day
	Start  int64 // the bucket's start, unix seconds
	Hash   uint64
}

// UniqueBucketOf decodes a windowed unique change; it says what is wrong
// with one of another kind or whose Key does not hold a counter key and a
// bucket start of its width.
func UniqueBucketOf(c Change) (UniqueBucket, error) {
	w, ok := WindowOfUnique(c.Kind)
	if !ok {
		return UniqueBucket{}, fmt.Errorf("kind %v is not a windowed unique kind", c.Kind)
	}
	key, start, ok := BucketStart(c.Key)
	if !ok {
		return UniqueBucket{}, fmt.Errorf("%v: key %q is too short to hold a key and a bucket start", c.Kind, c.Key)
	}
	u := UniqueBucket{Key: key, Window: w, Start: start, Hash: uint64(c.Bucket)}
	if err := w.CheckBucket(u.Start); err != nil {
		return UniqueBucket{}, fmt.Errorf("%v: key %q: %w", c.Kind, u.Key, err)
	}
	return u, nil
}

// BucketStart returns the bucket start packed into a windowed unique
// change's Key and the counter's key before it, without checking them;
// false if Key is too short to hold one.
func BucketStart(packed string) (key string, start int64, ok bool) {
	cut := len(packed) - uniqueBucketSuffixLen
	if cut <= 0 {
		return "", 0, false
	}
	return packed[:cut], int64(binary.BigEndian.Uint64([]byte(packed[cut:]))), true
}
