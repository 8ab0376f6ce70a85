package glob

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	f := func(patterns, key string, want bool) {
		t.Helper()
		m, err := Parse(patterns)
		if err != nil {
			t.Fatalf("Parse(%q): %v", patterns, err)
		}
		if got := m.Match(key); got != want {
			t.Fatalf("Parse(%q).Match(%q): got %v; want %v", patterns, key, got, want)
		}
	}
	f("", "view:1", false)
	f("  ", "view:1", false)
	f("view:*", "view:1", true)
	f("view:*", "view:", true)
	f("view:*", "views:1", false)
	f("view:*", "post:view:1", false)
	f("*:views", "video:7:views", true)
	f("*:views", "video:7:views:x", false)
	f("*:hot:*", "a:hot:b", true)
	f("*:hot:*", ":hot:", true)
	f("*:hot:*", "a:cold:b", false)
	f("post:42", "post:42", true)
	f("post:42", "post:420", false)
	f("*", "anything", true)
	f("**", "anything", true)
	f("post:?", "post:1", true)
	f("post:?", "post:12", false)
	f("a*b*c", "axxbyyc", true)
	f("a*b*c", "axxbyy", false)
	f("a*b*c", "abcbc", true)
	f("*a*b", "xxaxxbxb", true)
	f("view:*, *:views", "video:7:views", true)
	f("view:*,*:views", "view:9", true)
	f("view:*,*:views", "post:9", false)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, list := range []string{"view:*,", ",view:*", "a,,b", "a\xff*"} {
		if _, err := Parse(list); err == nil {
			t.Errorf("Parse(%q): no error; want one for the empty pattern", list)
		}
	}
}

func TestNilMatchesNothing(t *testing.T) {
	t.Parallel()
	var m *Matcher
	if m.Match("x") || !m.Empty() {
		t.Fatal("a nil Matcher matched or is not empty")
	}
}

// The fast paths agree with path.Match (whose * also matches any bytes
// here, since keys hold no '/'; its [ and \ are not tested).
func FuzzMatch(f *testing.F) {
	f.Add("view:*", "view:1")
	f.Add("*:views", "a:views")
	f.Add("*a*b?c*", "xxaybzcc")
	f.Add("a*b*c", "abcbc")
	f.Fuzz(func(t *testing.T, p, key string) {
		// Keys and patterns are valid UTF-8 (Compile refuses others).
		if p == "" || strings.ContainsAny(p+key, `/[]\,`) || !utf8.ValidString(p) || !utf8.ValidString(key) {
			return
		}
		want, err := path.Match(p, key)
		if err != nil {
			return
		}
		m, err := Compile([]string{p})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Match(key); got != want {
			t.Fatalf("Match(%q, %q): got %v; path.Match says %v", p, key, got, want)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	m, err := Parse("view:*,*:views,*:trending:*,clip:?:*:x")
	if err != nil {
		b.Fatal(err)
	}
	keys := []string{"post:42", "view:1", "video:7:views", "a:trending:b", "clip:1:zz:x"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Match(keys[i%len(keys)])
	}
}
