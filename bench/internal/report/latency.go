package report

import (
	"bufio"
	"fmt"
	"slices"
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
