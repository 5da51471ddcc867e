package skipjack_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/kept"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestPruneRetainedJobs works jobs of the kept queue (completed and failed
// jobs retained for 1s): they are kept as completed or failed rows first,
// and the worker's pruner deletes them once their retention has passed.
func TestPruneRetainedJobs(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	ps := make([]kept.Payload, 20)
	for i := range ps {
		ps[i].N = int64(i)
	}
	if _, err := kept.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	w := kept.NewWorker(pool, func(ctx context.Context, job *kept.Job) error {
		done.Add(1)
		if job.Payload.N%2 == 1 {
			return skipjack.Permanent(errors.New("odd"))
		}
		return nil
	}, skipjack.WorkerConfig{Logger: quietLogger(t), AckDelay: time.Millisecond})
	start(t, w)

	waitFor(t, 10*time.Second, "all jobs handled and settled", func() bool {
		s, err := kept.Stats(ctx, pool)
		return err == nil && done.Load() == 20 && s.Pending+s.Running == 0 && s.Completed+s.Failed > 0
	})
	// The rows are retained for 1s and pruned every half second or so.
	waitFor(t, 10*time.Second, "retained rows pruned", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.kept`) == 0
	})
}

// TestHeartbeatCancelsLostJob takes a running job away from its worker (as
// a rescue and a claim by another worker would) and checks that the next
// heartbeat cancels the handler's context with skipjack.ErrLeaseLost, and
// that the worker writes nothing for that attempt afterwards.
func TestHeartbeatCancelsLostJob(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	logs := newLogs(t)
	w := slow.NewWorker(pool, func(ctx context.Context, job *slow.Job) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, skipjack.WorkerConfig{Logger: logs.logger()})
	stop := start(t, w)
	<-started

	// Another claim of the same job: the claim token moves on.
	if _, err := pool.Exec(ctx, `UPDATE skipjack.slow SET claim = claim + 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-cause:
		if !errors.Is(got, skipjack.ErrLeaseLost) {
			t.Fatalf("handler context cause = %v, want ErrLeaseLost", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler was not cancelled within 5s of losing its lease (heartbeat every 1s)")
	}
	// The lost attempt's error must not be recorded against the newer claim.
	time.Sleep(300 * time.Millisecond)
	row, ok := getJob(t, pool, "slow", id)
	if !ok || row.State != "running" || row.Attempt != 1 {
		t.Errorf("job after the lost attempt = %+v (found %v), want it untouched: running, attempt 1", row, ok)
	}
	// The worker knew the attempt was lost, so it dropped its result rather
	// than send a write that the claim token then refused. Stopping flushes
	// every result the worker kept.
	stop()
	if logs.contains("WARN", "matched no running attempt") {
		t.Errorf("the lost attempt's result was sent and refused, not dropped:\n%s", logs)
	}
}

// TestDatabaseConnectionsKilled kills every connection of the worker's
// database repeatedly for a while: the worker logs, backs off and keeps
// running, and works the jobs once the database answers again.
func TestDatabaseConnectionsKilled(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	admin := newQueues(t, 2) // another database: its own connections survive
	var dbName string
	if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	l := newLogs(t)
	w := kept.NewWorker(pool, func(ctx context.Context, job *kept.Job) error {
		handled.Add(1)
		return nil
	}, skipjack.WorkerConfig{Logger: l.logger(), PollInterval: 100 * time.Millisecond})
	stop := start(t, w)

	killUntil := time.Now().Add(2 * time.Second)
	for time.Now().Before(killUntil) {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, dbName); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !l.contains("WARN", "skipjack:") {
		t.Errorf("no warning logged while the database was unreachable; logs:\n%s", l)
	}
	ps := []kept.Payload{{N: 1}, {N: 2}, {N: 3}}
	waitFor(t, 10*time.Second, "enqueue after the outage", func() bool {
		_, err := kept.EnqueueMany(ctx, pool, ps)
		return err == nil
	})
	waitFor(t, 15*time.Second, "jobs worked after the outage", func() bool { return handled.Load() >= 3 })
	stop()
}
