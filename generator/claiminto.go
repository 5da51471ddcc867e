package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// claimIntoDoc is the doc comment of the ClaimInto that addClaimInto writes.
const claimIntoDoc = `// ClaimInto runs the same statement as Claim and scans the same columns,
// but into one row that it appends to dst, so that a worker that keeps dst
// from one claim to the next allocates neither a slice of rows nor a row
// (with the list of its fields Scan takes) per claimed job.
`

// addClaimInto adds ClaimInto after sqlc's Claim in src, the queries.sql.go
// sqlc wrote for a queue: the same statement, arguments and scan as Claim,
// derived from Claim's own text so that the two cannot drift apart.
//
// Each edit must match exactly once: sqlc writes every :many query this
// way, and a sqlc that wrote Claim another way must fail generation, not
// emit a ClaimInto that scans differently from Claim.
func addClaimInto(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "queries.sql.go", src, 0)
	if err != nil {
		return nil, fmt.Errorf("parse sqlc output queries.sql.go: %w", err)
	}
	var claim *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == "Claim" {
			claim = fd
		}
	}
	if claim == nil {
		return nil, fmt.Errorf("sqlc output queries.sql.go has no Claim method")
	}
	start, end := fset.Position(claim.Pos()).Offset, fset.Position(claim.End()).Offset
	into := string(src[start:end])
	const scanOpen, scanClose = "\t\tif err := rows.Scan(\n", "\t\t); err != nil {\n"
	i := strings.Index(into, scanOpen)
	j := strings.Index(into, scanClose)
	if i < 0 || j < i {
		return nil, fmt.Errorf("sqlc wrote Claim in a shape skipjack does not know (no multi-line rows.Scan); use the sqlc version in go.mod")
	}
	fields := into[i+len(scanOpen) : j] // one "\t\t\t&i.Field,\n" per column
	// The last edit changes nothing: it checks that Claim appends the row
	// it scanned, as ClaimInto does.
	edits := []struct{ old, new string }{
		{"func (q *Queries) Claim(ctx context.Context, ", "func (q *Queries) ClaimInto(ctx context.Context, dst []ClaimRow, "},
		{"\tvar items []ClaimRow\n", "\titems := dst\n\tvar i ClaimRow\n\tscan := []any{\n" + strings.ReplaceAll(fields, "\t\t\t", "\t\t") + "\t}\n"},
		{"\t\tvar i ClaimRow\n", ""},
		{scanOpen + fields + scanClose, "\t\tif err := rows.Scan(scan...); err != nil {\n"},
		{"\t\titems = append(items, i)\n", "\t\titems = append(items, i)\n"},
	}
	for _, e := range edits {
		if n := strings.Count(into, e.old); n != 1 {
			return nil, fmt.Errorf("sqlc wrote Claim in a shape skipjack does not know (%q appears %d times, want once); use the sqlc version in go.mod", strings.TrimSpace(e.old), n)
		}
		into = strings.Replace(into, e.old, e.new, 1)
	}
	out := make([]byte, 0, len(src)+len(into)+len(claimIntoDoc)+2)
	out = append(out, src[:end]...)
	out = append(out, "\n\n"+claimIntoDoc...)
	out = append(out, into...)
	return append(out, src[end:]...), nil
}
