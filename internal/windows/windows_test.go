package windows

import (
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
)

const day = 24 * time.Hour

func TestParse(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		c, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := c.String(); got != want {
			t.Errorf("Parse(%q) = %q; want %q", in, got, want)
		}
	}
	f("", "")
	f("  ", "")
	f("post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d", "post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d")
	f(" post:* = day:400d , minute:90m ; ", "post:*=minute:90m,day:400d")
	f("a=b=hour:1h", "a=b=hour:1h")
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want an error containing %q", in, err, want)
		}
	}
	f("post:*", "want pattern=width:retention")
	f("post:*=week:2d", `unknown width "week"`)
	f("post:*=hour", "want width:retention")
	f("post:*=hour:30m", "shorter than one hour")
	f("post:*=hour:0h", "not positive")
	f("post:*=hour:xd", "not a whole number of days")
	// Before, a number of days too large was "not a whole number".
	f("post:*=hour:1000000000d", "too long (at most 106751d)")
	f("post:*=hour:99999999999999999999d", "too long")
	f("post:*=hour:2y", "not a duration")
	f("post:*=hour:2h,hour:3h", "given twice")
	f("=hour:2h", "empty pattern")
}

func TestMatchFirstRuleWins(t *testing.T) {
	t.Parallel()
	c, err := Parse("post:hot:*=minute:2h;post:*=hour:14d,day:400d;*=day:30d")
	if err != nil {
		t.Fatal(err)
	}
	f := func(key, want string) {
		t.Helper()
		var got []string
		for _, w := range c.Match(key) {
			got = append(got, w.String())
		}
		if s := strings.Join(got, ","); s != want {
			t.Errorf("Match(%q) = %q; want %q", key, s, want)
		}
	}
	f("post:hot:1", "minute:2h")
	f("post:1", "hour:14d,day:400d")
	f("view:1", "day:30d")
	var nilc *Config
	if nilc.Match("post:1") != nil {
		t.Error("a nil Config matched a key")
	}
	if d, ok := c.Longest(change.Day); !ok || d != 400*day {
		t.Errorf("Longest(day) = %v, %v; want 400d", d, ok)
	}
	if _, ok := c.Longest(change.Minute); !ok {
		t.Error("Longest(minute): not found")
	}
}

func TestBucket(t *testing.T) {
	t.Parallel()
	f := func(k change.Kind, at string, want string) {
		t.Helper()
		tm, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatal(err)
		}
		b := Bucket(k, tm)
		if err := k.CheckBucket(b); err != nil {
			t.Errorf("Bucket(%v, %s) = %d: %v", k, at, b, err)
		}
		if got := time.Unix(b, 0).UTC().Format(time.RFC3339); got != want {
			t.Errorf("Bucket(%v, %s) = %s; want %s", k, at, got, want)
		}
	}
	f(change.Minute, "2026-03-01T10:59:59Z", "2026-03-01T10:59:00Z")
	f(change.Minute, "2026-03-01T11:00:00Z", "2026-03-01T11:00:00Z")
	f(change.Hour, "2026-03-01T10:59:59.999Z", "2026-03-01T10:00:00Z")
	f(change.Hour, "2026-03-01T11:00:00Z", "2026-03-01T11:00:00Z")
	// UTC-aligned whatever the zone of the time given.
	f(change.Day, "2026-03-01T23:30:00-05:00", "2026-03-02T00:00:00Z")
	f(change.Day, "2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z")
}

func TestExpand(t *testing.T) {
	t.Parallel()
	c, err := Parse("post:*=minute:2h,hour:14d,day:400d")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 59, 59, 0, time.UTC)
	got := c.Expand(nil, change.Change{Key: "post:1", Kind: change.Total, Delta: 20, Var: 380}, at)
	want := []change.Change{
		{Key: "post:1", Kind: change.Minute, Bucket: at.Truncate(time.Minute).Unix(), Delta: 20, Var: 380},
		{Key: "post:1", Kind: change.Hour, Bucket: at.Truncate(time.Hour).Unix(), Delta: 20, Var: 380},
		{Key: "post:1", Kind: change.Day, Bucket: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Unix(), Delta: 20, Var: 380},
	}
	if len(got) != len(want) {
		t.Fatalf("Expand = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Expand[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
	if got := c.Expand(nil, change.Change{Key: "view:1", Kind: change.Total, Delta: 1}, at); len(got) != 0 {
		t.Errorf("Expand of a key without windows = %v; want none", got)
	}
	if got := c.Expand(nil, change.Change{Key: "post:1", Kind: change.Set, Delta: 1}, at); len(got) != 0 {
		t.Errorf("Expand of a Set = %v; want none (a reset does not touch buckets)", got)
	}
}

// A unique member of a windowed key goes into each width's bucket sketch
// too; one of a key without windows into none.
func TestExpandUnique(t *testing.T) {
	t.Parallel()
	c, err := Parse("post:*=minute:2h,day:400d")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 59, 59, 0, time.UTC)
	m := change.Member("post:1", 1<<63+9)
	m.Delta = 2
	got := c.Expand(nil, m, at)
	want := []change.Change{
		change.BucketMember("post:1", change.Minute, at.Truncate(time.Minute).Unix(), 1<<63+9),
		change.BucketMember("post:1", change.Day, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Unix(), 1<<63+9),
	}
	if len(got) != len(want) {
		t.Fatalf("Expand = %v; want %v", got, want)
	}
	for i := range want {
		want[i].Delta = 2
		if got[i] != want[i] {
			t.Errorf("Expand[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
	if got := c.Expand(nil, change.Member("view:1", 3), at); len(got) != 0 {
		t.Errorf("Expand of a member of a key without windows = %v; want none", got)
	}
}

func TestSpan(t *testing.T) {
	t.Parallel()
	c, err := Parse("post:*=minute:2h,hour:14d,day:400d")
	if err != nil {
		t.Fatal(err)
	}
	f := func(span time.Duration, kind change.Kind, n int) {
		t.Helper()
		w, got, err := c.Span("post:1", span)
		if err != nil || w.Kind != kind || got != n {
			t.Errorf("Span(%v) = %v, %d, %v; want %v, %d", span, w.Kind, got, err, kind, n)
		}
	}
	f(time.Minute, change.Minute, 1)
	f(90*time.Second, change.Minute, 2)
	f(2*time.Hour, change.Minute, 120)
	f(2*time.Hour+time.Second, change.Hour, 3)
	f(24*time.Hour, change.Hour, 24)
	f(14*day, change.Hour, 14*24)
	f(15*day, change.Day, 15)
	fail := func(key string, span time.Duration, want string) {
		t.Helper()
		_, _, err := c.Span(key, span)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Span(%q, %v) = %v; want an error containing %q", key, span, err, want)
		}
	}
	fail("post:1", 401*day, "beyond the retention of every window")
	fail("view:1", time.Hour, "has no time windows")
	fail("post:1", 0, "positive")
}

func TestClockNeverGoesBack(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c := FuncClock(func() time.Time { return now })
	if got := c.Now(); !got.Equal(now) {
		t.Fatalf("Now = %v; want %v", got, now)
	}
	later := now.Add(time.Hour)
	now = later
	c.Now()
	now = later.Add(-2 * time.Hour) // the host's clock is stepped back
	if got := c.Now(); !got.Equal(later) {
		t.Errorf("after a step back Now = %v; want %v (never backwards)", got, later)
	}
}

func TestClockAnchored(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(anchor)
	got := c.Now()
	if got.Before(anchor) || got.Sub(anchor) > time.Minute {
		t.Errorf("Now = %v; want just after the anchor %v, whatever the host's wall clock says", got, anchor)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d")
	f.Add("a=b=hour:1h")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil || c == nil {
			return
		}
		// What Parse accepts, it writes back in a form it reads the same.
		c2, err := Parse(c.String())
		if err != nil {
			t.Fatalf("Parse(%q) of String of Parse(%q): %v", c.String(), s, err)
		}
		if c2.String() != c.String() {
			t.Fatalf("round trip %q -> %q", c.String(), c2.String())
		}
	})
}

func BenchmarkMatchNone(b *testing.B) {
	c, _ := Parse("post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d")
	for b.Loop() {
		c.Match("user:123:likes")
	}
}
