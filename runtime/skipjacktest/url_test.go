package skipjacktest_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Database, "skipjacktest_") {
		t.Fatalf("database %q does not look like a harness database", cfg.Database)
	}
	return cfg.Database
}
