package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStatsThroughPgBouncer runs skipjack stats and jobs list several
// times in a row through PgBouncer in transaction pooling with one server
// connection, so every run gets the connection the previous one used: a
// CLI that prepared named statements fails there on its second run with
// `prepared statement "stmtcache_..." already exists` (42P05). A URL that
// asks for pgx's statement cache shows that failure, with the hint.
func TestStatsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	bouncer := startPgBouncer(t, dbURL)
	exe, err := exec.LookPath("skipjack")
	if err != nil {
		t.Fatal(err)
	}
	run := func(dbURL string, args ...string) (string, error) {
		cmd := exec.Command(exe, append(args, "--database-url", dbURL)...)
		cmd.Dir = filepath.Dir(yaml)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for i := range 3 {
		for _, args := range [][]string{{"stats"}, {"jobs", "list", "send_email"}} {
			if out, err := run(bouncer, args...); err != nil {
				t.Fatalf("run %d of %v through PgBouncer: %v\n%s", i+1, args, err, out)
			}
		}
	}

	cached := bouncer + "&default_query_exec_mode=cache_statement"
	var out string
	for range 2 {
		if out, err = run(cached, "stats"); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("stats with the statement cache worked twice through PgBouncer; the test cannot tell the modes apart")
	}
	if !strings.Contains(out, "42P05") || !strings.Contains(out, "drop default_query_exec_mode") {
		t.Errorf("stats with the statement cache through PgBouncer failed without the hint:\n%s", out)
	}
}

// startPgBouncer starts PgBouncer in transaction pooling with a single
// server connection in front of dbURL's server, stops it at cleanup, and
// returns dbURL routed through it. It skips the test when PgBouncer is not
// installed (.ci/run installs it).
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian's place, outside a user's PATH
		if _, err := os.Stat(bin); err != nil {
			t.Skip("pgbouncer is not installed (apt-get install pgbouncer)")
		}
	}
	server, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "skipjack-cli-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // PgBouncer may run as postgres
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	writeTestFile(t, filepath.Join(dir, "users.txt"), fmt.Sprintf("%q \"\"\n", server.User))
	target := fmt.Sprintf("host=%s port=%d", server.Host, server.Port)
	if server.Password != "" {
		target += " password=" + server.Password
	}
	writeTestFile(t, filepath.Join(dir, "pgbouncer.ini"), fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 1
max_client_conn = 100
server_reset_query =
ignore_startup_parameters = extra_float_digits
`, target, port, filepath.Join(dir, "users.txt")))
	var args []string
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skipf("pgbouncer refuses root and there is no postgres user: %v", err)
		}
		args = append(args, "-u", "postgres")
	}
	cmd := exec.Command(bin, append(args, filepath.Join(dir, "pgbouncer.ini"))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	u := url.URL{
		Scheme: "postgres", User: url.User(server.User),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/" + server.Database,
		RawQuery: "sslmode=disable",
	}
	routed := u.String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, routed+"&default_query_exec_mode=simple_protocol")
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.Background())
		}
		cancel()
		if err == nil {
			return routed
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited at start:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not answer within 10s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeTestFile writes data to name, creating its folder.
func writeTestFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
