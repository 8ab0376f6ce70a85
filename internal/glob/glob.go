// Package glob matches counter keys against a list of glob patterns, such
// as COUNTERD_SAMPLE_KEYS=view:*,*:views.
//
// The one idea: patterns are compiled once into a kind (exact, prefix,
// suffix, contains, any, or general) so that matching a key is a string
// comparison or two, with no allocation, on the increment path.
package glob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// kind is how a compiled pattern is matched.
type kind uint8

const (
	exact    kind = iota // "post:1"
	prefix               // "view:*"
	suffix               // "*:views"
	contains             // "*:hot:*"
	anything             // "*"
	general              // anything else: several stars, or ?
)

type pattern struct {
	kind kind
	lit  string // the literal part, for every kind but general
	src  string // the pattern as written, for general
}

// Matcher matches keys against compiled patterns. The zero value and nil
// match nothing.
type Matcher struct {
	pats []pattern
}

// Compile compiles patterns. In a pattern, * matches any run of bytes
// (including none), ? matches exactly one character (UTF-8 rune), and every other byte
// matches itself. An empty pattern, or one that is not UTF-8 (keys always
// are), is an error.
func Compile(patterns []string) (*Matcher, error) {
	m := &Matcher{}
	for _, p := range patterns {
		if p == "" {
			return nil, fmt.Errorf("empty pattern")
		}
		if !utf8.ValidString(p) {
			return nil, fmt.Errorf("pattern %q is not UTF-8", p)
		}
		m.pats = append(m.pats, compile(p))
	}
	return m, nil
}

// Parse compiles a comma-separated list of patterns; spaces around each
// are ignored, and an empty list matches nothing.
func Parse(list string) (*Matcher, error) {
	if strings.TrimSpace(list) == "" {
		return &Matcher{}, nil
	}
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	m, err := Compile(parts)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", list, err)
	}
	return m, nil
}

func compile(p string) pattern {
	if strings.ContainsRune(p, '?') {
		return pattern{kind: general, src: p}
	}
	switch n := strings.Count(p, "*"); {
	case n == 0:
		return pattern{kind: exact, lit: p}
	case p == "*" || strings.Trim(p, "*") == "":
		return pattern{kind: anything}
	case n == 1 && strings.HasSuffix(p, "*"):
		return pattern{kind: prefix, lit: p[:len(p)-1]}
	case n == 1 && strings.HasPrefix(p, "*"):
		return pattern{kind: suffix, lit: p[1:]}
	case n == 2 && len(p) > 2 && p[0] == '*' && p[len(p)-1] == '*':
		return pattern{kind: contains, lit: p[1 : len(p)-1]}
	}
	return pattern{kind: general, src: p}
}

// Empty reports whether m matches nothing because it has no patterns.
func (m *Matcher) Empty() bool { return m == nil || len(m.pats) == 0 }

// Match reports whether key matches any of m's patterns. It does not
// allocate.
func (m *Matcher) Match(key string) bool {
	if m == nil {
		return false
	}
	for i := range m.pats {
		p := &m.pats[i]
		var ok bool
		switch p.kind {
		case exact:
			ok = key == p.lit
		case prefix:
			ok = strings.HasPrefix(key, p.lit)
		case suffix:
			ok = strings.HasSuffix(key, p.lit)
		case contains:
			ok = strings.Contains(key, p.lit)
		case anything:
			ok = true
		default:
			ok = wildcard(p.src, key)
		}
		if ok {
			return true
		}
	}
	return false
}

// wildcard matches s against pattern p with * and ?, backtracking only to
// the last star, so it runs in O(len(p)·len(s)) at worst and never
// recurses.
func wildcard(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0 // position of the last * in p, and of s when it was seen
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && p[pi] == '?':
			_, w := utf8.DecodeRuneInString(s[si:])
			pi++
			si += w
		case pi < len(p) && p[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			// Let the last * absorb one more character and retry after it.
			_, w := utf8.DecodeRuneInString(s[mark:])
			mark += w
			pi, si = star+1, mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
