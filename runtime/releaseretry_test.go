package skipjack_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestFailedReleaseRetriedByHeartbeat checks, end to end, that prefetched
// jobs whose release failed are released again by the worker's heartbeat
// once the database takes the release: a pause gives the prefetched jobs
// back, a trigger refuses every release (counting the attempts in a
// sequence, which a rollback does not undo) until the test lets them
// through, and the jobs must then be pending again, attempt restored,
// while the worker lives. Without the heartbeat's retry they stayed
// running under the live worker, renewed, until it stopped.
func TestFailedReleaseRetriedByHeartbeat(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
CREATE TABLE release_fails (refuse boolean NOT NULL);
INSERT INTO release_fails VALUES (true);
CREATE SEQUENCE release_attempts;
CREATE FUNCTION refuse_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT refuse FROM release_fails) THEN
		PERFORM nextval('release_attempts');
		RAISE EXCEPTION 'release refused by the test';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse_release BEFORE UPDATE ON skipjack.slow FOR EACH ROW
WHEN (OLD.state = 'running' AND NEW.state = 'pending') EXECUTE FUNCTION refuse_release();`); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	var started atomic.Int64
	stop := start(t, slow.NewWorker(pool, func(context.Context, *slow.Job) error {
		started.Add(1)
		<-hold
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	defer stop()
	const jobs = 6
	if _, err := slow.EnqueueMany(ctx, pool, make([]slow.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "2 handlers to start and 2 jobs to be prefetched", func() bool {
		return started.Load() == 2 && queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE state = 'running'`) == 4
	})
	// Paused again every half second until the worker tried to give its
	// prefetched jobs back: its listener may not be listening yet, and a
	// lost notification would leave them prefetched (see wakeUntil).
	waitFor(t, 60*time.Second, "the pause's release of the prefetched jobs", func() bool {
		if err := slow.Pause(ctx, pool); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if releaseAttempts(t, pool) >= 1 {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	})
	// At least one heartbeat's retry (lease 3s: a heartbeat a second) was
	// refused too.
	waitFor(t, 60*time.Second, "a refused release to be tried again", func() bool {
		return releaseAttempts(t, pool) >= 2
	})
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE state = 'running'`); n != 4 {
		t.Fatalf("%d jobs running while releases are refused, want 4 (2 started, 2 prefetched kept held)", n)
	}
	if _, err := pool.Exec(ctx, `UPDATE release_fails SET refuse = false`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the 2 prefetched jobs to be pending again, attempt restored", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE state = 'pending' AND attempt = 0`) == jobs-2
	})
	if n := started.Load(); n != 2 {
		t.Errorf("%d handlers started, want 2 (the queue is paused)", n)
	}
	release()
}

// releaseAttempts returns how many releases TestFailedReleaseRetriedByHeartbeat's
// trigger refused.
func releaseAttempts(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, pool, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM release_attempts`)
}
