package tableadmin_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// TestRetryUniqueQueue runs Retry on the unique queue of golden/unique,
// whose query names its ids parameter twice: of three failed jobs sharing
// a key while a pending job holds it, none is retried; once that job
// completed, only the first of them is, and the key stays unique.
func TestRetryUniqueQueue(t *testing.T) {
	t.Parallel()
	digest, pool := goldenQueue(t, "unique", "send_digest")
	exec(t, pool, `INSERT INTO skipjack.send_digest (payload, state, finished_at) VALUES
		('{"user_id": 1, "week": "w1"}', 'failed', now()),
		('{"user_id": 1, "week": "w1", "note": "again"}', 'failed', now()),
		('{"user_id": 1, "week": "w1", "note": "third"}', 'failed', now());
		INSERT INTO skipjack.send_digest (payload) VALUES ('{"user_id": 1, "week": "w1"}')`)
	a, err := tableadmin.New(digest, pool)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.Retry(t.Context(), 1, 2, 3); err != nil || n != 0 {
		t.Fatalf("Retry while job 4 holds the key: %d, %v; want 0", n, err)
	}
	exec(t, pool, `UPDATE skipjack.send_digest SET state = 'completed', finished_at = now() WHERE id = 4`)
	if n, err := a.Retry(t.Context(), 1, 2, 3); err != nil || n != 1 {
		t.Fatalf("Retry once the key is free: %d, %v; want 1", n, err)
	}
	r, err := a.Get(t.Context(), 1)
	if err != nil || r.State != "pending" {
		t.Fatalf("job 1 after Retry: %+v, %v; want pending", r, err)
	}
	s, err := a.Stats(t.Context())
	if err != nil || s.Pending != 1 || s.Failed != 2 {
		t.Errorf("stats after Retry: %+v, %v; want 1 pending, 2 failed", s, err)
	}
}

// goldenQueue returns the queue named queue of the golden case goldenCase,
// and a pool on a fresh database holding the case's first migration.
func goldenQueue(t *testing.T, goldenCase, queue string) (generator.QueueSQL, *pgxpool.Pool) {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "..", "..", "..", "golden", goldenCase, "skipjack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := generator.QueueSQLs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(qs, func(q generator.QueueSQL) bool { return q.Name == queue })
	if i < 0 {
		t.Fatalf("golden/%s declares no queue %s", goldenCase, queue)
	}
	pool := skipjacktest.NewPool(t)
	up, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "golden", goldenCase, "expected", "migrations", "0001_skipjack_init.up.sql.golden"))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, pool, string(up))
	return qs[i], pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}
