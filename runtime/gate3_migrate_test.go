package skipjack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestGate3RepairsInvalidPlainIndex checks the migration applier's repair
// of a failed concurrent build for a plain (not unique) index, as
// TestApplyLiveUnits does for a unique one: a build that failed part way
// left an invalid index, which CREATE INDEX CONCURRENTLY IF NOT EXISTS
// alone would keep (and "succeed"); the applier drops it and builds it
// again. And a build that fails now leaves no invalid index behind.
func TestGate3RepairsInvalidPlainIndex(t *testing.T) {
	t.Parallel()
	const (
		table   = `CREATE TABLE jobs.a (x int); INSERT INTO jobs.a SELECT g FROM generate_series(1, 1000) g;`
		noTx    = skipjackimpl.NoTransactionMarker + " (test)\n"
		failing = `CREATE INDEX CONCURRENTLY IF NOT EXISTS "a_p" ON "jobs"."a" ((1 / (x - 5)));` // division by zero at x = 5
		valid   = `SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass('jobs.a_p') AND indisvalid`
		anyIdx  = `SELECT count(*) FROM pg_class WHERE oid = to_regclass('jobs.a_p')`
	)
	tests := []struct {
		name    string
		setup   string
		up      string
		wantErr string
		checks  map[string]int64
	}{
		{name: "invalid index of a failed build is rebuilt",
			setup:  `CREATE INDEX CONCURRENTLY a_p ON jobs.a ((1 / (x - 5)))`,
			up:     noTx + `CREATE INDEX CONCURRENTLY IF NOT EXISTS "a_p" ON "jobs"."a" (x);`,
			checks: map[string]int64{valid: 1, anyIdx: 1}},
		{name: "failed build leaves no invalid index", up: noTx + failing, wantErr: "division by zero",
			checks: map[string]int64{anyIdx: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := skipjacktest.NewPool(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ms := []skipjackimpl.Migration{{Version: 1, Name: "0001_table", Up: table}, {Version: 2, Name: "0002_index", Up: tc.up}}
			if _, err := skipjackimpl.Apply(ctx, pool, skipjackimpl.MigrateParams{Config: "plain", Schema: "jobs", Migrations: ms[:1]}); err != nil {
				t.Fatal(err)
			}
			if tc.setup != "" {
				if _, err := pool.Exec(ctx, tc.setup); err == nil {
					t.Fatal("the setup's build succeeded; want it to fail and leave an invalid index")
				}
				if n := queryInt(t, pool, valid); n != 0 || queryInt(t, pool, anyIdx) != 1 {
					t.Fatal("the setup's failed build left no invalid index")
				}
			}
			_, err := skipjackimpl.Apply(ctx, pool, skipjackimpl.MigrateParams{Config: "plain", Schema: "jobs", Migrations: ms})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Apply = %v, want an error with %q", err, tc.wantErr)
			}
			for sql, want := range tc.checks {
				if got := queryInt(t, pool, sql); got != want {
					t.Errorf("%s = %d, want %d", sql, got, want)
				}
			}
		})
	}
}
