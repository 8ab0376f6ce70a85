package exposition

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// constructors are the metrics.Set methods (and package functions) that
// register a metric. Outside this package they would register it without
// help text, so no code calls them.
var constructors = map[string]bool{
	"NewCounter": true, "NewFloatCounter": true, "NewGauge": true,
	"NewHistogram": true, "NewPrometheusHistogram": true, "NewPrometheusHistogramExt": true,
	"NewSummary": true, "NewSummaryExt": true,
	"GetOrCreateCounter": true, "GetOrCreateFloatCounter": true, "GetOrCreateGauge": true,
	"GetOrCreateHistogram": true, "GetOrCreatePrometheusHistogram": true, "GetOrCreatePrometheusHistogramExt": true,
	"GetOrCreateSummary": true, "GetOrCreateSummaryExt": true,
}

// Every metric in the module is registered through this package, so it
// has help text: a call of a metrics constructor anywhere else fails here,
// whether or not a test ever scrapes the metric.
func TestEveryMetricHasHelp(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == self {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && constructors[sel.Sel.Name] {
				t.Errorf("%s: %s registers a metric without help text; use exposition.Counter, Gauge or Histogram",
					fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files under %s; want the whole module", checked, root)
	}
}

// moduleRoot returns the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("no go.mod above the package directory")
	return ""
}
