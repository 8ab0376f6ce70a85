package change

import "testing"

// A member's read key names its set's key (a store of partitions reads
// the member on the set's partition), whatever bytes key and member hold;
// a string SetMemberKey did not make names none.
func TestSetMemberKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key    string
		member []byte
	}{{"post:1:likes", []byte("user:1")}, {"a b", []byte{0, ' ', 0xff}}, {"k", []byte(" ")}} {
		got, ok := SetOfMemberKey(SetMemberKey(c.key, c.member))
		if !ok || got != c.key {
			t.Errorf("SetOfMemberKey(SetMemberKey(%q, %q)) = %q, %v; want %q", c.key, c.member, got, ok, c.key)
		}
		if op := SetOpChange(c.key, c.member, 1, true); op.CounterKey() != c.key {
			t.Errorf("SetOpChange(%q, %q).CounterKey() = %q", c.key, c.member, op.CounterKey())
		}
	}
	for _, s := range []string{"", "post:1:likes", "zz 00", " 00"} {
		if got, ok := SetOfMemberKey(s); ok {
			t.Errorf("SetOfMemberKey(%q) = %q, true; want false", s, got)
		}
	}
}
