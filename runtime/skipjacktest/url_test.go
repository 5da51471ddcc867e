package skipjacktest_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := skipjacktest.Prefix()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Database, prefix) {
		t.Fatalf("database %q does not look like a harness database", cfg.Database)
	}
	return cfg.Database
}
