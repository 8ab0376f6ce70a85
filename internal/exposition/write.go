package exposition

import (
	"bufio"
	"bytes"
	"io"
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// Write writes every metric of sets, then the Go runtime and process
// metrics, in the Prometheus text format with help text on every
// # HELP line.
func Write(w io.Writer, sets []*metrics.Set) error {
	// # HELP and # TYPE lines: promtool and strict scrapers want them.
	// The switch is global to the metrics package; a process has one
	// exposition, so turning it on here is turning it on everywhere.
	metrics.ExposeMetadata(true)
	var b bytes.Buffer
	for _, s := range sets {
		s.WritePrometheus(&b)
	}
	metrics.WriteProcessMetrics(&b)
	return annotate(w, b.Bytes())
}

// annotate copies the exposition in to w, adding each family's help text
// to its bare # HELP line and applying the library fixes (a type or a
// name promtool's lints refuse). A family with no help known keeps its
// bare line, which promtool reports.
func annotate(w io.Writer, in []byte) error {
	bw := bufio.NewWriter(w)
	for len(in) > 0 {
		line, rest, _ := bytes.Cut(in, []byte("\n"))
		in = rest
		s := string(line)
		switch {
		case strings.HasPrefix(s, "# HELP "):
			family, text, _ := strings.Cut(strings.TrimPrefix(s, "# HELP "), " ")
			if text == "" {
				text = helpFor(family)
			}
			if fix, ok := library[family]; ok && fix.name != "" {
				family = fix.name
			}
			s = "# HELP " + family
			if text != "" {
				s += " " + escapeHelp(text)
			}
		case strings.HasPrefix(s, "# TYPE "):
			family, typ, _ := strings.Cut(strings.TrimPrefix(s, "# TYPE "), " ")
			if fix, ok := library[family]; ok {
				if fix.name != "" {
					family = fix.name
				}
				if fix.typ != "" {
					typ = fix.typ
				}
			}
			s = "# TYPE " + family + " " + typ
		case !strings.HasPrefix(s, "#"):
			s = renameSample(s)
		}
		bw.WriteString(s)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// helpFor returns the help of a family registered here or of one the
// library writes, or "" for neither.
func helpFor(family string) string {
	if text, ok := Help(family); ok {
		return text
	}
	return library[family].help
}

// renameSample renames a sample line of a family the library names in a
// way promtool refuses.
func renameSample(s string) string {
	i := strings.IndexAny(s, "{ ")
	if i < 0 {
		return s
	}
	if fix, ok := library[s[:i]]; ok && fix.name != "" {
		return fix.name + s[i:]
	}
	return s
}

// escapeHelp escapes a help text as the text format requires.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
