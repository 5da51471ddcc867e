package tableadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// TestCancelAndPauseNotifyWorkers checks that the CLI's and the
// dashboard's Cancel and Pause tell the queue's workers at once, as the
// generated ones do: a notification on the queue's channel with the
// payload the runtime's listener hands to a worker's operator loop
// ("cancel", "pause"). Without it, a worker learned of a cancel only at
// its next heartbeat, and of a pause never for the jobs it had prefetched.
func TestCancelAndPauseNotifyWorkers(t *testing.T) {
	t.Parallel()
	digest, pool := goldenQueue(t, "unique", "send_digest")
	if digest.Channel == "" {
		t.Fatal("send_digest has no channel; want its notify channel")
	}
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
