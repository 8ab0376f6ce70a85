package report

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"
)

// KeepUpFactor is how much the second half's most pending keys may exceed
// the first half's before a sustained load counts as outrunning the
// database: a backlog that keeps growing shows up as a larger peak later,
// while a steady one only jitters.
const KeepUpFactor = 1.5

// PendingMax returns the most keys counterd held pending in the first and
// the second half of the load, split at half the last sample's time; ok
// is false with fewer than two samples.
func (r Row) PendingMax() (first, second float64, ok bool) {
	if len(r.Series) < 2 {
		return 0, 0, false
	}
	half := r.Series[len(r.Series)-1].Seconds / 2
	for _, s := range r.Series {
		if s.Seconds < half {
			first = max(first, s.PendingKeys)
		} else {
			second = max(second, s.PendingKeys)
		}
	}
	return first, second, true
}

// KeepsUp reports whether the database kept up with the load: the second
// half's most pending keys are within KeepUpFactor of the first half's.
func (r Row) KeepsUp() bool {
	first, second, ok := r.PendingMax()
	return ok && (second == 0 || second <= KeepUpFactor*first)
}

// busy is the share of the load's time counterd spent committing rounds:
// near 1, the database is never idle and any more load must wait.
func (r Row) busy() (float64, bool) {
	if len(r.Series) < 2 {
		return 0, false
	}
	first, last := r.Series[0], r.Series[len(r.Series)-1]
	if last.Seconds <= first.Seconds {
		return 0, false
	}
	return (last.FlushSeconds - first.FlushSeconds) / (last.Seconds - first.Seconds), true
}

// maxQueued is the most rounds that waited for the database at once.
func (r Row) maxQueued() float64 {
	var m float64
	for _, s := range r.Series {
		m = max(m, s.QueuedRounds)
	}
	return m
}

func sustain(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Sustain)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Sustained load: does PostgreSQL keep up?\n\n")
	fmt.Fprintf(b, "Pipelined clients offer counterd a paced rate for a long while, and counterd's metrics are read once a second. counterd accumulates increments into a round while the previous round is written; when the database is slower than the load, the rounds, and the keys pending in them, grow. The load *keeps up* when the most keys pending in the second half is at most %.1f× the most in the first half. Pending keys swing with every round, and one sample a second catches them at any point of the swing, so a short run's verdict is noisy; the share of time spent committing rounds says more plainly how close the database is to its limit. The *database write speed* is slot rows committed per second spent committing rounds (counterd_flush_keys_total over counterd_flush_duration_seconds), beside the ceiling section's single-connection upsert for the same keys; small rounds pay a round trip and a commit each, so it nears the ceiling only when rounds are large.\n\n", KeepUpFactor)
	for _, x := range rows {
		if x.Missing {
			table(b, []string{"sustain", ""}, [][]string{{x.Approach + " " + x.Keys, "missing: " + x.Note}})
			continue
		}
		body := [][]string{
			{"offered", fmt.Sprintf("%s INCR/s from %d clients, %d per round trip, %s keys, for %v", Thousands(int64(x.Offered)), x.Clients, x.Pipeline, x.Keys, x.Elapsed.Round(100*time.Millisecond))},
			{"achieved", Thousands(int64(x.Rate)) + " INCR/s acknowledged"},
			{"latency p50 / p99", Duration(x.P50) + " / " + Duration(x.P99)},
			{"total", totalCell(x)},
		}
		if first, second, ok := x.PendingMax(); ok {
			verdict := "falls behind"
			if x.KeepsUp() {
				verdict = "keeps up"
			}
			body = append(body,
				[]string{"pending keys, most in 1st / 2nd half", fmt.Sprintf("%s / %s: %s", Thousands(int64(first)), Thousands(int64(second)), verdict)},
				[]string{"queued rounds, most", Thousands(int64(x.maxQueued()))})
		}
		if v, ok := x.busy(); ok {
			body = append(body, []string{"time spent committing rounds", fmt.Sprintf("%.0f%% of the load", 100*v)})
		}
		body = append(body,
			[]string{"final FLUSH (drain)", drainCell(x)},
			[]string{"committed", committedCell(&x) + " INCR/s (load + drain)"})
		if x.Rounds > 0 && x.RowsWritten >= 0 {
			body = append(body, []string{"rounds committed", fmt.Sprintf("%s, %s slot rows each on average", Thousands(x.Rounds), Thousands(x.RowsWritten/x.Rounds))})
		}
		write := "unknown"
		if x.WriteRate > 0 {
			write = Thousands(int64(x.WriteRate)) + " slot rows/s while a round is written"
		}
		body = append(body, []string{"database write speed", write})
		if c := ceilingFor(r.Rows, x.Keys); c != nil && x.WriteRate > 0 {
			body = append(body, []string{"ceiling, " + x.Keys + ", 1 connection", fmt.Sprintf("%s rows/s; counterd writes at %s of it", Thousands(int64(c.RowRate())), times(x.WriteRate/c.RowRate()))})
		}
		body = append(body, []string{"metric samples", fmt.Sprintf("%d (%s)", len(x.Series), SustainCSVFile)})
		table(b, []string{"sustain", x.Approach}, body)
	}
	fmt.Fprintf(b, "![counterd's pending keys over time](%s)\n\n", SustainChartFile)
}

// ceilingFor returns the single-connection ceiling row for keys, if it
// was measured.
func ceilingFor(rows []Row, keys string) *Row {
	for _, c := range section(rows, Ceiling) {
		if c.Keys == keys && c.Clients == 1 && !c.Missing && c.RowRate() > 0 {
			return &c
		}
	}
	return nil
}

// SeriesColumns are sustain.csv's header: one record per metric sample
// of every sustain row.
var SeriesColumns = []string{
	"approach", "keys", "seconds", "pending_keys", "queued_rounds",
	"flush_keys_total", "flush_duration_seconds_sum", "flush_batch_keys_sum", "flush_batch_keys_count",
}

// WriteSeriesCSV writes the metric samples of r's sustain rows.
func WriteSeriesCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(SeriesColumns); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, x := range section(r.Rows, Sustain) {
		for _, s := range x.Series {
			rec := []string{x.Approach, x.Keys, strconv.FormatFloat(s.Seconds, 'f', 3, 64), f(s.PendingKeys), f(s.QueuedRounds),
				f(s.FlushKeys), f(s.FlushSeconds), f(s.BatchKeysSum), f(s.BatchKeysCount)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
