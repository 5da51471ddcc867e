package skipjack_test

import (
	"context"
	"fmt"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// TestListFilters checks List's filters on the uniq queue (unique by key):
// by payload values (through the unique index when they set the key and
// the state is a unique one, by a scan otherwise), by failure group, and
// within a window of ids; and that a filter that is not a JSON object is
// refused.
func TestListFilters(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	exec(`INSERT INTO skipjack.uniq (payload, state, finished_at, errors) VALUES
		('{"key": "a", "n": 1}', 'failed', now(), '[{"error": "row 17 locked"}]'),
		('{"key": "a", "n": 2}', 'pending', NULL, '[]'),
		('{"key": "b", "n": 2}', 'pending', NULL, '[]'),
		('{"key": "a", "n": 3}', 'failed', now(), '[{"error": "row 4 locked"}]'),
		('{"key": "c", "n": 2}', 'failed', now(), '[{"error": "disk full"}]')`)
	tests := []struct {
		name string
		p    skipjack.ListParams
		want []int64
	}{
		{"key, pending: unique index", skipjack.ListParams{Payload: `{"key": "a"}`, State: "pending"}, []int64{2}},
		{"key and n, pending: unique index", skipjack.ListParams{Payload: `{"key": "a", "n": 3}`, State: "pending"}, nil},
		{"key, all states: scan", skipjack.ListParams{Payload: `{"key": "a"}`}, []int64{1, 2, 4}},
		{"n alone: scan", skipjack.ListParams{Payload: `{"n": 2}`}, []int64{2, 3, 5}},
		{"failure group", skipjack.ListParams{ErrorGroup: "row N locked"}, []int64{1, 4}},
		{"failure group and payload", skipjack.ListParams{ErrorGroup: "row N locked", Payload: `{"n": 3}`}, []int64{4}},
		{"window", skipjack.ListParams{AfterID: 2, UntilID: 4, Payload: `{"key": "a"}`}, []int64{4}},
		{"window, unique index", skipjack.ListParams{AfterID: 2, UntilID: 4, Payload: `{"key": "a"}`, State: "pending"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := uniq.Admin(pool).List(ctx, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("List(%+v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	if _, err := uniq.List(ctx, pool, skipjack.ListParams{Payload: `"a"`}); err == nil {
		t.Errorf("List with a payload filter that is not an object: no error")
	}
}
