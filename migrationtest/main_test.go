package migrationtest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

var (
	// skipjackBin is the CLI, built once by TestMain.
	skipjackBin string
	// runtimeDir is the repository's runtime module, which every test
	// project replaces github.com/skipjack-dev/skipjack/runtime with.
	runtimeDir string
)

// commandTimeout bounds every subprocess, so a hang fails the test instead
// of holding CI until the go test timeout.
const commandTimeout = 3 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "skipjack-migrationtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if runtimeDir, err = filepath.Abs("../runtime"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	skipjackBin = filepath.Join(tmp, "skipjack")
	start := time.Now()
	build := exec.Command("go", "build", "-o", skipjackBin, "./cmd/skipjack")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the skipjack CLI: %v\n%s", err, out)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("built the skipjack CLI in %v\n", time.Since(start).Round(time.Millisecond))
	}
	return skipjacktest.Main(m)
}

// project is a temporary Go module with a skipjack.yaml that requires the
// repository's runtime.
type project struct {
	t   *testing.T
	dir string
}

// newProject creates the module with the given skipjack.yaml.
func newProject(t *testing.T, yaml string) *project {
	t.Helper()
	p := &project{t: t, dir: t.TempDir()}
	p.write("go.mod", fmt.Sprintf(`module example.com/migrationtest

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/skipjack-dev/skipjack/runtime v0.0.0
)

replace github.com/skipjack-dev/skipjack/runtime => %s
`, runtimeDir))
	p.write("skipjack.yaml", yaml)
	return p
}

// write writes a file of the project.
func (p *project) write(name, data string) {
	p.t.Helper()
	full := filepath.Join(p.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// result is how a CLI run ended.
type result struct {
	code           int
	stdout, stderr string
}

// skipjack runs the CLI in the project's folder; it is safe to call from
// several goroutines. The go command it starts
// for migrate and stats may complete go.sum (GOFLAGS=-mod=mod) and never
// sees the repository's go.work.
func (p *project) skipjack(env []string, args ...string) result {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, skipjackBin, args...)
	cmd.Dir = p.dir
	cmd.Env = projectEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		p.t.Errorf("skipjack %s: still running after %v", strings.Join(args, " "), commandTimeout)
		r.code = -1
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		// Errorf, not Fatalf: skipjack may run on a goroutine of its own.
		p.t.Errorf("skipjack %s: %v", strings.Join(args, " "), err)
		r.code = -1
	}
	return r
}

// in returns p bound to the (sub)test t, for helpers that fail t.
func (p *project) in(t *testing.T) *project {
	c := *p
	c.t = t
	return &c
}

// ok runs the CLI and fails the test unless it exits 0.
func (p *project) ok(args ...string) result {
	p.t.Helper()
	r := p.skipjack(nil, args...)
	if r.code != 0 {
		p.t.Fatalf("skipjack %s: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// generate runs skipjack generate with flags and completes go.mod and
// go.sum, so that later go builds in the project (by stats and jobs) never
// write them, even when several run at once.
func (p *project) generate(flags ...string) {
	p.t.Helper()
	p.ok(append([]string{"generate"}, flags...)...)
	goCommand(p.t, p.dir, nil, "mod", "tidy")
}

// projectEnv is the environment of every command a test runs in a
// generated project, plus env: no go.work, go.mod and go.sum completed as
// needed, and no DATABASE_URL from the test's own environment.
func projectEnv(env ...string) []string {
	return append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "DATABASE_URL="), env...)
}

// connect opens a connection to dbURL, closed when the test ends.
func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// queryInt runs a query that returns one integer.
func queryInt(t *testing.T, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// execSQL runs a statement.
func execSQL(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
