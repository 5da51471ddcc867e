package skipjack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/trim"
)

// TestRetentionBoundaries runs a worker of the trim queue (completed jobs
// retained for 1s, failed ones for 168h) over rows planted by SQL, with a
// trigger that records every deleted row and the now() of the statement
// that deleted it. The verdict never depends on when the pruner happens to
// run:
//   - every pruned completed row was older than its retention when the
//     prune statement ran (deleted_at - finished_at > 1s), for rows that
//     finish one after another over ten seconds, so some prune runs find
//     each of them young;
//   - failed rows 169h old are pruned, and the same statement kept the
//     failed rows 167h old (inside retention);
//   - pending and running rows, however old, are never pruned.
//
// Kills prune-completed-sign-error, prune-failed-with-completed-retention
// and prune-completed-with-failed-retention.
func TestRetentionBoundaries(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	setup := []string{
		`CREATE TABLE pruned (id bigint, state text, finished_at timestamptz, deleted_at timestamptz)`,
		`CREATE FUNCTION record_prune() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO pruned VALUES (OLD.id, OLD.state, OLD.finished_at, now());
			RETURN OLD;
		END $$`,
		`CREATE TRIGGER record_prune AFTER DELETE ON skipjack.trim FOR EACH ROW EXECUTE FUNCTION record_prune()`,
	}
	for _, s := range setup {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	insert := func(n int, cols, values string) {
		t.Helper()
		_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO skipjack.trim (payload, created_at, %s) VALUES ('{"n": %d}', now() - interval '400 hours', %s)`, cols, n, values))
		if err != nil {
			t.Fatalf("insert n=%d: %v", n, err)
		}
	}
	const completed = 45 // finishing every 250ms from 1s ago to 10s ahead
	for k := range completed {
		insert(100+k, `state, attempt, finished_at`, fmt.Sprintf(`'completed', 1, now() + interval '%d milliseconds'`, (k-4)*250))
	}
	for n := range 3 {
		insert(10+n, `state, attempt, finished_at`, `'failed', 1, now() - interval '169 hours'`) // expired
		insert(20+n, `state, attempt, finished_at`, `'failed', 1, now() - interval '167 hours'`) // retained
	}
	insert(30, `run_at`, `now() + interval '1 hour'`) // scheduled, created 400h ago
	insert(31, `state, attempt, claim, lease_expires_at, worker`, `'running', 1, 1, now() + interval '1 hour', 'w'`)
	insert(32, `state, attempt, claim, lease_expires_at, worker, finished_at`, `'running', 1, 1, now() + interval '1 hour', 'w', now() - interval '400 hours'`)

	start(t, trim.NewWorker(pool, func(context.Context, *trim.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))
	waitFor(t, 40*time.Second, "the expired rows to be pruned", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pruned`) >= completed+3
	})

	rows, err := pool.Query(ctx, `SELECT id, state, finished_at, deleted_at FROM pruned ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	young := 0
	for rows.Next() {
		var id int64
		var state string
		var finished, deleted time.Time
		if err := rows.Scan(&id, &state, &finished, &deleted); err != nil {
			t.Fatal(err)
		}
		retention := map[string]time.Duration{skipjack.StateCompleted: time.Second, skipjack.StateFailed: 168 * time.Hour}[state]
		if age := deleted.Sub(finished); retention == 0 || age <= retention {
			t.Errorf("%s job %d pruned %v after it finished, want more than its retention (%v)", state, id, age, retention)
			young++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if young > 0 {
		t.Errorf("%d rows pruned inside their retention", young)
	}
	left := map[int64]bool{}
	for _, r := range readRows(t, pool, "trim") {
		left[r.N] = true
	}
	for _, n := range []int64{20, 21, 22, 30, 31, 32} {
		if !left[n] {
			t.Errorf("job n=%d was pruned, want it kept", n)
		}
	}
	if len(left) != 6 {
		t.Errorf("jobs left: %v, want n = 20, 21, 22 (failed inside retention), 30, 31, 32 (pending and running)", left)
	}
}
