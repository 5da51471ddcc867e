package skipjack_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestAdminGet reads a job with Get, and a missing one.
func TestAdminGet(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	before := time.Now().Add(-time.Second)
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 7, Label: "seven"}, skipjack.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r, err := demo.Get(ctx, pool, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if r.ID != id || r.State != skipjack.StatePending || r.Attempt != 0 || r.MaxAttempts != 25 ||
		r.Payload != (demo.Payload{N: 7, Label: "seven"}) || r.FinishedAt != nil || r.Worker != "" || len(r.Errors) != 0 {
		t.Errorf("Get = %+v", r)
	}
	if r.CreatedAt.Before(before) || r.RunAt.Sub(r.CreatedAt) < 59*time.Minute {
		t.Errorf("Get: created_at %v, run_at %v; want run_at an hour after created_at", r.CreatedAt, r.RunAt)
	}

	_, err = demo.Get(ctx, pool, id+1000)
	if !errors.Is(err, skipjack.ErrNotFound) {
		t.Errorf("Get of a missing id: %v, want ErrNotFound", err)
	}
	if _, err := demo.Admin(pool).Get(ctx, -1); !errors.Is(err, skipjack.ErrNotFound) {
		t.Errorf("Admin.Get of a missing id: %v, want ErrNotFound", err)
	}
}

// TestAdminListRetryCancel lists jobs by state a page at a time, cancels
// pending jobs and retries failed and scheduled ones.
func TestAdminListRetryCancel(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	var ids []int64
	for i := range 25 {
		id, err := demo.Enqueue(ctx, pool, demo.Payload{N: int64(i)}, skipjack.Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Cancel every third job: pending -> failed "cancelled".
	var cancelled []int64
	for i, id := range ids {
		if i%3 == 0 {
			cancelled = append(cancelled, id)
		}
	}
	n, err := demo.Cancel(ctx, pool, cancelled...)
	if err != nil || n != int64(len(cancelled)) {
		t.Fatalf("Cancel: (%d, %v), want (%d, nil)", n, err, len(cancelled))
	}
	if n, err := demo.Cancel(ctx, pool, cancelled...); err != nil || n != 0 {
		t.Errorf("Cancel again: (%d, %v), want (0, nil)", n, err)
	}
	r, err := demo.Get(ctx, pool, cancelled[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.State != skipjack.StateFailed || r.FinishedAt == nil || len(r.Errors) != 1 || r.Errors[0].Error != "cancelled" {
		t.Errorf("cancelled pending job: state %s, finished_at %v, errors %+v; want failed, set, [cancelled]", r.State, r.FinishedAt, r.Errors)
	}

	// List failed jobs 4 at a time.
	var listed []int64
	page := skipjack.ListParams{State: skipjack.StateFailed, Limit: 4}
	for pages := 0; ; pages++ {
		rs, err := demo.List(ctx, pool, page)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(rs) == 0 {
			if pages != 3 {
				t.Errorf("%d pages of failed jobs, want 3", pages)
			}
			break
		}
		if len(rs) > 4 {
			t.Fatalf("page of %d jobs, limit 4", len(rs))
		}
		for _, r := range rs {
			if r.State != skipjack.StateFailed {
				t.Errorf("List(failed) returned job %d in state %s", r.ID, r.State)
			}
			listed = append(listed, r.ID)
		}
		page.AfterID = rs[len(rs)-1].ID
	}
	if !slices.Equal(listed, cancelled) {
		t.Errorf("failed jobs listed %v, want %v", listed, cancelled)
	}
	all, err := demo.List(ctx, pool, skipjack.ListParams{})
	if err != nil || len(all) != len(ids) {
		t.Fatalf("List(all): %d jobs, %v; want %d", len(all), err, len(ids))
	}
	for i, r := range all {
		if r.ID != ids[i] || r.Payload.N != int64(i) {
			t.Errorf("List(all)[%d] = job %d n=%d, want job %d n=%d", i, r.ID, r.Payload.N, ids[i], i)
		}
	}
	if _, err := demo.List(ctx, pool, skipjack.ListParams{State: "done"}); err == nil {
		t.Error("List with an unknown state: no error")
	}

	// Retry a failed and a scheduled job: both pending and due now. A due
	// pending job is left alone.
	due, err := demo.Enqueue(ctx, pool, demo.Payload{})
	if err != nil {
		t.Fatal(err)
	}
	n, err = demo.Retry(ctx, pool, cancelled[0], ids[1], due, 9999)
	if err != nil || n != 2 {
		t.Fatalf("Retry: (%d, %v), want (2, nil)", n, err)
	}
	for _, id := range []int64{cancelled[0], ids[1]} {
		r, err := demo.Get(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != skipjack.StatePending || r.FinishedAt != nil || time.Since(r.RunAt) < -time.Second {
			t.Errorf("retried job %d: state %s, finished_at %v, run_at %v; want pending, nil, now", id, r.State, r.FinishedAt, r.RunAt)
		}
	}
	if s, err := demo.Stats(ctx, pool); err != nil || s.Pending != 3 || s.Failed != int64(len(cancelled)-1) {
		t.Errorf("Stats after Retry: %+v, %v; want 3 pending, %d failed", s, err, len(cancelled)-1)
	}

	// Admin is the same view with raw JSON payloads.
	a := demo.Admin(pool)
	if a.Name() != "demo" {
		t.Errorf("Admin.Name() = %q", a.Name())
	}
	raw, err := a.List(ctx, skipjack.ListParams{State: skipjack.StateFailed, AfterID: cancelled[1], Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || raw[0].ID != cancelled[2] || raw[1].ID != cancelled[3] {
		t.Fatalf("Admin.List after %d: %d records, want jobs %v", cancelled[1], len(raw), cancelled[2:4])
	}
	var p map[string]any
	if err := json.Unmarshal(raw[0].Payload, &p); err != nil || p["n"] != float64(6) || p["label"] != "" {
		t.Errorf("Admin.List payload %s (%v), want {\"n\": 6, \"label\": \"\"}", raw[0].Payload, err)
	}
	typed, err := demo.Get(ctx, pool, raw[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, raw[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != typed.State || !got.RunAt.Equal(typed.RunAt) || len(got.Errors) != 1 || string(got.Payload) != string(raw[0].Payload) {
		t.Errorf("Admin.Get = %+v, typed Get = %+v", got, typed)
	}
	if n, err := a.Retry(ctx, raw[0].ID); err != nil || n != 1 {
		t.Errorf("Admin.Retry: (%d, %v), want (1, nil)", n, err)
	}
	if n, err := a.Cancel(ctx, raw[0].ID, raw[1].ID); err != nil || n != 1 {
		t.Errorf("Admin.Cancel of a pending and a failed job: (%d, %v), want (1, nil)", n, err)
	}
}

// TestAdminCancelRunning cancels running jobs: each handler's ctx is
// cancelled with cause ErrCancelled within a heartbeat interval (the slow
// queue's lease is 3s, so 1s), and the job ends failed "cancelled", not
// retried, whatever its handler returns.
func TestAdminCancelRunning(t *testing.T) {
	t.Parallel()
	const heartbeat = time.Second // slow's lease / 3
	tests := []struct {
		name   string
		result func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, job *slow.Job) error
	}{{
		name:   "handler returns ctx.Err()",
		result: func(ctx context.Context, _ *testing.T, _ *pgxpool.Pool, _ *slow.Job) error { return ctx.Err() },
	}, {
		name:   "handler returns nil",
		result: func(context.Context, *testing.T, *pgxpool.Pool, *slow.Job) error { return nil },
	}, {
		name: "handler snoozes",
		result: func(context.Context, *testing.T, *pgxpool.Pool, *slow.Job) error {
			return skipjack.Snooze(time.Millisecond)
		},
	}, {
		name:   "handler panics",
		result: func(context.Context, *testing.T, *pgxpool.Pool, *slow.Job) error { panic("cancelled!") },
	}, {
		name: "handler completes in a transaction",
		result: func(_ context.Context, t *testing.T, pool *pgxpool.Pool, job *slow.Job) error {
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if err := slow.CompleteTx(ctx, tx, job); !errors.Is(err, skipjack.ErrLeaseLost) {
				t.Errorf("CompleteTx of a cancelled job: %v, want ErrLeaseLost", err)
				return tx.Commit(ctx)
			}
			return nil
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 0)
			ctx := context.Background()
			id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			cause := make(chan error, 1)
			var calls atomic.Int32
			w := slow.NewWorker(pool, func(ctx context.Context, job *slow.Job) error {
				calls.Add(1)
				started <- struct{}{}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return tt.result(ctx, t, pool, job)
			}, skipjack.WorkerConfig{PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)})
			stop := start(t, w)
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the job did not start")
			}
			if r, err := slow.Get(ctx, pool, id); err != nil || r.State != skipjack.StateRunning || r.Worker == "" {
				t.Fatalf("Get of the running job: %+v, %v", r, err)
			}
			at := time.Now()
			if n, err := slow.Cancel(ctx, pool, id); err != nil || n != 1 {
				t.Fatalf("Cancel: (%d, %v), want (1, nil)", n, err)
			}
			select {
			case c := <-cause:
				// A heartbeat interval, plus slack for a loaded CI machine;
				// still well under the lease (3s), the other way a worker
				// could notice.
				if took := time.Since(at); took > heartbeat+time.Second {
					t.Errorf("handler cancelled %v after Cancel, want within a heartbeat interval (%v)", took, heartbeat)
				}
				if !errors.Is(c, skipjack.ErrCancelled) {
					t.Errorf("context.Cause = %v, want ErrCancelled", c)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the handler's ctx was not cancelled")
			}
			var r *slow.Record
			waitFor(t, 5*time.Second, "the job to end", func() bool {
				r, err = slow.Get(ctx, pool, id)
				return err != nil || (r.State != skipjack.StateRunning && r.State != skipjack.StatePending)
			})
			if err != nil {
				t.Fatalf("Get after cancel: %v (the job was deleted as completed?)", err)
			}
			if r.State != skipjack.StateFailed || r.Attempt != 1 || len(r.Errors) == 0 || r.Errors[len(r.Errors)-1].Error != "cancelled" {
				t.Errorf("cancelled running job: state %s, attempt %d, errors %+v; want failed, 1, [... cancelled]", r.State, r.Attempt, r.Errors)
			}
			stop()
			if n := calls.Load(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

// TestAdminCancelPrefetched cancels a job its worker claimed but has not
// started when the worker shuts down: the release at shutdown fails it as
// cancelled instead of making it pending again.
func TestAdminCancelPrefetched(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()
	running, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan int64, 2)
	finish := make(chan struct{})
	w := slow.NewWorker(pool, func(ctx context.Context, job *slow.Job) error {
		started <- job.ID
		<-finish
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 20 * time.Millisecond, Logger: quietLogger(t)})
	stop := start(t, w)
	if id := <-started; id != running {
		t.Fatalf("started job %d, want %d", id, running)
	}
	prefetched, err := slow.Enqueue(ctx, pool, slow.Payload{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the second job to be claimed", func() bool {
		r, err := slow.Get(ctx, pool, prefetched)
		return err == nil && r.State == skipjack.StateRunning
	})
	if n, err := slow.Cancel(ctx, pool, prefetched); err != nil || n != 1 {
		t.Fatalf("Cancel: (%d, %v), want (1, nil)", n, err)
	}
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	waitFor(t, 5*time.Second, "the prefetched job to be released", func() bool {
		r, err := slow.Get(ctx, pool, prefetched)
		return err == nil && r.State != skipjack.StateRunning
	})
	close(finish)
	<-stopped
	r, err := slow.Get(ctx, pool, prefetched)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != skipjack.StateFailed || len(r.Errors) != 1 || r.Errors[0].Error != "cancelled" {
		t.Errorf("cancelled prefetched job after shutdown: state %s, errors %+v; want failed, [cancelled]", r.State, r.Errors)
	}
	select {
	case id := <-started:
		t.Errorf("job %d started after it was cancelled", id)
	default:
	}
}

// TestAdminCancelWhileClaimed cancels a pending job while a claim that
// makes it running holds its row lock: Cancel waits for the claim and then
// flags the now running job, instead of missing it (it was pending in its
// snapshot and no longer pending once the lock was released).
func TestAdminCancelWhileClaimed(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()
	id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Rollback(ctx)
	if _, err := claim.Exec(ctx, `UPDATE skipjack.slow SET state = 'running', attempt = attempt + 1, claim = claim + 1,
		lease_expires_at = now() + interval '1 minute', worker = 'test' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := slow.Cancel(ctx, pool, id)
		done <- result{n, err}
	}()
	waitFor(t, 5*time.Second, "Cancel to wait for the claim's row lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%Cancel%'`) > 0
	})
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 1 {
		t.Errorf("Cancel of a job claimed meanwhile: (%d, %v), want (1, nil)", r.n, r.err)
	}
	rec, err := slow.Get(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	flagged := queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE id = $1 AND cancel_requested`, id)
	if rec.State != skipjack.StateRunning || flagged != 1 {
		t.Errorf("job claimed while cancelled: state %s, cancel_requested %v; want running, true (its worker cancels it)", rec.State, flagged == 1)
	}
}
