package slots

import (
	"testing"

	"github.com/counterd/counterd/internal/change"
)

// testKinds is internal/catalog's list of writers, for the tests inside
// this package (which cannot import catalog: it imports slots).
// TestTestKinds keeps the two alike.
func testKinds() []Writer {
	return []Writer{
		SetWriter(), ExpireWriter(), OnceWriter(), TotalsWriter(), WindowsWriter(),
		GrantWriter(), UniquesWriter(), UniqueBucketsWriter(), MemberWriter(),
	}
}

// testWriters is the writer set of a store of testKinds.
func testWriters(t testing.TB) *writerSet {
	t.Helper()
	ws, err := newWriterSet(append(testKinds(), keyTTLWriter()))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestTestKinds: testKinds has one writer for every kind this build
// declares, as catalog's test checks of its list, so the tests here
// write what the daemon writes.
func TestTestKinds(t *testing.T) {
	t.Parallel()
	count := map[change.Kind]int{}
	for _, w := range testKinds() {
		for _, k := range w.Kinds {
			count[k]++
		}
	}
	for k := range 256 {
		k, want := change.Kind(k), 0
		if k.Valid() {
			want = 1
		}
		if count[k] != want {
			t.Errorf("kind %v: got %d writers in testKinds; want %d", k, count[k], want)
		}
	}
}

// A kind with two writers, or no kinds at all, makes no store.
func TestNewRefusesKinds(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Options{Kinds: append(testKinds(), TotalsWriter())}); err == nil {
		t.Error("New with two writers of totals: got nil; want an error")
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New without kinds: got nil; want an error")
	}
}
