package report

import (
	"testing"
	"time"
)

func TestStalenessOf(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	f := func(delays []time.Duration, want Staleness) {
		t.Helper()
		if got := StalenessOf(delays); got != want {
			t.Errorf("StalenessOf(%v) = %+v; want %+v", delays, got, want)
		}
	}
	f(nil, Staleness{})
	f([]time.Duration{ms(7)}, Staleness{Probes: 1, P50: ms(7), P99: ms(7), Max: ms(7)})
	f([]time.Duration{ms(4), ms(1), ms(3), ms(2)}, Staleness{Probes: 4, P50: ms(2), P99: ms(4), Max: ms(4)})
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(100 - i)
	}
	f(hundred, Staleness{Probes: 100, P50: ms(50), P99: ms(99), Max: ms(100)})
}

// TestFleetRow: a fleet row's per-increment figures and its CSV columns.
func TestFleetRow(t *testing.T) {
	t.Parallel()
	r := Row{Section: Fleet, Approach: Counterd, Daemons: 2, Increments: 200000, Transactions: 30, WALBytes: 2_000_000,
		DaemonCPU: []time.Duration{time.Second, 2 * time.Second}, CPU: CPU{Server: Share{Time: 3 * time.Second, Known: true}},
		Staleness: Staleness{Probes: 3, P50: 120 * time.Millisecond, P99: time.Second, Max: time.Second}}
	if got := r.TransactionsPer100k(); got != 15 {
		t.Errorf("transactions per 100k: got %v; want 15", got)
	}
	if got := r.SidecarMicrosPerIncr(); got != 15 {
		t.Errorf("sidecar µs/incr: got %v; want 15", got)
	}
	v := map[string]string{}
	fleetRecord(r, v)
	for col, want := range map[string]string{"daemons": "2", "transactions": "30", "transactions_per_100k": "15.00", "wal_bytes_per_incr": "10.00",
		"daemon_cpu_us_per_own_incr": "10.000 20.000", "probes": "3", "staleness_p50_ms": "120.0", "staleness_max_ms": "1000.0"} {
		if v[col] != want {
			t.Errorf("%s: got %q; want %q", col, v[col], want)
		}
	}
	peer := Row{Approach: Peer, Increments: 1000, CPU: CPU{Server: Share{Time: time.Millisecond, Known: true}, Worker: Share{Time: 2 * time.Millisecond, Known: true}}}
	if got := peer.SidecarMicrosPerIncr(); got != 3 {
		t.Errorf("peer's sidecar µs/incr: got %v; want redis-server's and the worker's, 3", got)
	}
}
