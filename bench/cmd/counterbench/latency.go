package main

import (
	"context"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// latency offers counterd and redis-server the same paced load of
// unpipelined increments and records the latency each one gives.
func (b *bench) latency(ctx context.Context) error {
	for _, rate := range b.cfg.LatencyRates {
		for _, target := range []string{"counterd", "redis-server"} {
			b.progress.step("latency %s %.0f/s from %d clients", target, rate, b.cfg.LatencyClients)
			row := report.Row{
				Section: report.Latency, Approach: target, Keys: keyspace.Uniform.String(),
				Clients: b.cfg.LatencyClients, Pipeline: 1, Offered: rate,
			}
			load := loadgen.Config{
				Clients: b.cfg.LatencyClients, Pipeline: 1, Duration: b.cfg.Duration, Rate: rate,
				Source: b.sourceFor(keyspace.Uniform), Seed: b.nextSeed(),
			}
			var err error
			if target == "counterd" {
				err = b.counterdMeasure(ctx, &row, load)
			} else {
				err = b.redisMeasure(ctx, &row, load)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(row, err)
		}
	}
	return nil
}
