package main

import (
	"context"
	"fmt"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// latencyServers are the servers the latency section offers each rate:
// counterd, redis-server with appendfsync everysec (the durable reference
// of the p99 target) and redis-server keeping nothing.
var latencyServers = []string{report.Counterd, report.RedisEverysec, report.RedisPlain}

// latency offers every one of latencyServers the same paced load of
// unpipelined increments at each rate and records the latency each one
// gives: p50, p99, p99.9 and the longest.
func (b *bench) latency(ctx context.Context) error {
	for _, rate := range b.cfg.LatencyRates {
		for _, target := range latencyServers {
			step := fmt.Sprintf("latency %s %.0f/s from %d clients", target, rate, b.cfg.LatencyClients)
			if err := b.latencyCell(ctx, step, target, rate, b.cfg.LatencyClients); err != nil {
				return err
			}
		}
	}
	return nil
}

// latencyCell offers target rate unpipelined INCR/s from clients for
// COUNTERBENCH_DURATION and adds the latency row.
func (b *bench) latencyCell(ctx context.Context, step, target string, rate float64, clients int) error {
	b.progress.step("%s", step)
	row := report.Row{
		Section: report.Latency, Approach: target, Keys: keyspace.Uniform.String(),
		Clients: clients, Pipeline: 1, Offered: rate,
	}
	load := loadgen.Config{
		Clients: clients, Pipeline: 1, Duration: b.cfg.Duration, Rate: rate,
		Source: b.sourceFor(keyspace.Uniform), Seed: b.nextSeed(), PerSecond: true,
	}
	var err error
	if target == report.Counterd {
		err = b.counterdMeasure(ctx, &row, load)
	} else {
		err = b.redisMeasureOn(ctx, flavorOf(target), &row, load)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.add(row, err)
	return nil
}
