// Package windows is counterd's time windows: which keys are counted per
// minute, hour or day besides their all-time total (COUNTERD_WINDOWS), and
// how long each width's buckets are kept.
//
// The one idea: a window is not a separate counter the client asks for.
// An increment of a matching key is expanded, where it is accepted, into
// its Total change plus one change per configured width whose Bucket is
// the UTC-aligned start of the bucket the accept clock is in; the journal
// records those changes, so a replay lands in the same buckets.
package windows

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/glob"
)

// Window is one width a key is bucketed by, and how long its buckets are
// kept after they end.
type Window struct {
	Kind      change.Kind // change.Minute, Hour or Day
	Retention time.Duration
}

func (w Window) String() string { return w.Kind.String() + ":" + FormatDuration(w.Retention) }

// rule is one pattern=width:retention,... entry.
type rule struct {
	src     string
	match   *glob.Matcher
	windows []Window // finest first
}

// Config is a parsed COUNTERD_WINDOWS. A nil *Config has no windows.
type Config struct {
	rules []rule
}

// RuleSep separates patterns in COUNTERD_WINDOWS. Not a comma, which
// separates the width:retention pairs of one pattern.
const RuleSep = ";"

// Parse reads COUNTERD_WINDOWS: rules separated by ";", each
// pattern=width:retention[,width:retention...], as
// "post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d". Patterns are globs
// as in COUNTERD_SAMPLE_KEYS; the first rule whose pattern matches a key
// decides its windows. Widths are minute, hour and day; retentions take
// Go durations (90m, 2h) or whole days (14d), and must be at least the
// width. An empty string configures nothing and returns nil.
func Parse(s string) (*Config, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	c := &Config{}
	for _, part := range strings.Split(s, RuleSep) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		// The last "=": widths and durations never contain one, a
		// pattern may.
		i := strings.LastIndex(part, "=")
		if i < 0 {
			return nil, fmt.Errorf("%q: want pattern=width:retention[,width:retention...]", part)
		}
		pat, list := strings.TrimSpace(part[:i]), part[i+1:]
		m, err := glob.Compile([]string{pat})
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		r := rule{src: pat, match: m}
		for _, pair := range strings.Split(list, ",") {
			w, err := parseWindow(strings.TrimSpace(pair))
			if err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if slices.ContainsFunc(r.windows, func(x Window) bool { return x.Kind == w.Kind }) {
				return nil, fmt.Errorf("%q: width %v given twice", part, w.Kind)
			}
			r.windows = append(r.windows, w)
		}
		slices.SortFunc(r.windows, func(a, b Window) int { return int(a.Kind) - int(b.Kind) })
		c.rules = append(c.rules, r)
	}
	if len(c.rules) == 0 {
		return nil, nil
	}
	return c, nil
}

func parseWindow(s string) (Window, error) {
	name, ret, ok := strings.Cut(s, ":")
	if !ok {
		return Window{}, fmt.Errorf("%q: want width:retention, as hour:14d", s)
	}
	k, ok := change.WindowKind(strings.TrimSpace(name))
	if !ok {
		return Window{}, fmt.Errorf("%q: unknown width %q (minute, hour or day)", s, name)
	}
	d, err := ParseDuration(strings.TrimSpace(ret))
	if err != nil {
		return Window{}, fmt.Errorf("%q: retention: %w", s, err)
	}
	if d < k.Width() {
		return Window{}, fmt.Errorf("%q: retention %v is shorter than one %v", s, ret, k)
	}
	return Window{Kind: k, Retention: d}, nil
}

// ParseDuration reads a positive duration: whole days as "14d", or
// anything time.ParseDuration takes ("2h", "90m").
func ParseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		const most = int64(1<<63-1) / int64(24*time.Hour)
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		if err != nil || n > most {
			return 0, fmt.Errorf("%q is too long (at most %dd)", s, most)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (as 90m, 2h or 14d)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// FormatDuration writes d as ParseDuration reads it, in days when whole.
func FormatDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// Match returns key's windows, finest first: those of the first rule whose
// pattern matches it, or nil. It does not allocate.
func (c *Config) Match(key string) []Window {
	if c == nil {
		return nil
	}
	for i := range c.rules {
		if c.rules[i].match.Match(key) {
			return c.rules[i].windows
		}
	}
	return nil
}

// Retention is how long key's buckets of kind k are kept after they end,
// and whether key has that window.
func (c *Config) Retention(key string, k change.Kind) (time.Duration, bool) {
	for _, w := range c.Match(key) {
		if w.Kind == k {
			return w.Retention, true
		}
	}
	return 0, false
}

// Longest is the longest retention any rule gives width k, and whether
// any rule has that width.
func (c *Config) Longest(k change.Kind) (time.Duration, bool) {
	var best time.Duration
	found := false
	if c != nil {
		for _, r := range c.rules {
			for _, w := range r.windows {
				if w.Kind == k {
					best, found = max(best, w.Retention), true
				}
			}
		}
	}
	return best, found
}

// String writes c as Parse reads it.
func (c *Config) String() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for i, r := range c.rules {
		if i > 0 {
			b.WriteString(RuleSep)
		}
		b.WriteString(r.src + "=")
		for j, w := range r.windows {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(w.String())
		}
	}
	return b.String()
}

// Bucket is the start, in unix seconds, of the UTC-aligned bucket of
// width k that t falls in.
func Bucket(k change.Kind, t time.Time) int64 {
	w := int64(k.Width() / time.Second)
	s := t.Unix()
	b := s - s%w
	if s < 0 && s%w != 0 {
		b -= w
	}
	return b
}

// Expand appends to dst the bucket changes of ch accepted at unix second
// at, one per window of the key, each built by ch's kind
// (change.Spec.InBucket): for an increment of a key's total, the same
// delta in the bucket's count; for a unique member, the member in the
// bucket's sketch. A change of a kind windows do not expand, or to a key
// without windows, adds nothing.
func (c *Config) Expand(dst []change.Change, ch change.Change, at time.Time) []change.Change {
	s := ch.Kind.Spec()
	if s == nil || s.InBucket == nil {
		return dst
	}
	for _, w := range c.Match(ch.Key) {
		dst = append(dst, s.InBucket(ch, w.Kind, Bucket(w.Kind, at)))
	}
	return dst
}

// Span picks the width COUNT key SINCE span reads: the finest of key's
// windows whose retention covers span, and how many buckets of it (the
// current one and ⌈span/width⌉−1 before it).
func (c *Config) Span(key string, span time.Duration) (Window, int, error) {
	ws := c.Match(key)
	if len(ws) == 0 {
		return Window{}, 0, fmt.Errorf("key %q has no time windows (COUNTERD_WINDOWS)", key)
	}
	if span <= 0 {
		return Window{}, 0, fmt.Errorf("span must be positive")
	}
	for _, w := range ws {
		if w.Retention >= span {
			width := w.Kind.Width()
			return w, int((span + width - 1) / width), nil
		}
	}
	return Window{}, 0, fmt.Errorf("span %s is beyond the retention of every window of key %q (%s)", FormatDuration(span), key, describe(ws))
}

func describe(ws []Window) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	return strings.Join(s, ",")
}
