package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// intoQuery is a :many query of a queue that skipjack gives an Into
// variant beside sqlc's, and the row type the variant scans into.
type intoQuery struct {
	name, row string
	// optional queries exist for some queues only.
	optional bool
	// at, when set, is the field of the query's row that holds the
	// statement's clock: the variant scans it into a variable of its own,
	// not into row (which lacks it), and returns it after the rows.
	at string
}

// intoQueries are the queries a busy worker runs for every batch of jobs.
// ClaimFrom, which only queues without a serial key or a per-key limit
// have, scans into Claim's row type: both return the same columns, and the
// runtime reads both kinds of claim into one slice.
var intoQueries = []intoQuery{
	{name: "Claim", row: "ClaimRow"},
	{name: "ClaimFrom", row: "ClaimRow", optional: true, at: "ClaimedAt"},
	{name: "Complete", row: "CompleteRow"},
}

// intoDoc is the doc comment of the Into variant of q.
func intoDoc(q intoQuery) string {
	doc := "// " + q.name + "Into runs the same statement as " + q.name + " and scans the same\n" +
		"// columns, but into one row variable that it appends to dst: a caller\n" +
		"// that sizes dst, or keeps it from one call to the next, allocates no\n" +
		"// growing slice of rows, and no row or list of Scan arguments per row.\n"
	if q.at != "" {
		doc += "// The row variable is a " + q.row + "; the rows' " + q.at + " is returned\n" +
			"// after them (the zero time when there are none).\n"
	}
	return doc
}

// addInto adds, after each query of intoQueries in src (the queries.sql.go
// sqlc wrote for a queue), its Into variant: the same statement, arguments
// and scan, derived from the text sqlc wrote for the query so that the two
// cannot drift apart.
func addInto(src []byte) ([]byte, error) {
	for _, q := range intoQueries {
		var err error
		if src, err = addQueryInto(src, q); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// addQueryInto adds the Into variant of the query q after it; it adds
// nothing for an optional query the queue does not have.
//
// Each edit must match exactly once: sqlc writes every :many query this
// way, and a sqlc that wrote one another way must fail generation, not
// emit an Into variant that scans differently from its query.
func addQueryInto(src []byte, q intoQuery) ([]byte, error) {
	name := q.name
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
	if query == nil && q.optional {
		return src, nil
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
	rowVars := "\tvar i " + q.row + "\n"
	if q.at != "" {
		if n := strings.Count(list, "&i."+q.at+","); n != 1 {
			return nil, unknown(fmt.Sprintf("%q is scanned %d times, want once", q.at, n))
		}
		list = strings.Replace(list, "&i."+q.at+",", "&at,", 1)
		rowVars += "\tvar at time.Time\n"
	}
	// The last edit changes nothing: it checks that the query appends the
	// row it scanned, as its Into variant does.
	edits := []struct{ old, new string }{
		{"func (q *Queries) " + name + "(ctx context.Context, ", "func (q *Queries) " + name + "Into(ctx context.Context, dst []" + q.row + ", "},
		{"\tvar items []" + row + "\n", "\titems := dst\n" + rowVars + "\tscan := []any{" + list + "}\n"},
		{"\t\tvar i " + row + "\n", ""},
		{scanOpen + fields + scanClose, "\t\tif err := rows.Scan(scan...); err != nil {\n"},
		{"\t\titems = append(items, i)\n", "\t\titems = append(items, i)\n"},
	}
	if q.at != "" {
		edits = append(edits, []struct{ old, new string }{
			{") ([]" + row + ", error) {\n", ") ([]" + q.row + ", time.Time, error) {\n"},
			{"\treturn items, nil\n", "\treturn items, at, nil\n"},
		}...)
	}
	for _, e := range edits {
		if n := strings.Count(into, e.old); n != 1 {
			return nil, unknown(fmt.Sprintf("%q appears %d times, want once", strings.TrimSpace(e.old), n))
		}
		into = strings.Replace(into, e.old, e.new, 1)
	}
	if q.at != "" {
		into = strings.ReplaceAll(into, "return nil, err\n", "return nil, time.Time{}, err\n")
	}
	doc := intoDoc(q)
	out := make([]byte, 0, len(src)+len(into)+len(doc)+2)
	out = append(out, src[:end]...)
	out = append(out, "\n\n"+doc...)
	out = append(out, into...)
	return append(out, src[end:]...), nil
}
