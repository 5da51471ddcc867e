package skipjack_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestMigratorsWaitingBesideLiveUnits runs two and four migrators, each on
// a pool of its own as separate services would, through every kind of
// non-transactional unit the generator emits. A transaction writing the
// table holds back the first migrator's concurrent statement, while it
// holds the migration lock, until every other migrator has asked for that
// lock; then all must finish, each migration applied by exactly one of
// them. A migrator that waited for the lock inside a statement would hold a
// snapshot, which the last phase of a concurrent build waits for while the
// builder holds the lock: neither would ever finish.
func TestMigratorsWaitingBesideLiveUnits(t *testing.T) {
	t.Parallel()
	const (
		noTx      = skipjackimpl.NoTransactionMarker + " (test)\n"
		table     = `CREATE TABLE jobs.a (x int); INSERT INTO jobs.a SELECT g FROM generate_series(1, 10000) g;`
		buildUniq = noTx + `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "a_u" ON "jobs"."a" ("x");`
	)
	kinds := []struct {
		name  string
		table string   // migration 1, applied before the migrators start
		setup []string // run one by one after migration 1
		ups   []string // migrations 2, 3, ...
		want  []string // the indexes of jobs.a afterwards, all valid
	}{
		{name: "create index",
			table: table,
			ups:   []string{noTx + `CREATE INDEX CONCURRENTLY IF NOT EXISTS "a_x" ON "jobs"."a" ("x") WHERE "x" > 0;`},
			want:  []string{"a_x"}},
		{name: "create unique index",
			table: table,
			ups:   []string{buildUniq},
			want:  []string{"a_u"}},
		{name: "drop index",
			table: table + ` CREATE INDEX a_x ON jobs.a (x);`,
			ups:   []string{noTx + `DROP INDEX CONCURRENTLY IF EXISTS "jobs"."a_x";`}},
		{name: "index swap of a priority change",
			table: table + ` CREATE INDEX a_claim_idx ON jobs.a (x);`,
			ups: []string{
				noTx + `CREATE INDEX CONCURRENTLY IF NOT EXISTS "a_claim_next" ON "jobs"."a" ("x", "x");`,
				noTx + `DROP INDEX CONCURRENTLY IF EXISTS "jobs"."a_claim_idx";`,
				`SET LOCAL lock_timeout = '5s'; ALTER INDEX "jobs"."a_claim_next" RENAME TO "a_claim_idx";`,
			},
			want: []string{"a_claim_idx"}},
		{name: "invalid index of a failed build rebuilt",
			table: table,
			// The failed build leaves an invalid a_u, which the first
			// migrator drops concurrently before it builds a_u again.
			setup: []string{
				`INSERT INTO jobs.a VALUES (1)`,
				`CREATE UNIQUE INDEX CONCURRENTLY a_u ON jobs.a (x)`,
				`DELETE FROM jobs.a WHERE x = 1`,
			},
			ups:  []string{buildUniq},
			want: []string{"a_u"}},
	}
	for _, kind := range kinds {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d migrators", kind.name, n), func(t *testing.T) {
				t.Parallel()
				ms := []skipjackimpl.Migration{{Version: 1, Name: "0001_table", Up: kind.table}}
				for i, up := range kind.ups {
					ms = append(ms, skipjackimpl.Migration{Version: i + 2, Name: fmt.Sprintf("%04d_change", i+2), Up: up})
				}
				runMigratorsBesideLiveUnit(t, n, ms, kind.setup, kind.want)
			})
		}
	}
}

// runMigratorsBesideLiveUnit applies ms[0], runs setup, then runs n
// migrators of ms as TestMigratorsWaitingBesideLiveUnits describes, and
// checks that jobs.a ends with exactly the valid indexes want.
func runMigratorsBesideLiveUnit(t *testing.T, n int, ms []skipjackimpl.Migration, setup, want []string) {
	// Generous: a run takes well under a second on an idle machine. On the
	// waiting-inside-a-statement code the migrators never finish, and the
	// deadline turns that into a failure.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := skipjacktest.NewDatabase(t)
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	params := func(ms []skipjackimpl.Migration) skipjackimpl.MigrateParams {
		return skipjackimpl.MigrateParams{Config: "live", Schema: "jobs", Migrations: ms}
	}
	if _, err := skipjackimpl.Apply(ctx, admin, params(ms[:1])); err != nil {
		t.Fatal(err)
	}
	for _, sql := range setup {
		// A failing setup statement is part of the scenario.
		_, _ = admin.Exec(ctx, sql)
	}

	// The holdback: concurrent builds and drops wait for every
	// transaction that writes the table. Its transaction id keeps the
	// snapshots taken while it runs older than the build's reference
	// snapshot, whatever else the server runs.
	holdback, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holdback.Rollback(context.Background()) }()
	if _, err := holdback.Exec(ctx, "LOCK TABLE jobs.a IN ROW EXCLUSIVE MODE; SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}

	migrators := make([]*lockWatch, n)
	for i := range migrators {
		migrators[i] = newLockWatch(t, ctx, url, fmt.Sprintf("migrator-%d", i))
	}
	applied := make([][]skipjackimpl.Migration, n)
	errs := make([]error, n)
	start := func(i int) {
		wg.Go(func() { applied[i], errs[i] = skipjackimpl.Apply(ctx, migrators[i].pool, params(ms)) })
	}

	start(0)
	waitFor(t, time.Minute, "migrator-0 holding the lock, its concurrent statement held back", func() bool {
		return queryBool(t, ctx, admin, `
SELECT count(*) > 0 FROM pg_stat_activity
WHERE application_name = 'migrator-0' AND wait_event_type = 'Lock' AND query LIKE '%INDEX CONCURRENTLY%'`)
	})
	var key int64
	err = admin.QueryRow(ctx, `
SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = 'migrator-0' AND l.locktype = 'advisory' AND l.granted`).Scan(&key)
	if err != nil {
		t.Fatalf("the migration lock migrator-0 holds: %v", err)
	}
	for i := 1; i < n; i++ {
		start(i)
	}
	for _, m := range migrators[1:] {
		// Asked: an attempt that returned (it cannot have got the lock),
		// or one that waits for it inside its statement.
		waitFor(t, time.Minute, m.name+" asking for the migration lock", func() bool {
			return m.askedFor(key) || queryBool(t, ctx, admin, `
SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = $1 AND l.locktype = 'advisory' AND NOT l.granted
  AND (l.classid::bigint << 32) | l.objid::bigint = $2`, m.name, key)
		})
	}

	released := time.Now()
	if err := holdback.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	// Until they finish, look for the deadlock itself: a concurrent
	// statement waiting for a backend that waits for an advisory lock (only
	// the migrators take one). It never resolves, so the test need not wait
	// for its deadline to fail.
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		case <-time.After(10 * time.Millisecond):
			var who string
			err := admin.QueryRow(ctx, `
SELECT coalesce(string_agg(DISTINCT b.application_name || ' waits for ' || w.application_name, ', '), '')
FROM pg_stat_activity b
CROSS JOIN LATERAL unnest(pg_blocking_pids(b.pid)) AS blocker(pid)
JOIN pg_stat_activity w ON w.pid = blocker.pid
WHERE b.datname = current_database() AND b.query LIKE '%INDEX CONCURRENTLY%' AND b.wait_event_type = 'Lock'
  AND w.wait_event_type = 'Lock' AND w.wait_event = 'advisory'`).Scan(&who)
			if err != nil && ctx.Err() == nil {
				t.Errorf("looking for a deadlock: %v", err)
			}
			if who != "" {
				cancel()
				<-finished
				t.Fatalf("deadlock: the concurrent statement of %s (waiting for a snapshot of a transaction that waits for the migration lock its own migrator holds)", who)
			}
		}
	}
	t.Logf("%d migrators finished %v after the holdback ended", n, time.Since(released).Round(time.Millisecond))
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator-%d: Apply: %v", i, err)
		}
	}

	by := map[int][]string{} // version -> the migrators that applied it
	for i, ms := range applied {
		for _, m := range ms {
			by[m.Version] = append(by[m.Version], fmt.Sprintf("migrator-%d", i))
		}
	}
	for _, m := range ms[1:] {
		if len(by[m.Version]) != 1 {
			t.Errorf("%s applied by %v, want exactly one migrator", m.Name, by[m.Version])
		}
	}
	if got := queryInt(t, admin, `SELECT count(*) FROM jobs._skipjack_migrations WHERE config = 'live'`); got != int64(len(ms)) {
		t.Errorf("%d migrations recorded, want %d", got, len(ms))
	}
	rows, err := admin.Query(ctx, `
SELECT c.relname || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'jobs.a'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(indexes, want) {
		t.Errorf("indexes of jobs.a = %q, want %q", indexes, want)
	}
	if held := queryInt(t, admin, `
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); held != 0 {
		t.Errorf("%d advisory locks still held after every Apply returned, want 0", held)
	}
}

// lockWatch is a migrator's pool, named by its application_name, with a
// tracer that counts the advisory lock statements it finished, by key.
type lockWatch struct {
	name string
	pool *pgxpool.Pool

	mu       sync.Mutex
	finished map[int64]int
}

// lockKeyOf is the context key under which a lock statement's key travels
// from its start to its end.
type lockKeyOf struct{}

func newLockWatch(t *testing.T, ctx context.Context, url, name string) *lockWatch {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	w := &lockWatch{name: name, finished: map[int64]int{}}
	cfg.MaxConns = 2 // the least Apply needs for a non-transactional unit
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	cfg.ConnConfig.Tracer = w
	if w.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.Close)
	return w
}

func (w *lockWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "advisory_xact_lock") {
		return ctx
	}
	for _, a := range d.Args {
		if key, ok := a.(int64); ok {
			return context.WithValue(ctx, lockKeyOf{}, key)
		}
	}
	return ctx
}

func (w *lockWatch) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if key, ok := ctx.Value(lockKeyOf{}).(int64); ok {
		w.mu.Lock()
		w.finished[key]++
		w.mu.Unlock()
	}
}

// askedFor reports whether a statement of w that asked for the advisory
// lock key has returned.
func (w *lockWatch) askedFor(key int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finished[key] > 0
}

func queryBool(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
		t.Fatalf("waiting: %s: %v", sql, err)
	}
	return ok
}
