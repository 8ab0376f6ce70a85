package glob

import "testing"

// Redis's glob rules, as SSCAN's MATCH applies them.
func TestMatchRedis(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "a/b", true}, {"user:*", "user:1", true}, {"user:*", "users", false},
		{"h?llo", "hello", true}, {"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true}, {"h[b-a]llo", "hallo", true},
		{`h\*o`, "h*o", true}, {`h\*o`, "hxo", false}, {"a*b*c", "aXXbYYc", true}, {"a*b*c", "aXXbYY", false},
		{"[", "x", false}, {"ab", "abc", false}, {"**x", "yyx", true},
	} {
		if got := MatchRedis(c.p, c.s); got != c.want {
			t.Errorf("MatchRedis(%q, %q) = %v; want %v", c.p, c.s, got, c.want)
		}
	}
}
