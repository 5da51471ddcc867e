package skipjack_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/trim"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// pruneRowsEnv sets how many retained failed rows TestPruneUnderLoad
// starts with. Issue 9 asks for 1,000,000 (SKIPJACK_PRUNE_ROWS=1000000,
// the heavy mode); the default keeps the test within CI's budget.
const (
	pruneRowsEnv     = "SKIPJACK_PRUNE_ROWS"
	pruneRowsDefault = 200_000
)

// pruneStmt is one prune statement the worker ran.
type pruneStmt struct {
	failed bool // PruneFailed, else PruneCompleted
	start  time.Time
	took   time.Duration
	rows   int64
	sql    string
	args   []any
	err    error
}

// pruneTracer records the worker's prune statements (the control pool is
// built from the worker pool's configuration, tracer included).
type pruneTracer struct {
	mu    sync.Mutex
	stmts []pruneStmt
}

type pruneKey struct{}

func (p *pruneTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	var s pruneStmt
	switch {
	case strings.HasPrefix(data.SQL, "-- name: PruneCompleted "):
	case strings.HasPrefix(data.SQL, "-- name: PruneFailed "):
		s.failed = true
	default:
		return ctx
	}
	s.start, s.sql, s.args = time.Now(), data.SQL, data.Args
	return context.WithValue(ctx, pruneKey{}, &s)
}

func (p *pruneTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	s, ok := ctx.Value(pruneKey{}).(*pruneStmt)
	if !ok {
		return
	}
	s.took, s.rows, s.err = time.Since(s.start), data.CommandTag.RowsAffected(), data.Err
	p.mu.Lock()
	p.stmts = append(p.stmts, *s)
	p.mu.Unlock()
}

func (p *pruneTracer) get() []pruneStmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pruneStmt(nil), p.stmts...)
}

// TestPruneUnderLoad retains a large backlog of failed jobs (a week's
// retention; 200,000 rows by default, 1,000,000 with
// SKIPJACK_PRUNE_ROWS=1000000) in the trim queue, whose completed jobs are
// kept for 1s, and streams 2,000 jobs/s through one worker for 12s.
// Pruning must keep up: the completed rows past their retention stay
// bounded throughout (a few seconds of the stream at most, where one prune
// runs every second) and are all gone soon after the stream stops. The
// retained failed rows must all be kept, and not walked: the worker's
// PruneFailed statement, explained as it ran, touches a handful of buffers,
// not the backlog's thousands.
func TestPruneUnderLoad(t *testing.T) {
	t.Parallel()
	failedRows := pruneRowsDefault
	if s := os.Getenv(pruneRowsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a row count", pruneRowsEnv, s)
		}
		failedRows = n
	}
	const (
		rate     = 2000 // jobs/s
		stream   = 12 * time.Second
		tick     = 50 * time.Millisecond
		retained = time.Second // trim's completed retention
		// bound on completed rows past their retention at any time: three
		// seconds of the stream, where a prune runs every second (±20%)
		bound = 3 * rate
	)
	ctx := context.Background()
	tracer := &pruneTracer{}
	pool := skipjacktest.NewPoolConfig(t, func(c *pgxpool.Config) {
		c.MaxConns = 8
		c.ConnConfig.Tracer = tracer
	})
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := testqueue.Migrate(mctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	acfg := pool.Config()
	acfg.ConnConfig.Tracer = nil
	acfg.MaxConns = 4
	admin, err := pgxpool.NewWithConfig(ctx, acfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)

	began := time.Now()
	if _, err := admin.Exec(ctx, `INSERT INTO skipjack.trim (payload, state, attempt, finished_at, errors)
		SELECT '{"n": 1}', 'failed', 25, now() - (g % 86400) * interval '1 second', '[]' FROM generate_series(1, $1) g`, failedRows); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `ANALYZE skipjack.trim`); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d failed rows (finished within the last day, retained for a week) in %v", failedRows, time.Since(began).Round(time.Millisecond))

	logs := newLogs(t)
	stop := start(t, trim.NewWorker(pool, func(context.Context, *trim.Job) error { return nil },
		skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond, Logger: logs.logger()}))

	// The producer: EnqueueMany every tick, catching up to rate × elapsed.
	produced := 0
	streamStart := time.Now()
	// samples of the completed rows past their retention, every 250ms
	var samples []int64
	var sampled time.Time
	sample := func() int64 {
		n := queryInt(t, admin, `SELECT count(*) FROM skipjack.trim WHERE state = 'completed' AND finished_at < now() - $1::interval`, retained)
		if time.Since(sampled) < 250*time.Millisecond {
			return n
		}
		samples, sampled = append(samples, n), time.Now()
		return n
	}
	ps := make([]trim.Payload, 0, rate)
	next := streamStart
	for time.Since(streamStart) < stream {
		want := int(float64(rate) * time.Since(streamStart).Seconds())
		if n := min(want-produced, rate); n > 0 {
			ps = ps[:0]
			for range n {
				ps = append(ps, trim.Payload{N: int64(produced)})
			}
			if got, err := trim.EnqueueMany(ctx, admin, ps); err != nil || got != int64(n) {
				t.Fatalf("EnqueueMany = %d, %v; want %d, nil", got, err, n)
			}
			produced += n
		}
		sample()
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
	streamed := time.Since(streamStart)
	waitFor(t, 30*time.Second, "the worker to run every streamed job", func() bool {
		sample()
		return queryInt(t, admin, `SELECT count(*) FROM skipjack.trim WHERE state IN ('pending', 'running')`) == 0
	})
	waitFor(t, 15*time.Second, "pruning to delete every completed job past its retention", func() bool {
		return sample() == 0
	})
	drained := time.Since(streamStart)
	stop()

	var peak int64
	for _, n := range samples {
		peak = max(peak, n)
	}
	if peak > bound {
		t.Errorf("up to %d completed rows were past their %v retention while %d jobs/s streamed, want at most %d (pruning falls behind); samples every 250ms: %v",
			peak, retained, rate, bound, samples)
	}
	if n := queryInt(t, admin, `SELECT count(*) FROM skipjack.trim WHERE state = 'failed'`); n != int64(failedRows) {
		t.Errorf("%d failed rows left, want all %d (retained for a week)", n, failedRows)
	}

	// The prune statements: runs are the groups of statements a second
	// apart; each Prune call is PruneCompleted then PruneFailed.
	stmts := tracer.get()
	var completedRows, runs int64
	var runTook, maxRun, maxCompleted, maxFailed, sumFailed time.Duration
	var failedCount int
	var lastFailed *pruneStmt
	var runStart, runEnd time.Time
	for i := range stmts {
		s := &stmts[i]
		if s.err != nil {
			t.Errorf("prune statement failed: %v", s.err)
			continue
		}
		if runEnd.IsZero() || s.start.Sub(runEnd) > 200*time.Millisecond {
			if !runEnd.IsZero() {
				runTook += runEnd.Sub(runStart)
				maxRun = max(maxRun, runEnd.Sub(runStart))
			}
			runs++
			runStart = s.start
		}
		runEnd = s.start.Add(s.took)
		if s.failed {
			if s.rows != 0 {
				t.Errorf("PruneFailed deleted %d rows, want none (all within their retention)", s.rows)
			}
			failedCount++
			sumFailed += s.took
			maxFailed = max(maxFailed, s.took)
			lastFailed = s
		} else {
			completedRows += s.rows
			maxCompleted = max(maxCompleted, s.took)
		}
	}
	if !runEnd.IsZero() {
		runTook += runEnd.Sub(runStart)
		maxRun = max(maxRun, runEnd.Sub(runStart))
	}
	if lastFailed == nil {
		t.Fatal("the worker ran no PruneFailed statement")
	}

	// Explain the worker's own PruneFailed statement (rolled back): it must
	// find its first row past retention through the index, not walk the
	// retained rows.
	buffers, plan := explainBuffers(t, admin, lastFailed.sql, lastFailed.args)
	walkable := int64(failedRows / 200) // far fewer pages than the backlog holds
	if buffers > min(walkable, 200) {
		t.Errorf("the worker's PruneFailed statement touches %d buffers with %d retained failed rows, want a few (an index probe); plan:\n%s", buffers, failedRows, plan)
	}

	t.Logf("streamed %d jobs in %v (%.0f jobs/s); every job run and every expired completed row pruned %v after the stream started",
		produced, streamed.Round(time.Millisecond), float64(produced)/streamed.Seconds(), drained.Round(time.Millisecond))
	t.Logf("completed rows past their %v retention: peak %d (bound %d), samples every 250ms: %v", retained, peak, bound, samples)
	t.Logf("%d prune runs, %d statements: %d completed rows deleted (%.0f rows/s of prune time); longest run %v, longest PruneCompleted %v; PruneFailed over %d retained rows: %d statements, mean %v, longest %v, %d buffers explained",
		runs, len(stmts), completedRows, float64(completedRows)/runTook.Seconds(), maxRun.Round(time.Millisecond), maxCompleted.Round(time.Millisecond),
		failedRows, failedCount, (sumFailed / time.Duration(failedCount)).Round(time.Microsecond), maxFailed.Round(time.Microsecond), buffers)
}

// explainBuffers runs EXPLAIN (ANALYZE, BUFFERS) of sql with args in a
// transaction it rolls back and returns the shared buffers its plan nodes
// hit or read (summed over the nodes, so an upper bound) and the plan.
func explainBuffers(t *testing.T, pool *pgxpool.Pool, sql string, args []any) (int64, string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var out string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var doc []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("explain output %q: %v", out, err)
	}
	type node struct {
		Hit   int64  `json:"Shared Hit Blocks"`
		Read  int64  `json:"Shared Read Blocks"`
		Plans []node `json:"Plans"`
	}
	var root node
	if err := json.Unmarshal(doc[0].Plan, &root); err != nil {
		t.Fatalf("explain plan: %v", err)
	}
	var sum func(n node) int64
	sum = func(n node) int64 {
		s := n.Hit + n.Read
		for _, c := range n.Plans {
			s += sum(c)
		}
		return s
	}
	return sum(root), out
}
