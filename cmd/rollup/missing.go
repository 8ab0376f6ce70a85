package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
	"github.com/counterd/counterd/internal/targets"
)

// sampleKeys bounds the keys one log line names per target.
const sampleKeys = 10

// missingRows counts the keys a fold put into counters but not into
// their target's column, because the row does not exist or the id does
// not parse, and logs each pass's with a sample of keys so the app can
// reconcile them from counter_totals.
type missingRows struct {
	mu      sync.Mutex
	metric  map[*targets.Target]*metrics.Counter
	perPass map[*targets.Target]*passMissing
	order   []*targets.Target
}

type passMissing struct {
	n      int
	sample []string
}

func newMissing(set *metrics.Set, ts *targets.Set) *missingRows {
	m := &missingRows{metric: map[*targets.Target]*metrics.Counter{}, order: ts.Targets()}
	for _, t := range ts.Targets() {
		// Registered up front, so every target shows 0 before its first miss.
		m.metric[t] = exposition.Counter(set, fmt.Sprintf(`counterd_rollup_target_missing_keys_total{target=%s}`, strconv.Quote(t.String())),
			"Keys folded into counters but not into the target's column: no row, or an id that does not parse.")
	}
	return m
}

func (m *missingRows) startPass() {
	m.mu.Lock()
	m.perPass = map[*targets.Target]*passMissing{}
	m.mu.Unlock()
}

// record is FoldOptions.OnMissing: called once a chunk has committed.
func (m *missingRows) record(t *targets.Target, keys []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metric[t].Add(len(keys))
	p := m.perPass[t]
	if p == nil {
		p = &passMissing{}
		m.perPass[t] = p
	}
	p.n += len(keys)
	for _, k := range keys {
		if len(p.sample) == sampleKeys {
			break
		}
		p.sample = append(p.sample, k)
	}
}

// log writes one warning per target that missed rows in this pass.
func (m *missingRows) log(ctx context.Context, log *slog.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.order {
		if p := m.perPass[t]; p != nil {
			log.WarnContext(ctx, "rollup target rows missing: folded into counters only; reconcile from counter_totals",
				"target", t.String(), "keys", p.n, "sample", p.sample)
		}
	}
}
