package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// errTimeout is the cause of a handler context whose attempt overran the
// queue's timeout.
var errTimeout = errors.New("skipjack: handler timeout")

// handlerLoop is a handler goroutine: it runs prefetched jobs one at a
// time and returns when none is left (or the worker stops starting jobs).
// Goroutines are started as jobs wait for them (handlerPool), so
// that a worker whose handlers are quick keeps only a few goroutines, not
// Concurrency parked ones whose stacks the GC scans in every cycle, nor
// one per prefetched job.
//
// Without a group budget, a handler that finished a job takes the next
// one under the same lock (pop with finished set): a quick job costs one
// lock of the run fewer. With one, it waits for a token between the two,
// unless the jobs came with their tokens (prepaid): it then gives each
// job's token back once the job is done.
//
// A handler that ignores its context cannot keep its token for good: the
// run gives the token back when it abandons the attempt (abandonOverruns,
// the queue's timeout plus one lease after the start), and the handler's
// own return then gives back nothing (token is once).
func (r *runner[T]) handlerLoop() {
	defer r.handlers.group.Done()
	finished := false                    // this goroutine's last job is still counted busy
	ask := r.budget != nil && !r.prepaid // a token per job, asked for here
	for {
		if ask {
			if finished {
				r.mu.Lock()
				next := r.handlers.doneLocked(len(r.queue), r.stopped)
				r.mu.Unlock()
				if !next {
					return
				}
			}
			finished = false
			if !r.budget.Acquire(r.member, r.stopHandlers) {
				r.mu.Lock()
				r.handlers.goneLocked()
				r.mu.Unlock()
				return
			}
		}
		var token func() // gives back the token of this turn's job, once
		if r.budget != nil {
			token = sync.OnceFunc(r.budget.Release)
		}
		p, ok := r.pop(finished, token)
		finished = true
		if !ok {
			if ask {
				token()
			}
			return
		}
		e, ctx := p.e, p.ctx
		if p.checks() {
			if p.check != nil {
				r.recheck(p.check)
			}
			if p.readPause {
				r.operator.readPause()
			}
			if p.waitPause != nil {
				<-p.waitPause
			}
			e, ctx = r.startChecked(e, p.pauses)
		}
		switch {
		case e == nil:
		case ctx == nil:
			// Cancelled by an operator (or the queue paused, or the worker
			// stopped) before it started: it never starts. Released, it
			// goes back to pending, or ends failed "cancelled" when it was
			// cancelled.
			r.finish(e, Resolution{ID: e.row.ID, Claim: e.row.Claim, Action: ActionRelease}, false)
		default:
			r.admit(ctx, e)
		}
		if token != nil {
			token()
		}
	}
}

// handlerPool is the handler goroutines of a run (handlerLoop): it owns
// how many run and how many of those hold a job, up to limit
// (Concurrency), and the wait group shutdown waits on (waitHandlers). Its
// counts are guarded by the run's mu, since whether a goroutine starts or
// retires depends on the prefetched queue beside them: claims call
// startLocked for the jobs they queued, and handler goroutines call
// startLocked, retireLocked and doneLocked as they take jobs (pop) and
// finish them (handlerLoop).
//
// It starts a goroutine when jobs are queued and every goroutine is busy
// with a job, and at most one at a time: every goroutine calls startLocked
// again as it takes a job, so while handlers block (on I/O, say), each
// goroutine started takes a job and starts the next, and all Concurrency
// run within moments. Handlers that return at once keep taking queued
// jobs themselves: the goroutine started last is still waiting to run, so
// no other is started. Starting one goroutine per queued job cost quick
// handlers a goroutine's creation and a wake-up of an idle P per job, and
// a thousand goroutines contending for the run's mu (BenchmarkEngine:
// 40-50% of the worker's CPU per job).
type handlerPool struct {
	limit   int            // Concurrency
	run     func()         // a handler goroutine's body (the run's handlerLoop)
	running int            // started and not returned
	busy    int            // of those, running a job
	group   sync.WaitGroup // every handler goroutine
}

// startLocked starts a handler goroutine if queued jobs wait for one (see
// handlerPool) and the run still starts jobs; the run's mu must be held.
func (p *handlerPool) startLocked(queued int, stopped bool) {
	if p.running == p.busy && queued > 0 && p.running < p.limit && !stopped {
		p.running++
		p.group.Add(1)
		go p.run()
	}
}

// doneLocked records that a handler goroutine finished its job, and
// reports whether it should take another: false, counting it gone, when
// no job is queued (so that it does not wait for a token of its group's
// budget with nothing to run) or the run is stopping. The run's mu must
// be held.
func (p *handlerPool) doneLocked(queued int, stopped bool) bool {
	p.busy--
	return !p.retireLocked(queued, stopped)
}

// retireLocked reports whether a free handler goroutine has nothing to
// take (no job is queued, or the run is stopping), and then counts it
// gone; the run's mu must be held.
func (p *handlerPool) retireLocked(queued int, stopped bool) bool {
	if stopped || queued == 0 {
		p.running--
		return true
	}
	return false
}

// goneLocked records that a handler goroutine that holds no job returns;
// the run's mu must be held.
func (p *handlerPool) goneLocked() { p.running-- }

// pop takes the next prefetched job with its handler's context for a
// handler goroutine, counting it busy; it returns ok false, and counts the
// goroutine gone, when no job is queued or the worker is stopping. The
// job is nil when its lease was lost meanwhile. A job an operator
// cancelled while it was prefetched comes without a context: it must not
// start. With finished set, the goroutine's previous job first stops
// counting as busy (see handlerPool.doneLocked).
//
// A job whose cancel state the run last read recheckAfter or more ago
// comes without a context and with check: the jobs to recheck first (it
// and every queued job as stale). In a run that hears no notifications, a
// job may also have to wait for a read of the pause state (pauseGate).
// Either way startChecked starts it afterwards.
//
// The job keeps token, the group budget's token its handler holds (nil
// outside RunGroup), for abandonOverruns.
func (r *runner[T]) pop(finished bool, token func()) (_ popped[T], ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if finished {
		r.handlers.busy--
	}
	if r.handlers.retireLocked(len(r.queue), r.stopped) {
		return popped[T]{}, false
	}
	r.handlers.busy++
	e := r.queue[0]
	r.queue[0] = nil
	r.queue = r.queue[1:]
	e.token = token
	if e.lost.Load() {
		r.inflight--
		signal(r.capacityFreed)
		return popped[T]{}, true
	}
	if e.cancelled {
		return popped[T]{e: e}, true
	}
	p := popped[T]{e: e, pauses: r.pauses}
	now := time.Now()
	if now.Sub(e.checkedAt) >= recheckAfter {
		p.check = r.staleQueuedLocked(now, []*entry[T]{e})
	}
	p.readPause, p.waitPause = r.pauseGate.passLocked(now)
	if !p.checks() {
		p.ctx = r.startLocked(e)
	}
	r.handlers.startLocked(len(r.queue), r.stopped)
	return p, true
}

// popped is a job pop took for a handler goroutine.
type popped[T any] struct {
	e         *entry[T]       // nil when its lease was lost meanwhile
	ctx       context.Context // its handler's context; nil when it must not start, or checks come first
	check     []*entry[T]     // the jobs whose cancel state to read first (recheck)
	readPause bool            // read whether the queue is paused first (readPause)
	waitPause <-chan struct{} // wait for a read of the pause state in flight first
	pauses    int             // the run's count of pauses when pop took it
}

// checks reports whether the job waits for a check before it starts (see
// startChecked).
func (p popped[T]) checks() bool { return p.check != nil || p.readPause || p.waitPause != nil }

// startLocked creates the handler context of e, which starts now; r.mu
// must be held.
func (r *runner[T]) startLocked(e *entry[T]) context.Context {
	// The parent cannot be cancelled, so the job's context is not
	// registered in it (a shared lock and map per job); shutdown cancels
	// running jobs one by one instead (cancelRunning).
	ctx, cancel := context.WithCancelCause(r.handlerBase)
	e.cancel = cancel
	if e.row.Rescues < suspectRescues {
		// An ordinary job starts now (admit), so it is recorded as
		// started under this lock rather than taking it again; a suspect
		// starts after its isolation wait.
		r.timeouts.startLocked(e)
	}
	return ctx
}

// execute runs one job's handler and records its result.
func (r *runner[T]) execute(ctx context.Context, e *entry[T]) {
	job := e.job
	if err := e.decodeErr; err != nil {
		res := Resolution{Action: ActionFail, Message: storableText(err.Error())}
		r.hooks.jobEnd(r.hooks.jobStart(ctx, job), job, 0, err, res)
		e.cancel(nil)
		r.finish(e, res, false)
		return
	}

	ctx = r.hooks.jobStart(ctx, job)
	var hctx context.Context
	cancel := func() {}
	if r.timeouts != nil {
		// The run's timeout list cancels ctx at this deadline; started
		// set e.startedAt on this goroutine.
		e.attemptCtx = attemptContext{Context: ctx, deadline: r.timeouts.deadline(e)}
		hctx = &e.attemptCtx
	} else {
		hctx, cancel = context.WithTimeoutCause(ctx, r.spec.Timeout, errTimeout)
	}
	start := time.Now()
	err := call(hctx, r.handle, job, r.log)
	end := time.Now() // read once, for the duration, the overrun check and the result
	took := end.Sub(start)
	ran := took // measured as the deadline is
	if r.timeouts != nil {
		ran = end.Sub(e.startedAt)
	}
	// The cause is read only where it can matter (its lookup walks the
	// context chain and takes its locks): a nil result in time is not an
	// overrun, whatever the cause.
	var cause error
	if err != nil || ran >= r.spec.Timeout {
		cause = context.Cause(hctx)
	}
	timedOut := overran(err, cause, ran, r.spec.Timeout)
	cancel()
	e.cancel(nil)

	if timedOut {
		if err == nil {
			err = fmt.Errorf("handler overran its %v timeout", r.spec.Timeout)
		} else {
			err = fmt.Errorf("handler overran its %v timeout: %w", r.spec.Timeout, err)
		}
	}
	if err == nil {
		if werr := r.workflow.storeOutput(e); werr != nil {
			// The output is part of the result: without it, try again.
			err = werr
		}
	}
	var res Resolution
	if err != nil {
		switch cause := context.Cause(hctx); {
		case errors.Is(cause, errShutdown) || errors.Is(cause, skipjack.ErrLeaseLost):
			// Interrupted by shutdown, or because the worker could not
			// prove it is alive: released with the attempt restored (an
			// operator's cancel still fails it).
			res = Resolution{ID: job.ID, Claim: job.Claim, Action: ActionRelease}
		default:
			res = resolution(job, err, r.spec, r.cfg.PollInterval)
		}
	}
	r.hooks.jobEnd(ctx, job, took, err, res)
	r.finishAt(e, res, err == nil, end)
}

// overran reports whether an attempt that returned err after took counts
// as overrunning timeout, given its context's cause. An attempt whose
// context's deadline fired counts, even when its handler then returned nil
// (DESIGN: an attempt that overruns its timeout is a failed attempt),
// unless the handler returned nil in less than timeout: the deadline fired
// between its return and this check, and the nil result wins.
func overran(err, cause error, took, timeout time.Duration) bool {
	if cause != errTimeout {
		return false
	}
	return err != nil || took >= timeout
}

// call runs handle on job, turning a panic into an error, which it logs
// to log with the stack.
func call[T any](ctx context.Context, handle func(context.Context, *skipjack.Job[T]) error, job *skipjack.Job[T], log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			log.Error("skipjack: handler panicked",
				"job_id", job.ID, "attempt", job.Attempt, "panic", fmt.Sprint(p), "stack", string(stack))
			err = &skipjack.PanicError{Value: p, Stack: stack}
		}
	}()
	return handle(ctx, job)
}

// resolution turns a handler error into what happens to the job, by the
// rules of the queue described by spec; a snooze waits at least
// pollInterval.
func resolution[T any](job *skipjack.Job[T], err error, spec QueueSpec, pollInterval time.Duration) Resolution {
	res := Resolution{ID: job.ID, Claim: job.Claim, Message: storableText(err.Error())}
	var perm *skipjack.PermanentError
	var snooze *skipjack.SnoozeError
	switch {
	case errors.As(err, &perm):
		res.Action = ActionFail
	case errors.As(err, &snooze):
		res.Action = ActionSnooze
		res.Delay = max(snooze.Duration, pollInterval)
		res.Message = ""
	default:
		res.Action = ActionRetry
		res.Delay = retryDelay(job.Attempt, spec.BackoffMin, spec.BackoffMax)
	}
	return res
}

// finish records the result of a job whose handler returned: an
// acknowledgement when completed, a resolution otherwise, queued for the
// completer. Results of jobs another attempt owns, or whose abandonment was
// recorded, are dropped.
//
// It wakes the fetcher only when the capacity this frees makes a claim
// worth its statement (see reserve), not once per job; the completer wakes
// its flusher the same way.
func (r *runner[T]) finish(e *entry[T], res Resolution, completed bool) {
	r.finishAt(e, res, completed, time.Now())
}

// finishAt is finish for a result known at now (a handler's return).
func (r *runner[T]) finishAt(e *entry[T], res Resolution, completed bool, now time.Time) {
	r.mu.Lock()
	r.inflight--
	r.timeouts.removeLocked(e)
	e.cancel = nil
	acked := e.txAcked.Load()
	// A job CompleteTx acknowledged is written as any other: if its
	// transaction committed, the fenced write matches nothing; if it rolled
	// back, the write settles the job, which would otherwise stay running
	// for as long as this worker proves it is alive.
	queue := !e.lost.Load() && !e.abandoned
	idle := r.inflight == r.asked // nothing prefetched or running
	claimable := idle || r.heldCap.capLocked(now)-r.inflight == r.minClaim
	if queue {
		// Under r.mu (the completer never takes it while holding its own
		// lock): the result that finds the run idle is then the last of
		// its burst to reach the completer. Added after the unlock, the
		// results of handlers that finished just before it could still be
		// on their way, so it found fewer than idleFlushMin waiting and
		// the burst waited out AckDelay (16 of 300 runs of
		// TestIdleRunFlushesBurst at load 20).
		r.results.add(e, res, completed, idle, now)
	}
	r.mu.Unlock()
	if claimable {
		signal(r.capacityFreed)
	}
	if acked && completed && (r.spec.Serial || r.spec.limited()) {
		// CompleteTx most likely settled the job in its own transaction:
		// the jobs it held back can be claimed now, before the flush of
		// its (then unmatched) acknowledgement.
		signal(r.claimable)
	}
}
