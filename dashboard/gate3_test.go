package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// The gate3 tests pin what issue 46's mutation audit found unheld in the
// dashboard, against real Postgres: the Scheduled tab's payload filter and
// the retry of a whole failure group.

// listedJobs returns the ids of the job rows of a queue page, in order.
func listedJobs(body string) []int64 {
	var ids []int64
	for _, m := range regexp.MustCompile(`<tr data-job="([0-9]+)"`).FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	return ids
}

// TestGate3ScheduledTabFilters checks that the Scheduled tab lists only
// the scheduled jobs that its payload filter selects: not the due ones,
// and not the scheduled jobs of other payloads.
func TestGate3ScheduledTabFilters(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	first, err := sendemail.Enqueue(ctx, pool, sendemail.Payload{To: "ada@example.com"}) // due: the cursor of the newer-jobs page
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i, to := range []string{"ada@example.com", "bob@example.com", "ada@example.com", "cy@example.com"} {
		id, err := sendemail.Enqueue(ctx, pool, sendemail.Payload{To: to, Subject: strconv.Itoa(i)}, skipjack.Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if to == "ada@example.com" {
			want = append(want, id)
		}
	}
	if _, err := sendemail.Enqueue(ctx, pool, sendemail.Payload{To: "ada@example.com"}); err != nil { // due, not scheduled
		t.Fatal(err)
	}
	h, err := New(Config{Queues: admins(pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(want) // job lists are newest first
	// The first page reads newest first; a page of newer jobs (after a
	// cursor) reads upwards from it, another scan.
	for _, page := range []url.Values{
		{"state": {"scheduled"}, "where": {"to = ada@example.com"}},
		{"state": {"scheduled"}, "where": {"to = ada@example.com"}, "after": {strconv.FormatInt(first, 10)}},
	} {
		res, body := do(t, h, httptest.NewRequest("GET", "/queues/send_email?"+page.Encode(), nil))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%v: status %d:\n%s", page, res.StatusCode, body)
		}
		if got := listedJobs(body); !slices.Equal(got, want) {
			t.Errorf("the Scheduled tab (%v) lists jobs %v, want %v (the scheduled jobs to ada)", page, got, want)
		}
	}
}

// TestGate3GroupRetryRetriesTheWholeGroup checks that retrying a failure
// group retries every failed job of the group, also those far apart in id
// (beyond the first window the collection of its jobs scans), and none of
// another group's.
func TestGate3GroupRetryRetriesTheWholeGroup(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `
		INSERT INTO skipjack.send_email (id, payload, state, attempt, finished_at, errors) OVERRIDING SYSTEM VALUE
		SELECT g, '{"to": "x@example.com"}', 'failed', 1, now(),
		       jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), 'worker', 'w',
		           'error', CASE WHEN g % 2 = 0 THEN 'smtp: 550 mailbox unavailable' ELSE 'dns: no such host' END))
		FROM unnest(ARRAY[1, 2, 3, 4, 12000, 12001, 12002, 25000, 25001, 45000]) AS g`); err != nil {
		t.Fatal(err)
	}
	groups, err := sendemail.Admin(pool).(skipjack.QueueInsights).FailureGroups(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var group string
	for _, g := range groups {
		if g.Jobs == 6 {
			group = g.Error
		}
	}
	if group == "" {
		t.Fatalf("no failure group of 6 jobs in %+v", groups)
	}
	h, err := New(Config{Queues: admins(pool), Actions: true, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	token := confirmToken(t, h, "/queues/send_email/failures/retry?"+url.Values{"error": {group}}.Encode())
	res, body := do(t, h, postForm("/queues/send_email/failures/retry", url.Values{"token": {token}, "error": {group}}))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST retry group: status %d:\n%s", res.StatusCode, body)
	}
	var pending []int64
	rows, err := pool.Query(ctx, `SELECT id FROM skipjack.send_email WHERE state = 'pending' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 4, 12000, 12002, 25000, 45000}; !slices.Equal(pending, want) {
		t.Errorf("after retrying group %q, pending jobs %v, want %v (the whole group)", group, pending, want)
	}
}
