package skipjacktest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// TestIsolation proves that two parallel tests each get their own database:
// both create the same table and insert different rows, and each sees only
// its own row.
func TestIsolation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		value int
	}{{"first", 1}, {"second", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := skipjacktest.NewPool(t)
			if _, err := pool.Exec(ctx, "CREATE TABLE shared_name (v int)"); err != nil {
				t.Fatalf("create table: %v", err)
			}
			if _, err := pool.Exec(ctx, "INSERT INTO shared_name VALUES ($1)", tc.value); err != nil {
				t.Fatalf("insert: %v", err)
			}
			var count, got int
			if err := pool.QueryRow(ctx, "SELECT count(*), max(v) FROM shared_name").Scan(&count, &got); err != nil {
				t.Fatalf("select: %v", err)
			}
			if count != 1 || got != tc.value {
				t.Errorf("saw %d rows with max %d, want exactly our own row %d", count, got, tc.value)
			}
		})
	}
}

// TestDatabaseDropped checks that a test's database is gone after cleanup.
func TestDatabaseDropped(t *testing.T) {
	t.Parallel()
	var dbURL string
	t.Run("inner", func(t *testing.T) { dbURL = skipjacktest.NewDatabase(t) })
	ctx := context.Background()
	pool := skipjacktest.NewPool(t)
	var exists bool
	name := dbName(t, dbURL)
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// TestThrowawayCluster starts the harness in a child process with no
// DATABASE_URL and an unreachable default, so it must start its own cluster.
func TestThrowawayCluster(t *testing.T) {
	if os.Getenv("SKIPJACKTEST_CHILD") == "1" {
		return
	}
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster; skipped in -short mode")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildCluster$", "-test.v")
	cmd.Env = append(os.Environ(), "SKIPJACKTEST_CHILD=1", "SKIPJACKTEST_NO_DEFAULT=1", "DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with a throwaway cluster failed: %v\n%s", err, out)
	}
}

// TestChildCluster runs only inside TestThrowawayCluster's child process.
func TestChildCluster(t *testing.T) {
	if os.Getenv("SKIPJACKTEST_CHILD") != "1" {
		t.Skip("runs only as TestThrowawayCluster's child")
	}
	pool := skipjacktest.NewPool(t)
	var socketDir string
	if err := pool.QueryRow(context.Background(), "SHOW unix_socket_directories").Scan(&socketDir); err != nil {
		t.Fatal(err)
	}
	if socketDir == "/var/run/postgresql" {
		t.Errorf("connected to the system server, want a throwaway cluster")
	}
}
