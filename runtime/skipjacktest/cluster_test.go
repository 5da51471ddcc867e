package skipjacktest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// connectTo opens a connection to u, closed when the test ends.
func connectTo(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// scan runs a one-row query and scans it into dest.
func scan(t *testing.T, conn *pgx.Conn, sql string, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestCluster starts a cluster of the test's own and checks what NewCluster
// promises: it listens on 127.0.0.1 on the port it reports and on its unix
// socket; Restart terminates open sessions, keeps committed data and
// returns with the server accepting connections; Stop refuses connections
// until Start.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster; skipped in -short mode")
	}
	t.Parallel()
	ctx := context.Background()
	begin := time.Now()
	c := skipjacktest.NewCluster(t)
	t.Logf("NewCluster took %v (port %d)", time.Since(begin).Round(time.Millisecond), c.Port())

	conn := connectTo(t, c.URL())
	var addr string
	var port int
	var started time.Time
	scan(t, conn, `SELECT host(inet_server_addr()), inet_server_port(), pg_postmaster_start_time()`, &addr, &port, &started)
	if addr != "127.0.0.1" || port != c.Port() {
		t.Errorf("connected to %s:%d, want 127.0.0.1:%d", addr, port, c.Port())
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}

	socket := connectTo(t, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", c.SocketDir(), c.Port()))
	var v int
	scan(t, socket, `SELECT v FROM kept`, &v)
	if v != 42 {
		t.Errorf("over the unix socket read %d, want 42", v)
	}

	begin = time.Now()
	c.Restart(t)
	t.Logf("Restart took %v", time.Since(begin).Round(time.Millisecond))
	if err := conn.Ping(ctx); err == nil {
		t.Errorf("a session opened before Restart still works, want it terminated")
	}
	after := connectTo(t, c.URL())
	var restarted time.Time
	scan(t, after, `SELECT v, pg_postmaster_start_time() FROM kept`, &v, &restarted)
	if v != 42 {
		t.Errorf("after Restart read %d, want the committed 42", v)
	}
	if !restarted.After(started) {
		t.Errorf("postmaster start time %v after Restart, want later than %v", restarted, started)
	}

	c.Stop(t)
	c.Stop(t) // a no-op
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(short, c.URL()); err == nil {
		conn.Close(ctx)
		t.Errorf("connected to a stopped cluster")
	}
	c.Start(t)
	c.Start(t) // a no-op
	scan(t, connectTo(t, c.URL()), `SELECT v FROM kept`, &v)
	if v != 42 {
		t.Errorf("after Stop and Start read %d, want the committed 42", v)
	}
}

// TestTwoClusters starts two clusters at once and checks that they are
// distinct servers: different ports, data folders and system identifiers,
// and a table created in one does not exist in the other.
func TestTwoClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters; skipped in -short mode")
	}
	t.Parallel()
	clusters := [2]*skipjacktest.Cluster{skipjacktest.NewCluster(t), skipjacktest.NewCluster(t)}
	a, b := connectTo(t, clusters[0].URL()), connectTo(t, clusters[1].URL())
	if clusters[0].Port() == clusters[1].Port() {
		t.Fatalf("both clusters on port %d", clusters[0].Port())
	}
	var dirA, dirB string
	var idA, idB int64
	scan(t, a, `SELECT current_setting('data_directory'), system_identifier FROM pg_control_system()`, &dirA, &idA)
	scan(t, b, `SELECT current_setting('data_directory'), system_identifier FROM pg_control_system()`, &dirB, &idB)
	if dirA == dirB || idA == idB {
		t.Errorf("the clusters share data folder %q / %q or system identifier %d / %d", dirA, dirB, idA, idB)
	}
	if _, err := a.Exec(context.Background(), `CREATE TABLE only_in_a (v int)`); err != nil {
		t.Fatal(err)
	}
	var inA, inB bool
	scan(t, a, `SELECT to_regclass('only_in_a') IS NOT NULL`, &inA)
	scan(t, b, `SELECT to_regclass('only_in_a') IS NOT NULL`, &inB)
	if !inA || inB {
		t.Errorf("table only_in_a exists in a: %v, in b: %v; want true, false", inA, inB)
	}
}

// TestClusterCleanup checks that a cluster is stopped and its folder
// removed when its test ends.
func TestClusterCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster; skipped in -short mode")
	}
	t.Parallel()
	var dir, u string
	t.Run("inner", func(t *testing.T) {
		c := skipjacktest.NewCluster(t)
		dir, u = c.SocketDir(), c.URL()
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster folder %s still there after its test ended (stat: %v)", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, u); err == nil {
		conn.Close(context.Background())
		t.Errorf("cluster at %s still accepts connections after its test ended", u)
	}
}
