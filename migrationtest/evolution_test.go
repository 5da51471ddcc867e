package migrationtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// evolutionConfig is the config before (version 1) and after (version 2)
// an evolution that touches everything a migration can change: a queue is
// added, max_attempts, priority, notify, the unique key and storage
// parameters change, and a queue is dropped.
func evolutionConfig(format string, version int) string {
	head := fmt.Sprintf(`version: 1
name: evo
out: ./internal/jobs
migrations:
  dir: ./migrations
  format: %s
queues:
`, format)
	if version == 1 {
		return head + `  send_email:
    payload: {to: string}
    max_attempts: 5
  resize_image:
    payload: {image_id: int64}
    table: {fillfactor: 70}
  old_reports:
    payload: {day: string}
`
	}
	return head + `  send_email:
    payload: {to: string}
    max_attempts: 10
    notify: false
    unique: {by: [to]}
  resize_image:
    payload: {image_id: int64}
    priority: true
    table: {fillfactor: 80, autovacuum_vacuum_scale_factor: 0.02}
  old_reports:
    payload: {day: string}
    dropped: true
  audit_log:
    payload: {entry: string}
`
}

// tableShape is what the test reads back of one queue table.
type tableShape struct {
	exists             bool
	maxAttemptsDefault string   // the column default of max_attempts
	triggers           int      // user triggers (the NOTIFY trigger)
	priorityIndex      bool     // an index that orders by priority
	uniqueIndex        bool     // a valid unique index of the queue's key
	reloptions         []string // storage parameters
}

// wantShapes are the queue tables after the migrations of each version
// (0: before any).
var wantShapes = map[int]map[string]tableShape{
	0: {"send_email": {}, "resize_image": {}, "old_reports": {}, "audit_log": {}},
	1: {
		"send_email":   {exists: true, maxAttemptsDefault: "5", triggers: 1},
		"resize_image": {exists: true, maxAttemptsDefault: "25", triggers: 1, reloptions: []string{"fillfactor=70"}},
		"old_reports":  {exists: true, maxAttemptsDefault: "25", triggers: 1},
		"audit_log":    {},
	},
	2: {
		"send_email":   {exists: true, maxAttemptsDefault: "10", uniqueIndex: true},
		"resize_image": {exists: true, maxAttemptsDefault: "25", triggers: 1, priorityIndex: true, reloptions: []string{"autovacuum_vacuum_scale_factor=0.02", "fillfactor=80"}},
		"old_reports":  {},
		"audit_log":    {exists: true, maxAttemptsDefault: "25", triggers: 1},
	},
}

// TestEvolution evolves a config in every migration format: generate and
// check are clean before and after the change; the format's real tool
// applies every up migration (with jobs queued before the change
// surviving), then every down migration one by one, then every up again;
// and skipjack migrate applies the same evolution to a database of its own.
func TestEvolution(t *testing.T) {
	t.Parallel()
	formats := []struct {
		format string
		tool   migrationTool
		files  int // migration files per version
	}{
		{"plain", golangMigrate, 2},
		{"golang-migrate", golangMigrate, 2},
		{"goose", gooseTool, 1},
		{"tern", ternTool, 1},
	}
	for _, f := range formats {
		t.Run(f.format, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			p := newProject(t, evolutionConfig(f.format, 1))
			migrations := filepath.Join(p.dir, "migrations")
			toolDB, cliDB := skipjacktest.NewDatabase(t), skipjacktest.NewDatabase(t)
			toolConn, cliConn := connect(t, toolDB), connect(t, cliDB)
			tool := func(what string, run func() error) {
				t.Helper()
				if err := run(); err != nil {
					t.Fatalf("%s %s: %v", f.tool.name, what, err)
				}
			}

			p.generate()
			p.check()
			countMigrations(t, migrations, f.files)
			tool("up to 1", func() error { return f.tool.up(ctx, toolDB, migrations) })
			expectShapes(t, toolConn, 1)
			p.ok("migrate", "--database-url", cliDB)
			expectShapes(t, cliConn, 1)
			for _, conn := range []*pgx.Conn{toolConn, cliConn} {
				queueJobs(t, conn)
			}

			p.write("skipjack.yaml", evolutionConfig(f.format, 2))
			p.generate("--allow-breaking") // a unique key over queued jobs
			p.check()
			// Units: send_email's changes; the duplicate check of its
			// new unique key, alone; its unique index built concurrently;
			// resize_image's new claim index built concurrently and alone
			// (the old one stays for the previous release's claims until a
			// contract step); its storage parameters and audit_log
			// created; then old_reports dropped (a transaction never spans
			// two live tables).
			countMigrations(t, migrations, 7*f.files)
			tool("up to 2", func() error { return f.tool.up(ctx, toolDB, migrations) })
			expectShapes(t, toolConn, 2)
			expectJobs(t, toolConn)
			p.ok("migrate", "--database-url", cliDB)
			expectShapes(t, cliConn, 2)
			expectJobs(t, cliConn)
			execSQL(t, cliConn, `INSERT INTO skipjack.send_email (payload) VALUES ('{"to": "new"}')`)
			if n := queryInt(t, cliConn, `SELECT max_attempts FROM skipjack.send_email WHERE payload->>'to' = 'new'`); n != 10 {
				t.Errorf("a job enqueued after the evolution has max_attempts %d, want the new default 10", n)
			}

			tool("down to 1", func() error { return f.tool.downTo(ctx, toolDB, migrations, 1) })
			expectShapes(t, toolConn, 1)
			expectJobs(t, toolConn)
			tool("down to 0", func() error { return f.tool.downTo(ctx, toolDB, migrations, 0) })
			expectShapes(t, toolConn, 0)
			tool("up again", func() error { return f.tool.up(ctx, toolDB, migrations) })
			expectShapes(t, toolConn, 2)
			keepMigrations(t, migrations, "evolution-"+f.format)
			t.Logf("%s: %v", f.format, time.Since(start).Round(time.Millisecond))
		})
	}
}

// check runs skipjack check and fails the test unless it finds nothing.
func (p *project) check() {
	p.t.Helper()
	r := p.skipjack(nil, "check")
	if r.code != 0 || r.stderr != "" {
		p.t.Fatalf("check after generate: exit status %d, want 0 and nothing on stderr:\n%s", r.code, r.stderr)
	}
}

// countMigrations expects n files in the migrations folder.
func countMigrations(t *testing.T, dir string, n int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != n {
		t.Fatalf("migrations: %q, want %d files", names, n)
	}
}

// queueJobs enqueues jobs on the version 1 queues with SQL, as a producer
// outside Go would.
func queueJobs(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	execSQL(t, conn, `INSERT INTO skipjack.send_email (payload) VALUES ('{"to": "a"}'), ('{"to": "b"}'), ('{"to": "c"}')`)
	execSQL(t, conn, `INSERT INTO skipjack.resize_image (payload, run_at) VALUES ('{"image_id": 1}', now() + interval '1 hour'), ('{"image_id": 2}', now())`)
	execSQL(t, conn, `INSERT INTO skipjack.old_reports (payload) VALUES ('{"day": "monday"}')`)
}

// expectJobs expects the jobs of queueJobs on the queues that outlive the
// evolution, unchanged: same payloads, same max_attempts, still pending.
func expectJobs(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	checks := []struct {
		sql  string
		want int64
	}{
		{`SELECT count(*) FROM skipjack.send_email WHERE payload->>'to' IN ('a', 'b', 'c') AND max_attempts = 5 AND state = 'pending'`, 3},
		{`SELECT count(*) FROM skipjack.resize_image WHERE (payload->>'image_id')::int IN (1, 2) AND max_attempts = 25 AND state = 'pending'`, 2},
		{`SELECT count(*) FROM skipjack.resize_image WHERE run_at > now() + interval '30 minutes'`, 1},
	}
	for _, c := range checks {
		if got := queryInt(t, conn, c.sql); got != c.want {
			t.Errorf("jobs queued before the evolution: %s = %d, want %d", c.sql, got, c.want)
		}
	}
}

// expectShapes expects the queue tables of the given version.
func expectShapes(t *testing.T, conn *pgx.Conn, version int) {
	t.Helper()
	for table, want := range wantShapes[version] {
		got := readShape(t, conn, table)
		if !got.equal(want) {
			t.Errorf("after the migrations of version %d, table %s is %+v, want %+v", version, table, got, want)
		}
	}
}

func (s tableShape) equal(o tableShape) bool {
	return s.exists == o.exists && s.maxAttemptsDefault == o.maxAttemptsDefault && s.triggers == o.triggers &&
		s.priorityIndex == o.priorityIndex && s.uniqueIndex == o.uniqueIndex && slices.Equal(s.reloptions, o.reloptions)
}

// readShape reads what the test checks of skipjack.<table>. Storage
// parameters are reduced to the ones the configs set explicitly.
func readShape(t *testing.T, conn *pgx.Conn, table string) tableShape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qualified := "skipjack." + table
	var s tableShape
	if queryInt(t, conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", qualified) == 0 {
		return s
	}
	s.exists = true
	err := conn.QueryRow(ctx, `SELECT column_default FROM information_schema.columns
		WHERE table_schema = 'skipjack' AND table_name = $1 AND column_name = 'max_attempts'`, table).Scan(&s.maxAttemptsDefault)
	if err != nil {
		t.Fatalf("read max_attempts default of %s: %v", table, err)
	}
	s.triggers = int(queryInt(t, conn, "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass($1) AND NOT tgisinternal", qualified))
	s.priorityIndex = queryInt(t, conn, `SELECT count(*) FROM pg_indexes
		WHERE schemaname = 'skipjack' AND tablename = $1 AND indexdef LIKE '%(priority%'`, table) > 0
	s.uniqueIndex = queryInt(t, conn, `SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass($1) AND indisvalid AND indisunique`,
		"skipjack."+table+"_unique_idx") == 1
	var options []string
	if err := conn.QueryRow(ctx, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass($1)", qualified).Scan(&options); err != nil {
		t.Fatalf("read storage parameters of %s: %v", table, err)
	}
	for _, o := range options {
		if table == "resize_image" && (strings.HasPrefix(o, "fillfactor=") || strings.HasPrefix(o, "autovacuum_vacuum_scale_factor=0.02")) {
			s.reloptions = append(s.reloptions, o)
		}
	}
	slices.Sort(s.reloptions)
	return s
}

// keepMigrations copies the migrations folder dir to
// $SKIPJACK_MIGRATIONS_OUT/name/migrations when that variable is set:
// scripts/test.sh lints them with squawk after the tests.
func keepMigrations(t *testing.T, dir, name string) {
	t.Helper()
	out := os.Getenv("SKIPJACK_MIGRATIONS_OUT")
	if out == "" {
		return
	}
	if err := os.CopyFS(filepath.Join(out, name, "migrations"), os.DirFS(dir)); err != nil {
		t.Fatalf("keep the migrations for squawk: %v", err)
	}
}
