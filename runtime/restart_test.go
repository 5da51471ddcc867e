package skipjack_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// restartJobs is how many jobs TestServerRestartMidBurnDown burns down.
const restartJobs = 20_000

// TestServerRestartMidBurnDown restarts PostgreSQL (pg_ctl restart -m
// fast, on a cluster of the test's own) while two workers burn down a
// queue, once about a third of the jobs have run, and checks that the
// workers ride it out:
//
//   - every job ends completed in the table: exactly restartJobs rows, all
//     in state completed, none pending, running or failed, with attempt 1
//     and no error recorded (the uniq queue retains completed jobs for an
//     hour, so the table shows each job's fate);
//   - every job's handler ran exactly once, and no job was rescued. The
//     delivery guarantee (RELIABILITY.md) lets a job run again only when
//     its lease was lost before its acknowledgement became durable, and a
//     restart of well under a second loses no lease (the worker gives up
//     on a lease only after failing to renew it for lease - lease/3, 20s
//     here): acknowledgements that fail are kept and retried, and one that
//     committed just before its connection died matches nothing when
//     retried. So a second run, or a rescue, would be a bug. For the
//     record the test also names any second run that a rescue would
//     explain (rescues > 0), which the guarantee would allow after a
//     longer outage;
//   - no row is left stuck: the table shows every job completed within
//     25s of the restart, less than the queue's 30s lease, so a claim lost
//     in the restart (committed, but its rows never handed to a handler)
//     fails the test instead of being rescued once its lease lapses;
//   - both workers log the failures with their backoff (retry_in), claim
//     and acknowledge again after the restart (ClaimHook, AckHook), and Run
//     returns nil when cancelled at the end.
//
// It logs the restart's downtime, when the first claim and acknowledgement
// after it succeeded, how long the rest took, and the jobs per second.
func TestServerRestartMidBurnDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a PostgreSQL cluster; skipped in -short mode")
	}
	t.Parallel()
	ctx := context.Background()
	cluster := skipjacktest.NewCluster(t)
	cfg, err := pgxpool.ParseConfig(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40 // the two workers' Concurrency plus the test's queries
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := testqueue.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	ps := make([]uniq.Payload, restartJobs)
	for i := range ps {
		ps[i] = uniq.Payload{Key: fmt.Sprint("job-", i), N: int64(i)}
	}
	if n, err := uniq.EnqueueMany(ctx, pool, ps); err != nil || n != restartJobs {
		t.Fatalf("EnqueueMany = %d, %v; want %d, nil", n, err, restartJobs)
	}

	var runs sync.Map // job id -> *atomic.Int32, handler runs
	var ran atomic.Int64
	handle := func(ctx context.Context, job *uniq.Job) error {
		n, _ := runs.LoadOrStore(job.ID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		ran.Add(1)
		time.Sleep(time.Millisecond) // some work, so handlers are running when the server goes
		return nil
	}
	hooks := &restartHooks{}
	var workerLogs []*logs
	var stops []func()
	begin := time.Now()
	for i := range 2 {
		l := newLogs(t)
		workerLogs = append(workerLogs, l)
		stops = append(stops, start(t, uniq.NewWorker(pool, handle, skipjack.WorkerConfig{
			Concurrency: 16,
			Logger:      l.logger(),
			Hooks:       hooks,
			WorkerID:    fmt.Sprint("restart-", i),
		})))
	}

	waitFor(t, 30*time.Second, "a third of the jobs to run", func() bool { return ran.Load() >= restartJobs/3 })
	ranBefore := ran.Load()
	t.Logf("%d jobs ran in %v (%.0f jobs/s); restarting the server",
		ranBefore, time.Since(begin).Round(time.Millisecond), float64(ranBefore)/time.Since(begin).Seconds())
	restartAt := time.Now()
	hooks.restartAt.Store(restartAt.UnixNano())
	cluster.Restart(t)
	restarted := time.Now()
	hooks.restarted.Store(restarted.UnixNano())
	t.Logf("pg_ctl restart -m fast returned and the server accepted connections after %v", restarted.Sub(restartAt).Round(time.Millisecond))
	if ranBefore >= restartJobs*2/3 {
		t.Errorf("%d of %d jobs had run before the restart; the test meant to restart mid-burn-down", ranBefore, restartJobs)
	}

	// Wait for the table to show every job completed. Queries fail for a
	// moment after the restart (the pool's connections were cut), so
	// errors only mean "not yet".
	var completed, other int64
	deadline := restarted.Add(25 * time.Second)
	for {
		err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state <> 'completed') FROM skipjack.uniq`).
			Scan(&completed, &other)
		if err == nil && completed == restartJobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d jobs completed, %d in other states (last error %v), want all %d completed; states:\n%s\nworker logs:\n%s",
				time.Since(restarted).Round(time.Millisecond), completed, other, err, restartJobs, states(t, pool), warnings(workerLogs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	total := time.Since(begin)
	t.Logf("all %d jobs completed %v after the restart, %v after start (%.0f jobs/s overall)",
		restartJobs, time.Since(restarted).Round(time.Millisecond), total.Round(time.Millisecond), restartJobs/total.Seconds())
	t.Logf("after the restart: first successful claim %v, first successful acknowledgement %v later; failed claims %d, failed acknowledgement statements %d, acknowledged results that matched no running attempt %d",
		hooks.since(&hooks.firstClaim), hooks.since(&hooks.firstAck), hooks.claimErrs.Load(), hooks.ackErrs.Load(), hooks.unmatched.Load())

	for _, stop := range stops {
		stop() // fails the test unless Run returns nil
	}

	if other != 0 {
		t.Errorf("%d jobs are not completed", other)
	}
	var withErrors, rescued int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE errors <> '[]' OR attempt <> 1), count(*) FILTER (WHERE rescues > 0) FROM skipjack.uniq`).
		Scan(&withErrors, &rescued); err != nil {
		t.Fatal(err)
	}
	if withErrors != 0 {
		t.Errorf("%d completed jobs have errors or an attempt other than 1, want none (the handler never fails; a rescue restores the attempt)", withErrors)
	}
	rows, err := pool.Query(ctx, `SELECT id, rescues FROM skipjack.uniq`)
	if err != nil {
		t.Fatal(err)
	}
	var never, twice, explained []int64
	for rows.Next() {
		var id int64
		var rescues int
		if err := rows.Scan(&id, &rescues); err != nil {
			t.Fatal(err)
		}
		n := 0
		if c, ok := runs.Load(id); ok {
			n = int(c.(*atomic.Int32).Load())
		}
		switch {
		case n == 0:
			never = append(never, id)
		case n > 1:
			twice = append(twice, id)
			if rescues > 0 && n <= 1+rescues {
				explained = append(explained, id)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("handler runs: %d in all for %d jobs; jobs run more than once: %d (%d of them after a rescue); jobs rescued: %d",
		ran.Load(), restartJobs, len(twice), len(explained), rescued)
	if len(never) > 0 {
		t.Errorf("%d jobs are completed but their handler never ran: %v", len(never), first(never, 10))
	}
	if len(twice) > 0 {
		t.Errorf("%d jobs ran more than once (%d of them after a rescue), want none: %v", len(twice), len(explained), first(twice, 10))
	}
	if rescued > 0 {
		t.Errorf("%d jobs were rescued after their lease lapsed, want none: a sub-second restart must not cost a lease", rescued)
	}
	if hooks.claimErrs.Load()+hooks.ackErrs.Load() == 0 {
		t.Errorf("the restart failed no claim and no acknowledgement: it did not hit the workers mid-burn-down")
	}
	if hooks.firstClaim.Load() == 0 || hooks.firstAck.Load() == 0 {
		t.Errorf("no claim or no acknowledgement succeeded after the restart")
	}

	for i, l := range workerLogs {
		w := warnings([]*logs{l})
		t.Logf("worker %d logged:\n%s", i, w)
		if !strings.Contains(w, "retry_in=") {
			t.Errorf("worker %d logged no failure with its backoff during the restart", i)
		}
	}
}

// restartHooks records what the workers' statements did around the
// restart.
type restartHooks struct {
	skipjack.NopHooks
	restartAt, restarted atomic.Int64 // unix nanoseconds
	firstClaim, firstAck atomic.Int64 // first success after restarted
	claimErrs, ackErrs   atomic.Int64
	unmatched            atomic.Int64
}

func (h *restartHooks) ClaimDone(c skipjack.ClaimInfo) {
	if c.Err != nil {
		h.claimErrs.Add(1)
		return
	}
	h.noteFirst(&h.firstClaim)
}

func (h *restartHooks) AckDone(a skipjack.AckInfo) {
	if a.Err != nil {
		h.ackErrs.Add(1)
		return
	}
	h.unmatched.Add(int64(a.Jobs - a.Matched))
	h.noteFirst(&h.firstAck)
}

// noteFirst records now in first if the restart is over and nothing was
// recorded yet.
func (h *restartHooks) noteFirst(first *atomic.Int64) {
	if h.restarted.Load() != 0 {
		first.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// since returns how long after the restart returned first was recorded.
func (h *restartHooks) since(first *atomic.Int64) time.Duration {
	at := first.Load()
	if at == 0 {
		return -1
	}
	return time.Duration(at - h.restarted.Load()).Round(time.Millisecond)
}

// states counts the queue's jobs by state, rescues and attempt, for
// failure messages.
func states(t testing.TB, pool *pgxpool.Pool) string {
	rows, err := pool.Query(context.Background(), `SELECT state, rescues, attempt, count(*) FROM skipjack.uniq GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var state string
		var rescues, attempt, n int64
		if err := rows.Scan(&state, &rescues, &attempt, &n); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "  %s rescues=%d attempt=%d: %d\n", state, rescues, attempt, n)
	}
	return b.String()
}

// warnings returns the records above Debug level of the workers' logs.
func warnings(ls []*logs) string {
	var b strings.Builder
	for _, l := range ls {
		for _, line := range strings.Split(l.String(), "\n") {
			if line != "" && !strings.Contains(line, "level=DEBUG") {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

func first(ids []int64, n int) []int64 { return ids[:min(n, len(ids))] }
