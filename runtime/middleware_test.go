package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// trail records, per job (queue and id), the steps a middleware chain and
// its handler took, in the order they took them.
type trail struct {
	mu    sync.Mutex
	steps map[string][]string
}

func newTrail() *trail { return &trail{steps: map[string][]string{}} }

func (tr *trail) add(queue string, id int64, step string) {
	tr.mu.Lock()
	k := fmt.Sprint(queue, id)
	tr.steps[k] = append(tr.steps[k], step)
	tr.mu.Unlock()
}

func (tr *trail) of(queue string, id int64) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.steps[fmt.Sprint(queue, id)])
}

// layerKey is the context key under which each recording middleware adds
// its name to the names of the layers outside it.
type layerKey struct{}

func layers(ctx context.Context) []string {
	s, _ := ctx.Value(layerKey{}).([]string)
	return s
}

// recording returns a middleware that records "name>" before next and
// "<name" after it, hands next a context that adds name to the layers, and
// checks that it sees the job it wraps and JobStart's context.
func recording(t *testing.T, tr *trail, name string) skipjack.Middleware {
	return func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
		if ctx.Value(spanKey{}) != job.ID {
			t.Errorf("middleware %s of job %d did not get JobStart's context", name, job.ID)
		}
		if job.Attempt != 1 || job.Worker == "" || job.CreatedAt.IsZero() {
			t.Errorf("middleware %s got JobInfo %+v, want attempt 1, a worker and a creation time", name, job)
		}
		tr.add(job.Queue, job.ID, name+">")
		err := next(context.WithValue(ctx, layerKey{}, append(slices.Clone(layers(ctx)), name)))
		tr.add(job.Queue, job.ID, "<"+name)
		return err
	}
}

// waitEnds waits until hooks saw n attempts end.
func waitEnds(t *testing.T, hooks *eventHooks, n int) {
	t.Helper()
	hooks.waitUntil(t, fmt.Sprintf("%d attempts to end", n), func() bool { return len(hooks.ends) >= n })
}

// TestMiddlewareOrder runs a worker with three middleware and checks that
// the first is outermost (it runs first before the handler and last after
// it), that each one's context reaches the ones inside it and the handler,
// and that the job then completes.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	tr := newTrail()
	hooks := newEventHooks()
	var handlerLayers sync.Map // job id -> layers the handler's context carried
	start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		handlerLayers.Store(job.ID, layers(ctx))
		tr.add("demo", job.ID, "handler")
		return nil
	}, skipjack.WorkerConfig{
		Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t), Hooks: hooks,
		Middleware: []skipjack.Middleware{recording(t, tr, "a"), nil, recording(t, tr, "b"), recording(t, tr, "c")},
	}))
	id, err := demo.Enqueue(t.Context(), pool, demo.Payload{Label: "order"})
	if err != nil {
		t.Fatal(err)
	}
	waitEnds(t, hooks, 1)
	want := []string{"a>", "b>", "c>", "handler", "<c", "<b", "<a"}
	if got := tr.of("demo", id); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v (first middleware outermost)", got, want)
	}
	if got, _ := handlerLayers.Load(id); fmt.Sprint(got) != "[a b c]" {
		t.Errorf("handler's context carried the layers %v, want [a b c]: each middleware's context reaches the handler", got)
	}
	hooks.mu.Lock()
	res := hooks.ends[0].res
	hooks.mu.Unlock()
	if res.Outcome != skipjack.OutcomeCompleted {
		t.Errorf("outcome %s (%v), want completed", res.Outcome, res.Err)
	}
}

// TestMiddlewareResults runs one job per way a middleware can end an
// attempt on the fast queue (max_attempts 3) and checks each job's
// outcomes, how often its handler ran, and how failed jobs are stored: a
// middleware that returns without calling next ends the job with its own
// result and the handler never runs; one that maps the handler's error
// decides the outcome; a panic in a middleware is recovered and counted
// as a failed attempt, as a handler's panic is.
func TestMiddlewareResults(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	// snoozedOnce reports whether the job with this id was snoozed
	// already, noting that it is now: per run, since job ids start at 1
	// in each run's database (go test -count=3 runs it three times).
	var snoozed sync.Map
	snoozedOnce := func(id int64) bool {
		_, again := snoozed.LoadOrStore(id, true)
		return again
	}
	cases := []struct {
		name string
		// mw is the middleware's body for this job; handler the handler's.
		mw       func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error
		handler  func(job *fast.Job) error
		outcomes []skipjack.Outcome
		runs     int    // handler runs
		message  string // the stored error of a failed job
	}{
		{
			name:     "pass through",
			outcomes: []skipjack.Outcome{skipjack.OutcomeCompleted}, runs: 1,
		},
		{
			name: "short-circuit complete (skip)",
			mw: func(context.Context, skipjack.JobInfo, func(context.Context) error) error {
				return nil
			},
			outcomes: []skipjack.Outcome{skipjack.OutcomeCompleted}, runs: 0,
		},
		{
			name: "short-circuit fail (cancel)",
			mw: func(context.Context, skipjack.JobInfo, func(context.Context) error) error {
				return skipjack.Permanent(errors.New("refused by middleware"))
			},
			outcomes: []skipjack.Outcome{skipjack.OutcomeFailed}, runs: 0, message: "refused by middleware",
		},
		{
			name: "short-circuit snooze once",
			mw: func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
				if job.Attempt == 1 && !snoozedOnce(job.ID) {
					return skipjack.Snooze(time.Millisecond)
				}
				return next(ctx)
			},
			outcomes: []skipjack.Outcome{skipjack.OutcomeSnoozed, skipjack.OutcomeCompleted}, runs: 1,
		},
		{
			name: "map error to permanent",
			mw: func(ctx context.Context, _ skipjack.JobInfo, next func(context.Context) error) error {
				err := next(ctx)
				if errors.Is(err, errBoom) {
					return skipjack.Permanent(err)
				}
				return err
			},
			handler:  func(*fast.Job) error { return errBoom },
			outcomes: []skipjack.Outcome{skipjack.OutcomeFailed}, runs: 1, message: "boom",
		},
		{
			name: "map error to nil",
			mw: func(ctx context.Context, _ skipjack.JobInfo, next func(context.Context) error) error {
				if err := next(ctx); !errors.Is(err, errBoom) {
					return err
				}
				return nil
			},
			handler:  func(*fast.Job) error { return errBoom },
			outcomes: []skipjack.Outcome{skipjack.OutcomeCompleted}, runs: 1,
		},
		{
			name: "map permanent to retry",
			mw: func(ctx context.Context, _ skipjack.JobInfo, next func(context.Context) error) error {
				err := next(ctx)
				var perm *skipjack.PermanentError
				if errors.As(err, &perm) {
					return perm.Err
				}
				return err
			},
			handler: func(job *fast.Job) error {
				if job.Attempt == 1 {
					return skipjack.Permanent(errBoom)
				}
				return nil
			},
			outcomes: []skipjack.Outcome{skipjack.OutcomeRetried, skipjack.OutcomeCompleted}, runs: 2,
		},
		{
			name: "panic in middleware",
			mw: func(context.Context, skipjack.JobInfo, func(context.Context) error) error {
				panic("middleware kaboom")
			},
			outcomes: []skipjack.Outcome{skipjack.OutcomeRetried, skipjack.OutcomeRetried, skipjack.OutcomeFailed},
			runs:     0, message: "panic: middleware kaboom",
		},
	}

	pool := newQueues(t, 8)
	hooks := newEventHooks()
	runs := newTally()
	byID := map[int64]int{} // job id -> case; filled before the worker starts
	attempts := 0
	for i, c := range cases {
		id, err := fast.Enqueue(t.Context(), pool, fast.Payload{N: int64(i), Label: c.name})
		if err != nil {
			t.Fatal(err)
		}
		byID[id] = i
		attempts += len(c.outcomes)
	}
	mw := func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
		if f := cases[byID[job.ID]].mw; f != nil {
			return f(ctx, job, next)
		}
		return next(ctx)
	}
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		runs.add(job.ID)
		if f := cases[job.Payload.N].handler; f != nil {
			return f(job)
		}
		return nil
	}, skipjack.WorkerConfig{
		Concurrency: 8, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t), Hooks: hooks,
		Middleware: []skipjack.Middleware{mw},
	}))
	waitEnds(t, hooks, attempts)

	hooks.mu.Lock()
	outcomes := map[int64][]skipjack.Outcome{}
	var panicErr *skipjack.PanicError
	for _, e := range hooks.ends {
		outcomes[e.job.ID] = append(outcomes[e.job.ID], e.res.Outcome)
		if cases[byID[e.job.ID]].name == "panic in middleware" && panicErr == nil {
			errors.As(e.res.Err, &panicErr)
		}
	}
	hooks.mu.Unlock()
	for id, i := range byID {
		c := cases[i]
		if got := outcomes[id]; !slices.Equal(got, c.outcomes) {
			t.Errorf("%s: outcomes %v, want %v", c.name, got, c.outcomes)
		}
		if got := runs.count(id); got != c.runs {
			t.Errorf("%s: handler ran %d times, want %d", c.name, got, c.runs)
		}
		var row jobRow
		var found bool
		switch last := c.outcomes[len(c.outcomes)-1]; {
		case last == skipjack.OutcomeCompleted:
			waitFor(t, 30*time.Second, c.name+" to be acknowledged (deleted at ack)", func() bool {
				_, found = getJob(t, pool, "fast", id)
				return !found
			})
		case last == skipjack.OutcomeFailed:
			waitFor(t, 30*time.Second, c.name+" to be stored failed", func() bool {
				row, found = getJob(t, pool, "fast", id)
				return found && row.State == "failed"
			})
			if n := len(row.Errors); n == 0 || !strings.Contains(row.Errors[n-1].Error, c.message) {
				t.Errorf("%s: stored errors %+v, want the last to say %q", c.name, row.Errors, c.message)
			}
		}
	}
	if panicErr == nil || panicErr.Value != "middleware kaboom" || len(panicErr.Stack) == 0 {
		t.Errorf("the panicking middleware's attempt ended with %v, want a *PanicError with its value and stack", panicErr)
	}
}

// TestRunGroupMiddleware runs two workers of different queues in RunGroup
// with a group middleware and a worker middleware on one of them, and
// checks that the group's wraps every worker's jobs, outside the worker's
// own, and sees each job's queue.
func TestRunGroupMiddleware(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	tr := newTrail()
	hooks := newEventHooks()
	var queues sync.Map // queue -> id of the job the group middleware saw
	group := func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
		queues.Store(job.Queue, job.ID)
		return recording(t, tr, "group")(ctx, job, next)
	}
	cfg := func(mws ...skipjack.Middleware) skipjack.WorkerConfig {
		return skipjack.WorkerConfig{Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t), Hooks: hooks, Middleware: mws}
	}
	var demoLayers, fastLayers sync.Map
	demoWorker := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		demoLayers.Store(job.ID, layers(ctx))
		tr.add("demo", job.ID, "handler")
		return nil
	}, cfg(recording(t, tr, "worker")))
	fastWorker := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		fastLayers.Store(job.ID, layers(ctx))
		tr.add("fast", job.ID, "handler")
		return nil
	}, cfg())
	startGroup(t, skipjack.GroupConfig{Concurrency: 4, Middleware: []skipjack.Middleware{group}}, demoWorker, fastWorker)

	demoID, err := demo.Enqueue(t.Context(), pool, demo.Payload{Label: "group"})
	if err != nil {
		t.Fatal(err)
	}
	fastID, err := fast.Enqueue(t.Context(), pool, fast.Payload{Label: "group"})
	if err != nil {
		t.Fatal(err)
	}
	waitEnds(t, hooks, 2)
	if got, want := tr.of("demo", demoID), []string{"group>", "worker>", "handler", "<worker", "<group"}; !slices.Equal(got, want) {
		t.Errorf("demo job's steps %v, want %v (the group's middleware outside the worker's)", got, want)
	}
	if got, want := tr.of("fast", fastID), []string{"group>", "handler", "<group"}; !slices.Equal(got, want) {
		t.Errorf("fast job's steps %v, want %v", got, want)
	}
	for q, id := range map[string]int64{"demo": demoID, "fast": fastID} {
		if seen, _ := queues.Load(q); seen != id {
			t.Errorf("group middleware saw %s job %v, want %d", q, seen, id)
		}
	}
	if got, _ := demoLayers.Load(demoID); fmt.Sprint(got) != "[group worker]" {
		t.Errorf("demo handler's context carried %v, want [group worker]", got)
	}
	if got, _ := fastLayers.Load(fastID); fmt.Sprint(got) != "[group]" {
		t.Errorf("fast handler's context carried %v, want [group]", got)
	}
}
