package pending

import "github.com/VictoriaMetrics/metrics"

type bufferMetrics struct {
	accepted          *metrics.Counter
	rejected          *metrics.Counter
	flushes           *metrics.Counter
	flushErrors       *metrics.Counter
	duplicates        *metrics.Counter
	replayedRounds    *metrics.Counter
	flushDuration     *metrics.PrometheusHistogram
	batchKeys         *metrics.PrometheusHistogram
	keysWritten       *metrics.Counter
	identityConflicts *metrics.Counter
}

func newBufferMetrics(set *metrics.Set, b *Buffer) *bufferMetrics {
	set.NewGauge(`counterd_pending_keys`, func() float64 { return float64(b.PendingKeys()) })
	set.NewGauge(`counterd_queued_rounds`, func() float64 { return float64(b.QueuedRounds()) })
	// How long rounds accumulate now (COUNTERD_FLUSH_INTERVAL up to
	// COUNTERD_FLUSH_INTERVAL_MAX).
	set.NewGauge(`counterd_flush_interval_seconds`, func() float64 { return b.flusher.Interval().Seconds() })
	// Keys whose stored total is beyond int64 (counter_overflows).
	set.NewGauge(`counterd_overflowed_keys`, func() float64 { return float64(b.flusher.Overflowed()) })
	return &bufferMetrics{
		accepted:       set.NewCounter(`counterd_increments_accepted_total`),
		rejected:       set.NewCounter(`counterd_increments_rejected_total`),
		flushes:        set.NewCounter(`counterd_flushes_total`),
		flushErrors:    set.NewCounter(`counterd_flush_errors_total`),
		duplicates:     set.NewCounter(`counterd_flush_duplicates_total`),
		replayedRounds: set.NewCounter(`counterd_replayed_rounds_total`),
		// Prometheus histograms (le buckets), which every scraper
		// understands: 5 ms .. 10 s for rounds, 1 .. 262,144 keys per round.
		flushDuration: set.NewPrometheusHistogram(`counterd_flush_duration_seconds`),
		batchKeys:     set.NewPrometheusHistogramExt(`counterd_flush_batch_keys`, metrics.ExponentialBuckets(1, 4, 10)),
		// One slot row written per key of a committed round; with
		// counterd_increments_accepted_total it gives rows per increment.
		keysWritten: set.NewCounter(`counterd_flush_keys_total`),
		// A round this run created that the store already had: a bug.
		identityConflicts: set.NewCounter(`counterd_identity_conflicts_total`),
	}
}
