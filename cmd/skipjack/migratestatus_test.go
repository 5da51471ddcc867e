package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// cli runs the skipjack command line args on yaml and dbURL and returns
// its exit status, stdout and stderr.
func cli(yaml, dbURL string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(append(args, "-f", yaml, "--database-url", dbURL), env{stdout: &stdout, stderr: &stderr})
	return code, stdout.String(), stderr.String()
}

// mustCLI is cli that fails the test unless the command exits with want.
func mustCLI(t *testing.T, want int, yaml, dbURL string, args ...string) (string, string) {
	t.Helper()
	code, stdout, stderr := cli(yaml, dbURL, args...)
	if code != want {
		t.Fatalf("skipjack %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout, stderr
}

// shopState describes what the shop database holds: the versions the
// tracking table records, in order, and which of the tables that
// migrations 20, 21 and 22 create exist.
func shopState(t *testing.T, pool *pgxpool.Pool) (versions []int, workers, counts, busy bool) {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT version FROM shop_jobs._skipjack_migrations WHERE config = 'shop' ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	err = pool.QueryRow(t.Context(), "SELECT to_regclass('shop_jobs._skipjack_workers') IS NOT NULL, to_regclass('shop_jobs._skipjack_counts') IS NOT NULL, to_regclass('shop_jobs._skipjack_busy') IS NOT NULL").Scan(&workers, &counts, &busy)
	if err != nil {
		t.Fatal(err)
	}
	return versions, workers, counts, busy
}

// checkConsistent fails the test unless the recorded versions are 1..k
// without a hole and the tables of migrations 20, 21 and 22 exist exactly
// when they are recorded; it returns k.
func checkConsistent(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	versions, workers, counts, busy := shopState(t, pool)
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("recorded versions %v have a hole: a migrate and a rollback interleaved", versions)
		}
	}
	k := len(versions)
	if workers != (k >= 20) || counts != (k >= 21) || busy != (k >= 22) {
		t.Fatalf("%d migrations recorded, but _skipjack_workers exists: %v, _skipjack_counts exists: %v, _skipjack_busy exists: %v", k, workers, counts, busy)
	}
	return k
}

var statusLine = regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+(\S+)`)

// statusOf parses the table skipjack migrate status prints into version ->
// applied-at column.
func statusOf(t *testing.T, stdout string) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, m := range statusLine.FindAllStringSubmatch(stdout, -1) {
		var v int
		fmt.Sscan(m[1], &v)
		out[v] = m[3]
	}
	return out
}

// TestMigrateStatusAndDown walks the shop example's 22 migrations with the
// CLI alone (no Go, the YAML and migrations folder only): status before and
// after migrate, down of the default 1 and of 3 (each the newest first,
// running the generated down SQL), migrate again, then a down that would
// drop a queue table holding a job, refused without --force and done with
// it.
func TestMigrateStatusAndDown(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := skipjacktest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	stdout, _ := mustCLI(t, exitOK, yaml, dbURL, "migrate", "status")
	if st := statusOf(t, stdout); len(st) != 22 || st[1] != "pending" || st[22] != "pending" {
		t.Errorf("status before migrate: %v, want 22 pending", st)
	}
	if !strings.Contains(stdout, "skipjack migrate status: shop (schema shop_jobs): 0 applied, 22 pending\n") {
		t.Errorf("status before migrate:\n%s", stdout)
	}

	var before time.Time
	if err := pool.QueryRow(t.Context(), "SELECT date_trunc('second', now())").Scan(&before); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, exitOK, yaml, dbURL, "migrate")
	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "status")
	st := statusOf(t, stdout)
	for v := 1; v <= 22; v++ {
		at, err := time.Parse(time.RFC3339, st[v])
		if err != nil || at.Before(before) || at.After(before.Add(10*time.Minute)) {
			t.Errorf("status after migrate: version %d applied at %q (%v), want a time from the database's clock at or after %v", v, st[v], err, before)
		}
	}
	if !strings.Contains(stdout, "22 applied, 0 pending\n") {
		t.Errorf("status after migrate:\n%s", stdout)
	}

	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "down")
	if !strings.HasPrefix(stdout, "skipjack migrate down: undid 0022_skipjack_add_busy\nskipjack migrate down: 1 migration undone in shop") {
		t.Errorf("down:\n%s", stdout)
	}
	if k := checkConsistent(t, pool); k != 21 {
		t.Errorf("after down: %d migrations recorded, want 21", k)
	}
	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "status")
	if st := statusOf(t, stdout); st[22] != "pending" || st[21] == "pending" || !strings.Contains(stdout, "21 applied, 1 pending") {
		t.Errorf("status after down:\n%s", stdout)
	}

	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "down", "3")
	if !strings.HasPrefix(stdout, "skipjack migrate down: undid 0021_skipjack_update\nskipjack migrate down: undid 0020_skipjack_add_workers\nskipjack migrate down: undid 0019_skipjack_update_18\n") {
		t.Errorf("down 3:\n%s", stdout)
	}
	if k := checkConsistent(t, pool); k != 18 {
		t.Errorf("after down 3: %d migrations recorded, want 18", k)
	}
	var trace bool // 0019 added charge_card.trace; its down drops it
	if err := pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_schema = 'shop_jobs' AND table_name = 'charge_card' AND column_name = 'trace')").Scan(&trace); err != nil || trace {
		t.Errorf("charge_card.trace exists after 0019's down: %v (%v)", trace, err)
	}

	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate")
	if !strings.Contains(stdout, "4 migrations applied") {
		t.Errorf("migrate after down:\n%s", stdout)
	}
	if k := checkConsistent(t, pool); k != 22 {
		t.Errorf("after migrating again: %d migrations recorded, want 22", k)
	}

	// 0001's down drops the queue tables: refused while one holds a job,
	// before anything is undone.
	if _, err := pool.Exec(t.Context(), `INSERT INTO shop_jobs.send_email (payload) VALUES ('{"to": "a@example.com"}')`); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(yaml, dbURL, "migrate", "down", "22")
	if code != exitFailure || stdout != "" ||
		!strings.Contains(stderr, "0001_skipjack_init would drop a queue table that holds jobs (shop_jobs.send_email holds 1 job); pass --force to drop them; nothing was undone") {
		t.Errorf("down 22 with a job queued: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if k := checkConsistent(t, pool); k != 22 {
		t.Errorf("after the refused down: %d migrations recorded, want 22", k)
	}
	stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "down", "22", "--force")
	if !strings.Contains(stdout, "undid 0001_skipjack_init\n") || !strings.Contains(stdout, "22 migrations undone") {
		t.Errorf("down 22 --force:\n%s", stdout)
	}
	if k := checkConsistent(t, pool); k != 0 {
		t.Errorf("after down 22 --force: %d migrations recorded, want 0", k)
	}
	var queueTables int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'shop_jobs' AND tablename NOT LIKE '\\_%'").Scan(&queueTables); err != nil || queueTables != 0 {
		t.Errorf("%d queue tables left after down 22 --force (%v)", queueTables, err)
	}

	_, stderr = mustCLI(t, exitFailure, yaml, dbURL, "migrate", "down")
	if !strings.Contains(stderr, "0 applied, cannot undo 1") {
		t.Errorf("down with nothing applied: %s", stderr)
	}
	_, stderr = mustCLI(t, exitUsage, yaml, dbURL, "migrate", "down", "two")
	if !strings.Contains(stderr, `the number of migrations to undo is "two"`) {
		t.Errorf("down two: %s", stderr)
	}
}

// migrationLock takes the shop config's migration lock (the advisory lock
// skipjack migrate and migrate down take) in a transaction of its own, and
// returns a function that releases it.
func migrationLock(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte("skipjack:shop"))
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

// TestMigrateDownWaitsForLock holds the shop config's migration lock, as a
// running migrate does, and checks that migrate down asks for it and
// changes nothing until it is released, then undoes its migrations.
func TestMigrateDownWaitsForLock(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := skipjacktest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup, not a defer: it runs after migrationLock's, which gives
	// the lock's connection back (a defer would wait for it forever when
	// the test fails while holding the lock).
	t.Cleanup(pool.Close)
	mustCLI(t, exitOK, yaml, dbURL, "migrate")
	release := migrationLock(t, pool)

	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := cli(yaml, dbURL, "migrate", "down", "2")
		done <- result{code, stdout, stderr}
	}()
	// Wait until the down has asked for the lock at least once. Each ask
	// is a transaction of its own that rolls back when the lock is
	// taken, so between asks (up to 250ms apart) the CLI's session
	// shows its last statement, the rollback; the ask itself shows for a
	// moment only, which a poll at load 20 missed for a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		var asking bool
		err := pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND (query LIKE 'SELECT pg_try_advisory_xact_lock%' OR lower(query) = 'rollback'))").Scan(&asking)
		if err != nil {
			t.Fatal(err)
		}
		if asking {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("migrate down returned while the migration lock was held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			rows, err := pool.Query(t.Context(), "SELECT pid, application_name, state, left(query, 80) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
			if err == nil {
				for rows.Next() {
					var pid int32
					var app, state, query string
					if rows.Scan(&pid, &app, &state, &query) == nil {
						t.Logf("session %d (%q): %s: %q", pid, app, state, query)
					}
				}
				rows.Close()
			}
			t.Fatal("migrate down never asked for the migration lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if k := checkConsistent(t, pool); k != 22 {
		t.Fatalf("migrate down undid migrations while another holder had the lock: %d recorded", k)
	}
	select {
	case r := <-done:
		t.Fatalf("migrate down returned while the migration lock was held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	default:
	}
	release()
	select {
	case r := <-done:
		if r.code != exitOK {
			t.Fatalf("migrate down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("migrate down did not finish within a minute of the lock's release")
	}
	if k := checkConsistent(t, pool); k != 20 {
		t.Errorf("after the down: %d migrations recorded, want 20", k)
	}
}

// TestConcurrentMigrateAndDown runs migrate (5 migrations pending, each
// applied under the lock on its own) and migrate down 3 at the same time,
// a few rounds, and checks that they never interleave: the recorded
// migrations are always 1..k without a hole, and the tables match them.
func TestConcurrentMigrateAndDown(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := skipjacktest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	mustCLI(t, exitOK, yaml, dbURL, "migrate")
	for round := range 4 {
		mustCLI(t, exitOK, yaml, dbURL, "migrate", "down", "5")
		var wg sync.WaitGroup
		var migrateOut, downOut [3]string
		var migrateCode, downCode int
		wg.Go(func() {
			migrateCode, migrateOut[1], migrateOut[2] = cli(yaml, dbURL, "migrate")
		})
		wg.Go(func() {
			downCode, downOut[1], downOut[2] = cli(yaml, dbURL, "migrate", "down", "3")
		})
		wg.Wait()
		if migrateCode != exitOK || downCode != exitOK {
			t.Fatalf("round %d: migrate exit %d:\n%s%s\nmigrate down exit %d:\n%s%s", round, migrateCode, migrateOut[1], migrateOut[2], downCode, downOut[1], downOut[2])
		}
		k := checkConsistent(t, pool)
		if k != 19 && k != 22 {
			t.Fatalf("round %d: %d migrations recorded, want 19 (migrate, then down) or 22 (down, then migrate)", round, k)
		}
		if k == 19 {
			mustCLI(t, exitOK, yaml, dbURL, "migrate")
		}
	}
}

// goldenProject copies golden case name's skipjack.yaml, its input
// migrations and its expected ones into a fresh folder, and returns the
// copied YAML.
func goldenProject(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "golden", name)
	copyFile(t, filepath.Join(src, "skipjack.yaml"), filepath.Join(dir, "skipjack.yaml"))
	in, _ := filepath.Glob(filepath.Join(src, "migrations", "*.sql"))
	out, _ := filepath.Glob(filepath.Join(src, "expected", "migrations", "*.sql.golden"))
	if len(in) == 0 || len(out) == 0 {
		t.Fatalf("golden case %s has no migrations", name)
	}
	for _, f := range append(in, out...) {
		copyFile(t, f, filepath.Join(dir, "migrations", strings.TrimSuffix(filepath.Base(f), ".golden")))
	}
	return filepath.Join(dir, "skipjack.yaml")
}

// TestMigrateDownFormats runs migrate down on the goose and tern formats,
// whose down SQL shares a file with the up SQL: every migration after the
// first is undone with its down part (the tool's markers left out, a
// non-transactional one statement by statement), after which status says
// they are pending, and migrate applies them again.
func TestMigrateDownFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden string
		gone   string // a table or index the first update creates and its down drops
	}{
		{"goose_live", "skipjack._skipjack_counts"},
		{"tern", "skipjack.pong"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			yaml := goldenProject(t, tc.golden)
			dbURL := skipjacktest.NewDatabase(t)
			pool, err := pgxpool.New(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			mustCLI(t, exitOK, yaml, dbURL, "migrate")
			stdout, _ := mustCLI(t, exitOK, yaml, dbURL, "migrate", "status")
			st := statusOf(t, stdout)
			n := len(st)
			if n < 2 || st[n] == "pending" {
				t.Fatalf("status after migrate:\n%s", stdout)
			}
			exists := func() bool {
				var ok bool
				if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", tc.gone).Scan(&ok); err != nil {
					t.Fatal(err)
				}
				return ok
			}
			if !exists() {
				t.Fatalf("%s missing after migrate", tc.gone)
			}
			stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "down", fmt.Sprint(n-1))
			if !strings.Contains(stdout, fmt.Sprintf("%d migrations undone", n-1)) && !strings.Contains(stdout, "1 migration undone") {
				t.Errorf("down:\n%s", stdout)
			}
			if exists() {
				t.Errorf("%s still exists after the down", tc.gone)
			}
			stdout, _ = mustCLI(t, exitOK, yaml, dbURL, "migrate", "status")
			if !strings.Contains(stdout, fmt.Sprintf("1 applied, %d pending", n-1)) {
				t.Errorf("status after down:\n%s", stdout)
			}
			mustCLI(t, exitOK, yaml, dbURL, "migrate")
			if !exists() {
				t.Errorf("%s missing after migrating again", tc.gone)
			}
		})
	}
}
