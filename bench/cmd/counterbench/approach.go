package main

import (
	"fmt"

	"github.com/counterd/counterd/bench/internal/pattern"
)

// kind says what an approach talks to.
type kind int

const (
	sqlKind kind = iota
	counterdKind
	redisKind
)

// approach is one line of the matrix.
type approach struct {
	name, summary string
	kind          kind
	pattern       pattern.Pattern
	// pipeline is commands per round trip over a socket.
	pipeline int
}

// baseline is the approach counterd's committed rate is compared with:
// the simplest pattern that commits each increment before acknowledging.
const baseline = "atomic"

// approaches lists every approach in report order.
var approaches = func() []approach {
	var out []approach
	for _, p := range pattern.All() {
		out = append(out, approach{name: p.Name, summary: p.Summary, kind: sqlKind, pattern: p})
	}
	for _, p := range []int{1, 16} {
		out = append(out,
			approach{name: fmt.Sprintf("counterd-p%d", p), kind: counterdKind, pipeline: p,
				summary: fmt.Sprintf("INCR to counterd over its Unix socket, %d per round trip; ends with a FLUSH that waits until PostgreSQL has every increment, timed as the drain (committed rate = stored / (load + drain))", p)},
		)
	}
	for _, p := range []int{1, 16} {
		out = append(out,
			approach{name: fmt.Sprintf("redis-p%d", p), kind: redisKind, pipeline: p,
				summary: fmt.Sprintf("INCR to redis-server over a Unix socket (no persistence), %d per round trip; for reference", p)},
		)
	}
	return out
}()

func lookupApproach(name string) (approach, bool) {
	for _, a := range approaches {
		if a.name == name {
			return a, true
		}
	}
	return approach{}, false
}

func approachNames() []string {
	var out []string
	for _, a := range approaches {
		out = append(out, a.name)
	}
	return out
}
