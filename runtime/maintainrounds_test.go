package skipjack_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/kept"
)

// backlogRows is more than one maintenance run used to touch (10 rounds of
// 1000 rows) before it waited for its next interval.
const backlogRows = 25_000

// firstRun waits for the first log record with msg and returns its jobs
// attribute.
func firstRun(t *testing.T, logs *logs, msg string) int {
	t.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* jobs=(\d+)`)
	var m []string
	waitFor(t, 30*time.Second, msg, func() bool {
		m = re.FindStringSubmatch(logs.String())
		return m != nil
	})
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRescueKeepsUp leaves 25,000 running jobs with lapsed leases behind
// (a crashed fleet): the first rescue run of a new worker must rescue all
// of them, going on while it finds full batches, not stop at a fixed cap
// and leave the rest for its next interval.
func TestRescueKeepsUp(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO skipjack.demo (payload, state, attempt, claim, lease_expires_at, worker)
		SELECT '{"n": 1}', 'running', 1, 1, now() - interval '1 minute', 'crashed' FROM generate_series(1, $1)`, backlogRows); err != nil {
		t.Fatal(err)
	}
	logs := newLogs(t)
	stop := start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 1, Logger: logs.logger()}))
	started := time.Now()
	n := firstRun(t, logs, "skipjack: rescued jobs whose lease lapsed")
	stop()
	if n != backlogRows {
		t.Errorf("the first rescue run rescued %d jobs, want all %d", n, backlogRows)
	}
	t.Logf("rescued %d jobs in one run, %v after start", n, time.Since(started).Round(time.Millisecond))
}

// TestPruneKeepsUp leaves 25,000 completed jobs past their retention: the
// first prune run must delete all of them.
func TestPruneKeepsUp(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO skipjack.kept (payload, state, attempt, finished_at)
		SELECT '{"n": 1}', 'completed', 1, now() - interval '1 hour' FROM generate_series(1, $1)`, backlogRows); err != nil {
		t.Fatal(err)
	}
	logs := newLogs(t)
	stop := start(t, kept.NewWorker(pool, func(context.Context, *kept.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 1, Logger: logs.logger()}))
	started := time.Now()
	n := firstRun(t, logs, "skipjack: pruned finished jobs")
	stop()
	if n != backlogRows {
		t.Errorf("the first prune run deleted %d jobs, want all %d", n, backlogRows)
	}
	t.Logf("pruned %d jobs in one run, %v after start", n, time.Since(started).Round(time.Millisecond))
}
