package peer_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/counterd/counterd/bench/internal/peer"
)

// fakeBuffer is redis-server's hashes in memory, recording the commands.
type fakeBuffer struct {
	hashes map[string]map[string]int64
	calls  []string
}

func (f *fakeBuffer) incr(key string, by int64) {
	if f.hashes[peer.Hash] == nil {
		f.hashes[peer.Hash] = map[string]int64{}
	}
	f.hashes[peer.Hash][key] += by
}

func (f *fakeBuffer) Exists(_ context.Context, key string) (bool, error) {
	f.calls = append(f.calls, "EXISTS "+key)
	return f.hashes[key] != nil, nil
}

func (f *fakeBuffer) Rename(_ context.Context, from, to string) (bool, error) {
	f.calls = append(f.calls, "RENAME "+from+" "+to)
	h := f.hashes[from]
	if h == nil {
		return false, nil
	}
	f.hashes[to] = h
	delete(f.hashes, from)
	return true, nil
}

func (f *fakeBuffer) HGetAll(_ context.Context, key string) (map[string]string, error) {
	f.calls = append(f.calls, "HGETALL "+key)
	out := map[string]string{}
	for k, v := range f.hashes[key] {
		out[k] = strconv.FormatInt(v, 10)
	}
	return out, nil
}

func (f *fakeBuffer) Del(_ context.Context, key string) error {
	f.calls = append(f.calls, "DEL "+key)
	delete(f.hashes, key)
	return nil
}

// fakeStore keeps totals; it fails the next fail calls to Add.
type fakeStore struct {
	totals map[string]int64
	fail   int
}

func (s *fakeStore) Add(_ context.Context, keys []string, deltas []int64) error {
	if s.fail > 0 {
		s.fail--
		return errors.New("connection reset")
	}
	for i, k := range keys {
		s.totals[k] += deltas[i]
	}
	return nil
}

func newMover() (*peer.Mover, *fakeBuffer, *fakeStore) {
	b := &fakeBuffer{hashes: map[string]map[string]int64{}}
	s := &fakeStore{totals: map[string]int64{}}
	return &peer.Mover{Buffer: b, Store: s}, b, s
}

// TestMoveRetriesAFailedUpsert fails one upsert: the renamed hash stays
// whole, increments keep arriving in a fresh hash, and the next move
// stores both exactly once, the leftover first.
func TestMoveRetriesAFailedUpsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, b, s := newMover()
	b.incr("a", 3)
	b.incr("b", 2)
	s.fail = 1
	if err := m.Move(ctx); err == nil {
		t.Fatal("Move with a failing upsert: nil error; want the upsert's")
	}
	if got := b.hashes[peer.Moving]; !maps.Equal(got, map[string]int64{"a": 3, "b": 2}) {
		t.Fatalf("after the failed move %s holds %v; want a:3 b:2", peer.Moving, got)
	}
	b.incr("a", 1)
	b.calls = nil
	if err := m.Move(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"EXISTS " + peer.Moving, "HGETALL " + peer.Moving, "DEL " + peer.Moving,
		"RENAME " + peer.Hash + " " + peer.Moving, "HGETALL " + peer.Moving, "DEL " + peer.Moving}
	if !slices.Equal(b.calls, want) {
		t.Errorf("commands %q; want %q", b.calls, want)
	}
	if !maps.Equal(s.totals, map[string]int64{"a": 4, "b": 2}) || len(b.hashes) != 0 {
		t.Errorf("stored %v, buffer left %v; want a:4 b:2 and an empty buffer", s.totals, b.hashes)
	}
	if m.Stats != (peer.Stats{Moves: 2, Rows: 3, Increments: 6}) {
		t.Errorf("stats %+v; want 2 moves, 3 rows, 6 increments", m.Stats)
	}
}

// TestMoveNeverRenamesOverALeftover: while a leftover cannot be stored,
// the live hash is not renamed onto it (which would drop the leftover).
func TestMoveNeverRenamesOverALeftover(t *testing.T) {
	t.Parallel()
	m, b, s := newMover()
	b.hashes[peer.Moving] = map[string]int64{"old": 5}
	b.incr("new", 1)
	s.fail = 1
	if err := m.Move(context.Background()); err == nil {
		t.Fatal("nil error; want the upsert's")
	}
	if slices.Contains(b.calls, "RENAME "+peer.Hash+" "+peer.Moving) {
		t.Errorf("renamed over the leftover: %q", b.calls)
	}
	if b.hashes[peer.Moving]["old"] != 5 || b.hashes[peer.Hash]["new"] != 1 {
		t.Errorf("buffer %v; want both hashes untouched", b.hashes)
	}
}

// TestMoveNothing: an empty buffer costs an EXISTS and a RENAME that
// finds nothing, and moves nothing.
func TestMoveNothing(t *testing.T) {
	t.Parallel()
	m, b, _ := newMover()
	if err := m.Move(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"EXISTS " + peer.Moving, "RENAME " + peer.Hash + " " + peer.Moving}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q; want %q", b.calls, want)
	}
	if m.Stats != (peer.Stats{}) {
		t.Errorf("stats %+v; want none", m.Stats)
	}
}

func TestColumns(t *testing.T) {
	t.Parallel()
	keys, deltas, sum, err := peer.Columns(map[string]string{"a": "3", "b": "-1", "c": "10"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for i, k := range keys {
		got[k] = deltas[i]
	}
	if !maps.Equal(got, map[string]int64{"a": 3, "b": -1, "c": 10}) || sum != 12 {
		t.Errorf("got %v sum %d; want a:3 b:-1 c:10 sum 12", got, sum)
	}
	if _, _, _, err := peer.Columns(map[string]string{"a": "1.5"}); err == nil {
		t.Error("a non-integer value: nil error; want one")
	}
}

func TestParseStopped(t *testing.T) {
	t.Parallel()
	f := func(line string, want peer.Stats, wantOK bool) {
		t.Helper()
		if got, ok := peer.ParseStopped(line); got != want || ok != wantOK {
			t.Errorf("%q: got %+v, %v; want %+v, %v", line, got, ok, want, wantOK)
		}
	}
	f(peer.StoppedLine+" moves=3 rows=10 increments=42", peer.Stats{Moves: 3, Rows: 10, Increments: 42}, true)
	f("peer worker ready", peer.Stats{}, false)
	f(peer.StoppedLine+" moves=x", peer.Stats{}, false)
}
