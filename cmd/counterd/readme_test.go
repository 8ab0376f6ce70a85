package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// The README's metrics list names exactly the counterd_* metrics a running
// daemon exposes, so none is undocumented or documented but gone.
func TestREADMEListsEveryMetric(t *testing.T) {
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
	body := httpGet(t, "http://"+d.metricsAddr()+"/metrics")
	var names []string
	for _, line := range strings.Split(body, "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if strings.HasPrefix(name, "counterd_") {
			names = append(names, name)
		}
	}
	// A histogram is one metric, exposed as _bucket, _sum and _count.
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

	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "### Metrics and health")
	section, _, _ = strings.Cut(section, "\n## ")
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
			t.Errorf("%s is exposed but not in the README's metrics list", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(exposed, name) {
			t.Errorf("%s is in the README's metrics list but not exposed", name)
		}
	}
}

// Every prose paragraph of the README ends a sentence, so a paragraph cut
// off mid-sentence (a bad merge) is caught. Lists, tables, headings and
// code are not prose.
func TestREADMEParagraphsEndSentences(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	notProse := regexp.MustCompile(`^(\||#|- |\* |\d+\. | {4}|<|!\[)`)
	ends := regexp.MustCompile("([.:!?)]|[.:]`|\\.\\*\\*)$")
	var para []string
	check := func(line int) {
		if len(para) > 0 && !notProse.MatchString(para[0]) && !ends.MatchString(para[len(para)-1]) {
			t.Errorf("README.md:%d: paragraph ends mid-sentence: %q", line, para[len(para)-1])
		}
		para = para[:0]
	}
	code := false
	lines := strings.Split(string(b), "\n")
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
