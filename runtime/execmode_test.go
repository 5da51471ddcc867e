package skipjack_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/kept"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tock"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// execModes are pgx's query exec modes: every generated query and every
// runtime statement must work in each, since poolers and proxies push users
// towards exec and simple_protocol (no named prepared statements).
var execModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// newModePool returns a pool on a fresh database whose connections use
// mode, with the test queues migrated through it (twice: the second run
// finds nothing to do). route, if not nil, rewrites the database's URL
// (to connect through PgBouncer).
func newModePool(t *testing.T, mode pgx.QueryExecMode, maxConns int32, route func(string) string) *pgxpool.Pool {
	t.Helper()
	dbURL := skipjacktest.NewDatabase(t)
	if route != nil {
		dbURL = route(dbURL)
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("parse %s: %v", dbURL, err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	for i := range 2 {
		if err := testqueue.Migrate(ctx, pool); err != nil {
			t.Fatalf("migrate (run %d): %v", i+1, err)
		}
	}
	return pool
}

// TestExecModes runs exerciseQueues through pools in each of pgx's query
// exec modes, with workers woken by LISTEN/NOTIFY.
func TestExecModes(t *testing.T) {
	t.Parallel()
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			exerciseQueues(t, newModePool(t, mode, 24, nil), false)
		})
	}
}

// exerciseQueues runs producers, workers and admin functions on pool:
// single, batched (COPY), delayed and prioritized enqueues; handlers that
// succeed, retry, snooze, fail permanently, ack with CompleteTx, outlive a
// heartbeat, are cancelled while running, and run or wait prefetched at
// shutdown; retention pruning; Stats, Get, List, Retry and Cancel. Any
// statement that fails shows up as an error returned here or as a warning
// the workers log. The workers poll only when pollOnly is set.
func exerciseQueues(t *testing.T, pool *pgxpool.Pool, pollOnly bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := newLogs(t)
	cfg := skipjack.WorkerConfig{
		Concurrency:     2,
		PollInterval:    50 * time.Millisecond,
		ShutdownTimeout: 100 * time.Millisecond,
		PollOnly:        pollOnly,
		Logger:          logs.logger(),
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE side (job_id bigint PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	runs, rankedRuns, keptRuns, slowRuns := newTally(), newTally(), newTally(), newTally()

	// fast: one job per handler outcome, enqueued one by one, in a batch,
	// and delayed both ways.
	var snoozed sync.Map
	fastWorker := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		runs.add(job.ID)
		switch job.Payload.Label {
		case "retry":
			if job.Attempt == 1 {
				return errors.New("first attempt fails")
			}
		case "snooze":
			if _, again := snoozed.LoadOrStore(job.ID, true); !again {
				return skipjack.Snooze(time.Millisecond)
			}
		case "permanent":
			if job.Attempt == 1 {
				return skipjack.Permanent(errors.New("no use retrying"))
			}
		case "tx":
			txCtx, cancel := beyondTimeout(ctx)
			defer cancel()
			return pgx.BeginFunc(txCtx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(txCtx, `INSERT INTO side VALUES ($1)`, job.ID); err != nil {
					return err
				}
				return fast.CompleteTx(txCtx, tx, job)
			})
		}
		return nil
	}, cfg)
	ids := enqueueFastLabels(t, ctx, pool)

	// ranked: priorities through Enqueue and both COPY variants.
	rankedWorker := ranked.NewWorker(pool, func(ctx context.Context, job *ranked.Job) error {
		rankedRuns.add(job.ID)
		return nil
	}, cfg)
	enqueueRanked(t, ctx, pool)

	// kept: retained for a second, then pruned.
	keptWorker := kept.NewWorker(pool, func(ctx context.Context, job *kept.Job) error {
		keptRuns.add(job.ID)
		if job.Payload.N < 0 {
			return skipjack.Permanent(errors.New("negative"))
		}
		return nil
	}, cfg)
	since := time.Now().Add(-time.Minute)
	if n, err := kept.EnqueueMany(ctx, pool, []kept.Payload{{N: 1}, {N: 2}, {N: -1}}); err != nil || n != 3 {
		t.Fatalf("kept EnqueueMany = %d, %v; want 3, nil", n, err)
	}

	// slow: a job that outlives a heartbeat (lease 3s, so one every 1s) and
	// one cancelled while it runs.
	running := make(chan int64, 2)
	slowWorker := slow.NewWorker(pool, func(ctx context.Context, job *slow.Job) error {
		slowRuns.add(job.ID)
		running <- job.ID
		select {
		case <-time.After(1200 * time.Millisecond):
			if job.Payload.N == 1 {
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}, cfg)
	slowIDs := make(map[int64]int64)
	for n := int64(1); n <= 2; n++ {
		id, err := slow.Enqueue(ctx, pool, slow.Payload{N: n})
		if err != nil {
			t.Fatalf("slow Enqueue: %v", err)
		}
		slowIDs[n] = id
	}

	// demo: one job running and one prefetched at shutdown; the prefetched
	// one is released at once, the running one when ShutdownTimeout
	// cancels it (attempt restored, per DESIGN.md's Shutdown).
	demoRunning := make(chan struct{}, 2)
	demoCfg := cfg
	demoCfg.Concurrency, demoCfg.BatchSize = 1, 2
	demoWorker := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		demoRunning <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, demoCfg)
	if n, err := demo.EnqueueMany(ctx, pool, []demo.Payload{{N: 1}, {N: 2}}); err != nil || n != 2 {
		t.Fatalf("demo EnqueueMany = %d, %v; want 2, nil", n, err)
	}

	stopDemo := start(t, demoWorker)
	stops := []func(){start(t, slowWorker), start(t, fastWorker), start(t, rankedWorker), start(t, keptWorker)}
	for range 2 {
		select {
		case <-running:
		case <-ctx.Done():
			t.Fatal("the slow jobs did not start")
		}
	}
	if n, err := slow.Cancel(ctx, pool, slowIDs[2]); err != nil || n != 1 {
		t.Fatalf("Cancel of a running job = %d, %v; want 1, nil", n, err)
	}
	select {
	case <-demoRunning:
	case <-ctx.Done():
		t.Fatal("the demo job did not start")
	}
	waitFor(t, 10*time.Second, "both demo jobs to be claimed", func() bool {
		s, err := demo.Stats(ctx, pool)
		return err == nil && s.Running == 2
	})
	stopDemo()
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0`); n != 2 {
		t.Errorf("%d demo jobs pending with attempt 0 after shutdown, want both: the prefetched one and the one interrupted by shutdown", n)
	}

	waitFor(t, 30*time.Second, "the fast jobs to settle", func() bool {
		s, err := fast.Stats(ctx, pool)
		return err == nil && s.Pending == 0 && s.Scheduled == 0 && s.Running == 0 && s.Failed == 2
	})
	failed, err := fast.List(ctx, pool, skipjack.ListParams{State: skipjack.StateFailed})
	if err != nil || len(failed) != 2 || failed[0].ID != ids["permanent"] || failed[1].ID != ids["cancelled"] {
		t.Fatalf("failed fast jobs = %v, %v; want the permanent and the cancelled one", failed, err)
	}
	if e := failed[0].Errors; len(e) != 1 || e[0].Error != "no use retrying" {
		t.Errorf("errors of the permanently failed job = %+v, want its handler's error", e)
	}
	if n, err := fast.Retry(ctx, pool, ids["permanent"]); err != nil || n != 1 {
		t.Fatalf("Retry of a failed job = %d, %v; want 1, nil", n, err)
	}
	waitFor(t, 10*time.Second, "the retried job to complete", func() bool {
		_, err := fast.Get(ctx, pool, ids["permanent"])
		return errors.Is(err, skipjack.ErrNotFound)
	})
	if n := queryInt(t, pool, `SELECT count(*) FROM side WHERE job_id = $1`, ids["tx"]); n != 1 {
		t.Errorf("CompleteTx's side row committed %d times, want once", n)
	}
	for label, want := range map[string]int{"ok": 1, "in tx": 1, "retry": 2, "snooze": 2, "permanent": 2, "tx": 1, "scheduled": 1, "cancelled": 0} {
		runs.mu.Lock()
		got := runs.m[ids[label]]
		runs.mu.Unlock()
		if got != want {
			t.Errorf("the %q job ran %d times, want %d", label, got, want)
		}
	}

	waitFor(t, 10*time.Second, "the ranked jobs to complete", func() bool {
		s, err := ranked.Stats(ctx, pool)
		return err == nil && s == (skipjack.Stats{})
	})
	// Pruning may already have deleted some of them: Finished counts at
	// most the three.
	if completed, failed, err := kept.Admin(pool).Finished(ctx, since); err != nil || completed > 2 || failed > 1 {
		t.Errorf("kept Finished = %d, %d, %v; want at most 2 completed and 1 failed", completed, failed, err)
	}
	waitFor(t, 15*time.Second, "the kept jobs to be pruned", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.kept`) == 0
	})

	waitFor(t, 15*time.Second, "the heartbeat job to complete and the cancelled one to fail", func() bool {
		_, err := slow.Get(ctx, pool, slowIDs[1])
		rec, err2 := slow.Get(ctx, pool, slowIDs[2])
		return errors.Is(err, skipjack.ErrNotFound) && err2 == nil && rec.State == skipjack.StateFailed
	})
	if n := slowRuns.len(); n != 2 || slowRuns.duplicates() != 0 {
		t.Errorf("slow jobs ran %v, want each of the two once", slowRuns.m)
	}
	if n := rankedRuns.len(); n != 4 || rankedRuns.duplicates() != 0 {
		t.Errorf("ranked jobs ran %v, want each of the four once", rankedRuns.m)
	}
	if n := keptRuns.len(); n != 3 || keptRuns.duplicates() != 0 {
		t.Errorf("kept jobs ran %v, want each of the three once", keptRuns.m)
	}
	for _, stop := range stops {
		stop()
	}
	exerciseUniqueAndPeriodic(t, ctx, pool, cfg)
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "shutdown timeout passed") {
			continue // the demo job running at shutdown
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("worker logged: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("worker logs:\n%s", logs)
	}
}

// enqueueFastLabels enqueues exerciseQueues' fast jobs, one per label of the
// handler, and returns their ids by label: single enqueues on the pool and
// inside a transaction, batches, delays, a RunAt, and a scheduled job that
// Retry makes due and one that Cancel fails.
func enqueueFastLabels(t *testing.T, ctx context.Context, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	for _, label := range []string{"ok", "retry", "snooze", "permanent", "tx", "scheduled", "cancelled"} {
		var opts []skipjack.EnqueueOption
		if label == "scheduled" || label == "cancelled" {
			opts = append(opts, skipjack.Delay(time.Hour))
		}
		id, err := fast.Enqueue(ctx, pool, fast.Payload{N: 1, Label: label}, opts...)
		if err != nil {
			t.Fatalf("Enqueue %s: %v", label, err)
		}
		ids[label] = id
	}
	at := micro(time.Now().Add(100 * time.Millisecond))
	atID, err := fast.Enqueue(ctx, pool, fast.Payload{Label: "at"}, skipjack.RunAt(at))
	if err != nil {
		t.Fatalf("Enqueue with RunAt: %v", err)
	}
	// Inside a transaction Enqueue keeps the insert trigger's NOTIFY (on a
	// pool it sends its own after the commit).
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		id, err := fast.Enqueue(ctx, tx, fast.Payload{N: 1, Label: "ok"})
		ids["in tx"] = id
		return err
	})
	if err != nil {
		t.Fatalf("Enqueue in a transaction: %v", err)
	}
	batch := []fast.Payload{{N: 1, Label: "ok"}, {N: 2, Label: "ok"}, {N: 3, Label: "ok"}}
	if n, err := fast.EnqueueMany(ctx, pool, batch); err != nil || n != 3 {
		t.Fatalf("EnqueueMany = %d, %v; want 3, nil", n, err)
	}
	beforeDelayed := dbNow(t, pool)
	if n, err := fast.EnqueueMany(ctx, pool, batch, skipjack.Delay(100*time.Millisecond)); err != nil || n != 3 {
		t.Fatalf("EnqueueMany with Delay = %d, %v; want 3, nil", n, err)
	}
	// The jobs delayed by 100ms may already be due on a loaded machine;
	// their stored run_at says whether the delay was applied.
	if s, err := fast.Stats(ctx, pool); err != nil || s.Pending+s.Scheduled != 15 || s.Scheduled < 2 {
		t.Fatalf("Stats before work = %+v, %v; want 15 pending or scheduled, at least 2 of them scheduled", s, err)
	}
	// Exact, whatever the load: undelayed jobs run at their creation, the
	// RunAt job at its time, and the batch delayed by 100ms (whose run_at
	// the database computed after beforeDelayed) and the two delayed by an
	// hour no earlier than 100ms after beforeDelayed.
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE run_at = created_at`); n != 9 {
		t.Fatalf("%d fast jobs have run_at = created_at, want the 9 enqueued without an option", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE id = $1 AND run_at = $2`, atID, at); n != 1 {
		t.Fatalf("the RunAt job's run_at is not %v", at)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE run_at >= $1`, beforeDelayed.Add(100*time.Millisecond)); n != 5 {
		t.Fatalf("%d fast jobs have a run_at at least 100ms after the delayed batch's call, want 5 (the batch and the two delayed an hour)", n)
	}
	if n, err := fast.Cancel(ctx, pool, ids["cancelled"]); err != nil || n != 1 {
		t.Fatalf("Cancel of a scheduled job = %d, %v; want 1, nil", n, err)
	}
	if n, err := fast.Retry(ctx, pool, ids["scheduled"]); err != nil || n != 1 {
		t.Fatalf("Retry of a scheduled job = %d, %v; want 1, nil", n, err)
	}
	return ids
}

// enqueueRanked enqueues exerciseQueues' ranked jobs with priorities
// through Enqueue and both COPY variants, and reads them back with Get and
// List.
func enqueueRanked(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	rid, err := ranked.Enqueue(ctx, pool, ranked.Payload{N: 1}, skipjack.Priority(3))
	if err != nil {
		t.Fatalf("ranked Enqueue: %v", err)
	}
	if n, err := ranked.EnqueueMany(ctx, pool, []ranked.Payload{{N: 2}, {N: 3}}, skipjack.Priority(7)); err != nil || n != 2 {
		t.Fatalf("ranked EnqueueMany = %d, %v; want 2, nil", n, err)
	}
	if n, err := ranked.EnqueueMany(ctx, pool, []ranked.Payload{{N: 4}}, skipjack.Priority(1), skipjack.RunAt(time.Now().Add(50*time.Millisecond))); err != nil || n != 1 {
		t.Fatalf("ranked EnqueueMany with RunAt = %d, %v; want 1, nil", n, err)
	}
	if rec, err := ranked.Get(ctx, pool, rid); err != nil || rec.Priority != 3 || rec.Payload.N != 1 || rec.State != skipjack.StatePending {
		t.Fatalf("ranked Get = %+v, %v; want pending, priority 3, n 1", rec, err)
	}
	page, err := ranked.List(ctx, pool, skipjack.ListParams{State: skipjack.StatePending, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != rid || page[1].Priority != 7 {
		t.Fatalf("ranked List = %v, %v; want the first two jobs", page, err)
	}
	if next, err := ranked.List(ctx, pool, skipjack.ListParams{AfterID: page[1].ID}); err != nil || len(next) != 2 {
		t.Fatalf("ranked List after %d = %v, %v; want two jobs", page[1].ID, next, err)
	}
}

// exerciseUniqueAndPeriodic covers the queries of unique and periodic
// queues for exerciseQueues: duplicates refused by Enqueue and skipped by
// EnqueueMany, and a periodic schedule (with missed: once, which reads the
// last slot at start) inserting jobs that a worker runs.
func exerciseUniqueAndPeriodic(t *testing.T, ctx context.Context, pool *pgxpool.Pool, cfg skipjack.WorkerConfig) {
	t.Helper()
	first, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "a", N: 1})
	if err != nil {
		t.Fatalf("uniq Enqueue: %v", err)
	}
	if id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "a", N: 2}); !errors.Is(err, skipjack.ErrDuplicate) || id != first {
		t.Fatalf("uniq Enqueue of a duplicate = %d, %v; want %d, ErrDuplicate", id, err, first)
	}
	if n, err := uniq.EnqueueMany(ctx, pool, []uniq.Payload{{Key: "a"}, {Key: "b"}, {Key: "c"}, {Key: "c"}}); err != nil || n != 2 {
		t.Fatalf("uniq EnqueueMany = %d, %v; want 2 (b and c), nil", n, err)
	}
	uniqRuns := newTally()
	stopUniq := start(t, uniq.NewWorker(pool, func(ctx context.Context, job *uniq.Job) error {
		uniqRuns.add(job.ID)
		return nil
	}, cfg))
	ticks := make(chan int64, 10)
	stopTock := start(t, tock.NewWorker(pool, func(ctx context.Context, job *tock.Job) error {
		select {
		case ticks <- job.Payload.N:
		default:
		}
		return nil
	}, cfg))
	select {
	case n := <-ticks:
		if n != 1 {
			t.Errorf("the first periodic job has n = %d, want 1 (the @every 1s schedule)", n)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no periodic job ran within 10s")
	}
	waitFor(t, 10*time.Second, "the unique jobs to complete", func() bool {
		s, err := uniq.Stats(ctx, pool)
		return err == nil && s.Completed == 3
	})
	stopTock()
	stopUniq()
	if uniqRuns.len() != 3 || uniqRuns.duplicates() != 0 {
		t.Errorf("unique jobs ran %v, want each of the three once", uniqRuns.m)
	}
}
