package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isConfigType names a component's configuration: Config, Options or
// anything ending in Config. Per-call option structs (ReadOptions,
// PutOptions) are not configurations.
func isConfigType(name string) bool {
	return name == "Config" || name == "Options" || strings.HasSuffix(name, "Config")
}

// Every configuration fills its defaults in one place (EnsureDefaults) and
// checks its fields once (Validate), as Pebble's Options do.
func TestConfigsHaveEnsureDefaultsAndValidate(t *testing.T) {
	root := moduleRoot(t)
	types := map[string]token.Position{} // "dir.Type" -> where declared
	methods := map[string]bool{}         // "dir.Type.Method"
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "client"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			dir := filepath.Dir(path)
			if strings.HasSuffix(filepath.Base(dir), "test") {
				return nil // a test helper's options are the test's business
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok || !ts.Name.IsExported() || !isConfigType(ts.Name.Name) {
							continue
						}
						if _, ok := ts.Type.(*ast.StructType); ok {
							types[dir+"."+ts.Name.Name] = fset.Position(ts.Pos())
						}
					}
				case *ast.FuncDecl:
					if d.Recv == nil || len(d.Recv.List) != 1 {
						continue
					}
					typ := d.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						methods[dir+"."+id.Name+"."+d.Name.Name] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(types) < 5 {
		t.Fatalf("found %d configuration types: the walk is off", len(types))
	}
	for typ, pos := range types {
		for _, m := range []string{"EnsureDefaults", "Validate"} {
			if !methods[typ+"."+m] {
				rel, _ := filepath.Rel(root, pos.Filename)
				t.Errorf("%s:%d: %s has no %s method", rel, pos.Line, typ[strings.LastIndex(typ, ".")+1:], m)
			}
		}
	}
}

// moduleRoot is the directory holding go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
