package journal

import "github.com/VictoriaMetrics/metrics"

type journalMetrics struct {
	appends      *metrics.Counter
	appended     *metrics.Counter
	appendErrors *metrics.Counter
	fsyncs       *metrics.Counter
	fsyncErrors  *metrics.Counter
	fsyncSeconds *metrics.PrometheusHistogram
	corruptTails *metrics.Counter
	// skippedRecords counts damaged records recovery skipped.
	skippedRecords *metrics.Counter
}

// newJournalMetrics registers the journal's metrics once Open has
// succeeded, so a failed Open leaves the set untouched and can be retried.
func newJournalMetrics(set *metrics.Set, j *Journal) journalMetrics {
	set.NewGauge(`counterd_journal_bytes`, func() float64 { return float64(j.Bytes()) })
	return journalMetrics{
		appends:      set.NewCounter(`counterd_journal_appends_total`),
		appended:     set.NewCounter(`counterd_journal_appended_bytes_total`),
		appendErrors: set.NewCounter(`counterd_journal_append_errors_total`),
		fsyncs:       set.NewCounter(`counterd_journal_fsyncs_total`),
		fsyncErrors:  set.NewCounter(`counterd_journal_fsync_errors_total`),
		// 100 µs .. 26 s: an fsync on a fast disk is well under the
		// default buckets' 5 ms floor.
		fsyncSeconds:   set.NewPrometheusHistogramExt(`counterd_journal_fsync_seconds`, metrics.ExponentialBuckets(0.0001, 4, 10)),
		corruptTails:   set.NewCounter(`counterd_journal_corrupt_tails_total`),
		skippedRecords: set.NewCounter(`counterd_journal_skipped_records_total`),
	}
}
