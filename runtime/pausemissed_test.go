package skipjack_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestPauseMissedByListenerGivesBackPrefetched pauses a queue while its
// worker's listener is not listening (its connection killed, and the
// database refusing new connections until the pause has committed), so
// that the pause's notification reaches no one, as one sent in the moment
// between a worker's start and its listener's first LISTEN does. Once the
// listener listens again the worker must read the pause from the database
// and give its prefetched jobs back: none of them starts until Resume.
func TestPauseMissedByListenerGivesBackPrefetched(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	var started atomic.Int64
	start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		started.Add(1)
		<-hold
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	t.Cleanup(release) // before the worker's stop: cleanups run last first
	const jobs = 12
	if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "4 handlers to start, 4 jobs to be prefetched and the listener to LISTEN", func() bool {
		return started.Load() == 4 &&
			queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 8 &&
			queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
	})

	// Two connections of our own for what follows, since the pool cannot
	// open new ones while the database refuses them: one to the test's
	// database, and one to the server's maintenance database, from which
	// the test's database is closed to new connections (a database cannot
	// close itself).
	admin, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Release)
	mc := pool.Config().ConnConfig.Copy()
	db := mc.Database
	mc.Database = "postgres"
	maint, err := pgx.ConnectConfig(ctx, mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = maint.Close(context.Background()) })
	allow := func(on bool) error {
		_, err := maint.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" ALLOW_CONNECTIONS "+map[bool]string{false: "false", true: "true"}[on])
		return err
	}
	t.Cleanup(func() {
		if err := allow(true); err != nil {
			t.Errorf("allowing connections again: %v", err)
		}
	})
	if err := allow(false); err != nil {
		t.Fatal(err)
	}
	var listenerPID int32
	if err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&listenerPID); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, listenerPID); err != nil {
		t.Fatal(err)
	}
	var listening int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&listening); err != nil || listening != 0 {
		t.Fatalf("%d sessions LISTEN after the listener's was terminated (%v), want 0", listening, err)
	}
	if err := demo.Pause(ctx, admin.Conn()); err != nil {
		t.Fatal(err)
	}
	atPause := started.Load()
	if err := allow(true); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 60*time.Second, "the listener to LISTEN again", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
	})
	// The worker reads the pause once it listens again. Without that,
	// the prefetched jobs stay running until a handler frees and starts
	// one: this waits for the give-back, however long load delays it.
	waitFor(t, 60*time.Second, "the 4 prefetched jobs to be given back (pending, attempt restored)", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0`) == jobs-4
	})
	release()
	waitFor(t, 30*time.Second, "the running jobs to finish", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 0
	})
	if n := started.Load() - atPause; n != 0 {
		t.Errorf("%d handlers started after the pause committed, want 0", n)
	}
	if err := demo.Resume(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every job to run after Resume", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	if n := started.Load(); n != jobs {
		t.Errorf("%d handlers started in all, want %d (each job once)", n, jobs)
	}
}
