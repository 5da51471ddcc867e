// Package skipjacktest gives tests a real, isolated PostgreSQL database.
//
// It finds a server the same way everywhere: $DATABASE_URL if set, else a
// server on 127.0.0.1:5432 as user postgres, else a throwaway cluster that it
// starts itself with initdb and pg_ctl found on PATH or under
// /usr/lib/postgresql/*/bin (listening only on a unix socket in a temporary
// folder, and stopped when the test binary exits). Each call to NewDatabase
// creates a fresh database that is dropped when the test ends, so tests that
// run in parallel never see each other's rows.
//
// A typical test:
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := skipjacktest.NewPool(t)
//		// use pool; the database is dropped after the test
//	}
//
// Call Main from TestMain to stop a throwaway cluster as soon as the tests
// finish; without it the cluster still stops, shortly after the test binary
// exits.
//
// NewCluster starts a cluster of a test's own instead (on 127.0.0.1 on a
// free port), which the test may restart or stop, or run beside others:
//
//	c := skipjacktest.NewCluster(t)
//	pool, err := pgxpool.New(ctx, c.URL())
//	// ...
//	c.Restart(t) // every session is terminated; returns once it accepts connections again
//
// For tests of code that uses queues, typed helpers work with any generated
// queue package: RequireEnqueued, RequireNotEnqueued and Jobs check what was
// enqueued (inside the test's transaction too) with the queue's List, and
// RunJob runs a handler on one job synchronously through the worker's own
// encode/decode, timeout, panic and outcome rules, with the queue's Spec.
package skipjacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the server tried when $DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// howToGetOne is appended to every "no server" error.
const howToGetOne = "set DATABASE_URL to a PostgreSQL server, start one on 127.0.0.1:5432 " +
	"(user postgres, trust auth), or install the PostgreSQL server binaries " +
	"(initdb, pg_ctl; e.g. apt-get install postgresql) so a throwaway cluster can be started"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
	cluster    *localCluster
)

// ServerURL returns the connection URL of the PostgreSQL server tests use,
// finding or starting it on first use. The URL names the server's
// maintenance database; use NewDatabase for a database of your own.
func ServerURL() (string, error) {
	serverOnce.Do(func() { serverURL, serverErr = findServer() })
	return serverURL, serverErr
}

// Main runs the tests of a package and then stops the throwaway cluster, if
// one was started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the throwaway cluster if this process started one. It is safe
// to call more than once and when no cluster was started.
func Stop() {
	if cluster != nil {
		cluster.stop()
	}
}

// NewDatabase creates an empty database for the test and returns its URL.
// Its name starts with Prefix (default skipjacktest_). The database is
// dropped (with FORCE, closing leftover connections) when the test and its
// subtests have finished.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u, drop, err := CreateDatabase(ctx, "")
	if err != nil {
		t.Fatalf("skipjacktest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Errorf("skipjacktest: %v", err)
		}
	})
	return u
}

// NewPool creates a fresh database for the test and returns a pool connected
// to it, closed when the test ends (before the database is dropped).
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewPoolConfig(t, nil)
}

// NewPoolConfig is NewPool with a hook that may adjust the pool's
// configuration (for example MaxConns) before the pool is created.
func NewPoolConfig(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("skipjacktest: parse %s: %v", dbURL, err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("skipjacktest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func adminExec(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// withDatabase returns base with its database replaced by name. It handles
// both URL and keyword/value connection strings.
func withDatabase(base, name string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse server URL: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return base + " dbname=" + name, nil
}

func findServer() (string, error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		if err := ping(u); err != nil {
			return "", fmt.Errorf("DATABASE_URL is set but the server does not answer: %w", err)
		}
		return u, nil
	}
	// SKIPJACKTEST_NO_DEFAULT=1 skips the default server; the harness's own
	// tests use it to exercise the throwaway cluster.
	if os.Getenv("SKIPJACKTEST_NO_DEFAULT") == "" && ping(DefaultURL) == nil {
		return DefaultURL, nil
	}
	c, err := startSharedCluster()
	if err != nil {
		return "", fmt.Errorf("no PostgreSQL server found and none could be started (%v); %s", err, howToGetOne)
	}
	cluster = c
	return c.url, nil
}

func ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}
