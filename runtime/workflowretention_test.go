package skipjack_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/diamond"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/wfarm"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/wfedge"
)

// TestWorkflowRetention checks what retention does to workflows, with the
// test schema's diamond (a on wf_edge, b and c on wf_arm, d on wf_edge),
// whose queues keep completed jobs for 1s:
//
//   - a live workflow never needs a pruned job: b and c run only after a's
//     job was pruned, and the workflow still completes;
//   - a retried step whose cancelled downstream step's job was pruned does
//     not leave that step waiting for a job that no longer exists: it stays
//     cancelled and the workflow ends failed;
//   - the maintenance deletes finished workflows once their last step
//     finished longer than WorkflowRetention ago, with their step rows,
//     and never a workflow with a step not finished, however old.
func TestWorkflowRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newQueues(t, 0)
	var failB, holdB atomic.Int64 // the workflow whose b fails for good, or is held
	release := make(chan struct{})
	aPruned := func(ctx context.Context, wf int64) error {
		rec, err := diamond.Get(ctx, pool, wf)
		if err != nil {
			return err
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, err := wfedge.Get(ctx, pool, rec.Steps["a"].JobID)
			if errors.Is(err, skipjack.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return skipjack.Permanent(errors.New("a's job was not pruned within 30s"))
			}
		}
	}
	cfg := skipjack.WorkerConfig{Concurrency: 4, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)}
	start(t, wfedge.NewWorker(pool, func(ctx context.Context, job *wfedge.Job) error { return nil }, cfg))
	start(t, wfarm.NewWorker(pool, func(ctx context.Context, job *wfarm.Job) error {
		if err := aPruned(ctx, job.WorkflowID); err != nil {
			return err
		}
		if job.Payload.Step != "b" {
			return nil
		}
		switch job.WorkflowID {
		case failB.Load():
			return skipjack.Permanent(errors.New("b failed"))
		case holdB.Load():
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, cfg))
	steps := diamond.Steps{A: wfedge.Payload{Step: "a"}, B: wfarm.Payload{Step: "b"}, C: wfarm.Payload{Step: "c"}, D: wfedge.Payload{Step: "d"}}
	wait := func(id int64, what string, cond func(*skipjack.WorkflowRecord) bool) *skipjack.WorkflowRecord {
		t.Helper()
		var rec *skipjack.WorkflowRecord
		waitFor(t, 60*time.Second, what, func() bool {
			var err error
			if rec, err = diamond.Get(ctx, pool, id); err != nil {
				t.Fatal(err)
			}
			return cond(rec)
		})
		return rec
	}

	// A live workflow whose finished step's job is pruned completes.
	done, err := diamond.Start(ctx, pool, steps)
	if err != nil {
		t.Fatal(err)
	}
	rec := wait(done, "workflow 1 to complete after a's job was pruned", func(r *skipjack.WorkflowRecord) bool { return r.State != skipjack.WorkflowRunning })
	if rec.State != skipjack.WorkflowCompleted {
		t.Fatalf("workflow 1 ended %s, want completed: %+v", rec.State, rec.Steps)
	}

	// A retry of b after d's cancelled job was pruned leaves d cancelled.
	failed, err := diamond.Start(ctx, pool, steps)
	if err != nil {
		t.Fatal(err)
	}
	failB.Store(failed)
	rec = wait(failed, "workflow 2 to fail", func(r *skipjack.WorkflowRecord) bool { return r.State != skipjack.WorkflowRunning })
	if rec.State != skipjack.WorkflowFailed || rec.Steps["d"].Error != "cancelled" {
		t.Fatalf("workflow 2 ended %s, want failed with d cancelled: %+v", rec.State, rec.Steps)
	}
	waitFor(t, 30*time.Second, "d's cancelled job to be pruned", func() bool {
		_, err := wfedge.Get(ctx, pool, rec.Steps["d"].JobID)
		return errors.Is(err, skipjack.ErrNotFound)
	})
	failB.Store(0)
	if n, err := wfarm.Retry(ctx, pool, rec.Steps["b"].JobID); err != nil || n != 1 {
		t.Fatalf("retry b: %d, %v", n, err)
	}
	rec = wait(failed, "b to complete when retried", func(r *skipjack.WorkflowRecord) bool { return r.Steps["b"].State == skipjack.StateCompleted })
	if rec.State != skipjack.WorkflowFailed || rec.Steps["d"].State != skipjack.StateFailed || rec.Steps["d"].Error != "cancelled" {
		t.Fatalf("after retrying b, workflow 2 is %s, want failed with d cancelled (its job is gone): %+v", rec.State, rec.Steps)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workflow_steps WHERE workflow_id = $1 AND state IN ('waiting', 'ready')`, failed); n != 0 {
		t.Fatalf("workflow 2 has %d steps waiting or ready after its retry, want 0", n)
	}

	// Finished workflows are deleted after WorkflowRetention; a running one
	// is kept, however long ago its other steps finished.
	live, err := diamond.Start(ctx, pool, steps)
	if err != nil {
		t.Fatal(err)
	}
	holdB.Store(live)
	wait(live, "workflow 3 to have a and c completed", func(r *skipjack.WorkflowRecord) bool {
		return r.Steps["a"].State == skipjack.StateCompleted && r.Steps["c"].State == skipjack.StateCompleted
	})
	if _, err := pool.Exec(ctx, `UPDATE skipjack._skipjack_workflow_steps SET finished_at = finished_at - interval '8 days' WHERE finished_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "workflows 1 and 2 to be pruned", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workflows WHERE id IN ($1, $2)`, done, failed) == 0
	})
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workflow_steps WHERE workflow_id IN ($1, $2)`, done, failed); n != 0 {
		t.Errorf("%d step rows of the pruned workflows remain", n)
	}
	for _, id := range []int64{done, failed} {
		if _, err := diamond.Get(ctx, pool, id); !errors.Is(err, skipjack.ErrWorkflowNotFound) {
			t.Errorf("Get of pruned workflow %d: %v, want ErrWorkflowNotFound", id, err)
		}
	}
	rec, err = diamond.Get(ctx, pool, live)
	if err != nil {
		t.Fatalf("the running workflow 3 was pruned: %v", err)
	}
	if rec.State != skipjack.WorkflowRunning {
		t.Fatalf("workflow 3 is %s, want running", rec.State)
	}
	close(release)
	rec = wait(live, "workflow 3 to complete", func(r *skipjack.WorkflowRecord) bool { return r.State != skipjack.WorkflowRunning })
	if rec.State != skipjack.WorkflowCompleted {
		t.Fatalf("workflow 3 ended %s, want completed: %+v", rec.State, rec.Steps)
	}
}
