package kindtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Registration is explicit: the kinds are one list (internal/change's
// kinds.go), the store's writers another (internal/catalog), the
// commands a table (internal/server's table.go), each built once from
// its list, and no package changes what another sees at start-up. These
// tests keep it so, over every non-test Go file of the module (not the
// nested modules bench and deploy, which are tools, not the daemon):
//   - no file declares an init function;
//   - no file calls change.Register, which adds a kind outside the list
//     and is for a test's kind (internal/kindtest's max);
//   - no package exports a variable, but for sentinel errors
//     (var ErrX = errors.New(...)), which callers compare and never set:
//     an exported variable is state any importer can change for all
//     (resp.Unauthenticated was one; resp.UnauthenticatedLimits replaced
//     it). A setting, a limit or a registry is a function or unexported.
// None has an exception: no file needs one.

func TestNoInitFunctions(t *testing.T) {
	t.Parallel()
	for _, f := range moduleFiles(t) {
		for _, d := range f.ast.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s declares func init(): register explicitly, in a list built once (internal/change's kinds.go, internal/catalog), not by an init side effect", f.name)
			}
		}
	}
}

func TestRegisterOnlyFromTests(t *testing.T) {
	t.Parallel()
	const changePath = "github.com/counterd/counterd/internal/change"
	for _, f := range moduleFiles(t) {
		local := ""
		for _, im := range f.ast.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == changePath {
				local = "change"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "Register" {
				if id, ok := s.X.(*ast.Ident); ok && id.Name == local {
					t.Errorf("%s calls change.Register: a kind of the product is a line of internal/change's builtin (kinds.go); Register is for a test's kind", f.name)
				}
			}
			return true
		})
	}
}

func TestNoExportedVariables(t *testing.T) {
	t.Parallel()
	for _, f := range moduleFiles(t) {
		for _, d := range f.ast.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, n := range v.Names {
					if n.IsExported() && !sentinelError(n, v, i) {
						t.Errorf("%s exports variable %s, which any importer can change: make it a function or unexported", f.name, n.Name)
					}
				}
			}
		}
	}
}

// sentinelError reports whether the i-th name of v is a sentinel error:
// named Err..., set by errors.New or fmt.Errorf.
func sentinelError(n *ast.Ident, v *ast.ValueSpec, i int) bool {
	if !strings.HasPrefix(n.Name, "Err") || len(v.Values) != len(v.Names) {
		return false
	}
	call, ok := v.Values[i].(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf")
}

// moduleFiles parses every non-test Go file of the module, skipping
// testdata, hidden folders and nested modules.
func moduleFiles(t *testing.T) []file {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var out []file
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, file{filepath.ToSlash(rel), f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d non-test Go files; want the module's (is the test run from internal/kindtest?)", len(out))
	}
	return out
}
