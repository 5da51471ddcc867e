package skipjackimpl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// RunOnceOpts are the optional inputs of RunOnce.
type RunOnceOpts struct {
	// ID is the job's id. Default 1.
	ID int64
	// Attempt is the attempt to run, from 1. Default 1.
	Attempt int
	// MaxAttempts overrides the queue's max_attempts.
	MaxAttempts int
	// Config is the worker configuration whose PollInterval (the floor of
	// a snooze), Logger, WorkerID, Hooks and Middleware apply.
	Config skipjack.WorkerConfig
	// Trace is the trace context the job was enqueued with, stored and
	// read back as the trace column is.
	Trace map[string]string
}

// RunOnce runs handle on one job with payload p, synchronously, through
// the code a worker of the queue described by spec runs between a claim
// and the write of the result: the payload is encoded as Enqueue encodes
// it (refusing what Enqueue refuses) and decoded as a claim decodes it, and
// the handler runs in its middleware under the queue's timeout, with panics
// recovered, the hooks called and its result resolved by the queue's rules. It touches no
// database. It returns the attempt's result and the job the handler saw
// (nil when the payload could not be encoded). For skipjacktest.RunJob.
func RunOnce[P any](ctx context.Context, spec QueueSpec, handle func(context.Context, *skipjack.Job[P]) error, p P, o RunOnceOpts) (skipjack.AttemptResult, *skipjack.Job[P], error) {
	spec = spec.withDefaults()
	payload, err := EncodePayload(&p)
	if err != nil {
		return skipjack.AttemptResult{}, nil, fmt.Errorf("enqueue %s: %w", spec.Name, err)
	}
	if err := spec.checkPayloadSize(len(payload)); err != nil {
		return skipjack.AttemptResult{}, nil, fmt.Errorf("enqueue %s: %w", spec.Name, err)
	}
	now := time.Now()
	e := &entry[P]{row: ClaimedRow{
		ID: max(o.ID, 1), Attempt: int32(max(o.Attempt, 1)), Claim: 1,
		MaxAttempts: int32(spec.MaxAttempts), Payload: payload, RunAt: now, CreatedAt: now,
		Trace: encodeTrace(o.Trace),
	}}
	if o.MaxAttempts > 0 {
		e.row.MaxAttempts = int32(o.MaxAttempts)
	}
	newJob(e)
	if err := json.Unmarshal(e.row.Payload, &e.job.Payload); err != nil {
		e.decodeErr = fmt.Errorf("decode payload: %w", err)
	}

	var res skipjack.AttemptResult
	cfg := o.Config
	cfg.Hooks = skipjack.MultiHooks(resultHook{&res}, cfg.Hooks)
	cfg = configWithDefaults(cfg)
	w := &Worker[P]{spec: spec, handle: handle, cfg: cfg}
	log := cfg.Logger.With("queue", spec.Name)
	r := &runner[P]{w: w, spec: spec, cfg: cfg, log: log, inflight: 1, hooks: newHookCaller[P](spec.Name, cfg, log)}
	r.workflow = workflowSteps[P]{tables: spec.Workflow, queue: spec.Name}
	r.handle = withMiddleware(handle, cfg.Middleware, r.hooks.jobInfo)
	// The result goes to a completer that nobody flushes: RunOnce returns
	// it from the hooks.
	r.results = &completer[P]{name: spec.Name, batchSize: 1, log: log, hooks: r.hooks, flushNow: make(chan struct{}, 1)}

	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.cancel = cancel
	r.execute(jobCtx, e)
	return res, e.job, nil
}

// resultHook records the result of the attempt RunOnce runs.
type resultHook struct{ res *skipjack.AttemptResult }

// JobEnd records the attempt's result.
func (h resultHook) JobEnd(_ context.Context, _ skipjack.JobInfo, res skipjack.AttemptResult) {
	*h.res = res
}
