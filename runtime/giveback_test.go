package skipjack_test

import (
	"context"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestUnheldClaimGivenBack checks that a job running under a live worker
// that does not hold it does not stay running for as long as the worker
// lives. That is what a claim leaves when the server commits it after the
// worker's client gave up on it (its statement deadline passed while the
// rows were on their way, its connection broke): the rows say running
// under the worker's id, the worker never read them, and Rescue takes no
// job from a worker that keeps proving it is alive (seen in a connection
// storm). The test makes that state as the claim statement does (state,
// attempt, claim token, lease and worker of a claim by the live worker,
// on a job it was not due to claim) and waits for the job to end: run once
// with its attempt restored, or, when an operator had cancelled it, failed
// "cancelled" without running.
func TestUnheldClaimGivenBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cancelled bool
	}{
		{name: "pending again", cancelled: false},
		{name: "cancelled", cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			ctx := context.Background()
			attempts := make(chan int, 10)
			stop := start(t, slow.NewWorker(pool, func(_ context.Context, job *slow.Job) error {
				attempts <- job.Attempt
				return nil
			}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))
			defer stop()
			var worker string
			waitFor(t, 30*time.Second, "the worker's row", func() bool {
				return pool.QueryRow(ctx, `SELECT id FROM skipjack._skipjack_workers WHERE stopped_at IS NULL`).Scan(&worker) == nil
			})
			// Not due for a day, so the worker does not claim it itself.
			id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1}, skipjack.Delay(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			// What Claim writes, for the live worker (lease 3s).
			if _, err := pool.Exec(ctx, `UPDATE skipjack.slow SET state = 'running', attempt = attempt + 1, claim = claim + 1,
				lease_expires_at = now() + interval '3 seconds', worker = $2, run_at = now(), cancel_requested = $3 WHERE id = $1`,
				id, worker, tc.cancelled); err != nil {
				t.Fatal(err)
			}
			if tc.cancelled {
				waitFor(t, 60*time.Second, "the cancelled unheld job to end failed", func() bool {
					r, _ := getJob(t, pool, "slow", id)
					return r.State == "failed"
				})
				r, _ := getJob(t, pool, "slow", id)
				if n := len(r.Errors); n != 1 || r.Errors[0].Error != "cancelled" {
					t.Errorf("errors %+v, want one: cancelled", r.Errors)
				}
				select {
				case a := <-attempts:
					t.Errorf("the cancelled job ran (attempt %d)", a)
				default:
				}
			} else {
				select {
				case a := <-attempts:
					if a != 1 {
						t.Errorf("the job ran as attempt %d, want 1 (the unread claim's attempt restored)", a)
					}
				case <-time.After(60 * time.Second):
					r, _ := getJob(t, pool, "slow", id)
					t.Fatalf("the job running under the live worker without it holding it did not run within 60s (lease 3s); its row: %+v", r)
				}
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workers WHERE stopped_at IS NULL AND expires_at > now()`); n != 1 {
				t.Errorf("%d live worker rows, want 1: the job must have been given back by its live worker, not rescued from a dead one", n)
			}
		})
	}
}

// TestHeldJobWithLapsedLeaseKept checks the other side of
// TestUnheldClaimGivenBack: a job its live worker holds is never given
// back, however long its lease has lapsed (locks and a failing database
// delay renewals; liveness, not the job's lease, says the worker holds
// it). A trigger turns every renewal of the running job's lease into a
// lapsed one and counts the renewals; the handler returns after three of
// them (each heartbeat is followed by a give-back), and the job must have
// run once, its handler never cancelled.
func TestHeldJobWithLapsedLeaseKept(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
CREATE TABLE renewals (n integer NOT NULL);
INSERT INTO renewals VALUES (0);
CREATE FUNCTION keep_lapsed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.lease_expires_at := now() - interval '1 second';
	UPDATE renewals SET n = n + 1;
	RETURN NEW;
END $$;
CREATE TRIGGER keep_lapsed BEFORE UPDATE ON skipjack.slow FOR EACH ROW
WHEN (OLD.state = 'running' AND NEW.state = 'running') EXECUTE FUNCTION keep_lapsed();`); err != nil {
		t.Fatal(err)
	}
	type run struct {
		attempt int
		err     error
	}
	runs := make(chan run, 10)
	stop := start(t, slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		deadline := time.Now().Add(60 * time.Second)
		for queryInt(t, pool, `SELECT n FROM renewals`) < 3 && hctx.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		runs <- run{job.Attempt, context.Cause(hctx)}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)}))
	defer stop()
	id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-runs:
		if r.err != nil {
			t.Fatalf("the handler of the held job was cancelled: %v", r.err)
		}
		if n := queryInt(t, pool, `SELECT n FROM renewals`); n < 3 {
			t.Fatalf("the handler returned after %d renewals, want 3", n)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the job did not run")
	}
	waitFor(t, 30*time.Second, "the job to complete", func() bool {
		r, ok := getJob(t, pool, "slow", id)
		return !ok || r.State == "completed"
	})
	select {
	case r := <-runs:
		t.Errorf("the held job ran again (attempt %d): it was given back while held", r.attempt)
	default:
	}
}
