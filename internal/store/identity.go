package store

// Identity names one run of a daemon: its instance (stable across
// restarts, from the journal directory) and the generation of the run
// that created a round. Sequence numbers increase within a generation. A
// journal directory restored from an old snapshot starts a new generation,
// so its new rounds never collide with the high-water mark of rounds the
// database already has. Generation "" is the identity rounds had before
// generations existed.
type Identity struct {
	Instance   string
	Generation string
}

// BatchID identifies one flush round.
type BatchID struct {
	Identity
	Seq uint64
}

// Lanes is how many lanes keys are hashed into. Each lane records its own
// batch identity, so a batch can be written by several transactions at
// once and still be exactly once per lane however the lanes are grouped.
// Lanes and LaneOf are part of what is stored: changing either would
// break the identity of batches replayed from an older journal.
const Lanes = 16

// LaneOf returns key's lane: FNV-1a (32 bit) of its bytes, modulo Lanes.
func LaneOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % Lanes)
}

// Marks holds, per lane, the sequence number of the last batch committed.
type Marks [Lanes]uint64

// Min is the lowest watermark: every batch up to it is committed in
// every lane.
func (m Marks) Min() uint64 {
	low := m[0]
	for _, seq := range m[1:] {
		low = min(low, seq)
	}
	return low
}
