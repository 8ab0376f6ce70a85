package slots

import "strconv"

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

// laneID names lane l of instance in counterd_instances.
func laneID(instance string, l int) string {
	return instance + "/" + strconv.Itoa(l)
}
