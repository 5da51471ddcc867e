package skipjack_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// poisonNeighbours is how many ordinary jobs share the queue with the
// poison job.
const poisonNeighbours = 600

// poisonExit is the exit status of a child whose handler ran the poison job.
const poisonExit = 3

// runPoison is the "poison" child: it works the fast queue with 4 handlers;
// the job labelled "poison" kills the process, the others take 150ms.
func runPoison(ctx context.Context, pool *pgxpool.Pool) error {
	w := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		if job.Payload.Label == "poison" {
			os.Exit(poisonExit)
		}
		select {
		case <-time.After(150 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, skipjack.WorkerConfig{Concurrency: 4})
	return w.Run(ctx)
}

// TestPoisonJobCrashLoop runs one job whose handler kills its process
// beside 600 ordinary jobs, in two worker processes that are restarted
// whenever they exit (as a supervisor restarts a crashed pod). Each crash
// rescues every job the dead process held. The poison job must end failed
// after its rescues, and every ordinary job must complete: jobs that only
// shared a process with the poison job never fail because of it. Without
// isolation the ordinary jobs claimed beside it are rescued with it at
// every crash, claimed together with it again, and fail with it.
func TestPoisonJobCrashLoop(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	poison, err := fast.Enqueue(ctx, pool, fast.Payload{Label: "poison"})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]fast.Payload, poisonNeighbours)
	for i := range ps {
		ps[i] = fast.Payload{N: int64(i), Label: "ordinary"}
	}
	if _, err := fast.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	crashes := 0
	children := []*child{startChild(t, "poison", pool), startChild(t, "poison", pool)}
	deadline := time.Now().Add(3 * time.Minute)
	for queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE state IN ('pending', 'running')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("jobs still pending or running after 3 minutes and %d crashes", crashes)
		}
		for i, c := range children {
			select {
			case <-c.done:
			default:
				continue
			}
			var exit *exec.ExitError
			if !errors.As(c.err, &exit) || exit.ExitCode() != poisonExit {
				t.Fatalf("child exited with %v, want exit status %d; output:\n%s", c.err, poisonExit, c.output.String())
			}
			crashes++
			children[i] = startChild(t, "poison", pool)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the queue settled after %d crashes in %v", crashes, time.Since(begin).Round(time.Millisecond))

	j, ok := getJob(t, pool, "fast", poison)
	if !ok || j.State != "failed" {
		t.Errorf("poison job: %+v (found %v), want failed", j, ok)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE id <> $1`, poison); n != 0 {
		rows, err := pool.Query(ctx, `SELECT id, state, rescues FROM skipjack.fast WHERE id <> $1 ORDER BY id LIMIT 10`, poison)
		if err == nil {
			for rows.Next() {
				var id int64
				var state string
				var rescues int
				if rows.Scan(&id, &state, &rescues) == nil {
					t.Logf("ordinary job %d: %s after %d rescues", id, state, rescues)
				}
			}
			rows.Close()
		}
		t.Errorf("%d ordinary jobs did not complete (they shared processes with the poison job), want 0", n)
	}
	if crashes < 6 {
		t.Errorf("%d crashes, want at least 6 (the poison job fails at its sixth rescue)", crashes)
	}
}
