package retention_test

import (
	"testing"
	"time"

	"github.com/counterd/counterd/internal/retention"
)

func TestParse(t *testing.T) {
	t.Parallel()
	r, err := retention.Parse(" session:*=1d; tmp:*=90m ;*:x=2h;session:keep=1h")
	if err != nil {
		t.Fatal(err)
	}
	f := func(key string, want time.Duration) {
		t.Helper()
		if got := r.TTL(key); got != want {
			t.Errorf("TTL(%q): got %v; want %v", key, got, want)
		}
	}
	f("session:1", 24*time.Hour)
	f("session:keep", 24*time.Hour) // the first match wins
	f("tmp:a", 90*time.Minute)
	f("a:x", 2*time.Hour)
	f("post:1", 0)
	var none *retention.Rules
	if none.TTL("a") != 0 {
		t.Error("nil rules gave a TTL")
	}
	for _, bad := range []string{"a", "a=", "=1d", "a=1.5d", "a=10ms", "a=x"} {
		if _, err := retention.Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
	if r, err := retention.Parse(""); err != nil || r != nil {
		t.Errorf("Parse(\"\"): got %v, %v; want nil, nil", r, err)
	}
}
