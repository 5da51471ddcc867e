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
// but appends the rows to dst, each scanned in place, so that a worker that
// keeps dst from one claim to the next claims without growing a new slice
// of rows each time.
`

// claimIntoEdits turn the text of sqlc's Claim into ClaimInto. Each must
// match exactly once: sqlc writes every :many query this way, and a sqlc
// that wrote Claim another way must fail generation, not emit a ClaimInto
// that scans differently from Claim.
var claimIntoEdits = []struct{ old, new string }{
	{"func (q *Queries) Claim(ctx context.Context, ", "func (q *Queries) ClaimInto(ctx context.Context, dst []ClaimRow, "},
	{"\tvar items []ClaimRow\n", "\titems := dst\n"},
	{"\t\tvar i ClaimRow\n", "\t\titems = append(items, ClaimRow{})\n\t\ti := &items[len(items)-1]\n"},
	{"\t\titems = append(items, i)\n", ""},
}

// addClaimInto adds ClaimInto after sqlc's Claim in src, the queries.sql.go
// sqlc wrote for a queue: the same statement, arguments and scan as Claim,
// derived from Claim's own text so that the two cannot drift apart.
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
	for _, e := range claimIntoEdits {
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
