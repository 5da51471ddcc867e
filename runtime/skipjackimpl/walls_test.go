package skipjackimpl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWalls keeps the engine's types from growing back into one type that
// collects every responsibility: it parses the package and fails when a
// type declares more methods than its cap, naming them. The runner had 59
// methods once, was split down to 29, and merges (claim floors, the admit
// batch, release retries, workflows) took it back to 39 before the claim
// path (claimer), the release of prefetched jobs (releaser), the held-jobs
// cap (heldCap) and the workflow steps (workflowSteps) became types of
// their own. A new responsibility belongs in a type of its own too, or in
// one of those, not in the runner.
func TestWalls(t *testing.T) {
	t.Parallel()
	methods := declaredMethods(t)
	tests := []struct {
		typ string
		max int
	}{
		{"runner", 30},
	}
	for _, tt := range tests {
		got := methods[tt.typ]
		if len(got) > tt.max {
			t.Errorf("%s has %d methods, want at most %d: move what is not its own into a type of its own (see the runner's doc comment)\n%s",
				tt.typ, len(got), tt.max, strings.Join(got, "\n"))
		}
	}
}

// declaredMethods parses the package's files (tests included: a method
// declared there is in the type's method set too) and returns the methods
// each type declares, as "name (file)", sorted by name.
func declaredMethods(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatalf("list the package's files: %v", err)
	}
	fset := token.NewFileSet()
	methods := make(map[string][]string)
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		if f.Name.Name != "skipjackimpl" {
			continue // an external test package
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			if typ := receiverType(fn.Recv.List[0].Type); typ != "" {
				methods[typ] = append(methods[typ], fn.Name.Name+" ("+name+")")
			}
		}
	}
	for _, ms := range methods {
		slices.Sort(ms)
	}
	return methods
}

// receiverType returns the name of the type a method's receiver type
// expression names (T, *T, T[P], *T[P, Q]), or "" for any other.
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
