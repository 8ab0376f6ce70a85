// Package targets maps counter keys onto columns of the application's own
// tables (ROLLUP_TARGETS), so that the rollup's fold can add a key's
// folded amount to, say, posts.like_count in the same transaction that
// folds it into counters.
//
// The one idea: key text never becomes SQL. A pattern such as
// "post:{id}:likes" has exactly one {id} placeholder between literal text;
// the id is parsed in Go by the type of the table's primary key and passed
// as an array parameter. Table and column names come only from the
// configuration: they are validated as identifiers, looked up in the
// catalog when the rollup starts (Resolve), and always quoted.
package targets

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Placeholder marks the part of a key that is the row's primary key.
const Placeholder = "{id}"

// Separator separates targets in ROLLUP_TARGETS. Not a comma: a comma is
// common in key patterns elsewhere (COUNTERD_SAMPLE_KEYS), and a semicolon
// reads as "next statement".
const Separator = ";"

// identifier is an unquoted PostgreSQL identifier as written in SQL; it
// is matched against the catalog exactly (case-sensitively) and quoted.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// maxIdentifier is PostgreSQL's NAMEDATALEN - 1: a longer name would be
// truncated silently.
const maxIdentifier = 63

// idKind is how an {id} is parsed: the primary key's type.
type idKind int

const (
	idInt  idKind = iota + 1 // smallint, integer, bigint
	idUUID                   // uuid
	idText                   // text, character varying
)

// arrayType is the SQL type ids of the kind are passed as.
func (k idKind) arrayType() string {
	switch k {
	case idInt:
		return "bigint[]"
	case idUUID:
		return "uuid[]"
	default:
		return "text[]"
	}
}

// Target is one pattern mapped to one column.
type Target struct {
	// Pattern is the key pattern as configured, e.g. "post:{id}:likes".
	Pattern string
	// Schema (empty: the search_path's), Table and Column name the
	// column as configured.
	Schema, Table, Column string

	prefix, suffix string

	// Set by Resolve.
	resolved   bool
	kind       idKind
	qualified  string // schema.table.column as found in the catalog
	update     string // the fold's statement for this target
	lock       string // the row locks update needs, taken first
	pkName     string
	columnType string
}

// Dest is the column as configured: [schema.]table.column.
func (t *Target) Dest() string {
	if t.Schema != "" {
		return t.Schema + "." + t.Table + "." + t.Column
	}
	return t.Table + "." + t.Column
}

func (t *Target) String() string { return t.Pattern + "=" + t.Dest() }

// Match reports whether key matches t's pattern, and its id part.
func (t *Target) Match(key string) (string, bool) {
	if len(key) <= len(t.prefix)+len(t.suffix) || !strings.HasPrefix(key, t.prefix) || !strings.HasSuffix(key, t.suffix) {
		return "", false
	}
	return key[len(t.prefix) : len(key)-len(t.suffix)], true
}

// ID parses a matched id by the primary key's type and returns the form
// passed to PostgreSQL. Only the canonical form is accepted (the one
// 'post:' || id produces in SQL: "42", not "042" or "+42"; a lowercase
// hyphenated uuid), so each row has exactly one key. An id that does not
// parse cannot name a row: ok is false and the key counts as a missing
// row. Resolve must have run.
func (t *Target) ID(id string) (string, bool) {
	switch t.kind {
	case idInt:
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != id {
			return "", false
		}
		return id, true
	case idUUID:
		if !canonicalUUID(id) {
			return "", false
		}
		return id, true
	case idText:
		return id, true
	}
	panic("BUG: targets: ID before Resolve")
}

// canonicalUUID reports whether s is a uuid as PostgreSQL prints one.
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// Set is the parsed ROLLUP_TARGETS, in configuration order.
type Set struct {
	list []*Target
}

// Targets returns the targets in configuration order.
func (s *Set) Targets() []*Target {
	if s == nil {
		return nil
	}
	return s.list
}

// Len is how many targets there are; a nil Set has none.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// Prefixes returns each target's literal prefix, for a first filter in
// SQL (starts_with) before Match.
func (s *Set) Prefixes() []string {
	out := make([]string, len(s.list))
	for i, t := range s.list {
		out[i] = t.prefix
	}
	return out
}

// Match returns the target key matches, if any, and its id part.
// Patterns never overlap (Parse refuses that), so there is at most one.
func (s *Set) Match(key string) (*Target, string, bool) {
	for _, t := range s.list {
		if id, ok := t.Match(key); ok {
			return t, id, true
		}
	}
	return nil, "", false
}

// Parse reads ROLLUP_TARGETS: targets separated by ";", each
// "pattern=[schema.]table.column", the pattern holding exactly one {id}
// after a non-empty literal prefix. Spaces around an entry are ignored;
// an empty string is no targets (a nil Set). Errors name the entry.
func Parse(spec string) (*Set, error) {
	var s Set
	for entry := range strings.SplitSeq(spec, Separator) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		t, err := parseOne(entry)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		for _, o := range s.list {
			if overlap(o, t) {
				return nil, fmt.Errorf("%q and %q: both patterns can match one key; a key may feed only one column", o.String(), t.String())
			}
		}
		s.list = append(s.list, t)
	}
	if len(s.list) == 0 {
		return nil, nil
	}
	return &s, nil
}

func parseOne(entry string) (*Target, error) {
	// The column part is identifiers and dots, so the last "=" splits
	// even a pattern that contains "=".
	i := strings.LastIndex(entry, "=")
	if i < 0 {
		return nil, fmt.Errorf("want pattern=table.column")
	}
	pattern, dest := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
	t := &Target{Pattern: pattern}
	switch n := strings.Count(pattern, Placeholder); n {
	case 1:
	case 0:
		return nil, fmt.Errorf("pattern %q has no %s placeholder", pattern, Placeholder)
	default:
		return nil, fmt.Errorf("pattern %q has %d %s placeholders; want exactly one", pattern, n, Placeholder)
	}
	t.prefix, t.suffix, _ = strings.Cut(pattern, Placeholder)
	if t.prefix == "" {
		return nil, fmt.Errorf("pattern %q must start with literal text before %s", pattern, Placeholder)
	}
	if strings.ContainsAny(t.prefix+t.suffix, "{}*?") {
		return nil, fmt.Errorf("pattern %q: only %s is special; { } * ? are not allowed elsewhere", pattern, Placeholder)
	}
	parts := strings.Split(dest, ".")
	switch len(parts) {
	case 2:
		t.Table, t.Column = parts[0], parts[1]
	case 3:
		t.Schema, t.Table, t.Column = parts[0], parts[1], parts[2]
	default:
		return nil, fmt.Errorf("column %q: want table.column or schema.table.column", dest)
	}
	for _, p := range parts {
		if !identifier.MatchString(p) || len(p) > maxIdentifier {
			return nil, fmt.Errorf("column %q: %q is not an identifier (letters, digits, _ and $, not starting with a digit, at most %d bytes)", dest, p, maxIdentifier)
		}
	}
	return t, nil
}

// overlap reports whether some key matches both a and b: one prefix
// extends the other and one suffix extends the other.
func overlap(a, b *Target) bool {
	pre := strings.HasPrefix(a.prefix, b.prefix) || strings.HasPrefix(b.prefix, a.prefix)
	suf := strings.HasSuffix(a.suffix, b.suffix) || strings.HasSuffix(b.suffix, a.suffix)
	return pre && suf
}
