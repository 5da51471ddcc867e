package skipjack_test

import (
	"context"
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
	h := startHeldJobs(t, pool, skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond})
	waitFor(t, 30*time.Second, "the listener to LISTEN", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
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
	atPause := h.started.Load()
	if err := allow(true); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 60*time.Second, "the listener to LISTEN again", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
	})
	// The worker reads the pause once it listens again. Without that,
	// the prefetched jobs stay running until a handler frees and starts
	// one: this waits for the give-back, however long load delays it.
	waitFor(t, 60*time.Second, "the 4 prefetched jobs to be given back (pending, attempt restored)", func() bool { return h.givenBack(t) })
	h.release()
	waitFor(t, 30*time.Second, "the running jobs to finish", func() bool { return h.running(t) == 0 })
	if n := h.started.Load() - atPause; n != 0 {
		t.Errorf("%d handlers started after the pause committed, want 0", n)
	}
	h.resumeAndFinish(t)
}
