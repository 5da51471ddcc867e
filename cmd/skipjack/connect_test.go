package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipjack-dev/skipjack/generator/config"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestConnectPreparesNothing runs every admin statement that stats, jobs
// and ui send on one connection of the CLI's pool and checks that the
// server connection holds no prepared statement afterwards: PgBouncer's
// transaction pooling hands a server connection to the next client, whose
// pgx then fails with `prepared statement "stmtcache_..." already exists`
// (42P05) when it prepares the same statement. A URL that asks for the
// statement cache keeps it, which shows the count would catch it.
func TestConnectPreparesNothing(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	cfg, err := config.Load(yaml)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		params   string
		prepared bool
	}{
		{"default", "", false},
		{"cache_statement asked for", "default_query_exec_mode=cache_statement", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sep := "?"
			if strings.Contains(dbURL, "?") {
				sep = "&"
			}
			u := dbURL + sep + "pool_max_conns=1"
			if tt.params != "" {
				u += "&" + tt.params
			}
			pool, err := connect(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			admins, err := queueAdmins(cfg, pool)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range admins {
				if _, err := q.Stats(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, _, err := q.Finished(t.Context(), time.Now().Add(-time.Hour)); err != nil {
					t.Fatal(err)
				}
				if _, err := q.List(t.Context(), skipjack.ListParams{State: skipjack.StatePending}); err != nil {
					t.Fatal(err)
				}
				if _, err := q.Get(t.Context(), 1); err != nil && !errors.Is(err, skipjack.ErrNotFound) {
					t.Fatal(err)
				}
				if _, err := q.Retry(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				if _, err := q.Cancel(t.Context(), 2); err != nil {
					t.Fatal(err)
				}
			}
			var n int
			if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if got := n > 0; got != tt.prepared {
				t.Errorf("%d prepared statements left on the server connection, want any: %v", n, tt.prepared)
			}
		})
	}
}

// TestExplainPooler checks the hint added to the errors a statement cache
// causes behind PgBouncer, and that other errors pass unchanged.
func TestExplainPooler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		hint bool
	}{
		{&pgconn.PgError{Code: "42P05", Message: `prepared statement "stmtcache_1" already exists`}, true},
		{fmt.Errorf("send_email: %w", &pgconn.PgError{Code: "26000", Message: `prepared statement "stmtcache_1" does not exist`}), true},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, false},
		{errors.New("boom"), false},
	}
	for _, tt := range tests {
		got := explainPooler(tt.err)
		if !errors.Is(got, tt.err) {
			t.Errorf("explainPooler(%v) = %v, which does not wrap it", tt.err, got)
		}
		if hint := strings.Contains(got.Error(), "default_query_exec_mode"); hint != tt.hint {
			t.Errorf("explainPooler(%v) = %q; hint %v, want %v", tt.err, got, hint, tt.hint)
		}
	}
}
