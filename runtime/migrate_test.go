package skipjack_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestMigrateConcurrently runs Migrate from eight goroutines at once on an
// empty database: all succeed, each migration is applied and recorded
// once, and a later call is a no-op.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := skipjacktest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = testqueue.Migrate(ctx, pool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d: %v", i, err)
		}
	}
	ups, err := filepath.Glob("internal/testqueue/migrations/*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no generated migrations found: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_migrations WHERE config = 'testqueue'`); n != int64(len(ups)) {
		t.Errorf("%d migrations recorded, want the %d generated ones", n, len(ups))
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'skipjack' AND tablename IN ('demo', 'fast')`); n != 2 {
		t.Errorf("%d queue tables exist, want 2", n)
	}
	if err := testqueue.Migrate(ctx, pool); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
}

// TestMigrateFailure checks that a failing migration is reported with its
// name, leaves no trace, and that the migrations before it stay applied.
func TestMigrateFailure(t *testing.T) {
	t.Parallel()
	pool := skipjacktest.NewPool(t)
	ctx := context.Background()
	p := skipjackimpl.MigrateParams{Config: "broken", Schema: "jobs", Migrations: []skipjackimpl.Migration{
		{Version: 2, Name: "0002_bad", Up: `CREATE TABLE jobs.b (x int); SELECT no_such_function();`},
		{Version: 1, Name: "0001_ok", Up: `CREATE TABLE jobs.a (x int);`},
	}}
	err := skipjackimpl.Migrate(ctx, pool, p)
	if err == nil || !strings.Contains(err.Error(), "0002_bad") {
		t.Fatalf("Migrate = %v, want an error naming 0002_bad", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM jobs._skipjack_migrations`); n != 1 {
		t.Errorf("%d migrations recorded, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'jobs'`); n != 2 { // a and the tracking table
		t.Errorf("%d tables in schema jobs, want 2 (b rolled back)", n)
	}
}

// TestMigrateRepeatableReadDefault runs four Migrate calls at once, each on
// its own pool, against a database whose default isolation is repeatable
// read. A caller that waited for the advisory lock must see the migration
// the winner recorded meanwhile, so its check cannot read a snapshot taken
// before the lock was granted: all four succeed.
func TestMigrateRepeatableReadDefault(t *testing.T) {
	t.Parallel()
	url := skipjacktest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read'); END $$`); err != nil {
		t.Fatal(err)
	}

	pools := make([]*pgxpool.Pool, 4)
	for i := range pools {
		if pools[i], err = pgxpool.New(ctx, url); err != nil {
			t.Fatal(err)
		}
		defer pools[i].Close()
		var iso string
		if err := pools[i].QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&iso); err != nil || iso != "repeatable read" {
			t.Fatalf("default_transaction_isolation = %q (%v), want repeatable read", iso, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(pools))
	for i, pool := range pools {
		wg.Go(func() { errs[i] = testqueue.Migrate(ctx, pool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d under a repeatable-read default: %v", i, err)
		}
	}
}

// TestApplyLiveUnits applies non-transactional migrations (concurrent index
// builds) and a migration that meets a lock timeout, each on a database of
// its own, and checks what the database holds afterwards.
func TestApplyLiveUnits(t *testing.T) {
	t.Parallel()
	const (
		table     = `CREATE TABLE jobs.a (x int); INSERT INTO jobs.a SELECT g FROM generate_series(1, 1000) g;`
		dupes     = `INSERT INTO jobs.a VALUES (1), (2);`
		noTx      = skipjackimpl.NoTransactionMarker + " (test)\n"
		buildUniq = noTx + `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "a_u" ON "jobs"."a" (x);`
		validUniq = `SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass('jobs.a_u') AND indisvalid`
		anyUniq   = `SELECT count(*) FROM pg_class WHERE oid = to_regclass('jobs.a_u')`
	)
	tests := []struct {
		name    string
		setup   []string      // run one by one before Apply
		hold    time.Duration // how long a transaction holds jobs.a's lock while Apply runs
		up      string        // migration 2
		wantErr string        // "" means success
		checks  map[string]int64
		one     bool // a pool of one connection
	}{
		{name: "concurrent build beside the lock transaction", up: buildUniq,
			checks: map[string]int64{validUniq: 1}},
		{name: "invalid index of a failed build is rebuilt",
			// The failed build leaves an invalid a_u; IF NOT EXISTS alone
			// would keep it.
			setup:  []string{dupes, `CREATE UNIQUE INDEX CONCURRENTLY a_u ON jobs.a (x);`},
			up:     noTx + `DELETE FROM jobs.a WHERE ctid IN (SELECT max(ctid) FROM jobs.a GROUP BY x HAVING count(*) > 1);` + "\n" + `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "a_u" ON "jobs"."a" (x);`,
			checks: map[string]int64{validUniq: 1}},
		{name: "failed build leaves no invalid index", setup: []string{dupes}, up: buildUniq, wantErr: "could not create unique index",
			checks: map[string]int64{anyUniq: 0, `SELECT count(*) FROM jobs._skipjack_migrations`: 1}},
		{name: "one connection is refused before anything runs", one: true, up: buildUniq, wantErr: "needs at least 2 connections",
			checks: map[string]int64{anyUniq: 0}},
		{name: "lock timeout retried", hold: 700 * time.Millisecond,
			up:     `SET LOCAL lock_timeout = '50ms'; ALTER TABLE jobs.a ADD COLUMN y int;`,
			checks: map[string]int64{`SELECT count(*) FROM information_schema.columns WHERE table_schema = 'jobs' AND column_name = 'y'`: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := skipjacktest.NewPoolConfig(t, func(c *pgxpool.Config) {
				if tc.one {
					c.MaxConns = 1
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := skipjackimpl.MigrateParams{Config: "live", Schema: "jobs", Migrations: []skipjackimpl.Migration{
				{Version: 1, Name: "0001_table", Up: table},
				{Version: 2, Name: "0002_change", Up: tc.up},
			}}
			if _, err := skipjackimpl.Apply(ctx, pool, skipjackimpl.MigrateParams{Config: p.Config, Schema: p.Schema, Migrations: p.Migrations[:1]}); err != nil {
				t.Fatal(err)
			}
			for _, sql := range tc.setup {
				// A failing setup statement is part of the scenario.
				_, _ = pool.Exec(ctx, sql)
			}
			if tc.hold > 0 {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, "LOCK TABLE jobs.a IN ACCESS SHARE MODE"); err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(tc.hold, func() { _ = tx.Rollback(context.Background()) })
			}
			applied, err := skipjackimpl.Apply(ctx, pool, p)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Apply = %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr == "" && (len(applied) != 1 || applied[0].Name != "0002_change"):
				t.Errorf("Apply applied %v, want 0002_change", applied)
			}
			for sql, want := range tc.checks {
				if got := queryInt(t, pool, sql); got != want {
					t.Errorf("%s = %d, want %d", sql, got, want)
				}
			}
		})
	}
}
