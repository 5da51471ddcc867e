package skipjack_test

import (
	"context"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/kept"
)

// TestStatsCounts plants jobs of every state in the kept queue and checks
// Stats (what skipjack stats prints and the dashboard shows) and
// Admin.Finished against counts computed from them: Pending counts only
// due pending jobs, Scheduled pending jobs with run_at ahead, Running
// claimed ones, Completed and Failed the retained rows; OldestPending is
// how long the oldest due job has waited, by the database's clock; and
// Finished counts the rows that finished since a given time.
//
// Kills stats-oldest-pending-is-newest and stats-scheduled-counted-pending.
func TestStatsCounts(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	oldest := micro(time.Now().Add(-time.Hour))
	const insert = `INSERT INTO skipjack.kept (payload, state, attempt, claim, run_at, lease_expires_at, worker, finished_at)
		VALUES ('{}', $1, $2, $2, $3, $4, $5, $6)`
	inAMinute, minutesAgo := time.Now().Add(time.Minute), func(m int) time.Time { return time.Now().Add(-time.Duration(m) * time.Minute) }
	plant := []struct {
		n            int
		state        string
		runAt, lease time.Time
		finished     *time.Time
		attempt      int
		worker       *string
	}{
		{3, "pending", oldest, time.Time{}, nil, 0, nil},
		{2, "pending", minutesAgo(1), time.Time{}, nil, 0, nil},
		{4, "pending", inAMinute, time.Time{}, nil, 0, nil},
		{1, "running", minutesAgo(1), inAMinute, nil, 1, new("w")},
		{6, "completed", minutesAgo(20), time.Time{}, new(minutesAgo(10)), 1, nil},
		{7, "completed", minutesAgo(200), time.Time{}, new(minutesAgo(120)), 1, nil},
		{8, "failed", minutesAgo(20), time.Time{}, new(minutesAgo(10)), 1, nil},
		{9, "failed", minutesAgo(200), time.Time{}, new(minutesAgo(120)), 1, nil},
	}
	for _, p := range plant {
		var lease *time.Time
		if !p.lease.IsZero() {
			lease = &p.lease
		}
		for range p.n {
			if _, err := pool.Exec(ctx, insert, p.state, p.attempt, p.runAt, lease, p.worker, p.finished); err != nil {
				t.Fatalf("insert %s job: %v", p.state, err)
			}
		}
	}
	before := dbNow(t, pool)
	s, err := kept.Stats(ctx, pool)
	after := dbNow(t, pool)
	if err != nil {
		t.Fatal(err)
	}
	got := s
	got.OldestPending = 0
	if want := (skipjack.Stats{Pending: 3 + 2, Scheduled: 4, Running: 1, Completed: 6 + 7, Failed: 8 + 9}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if lo, hi := before.Sub(oldest), after.Sub(oldest); s.OldestPending < lo || s.OldestPending > hi {
		t.Errorf("OldestPending = %v, want the age of the oldest due job, within [%v, %v]", s.OldestPending, lo, hi)
	}
	completed, failed, err := kept.Admin(pool).Finished(ctx, before.Add(-time.Hour))
	if err != nil || completed != 6 || failed != 8 {
		t.Errorf("Finished in the last hour: (%d, %d, %v), want (6, 8, nil)", completed, failed, err)
	}
}
