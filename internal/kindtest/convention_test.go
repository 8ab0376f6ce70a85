package kindtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A kind is its own files: the pipeline's shared code names no kind.
//
// The rule, by file name: a file whose name starts with kind_ belongs to
// one kind (internal/change/kind_once.go declares INCRONCE's change,
// internal/slots/kind_once.go writes it, prunes its seen set, ...), and
// may name anything. Every other non-test file of the shared packages
// below is shared, and names none of
//   - what internal/change's kind files declare (change.Once, change.Total,
//     change.Minute, change.OnceView, ...);
//   - what internal/slots' kind files declare: their functions, constants,
//     variables and types, and their methods of *Store (foldUniques,
//     PruneSeen, ...), from slots' shared files, or from a file importing
//     slots.
//
// Each use not moved yet is an exception below, file and name, with what
// moves it out. The test also fails when an exception is no longer
// needed, so the list only shrinks.

// sharedDirs are the packages whose files are shared but for kind_*.go.
var sharedDirs = []string{
	"internal/journal",
	"internal/pending",
	"internal/windows",
	"internal/slots",
	"internal/server",
	"internal/store",
	"cmd/rollup",
}

// kindDirs are the packages whose kind_*.go files declare what shared
// files must not name, and how other packages import them.
var kindDirs = map[string]string{
	"internal/change": "github.com/counterd/counterd/internal/change",
	"internal/slots":  "github.com/counterd/counterd/internal/slots",
}

type use struct {
	file string // from the module's root
	name string // package.Name, or slots.name inside slots
}

// exceptions are the shared files' uses of a kind not moved out yet.
var exceptions = []use{}

func TestSharedFilesNameNoKind(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	kinds := map[string]map[string]string{} // import path → name → kind file declaring it
	methods := map[string]string{}          // slots' *Store methods of kind files → file
	for dir, path := range kindDirs {
		kinds[path] = map[string]string{}
		for _, f := range parseDir(t, root, dir, true) {
			for name, isMethod := range declared(f.ast) {
				if isMethod {
					methods[name] = f.name
				} else {
					kinds[path][name] = f.name
				}
			}
		}
	}
	slotsPath := kindDirs["internal/slots"]
	found := map[use]string{}
	for _, dir := range sharedDirs {
		files := parseDir(t, root, dir, false)
		if len(files) == 0 {
			t.Fatalf("%s: no shared files; want the package's non-test files", dir)
		}
		for _, f := range files {
			for u, where := range kindUses(f, kinds, methods, kindDirs[dir], slotsPath) {
				found[u] = where
			}
		}
	}
	for _, e := range exceptions {
		if _, ok := found[e]; !ok {
			t.Errorf("exception %s names %s: no longer needed; remove it from exceptions", e.file, e.name)
		}
		delete(found, e)
	}
	var bad []string
	for u, where := range found {
		bad = append(bad, fmt.Sprintf("%s names %s (%s): move the use into a kind_*.go file, or behind a kind's Spec or Writer", u.file, u.name, where))
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

type file struct {
	name string // from the module's root
	ast  *ast.File
}

// parseDir parses dir's non-test Go files: its kind_*.go files if kind,
// else the others.
func parseDir(t *testing.T, root, dir string, kind bool) []file {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []file
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "kind_") != kind {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, file{dir + "/" + n, f})
	}
	return out
}

// declared returns f's top-level names, true for a method of Store.
func declared(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name == "init" {
				continue
			}
			if d.Recv == nil {
				names[d.Name.Name] = false
				continue
			}
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.Name == "Store" {
				names[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							names[n.Name] = false
						}
					}
				case *ast.TypeSpec:
					names[s.Name.Name] = false
				}
			}
		}
	}
	return names
}

// kindUses returns the kind names f uses, with where: f is of the
// package own (an import path of kindDirs, or empty).
func kindUses(f file, kinds map[string]map[string]string, methods map[string]string, own, slotsPath string) map[use]string {
	imports := map[string]string{} // local name → import path, of the kind packages
	for _, im := range f.ast.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if kinds[p] == nil {
			continue
		}
		local := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		imports[local] = p
	}
	importsSlots := false
	for _, p := range imports {
		importsSlots = importsSlots || p == slotsPath
	}
	inSlots := own == slotsPath
	out := map[use]string{}
	at := func(name, decl string) {
		out[use{f.name, name}] = decl
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if p, ok := imports[x.Name]; ok {
					if decl, ok := kinds[p][n.Sel.Name]; ok {
						at(x.Name+"."+n.Sel.Name, decl)
					}
					return false
				}
			}
			if decl, ok := methods[n.Sel.Name]; ok && (inSlots || importsSlots && ast.IsExported(n.Sel.Name)) {
				at("slots."+n.Sel.Name, decl)
			}
			ast.Inspect(n.X, visit)
			return false
		case *ast.Field:
			// Its names are a struct's fields or a function's
			// parameters, not uses.
			ast.Inspect(n.Type, visit)
			return false
		case *ast.KeyValueExpr:
			if _, ok := n.Key.(*ast.Ident); ok {
				ast.Inspect(n.Value, visit) // a field's name in a literal
				return false
			}
		case *ast.Ident:
			if decl, ok := kinds[slotsPath][n.Name]; ok && inSlots {
				at("slots."+n.Name, decl)
			}
		}
		return true
	}
	for _, d := range f.ast.Decls {
		ast.Inspect(d, visit)
	}
	return out
}

// kindUses finds a kind's names however the file imports them, and not
// in comments or other packages' selectors.
func TestKindUses(t *testing.T) {
	t.Parallel()
	const slotsPath = "github.com/counterd/counterd/internal/slots"
	kinds := map[string]map[string]string{
		"github.com/counterd/counterd/internal/change": {"Once": "internal/change/kind_once.go"},
		slotsPath: {"onceTotals": "internal/slots/kind_once.go"},
	}
	methods := map[string]string{"PruneSeen": "internal/slots/kind_once.go", "foldUniques": "internal/slots/kind_unique.go"}
	f := func(own, src string, want ...string) {
		t.Helper()
		a, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for u := range kindUses(file{"x.go", a}, kinds, methods, own, slotsPath) {
			got = append(got, u.name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("uses in %q: got %v; want %v", src, got, want)
		}
	}
	f("", `package p; import c "github.com/counterd/counterd/internal/change"; var k = c.Once`, "c.Once")
	f("", `package p; import "github.com/counterd/counterd/internal/change"; // change.Once
var k = change.Plain()`)
	f("", `package p; import "other/change"; var k = change.Once`)
	f("", `package p; import "github.com/counterd/counterd/internal/slots"; func g(s *slots.Store) { s.PruneSeen(); s.foldUniques() }`, "slots.PruneSeen")
	f("", `package p; func g(s *S) { s.PruneSeen() }`)
	f(slotsPath, `package slots; func (s *Store) g() { s.foldUniques(); _ = onceTotals(false, x.onceTotals) }`, "slots.foldUniques", "slots.onceTotals")
	f(slotsPath, `package slots; type h struct{ onceTotals int }; var _ = h{onceTotals: 1}; func g(onceTotals int) {}`)
}
