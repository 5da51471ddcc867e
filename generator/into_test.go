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

// sqlcComplete is a :many query as sqlc writes it when it scans few
// columns: on one line.
const sqlcComplete = `
// Complete runs the Complete statement of queries.sql.
func (q *Queries) Complete(ctx context.Context, ids []int64) ([]CompleteRow, error) {
	rows, err := q.db.Query(ctx, complete, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []CompleteRow
	for rows.Next() {
		var i CompleteRow
		if err := rows.Scan(&i.ID, &i.At); err != nil {
			return nil, err
		}
		items = append(items, i)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return items, nil
}
`

// sqlcClaimFrom is ClaimFrom as sqlc writes it: Claim's columns and the
// statement's clock, in a row type of its own.
const sqlcClaimFrom = `
// ClaimFrom runs the ClaimFrom statement of queries.sql.
func (q *Queries) ClaimFrom(ctx context.Context, lease time.Duration, floorRunAts []time.Time) ([]ClaimFromRow, error) {
	rows, err := q.db.Query(ctx, claimFrom, lease, floorRunAts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []ClaimFromRow
	for rows.Next() {
		var i ClaimFromRow
		if err := rows.Scan(
			&i.ID,
			&i.Payload,
			&i.ClaimedAt,
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
`

// queryNamed returns the entry of intoQueries named name.
func queryNamed(t *testing.T, name string) intoQuery {
	t.Helper()
	for _, q := range intoQueries {
		if q.name == name {
			return q
		}
	}
	t.Fatalf("no query %s in intoQueries", name)
	return intoQuery{}
}

// TestAddInto checks that the Into variant of a query is sqlc's query
// appending to dst and scanning into one row with one list of fields,
// whether sqlc wrote Scan's fields one per line or on one line, written
// right after the query with the rest of the file untouched; and that a
// query of another shape, or a missing one, fails generation with an error
// that says what did not match.
func TestAddInto(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		src     string
		query   string   // the query given an Into variant; every one of intoQueries when empty
		want    []string // in the output, in this order
		wantErr string
		added   int // Into variants added, when not one per query of src
	}{
		{
			name:  "sqlc's Claim, scanned one field per line",
			src:   sqlcClaim,
			query: "Claim",
			want: []string{
				"func (q *Queries) Claim(ctx context.Context, lease time.Duration, worker string, max int32) ([]ClaimRow, error) {",
				"\t\tvar i ClaimRow\n\t\tif err := rows.Scan(\n\t\t\t&i.ID,\n\t\t\t&i.Payload,\n\t\t); err != nil {\n",
				intoDoc(intoQuery{name: "Claim", row: "ClaimRow"}) + "func (q *Queries) ClaimInto(ctx context.Context, dst []ClaimRow, lease time.Duration, worker string, max int32) ([]ClaimRow, error) {\n" +
					"\trows, err := q.db.Query(ctx, claim, lease, worker, max)\n",
				"\titems := dst\n\tvar i ClaimRow\n\tscan := []any{\n\t\t&i.ID,\n\t\t&i.Payload,\n\t}\n\tfor rows.Next() {\n" +
					"\t\tif err := rows.Scan(scan...); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\titems = append(items, i)\n\t}\n",
				"\treturn items, nil\n}\n\nconst complete",
			},
		},
		{
			name: "sqlc's Complete, scanned on one line, with Claim",
			src:  sqlcClaim + sqlcComplete,
			want: []string{
				"func (q *Queries) ClaimInto(",
				"\treturn items, nil\n}\n\nconst complete",
				"\t\tif err := rows.Scan(&i.ID, &i.At); err != nil {\n",
				intoDoc(intoQuery{name: "Complete", row: "CompleteRow"}) + "func (q *Queries) CompleteInto(ctx context.Context, dst []CompleteRow, ids []int64) ([]CompleteRow, error) {\n",
				"\titems := dst\n\tvar i CompleteRow\n\tscan := []any{&i.ID, &i.At}\n\tfor rows.Next() {\n" +
					"\t\tif err := rows.Scan(scan...); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\titems = append(items, i)\n\t}\n",
			},
		},
		{
			name:  "ClaimFrom, scanned into Claim's row, its clock returned apart",
			src:   sqlcClaim + sqlcClaimFrom,
			query: "ClaimFrom",
			added: 1,
			want: []string{
				"\t\tvar i ClaimFromRow\n",
				intoDoc(intoQuery{name: "ClaimFrom", row: "ClaimRow", at: "ClaimedAt"}) +
					"func (q *Queries) ClaimFromInto(ctx context.Context, dst []ClaimRow, lease time.Duration, floorRunAts []time.Time) ([]ClaimRow, time.Time, error) {\n" +
					"\trows, err := q.db.Query(ctx, claimFrom, lease, floorRunAts)\n\tif err != nil {\n\t\treturn nil, time.Time{}, err\n",
				"\titems := dst\n\tvar i ClaimRow\n\tvar at time.Time\n\tscan := []any{\n\t\t&i.ID,\n\t\t&i.Payload,\n\t\t&at,\n\t}\n",
				"\treturn items, at, nil\n}\n",
			},
		},
		{
			name:  "no ClaimFrom: nothing added for it",
			src:   sqlcClaim,
			query: "ClaimFrom",
			want:  []string{"func (q *Queries) Claim(", "const complete"},
		},
		{
			name:    "no Complete",
			src:     sqlcClaim,
			wantErr: "has no Complete method",
		},
		{
			name:    "Claim of another shape",
			src:     strings.Replace(sqlcClaim, "var items []ClaimRow", "items := []ClaimRow{}", 1),
			query:   "Claim",
			wantErr: `sqlc wrote Claim in a shape skipjack does not know ("var items []ClaimRow" appears 0 times, want once)`,
		},
		{
			name:    "Claim whose Scan error is not checked in place",
			src:     strings.Replace(sqlcClaim, "\t\t); err != nil {", "\t\t); err != nil && i.ID != 0 {", 1),
			query:   "Claim",
			wantErr: "rows.Scan's error is not checked in place",
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
			var out []byte
			var err error
			if tt.query != "" {
				out, err = addQueryInto([]byte(tt.src), queryNamed(t, tt.query))
			} else {
				out, err = addInto([]byte(tt.src))
			}
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
			want := 2 * strings.Count(tt.src, "rows.Scan(")
			if tt.query == "ClaimFrom" {
				want = strings.Count(tt.src, "rows.Scan(") + tt.added
			}
			if got := strings.Count(string(out), "rows.Scan("); got != want {
				t.Errorf("rows.Scan appears %d times, want %d (each query's and its Into variant's)", got, want)
			}
		})
	}
}
