// Package retention maps counter keys to a default idle retention, as
// COUNTERD_KEY_TTL='session:*=1d;tmp:*=1h' configures it.
//
// The one idea: a key matching a rule expires that long after the last
// round that wrote it (see "Reset, set and expiry" in docs/protocol.md); rules
// are tried in order and the first match wins, and a key matching none
// keeps no expiry, so a daemon without rules pays nothing.
package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/glob"
)

// Rules is a parsed COUNTERD_KEY_TTL. A nil *Rules has no rules.
type Rules struct {
	rules []rule
}

type rule struct {
	m   *glob.Matcher
	ttl time.Duration
}

// Parse parses rules of the form pattern=duration separated by ';'. A
// duration is Go's (90m, 36h) or a whole number of days (1d). An empty
// string has no rules (nil).
func Parse(s string) (*Rules, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	r := &Rules{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pat, dur, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("rule %q is not pattern=duration", part)
		}
		m, err := glob.Compile([]string{strings.TrimSpace(pat)})
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", part, err)
		}
		ttl, err := parseDuration(strings.TrimSpace(dur))
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", part, err)
		}
		r.rules = append(r.rules, rule{m: m, ttl: ttl})
	}
	return r, nil
}

func parseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("duration %q: days must be a whole number", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
	}
	if d < time.Second {
		return 0, fmt.Errorf("duration %q: must be at least 1s", s)
	}
	return d, nil
}

// TTL returns the retention of key: the first matching rule's, or 0.
func (r *Rules) TTL(key string) time.Duration {
	if r == nil {
		return 0
	}
	for _, ru := range r.rules {
		if ru.m.Match(key) {
			return ru.ttl
		}
	}
	return 0
}
