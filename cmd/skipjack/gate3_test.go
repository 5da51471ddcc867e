package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// The gate3 tests pin what issue 46's mutation audit found unheld in the
// CLI: the "(paused)" marker of stats, the scheduled jobs that queues
// pause counts, the wake-up that queues resume sends, and the lock_timeout
// of a generated update migration, applied behind a held lock.

// runCLI runs the CLI in-process and returns its exit status and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(args, env{stdout: &stdout, stderr: &stderr, sqlc: sqlcrun.Runner(exe)})
	return code, stdout.String(), stderr.String()
}

// TestGate3StatsMarksPausedQueue checks that skipjack stats marks a paused
// queue "(paused)" in its table, and only that queue, after skipjack
// queues pause; and that printStats marks it from the row alone.
func TestGate3StatsMarksPausedQueue(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := printStats(env{stdout: &out}, []queueStats{{Queue: "send_email", Paused: true}, {Queue: "a"}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"QUEUE                  PENDING  SCHEDULED    RUNNING  COMPLETED     FAILED  OLDEST PENDING\n" +
		"send_email (paused)          0          0          0          0          0       paused 0s\n" +
		"a                            0          0          0          0          0              0s\n"
	if out.String() != want {
		t.Errorf("printStats:\n%s\nwant:\n%s", out.String(), want)
	}

	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	if code, _, stderr := runCLI(t, "queues", "pause", "send_email", "-f", yaml, "--database-url", dbURL); code != exitOK {
		t.Fatalf("queues pause: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "stats", "-f", yaml, "--database-url", dbURL)
	if code != exitOK {
		t.Fatalf("stats: exit %d, stderr %q", code, stderr)
	}
	for line := range strings.Lines(stdout) {
		name := strings.Fields(line)[0]
		paused := strings.Contains(line, "(paused)")
		if (name == "send_email") != paused {
			t.Errorf("stats line %q: paused marker %v, want it on send_email only", strings.TrimSpace(line), paused)
		}
	}
}

// TestGate3QueuesPauseCountsScheduled checks what queues pause and resume
// say: the jobs that wait are the due and the scheduled ones (a delayed
// job, a retry's backoff), not the due ones alone.
func TestGate3QueuesPauseCountsScheduled(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml) // 2 pending send_email jobs
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), `INSERT INTO shop_jobs.send_email (payload, run_at) VALUES ('{"to": "later@example.com"}', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	steps := []struct{ verb, want string }{
		{"pause", "send_email: paused; 3 pending jobs wait, 0 running jobs finish\n"},
		{"resume", "send_email: resumed; 3 pending jobs can be claimed\n"},
	}
	for _, s := range steps {
		code, stdout, stderr := runCLI(t, "queues", s.verb, "send_email", "-f", yaml, "--database-url", dbURL)
		if code != exitOK || stdout != s.want {
			t.Errorf("queues %s: exit %d, stdout %q (stderr %q), want %q", s.verb, code, stdout, stderr, s.want)
		}
	}
}

// TestGate3QueuesResumeWakesWorkers checks that skipjack queues resume
// (the table admin the dashboard of skipjack ui runs too) notifies the
// queue's workers, as the generated Resume does: a worker that waits for
// notifications would otherwise claim the jobs only at its next poll.
func TestGate3QueuesResumeWakesWorkers(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `LISTEN "shop_jobs.send_email"`); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"pause", "resume"} {
		if code, _, stderr := runCLI(t, "queues", verb, "send_email", "-f", yaml, "--database-url", dbURL); code != exitOK {
			t.Fatalf("queues %s: exit %d, stderr %q", verb, code, stderr)
		}
	}
	// Pause's notification ("pause") comes first, then Resume's wake-up.
	var got []string
	for len(got) < 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			t.Fatalf("notifications after queues pause and resume: %q, then %v; want \"pause\" and a wake-up (\"\")", got, err)
		}
		got = append(got, n.Payload)
	}
	if got[0] != "pause" || got[1] != "" {
		t.Errorf("notifications after queues pause and resume: %q, want [\"pause\" \"\"]", got)
	}
}

// TestGate3UpdateMigrationGivesUpBehindLock applies a generated update
// migration (a new max_attempts: ALTER TABLE, which needs the table's
// ACCESS EXCLUSIVE lock) while another transaction holds a lock on the
// queue table: its lock_timeout makes every attempt give up after 100ms,
// so skipjack migrate retries a few times and fails with the lock timeout
// within seconds, instead of queueing every enqueue and claim behind its
// wait; once the lock goes, it applies.
func TestGate3UpdateMigrationGivesUpBehindLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "go.mod"), "module example.com/x\n\ngo 1.26\n")
	const v1 = "version: 1\nout: ./jobs\nmigrations:\n  dir: ./migrations\nqueues:\n  ping:\n    payload: {n: int64}\n"
	yaml := filepath.Join(dir, "skipjack.yaml")
	writeTestFile(t, yaml, v1)
	dbURL := skipjacktest.NewDatabase(t)
	for _, args := range [][]string{{"generate"}, {"migrate", "--database-url", dbURL}} {
		if code, stdout, stderr := runCLI(t, append(args, "-f", yaml)...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	writeTestFile(t, yaml, v1+"    max_attempts: 7\n")
	if code, stdout, stderr := runCLI(t, "generate", "-f", yaml); code != exitOK {
		t.Fatalf("generate: exit %d\n%s%s", code, stdout, stderr)
	}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE skipjack.ping IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(t, "migrate", "-f", yaml, "--database-url", dbURL)
		done <- result{code, stdout, stderr}
	}()
	select {
	case r := <-done:
		if r.code != exitFailure || !strings.Contains(r.stderr, "lock timeout") {
			t.Fatalf("migrate behind a held lock: exit %d, stdout %q, stderr %q; want exit 1 and the lock timeout", r.code, r.stdout, r.stderr)
		}
	case <-time.After(90 * time.Second):
		_ = tx.Rollback(context.Background()) // let the migration through, so the goroutine ends
		<-done
		t.Fatal("migrate waited behind the held lock for 90s instead of giving up (no lock_timeout)")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(t, "migrate", "-f", yaml, "--database-url", dbURL); code != exitOK || !strings.Contains(stdout, "applied 0002") {
		t.Fatalf("migrate once the lock is gone: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	var def string
	if err := pool.QueryRow(t.Context(), `SELECT column_default FROM information_schema.columns WHERE table_schema = 'skipjack' AND table_name = 'ping' AND column_name = 'max_attempts'`).Scan(&def); err != nil || def != "7" {
		t.Errorf("max_attempts default after the migration: %q (%v), want 7", def, err)
	}
}
