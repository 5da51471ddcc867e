package skipjack_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// childEnv selects a child-process mode (see child_test.go) when the test
// binary re-executes itself.
const childEnv = "SKIPJACK_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	dropExampleDatabases()
	skipjacktest.Stop()
	os.Exit(code)
}

// dropExamples drop the databases examples created.
var dropExamples []func(context.Context) error

// exampleDatabaseURL creates a fresh database for an example (which has no
// testing.T to clean up after it); TestMain drops it.
func exampleDatabaseURL() string {
	u, drop, err := skipjacktest.CreateDatabase(context.Background(), "example_")
	if err != nil {
		panic(err)
	}
	dropExamples = append(dropExamples, drop)
	return u
}

func dropExampleDatabases() {
	for _, drop := range dropExamples {
		_ = drop(context.Background())
	}
}

// newQueues returns a pool on a fresh database with the test queues
// migrated. maxConns 0 keeps pgxpool's default.
func newQueues(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := skipjacktest.NewPoolConfig(t, func(c *pgxpool.Config) {
		if maxConns > 0 {
			c.MaxConns = maxConns
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testqueue.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// beyondTimeout returns a context for a transaction that a handler of the
// fast queue commits with CompleteTx, with a deadline of its own instead of
// the attempt's. The queue's 500 ms timeout is there for the tests of
// timeouts; on a loaded machine a transaction's round trips and its wait
// for a pool connection can outlast it, and the attempt would be retried,
// which the tests that count runs do not expect. An attempt that still
// overruns its timeout is acknowledged by its transaction all the same:
// the retry the worker then writes finds no job to retry.
func beyondTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// logs collects a worker's log records so tests can assert on them, and
// echoes them to the test log.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   testing.TB
}

func newLogs(t testing.TB) *logs { return &logs{t: t} }

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return len(p), nil
}

// logger returns a logger at Debug level writing into l.
func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// contains reports whether a record with level and substring was logged.
func (l *logs) contains(level, substr string) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, "level="+level) && strings.Contains(line, substr) {
			return true
		}
	}
	return false
}

// quietLogger logs warnings and errors to the test log only.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runner is anything with Run(ctx) error: the generated Worker types.
type runner interface{ Run(context.Context) error }

// start runs w in the background. The returned stop cancels it and waits
// for Run to return (it fails the test if Run returned an error or did not
// return within a minute); it also runs at cleanup.
func start(t testing.TB, w runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("Run did not return within a minute of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond every 10ms until it holds, failing the test after
// timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// queryInt runs a query returning one integer.
func queryInt(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// jobRow is a job row as tests inspect it.
type jobRow struct {
	State   string
	Attempt int
	Claim   int
	Rescues int
	Errors  []skipjack.AttemptError
}

// getJob reads one job of table (demo or fast).
func getJob(t testing.TB, pool *pgxpool.Pool, table string, id int64) (jobRow, bool) {
	t.Helper()
	var r jobRow
	err := pool.QueryRow(context.Background(),
		fmt.Sprintf(`SELECT state, attempt, claim, rescues, errors FROM skipjack.%q WHERE id = $1`, table), id).
		Scan(&r.State, &r.Attempt, &r.Claim, &r.Rescues, &r.Errors)
	if err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return r, false
		}
		t.Fatalf("read job %d: %v", id, err)
	}
	return r, true
}

// tally counts handler invocations per job id.
type tally struct {
	mu sync.Mutex
	m  map[int64]int
}

func newTally() *tally { return &tally{m: make(map[int64]int)} }

func (c *tally) add(id int64) {
	c.mu.Lock()
	c.m[id]++
	c.mu.Unlock()
}

func (c *tally) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// duplicates returns how many ids ran more than once.
func (c *tally) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		if v > 1 {
			n++
		}
	}
	return n
}
