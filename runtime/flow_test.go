package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/kept"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/keyed"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/paced"
)

// The flow-control tests run the workers of one queue on separate pools
// (as separate processes would: nothing in memory is shared but the test's
// bookkeeping) and, for the concurrency limit, in a real child process too:
// the limits hold because Postgres enforces them.

// secondPool opens another pool on pool's database.
func secondPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	return openPool(t, pool.Config().Copy())
}

// adminPool opens a pool of 4 connections on pool's database for a test's
// own statements, so that they neither take the worker's connections nor
// wait behind its handlers.
func adminPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.MaxConns = 4
	return openPool(t, cfg)
}

// openPool opens a pool with cfg, closed when the test ends.
func openPool(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// spansTable records the handler spans of every process of a test.
const spansTable = `CREATE TABLE IF NOT EXISTS flow_spans (id bigint PRIMARY KEY, started_at timestamptz NOT NULL, ended_at timestamptz)`

// runCapped is the child of TestConcurrencyLimitAcrossProcesses: it works
// capped jobs, recording each handler's span in flow_spans.
func runCapped(ctx context.Context, pool *pgxpool.Pool) error {
	return capped.NewWorker(pool, cappedHandler(pool), skipjack.WorkerConfig{Concurrency: 10, PollInterval: 100 * time.Millisecond}).Run(ctx)
}

// cappedHandler records the job's span on the database clock, around 40ms
// of work.
func cappedHandler(pool *pgxpool.Pool) func(ctx context.Context, job *capped.Job) error {
	return func(ctx context.Context, job *capped.Job) error {
		if _, err := pool.Exec(ctx, `INSERT INTO flow_spans (id, started_at) VALUES ($1, clock_timestamp())`, job.ID); err != nil {
			return err
		}
		time.Sleep(40 * time.Millisecond)
		_, err := pool.Exec(ctx, `UPDATE flow_spans SET ended_at = clock_timestamp() WHERE id = $1`, job.ID)
		return err
	}
}

// TestConcurrencyLimitAcrossProcesses checks limits.concurrency: 3 with
// three workers of Concurrency 10, on two pools of this process and in a
// child process: at no moment do more than 3 handlers run, and at the peak
// exactly 3 do.
func TestConcurrencyLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, spansTable); err != nil {
		t.Fatal(err)
	}
	const jobs = 60
	ps := make([]capped.Payload, jobs)
	if _, err := capped.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	cfg := skipjack.WorkerConfig{Concurrency: 10, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}
	other := secondPool(t, pool)
	start(t, capped.NewWorker(pool, cappedHandler(pool), cfg))
	start(t, capped.NewWorker(other, cappedHandler(other), cfg))
	startChild(t, "capped", pool)
	waitFor(t, 60*time.Second, "every capped job to finish", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM flow_spans WHERE ended_at IS NOT NULL`) == jobs
	})
	// The peak of concurrently running handlers: a sweep over the span
	// edges, an end before a start at the same instant.
	peak := queryInt(t, pool, `
		SELECT max(running) FROM (
			SELECT sum(d) OVER (ORDER BY at, d, id) AS running FROM (
				SELECT id, started_at AS at, 1 AS d FROM flow_spans
				UNION ALL
				SELECT id, ended_at, -1 FROM flow_spans
			) AS edges
		) AS sweep`)
	if peak != 3 {
		t.Errorf("at most %d capped handlers ran at once, want exactly 3", peak)
	}
	waitFor(t, 10*time.Second, "every capped job to be acknowledged", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.capped`) == 0
	})
}

// TestRateLimitAcrossWorkers checks limits.rate: {count: 50, per: 1099ms}
// with two workers on separate pools and a backlog of 150 jobs: no window of
// per holds more than count starts as the database counts them (claims),
// and the backlog still drains at about count per per. A per that is not a
// whole multiple of 100ms must round its slots up: slots of 10ms counted a
// window of 1040ms to 1050ms, and 100 jobs were claimed within 1099ms.
//
// Claims, not handler starts: the 4% by which the counted window exceeds
// per is for the jitter between a claim and its handler's start, which on a
// loaded machine (load average 20, -race) reached 60ms and more, and would
// make a check of handler starts fail whatever the window. A claim's
// statement reads the database clock between the moments the client sent it
// and had its result, so claims i to j certainly fell within a window of per
// when j's result came less than per after i was sent.
func TestRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	count, per := paced.Spec.RateCount, paced.Spec.RatePer
	if per%(100*time.Millisecond) == 0 {
		t.Fatalf("paced's limits.rate.per is %v, a whole multiple of 100ms: give it a remainder, whose slots must round up", per)
	}
	jobs := 3 * count
	if _, err := paced.EnqueueMany(ctx, pool, make([]paced.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	claims := &claimLog{}
	var mu sync.Mutex
	var starts []time.Time
	handle := func(ctx context.Context, job *paced.Job) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil
	}
	cfg := skipjack.WorkerConfig{Concurrency: 20, PollInterval: time.Second, Logger: quietLogger(t)}
	start(t, paced.NewWorker(claims.pool(t, pool), handle, cfg))
	start(t, paced.NewWorker(claims.pool(t, pool), handle, cfg))
	waitFor(t, 30*time.Second, "every paced job to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == jobs
	})

	cs := claims.sorted()
	recorded := 0
	for _, c := range cs {
		recorded += c.n
	}
	if recorded != jobs {
		t.Fatalf("the claim log recorded %d claimed jobs, want all %d: claims the log does not see cannot be checked", recorded, jobs)
	}
	most, at := 0, time.Duration(0)
	for i := range cs {
		n := 0
		for j := i; j < len(cs) && cs[j].end.Sub(cs[i].start) < per; j++ {
			n += cs[j].n
		}
		if n > most {
			most, at = n, cs[i].start.Sub(cs[0].start)
		}
	}
	if most > count {
		t.Errorf("%d jobs claimed within %v (from %v after the first claim), want at most %d", most, per, at.Round(time.Millisecond), count)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	busiest := 0
	for i, s := range starts {
		j, _ := slices.BinarySearchFunc(starts, s.Add(per), func(a, b time.Time) int { return a.Compare(b) })
		busiest = max(busiest, j-i)
	}
	// Three windows' worth: the first count at once, the next two each one
	// window (plus the 4-5%% margin) later. Not starving means done in well
	// under 3.5 windows.
	if took := starts[jobs-1].Sub(starts[0]); took > 7*per/2 {
		t.Errorf("the %d starts spread over %v, want about %v (%d per %v)", jobs, took, 21*per/10, count, per)
	} else {
		t.Logf("%d starts over %v; most jobs claimed within %v: %d; most handler starts: %d", jobs, took, per, most, busiest)
	}
}

// claimLog records the claims of the pools it made: when each Claim
// statement was sent, when its result was read, and how many jobs it
// claimed. A claim sent alone is traced as a query; one sent in a batch
// (after Admit, in one round trip) as a query of the batch, which it
// dates from the batch's start.
type claimLog struct {
	mu     sync.Mutex
	claims []claimSpan
}

type claimSpan struct {
	start, end time.Time
	n          int
}

// claimStart is the context key of a Claim statement's start.
type claimStart struct{}

// pool opens another pool on pool's database whose claims l records.
func (l *claimLog) pool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = l
	return openPool(t, cfg)
}

func (l *claimLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: Claim ") || strings.HasPrefix(d.SQL, "-- name: ClaimFrom ") {
		return context.WithValue(ctx, claimStart{}, time.Now())
	}
	return ctx
}

func (l *claimLog) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	start, ok := ctx.Value(claimStart{}).(time.Time)
	if !ok || d.Err != nil || d.CommandTag.RowsAffected() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, claimSpan{start: start, end: time.Now(), n: int(d.CommandTag.RowsAffected())})
}

func (l *claimLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, claimStart{}, time.Now())
}

func (l *claimLog) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.HasPrefix(d.SQL, "-- name: Claim ") || strings.HasPrefix(d.SQL, "-- name: ClaimFrom ") {
		l.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{CommandTag: d.CommandTag, Err: d.Err})
	}
}

func (l *claimLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// sorted returns the claims recorded so far, by start.
func (l *claimLog) sorted() []claimSpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := slices.Clone(l.claims)
	slices.SortFunc(cs, func(a, b claimSpan) int { return a.start.Compare(b.start) })
	return cs
}

// TestRateLogOfAnotherSlotSize checks that a rate log written in slots of
// another size does not stop the queue: releases that rounded per/100 down
// logged paced's starts in slots of 10ms, whose numbers run ahead of the
// 11ms slots of today. A slot after the current one, counted, would never
// leave the window, and each claim would log it again: a full one would
// keep the queue from ever starting a job.
func TestRateLogOfAnotherSlotSize(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO skipjack._skipjack_queues ("name", "rate_slots", "rate_counts")
VALUES ('paced', ARRAY[floor(extract(epoch FROM clock_timestamp()) * 1000 / 10)::bigint], ARRAY[$1::integer])`, paced.Spec.RateCount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := paced.EnqueueMany(ctx, pool, make([]paced.Payload, 5)); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	start(t, paced.NewWorker(pool, func(context.Context, *paced.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 5, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	waitFor(t, 20*time.Second, "the paced jobs to run beside a full slot of 10ms logged by an older release", func() bool {
		return ran.Load() == 5
	})
}

// TestSerialByKey checks serial.by: 10 keys x 20 jobs on two workers on
// separate pools: the jobs of one key never overlap and run in enqueue
// order, even when one of them fails once and is retried (its successors
// wait for it), while several keys run at once. It runs twice: with no key
// recorded busy, claims find each key's next job as they read the claim
// index; with every key recorded busy (schema.BusyTable), claims look it
// up and skip the key's other jobs.
func TestSerialByKey(t *testing.T) {
	t.Parallel()
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			testSerialByKey(t, busy)
		})
	}
}

func testSerialByKey(t *testing.T, recordedBusy bool) {
	pool := newQueues(t, 30)
	ctx := context.Background()
	const keys, perKey = 10, 20
	var ps []keyed.Payload
	for n := range perKey {
		for k := range keys {
			ps = append(ps, keyed.Payload{Account: int64(k), N: int64(n)})
		}
	}
	if _, err := keyed.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	// The insert trigger checks one insert in 32 at random: some keys may
	// be recorded busy already. The table is a hint, so a test sets it.
	if _, err := pool.Exec(ctx, `DELETE FROM skipjack._skipjack_busy WHERE queue = 'keyed'`); err != nil {
		t.Fatal(err)
	}
	if recordedBusy {
		if _, err := pool.Exec(ctx, `INSERT INTO skipjack._skipjack_busy (queue, key)
			SELECT 'keyed', to_jsonb(k) FROM generate_series(0, $1 - 1) AS k`, keys); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		running  = map[int64]int{}
		order    = map[int64][]int64{}
		overlaps int
		busiest  int
		failed   atomic.Bool
		done     atomic.Int64
	)
	handle := func(ctx context.Context, job *keyed.Job) error {
		a := job.Payload.Account
		mu.Lock()
		running[a]++
		if running[a] > 1 {
			overlaps++
		}
		busy := 0
		for _, n := range running {
			if n > 0 {
				busy++
			}
		}
		busiest = max(busiest, busy)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running[a]--
		var err error
		if a == 3 && job.Payload.N == 4 && failed.CompareAndSwap(false, true) {
			err = errors.New("first attempt fails")
		} else {
			order[a] = append(order[a], job.Payload.N)
			done.Add(1)
		}
		mu.Unlock()
		return err
	}
	cfg := skipjack.WorkerConfig{Concurrency: 10, PollInterval: 200 * time.Millisecond, Logger: quietLogger(t)}
	start(t, keyed.NewWorker(pool, handle, cfg))
	start(t, keyed.NewWorker(secondPool(t, pool), handle, cfg))
	waitFor(t, 60*time.Second, "every keyed job to complete", func() bool { return done.Load() == keys*perKey })
	mu.Lock()
	defer mu.Unlock()
	if overlaps > 0 {
		t.Errorf("jobs of one key overlapped %d times, want never", overlaps)
	}
	for a, ns := range order {
		if !slices.IsSorted(ns) || len(ns) != perKey {
			t.Errorf("key %d completed %v, want 0..%d in order", a, ns, perKey-1)
		}
	}
	if busiest < 2 {
		t.Errorf("at most %d keys ran at once, want several", busiest)
	}
	if !failed.Load() {
		t.Error("the failing job never ran")
	}
}

// TestSerialKeyIsEnforcedByTheDatabase checks the serial key's unique index
// of running jobs: a second running job of one key is refused whatever
// the claim did.
func TestSerialKeyIsEnforcedByTheDatabase(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 5)
	ctx := context.Background()
	if _, err := keyed.EnqueueMany(ctx, pool, []keyed.Payload{{Account: 1, N: 1}, {Account: 1, N: 2}}); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `UPDATE skipjack.keyed SET state = 'running', lease_expires_at = now() + interval '1 minute'`)
	if err == nil {
		t.Fatal("two running jobs of one serial key were stored")
	}
}

// TestPauseResume checks Pause and Resume: a paused queue's jobs are not
// claimed by any worker and stay pending while enqueue works and a running
// job finishes; Stats reports it; Resume starts them.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	release := make(chan struct{})
	var ran atomic.Int64
	handle := func(ctx context.Context, job *demo.Job) error {
		if job.Payload.Label == "slow" {
			<-release
		}
		ran.Add(1)
		return nil
	}
	cfg := skipjack.WorkerConfig{Concurrency: 5, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}
	start(t, demo.NewWorker(pool, handle, cfg))
	start(t, demo.NewWorker(secondPool(t, pool), handle, cfg))
	if _, err := demo.Enqueue(ctx, pool, demo.Payload{Label: "slow"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the slow job to run", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 1
	})
	if err := demo.Pause(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := demo.Pause(ctx, pool); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, 20)); err != nil {
		t.Fatalf("enqueue while paused: %v", err)
	}
	close(release) // the running job finishes while the queue is paused
	time.Sleep(500 * time.Millisecond)
	if n := ran.Load(); n != 1 {
		t.Errorf("%d jobs ran while paused, want only the one running at the pause", n)
	}
	st, err := demo.Stats(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Paused || st.Pending != 20 {
		t.Errorf("Stats while paused = %+v, want Paused and 20 pending", st)
	}
	if err := demo.Admin(pool).Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the jobs to run after Resume", func() bool { return ran.Load() == 21 })
	if st, err := demo.Stats(ctx, pool); err != nil || st.Paused {
		t.Errorf("Stats after Resume = %+v, %v; want not paused", st, err)
	}
}

// TestRunGroup checks RunGroup: a budget of 4 handlers over two queues
// whose workers have Concurrency 10 each peaks at exactly 4; a queue with
// a deep backlog does not starve a quiet one; one cancellation shuts both
// down.
func TestRunGroup(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 30)
	ctx := context.Background()
	var now, peak atomic.Int64
	enter := func() {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		now.Add(-1)
	}
	var busyDone, quietDone atomic.Int64
	busy := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		enter()
		busyDone.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 10, Logger: quietLogger(t)})
	quiet := kept.NewWorker(pool, func(ctx context.Context, job *kept.Job) error {
		enter()
		quietDone.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 10, Logger: quietLogger(t)})
	if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, 400)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- skipjack.RunGroup(runCtx, skipjack.GroupConfig{Concurrency: 4}, busy, quiet) }()
	waitFor(t, 10*time.Second, "the busy queue to start", func() bool { return busyDone.Load() > 20 })
	if _, err := kept.EnqueueMany(ctx, pool, make([]kept.Payload, 20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the quiet queue's jobs", func() bool { return quietDone.Load() == 20 })
	if b := busyDone.Load(); b >= 400 {
		t.Errorf("the quiet queue's 20 jobs finished only after the busy queue's backlog (%d)", b)
	}
	waitFor(t, 30*time.Second, "the busy queue's backlog", func() bool { return busyDone.Load() == 400 })
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunGroup returned %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunGroup did not return after cancellation")
	}
	if p := peak.Load(); p != 4 {
		t.Errorf("at most %d handlers ran at once, want exactly 4", p)
	}
}

// TestRunGroupRefusesBadConfig checks RunGroup's argument errors.
func TestRunGroupRefusesBadConfig(t *testing.T) {
	t.Parallel()
	w := demo.NewWorker(nil, func(context.Context, *demo.Job) error { return nil }, skipjack.WorkerConfig{})
	tests := []struct {
		name    string
		cfg     skipjack.GroupConfig
		workers []skipjack.GroupWorker
	}{
		{"negative concurrency", skipjack.GroupConfig{Concurrency: -1}, []skipjack.GroupWorker{w}},
		{"no workers", skipjack.GroupConfig{Concurrency: 2}, nil},
		{"nil worker", skipjack.GroupConfig{Concurrency: 2}, []skipjack.GroupWorker{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := skipjack.RunGroup(context.Background(), tt.cfg, tt.workers...); err == nil {
				t.Error("RunGroup returned nil, want an error")
			}
		})
	}
}

// TestSerialClaimRace checks the claim of a serial queue that races a
// transaction making a later job of the same key running (a claim in
// another process whose snapshot saw the key free): the unique index of
// running keys refuses the claim, the worker claims again without a
// warning or a backoff, and the key's jobs never overlap.
func TestSerialClaimRace(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := keyed.EnqueueMany(ctx, pool, []keyed.Payload{{Account: 7, N: 1}, {Account: 7, N: 2}}); err != nil {
		t.Fatal(err)
	}
	first := queryInt(t, pool, `SELECT min(id) FROM skipjack.keyed`)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The second job of the key, running in a transaction not yet
	// committed: the worker's snapshot sees both jobs pending and the first
	// one free to claim.
	if _, err := tx.Exec(ctx, `UPDATE skipjack.keyed SET state = 'running', lease_expires_at = now() + interval '1 minute', attempt = 1, claim = claim + 1 WHERE id = $1`, first+1); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	var released atomic.Bool
	var overlap atomic.Bool
	l := newLogs(t)
	w := keyed.NewWorker(pool, func(ctx context.Context, job *keyed.Job) error {
		if !released.Load() {
			overlap.Store(true)
		}
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, PollInterval: 100 * time.Millisecond, Logger: l.logger()})
	start(t, w)
	waitFor(t, 10*time.Second, "the claim to wait for the racing transaction", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_locks WHERE NOT granted`) > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if ran.Load() != 0 {
		t.Fatalf("%d jobs ran while the key's other job was running, want 0", ran.Load())
	}
	// The racing "worker" gives its job back; both jobs then run in order.
	released.Store(true)
	if _, err := pool.Exec(ctx, `UPDATE skipjack.keyed SET state = 'pending', lease_expires_at = NULL, attempt = 0 WHERE id = $1`, first+1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "both jobs to run", func() bool { return ran.Load() == 2 })
	if overlap.Load() {
		t.Error("a job of the key ran while another was running")
	}
	if l.contains("WARN", "claim failed") {
		t.Errorf("the refused claim was logged as a failure:\n%s", l.String())
	}
}

// TestLimitedQueueWithCompleteTx checks that a queue with a concurrency
// limit whose handlers acknowledge with CompleteTx keeps claiming at once:
// the job's row is settled when the handler's transaction commits, so its
// end must wake the claimer itself rather than wait for the flush of its
// (then unmatched) result, which AckDelay (1s here) puts off. Before: a
// claim per PollInterval, 300 jobs took over a minute; without the wake
// (the claimer retries 50ms after a claim the limit refused) about 6s,
// with it about 1s on a quiet machine, and 5s at load average 18, so the
// time is logged, not bounded: load would break a bound that tells 1s
// from 6s. TestTxAckedEndWakesLimitedClaimer (skipjackimpl) holds the
// wake itself; this test fails on the claim per PollInterval.
func TestLimitedQueueWithCompleteTx(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const jobs = 300
	if _, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	start(t, capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := capped.CompleteTx(ctx, tx, job); err != nil {
				return err
			}
			done.Add(1)
			return nil
		})
	}, skipjack.WorkerConfig{Concurrency: 12, AckDelay: time.Second, Logger: quietLogger(t)}))
	began := time.Now()
	waitFor(t, 60*time.Second, "every job to complete", func() bool { return done.Load() == jobs })
	t.Logf("%d jobs of 3 at a time in %v", jobs, time.Since(began))
}

// admitKey is the advisory lock key of the claims of the queue table named
// table, as the generator derives it (generator/sqlc.go).
func admitKey(table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("skipjack:claim:" + table))
	return int64(h.Sum64())
}

// TestLimitedClaimsTakeTurns checks that the claims of a queue with limits
// take turns under the queue's advisory lock: while another session holds
// it, a worker claims nothing, and it claims as soon as the lock is gone.
// (Claims that did not take turns could each count the same claimed jobs
// and together exceed the limit.)
func TestLimitedClaimsTakeTurns(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, admitKey(`"skipjack"."capped"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, 3)); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	start(t, capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 3, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "the worker's claim to wait for the lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) > 0
	})
	time.Sleep(300 * time.Millisecond)
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d jobs ran while another session held the claim lock, want 0", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the jobs to run once the lock is gone", func() bool { return ran.Load() == 3 })
}

// TestRunGroupWithoutCap checks GroupConfig{}: no shared cap, the workers
// only share the one shutdown.
func TestRunGroupWithoutCap(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	var a, b atomic.Int64
	wa := demo.NewWorker(pool, func(context.Context, *demo.Job) error { a.Add(1); return nil }, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)})
	wb := kept.NewWorker(pool, func(context.Context, *kept.Job) error { b.Add(1); return nil }, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)})
	if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.EnqueueMany(ctx, pool, make([]kept.Payload, 10)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- skipjack.RunGroup(runCtx, skipjack.GroupConfig{}, wa, wb) }()
	waitFor(t, 10*time.Second, "both queues' jobs", func() bool { return a.Load() == 10 && b.Load() == 10 })
	stop()
	if err := <-done; err != nil {
		t.Errorf("RunGroup returned %v, want nil", err)
	}
}

// TestRateWindowSpansPer checks that a rate-limited claim counts every
// start of the last per, however the claim is timed: a worker's first
// claim (no earlier claim told it when the window frees) waits for the
// queue's admit lock, held by the test; meanwhile the test logs a full
// slot of starts 61 slots ago (671ms of paced's 1099ms window) and then
// lets the claim go. The claim must take nothing until that slot left the
// window: the rate log must hold no later slot of this worker's starts
// that is still inside the window of the seeded one. A window short of per
// (60 slots, say) admits at once. The log's slots are read on the
// database's clock, which the claim's slot is taken from too.
func TestRateWindowSpansPer(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	count, per := paced.Spec.RateCount, paced.Spec.RatePer
	slotMS := (per.Milliseconds() + 99) / 100 // the generator's slot: per/100, rounded up
	if _, err := paced.EnqueueMany(ctx, pool, make([]paced.Payload, 5)); err != nil {
		t.Fatal(err)
	}
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, admitKey(`"skipjack"."paced"`)); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	start(t, paced.NewWorker(pool, func(context.Context, *paced.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 5, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	waitFor(t, 30*time.Second, "the worker's claim to wait for the admit lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) > 0
	})
	var seeded int64
	if err := pool.QueryRow(ctx, `
INSERT INTO skipjack._skipjack_queues ("name", "rate_slots", "rate_counts")
VALUES ('paced', ARRAY[floor(extract(epoch FROM clock_timestamp()) * 1000 / $1)::bigint - 61], ARRAY[$2::integer])
ON CONFLICT ("name") DO UPDATE SET "rate_slots" = EXCLUDED."rate_slots", "rate_counts" = EXCLUDED."rate_counts"
RETURNING "rate_slots"[1]`, slotMS, count).Scan(&seeded); err != nil {
		t.Fatal(err)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the paced jobs to run once the seeded slot left the window", func() bool { return ran.Load() == 5 })
	var logged []int64
	if err := pool.QueryRow(ctx, `SELECT "rate_slots" FROM skipjack._skipjack_queues WHERE "name" = 'paced'`).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	windowSlots := (per.Milliseconds() + slotMS - 1) / slotMS // slots in per, rounded up
	for _, s := range logged {
		if s > seeded && s-seeded < windowSlots {
			t.Errorf("jobs started in slot %d, %dms after the full slot %d that the test logged: within %v of %d starts, want none until it left the window (logged slots %v)",
				s, (s-seeded)*slotMS, seeded, per, count, logged)
		}
	}
}

// TestLimitedClaimHoldsTurnLock checks that the claim of a queue with
// limits runs inside the turn that Admit took: a trigger on the jobs the
// claim marks running records whether the claiming session holds an
// advisory lock at that moment. An Admit run as a statement of its own
// (its transaction, and so its lock, ends before the claim) would let
// claims of several processes count the same running jobs and together
// pass the limit, a race too rare for TestConcurrencyLimitAcrossProcesses
// to meet every run; the trigger sees it at every claim.
func TestLimitedClaimHoldsTurnLock(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
CREATE TABLE claimed_rows (id bigint NOT NULL, in_turn boolean NOT NULL);
CREATE FUNCTION note_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO claimed_rows VALUES (NEW.id, EXISTS (
		SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted));
	RETURN NEW;
END $$;
CREATE TRIGGER note_turn BEFORE UPDATE ON skipjack.capped FOR EACH ROW
WHEN (OLD.state = 'pending' AND NEW.state = 'running') EXECUTE FUNCTION note_turn();`); err != nil {
		t.Fatal(err)
	}
	const jobs = 30
	if _, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	start(t, capped.NewWorker(pool, func(context.Context, *capped.Job) error {
		done.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 6, Logger: quietLogger(t)}))
	waitFor(t, 60*time.Second, "every capped job to run", func() bool { return done.Load() == jobs })
	if n := queryInt(t, pool, `SELECT count(*) FROM claimed_rows`); n < jobs {
		t.Fatalf("the trigger saw %d claimed rows, want at least %d", n, jobs)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM claimed_rows WHERE NOT in_turn`); n > 0 {
		t.Errorf("%d jobs were claimed by a session that did not hold the queue's turn lock", n)
	}
}
