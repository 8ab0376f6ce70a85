package journal

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

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
	exposition.Gauge(set, `counterd_journal_bytes`, "Bytes of live journal segments (recovered, rotated but not yet removed, and current), headers included.",
		func() float64 { return float64(j.Bytes()) })
	exposition.Gauge(set, `counterd_journal_max_bytes`, "COUNTERD_JOURNAL_MAX_BYTES: appends are refused (-BUSY) once counterd_journal_bytes would pass it (0: no limit).", func() float64 { return float64(j.maxBytes) })
	return journalMetrics{
		appends:      exposition.Counter(set, `counterd_journal_appends_total`, "Records appended to the journal."),
		appended:     exposition.Counter(set, `counterd_journal_appended_bytes_total`, "Bytes appended to the journal."),
		appendErrors: exposition.Counter(set, `counterd_journal_append_errors_total`, "Journal appends refused or failed."),
		fsyncs:       exposition.Counter(set, `counterd_journal_fsyncs_total`, "fsyncs of the journal."),
		fsyncErrors:  exposition.Counter(set, `counterd_journal_fsync_errors_total`, "fsyncs of the journal that failed."),
		// 100 µs .. 26 s: an fsync on a fast disk is well under the
		// default buckets' 5 ms floor.
		fsyncSeconds: exposition.Histogram(set, `counterd_journal_fsync_seconds`, "Time one fsync of the journal took.",
			metrics.ExponentialBuckets(0.0001, 4, 10)),
		corruptTails: exposition.Counter(set, `counterd_journal_corrupt_tails_total`,
			"Torn or damaged segment tails recovery cut off."),
		skippedRecords: exposition.Counter(set, `counterd_journal_skipped_records_total`,
			"Damaged records in the middle of a segment that recovery skipped."),
	}
}
