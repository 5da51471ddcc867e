package tableadmin

import (
	"slices"
	"testing"
)

// TestPositional checks the rewriting of sqlc.arg(name) parameters to
// $n: numbered by first use, a name used twice is one parameter.
func TestPositional(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		names    []string
	}{
		{"SELECT 1", "SELECT 1", nil},
		{`WHERE "id" = sqlc.arg(id)`, `WHERE "id" = $1`, []string{"id"}},
		{
			`WHERE "id" > sqlc.arg(after_id) AND (sqlc.arg(state)::text = '' OR "state" = sqlc.arg(state)::text) LIMIT sqlc.arg(max)`,
			`WHERE "id" > $1 AND ($2::text = '' OR "state" = $2::text) LIMIT $3`,
			[]string{"after_id", "state", "max"},
		},
	}
	for _, tt := range tests {
		got, names := positional(tt.in)
		if got != tt.want || !slices.Equal(names, tt.names) {
			t.Errorf("positional(%q) = %q, %v; want %q, %v", tt.in, got, names, tt.want, tt.names)
		}
	}
}

// TestParseQueries checks that a sqlc query file splits into its queries
// by name, without their comments.
func TestParseQueries(t *testing.T) {
	t.Parallel()
	file := `-- name: Stats :one
-- Stats counts.
SELECT 1;

-- name: Get :one
-- Get returns one job.
SELECT "id"
FROM t
WHERE "id" = sqlc.arg(id);
`
	got := parseQueries(file)
	want := map[string]string{"Stats": "SELECT 1;", "Get": "SELECT \"id\"\nFROM t\nWHERE \"id\" = sqlc.arg(id);"}
	if len(got) != len(want) {
		t.Fatalf("parseQueries: %q, want %q", got, want)
	}
	for name, q := range want {
		if got[name] != q {
			t.Errorf("query %s: %q, want %q", name, got[name], q)
		}
	}
}
