package change

import (
	"testing"
	"time"
)

// A view's fields survive the record's: OnceOf decodes what OnceView
// encodes, and views of one cell add up.
func TestOnceViewRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	c := OnceView("post:42:views", VisitorHash([]byte("user:7")), at, 8*time.Hour)
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	v, err := OnceOf(c)
	if err != nil {
		t.Fatal(err)
	}
	want := View{Key: "post:42:views", Visitor: VisitorHash([]byte("user:7")), At: at.UnixMicro(), Window: (8 * time.Hour).Microseconds()}
	if v != want {
		t.Fatalf("OnceOf: got %+v; want %+v", v, want)
	}
	n := NetOf(c)
	if !Fold(&n, c, nil) || n.N != 2 || !Once.Additive() {
		t.Fatalf("two views of one cell: net %+v; want 2 views, additive", n)
	}
	for _, bad := range []Change{{Key: "k", Kind: Once, Bucket: 1, Delta: 1}, {Key: "post:1" + "\x00\x00\x00\x00\x00\x00\x00\x01" + "\x00\x00\x00\x00\x00\x00\x00\x00", Kind: Once, Bucket: 1, Delta: 1}} {
		if _, err := OnceOf(bad); err == nil {
			t.Errorf("OnceOf(%q): no error; want one", bad.Key)
		}
	}
}

// A packed kind's CounterKey is the counter's key, so a store of
// partitions places its cell with the key's other rows.
func TestCounterKey(t *testing.T) {
	for _, c := range []Change{
		OnceView("post:42", VisitorHash([]byte("u")), time.Unix(1, 0), time.Hour),
		BucketMember("post:42", Hour, 3600, 7),
		Member("post:42", 7),
		{Key: "post:42", Kind: Plain(), Delta: 1},
		{Key: "post:42", Kind: Hour, Bucket: 3600, Delta: 1},
	} {
		if got := c.CounterKey(); got != "post:42" {
			t.Errorf("%v: CounterKey() = %q; want post:42", c.Kind, got)
		}
	}
}
