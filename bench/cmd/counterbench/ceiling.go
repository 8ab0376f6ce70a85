package main

import (
	"context"
	"fmt"

	"github.com/counterd/counterd/bench/internal/pattern"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
)

// ceilingDists are the distributions the ceiling uses: those of the run
// that spread over many keys (one hot key cannot fill a batch).
func ceilingDists(ds []keyspace.Dist) []keyspace.Dist {
	var out []keyspace.Dist
	for _, d := range ds {
		if d != keyspace.Hot {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = []keyspace.Dist{keyspace.Uniform}
	}
	return out
}

// ceiling measures PostgreSQL's multi-row upsert from one connection and
// from two on disjoint keys.
func (b *bench) ceiling(ctx context.Context) error {
	b.progress.note(fmt.Sprintf("creating %s (%s keys)", pattern.CeilingTable, report.Thousands(int64(b.cfg.Keyspace))))
	if err := pattern.SetupCeiling(ctx, b.pool, b.cfg.Keyspace); err != nil {
		return err
	}
	for _, d := range ceilingDists(b.cfg.dists()) {
		for _, conns := range []int{1, 2} {
			b.progress.step("ceiling %s connections=%d", d, conns)
			row := report.Row{Section: report.Ceiling, Approach: "ceiling", Keys: d.String(), Clients: conns}
			res, err := pattern.Ceiling(ctx, b.pool, pattern.CeilingLoad{
				Conns: conns, Duration: b.cfg.Duration, Batch: b.cfg.CeilingBatch,
				Dist: d, Keys: b.cfg.Keyspace, Seed: b.nextSeed(),
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			row.Pipeline = res.Batch
			row.Elapsed, row.Increments = res.Elapsed, res.Increments
			row.Rate = float64(res.Increments) / res.Elapsed.Seconds()
			row.P50, row.P99 = res.P50, res.P99
			row.Checked, row.Stored, row.RowsWritten = err == nil, res.Stored, res.Rows
			b.add(row, err)
		}
	}
	return nil
}
