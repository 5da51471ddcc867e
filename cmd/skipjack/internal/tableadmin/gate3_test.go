package tableadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// TestGate3ResumeWakesWorkers checks that the table admin's Resume (what
// skipjack queues resume and the dashboard of skipjack ui run) clears the
// pause and wakes the queue's workers with a notification on its channel,
// as the generated Resume does, on a queue with limits and a serial key;
// a second Resume, of a queue not paused, sends none.
func TestGate3ResumeWakesWorkers(t *testing.T) {
	t.Parallel()
	q, pool := goldenQueue(t, "flow", "sync_account")
	if q.Channel == "" {
		t.Fatal("sync_account has no channel; want its notify channel")
	}
	a, err := tableadmin.New(q, pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{q.Channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := a.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("no notification after Resume: %v", err)
	}
	if n.Payload != "" {
		t.Errorf("Resume notified %q, want a wake-up (\"\")", n.Payload)
	}
	if st, err := a.Stats(t.Context()); err != nil || st.Paused {
		t.Errorf("Stats after Resume = %+v, %v; want not paused", st, err)
	}
}
