package migrationtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// liveRows is how many retained jobs the live queue holds when the
// migrations run: a real queue's history (retention.completed/failed).
const liveRows = 2_000_000

// liveMaxLockWait is the longest an enqueue may wait for a lock that a
// migration holds or waits for: lock_timeout (100ms) bounds it.
const liveMaxLockWait = 250 * time.Millisecond

// liveMaxEnqueue bounds the worst single enqueue during a migration. On a
// shared two-core machine an enqueue takes up to ~250ms with no migration
// at all (the test measures that baseline first), so the wall-clock bound
// only catches a migration that holds a table lock across a build or a
// scan, which on liveRows rows takes seconds; liveMaxLockWait is the exact
// check.
const liveMaxEnqueue = time.Second

// liveConfig is the config of the live test: queue live under load and
// queue old, dropped by the last step. change adds YAML under live.
func liveConfig(change string, oldDropped bool) string {
	old := "  old:\n    payload: {n: int64}\n"
	if oldDropped {
		old += "    dropped: true\n"
	}
	return `version: 1
name: live
out: ./internal/jobs
migrations:
  dir: ./migrations
  format: plain
queues:
  live:
    payload: {n: int64}
    retention: {completed: 168h}
` + change + old
}

// TestLiveMigrations applies each kind of update migration to a queue
// table of liveRows rows while producers enqueue every 5ms and workers
// claim and complete jobs, with skipjack migrate, and reports the worst
// enqueue during each migration and the longest an enqueue waited for a
// lock: no lock wait reaches liveMaxLockWait, no enqueue fails and no job
// is claimed twice.
//
// The load is SQL, as the queue table's contract allows producers and as
// the generated code's claim does it (FOR UPDATE SKIP LOCKED), because the
// table starts at layout 1, which today's generated code does not run on.
// With SKIPJACK_LIVE_BEFORE=1 each step's migrations run instead the way
// migrations did before they were made live (all in one transaction,
// indexes built and constraints validated under the table's lock), for
// comparison; the latency bound is then not checked.
func TestLiveMigrations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 2M-row queue table")
	}
	before := os.Getenv("SKIPJACK_LIVE_BEFORE") == "1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := newProject(t, liveConfig("", false))
	dbURL := skipjacktest.NewDatabase(t)
	conn := connect(t, dbURL)
	migrations := filepath.Join(p.dir, "migrations")

	// Version 1 as the runtime's layout 1 left it: created at today's
	// layout, then taken back to layout 1, and recorded so.
	p.ok("generate")
	p.ok("migrate", "--database-url", dbURL)
	for _, q := range []string{"live", "old"} {
		execSQL(t, conn, fmt.Sprintf(`ALTER TABLE skipjack.%[1]s DROP COLUMN trace, DROP COLUMN cancel_requested, DROP CONSTRAINT %[1]s_running_lease;
			DROP INDEX skipjack.%[1]s_completed_idx; DROP INDEX skipjack.%[1]s_failed_idx;
			CREATE INDEX %[1]s_finished_idx ON skipjack.%[1]s (finished_at) WHERE state IN ('completed', 'failed')`, q))
	}
	setLayout1(t, filepath.Join(migrations, "0001_skipjack_init.up.sql"))
	start := time.Now()
	execSQL(t, conn, fmt.Sprintf(`INSERT INTO skipjack.live (state, payload, run_at, created_at, finished_at, attempt)
		SELECT 'completed', jsonb_build_object('n', g), now() - interval '1 day', now() - interval '1 day', now() - interval '1 day', 1
		FROM generate_series(1, %d) g`, liveRows))
	execSQL(t, conn, `INSERT INTO skipjack.old (state, payload, finished_at, attempt)
		SELECT 'completed', jsonb_build_object('n', g), now(), 1 FROM generate_series(1, 200000) g`)
	execSQL(t, conn, `VACUUM ANALYZE skipjack.live`)
	execSQL(t, conn, `VACUUM ANALYZE skipjack.old`)
	t.Logf("%d retained jobs in skipjack.live in %v", liveRows, time.Since(start).Round(time.Millisecond))

	load := startLoad(ctx, t, dbURL)
	defer load.stop()
	// The same load without a migration: what the machine itself costs.
	quiet := time.Now()
	time.Sleep(3 * time.Second)
	base := load.during(quiet, time.Now())
	baseline := fmt.Sprintf("%-50s %2s          %7v: %4d enqueues, worst %v, p50 %v, longest lock wait %v (%s)", "no migration (baseline)", "", 3*time.Second, base.n, base.worst.Round(100*time.Microsecond), base.p50.Round(100*time.Microsecond), base.lockWait.Round(time.Millisecond), base.lockEvent)
	t.Log(baseline)
	steps := []struct {
		name, yaml string
	}{
		{"layout upgrade 1 -> 3", liveConfig("", false)},
		{"priority toggled", liveConfig("    priority: true\n", false)},
		{"unique key added", liveConfig("    priority: true\n    unique: {by: [n]}\n", false)},
		{"index change (unique key over completed jobs too)", liveConfig("    priority: true\n    unique: {by: [n], states: [pending, running, completed]}\n", false)},
		{"serial key added", liveConfig("    priority: true\n    unique: {by: [n], states: [pending, running, completed]}\n    serial: {by: [n]}\n", false)},
		{"queue dropped", liveConfig("    priority: true\n    unique: {by: [n], states: [pending, running, completed]}\n    serial: {by: [n]}\n", true)},
	}
	report := []string{baseline}
	for _, s := range steps {
		known := migrationFiles(t, migrations)
		p.write("skipjack.yaml", s.yaml)
		// A unique key over queued jobs is a breaking change that
		// generate refuses without --allow-breaking.
		p.ok("generate", "--allow-breaking")
		added := slices.DeleteFunc(migrationFiles(t, migrations), func(f string) bool { return slices.Contains(known, f) })
		if len(added) == 0 {
			t.Fatalf("%s: generate added no migration", s.name)
		}
		time.Sleep(300 * time.Millisecond) // a quiet baseline before the migration
		from := time.Now()
		if before {
			applyBefore(ctx, t, conn, migrations, added)
		} else {
			r := p.ok("migrate", "--database-url", dbURL)
			t.Logf("%s: %s", s.name, strings.TrimSpace(r.stdout))
		}
		to := time.Now()
		time.Sleep(300 * time.Millisecond)
		st := load.during(from, to)
		line := fmt.Sprintf("%-50s %2d units in %7v: %4d enqueues, worst %v, p50 %v, longest lock wait %v (%s)", s.name, len(added)/2, to.Sub(from).Round(time.Millisecond), st.n, st.worst.Round(100*time.Microsecond), st.p50.Round(100*time.Microsecond), st.lockWait.Round(time.Millisecond), st.lockEvent)
		report = append(report, line)
		t.Log(line)
		if !before && st.lockWait >= liveMaxLockWait {
			t.Errorf("%s: an enqueue waited %v for a lock (%s), want under %v", s.name, st.lockWait, st.lockEvent, liveMaxLockWait)
		}
		if !before && st.worst >= liveMaxEnqueue {
			t.Errorf("%s: worst enqueue during the migration took %v, want under %v", s.name, st.worst, liveMaxEnqueue)
		}
	}
	load.stop()
	keepMigrations(t, migrations, "live")
	if err := load.failure(); err != nil {
		t.Errorf("load: %v", err)
	}
	t.Logf("worst enqueue per migration (%d rows, before=%v):\n%s", liveRows, before, strings.Join(report, "\n"))
	if !before {
		if n := queryInt(t, conn, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'skipjack' AND NOT i.indisvalid`); n != 0 {
			t.Errorf("%d invalid indexes left in schema skipjack", n)
		}
		if n := queryInt(t, conn, `SELECT count(*) FROM pg_constraint WHERE conname = 'live_running_lease' AND convalidated`); n != 1 {
			t.Errorf("live_running_lease validated: %d, want 1", n)
		}
	}
}

// setLayout1 rewrites the state line of the generated migration file so
// that it records every table at layout 1.
func setLayout1(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(data), "\n")
	line, rest, _ := strings.Cut(rest, "\n")
	const marker = "-- skipjack:state "
	var st struct {
		Schema string           `json:"schema"`
		Tables []map[string]any `json:"tables"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, marker)), &st); err != nil {
		t.Fatalf("state line of %s: %v", file, err)
	}
	for _, tb := range st.Tables {
		tb["Layout"] = 1
	}
	enc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(head+"\n"+marker+string(enc)+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// migrationFiles lists the up files of dir.
func migrationFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// applyBefore runs the up files among files the way migrations ran before
// they were made live: every statement in one transaction, CONCURRENTLY
// and the lock_timeout removed.
func applyBefore(ctx context.Context, t *testing.T, conn *pgx.Conn, dir string, files []string) {
	t.Helper()
	var sql []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".up.sql") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "SET LOCAL lock_timeout") {
				continue
			}
			sql = append(sql, strings.ReplaceAll(strings.ReplaceAll(line, " CONCURRENTLY", ""), " NOT VALID", ""))
		}
	}
	text := strings.Join(sql, "")
	text = strings.Join(slices.DeleteFunc(strings.Split(text, "\n"), func(l string) bool { return strings.Contains(l, "VALIDATE CONSTRAINT") }), "\n")
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, text)
		return err
	})
	if err != nil {
		t.Fatalf("apply %v in one transaction: %v", files, err)
	}
}

// load runs producers and workers on skipjack.live until stopped.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   *pgxpool.Pool

	mu        sync.Mutex
	enqueues  []enqueue
	lockWaits []lockWait
	claimed   map[int64]bool
	err       error
	stopped   atomic.Bool
}

// enqueue is one timed Enqueue.
type enqueue struct {
	start, end time.Time
}

// lockWait is how long the enqueue that had waited longest for a lock at
// one moment had been waiting.
type lockWait struct {
	at    time.Time
	wait  time.Duration
	event string // pg_stat_activity.wait_event: relation, extend, transactionid, ...
}

// loadStats are the enqueues that overlapped a migration.
type loadStats struct {
	n          int
	worst, p50 time.Duration
	// lockWait is the longest an enqueue was seen waiting for a lock: the
	// part of the worst enqueue that the migration's locks caused, apart
	// from what a busy machine adds.
	lockWait  time.Duration
	lockEvent string
}

// startLoad starts two producers that each enqueue a job every 5ms and two
// workers that claim up to 20 pending jobs at a time and complete them.
func startLoad(ctx context.Context, t *testing.T, dbURL string) *load {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	// The load's own commits do not wait for the WAL flush: on a shared
	// machine a flush can take 200ms whatever runs, and every enqueue's
	// NOTIFY serializes on a lock held across the commit, so flush times
	// would decide the result. The migration's commits stay synchronous:
	// what its locks cost is what is measured.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, pool: pool, claimed: map[int64]bool{}}
	var next atomic.Int64
	next.Store(100_000_000)
	for range 2 {
		l.wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				start := time.Now()
				_, err := pool.Exec(ctx, `INSERT INTO skipjack.live (payload) VALUES (jsonb_build_object('n', $1::bigint))`, next.Add(1))
				end := time.Now()
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.enqueues = append(l.enqueues, enqueue{start, end})
				if err != nil && l.err == nil {
					l.err = fmt.Errorf("enqueue: %w", err)
				}
				l.mu.Unlock()
			}
		})
	}
	// Sample every 10ms how long enqueues have been waiting for a lock.
	l.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var secs float64
			var event string
			err := pool.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - query_start)::float8, wait_event FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO skipjack.live%' ORDER BY query_start LIMIT 1`).Scan(&secs, &event)
			if err != nil {
				continue // pgx.ErrNoRows: nobody waits
			}
			l.mu.Lock()
			l.lockWaits = append(l.lockWaits, lockWait{time.Now(), time.Duration(secs * float64(time.Second)), event})
			l.mu.Unlock()
		}
	})
	for range 2 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				rows, err := pool.Query(ctx, `UPDATE skipjack.live SET state = 'running', attempt = attempt + 1, claim = claim + 1,
					lease_expires_at = now() + interval '1 minute'
				WHERE id IN (SELECT id FROM skipjack.live WHERE state = 'pending' AND run_at <= now()
					ORDER BY run_at, id LIMIT 20 FOR UPDATE SKIP LOCKED)
				RETURNING id`)
				var ids []int64
				if err == nil {
					ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				}
				if err == nil && len(ids) > 0 {
					_, err = pool.Exec(ctx, `UPDATE skipjack.live SET state = 'completed', finished_at = now(), lease_expires_at = NULL WHERE id = ANY($1)`, ids)
				}
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				for _, id := range ids {
					if l.claimed[id] && l.err == nil {
						l.err = fmt.Errorf("job %d claimed twice", id)
					}
					l.claimed[id] = true
				}
				if err != nil && l.err == nil {
					l.err = fmt.Errorf("work: %w", err)
				}
				l.mu.Unlock()
				if len(ids) == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return l
}

// during returns the enqueues that overlapped [from, to].
func (l *load) during(from, to time.Time) loadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, e := range l.enqueues {
		if e.end.After(from) && e.start.Before(to) {
			ds = append(ds, e.end.Sub(e.start))
		}
	}
	slices.Sort(ds)
	st := loadStats{n: len(ds)}
	if len(ds) > 0 {
		st.worst, st.p50 = ds[len(ds)-1], ds[len(ds)/2]
	}
	for _, w := range l.lockWaits {
		if !w.at.Before(from) && !w.at.After(to) && w.wait > st.lockWait {
			st.lockWait, st.lockEvent = w.wait, w.event
		}
	}
	return st
}

// stop stops the producers and workers and waits for them.
func (l *load) stop() {
	if l.stopped.Swap(true) {
		return
	}
	l.cancel()
	l.wg.Wait()
	l.pool.Close()
}

// failure is the first enqueue or work error, or a job claimed twice.
func (l *load) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
