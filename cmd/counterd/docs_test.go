package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/counterd/counterd/internal/pgtest"
)

// docPages are the README and every page under docs/, relative to this
// package.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 6 {
		t.Fatalf("docs/ has %d pages: %v; want at least 6", len(pages), pages)
	}
	return append([]string{"../../README.md"}, pages...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection is the text under heading (as "## Metrics and health") up to
// the next heading of the same or a higher level.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	level, _, _ := strings.Cut(heading, " ")
	_, section, ok := strings.Cut(readDoc(t, page), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", page, heading)
	}
	// It ends at the next heading of its level or above.
	for l := len(level); l > 0; l-- {
		section, _, _ = strings.Cut(section, "\n"+strings.Repeat("#", l)+" ")
	}
	return section
}

// docs/operations.md's metrics list names exactly the counterd_* metrics a
// running daemon exposes, so none is undocumented or documented but gone.
func TestDocsListEveryMetric(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// fsync=always, an increment and a flush, so every histogram has a
	// sample (an empty one is not exposed).
	d := startDaemon(t, db, "COUNTERD_FSYNC=always")
	c := client(t, d.socket)
	if err := c.Incr(context.Background(), "post:1").Err(); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	exposed := exposedMetrics(httpGet(t, "http://"+d.metricsAddr()+"/metrics"))

	section := docSection(t, "../../docs/operations.md", "## Metrics and health")
	var documented []string
	for _, m := range regexp.MustCompile("`(counterd_[a-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		// The rollup's own metrics are checked by cmd/rollup's tests.
		if !slices.Contains(documented, m[1]) && !strings.HasPrefix(m[1], "counterd_rollup_") {
			documented = append(documented, m[1])
		}
	}
	slices.Sort(documented)
	for _, name := range exposed {
		if !slices.Contains(documented, name) {
			t.Errorf("%s is exposed but not in docs/operations.md's metrics list", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(exposed, name) {
			t.Errorf("%s is in docs/operations.md's metrics list but not exposed", name)
		}
	}
}

// exposedMetrics lists the counterd_* metrics in a /metrics body, sorted,
// each histogram once (it is exposed as _bucket, _sum and _count).
func exposedMetrics(body string) []string {
	var names []string
	for _, line := range strings.Split(body, "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if strings.HasPrefix(name, "counterd_") {
			names = append(names, name)
		}
	}
	var exposed []string
	for _, name := range names {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(names, base+"_bucket") {
				name = base
			}
		}
		if !slices.Contains(exposed, name) {
			exposed = append(exposed, name)
		}
	}
	slices.Sort(exposed)
	return exposed
}

// documentedCommands lists the command names the first column of
// docs/protocol.md's tables gives (`INCR key`, `CLIENT ID` ...).
func documentedCommands(t *testing.T) []string {
	t.Helper()
	var out []string
	word := regexp.MustCompile("`([A-Z]+)[ `]")
	for _, line := range strings.Split(readDoc(t, "../../docs/protocol.md"), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		// The first cell ends at the first | outside backquotes.
		code, cell := false, line[1:]
		for i, r := range cell {
			if r == '`' {
				code = !code
			} else if r == '|' && !code {
				cell = cell[:i]
				break
			}
		}
		for _, m := range word.FindAllStringSubmatch(cell+" ", -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

// docs/protocol.md documents exactly the commands a running daemon lists
// in COMMAND LIST, so none is undocumented or documented but gone.
func TestDocsListEveryCommand(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	list, err := client(t, d.socket).Do(context.Background(), "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, name := range list {
		served = append(served, strings.ToUpper(name))
	}
	slices.Sort(served)
	documented := documentedCommands(t)
	for _, name := range served {
		if !slices.Contains(documented, name) {
			t.Errorf("%s is served but not in docs/protocol.md's command tables", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(served, name) {
			t.Errorf("%s is in docs/protocol.md's command tables but not in COMMAND LIST", name)
		}
	}
}

// Every prose paragraph of the README and of docs/ ends a sentence, so a
// paragraph cut off mid-sentence (a bad merge) is caught. Lists, tables,
// headings, comments and code are not prose.
func TestDocsParagraphsEndSentences(t *testing.T) {
	t.Parallel()
	notProse := regexp.MustCompile(`^(\||#|- |\* |\d+\. | {4}| *<|!\[)`)
	ends := regexp.MustCompile("([.:!?)]|[.:]`|\\.\\*\\*)$")
	for _, page := range docPages(t) {
		var para []string
		check := func(line int) {
			if len(para) > 0 && !notProse.MatchString(para[0]) && !ends.MatchString(para[len(para)-1]) {
				t.Errorf("%s:%d: paragraph ends mid-sentence: %q", page, line, para[len(para)-1])
			}
			para = para[:0]
		}
		code := false
		lines := strings.Split(readDoc(t, page), "\n")
		for i, line := range lines {
			switch {
			case strings.HasPrefix(strings.TrimSpace(line), "```"):
				check(i)
				code = !code
			case code:
			case strings.TrimSpace(line) == "":
				check(i)
			default:
				para = append(para, strings.TrimRight(line, " "))
			}
		}
		check(len(lines))
	}
}

// anchors lists the link targets of a markdown page's headings, as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens, and -1,
// -2 ... for repeats.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	code := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if code || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// Every relative link in the README and docs/ names a file that exists
// and, for a link into a markdown page, a heading that page has.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inline := regexp.MustCompile("`[^`]*`")
	for _, page := range docPages(t) {
		code := false
		for i, line := range strings.Split(readDoc(t, page), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				code = !code
			}
			if code {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(inline.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: link %s: %v", page, i+1, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !slices.Contains(anchors(readDoc(t, file)), anchor) {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", page, i+1, target, file, anchor)
				}
			}
		}
	}
}
