package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// opsProject copies the shop example's skipjack.yaml and migrations, and
// nothing else, into a fresh folder: what an on-call engineer has. It
// returns the path of the copied YAML.
func opsProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "shop")
	copyFile(t, filepath.Join(src, "skipjack.yaml"), filepath.Join(dir, "skipjack.yaml"))
	ups, err := filepath.Glob(filepath.Join(src, "migrations", "*.sql"))
	if err != nil || len(ups) == 0 {
		t.Fatalf("no migrations in %s: %v", src, err)
	}
	for _, f := range ups {
		copyFile(t, f, filepath.Join(dir, "migrations", filepath.Base(f)))
	}
	return filepath.Join(dir, "skipjack.yaml")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, to, string(data))
}

// applyMigrations applies the plain-format up migrations next to yaml with
// the runtime's applier, as the generated Migrate does.
func applyMigrations(t *testing.T, pool *pgxpool.Pool, yaml, configName, schema string) {
	t.Helper()
	ups, err := filepath.Glob(filepath.Join(filepath.Dir(yaml), "migrations", "*.up.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []skipjackimpl.Migration
	for _, f := range ups {
		name := strings.TrimSuffix(filepath.Base(f), ".up.sql")
		version, err := strconv.Atoi(name[:strings.IndexByte(name, '_')])
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		up, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, skipjackimpl.Migration{Version: version, Name: name, Up: string(up)})
	}
	if err := skipjackimpl.Migrate(t.Context(), pool, skipjackimpl.MigrateParams{Config: configName, Schema: schema, Migrations: ms}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// shopDatabase returns a fresh database with the shop example's tables and
// three jobs: two pending send_email jobs (ids 1 and 2) and one failed
// resize_image job.
func shopDatabase(t *testing.T, yaml string) string {
	t.Helper()
	dbURL := skipjacktest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	applyMigrations(t, pool, yaml, "shop", "shop_jobs")
	_, err = pool.Exec(t.Context(), `
INSERT INTO shop_jobs.send_email (payload) VALUES ('{"to": "a@example.com"}'), ('{"to": "b@example.com"}');
INSERT INTO shop_jobs.resize_image (payload, state, finished_at, errors)
VALUES ('{"image_id": 7}', 'failed', now(), '[{"attempt": 3, "at": "2026-01-02T03:04:05Z", "error": "boom", "worker": "w1"}]');`)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL
}

// TestWithoutGo runs stats, jobs list and jobs show as an on-call engineer
// would: the skipjack binary, a folder holding only skipjack.yaml and its
// migrations (no go.mod, no generated code), a database URL, and no go
// command on PATH. Each must answer correctly within 10 s (a binary, not a
// compile of Go, which takes minutes), in the best of three runs (the first
// also pages in the binary, which links sqlc; other test processes load the
// machine). Not parallel, so this package's other tests do not run beside it.
func TestWithoutGo(t *testing.T) {
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	exe, err := exec.LookPath("skipjack") // testscript.Main put this test binary there
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string // substrings of stdout
	}{
		{[]string{"stats"}, []string{"send_email", "resize_image", "charge_card"}},
		{[]string{"stats", "--json"}, []string{`"queue": "send_email"`, `"pending": 2`, `"oldest_pending_seconds": `}},
		{[]string{"jobs", "list", "send_email"}, []string{"1           pending", "2           pending"}},
		{[]string{"jobs", "list", "resize_image", "--state", "failed", "--json"}, []string{`"image_id": 7`, `"error": "boom"`}},
		{[]string{"jobs", "show", "send_email", "2"}, []string{"job 2 of send_email", `"to": "b@example.com"`}},
		{[]string{"jobs", "show", "resize_image", "1", "--json"}, []string{`"state": "failed"`, `"worker": "w1"`}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			best := time.Hour
			for range 3 {
				cmd := exec.Command(exe, tt.args...)
				cmd.Dir = filepath.Dir(yaml)
				cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				start := time.Now()
				err := cmd.Run()
				best = min(best, time.Since(start))
				if err != nil {
					t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
				}
				for _, want := range tt.want {
					if !strings.Contains(stdout.String(), want) {
						t.Fatalf("stdout lacks %q:\n%s", want, stdout.String())
					}
				}
			}
			t.Logf("best of 3: %v", best)
			// A bound that separates a binary from one that compiles Go
			// (minutes) and holds on a loaded machine (load 50 was seen
			// to stretch a 200 ms command past 1 s).
			if best >= 10*time.Second {
				t.Errorf("took %v at best, want under 10s", best)
			}
		})
	}
}

// TestUIWithoutGo starts skipjack ui as a subprocess in a folder holding
// only skipjack.yaml and its migrations, with no go command on PATH, and
// reads the overview with the jobs' counts within 30 s of the start (a
// bound that separates serving at once from compiling Go, minutes, and
// holds at load 50); then
// it interrupts ui, which must stop cleanly. Not parallel, as
// TestWithoutGo.
func TestUIWithoutGo(t *testing.T) {
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	exe, err := exec.LookPath("skipjack")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "ui", "--listen", "127.0.0.1:0")
	cmd.Dir = filepath.Dir(yaml)
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("ui printed nothing; stderr:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	m := regexp.MustCompile(`^skipjack ui: serving 3 queues of shop on (http://127\.0\.0\.1:\d+/) \(read-only\); Ctrl-C stops$`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("ui's first line %q does not say where it serves", lines.Text())
	}
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(start)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", m[1], res.StatusCode, body)
	}
	for _, want := range []string{`<tr data-queue="charge_card">`, `aria-label="send_email: 2 pending">2</a>`, `aria-label="resize_image: 1 failed">1</a>`, "read-only"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	t.Logf("overview served %v after the start", took)
	if took >= 30*time.Second {
		t.Errorf("overview served %v after the start, want under 30s", took)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ui after an interrupt: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ui did not stop within 30s of an interrupt")
	}
}

// TestStatsJSONUnits checks that stats --json gives the oldest pending
// job's wait in seconds, under a name that says so, and still under the
// first, nanosecond key.
func TestStatsJSONUnits(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The oldest due job has waited 90 s.
	if _, err := pool.Exec(t.Context(), `UPDATE shop_jobs.send_email SET run_at = now() - interval '90 seconds' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := stats(options{file: yaml, dbURL: dbURL, asJSON: true}, env{stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out.String())
	}
	got, ok := rows[0]["oldest_pending_seconds"].(float64)
	if !ok || got < 90 || got > 120 {
		t.Errorf("send_email oldest_pending_seconds = %v, want about 90:\n%s", rows[0]["oldest_pending_seconds"], out.String())
	}
	// The first key, in nanoseconds, stays for the scripts that read it.
	if ns, ok := rows[0]["oldest_pending"].(float64); !ok || time.Duration(ns).Round(time.Millisecond).Seconds() != got {
		t.Errorf("send_email oldest_pending = %v ns, want the same as oldest_pending_seconds %v:\n%s", rows[0]["oldest_pending"], got, out.String())
	}
}

// TestOpsMessagesBeforeMigrate runs stats and jobs on a database the
// migrations were not applied to: each says which table is missing and
// what to run, with one prefix per layer (command, queue), not repeated.
func TestOpsMessagesBeforeMigrate(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := skipjacktest.NewDatabase(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"stats"}, `skipjack stats: send_email: table "shop_jobs"."send_email" does not exist; apply the migrations first (skipjack migrate): ERROR: relation "shop_jobs.send_email" does not exist (SQLSTATE 42P01)` + "\n"},
		{[]string{"jobs", "show", "charge_card", "7"}, `skipjack jobs show: charge_card: table "shop_jobs"."charge_card" does not exist; apply the migrations first (skipjack migrate): ERROR: relation "shop_jobs.charge_card" does not exist (SQLSTATE 42P01)` + "\n"},
		{[]string{"jobs", "retry", "resize_image", "--state", "failed"}, `skipjack jobs retry: resize_image: table "shop_jobs"."resize_image" does not exist; apply the migrations first (skipjack migrate): ERROR: relation "shop_jobs.resize_image" does not exist (SQLSTATE 42P01)` + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(append(tt.args, "-f", yaml, "--database-url", dbURL), env{stdout: &stdout, stderr: &stderr})
			if code != exitFailure {
				t.Errorf("exit status %d, want %d", code, exitFailure)
			}
			if stderr.String() != tt.want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tt.want)
			}
		})
	}
}

// TestJobsRetryCancelWithoutGo retries and cancels jobs with the CLI on
// the shop tables and checks the rows: the write paths of the admin
// queries that stats, jobs and ui run from the YAML.
func TestJobsRetryCancelWithoutGo(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	tests := []struct {
		args   []string
		stdout string
		query  string // true afterwards
	}{
		// Job 9 does not exist: nothing is retried.
		{[]string{"jobs", "retry", "resize_image", "1", "9"}, "",
			`SELECT count(*) = 1 FROM shop_jobs.resize_image WHERE id = 1 AND state = 'failed'`},
		{[]string{"jobs", "retry", "resize_image", "1"}, "resize_image: retried 1 of 1 job\n",
			`SELECT count(*) = 1 FROM shop_jobs.resize_image WHERE id = 1 AND state = 'pending' AND finished_at IS NULL`},
		{[]string{"jobs", "cancel", "send_email", "--state", "pending"}, "send_email: cancelled 2 of 2 jobs in state pending\n",
			`SELECT count(*) = 2 FROM shop_jobs.send_email WHERE state = 'failed' AND errors->-1->>'error' = 'cancelled'`},
	}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(append(tt.args, "-f", yaml, "--database-url", dbURL), env{stdout: &stdout, stderr: &stderr})
		if stdout.String() != tt.stdout {
			t.Errorf("%v: stdout %q, want %q (stderr %q)", tt.args, stdout.String(), tt.stdout, stderr.String())
		}
		if slices.Contains(tt.args, "9") {
			// Job 9 does not exist: exit 1 and say so.
			if code != exitFailure || stderr.String() != "skipjack jobs retry: resize_image: no job with id 9; nothing retried\n" {
				t.Errorf("%v: exit %d, stderr %q", tt.args, code, stderr.String())
			}
		} else if code != exitOK {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, stderr.String())
		}
		var ok bool
		if err := pool.QueryRow(t.Context(), tt.query).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%v: afterwards, %s is false", tt.args, tt.query)
		}
	}
}

// TestQueuesPauseResumeWithoutGo checks skipjack queues pause and resume:
// they need no Go toolchain, persist in the database (stats --json reports
// them), and say so when the queue is already in the state asked for.
func TestQueuesPauseResumeWithoutGo(t *testing.T) {
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	exe, err := exec.LookPath("skipjack")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args []string
		want string // a substring of stdout
	}{
		{[]string{"queues", "pause", "send_email"}, "send_email: paused; 2 pending jobs wait, 0 running jobs finish"},
		{[]string{"stats", "--json"}, `"paused": true`},
		{[]string{"queues", "pause", "send_email"}, "send_email: already paused"},
		{[]string{"queues", "resume", "send_email"}, "send_email: resumed; 2 pending jobs can be claimed"},
		{[]string{"queues", "resume", "send_email"}, "send_email: already resumed"},
	}
	for _, s := range steps {
		cmd := exec.Command(exe, s.args...)
		cmd.Dir = filepath.Dir(yaml)
		cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("skipjack %s: %v\nstderr:\n%s", strings.Join(s.args, " "), err, stderr.String())
		}
		if !strings.Contains(stdout.String(), s.want) {
			t.Fatalf("skipjack %s: stdout lacks %q:\n%s", strings.Join(s.args, " "), s.want, stdout.String())
		}
	}
	cmd := exec.Command(exe, "queues", "pause")
	cmd.Dir = filepath.Dir(yaml)
	cmd.Env = []string{"PATH=" + t.TempDir(), "DATABASE_URL=" + dbURL}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "missing QUEUE") {
		t.Errorf("queues pause without a queue: %v\n%s", err, out)
	}
}
