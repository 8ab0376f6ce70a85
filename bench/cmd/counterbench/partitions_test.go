package main

import (
	"slices"
	"testing"
)

func TestRotate(t *testing.T) {
	t.Parallel()
	f := func(k int, want ...int) {
		t.Helper()
		if got := rotate([]int{0, 1, 2, 4}, k); !slices.Equal(got, want) {
			t.Errorf("rotate by %d: got %v; want %v", k, got, want)
		}
	}
	f(0, 0, 1, 2, 4)
	f(1, 1, 2, 4, 0)
	f(3, 4, 0, 1, 2)
	f(5, 1, 2, 4, 0)
	if got := rotate([]int(nil), 3); got != nil {
		t.Errorf("rotate of nothing: got %v; want nil", got)
	}
}

// TestPartitionURLs: the partitions' databases are named as
// scripts/cluster.sh names them, on the proxy's server with its
// parameters.
func TestPartitionURLs(t *testing.T) {
	t.Parallel()
	got, err := partitionURLs("postgres://postgres@/counterbench_2_proxy?host=%2Ftmp%2Fpg&port=5432&sslmode=disable", "counterbench_2", 2)
	want := []string{
		"postgres://postgres@/counterbench_2_p0?host=%2Ftmp%2Fpg&port=5432&sslmode=disable",
		"postgres://postgres@/counterbench_2_p1?host=%2Ftmp%2Fpg&port=5432&sslmode=disable",
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if _, err := partitionURLs("host=/tmp dbname=x", "x", 1); err == nil {
		t.Error("a DSN: no error; want one saying the URL is not a postgres:// URL")
	}
	if got := clusterName("counterbench", 4); got != "counterbench_4" {
		t.Errorf("clusterName: got %q; want counterbench_4", got)
	}
}
