package cluster

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// TestHashTextMatchesServer compares HashText with the server's own
// hashtext over every tail length, multi-block keys, bytes above 0x7f
// (UTF-8) and the empty key.
func TestHashTextMatchesServer(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"", "a", "post:42", "user:7", "ü", "日本語のキー", "post:42:views"}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789:_-äöü€"
	runes := []rune(alphabet)
	for n := range 80 {
		for range 20 {
			r := make([]rune, n)
			for i := range r {
				r[i] = runes[rng.IntN(len(runes))]
			}
			keys = append(keys, string(r))
		}
	}
	want := make([]int32, len(keys))
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT array_agg(hashtext(k) ORDER BY i) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i)`,
		keys).Scan(&want); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got := HashText(k); got != want[i] {
			t.Errorf("HashText(%q) = %d, server says %d", k, got, want[i])
		}
	}
}

func TestPartition(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 4, 8} {
		seen := make(map[int]bool)
		for i := range 1000 {
			p := Partition("k"+string(rune('a'+i%26))+string(rune(i)), n)
			if p < 0 || p >= n {
				t.Fatalf("Partition(_, %d) = %d", n, p)
			}
			seen[p] = true
		}
		if len(seen) != n {
			t.Errorf("%d partitions: keys landed on %d of them", n, len(seen))
		}
	}
}

func BenchmarkHashText(b *testing.B) {
	for b.Loop() {
		HashText("post:123456:views")
	}
}
