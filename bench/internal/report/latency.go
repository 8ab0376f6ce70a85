package report

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// MaxGapTarget is the longest a paced unpipelined load may wait for a
// reply from counterd: no stall over 100 ms.
const MaxGapTarget = 100 * time.Millisecond

// latencyAgainstEverysec writes, for every offered rate and client count
// with both measured, counterd's p99, p99.9 and longest latency next to
// redis-server everysec's, against the targets: p99 at most everysec's,
// and no latency over MaxGapTarget (under a paced load, a stall of d
// makes a reply at least d late).
func latencyAgainstEverysec(b *bufio.Writer, rows []Row) {
	type cell struct {
		rate    float64
		clients int
	}
	var cells []cell
	for _, x := range rows {
		c := cell{x.Offered, x.Clients}
		if x.Approach == Counterd && !x.Missing && !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
	}
	var body [][]string
	for _, c := range cells {
		var cd, ev *Row
		for i := range rows {
			x := &rows[i]
			if x.Offered != c.rate || x.Clients != c.clients || x.Missing {
				continue
			}
			switch x.Approach {
			case Counterd:
				cd = x
			case RedisEverysec:
				ev = x
			}
		}
		if ev == nil {
			continue
		}
		p99 := verdict(cd.P99 <= ev.P99)
		gap := "—"
		if cd.Max > 0 {
			gap = verdict(cd.Max <= MaxGapTarget)
		}
		body = append(body, []string{
			Thousands(int64(c.rate)), fmt.Sprint(c.clients),
			Duration(cd.P99) + " / " + Duration(ev.P99), p99,
			Duration(cd.P999) + " / " + Duration(ev.P999),
			Duration(cd.Max) + " / " + Duration(ev.Max), gap,
		})
	}
	if len(body) == 0 {
		return
	}
	fmt.Fprintf(b, "counterd against redis-server with appendfsync everysec at each offered rate. Targets: counterd's p99 at most everysec's, and no reply later than %s (the cell's length bounds how long a stall it can see; run it with COUNTERBENCH_DURATION=60s for the 60 s target).\n\n", Duration(MaxGapTarget))
	table(b, []string{"offered/s", "clients", "p99 counterd / everysec", "p99 target", "p99.9 counterd / everysec", "max counterd / everysec", "max target"}, body)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// Late thresholds of latencySeconds: a second with a reply later than
// these is counted.
const (
	lateSecond     = 10 * time.Millisecond
	verySlowSecond = 50 * time.Millisecond
)

// latencySeconds writes, for every latency row measured second by second,
// where its worst second was: the fewest replies in one second, the
// seconds with a reply later than lateSecond and verySlowSecond, and the
// longest reply with its second, so a stall shows where it happened
// (latency-seconds.csv has every second).
func latencySeconds(b *bufio.Writer, rows []Row) {
	var body [][]string
	for _, x := range rows {
		if x.Missing || len(x.Seconds) == 0 {
			continue
		}
		fewest, slowest := 0, 0
		var late, verySlow int
		for i, s := range x.Seconds {
			if s.Replies < x.Seconds[fewest].Replies {
				fewest = i
			}
			if s.Max > x.Seconds[slowest].Max {
				slowest = i
			}
			if s.Max > lateSecond {
				late++
			}
			if s.Max > verySlowSecond {
				verySlow++
			}
		}
		body = append(body, []string{
			serverLabel(x.Approach), Thousands(int64(x.Offered)), strconv.Itoa(len(x.Seconds)),
			fmt.Sprintf("%s (second %d)", Thousands(x.Seconds[fewest].Replies), fewest+1),
			strconv.Itoa(late), strconv.Itoa(verySlow),
			fmt.Sprintf("%s (second %d)", Duration(x.Seconds[slowest].Max), slowest+1),
		})
	}
	if len(body) == 0 {
		return
	}
	fmt.Fprintf(b, "Second by second (every second in %s): the fewest replies to the commands due in one second, how many seconds had a reply later than %s and than %s, and the longest reply with its second.\n\n", LatencySecondsFile, Duration(lateSecond), Duration(verySlowSecond))
	table(b, []string{"server", "offered/s", "seconds", "fewest replies", "seconds > " + Duration(lateSecond), "seconds > " + Duration(verySlowSecond), "longest reply"}, body)
}

// SecondsColumns are latency-seconds.csv's header: one record per second
// of every latency row.
var SecondsColumns = []string{"approach", "offered_per_s", "clients", "second", "replies", "max_us"}

// WriteSecondsCSV writes every latency row's seconds.
func WriteSecondsCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(SecondsColumns); err != nil {
		return err
	}
	for _, x := range section(r.Rows, Latency) {
		for i, s := range x.Seconds {
			rec := []string{x.Approach, strconv.FormatFloat(x.Offered, 'f', -1, 64), strconv.Itoa(x.Clients), strconv.Itoa(i + 1),
				strconv.FormatInt(s.Replies, 10), strconv.FormatInt(s.Max.Microseconds(), 10)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
