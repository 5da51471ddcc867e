package skipjack_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// The "sigterm" child of TestSigtermUnderLoad: a demo worker whose
// handlers behave by label. Shorter than the default ShutdownTimeout (20s)
// so the test stays short; the budget below scales with it.
const (
	sigtermShutdownTimeout = 3 * time.Second
	sigtermConcurrency     = 16
	sigtermWorkerID        = "sigterm-child"
	// sigtermStubbornFor is how long a "stubborn" handler ignores its
	// cancelled context: well within the shutdown grace (1s here).
	sigtermStubbornFor = 300 * time.Millisecond
	// finalFlushTimeout is the runtime's bound on the release and the last
	// flush at shutdown (RELIABILITY.md, "Shutdown budget").
	finalFlushTimeout = 4 * time.Second
)

// sigtermBudget is the documented bound on how long Run takes to return
// after its context is cancelled: ShutdownTimeout + grace (a quarter of
// ShutdownTimeout, 1s to 5s) + the final flush.
func sigtermBudget(timeout time.Duration) time.Duration {
	return timeout + min(5*time.Second, max(timeout/4, time.Second)) + finalFlushTimeout
}

// runSigterm is the "sigterm" child. Handlers, by the job's label:
// "short" work 100ms, "medium" 2.5s (less than ShutdownTimeout), "long"
// until their context is cancelled, and "stubborn" until their context is
// cancelled and then sigtermStubbornFor more, ignoring it. It writes one
// line per handler run and the times of its cancellation and of Run's
// return to the file in childOutEnv.
func runSigterm(ctx context.Context, pool *pgxpool.Pool) error {
	var mu sync.Mutex
	var b strings.Builder
	handle := func(hctx context.Context, job *demo.Job) error {
		began := time.Now()
		var err error
		wait := func(d time.Duration) {
			select {
			case <-time.After(d):
			case <-hctx.Done():
				err = context.Cause(hctx)
			}
		}
		switch job.Payload.Label {
		case "short":
			wait(100 * time.Millisecond)
		case "medium":
			wait(2500 * time.Millisecond)
		case "long":
			wait(time.Hour)
		case "stubborn":
			wait(time.Hour)
			time.Sleep(sigtermStubbornFor)
		default:
			err = skipjack.Permanent(fmt.Errorf("unknown label %q", job.Payload.Label))
		}
		outcome := "ok"
		if err != nil {
			outcome = "err"
		}
		mu.Lock()
		fmt.Fprintf(&b, "job %d %s %d %d %s\n", job.ID, job.Payload.Label, began.UnixNano(), time.Now().UnixNano(), outcome)
		mu.Unlock()
		return err
	}
	w := demo.NewWorker(pool, handle, skipjack.WorkerConfig{
		Concurrency:     sigtermConcurrency,
		ShutdownTimeout: sigtermShutdownTimeout,
		WorkerID:        sigtermWorkerID,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	cancelled := make(chan time.Time, 1)
	go func() {
		<-ctx.Done()
		cancelled <- time.Now()
	}()
	runErr := w.Run(ctx)
	returned := time.Now()
	var at time.Time
	select {
	case at = <-cancelled:
	default: // Run returned on its own: the parent reports it
	}
	mu.Lock()
	fmt.Fprintf(&b, "run %d %d\n", at.UnixNano(), returned.UnixNano())
	out := b.String()
	mu.Unlock()
	if err := os.WriteFile(os.Getenv(childOutEnv), []byte(out), 0o644); err != nil {
		return err
	}
	return runErr
}

// execution is one handler run.
type execution struct {
	id         int64
	label      string
	start, end time.Time
	ok         bool
	attempt    int // the attempt the handler saw (second worker only)
	errors     int // entries in the job's error history (second worker only)
}

// TestSigtermUnderLoad sends SIGTERM to a worker process busy with short
// jobs, prefetched jobs, jobs that finish within ShutdownTimeout
// ("medium"), jobs that run until cancelled ("long") and jobs that ignore
// their cancelled context briefly ("stubborn"), while a second worker (a
// rolling deploy's replacement) starts at once. The child must exit within
// the documented budget, ShutdownTimeout + grace + final flush (and within
// Kubernetes' 30s), leave no job leased and none failed, and not cancel a
// handler before ShutdownTimeout. Every job must be completed exactly once
// in all: the interrupted and released ones by the second worker, as
// attempt 1 with no error recorded (a release restores the attempt), and
// never while the child still ran them.
func TestSigtermUnderLoad(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const shorts = 2000
	labels := map[string]int{"long": 4, "stubborn": 2, "medium": 2}
	var ps []demo.Payload
	for _, l := range []string{"long", "stubborn", "medium"} { // claimed first: lowest ids
		for range labels[l] {
			ps = append(ps, demo.Payload{Label: l})
		}
	}
	for i := range shorts {
		ps = append(ps, demo.Payload{N: int64(i), Label: "short"})
	}
	total := len(ps)
	if n, err := demo.EnqueueMany(ctx, pool, ps); err != nil || n != int64(total) {
		t.Fatalf("EnqueueMany = %d, %v; want %d, nil", n, err, total)
	}
	labelOf := map[int64]string{}
	rows, err := pool.Query(ctx, `SELECT id, payload->>'label' FROM skipjack.demo`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var l string
		if err := rows.Scan(&id, &l); err != nil {
			t.Fatal(err)
		}
		labelOf[id] = l
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	out := filepath.Join(t.TempDir(), "sigterm.out")
	// A race-enabled binary sleeps a second at exit (the race detector's
	// atexit_sleep_ms) unless told not to: that is not the worker's time.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	c := startChild(t, "sigterm", pool, childOutEnv+"="+out, "GORACE="+gorace)
	// Busy: the long and stubborn jobs run, short ones have completed, and
	// the child holds all it may (Concurrency running, as many
	// prefetched): it just claimed, so most of its prefetched jobs are
	// still waiting when SIGTERM arrives.
	var running int64
	waitFor(t, 30*time.Second, "the child to run the long and stubborn jobs, complete 50 short ones and hold 2 × Concurrency jobs", func() bool {
		if queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running' AND payload->>'label' IN ('long', 'stubborn')`) != 6 ||
			queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) > int64(total-50) {
			return false
		}
		running = queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`)
		return running == 2*sigtermConcurrency
	})

	// SIGTERM, and the replacement worker starts at once.
	var mu sync.Mutex
	var second []execution
	term := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	stop := start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		e := execution{id: job.ID, label: job.Payload.Label, start: time.Now(), ok: true, attempt: job.Attempt, errors: len(job.Errors)}
		e.end = time.Now()
		mu.Lock()
		second = append(second, e)
		mu.Unlock()
		return nil
	}, skipjack.WorkerConfig{Concurrency: sigtermConcurrency, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))

	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not exit within 30s of SIGTERM (Kubernetes' default grace period)")
	}
	exited := time.Since(term)
	if err := c.wait(); err != nil {
		t.Fatalf("child exited with %v; output:\n%s", err, c.output.String())
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running' AND worker LIKE $1 || '/%'`, sigtermWorkerID); n != 0 {
		t.Errorf("%d jobs are still leased by the child after it exited, want 0 (released or acknowledged)", n)
	}
	waitFor(t, 30*time.Second, "the second worker to complete the rest", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	stop()

	// The child's record.
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("read child output: %v", err)
	}
	var first []execution
	var cancelledAt, returnedAt time.Time
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "run":
			cancelledAt, returnedAt = unixNano(t, f[1]), unixNano(t, f[2])
		case len(f) == 6 && f[0] == "job":
			id, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			first = append(first, execution{id: id, label: f[2], start: unixNano(t, f[3]), end: unixNano(t, f[4]), ok: f[5] == "ok"})
		default:
			t.Fatalf("child output line %q", line)
		}
	}
	if cancelledAt.Before(term) {
		t.Fatalf("the child's Run context was cancelled at %v, before SIGTERM at %v", cancelledAt, term)
	}
	runTook := returnedAt.Sub(cancelledAt)
	budget := sigtermBudget(sigtermShutdownTimeout)
	if runTook > budget {
		t.Errorf("Run returned %v after SIGTERM cancelled its context, over the documented budget %v (ShutdownTimeout + grace + final flush)", runTook, budget)
	}

	// Every job completed exactly once, across both workers; the second
	// worker never ran a job while the child still did; jobs the child
	// interrupted came back unchanged.
	completed := map[int64]int{}
	byID := map[int64][]execution{}
	interrupted := map[string]int{}
	for _, e := range first {
		byID[e.id] = append(byID[e.id], e)
		if e.ok {
			completed[e.id]++
			continue
		}
		interrupted[e.label]++
		switch e.label {
		case "long", "stubborn":
			if e.end.Before(term.Add(sigtermShutdownTimeout)) {
				t.Errorf("%s job %d was cancelled %v after SIGTERM, before ShutdownTimeout (%v)", e.label, e.id, e.end.Sub(term), sigtermShutdownTimeout)
			}
		default:
			t.Errorf("%s job %d did not finish in the child; it should have within ShutdownTimeout", e.label, e.id)
		}
	}
	for _, e := range second {
		completed[e.id]++
		for _, prev := range byID[e.id] {
			if e.start.Before(prev.end) {
				t.Errorf("job %d started in the second worker at %v while the child ran it until %v", e.id, e.start.Sub(term), prev.end.Sub(term))
			}
		}
		if e.attempt != 1 || e.errors != 0 {
			t.Errorf("%s job %d ran in the second worker as attempt %d with %d errors, want attempt 1 and none (a release restores the attempt and records nothing)",
				e.label, e.id, e.attempt, e.errors)
		}
	}
	var twice []int64
	for id := range labelOf {
		if completed[id] != 1 {
			twice = append(twice, id)
		}
	}
	sort.Slice(twice, func(i, j int) bool { return twice[i] < twice[j] })
	if len(twice) > 0 {
		t.Errorf("%d jobs did not complete exactly once (e.g. %v)", len(twice), twice[:min(len(twice), 10)])
	}
	if interrupted["long"] != labels["long"] || interrupted["stubborn"] != labels["stubborn"] {
		t.Errorf("the child interrupted %d long and %d stubborn jobs, want %d and %d", interrupted["long"], interrupted["stubborn"], labels["long"], labels["stubborn"])
	}

	childDone := 0
	for _, e := range first {
		if e.ok {
			childDone++
		}
	}
	released := 0
	if m := regexp.MustCompile(`released prefetched jobs.* jobs=(\d+)`).FindStringSubmatch(c.output.String()); m != nil {
		released, _ = strconv.Atoi(m[1])
	}
	if released == 0 {
		t.Errorf("the child released no prefetched job at SIGTERM; the test did not exercise their release (or they were kept leased)")
	}
	t.Logf("SIGTERM with %d jobs running or prefetched in the child (%d handlers): %d prefetched released, %d completed by the child, %d by the second worker",
		running, sigtermConcurrency, released, childDone, len(second))
	t.Logf("SIGTERM reached Run's context after %v; Run returned %v later; the process exited %v after SIGTERM; budget for Run %v (ShutdownTimeout %v + grace %v + final flush %v)",
		cancelledAt.Sub(term).Round(time.Millisecond), runTook.Round(time.Millisecond), exited.Round(time.Millisecond),
		budget, sigtermShutdownTimeout, budget-sigtermShutdownTimeout-finalFlushTimeout, finalFlushTimeout)
}

func unixNano(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, n)
}
