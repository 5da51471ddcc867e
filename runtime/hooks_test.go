package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// eventHooks records every event, base and optional, and signals each one.
type eventHooks struct {
	mu      sync.Mutex
	done    int // JobDone calls
	claimed int // jobs reported by Claimed
	starts  []skipjack.JobInfo
	ends    []jobEnd
	claims  []skipjack.ClaimInfo
	acks    []skipjack.AckInfo
	changed chan struct{}
}

type jobEnd struct {
	job skipjack.JobInfo
	res skipjack.AttemptResult
	// spanned says the context carried the value JobStart put in it.
	spanned bool
}

// spanKey is the context key under which eventHooks.JobStart stores the
// job's id, standing in for a trace span.
type spanKey struct{}

func newEventHooks() *eventHooks { return &eventHooks{changed: make(chan struct{}, 1)} }

func (h *eventHooks) update(f func()) {
	h.mu.Lock()
	f()
	h.mu.Unlock()
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *eventHooks) JobDone(string, int64, int, time.Duration, error) { h.update(func() { h.done++ }) }
func (h *eventHooks) Claimed(_ string, n int, _ time.Duration)         { h.update(func() { h.claimed += n }) }

func (h *eventHooks) JobStart(ctx context.Context, job skipjack.JobInfo) context.Context {
	h.update(func() { h.starts = append(h.starts, job) })
	return context.WithValue(ctx, spanKey{}, job.ID)
}

func (h *eventHooks) JobEnd(ctx context.Context, job skipjack.JobInfo, res skipjack.AttemptResult) {
	spanned := ctx.Value(spanKey{}) == job.ID
	h.update(func() { h.ends = append(h.ends, jobEnd{job: job, res: res, spanned: spanned}) })
}

func (h *eventHooks) ClaimDone(c skipjack.ClaimInfo) {
	h.update(func() { h.claims = append(h.claims, c) })
}
func (h *eventHooks) AckDone(a skipjack.AckInfo) { h.update(func() { h.acks = append(h.acks, a) }) }

// waitUntil waits for events until cond (called with h.mu held) holds.
func (h *eventHooks) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.changed:
		case <-timeout:
			h.mu.Lock()
			ended := make([]string, 0, len(h.ends))
			for _, e := range h.ends {
				ended = append(ended, fmt.Sprintf("%d:%s", e.job.ID, e.res.Outcome))
			}
			h.mu.Unlock()
			t.Fatalf("timed out waiting for %s; attempts ended (job:outcome): %v", what, ended)
		}
	}
}

// TestHooksReportEveryEvent runs one job per kind of handler result on the
// fast queue (max_attempts 3, backoff 10ms..50ms) with hooks implementing
// every optional interface, and checks what each hook saw: the outcome of
// every attempt with its delay, the JobStart context reaching the handler
// and JobEnd, claims and acknowledgements adding up to the attempts, and
// the base hooks still called.
func TestHooksReportEveryEvent(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	hooks := newEventHooks()
	var mismatched sync.Map // labels whose handler did not see the JobStart context
	var snoozed sync.Map    // ids of jobs that snoozed once
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		if ctx.Value(spanKey{}) != job.ID {
			mismatched.Store(job.Payload.Label, true)
		}
		switch job.Payload.Label {
		case "retry":
			return errors.New("boom")
		case "snooze":
			if _, again := snoozed.LoadOrStore(job.ID, true); !again {
				return skipjack.Snooze(time.Millisecond)
			}
			return nil
		case "permanent":
			return skipjack.Permanent(errors.New("bad input"))
		case "panic":
			panic("kaboom")
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t), Hooks: hooks}))

	ids := map[string]int64{}
	for _, label := range []string{"ok", "retry", "snooze", "permanent", "panic"} {
		id, err := fast.Enqueue(t.Context(), pool, fast.Payload{Label: label})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ids[label] = id
	}

	// 1 ok + 3 retry + 2 snooze + 1 permanent + 3 panic.
	const attempts = 10
	hooks.waitUntil(t, "every attempt to be acknowledged", func() bool {
		matched := 0
		for _, a := range hooks.acks {
			matched += a.Matched
		}
		return len(hooks.ends) == attempts && matched == attempts
	})

	byID := map[int64][]jobEnd{}
	for _, e := range hooks.ends {
		byID[e.job.ID] = append(byID[e.job.ID], e)
		if !e.spanned {
			t.Errorf("JobEnd of job %d attempt %d did not get JobStart's context", e.job.ID, e.job.Attempt)
		}
		if e.job.Queue != "fast" || e.job.MaxAttempts != 3 || e.job.Worker == "" || e.job.CreatedAt.IsZero() {
			t.Errorf("JobInfo = %+v, want queue fast, max attempts 3, a worker and a creation time", e.job)
		}
	}
	mismatched.Range(func(k, _ any) bool {
		t.Errorf("handler of %q did not get JobStart's context", k)
		return true
	})
	want := map[string][]skipjack.Outcome{
		"ok":        {skipjack.OutcomeCompleted},
		"retry":     {skipjack.OutcomeRetried, skipjack.OutcomeRetried, skipjack.OutcomeFailed},
		"snooze":    {skipjack.OutcomeSnoozed, skipjack.OutcomeCompleted},
		"permanent": {skipjack.OutcomeFailed},
		"panic":     {skipjack.OutcomeRetried, skipjack.OutcomeRetried, skipjack.OutcomeFailed},
	}
	for label, outcomes := range want {
		ends := byID[ids[label]]
		var got []skipjack.Outcome
		for _, e := range ends {
			got = append(got, e.res.Outcome)
		}
		if fmt.Sprint(got) != fmt.Sprint(outcomes) {
			t.Errorf("%s: outcomes %v, want %v", label, got, outcomes)
			continue
		}
		for _, e := range ends {
			switch e.res.Outcome {
			case skipjack.OutcomeRetried:
				if e.res.Delay < 10*time.Millisecond || e.res.Delay > 50*time.Millisecond {
					t.Errorf("%s attempt %d: retry delay %v, want within the queue's 10ms..50ms", label, e.job.Attempt, e.res.Delay)
				}
			case skipjack.OutcomeSnoozed:
				if e.res.Delay != 50*time.Millisecond {
					t.Errorf("%s: snooze delay %v, want Snooze(1ms) clamped to the 50ms poll interval", label, e.res.Delay)
				}
			case skipjack.OutcomeCompleted:
				if e.res.Err != nil {
					t.Errorf("%s: completed with error %v", label, e.res.Err)
				}
			default:
				if e.res.Delay != 0 || e.res.Err == nil {
					t.Errorf("%s attempt %d: %+v, want an error and no delay", label, e.job.Attempt, e.res)
				}
			}
		}
	}
	var pe *skipjack.PanicError
	if ends := byID[ids["panic"]]; len(ends) == 0 || !errors.As(ends[0].res.Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Errorf("panic attempt's error is not a *PanicError with value and stack: %+v", ends)
	}

	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if len(hooks.starts) != attempts || hooks.done != attempts {
		t.Errorf("%d JobStart and %d JobDone calls, want %d each", len(hooks.starts), hooks.done, attempts)
	}
	claimed := 0
	for _, c := range hooks.claims {
		if c.Queue != "fast" || c.Err != nil || c.Jobs > c.Limit || c.Took <= 0 {
			t.Errorf("ClaimInfo %+v, want queue fast, no error, jobs <= limit and a duration", c)
		}
		claimed += c.Jobs
	}
	if claimed != attempts || hooks.claimed != attempts {
		t.Errorf("ClaimDone counted %d jobs and Claimed %d, want %d (one claim per attempt)", claimed, hooks.claimed, attempts)
	}
	perOp := map[string]int{}
	for _, a := range hooks.acks {
		if a.Err != nil || a.Matched != a.Jobs || a.Took <= 0 {
			t.Errorf("AckInfo %+v, want no error, every result matched and a duration", a)
		}
		perOp[a.Op] += a.Matched
	}
	// Completed: ok and the snoozed job's second run; the rest are resolved.
	if perOp[skipjack.AckComplete] != 2 || perOp[skipjack.AckResolve] != attempts-2 {
		t.Errorf("acknowledged %v, want complete 2 and resolve %d", perOp, attempts-2)
	}
}

// TestHooksReportCancel cancels a running job of the slow queue (lease 3s,
// so the worker learns of the cancel at its next heartbeat within 1s; the
// handler's timeout is a minute) and checks that JobEnd reports it
// cancelled with the context's cause as the error.
func TestHooksReportCancel(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	hooks := newEventHooks()
	started := make(chan int64, 1)
	start(t, slow.NewWorker(pool, func(ctx context.Context, job *slow.Job) error {
		started <- job.ID
		<-ctx.Done()
		return context.Cause(ctx)
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t), Hooks: hooks}))
	if _, err := slow.Enqueue(t.Context(), pool, slow.Payload{N: 1}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	id := <-started
	if n, err := slow.Cancel(t.Context(), pool, id); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	hooks.waitUntil(t, "the attempt to end", func() bool { return len(hooks.ends) == 1 })
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	e := hooks.ends[0]
	if e.job.ID != id || e.res.Outcome != skipjack.OutcomeCancelled || !errors.Is(e.res.Err, skipjack.ErrCancelled) || e.res.Delay != 0 {
		t.Errorf("JobEnd got job %d with %+v, want job %d cancelled with ErrCancelled and no delay", e.job.ID, e.res, id)
	}
}

// panickyHooks panics in every hook.
type panickyHooks struct{}

func (panickyHooks) JobDone(string, int64, int, time.Duration, error) { panic("JobDone") }
func (panickyHooks) Claimed(string, int, time.Duration)               { panic("Claimed") }
func (panickyHooks) JobStart(context.Context, skipjack.JobInfo) context.Context {
	panic("JobStart")
}
func (panickyHooks) JobEnd(context.Context, skipjack.JobInfo, skipjack.AttemptResult) {
	panic("JobEnd")
}
func (panickyHooks) ClaimDone(skipjack.ClaimInfo) { panic("ClaimDone") }
func (panickyHooks) AckDone(skipjack.AckInfo)     { panic("AckDone") }

// TestHookPanicIsRecovered runs a job with hooks that panic in every
// method: the process survives, the job runs once with a usable context
// and is acknowledged, and every panic is logged at Error level.
func TestHookPanicIsRecovered(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	logs := newLogs(t)
	runs := make(chan error, 10)
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		runs <- ctx.Err()
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: logs.logger(), Hooks: panickyHooks{}}))
	id := enqueueFast(t, pool)

	if err := <-runs; err != nil {
		t.Fatalf("handler context: %v, want a live context", err)
	}
	waitFor(t, 20*time.Second, "the AckDone panic to be logged", func() bool {
		return logs.contains("ERROR", "hook=AckDone")
	})
	if _, ok := getJob(t, pool, "fast", id); ok {
		t.Errorf("job %d is still in the table, want it acknowledged", id)
	}
	for _, hook := range []string{"JobDone", "Claimed", "JobStart", "JobEnd", "ClaimDone", "AckDone"} {
		if !logs.contains("ERROR", "hook="+hook) {
			t.Errorf("no Error record for the %s panic", hook)
		}
	}
	if len(runs) != 0 {
		t.Errorf("handler ran %d more times, want once", len(runs))
	}
}

// baseHooks implements only the deprecated events, JobDone and Claimed,
// which Hooks once required.
type baseHooks struct{ calls *[]string }

func (h baseHooks) JobDone(string, int64, int, time.Duration, error) {
	*h.calls = append(*h.calls, "base.JobDone")
}
func (h baseHooks) Claimed(string, int, time.Duration) { *h.calls = append(*h.calls, "base.Claimed") }

// startHooks implements JobStart only; it embeds the deprecated NopHooks,
// as implementations written when Hooks required two methods do.
type startHooks struct {
	skipjack.NopHooks
	name  string
	calls *[]string
}

type chainKey struct{}

func (h startHooks) JobStart(ctx context.Context, _ skipjack.JobInfo) context.Context {
	*h.calls = append(*h.calls, h.name+".JobStart")
	prev, _ := ctx.Value(chainKey{}).(string)
	return context.WithValue(ctx, chainKey{}, prev+h.name)
}

func TestMultiHooks(t *testing.T) {
	t.Parallel()
	var calls []string
	h := skipjack.MultiHooks(baseHooks{&calls}, nil, startHooks{name: "a", calls: &calls}, startHooks{name: "b", calls: &calls})

	ctx := h.(skipjack.JobStartHook).JobStart(context.Background(), skipjack.JobInfo{})
	if got := ctx.Value(chainKey{}); got != "ab" {
		t.Errorf("chained context value %v, want ab (a's context passed to b)", got)
	}
	h.(interface {
		JobDone(string, int64, int, time.Duration, error)
	}).JobDone("q", 1, 1, time.Second, nil)
	h.(interface {
		Claimed(string, int, time.Duration)
	}).Claimed("q", 1, time.Second)
	h.(skipjack.JobEndHook).JobEnd(ctx, skipjack.JobInfo{}, skipjack.AttemptResult{})
	h.(skipjack.ClaimHook).ClaimDone(skipjack.ClaimInfo{})
	h.(skipjack.AckHook).AckDone(skipjack.AckInfo{})
	want := "[a.JobStart b.JobStart base.JobDone base.Claimed]"
	if fmt.Sprint(calls) != want {
		t.Errorf("calls %v, want %s", calls, want)
	}
}
