package skipjack_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/diamond"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/wfarm"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/wfedge"
)

// diamondAfter is what each step of the diamond workflow runs after, as
// runtime/internal/testqueue/skipjack.yaml declares it.
var diamondAfter = map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}

// diamondsEnv sets how many diamonds TestWorkflowDiamondsFourProcesses
// runs (default 1000).
const diamondsEnv = "SKIPJACK_TEST_DIAMONDS"

// diamondTables are the tables the diamond handlers write: an attempt row
// when a handler starts (committed on its own), and an effect row in the
// transaction that acknowledges the step with CompleteTx, with how many of
// the step's upstream effects that transaction saw.
const diamondTables = `CREATE TABLE wf_attempts (workflow_id bigint NOT NULL, step text NOT NULL);
CREATE TABLE wf_effects (workflow_id bigint NOT NULL, step text NOT NULL, seen int NOT NULL, seq bigserial);`

// runDiamond is the "diamond" child: workers of both queues of the diamond
// workflow whose handlers record their step's effect with CompleteTx,
// after a short random pause that widens the window a SIGKILL lands in.
func runDiamond(ctx context.Context, _ *pgxpool.Pool) error {
	// A pool of its own, large enough for both workers' handlers (4 each),
	// each of which holds one connection at a time: its attempt's insert,
	// then its transaction. With the two workers' control pools (6 each)
	// and listeners, a child holds at most 8 + 2×7 = 22 connections.
	pc, err := pgxpool.ParseConfig(os.Getenv(childDBEnv))
	if err != nil {
		return err
	}
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := skipjack.WorkerConfig{Concurrency: 4, PollInterval: 100 * time.Millisecond}
	edge := wfedge.NewWorker(pool, func(ctx context.Context, job *wfedge.Job) error {
		return diamondEffect(ctx, pool, job.WorkflowID, job.Payload.Step, func(tx pgx.Tx) error { return wfedge.CompleteTx(ctx, tx, job) })
	}, cfg)
	arm := wfarm.NewWorker(pool, func(ctx context.Context, job *wfarm.Job) error {
		return diamondEffect(ctx, pool, job.WorkflowID, job.Payload.Step, func(tx pgx.Tx) error { return wfarm.CompleteTx(ctx, tx, job) })
	}, cfg)
	errs := make(chan error, 2)
	go func() { errs <- edge.Run(ctx) }()
	go func() { errs <- arm.Run(ctx) }()
	return cmpErr(<-errs, <-errs)
}

// cmpErr returns the first error that is not nil.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// diamondEffect records a step's attempt, then, in one transaction, counts
// the effects of the step's upstream steps, records its own effect and
// acknowledges the job with complete.
func diamondEffect(ctx context.Context, pool *pgxpool.Pool, workflowID int64, step string, complete func(pgx.Tx) error) error {
	if workflowID == 0 {
		return skipjack.Permanent(fmt.Errorf("step %s has no workflow id", step))
	}
	if _, err := pool.Exec(ctx, `INSERT INTO wf_attempts (workflow_id, step) VALUES ($1, $2)`, workflowID, step); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var seen int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM wf_effects WHERE workflow_id = $1 AND step = ANY($2::text[])`, workflowID, diamondAfter[step]).Scan(&seen); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO wf_effects (workflow_id, step, seen) VALUES ($1, $2, $3)`, workflowID, step, seen); err != nil {
		return err
	}
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	if err := complete(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// startDiamonds starts n diamond workflows from 8 goroutines and returns
// their ids.
func startDiamonds(t *testing.T, pool *pgxpool.Pool, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				id, err := diamond.Start(t.Context(), pool, diamond.Steps{
					A: wfedge.Payload{Step: "a"}, B: wfarm.Payload{Step: "b"}, C: wfarm.Payload{Step: "c"}, D: wfedge.Payload{Step: "d"},
				})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("start diamonds: %v", err)
	}
	return ids
}

// unfinishedSteps counts the steps of every workflow that have not
// completed.
func unfinishedSteps(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM skipjack._skipjack_workflow_steps WHERE state <> 'completed'`).Scan(&n)
	return n, err
}

// describeUnfinished lists the unfinished steps with their jobs' rows, for
// a failure message: what a stuck workflow waits for.
func describeUnfinished(ctx context.Context, pool *pgxpool.Pool) string {
	rows, err := pool.Query(ctx, `
		SELECT s.workflow_id, s.step, s.state, s.waiting, coalesce(j.state, e.state, '(no job)'),
		       coalesce(j.run_at, e.run_at)::text, coalesce(j.attempt, e.attempt), coalesce(j.worker, e.worker, ''),
		       coalesce(j.lease_expires_at, e.lease_expires_at)::text, now()::text
		FROM skipjack._skipjack_workflow_steps AS s
		LEFT JOIN skipjack.wf_arm AS j ON s.queue = 'wf_arm' AND j.id = s.job_id
		LEFT JOIN skipjack.wf_edge AS e ON s.queue = 'wf_edge' AND e.id = s.job_id
		WHERE s.state <> 'completed' ORDER BY 1, 2 LIMIT 20`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var wf int64
		var step, state, jobState string
		var waiting int
		var runAt, lease, now *string
		var attempt *int32
		var worker string
		if err := rows.Scan(&wf, &step, &state, &waiting, &jobState, &runAt, &attempt, &worker, &lease, &now); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "workflow %d step %s: %s (waiting %d), job %s run_at %v attempt %v worker %q lease %v now %v\n",
			wf, step, state, waiting, jobState, deref(runAt), deref(attempt), worker, deref(lease), deref(now))
	}
	return b.String()
}

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// checkDiamonds checks that every step of the diamonds ids ran its effect
// exactly once, after the effects of all its upstream steps had committed,
// and that every workflow completed.
func checkDiamonds(t *testing.T, pool *pgxpool.Pool, ids []int64) {
	t.Helper()
	ctx := t.Context()
	rows, err := pool.Query(ctx, `SELECT workflow_id, step, count(*), min(seen), max(seen) FROM wf_effects GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		wf   int64
		step string
	}
	got := map[key]bool{}
	for rows.Next() {
		var k key
		var n, minSeen, maxSeen int
		if err := rows.Scan(&k.wf, &k.step, &n, &minSeen, &maxSeen); err != nil {
			t.Fatal(err)
		}
		got[k] = true
		if n != 1 {
			t.Errorf("workflow %d step %s: effect ran %d times, want once", k.wf, k.step, n)
		}
		if want := len(diamondAfter[k.step]); minSeen != want || maxSeen != want {
			t.Errorf("workflow %d step %s ran when %d..%d of its %d upstream steps had completed", k.wf, k.step, minSeen, maxSeen, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, id := range ids {
		for step := range diamondAfter {
			if !got[key{id, step}] {
				missing++
			}
		}
		rec, err := diamond.Get(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != skipjack.WorkflowCompleted {
			t.Errorf("workflow %d ended %s, want completed: %+v", id, rec.State, rec.Steps)
		}
	}
	if missing > 0 || len(got) != 4*len(ids) {
		t.Errorf("%d effects recorded, %d missing, want %d", len(got), missing, 4*len(ids))
	}
}

// TestWorkflowDiamondsSurviveSIGKILL runs diamond workflows in worker
// processes that the test SIGKILLs and replaces again and again: every
// step's effect (written with CompleteTx in the handler's transaction)
// lands exactly once and never before its upstream steps' effects, and
// every workflow completes. Kills interrupt handlers (more attempts than
// effects), whose steps are rescued when their leases lapse.
//
// Not parallel: its processes, and the server backends of killed ones that
// have not noticed yet, hold up to 60 connections (measured), too many to
// share a server of 100 with another test; see maxParallel.
func TestWorkflowDiamondsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes")
	}
	ctx := t.Context()
	pool := newQueues(t, 0)
	if _, err := pool.Exec(ctx, diamondTables); err != nil {
		t.Fatal(err)
	}
	const procs, kills = 3, 8
	ids := startDiamonds(t, pool, 150)
	children := make([]*child, procs)
	for i := range children {
		children[i] = startChild(t, "diamond", pool)
	}
	deadline := time.Now().Add(3 * time.Minute)
	killed := 0
	for {
		n, err := unfinishedSteps(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d steps unfinished after 3 minutes (%d kills):\n%s", n, killed, describeUnfinished(ctx, pool))
		}
		time.Sleep(time.Duration(150+rand.IntN(300)) * time.Millisecond)
		if killed < kills {
			i := rand.IntN(procs)
			if err := children[i].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = children[i].wait()
			children[i] = startChild(t, "diamond", pool)
			killed++
		}
	}
	if killed < kills {
		t.Fatalf("the workflows completed after %d kills, before the test killed %d times: start more of them", killed, kills)
	}
	checkDiamonds(t, pool, ids)
	var attempts, effects int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM wf_attempts), (SELECT count(*) FROM wf_effects)`).Scan(&attempts, &effects); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills; %d handler attempts for %d effects", killed, attempts, effects)
	if attempts <= effects {
		t.Errorf("%d attempts for %d effects: no kill interrupted a handler, the test proved nothing", attempts, effects)
	}
}

// TestWorkflowDiamondsFourProcesses runs 1000 diamond workflows at once
// (SKIPJACK_TEST_DIAMONDS sets another count) on four worker processes:
// every step's effect lands exactly once, after its upstream steps', and
// every workflow completes.
//
// Not parallel: its four processes hold up to 4×22 connections (78 to 82
// measured), which fit a server of 100 only alone; see maxParallel.
func TestWorkflowDiamondsFourProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes")
	}
	n := 1000
	if v := os.Getenv(diamondsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("%s=%q is not a positive count", diamondsEnv, v)
		}
	}
	ctx := t.Context()
	pool := newQueues(t, 0)
	if _, err := pool.Exec(ctx, diamondTables); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		startChild(t, "diamond", pool)
	}
	start := time.Now()
	ids := startDiamonds(t, pool, n)
	started := time.Since(start)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		left, err := unfinishedSteps(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d steps unfinished after 4 minutes", left, 4*n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d diamonds: started in %v, all %d steps done in %v", n, started.Round(time.Millisecond), 4*n, time.Since(start).Round(time.Millisecond))
	checkDiamonds(t, pool, ids)
}
