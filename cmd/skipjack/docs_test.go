package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlocks returns the ```go code blocks of the Markdown file name.
func goBlocks(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// docs are the Markdown files whose snippets users copy.
var docs = []string{"README.md", "docs/reference.md", "docs/operating.md", "docs/deploying.md"}

// TestDocsRefuseEmptyDatabaseURL checks that every snippet that reads a
// database URL from the environment refuses an empty one: pgx parses ""
// as its defaults (a local socket, the OS user's database), so a missing
// variable silently connects to the wrong database, as the CLI refuses to.
func TestDocsRefuseEmptyDatabaseURL(t *testing.T) {
	t.Parallel()
	getenv := regexp.MustCompile(`(\w+)(?:, \w+)* :?= (?:os\.Getenv\("\w*DATABASE_URL"\), )*os\.Getenv\("(\w*DATABASE_URL)"\)`)
	inline := regexp.MustCompile(`(ParseConfig|New|Connect)\([^)]*os\.Getenv\("\w*DATABASE_URL"\)`)
	found := 0
	for _, doc := range docs {
		for _, b := range goBlocks(t, filepath.Join("..", "..", doc)) {
			if m := inline.FindString(b); m != "" {
				t.Errorf("%s: %s passes the variable unchecked; read it into a variable and refuse \"\"", doc, m)
			}
			for _, m := range getenv.FindAllStringSubmatch(b, -1) {
				found++
				if !strings.Contains(b, m[1]+` == ""`) {
					t.Errorf("%s: %s is read from $%s but never checked against \"\"", doc, m[1], m[2])
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no snippet reads DATABASE_URL; the test looks at nothing")
	}
}

// TestOperatingPrometheusSnippet parses the Prometheus wiring snippet of
// docs/operating.md and checks that it uses no name it neither declares
// nor imports nor takes from the surrounding service (pool, handle and
// the queue packages).
func TestOperatingPrometheusSnippet(t *testing.T) {
	t.Parallel()
	var snippet string
	for _, b := range goBlocks(t, filepath.Join("..", "..", "docs", "operating.md")) {
		if strings.Contains(b, "promhttp.HandlerFor") {
			snippet = b
		}
	}
	if snippet == "" {
		t.Fatal("docs/operating.md has no Prometheus snippet")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", "package p\nfunc _() {\n"+snippet+"\n}\n", 0)
	if err != nil {
		t.Fatalf("the snippet does not parse: %v\n%s", err, snippet)
	}
	known := map[string]bool{
		// Imports, named in the snippet's comments.
		"prometheus": true, "otelprom": true, "sdkmetric": true, "skipjackotel": true,
		"skipjack": true, "http": true, "promhttp": true,
		// The service's own.
		"pool": true, "handle": true, "sendemail": true, "resizeimage": true,
		// Predeclared.
		"nil": true,
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, l := range n.Lhs {
					known[l.(*ast.Ident).Name] = true
				}
			}
		case *ast.SelectorExpr:
			ast.Inspect(n.X, func(x ast.Node) bool { return checkIdent(t, x, known) })
			return false // n.Sel is a field or method
		case *ast.KeyValueExpr:
			ast.Inspect(n.Value, func(x ast.Node) bool { return checkIdent(t, x, known) })
			return false // n.Key is a field name
		case *ast.Ident:
			return checkIdent(t, n, known)
		}
		return true
	})
}

// checkIdent reports an identifier n of the snippet that is not known.
func checkIdent(t *testing.T, n ast.Node, known map[string]bool) bool {
	t.Helper()
	if id, ok := n.(*ast.Ident); ok && id.Name != "_" && id.Name != "p" && !known[id.Name] {
		t.Errorf("the Prometheus snippet of docs/operating.md uses %s, which it does not define", id.Name)
		known[id.Name] = true // once
	}
	return true
}
