package tableadmin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// TestCancelAndPauseNotifyWorkers checks that the CLI's and the
// dashboard's Cancel and Pause tell the queue's workers at once, as the
// generated ones do: a notification on the queue's channel with the
// payload the runtime's listener hands to a worker's operator loop
// ("cancel", "pause"). Without it, a worker learned of a cancel only at
// its next heartbeat, and of a pause never for the jobs it had prefetched.
func TestCancelAndPauseNotifyWorkers(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(filepath.Join("..", "..", "..", "..", "golden", "unique", "skipjack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := generator.QueueSQLs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var digest generator.QueueSQL
	for _, q := range qs {
		if q.Name == "send_digest" {
			digest = q
		}
	}
	if digest.Channel == "" {
		t.Fatal("send_digest has no channel; want its notify channel")
	}
	pool := skipjacktest.NewPool(t)
	up, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "golden", "unique", "expected", "migrations", "0001_skipjack_init.up.sql.golden"))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, pool, string(up))
	exec(t, pool, `INSERT INTO skipjack.send_digest (payload, state, attempt, lease_expires_at, worker) VALUES
		('{"user_id": 1, "week": "w1"}', 'running', 1, now() + interval '1 minute', 'w')`)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{digest.Channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	a, err := tableadmin.New(digest, pool)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification after %s: %v", what, err)
		}
		return n.Payload
	}
	if n, err := a.Cancel(t.Context(), 1); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	if got := next("Cancel"); got != "cancel" {
		t.Errorf("Cancel notified %q, want \"cancel\"", got)
	}
	if err := a.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := next("Pause"); got != "pause" {
		t.Errorf("Pause notified %q, want \"pause\"", got)
	}
}
