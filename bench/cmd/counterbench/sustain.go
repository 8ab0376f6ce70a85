package main

import (
	"context"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// The sustained load: as many connections as the ingest run, each
// pipelining like a client library that batches, over Zipf keys as page
// views fall.
const (
	sustainClients  = 50
	sustainPipeline = 16
	sustainKeys     = keyspace.Zipf
	// sampleEvery is how often the run reads counterd's metrics.
	sampleEvery = time.Second
)

// sustain offers counterd a paced load for a long while, reading its
// metrics once a second, to show whether PostgreSQL keeps up with what
// counterd accepts.
func (b *bench) sustain(ctx context.Context) error {
	b.progress.step("sustain counterd %.0f/s from %d clients -P %d, %s keys, for %v",
		b.cfg.SustainRate, sustainClients, sustainPipeline, sustainKeys, b.cfg.SustainDuration)
	row := report.Row{
		Section: report.Sustain, Approach: "counterd", Keys: sustainKeys.String(),
		Clients: sustainClients, Pipeline: sustainPipeline, Offered: b.cfg.SustainRate,
	}
	err := b.sustainRun(ctx, &row)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.add(row, err)
	return nil
}

func (b *bench) sustainRun(ctx context.Context, row *report.Row) error {
	srv, err := b.startCounterd(ctx)
	if err != nil {
		return err
	}
	load := loadgen.Config{
		Network: "unix", Addr: srv.socket,
		Clients: sustainClients, Pipeline: sustainPipeline, Duration: b.cfg.SustainDuration, Rate: b.cfg.SustainRate,
		Source: b.sourceFor(sustainKeys), Seed: b.nextSeed(),
	}
	m, err := b.counterdAround(ctx, srv, row, func() error {
		rec, err := srv.record(ctx, sampleEvery)
		if err != nil {
			return err
		}
		res, loadErr := loadgen.Run(ctx, load)
		series, recErr := rec.stop(ctx)
		if loadErr != nil {
			return loadErr
		}
		if recErr != nil {
			return recErr
		}
		fillFromLoad(row, res)
		row.Series = series
		return nil
	})
	if err != nil {
		return err
	}
	if len(row.Series) == 0 {
		row.Note = "counterd serves no metrics, so there is no series"
		return nil
	}
	// m was read after the FLUSH, so it includes the drain's rounds.
	first, last := row.Series[0], sampleOf(m, 0)
	if secs := last.FlushSeconds - first.FlushSeconds; secs > 0 {
		row.WriteRate = (last.FlushKeys - first.FlushKeys) / secs
	}
	row.Rounds = int64(last.BatchKeysCount - first.BatchKeysCount)
	return nil
}

// sampleOf picks the metrics a sustained load watches out of a scrape.
func sampleOf(m map[string]float64, since time.Duration) report.Sample {
	keys, _ := slotRowsOf(m)
	return report.Sample{
		Seconds:        since.Seconds(),
		PendingKeys:    m["counterd_pending_keys"],
		QueuedRounds:   m["counterd_queued_rounds"],
		FlushKeys:      keys,
		FlushSeconds:   m["counterd_flush_duration_seconds_sum"],
		BatchKeysSum:   m["counterd_flush_batch_keys_sum"],
		BatchKeysCount: m["counterd_flush_batch_keys_count"],
	}
}

// recorder samples counterd's metrics at a fixed interval, from a first
// sample when it starts to a last one when it stops.
type recorder struct {
	srv     *counterdServer
	start   time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	samples []report.Sample
	err     error // of a sample the loop took; read after done
}

// record takes the first sample and starts sampling every interval.
func (c *counterdServer) record(ctx context.Context, every time.Duration) (*recorder, error) {
	r := &recorder{srv: c, start: time.Now(), done: make(chan struct{})}
	if err := r.take(ctx); err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go r.loop(loopCtx, every)
	return r, nil
}

func (r *recorder) loop(ctx context.Context, every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.take(ctx); err != nil {
				// A scrape cut short by stop is not a failure.
				if ctx.Err() == nil {
					r.err = err
				}
				return
			}
		}
	}
}

// stop ends the sampling with a last sample and returns the series.
func (r *recorder) stop(ctx context.Context) ([]report.Sample, error) {
	r.cancel()
	<-r.done
	if r.err != nil {
		return r.samples, r.err
	}
	if err := r.take(ctx); err != nil {
		return r.samples, err
	}
	return r.samples, nil
}

// take appends a sample; without a metrics listener there is none.
func (r *recorder) take(ctx context.Context) error {
	m, err := r.srv.scrape(ctx)
	if err != nil || m == nil {
		return err
	}
	r.samples = append(r.samples, sampleOf(m, time.Since(r.start)))
	return nil
}
