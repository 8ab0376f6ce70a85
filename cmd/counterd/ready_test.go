package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/pending"
)

// /readyz's reason names the partitions behind in a clause of its own,
// then the flusher's. Before, errors.Join put only a newline between
// them, read as "...; the other partitions commit rounds are not
// committing ...".
func TestReadyTextNamesBehindPartitions(t *testing.T) {
	t.Parallel()
	f := func(behind string, err error, want string) {
		t.Helper()
		got := withBehind(behind, err)
		switch {
		case want == "" && got != nil:
			t.Errorf("withBehind(%q, nil): %q; want nil", behind, got)
		case want != "" && (got == nil || got.Error() != want):
			t.Errorf("withBehind(%q, %v): %v; want %q", behind, err, got, want)
		case err != nil && !errors.Is(got, err):
			t.Errorf("withBehind(%q, %v) does not wrap the flusher's error", behind, err)
		}
	}
	stalled := fmt.Errorf("%w: round 12 queued for 7s, attempt 1 still running (2 rounds queued)", pending.ErrNotCommitting)
	f("", nil, "")
	f("", stalled, "rounds are not committing: round 12 queued for 7s, attempt 1 still running (2 rounds queued)")
	f("partition 1 (since round 12)", nil, "behind: partition 1 (since round 12), while the other partitions commit")
	f("partition 1 (since round 12), partition 3 (since round 14)", stalled,
		"behind: partition 1 (since round 12), partition 3 (since round 14), while the other partitions commit; "+
			"rounds are not committing: round 12 queued for 7s, attempt 1 still running (2 rounds queued)")
}
