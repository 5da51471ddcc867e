package tableadmin_test

import (
	"encoding/json"
	"slices"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// TestBrowseAndLimits runs the CLI's admin over golden/flow's sync_account
// table: ListNewest pages newest first both ways, CountMatching counts
// under a payload filter, Delete leaves running jobs, and Limits gives the
// YAML's settings with the jobs claimed now.
func TestBrowseAndLimits(t *testing.T) {
	t.Parallel()
	q, pool := goldenQueue(t, "flow", "sync_account")
	a, err := tableadmin.New(q, pool)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `INSERT INTO `+q.Table+` (payload) SELECT jsonb_build_object('account_id', i % 3) FROM generate_series(1, 10) AS i`)
	exec(t, pool, `UPDATE `+q.Table+` SET state = 'running', lease_expires_at = now() + interval '1 hour' WHERE id IN (9, 10)`)
	ctx := t.Context()
	page, err := a.ListNewest(ctx, skipjack.ListParams{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	older, err := a.ListNewest(ctx, skipjack.ListParams{Limit: 4, BeforeID: page[len(page)-1].ID})
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := a.ListNewest(ctx, skipjack.ListParams{Payload: `{"account_id": 1}`, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := [][]int64{idsOf(page), idsOf(older), idsOf(filtered)}
	want := [][]int64{{10, 9, 8, 7}, {6, 5, 4, 3}, {10, 7, 4, 1}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ListNewest pages %v, want %v", got, want)
	}
	mc, err := a.CountMatching(ctx, skipjack.ListParams{Payload: `{"account_id": 1}`})
	if err != nil {
		t.Fatal(err)
	}
	if mc != (skipjack.MatchCounts{Pending: 3, Running: 1, Scanned: 10}) {
		t.Errorf("CountMatching = %+v, want 3 pending and 1 running of 10 scanned", mc)
	}
	if n, err := a.Delete(ctx, 1, 9, 10); err != nil || n != 1 {
		t.Errorf("Delete(1, 9, 10) = %d, %v; want 1 (9 and 10 run)", n, err)
	}
	l, err := a.Limits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Concurrency != 5 || l.RateCount != 100 || !l.Serial || !slices.Equal(l.SerialBy, []string{"account_id"}) || l.Claimed != 2 {
		t.Errorf("Limits = %+v, want concurrency 5, rate 100, serial by account_id, 2 claimed", l)
	}
}

func idsOf(recs []*skipjack.Record[json.RawMessage]) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}
