package tableadmin_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// TestInsights runs what the dashboard's second round reads through the
// admin of skipjack ui (no generated code) on the send_digest queue of
// golden/schedule: Activity sums the counts rows of several workers per
// minute, FailureGroups folds numbers and ids, List filters by payload
// field and by failure group, and Schedules lists both schedules with
// their next slots.
func TestInsights(t *testing.T) {
	t.Parallel()
	digest, pool := goldenQueue(t, "schedule", "send_digest")
	exec(t, pool, `INSERT INTO skipjack.send_digest (payload, state, finished_at, errors) VALUES
		('{"user_id": 1, "week": "w1"}', 'failed', now() - interval '3 minutes', '[{"error": "user 1 has no address"}]'),
		('{"user_id": 2, "week": "w1"}', 'failed', now() - interval '2 minutes', '[{"error": "user 22 has no address"}]'),
		('{"user_id": 3, "week": "w2"}', 'failed', now() - interval '1 minute', '[{"error": "smtp 550"}, {"error": "smtp timeout after 30s"}]'),
		('{"user_id": 2, "week": "w2"}', 'pending', NULL, '[]');
		INSERT INTO skipjack._skipjack_counts (queue, minute, worker, completed, failed, retried, waits) VALUES
		('send_digest', date_trunc('minute', now()) - interval '2 minutes', 'a/1', 5, 1, 2, array_fill(0::bigint, ARRAY[21])),
		('send_digest', date_trunc('minute', now()) - interval '2 minutes', 'b/1', 3, 0, 0, array_fill(1::bigint, ARRAY[21])),
		('send_digest', date_trunc('minute', now()) - interval '1 minute', 'a/1', 4, 0, 0, array_fill(0::bigint, ARRAY[21])),
		('refresh_cache', date_trunc('minute', now()) - interval '1 minute', 'a/1', 9, 9, 9, array_fill(0::bigint, ARRAY[21]))`)
	a, err := tableadmin.New(digest, pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	mins, err := a.Activity(ctx, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(mins) != 2 || mins[0].Completed != 8 || mins[0].Failed != 1 || mins[0].Retried != 2 || mins[1].Completed != 4 {
		t.Errorf("Activity = %+v; want two minutes, 8 completed, 1 failed, 2 retried, then 4 completed", mins)
	}
	if len(mins) > 0 && (len(mins[0].Waits) != len(skipjack.WaitBounds)+1 || mins[0].Waits[0] != 1) {
		t.Errorf("first minute's waits = %v, want the two workers' histograms added", mins[0].Waits)
	}

	groups, err := a.FailureGroups(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Error != "user N has no address" || groups[0].Jobs != 2 ||
		groups[0].Example != "user 22 has no address" || groups[1].Error != "smtp timeout after Ns" {
		t.Fatalf("FailureGroups = %+v; want user N has no address (2, latest user 22 ...), then smtp timeout after Ns", groups)
	}

	tests := []struct {
		name string
		p    skipjack.ListParams
		want []int64
	}{
		{"payload field", skipjack.ListParams{Payload: `{"user_id": 2}`}, []int64{2, 4}},
		{"payload and state", skipjack.ListParams{Payload: `{"user_id": 2}`, State: "pending"}, []int64{4}},
		{"failure group", skipjack.ListParams{ErrorGroup: "user N has no address"}, []int64{1, 2}},
		{"window", skipjack.ListParams{AfterID: 1, UntilID: 3}, []int64{2, 3}},
	}
	for _, tt := range tests {
		recs, err := a.List(ctx, tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []int64
		for _, r := range recs {
			got = append(got, r.ID)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && (got[0] != tt.want[0] || got[len(got)-1] != tt.want[len(tt.want)-1])) {
			t.Errorf("%s: List = %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, err := a.List(ctx, skipjack.ListParams{Payload: `[1]`}); err == nil {
		t.Errorf("List with a payload filter that is not an object: no error")
	}

	scheds, err := a.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(scheds) != 2 || scheds[0].Spec != "0 6 * * 1" || scheds[0].Timezone != "Europe/Berlin" || scheds[1].Spec != "@every 30s" ||
		len(scheds[1].Next) != skipjack.ScheduleSlotsShown || !scheds[1].Next[1].Equal(scheds[1].Next[0].Add(30*time.Second)) || scheds[0].Last != nil {
		t.Errorf("Schedules = %+v; want the cron and the @every schedule, 3 slots 30s apart, no slot inserted yet", scheds)
	}
}

// TestListByUniqueKey checks that a List filtered by the unique key's
// fields, in a unique state, reads the unique index (refresh_cache of
// golden/schedule, unique by region): FindUnique's plan uses the index,
// and the page holds exactly the jobs a table scan finds.
func TestListByUniqueKey(t *testing.T) {
	t.Parallel()
	cache, pool := goldenQueue(t, "schedule", "refresh_cache")
	exec(t, pool, `INSERT INTO skipjack.refresh_cache (payload, state, finished_at) VALUES
		('{"region": "eu"}', 'failed', now()),
		('{"region": "eu", "note": "again"}', 'pending', NULL),
		('{"region": "us"}', 'pending', NULL),
		('{"region": "eu", "note": "old"}', 'failed', now())`)
	a, err := tableadmin.New(cache, pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tests := []struct {
		name string
		p    skipjack.ListParams
		want []int64
	}{
		{"key in a unique state: the index", skipjack.ListParams{Payload: `{"region": "eu"}`, State: "pending"}, []int64{2}},
		{"key and more fields", skipjack.ListParams{Payload: `{"region": "eu", "note": "again"}`, State: "pending"}, []int64{2}},
		{"key and a field the job lacks", skipjack.ListParams{Payload: `{"region": "eu", "note": "x"}`, State: "pending"}, nil},
		{"key, window before the job", skipjack.ListParams{Payload: `{"region": "eu"}`, State: "pending", UntilID: 1}, nil},
		{"key in a state outside the key: a scan", skipjack.ListParams{Payload: `{"region": "eu"}`, State: "failed"}, []int64{1, 4}},
		{"key in every state: a scan", skipjack.ListParams{Payload: `{"region": "eu"}`}, []int64{1, 2, 4}},
	}
	for _, tt := range tests {
		recs, err := a.List(ctx, tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []int64
		for _, r := range recs {
			got = append(got, r.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: List = %v, want %v", tt.name, got, tt.want)
		}
	}

	// The plan of the lookup, with sequential scans priced out so that the
	// tiny table does not hide whether the index can serve it.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var plan string
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	find := regexp.MustCompile(`(?s)-- name: FindUnique :many\n(?:--[^\n]*\n)*(.*?;)`).FindStringSubmatch(cache.Queries)
	if find == nil {
		t.Fatalf("no FindUnique in the queries of refresh_cache:\n%s", cache.Queries)
	}
	query := strings.TrimSuffix(strings.ReplaceAll(find[1], "sqlc.arg(payload)", "$1"), ";")
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+query, `{"region": "eu"}`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan = strings.Join(lines, "\n")
	if !strings.Contains(plan, "refresh_cache_unique_idx") {
		t.Errorf("FindUnique's condition is not planned on the unique index:\n%s", plan)
	}
}
