package pending

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

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
	exposition.Gauge(set, `counterd_pending_keys`, "Keys with increments accepted but not yet committed.",
		func() float64 { return float64(b.PendingKeys()) })
	exposition.Gauge(set, `counterd_queued_rounds`, "Rounds cut and waiting to be written to PostgreSQL.",
		func() float64 { return float64(b.QueuedRounds()) })
	exposition.Gauge(set, `counterd_oldest_round_seconds`,
		"How long the oldest round not yet committed has waited since it was cut (0: none queued).",
		func() float64 { return b.OldestRound().Seconds() })
	exposition.Gauge(set, `counterd_flush_interval_seconds`,
		"How long rounds accumulate now, between COUNTERD_FLUSH_INTERVAL and COUNTERD_FLUSH_INTERVAL_MAX.",
		func() float64 { return b.flusher.Interval().Seconds() })
	for _, reason := range []string{"base", "load", "fleet"} {
		exposition.Gauge(set, `counterd_flush_interval_reason{reason="`+reason+`"}`,
			"What sets counterd_flush_interval_seconds now (1): base (COUNTERD_FLUSH_INTERVAL), load (PostgreSQL busy writing rounds) or fleet (the live daemons sharing the database, COUNTERD_FLEET_ROUNDS).",
			func() float64 {
				if b.flusher.pace.reason() == reason {
					return 1
				}
				return 0
			})
	}
	exposition.Gauge(set, `counterd_fleet_daemons`,
		"Live counterd daemons writing into this database, this one included, from their heartbeats (0: not known yet, or no journal).",
		func() float64 { return float64(b.Fleet()) })
	exposition.Gauge(set, `counterd_overflowed_keys`,
		"Keys whose stored total is beyond int64 (counter_overflows), checked every 10 s.",
		func() float64 { return float64(b.flusher.Overflowed()) })
	return &bufferMetrics{
		accepted:       exposition.Counter(set, `counterd_increments_accepted_total`, "Increments accepted."),
		rejected:       exposition.Counter(set, `counterd_increments_rejected_total`, "Increments refused with an error reply."),
		flushes:        exposition.Counter(set, `counterd_flushes_total`, "Rounds written to PostgreSQL, duplicates included."),
		flushErrors:    exposition.Counter(set, `counterd_flush_errors_total`, "Failed attempts to write a round; the round is retried."),
		duplicates:     exposition.Counter(set, `counterd_flush_duplicates_total`, "Rounds the database already had, recognised by their identity and skipped."),
		replayedRounds: exposition.Counter(set, `counterd_replayed_rounds_total`, "Rounds replayed from the journal at start."),
		// Prometheus histograms (le buckets), which every scraper
		// understands: 5 ms .. 10 s for rounds, 1 .. 262,144 keys per round.
		flushDuration: exposition.Histogram(set, `counterd_flush_duration_seconds`, "Time one round took to write.", nil),
		batchKeys: exposition.Histogram(set, `counterd_flush_batch_keys`, "Keys in one round written to PostgreSQL.",
			metrics.ExponentialBuckets(1, 4, 10)),
		// One slot row written per key of a committed round; with
		// counterd_increments_accepted_total it gives rows per increment.
		keysWritten: exposition.Counter(set, `counterd_flush_keys_total`, "Changes written by committed rounds: one per key, kind and bucket of a round (a unique member or an INCRONCE view is one each)."),
		// A round this run created that the store already had: a bug.
		identityConflicts: exposition.Counter(set, `counterd_identity_conflicts_total`,
			"Rounds this run created that the store already had: a bug, logged as an error."),
	}
}
