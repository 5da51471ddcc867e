package skipjacktest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestRunJobMiddleware checks that RunJob runs the WorkerConfig's
// middleware around the handler as a worker does: in order, first
// outermost, with their contexts reaching the handler; and that what a
// middleware returns is the attempt's result, whether it short-circuits,
// maps the handler's error or panics.
func TestRunJobMiddleware(t *testing.T) {
	t.Parallel()
	type ctxKey struct{}
	errBoom := errors.New("boom")
	var steps []string
	step := func(name string) skipjack.Middleware {
		return func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
			if job.Queue != "fast" || job.Attempt != 1 || job.MaxAttempts != 3 {
				t.Errorf("middleware %s got %+v, want queue fast, attempt 1 of 3", name, job)
			}
			steps = append(steps, name+">")
			err := next(context.WithValue(ctx, ctxKey{}, name))
			steps = append(steps, "<"+name)
			return err
		}
	}
	tests := []struct {
		name    string
		mws     []skipjack.Middleware
		handle  func(ctx context.Context, job *fast.Job) error
		outcome skipjack.Outcome
		steps   []string
		panics  bool
	}{{
		name: "order and context",
		mws:  []skipjack.Middleware{step("a"), step("b")},
		handle: func(ctx context.Context, job *fast.Job) error {
			if ctx.Value(ctxKey{}) != "b" {
				t.Errorf("handler's context carried %v, want the innermost middleware's value b", ctx.Value(ctxKey{}))
			}
			steps = append(steps, "handler")
			return nil
		},
		outcome: skipjack.OutcomeCompleted,
		steps:   []string{"a>", "b>", "handler", "<b", "<a"},
	}, {
		name: "short-circuit",
		mws: []skipjack.Middleware{step("a"), func(context.Context, skipjack.JobInfo, func(context.Context) error) error {
			return skipjack.Permanent(errors.New("refused"))
		}, step("never")},
		outcome: skipjack.OutcomeFailed,
		steps:   []string{"a>", "<a"},
	}, {
		name: "error mapped to a snooze",
		mws: []skipjack.Middleware{func(ctx context.Context, _ skipjack.JobInfo, next func(context.Context) error) error {
			if err := next(ctx); errors.Is(err, errBoom) {
				return skipjack.Snooze(0)
			}
			return nil
		}},
		handle:  func(context.Context, *fast.Job) error { steps = append(steps, "handler"); return errBoom },
		outcome: skipjack.OutcomeSnoozed,
		steps:   []string{"handler"},
	}, {
		name: "panic in middleware",
		mws: []skipjack.Middleware{step("a"), func(context.Context, skipjack.JobInfo, func(context.Context) error) error {
			panic("middleware kaboom")
		}},
		outcome: skipjack.OutcomeRetried,
		steps:   []string{"a>"}, // a's after step never runs: the panic unwinds through it
		panics:  true,
	}}
	for _, tc := range tests {
		steps = nil
		handle := tc.handle
		if handle == nil {
			handle = func(context.Context, *fast.Job) error { steps = append(steps, "handler"); return nil }
		}
		res := skipjacktest.RunJob(t, fast.Spec, handle, fast.Payload{Label: tc.name},
			skipjacktest.WorkerConfig(skipjack.WorkerConfig{Middleware: tc.mws}))
		if res.Outcome != tc.outcome {
			t.Errorf("%s: outcome %s (%v), want %s", tc.name, res.Outcome, res.Err, tc.outcome)
		}
		if !slices.Equal(steps, tc.steps) {
			t.Errorf("%s: steps %v, want %v", tc.name, steps, tc.steps)
		}
		if got := res.Panic != nil && res.Panic.Value == "middleware kaboom"; got != tc.panics {
			t.Errorf("%s: Result.Panic = %v, want a panic: %v", tc.name, res.Panic, tc.panics)
		}
	}
}
