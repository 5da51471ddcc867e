package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// intoQueries are the :many queries of a queue that skipjack gives an Into
// variant beside sqlc's: the two a busy worker runs for every batch of jobs.
var intoQueries = []string{"Claim", "Complete"}

// intoDoc is the doc comment of the Into variant of the query name.
func intoDoc(name string) string {
	return "// " + name + "Into runs the same statement as " + name + " and scans the same\n" +
		"// columns, but into one row variable that it appends to dst: a caller\n" +
		"// that sizes dst, or keeps it from one call to the next, allocates no\n" +
		"// growing slice of rows, and no row or list of Scan arguments per row.\n"
}

// addInto adds, after each query of intoQueries in src (the queries.sql.go
// sqlc wrote for a queue), its Into variant: the same statement, arguments
// and scan, derived from the text sqlc wrote for the query so that the two
// cannot drift apart.
func addInto(src []byte) ([]byte, error) {
	for _, name := range intoQueries {
		var err error
		if src, err = addQueryInto(src, name); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// addQueryInto adds the Into variant of the query name after it.
//
// Each edit must match exactly once: sqlc writes every :many query this
// way, and a sqlc that wrote one another way must fail generation, not
// emit an Into variant that scans differently from its query.
func addQueryInto(src []byte, name string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "queries.sql.go", src, 0)
	if err != nil {
		return nil, fmt.Errorf("parse sqlc output queries.sql.go: %w", err)
	}
	var query *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == name {
			query = fd
		}
	}
	if query == nil {
		return nil, fmt.Errorf("sqlc output queries.sql.go has no %s method", name)
	}
	unknown := func(what string) error {
		return fmt.Errorf("sqlc wrote %s in a shape skipjack does not know (%s); use the sqlc version in go.mod", name, what)
	}
	start, end := fset.Position(query.Pos()).Offset, fset.Position(query.End()).Offset
	into := string(src[start:end])
	row := name + "Row"
	const scanOpen, scanClose = "\t\tif err := rows.Scan(", "); err != nil {\n"
	var scan *ast.CallExpr
	ast.Inspect(query.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Scan" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "rows" && scan == nil {
					scan = c
				}
			}
		}
		return scan == nil
	})
	if scan == nil {
		return nil, unknown("no rows.Scan")
	}
	// The fields Scan is given: on one line ("&i.ID, &i.At"), or one per
	// line, each "\t\t\t&i.Field,\n", with the closing parenthesis on a
	// line of its own.
	fields := string(src[fset.Position(scan.Lparen).Offset+1 : fset.Position(scan.Rparen).Offset])
	if !strings.Contains(into, scanOpen+fields+scanClose) {
		return nil, unknown("rows.Scan's error is not checked in place")
	}
	list := fields
	if strings.HasPrefix(fields, "\n") {
		list = strings.ReplaceAll(fields, "\t\t\t", "\t\t")
		list = strings.TrimSuffix(list, "\t\t") + "\t"
	}
	// The last edit changes nothing: it checks that the query appends the
	// row it scanned, as its Into variant does.
	edits := []struct{ old, new string }{
		{"func (q *Queries) " + name + "(ctx context.Context, ", "func (q *Queries) " + name + "Into(ctx context.Context, dst []" + row + ", "},
		{"\tvar items []" + row + "\n", "\titems := dst\n\tvar i " + row + "\n\tscan := []any{" + list + "}\n"},
		{"\t\tvar i " + row + "\n", ""},
		{scanOpen + fields + scanClose, "\t\tif err := rows.Scan(scan...); err != nil {\n"},
		{"\t\titems = append(items, i)\n", "\t\titems = append(items, i)\n"},
	}
	for _, e := range edits {
		if n := strings.Count(into, e.old); n != 1 {
			return nil, unknown(fmt.Sprintf("%q appears %d times, want once", strings.TrimSpace(e.old), n))
		}
		into = strings.Replace(into, e.old, e.new, 1)
	}
	doc := intoDoc(name)
	out := make([]byte, 0, len(src)+len(into)+len(doc)+2)
	out = append(out, src[:end]...)
	out = append(out, "\n\n"+doc...)
	out = append(out, into...)
	return append(out, src[end:]...), nil
}
