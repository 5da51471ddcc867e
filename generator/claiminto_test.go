package generator

import (
	"strings"
	"testing"
)

// sqlcClaim is queries.sql.go as sqlc writes it for a queue, cut down to
// the parts addClaimInto reads.
const sqlcClaim = `package db

import (
	"context"
	"time"
)

const claim = "SELECT 1"

// ClaimRow is one row returned by Claim.
type ClaimRow struct {
	ID      int64
	Payload []byte
}

// Claim runs the Claim statement of queries.sql.
func (q *Queries) Claim(ctx context.Context, lease time.Duration, worker string, max int32) ([]ClaimRow, error) {
	rows, err := q.db.Query(ctx, claim, lease, worker, max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []ClaimRow
	for rows.Next() {
		var i ClaimRow
		if err := rows.Scan(
			&i.ID,
			&i.Payload,
		); err != nil {
			return nil, err
		}
		items = append(items, i)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return items, nil
}

const complete = "SELECT 2"
`

// TestAddClaimInto checks that ClaimInto is sqlc's Claim appending to dst
// and scanning in place, written after Claim with the rest of the file
// untouched, and that a Claim of another shape fails generation with an
// error that says what did not match.
func TestAddClaimInto(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		src     string
		want    []string // in the output, in this order
		wantErr string
	}{
		{
			name: "sqlc's Claim",
			src:  sqlcClaim,
			want: []string{
				"func (q *Queries) Claim(ctx context.Context, lease time.Duration, worker string, max int32) ([]ClaimRow, error) {",
				"\t\tvar i ClaimRow\n\t\tif err := rows.Scan(\n\t\t\t&i.ID,\n\t\t\t&i.Payload,\n\t\t); err != nil {\n",
				claimIntoDoc + "func (q *Queries) ClaimInto(ctx context.Context, dst []ClaimRow, lease time.Duration, worker string, max int32) ([]ClaimRow, error) {\n" +
					"\trows, err := q.db.Query(ctx, claim, lease, worker, max)\n",
				"\titems := dst\n\tvar i ClaimRow\n\tscan := []any{\n\t\t&i.ID,\n\t\t&i.Payload,\n\t}\n\tfor rows.Next() {\n" +
					"\t\tif err := rows.Scan(scan...); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\titems = append(items, i)\n\t}\n",
				"\treturn items, nil\n}\n\nconst complete",
			},
		},
		{
			name:    "no Claim",
			src:     "package db\n\nconst complete = \"SELECT 2\"\n",
			wantErr: "has no Claim method",
		},
		{
			name:    "Claim of another shape",
			src:     strings.Replace(sqlcClaim, "var items []ClaimRow", "items := []ClaimRow{}", 1),
			wantErr: `("var items []ClaimRow" appears 0 times, want once)`,
		},
		{
			name:    "Claim that scans on one line",
			src:     strings.Replace(sqlcClaim, "rows.Scan(\n\t\t\t&i.ID,\n\t\t\t&i.Payload,\n\t\t)", "rows.Scan(&i.ID, &i.Payload)", 1),
			wantErr: "no multi-line rows.Scan",
		},
		{
			name:    "not Go",
			src:     "package db\n\nfunc (",
			wantErr: "parse sqlc output queries.sql.go",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := addClaimInto([]byte(tt.src))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rest := string(out)
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks, after what came before it:\n%s\n--- output:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if got := strings.Count(string(out), "rows.Scan("); got != 2 {
				t.Errorf("rows.Scan appears %d times, want twice (Claim's and ClaimInto's)", got)
			}
		})
	}
}
