package skipjack_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
)

// adminCase is a demo job put into one state by SQL, as workers and
// operators leave jobs, for the tables of Retry and Cancel.
type adminCase struct {
	name string
	set  string // SET clause that puts a fresh pending job into the state
}

// adminStates are the states Retry and Cancel must tell apart.
var adminStates = []adminCase{
	{"due pending", ``},
	{"scheduled", `run_at = now() + interval '1 hour'`},
	{"running", `state = 'running', attempt = 1, claim = 1, lease_expires_at = now() + interval '1 hour', worker = 'w'`},
	{"running, cancel requested", `state = 'running', attempt = 1, claim = 1, lease_expires_at = now() + interval '1 hour', worker = 'w', cancel_requested = true`},
	{"completed", `state = 'completed', attempt = 1, claim = 1, worker = 'w', finished_at = now() - interval '1 minute'`},
	{"failed, attempts left", `state = 'failed', attempt = 2, claim = 2, worker = 'w', finished_at = now() - interval '1 minute',
		errors = '[{"attempt": 1, "error": "e1"}, {"attempt": 2, "error": "e2"}]'`},
	{"failed, attempts used up", `state = 'failed', attempt = 25, claim = 25, worker = 'w', finished_at = now() - interval '1 minute',
		errors = '[{"attempt": 25, "error": "e25"}]'`},
	{"failed, cancelled while running", `state = 'failed', attempt = 1, claim = 1, worker = 'w', cancel_requested = true,
		finished_at = now() - interval '1 minute', errors = '[{"attempt": 1, "error": "cancelled"}]'`},
}

// newAdminJob enqueues a demo job and puts it into c's state.
func newAdminJob(t *testing.T, pool *pgxpool.Pool, c adminCase) row {
	t.Helper()
	ctx := context.Background()
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c.set != "" {
		if _, err := pool.Exec(ctx, `UPDATE skipjack.demo SET `+c.set+` WHERE id = $1`, id); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	return readRows(t, pool, "demo", id)[id]
}

// TestRetryResult retries one job in every state and checks the count and
// the row against what the reference promises: failed and scheduled jobs
// become pending with run_at the statement's now(), finished_at cleared,
// cancel_requested cleared, attempt and error history kept, and one more
// attempt when a failed job used them all up; due pending, running and
// completed jobs are left exactly as they were (a completed job never
// runs again), and an unknown id changes nothing.
//
// Kills retry-reruns-completed, retry-reruns-running, retry-no-extra-attempt
// and retry-keeps-finished-at.
func TestRetryResult(t *testing.T) {
	t.Parallel()
	retried := map[string]bool{"scheduled": true, "failed, attempts left": true, "failed, attempts used up": true, "failed, cancelled while running": true}
	pool := newQueues(t, 4)
	ctx := context.Background()
	for _, c := range adminStates {
		t.Run(c.name, func(t *testing.T) {
			before := newAdminJob(t, pool, c)
			from := dbNow(t, pool)
			n, err := demo.Retry(ctx, pool, before.ID)
			to := dbNow(t, pool)
			if err != nil {
				t.Fatalf("Retry: %v", err)
			}
			after := readRows(t, pool, "demo", before.ID)[before.ID]
			if !retried[c.name] {
				if n != 0 || !rowEqual(after, before) {
					t.Errorf("Retry of a %s job: changed %d, row %+v -> %+v; want 0 and the row unchanged", c.name, n, before, after)
				}
				return
			}
			want := before
			want.State = skipjack.StatePending
			want.FinishedAt = nil
			want.CancelRequested = false
			if before.State == skipjack.StateFailed && before.Attempt >= before.MaxAttempts {
				want.MaxAttempts = before.Attempt + 1
			}
			want.RunAt = after.RunAt
			if n != 1 || !rowEqual(after, want) {
				t.Errorf("Retry of a %s job: changed %d, row %+v; want 1 and %+v", c.name, n, after, want)
			}
			if after.RunAt.Before(from) || after.RunAt.After(to) {
				t.Errorf("Retry of a %s job: run_at %v, want the statement's now(), within [%v, %v]", c.name, after.RunAt, from, to)
			}
		})
	}
	t.Run("unknown id", func(t *testing.T) {
		if n, err := demo.Retry(ctx, pool, -5, 1<<40); err != nil || n != 0 {
			t.Errorf("Retry of unknown ids: (%d, %v), want (0, nil)", n, err)
		}
	})
}

// TestRetryManyCounts retries one of each state in one call, twice: the
// first call counts exactly the failed and scheduled jobs, the second
// none (they are due pending now), and a worker then runs exactly the
// retried jobs and the job that was due already, never the completed one.
//
// Kills retry-reruns-completed.
func TestRetryManyCounts(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	var ids []int64
	want := map[int64]bool{} // jobs a worker must run afterwards
	for _, c := range adminStates {
		r := newAdminJob(t, pool, c)
		ids = append(ids, r.ID)
		switch c.name {
		case "due pending", "scheduled", "failed, attempts left", "failed, attempts used up", "failed, cancelled while running":
			want[r.ID] = true
		}
	}
	// The running jobs hold leases for an hour: no worker of this test
	// takes them.
	if n, err := demo.Retry(ctx, pool, ids...); err != nil || n != 4 {
		t.Fatalf("Retry of one job per state: (%d, %v), want (4, nil)", n, err)
	}
	if n, err := demo.Retry(ctx, pool, ids...); err != nil || n != 0 {
		t.Fatalf("Retry again: (%d, %v), want (0, nil)", n, err)
	}
	ran := newTally()
	done := make(chan struct{})
	start(t, demo.NewWorker(pool, func(_ context.Context, job *demo.Job) error {
		ran.add(job.ID)
		if ran.len() == len(want) {
			close(done)
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 20 * time.Millisecond, Logger: quietLogger(t)}))
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("%d of %d jobs ran", ran.len(), len(want))
	}
	// A sentinel enqueued now runs after every job claimed before it.
	sentinel, err := demo.Enqueue(ctx, pool, demo.Payload{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the sentinel to run", func() bool { return ran.count(sentinel) == 1 })
	for _, id := range ids {
		if got := ran.count(id); got != map[bool]int{true: 1}[want[id]] {
			t.Errorf("job %d ran %d times, want %d", id, got, map[bool]int{true: 1}[want[id]])
		}
	}
}

// TestCancelResult cancels one job in every state: due and scheduled
// pending jobs fail at once with one more "cancelled" error and their
// attempt kept; a running job is flagged for its worker and stays running;
// completed, failed and already flagged jobs are left exactly as they
// were and are not counted.
//
// Kills cancel-counts-finished and cancel-fails-running-at-once.
func TestCancelResult(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	for _, c := range adminStates {
		t.Run(c.name, func(t *testing.T) {
			before := newAdminJob(t, pool, c)
			from := dbNow(t, pool)
			n, err := demo.Cancel(ctx, pool, before.ID)
			to := dbNow(t, pool)
			if err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			after := readRows(t, pool, "demo", before.ID)[before.ID]
			want, wantN := before, int64(1)
			switch c.name {
			case "due pending", "scheduled":
				want.State = skipjack.StateFailed
				want.CancelRequested = true
				want.Errors++
				want.FinishedAt = after.FinishedAt
				if after.FinishedAt == nil || after.FinishedAt.Before(from) || after.FinishedAt.After(to) {
					t.Errorf("finished_at %v, want the statement's now(), within [%v, %v]", after.FinishedAt, from, to)
				}
			case "running":
				want.CancelRequested = true
			default:
				wantN = 0
			}
			if n != wantN || !rowEqual(after, want) {
				t.Errorf("Cancel of a %s job: changed %d, row %+v; want %d and %+v", c.name, n, after, wantN, want)
			}
		})
	}
}

// rowEqual reports whether two rows hold the same values.
func rowEqual(a, b row) bool {
	fa, fb := a.FinishedAt, b.FinishedAt
	a.FinishedAt, b.FinishedAt = nil, nil
	if (fa == nil) != (fb == nil) || fa != nil && !fa.Equal(*fb) {
		return false
	}
	return a.RunAt.Equal(b.RunAt) && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ID == b.ID && a.State == b.State && a.Attempt == b.Attempt && a.MaxAttempts == b.MaxAttempts &&
		a.Priority == b.Priority && a.Claim == b.Claim && a.CancelRequested == b.CancelRequested &&
		a.Errors == b.Errors && a.N == b.N
}

// TestGetAndListRecords checks that Get returns every column the options
// set (priority and run_at exactly) and that List pages by the limits the
// reference gives: 100 by default, 1000 at most, AfterID exclusive, in id
// order, filtered by state.
//
// Kills record-drops-priority and list-limit-uncapped.
func TestGetAndListRecords(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	at := micro(time.Now().Add(2 * time.Hour))
	id, err := ranked.Enqueue(ctx, pool, ranked.Payload{N: 7}, skipjack.Priority(6), skipjack.RunAt(at))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ranked.Get(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Priority != 6 || !r.RunAt.Equal(at) || r.Payload.N != 7 || r.State != skipjack.StatePending || r.MaxAttempts != 25 {
		t.Errorf("Get = priority %d, run_at %v, n %d, %s, max %d; want 6, %v, 7, pending, 25", r.Priority, r.RunAt, r.Payload.N, r.State, r.MaxAttempts, at)
	}
	raw, err := ranked.Admin(pool).Get(ctx, id)
	if err != nil || raw.Priority != 6 || !raw.RunAt.Equal(at) {
		t.Errorf("Admin.Get = %+v, %v; want priority 6, run_at %v", raw, err, at)
	}

	ps := make([]demo.Payload, 1200)
	for i := range ps {
		ps[i].N = int64(i)
	}
	if _, err := demo.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := range readRows(t, pool, "demo") {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Fail every 7th job, so a state filter has something to drop.
	var failed []int64
	for i := 0; i < len(ids); i += 7 {
		failed = append(failed, ids[i])
	}
	if _, err := pool.Exec(ctx, `UPDATE skipjack.demo SET state = 'failed', finished_at = now() WHERE id = ANY($1)`, failed); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    skipjack.ListParams
		want []int64
	}{
		{"default limit", skipjack.ListParams{}, ids[:100]},
		{"limit capped at 1000", skipjack.ListParams{Limit: 5000}, ids[:1000]},
		{"after an id", skipjack.ListParams{AfterID: ids[1189], Limit: 50}, ids[1190:]},
		{"failed only", skipjack.ListParams{State: skipjack.StateFailed, AfterID: failed[3], Limit: 3}, failed[4:7]},
		{"completed: none", skipjack.ListParams{State: skipjack.StateCompleted}, nil},
	}
	for _, tt := range tests {
		rs, err := demo.List(ctx, pool, tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []int64
		for _, r := range rs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("List %s (%+v): %d jobs %v..., want %d from %v", tt.name, tt.p, len(got), head(got), len(tt.want), head(tt.want))
		}
	}
	if _, err := demo.Get(ctx, pool, ids[len(ids)-1]+1); !errors.Is(err, skipjack.ErrNotFound) {
		t.Errorf("Get of the id after the last: %v, want ErrNotFound", err)
	}
}

// head returns the first ids of a list, for messages.
func head(ids []int64) []int64 { return ids[:min(len(ids), 3)] }
