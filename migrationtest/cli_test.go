package migrationtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// twoQueues is the config of the migrate and stats tests.
const twoQueues = `version: 1
name: shop
out: ./internal/jobs
queues:
  send_email:
    payload: {to: string}
  resize_image:
    payload: {image_id: int64}
    retention: {completed: 1h}
`

// TestMigrateCommand runs skipjack migrate on fresh databases, with the URL
// from the flag and from $DATABASE_URL, again on a migrated database (which
// changes nothing and keeps queued jobs), and three times at once on one
// database (the advisory lock lets one apply and the others find nothing to
// do). Exactly one run names the migration it applied.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	p := newProject(t, twoQueues)
	p.generate()
	tests := []struct {
		name     string
		parallel int // migrate commands at once
		env      bool
	}{
		{name: "flag", parallel: 1},
		{name: "DATABASE_URL", parallel: 1, env: true},
		{name: "three at once", parallel: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := p.in(t)
			dbURL := skipjacktest.NewDatabase(t)
			migrate := func() result {
				if tt.env {
					return p.skipjack([]string{"DATABASE_URL=" + dbURL}, "migrate")
				}
				return p.skipjack(nil, "migrate", "--database-url", dbURL)
			}
			results := make([]result, tt.parallel)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = migrate() })
			}
			wg.Wait()
			// The run that applies names the migration, then counts it; the
			// others say there was nothing to do, and only they say "up to
			// date".
			appliedOut := regexp.MustCompile(`^skipjack migrate: applied 0001_skipjack_init\nskipjack migrate: 1 migration applied to shop \(schema skipjack\) in \S+\n$`)
			upToDate := regexp.MustCompile(`^skipjack migrate: shop is up to date \(schema skipjack\), nothing to apply \(\S+\)\n$`)
			named := 0
			for _, r := range results {
				if r.code != 0 || !appliedOut.MatchString(r.stdout) && !upToDate.MatchString(r.stdout) {
					t.Fatalf("migrate: exit status %d, stdout %q, stderr %q; want 0 and either %q or %q", r.code, r.stdout, r.stderr, appliedOut, upToDate)
				}
				if appliedOut.MatchString(r.stdout) {
					named++
				}
			}
			if named != 1 {
				t.Errorf("%d of %d migrate runs applied the migration, want exactly 1", named, tt.parallel)
			}

			conn := connect(t, dbURL)
			for _, table := range []string{"skipjack.send_email", "skipjack.resize_image"} {
				if n := queryInt(t, conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", table); n != 1 {
					t.Errorf("after migrate, table %s does not exist", table)
				}
			}
			execSQL(t, conn, `INSERT INTO skipjack.send_email (payload) VALUES ('{"to": "a@example.com"}')`)
			before := queryInt(t, conn, "SELECT count(*) FROM pg_class WHERE relnamespace = 'skipjack'::regnamespace")

			if r := migrate(); r.code != 0 || !upToDate.MatchString(r.stdout) {
				t.Fatalf("second migrate: exit status %d, stdout %q, stderr %q; want 0 and no migration applied", r.code, r.stdout, r.stderr)
			}
			if after := queryInt(t, conn, "SELECT count(*) FROM pg_class WHERE relnamespace = 'skipjack'::regnamespace"); after != before {
				t.Errorf("second migrate changed the schema: %d relations before, %d after", before, after)
			}
			if n := queryInt(t, conn, `SELECT count(*) FROM skipjack.send_email WHERE payload->>'to' = 'a@example.com'`); n != 1 {
				t.Errorf("after the second migrate, %d queued jobs, want 1", n)
			}
		})
	}
}

// TestStatsCommand runs skipjack stats, as a table and as JSON, on a
// database with jobs in every countable state, and on a database that was
// never migrated.
func TestStatsCommand(t *testing.T) {
	t.Parallel()
	p := newProject(t, twoQueues)
	p.generate()
	dbURL := skipjacktest.NewDatabase(t)
	p.ok("migrate", "--database-url", dbURL)
	conn := connect(t, dbURL)
	execSQL(t, conn, `INSERT INTO skipjack.send_email (payload, run_at) VALUES
		('{"to": "due1"}', now()), ('{"to": "due2"}', now()), ('{"to": "later"}', now() + interval '1 hour'),
		('{"to": "done"}', now()), ('{"to": "broken"}', now())`)
	execSQL(t, conn, `UPDATE skipjack.send_email SET state = 'completed', finished_at = now() WHERE payload->>'to' = 'done'`)
	execSQL(t, conn, `UPDATE skipjack.send_email SET state = 'failed', finished_at = now() WHERE payload->>'to' = 'broken'`)
	execSQL(t, conn, `INSERT INTO skipjack.resize_image (payload, run_at) VALUES ('{"image_id": 7}', now() - interval '90 seconds')`)

	type counts struct {
		Queue                                          string
		Pending, Scheduled, Running, Completed, Failed int64
	}
	want := []counts{
		{Queue: "send_email", Pending: 2, Scheduled: 1, Completed: 1, Failed: 1},
		{Queue: "resize_image", Pending: 1},
	}

	t.Run("json", func(t *testing.T) {
		p := p.in(t)
		r := p.ok("stats", "--json", "--database-url", dbURL)
		var got []struct {
			counts
			OldestPending time.Duration `json:"oldest_pending"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("stats --json printed no JSON array (%v):\n%s", err, r.stdout)
		}
		if len(got) != len(want) {
			t.Fatalf("stats --json: %d queues, want %d:\n%s", len(got), len(want), r.stdout)
		}
		for i := range want {
			if got[i].counts != want[i] {
				t.Errorf("stats --json queue %d: got %+v, want %+v", i, got[i].counts, want[i])
			}
		}
		if old := got[1].OldestPending; old < 90*time.Second || old > 10*time.Minute {
			t.Errorf("resize_image oldest_pending = %v, want about 90s", old)
		}
	})

	t.Run("table", func(t *testing.T) {
		p := p.in(t)
		r := p.skipjack([]string{"DATABASE_URL=" + dbURL}, "stats")
		if r.code != 0 {
			t.Fatalf("stats: exit status %d\n%s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		wantHeader := []string{"QUEUE", "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "OLDEST", "PENDING"}
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != strings.Join(wantHeader, " ") {
			t.Fatalf("stats printed:\n%s\nwant a header and 2 queue lines", r.stdout)
		}
		for i, w := range want {
			f := strings.Fields(lines[i+1])
			if len(f) != 7 {
				t.Fatalf("stats line %d: %q, want 7 columns", i+1, lines[i+1])
			}
			got := strings.Join(f[:6], " ")
			wantLine := fmt.Sprintf("%s %d %d %d %d %d", w.Queue, w.Pending, w.Scheduled, w.Running, w.Completed, w.Failed)
			if got != wantLine {
				t.Errorf("stats line %d: %q, want %q followed by the oldest pending age", i+1, lines[i+1], wantLine)
			}
		}
	})

	t.Run("unmigrated database", func(t *testing.T) {
		p := p.in(t)
		r := p.skipjack(nil, "stats", "--database-url", skipjacktest.NewDatabase(t))
		if r.code != 1 || !strings.Contains(r.stderr, "skipjack stats: send_email:") || !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("stats on an unmigrated database: exit status %d, stderr %q; want 1 and the missing table", r.code, r.stderr)
		}
	})
}
