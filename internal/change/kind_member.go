package change

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// SetOp is one operation on an exact set: SADD key member (Delta 1) or
// SREM key member (Delta -1). Whether it adds or removes anything is
// decided by the store in the round's transaction, against the set's
// rows in PostgreSQL (counter_set_members), as INCRONCE's views are: an
// accepted operation is not a member yet, so no read folds it in.
//
// Its fields are the record's own, so the journal format does not change:
//
//	Key    the set's key, then the member, then the member's length (2
//	       bytes, big endian): the member is journaled whole, so a
//	       replay can write it and SMEMBERS list it;
//	Bucket the operation's token: its accept time in unix microseconds,
//	       made strictly increasing by the daemon (SetTokens), so two
//	       operations of one daemon never share a cell, and their order
//	       is their accept order;
//	Delta  1 for SADD, -1 for SREM;
//	Var    0.
//
// Every operation is a cell of its own, so nothing nets: each gets its
// own outcome (Outcome), the reply of its command.
const SetOp Kind = 13

// MaxMemberLen bounds a set's member: a member is an id (a user, a
// device), journaled and stored whole.
const MaxMemberLen = 512

// MaxSetMembers bounds a set's cardinality: an SADD of a new member to
// a set holding this many is refused (its outcome Refused).
const MaxSetMembers = 1_000_000

// Refused is the outcome of an SADD refused by MaxSetMembers.
const Refused = -1

// memberLenLen is the bytes of the member's length at the end of Key.
const memberLenLen = 2

func setOpSpec() Spec {
	return Spec{Name: "set_op", Check: checkSetOp, Counter: setOpCounter}
}

func checkSetOp(c Change) error {
	switch {
	case c.Bucket <= 0:
		return fmt.Errorf("set op: token %d is not a positive unix microsecond", c.Bucket)
	case c.Delta != 1 && c.Delta != -1:
		return fmt.Errorf("set op: delta %d; want 1 (add) or -1 (remove)", c.Delta)
	case c.Var != 0:
		return fmt.Errorf("set op: variance %v; an operation is exact", c.Var)
	}
	return nil
}

// setOpCounter is the set's key of a SetOp change's Key; the Key itself
// for one too short to decode (SetOpOf says why).
func setOpCounter(packed string) string {
	if op, err := decodeSetOp(packed); err == nil {
		return op.Key
	}
	return packed
}

// SetOpChange returns the change of SADD (add) or SREM (!add) of member
// to key, with token tok.
func SetOpChange(key string, member []byte, tok int64, add bool) Change {
	b := make([]byte, 0, len(key)+len(member)+memberLenLen)
	b = append(b, key...)
	b = append(b, member...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(member)))
	d := int64(-1)
	if add {
		d = 1
	}
	return Change{Key: string(b), Kind: SetOp, Bucket: tok, Delta: d}
}

// SetClearChange returns the change that empties key's set (DEL or SET
// of key) with token tok: the key's operations accepted before it are
// undone by it, those after it apply to the empty set. It is a SetOp of
// no member.
func SetClearChange(key string, tok int64) Change {
	return SetOpChange(key, nil, tok, false)
}

// Op is a SetOp change's fields, decoded.
type Op struct {
	Key    string
	Member string
	Token  int64
	Add    bool
	Clear  bool // SetClearChange's: no Member
}

// SetOpOf decodes a SetOp change; it says what is wrong with one whose
// Key does not hold a key and a member.
func SetOpOf(c Change) (Op, error) {
	op, err := decodeSetOp(c.Key)
	op.Token, op.Add = c.Bucket, c.Delta > 0
	return op, err
}

func decodeSetOp(packed string) (Op, error) {
	if len(packed) < memberLenLen {
		return Op{}, fmt.Errorf("set op: key %q is too short to hold a member's length", packed)
	}
	n := int(binary.BigEndian.Uint16([]byte(packed[len(packed)-memberLenLen:])))
	cut := len(packed) - memberLenLen - n
	if n == 0 && cut > 0 {
		return Op{Key: packed[:cut], Clear: true}, nil
	}
	if n > MaxMemberLen || cut <= 0 {
		return Op{}, fmt.Errorf("set op: key %q does not hold a key and a member of 1..%d bytes", packed, MaxMemberLen)
	}
	return Op{Key: packed[:cut], Member: packed[cut : len(packed)-memberLenLen]}, nil
}

// OpID names one operation among a daemon's: its cell and token. A
// round's outcomes (store.ApplyResult.Outcomes) are keyed by it.
func OpID(c Change) string {
	return c.Key + string(binary.BigEndian.AppendUint64(nil, uint64(c.Bucket)))
}

// SetMemberKey is the key of a read of whether member is in key's set (a
// store's ReadBuckets of SetOp): the key and the member in hex, space
// separated, as a text parameter can carry any member's bytes.
func SetMemberKey(key string, member []byte) string {
	return hex.EncodeToString([]byte(key)) + " " + hex.EncodeToString(member)
}

// SetOfMemberKey is the set's key of a SetMemberKey: a store of
// partitions reads a member on its set's partition. ok is false for a
// string SetMemberKey did not make.
func SetOfMemberKey(read string) (key string, ok bool) {
	k, _, found := strings.Cut(read, " ")
	b, err := hex.DecodeString(k)
	if !found || err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}
