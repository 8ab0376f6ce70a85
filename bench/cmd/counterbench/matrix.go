package main

import (
	"context"
	"fmt"
	"math"

	"github.com/counterd/counterd/bench/internal/pattern"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// matrix measures every approach at every distribution and concurrency,
// approach by approach so each one's table or server is set up once.
func (b *bench) matrix(ctx context.Context) error {
	for _, name := range b.cfg.Approaches {
		a, _ := lookupApproach(name)
		if a.kind == sqlKind {
			b.progress.note(fmt.Sprintf("creating %s (%s keys)", a.pattern.Table(), report.Thousands(int64(b.cfg.Keyspace))))
			if err := a.pattern.Setup(ctx, b.pool, b.cfg.Keyspace); err != nil {
				return err
			}
		}
		for _, d := range b.cfg.dists() {
			for _, c := range b.cfg.Clients {
				if err := ctx.Err(); err != nil {
					return err
				}
				b.progress.step("%s %s c=%d", a.name, d, c)
				row := report.Row{Section: report.Matrix, Approach: a.name, Keys: d.String(), Clients: c, Pipeline: max(a.pipeline, 1)}
				err := b.cell(ctx, a, d, c, &row)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(row, err)
			}
		}
	}
	return nil
}

func (b *bench) cell(ctx context.Context, a approach, d keyspace.Dist, clients int, row *report.Row) error {
	load := loadgen.Config{
		Clients: clients, Pipeline: a.pipeline, Duration: b.cfg.Duration,
		Source: b.sourceFor(d), Seed: b.nextSeed(),
	}
	switch a.kind {
	case counterdKind:
		return b.counterdMeasure(ctx, row, load)
	case redisKind:
		return b.redisMeasure(ctx, row, load)
	}
	res, err := pattern.Run(ctx, b.pool, a.pattern, pattern.Load{
		Clients: clients, Duration: b.cfg.Duration, Dist: d, Keys: b.cfg.Keyspace, Seed: load.Seed,
	})
	if err != nil {
		return err
	}
	row.Elapsed, row.Increments, row.Errors = res.Elapsed, res.Ops, res.Errors
	row.Rate, row.P50, row.P99 = res.Rate(), res.P50, res.P99
	row.Checked, row.Stored, row.RowsWritten = true, res.Stored, res.Rows
	if a.pattern.Accounting == pattern.Estimated {
		// Each increment adds N with probability 1/N: variance N-1.
		row.Estimate = true
		row.Bound95 = int64(math.Ceil(1.96 * math.Sqrt(float64(res.Ops)*(pattern.SampleN-1))))
	}
	if res.Err != nil {
		row.Note = "first error: " + oneLine(res.Err.Error())
	}
	return nil
}
