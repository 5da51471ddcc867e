package skipjackimpl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/link"
)

const (
	// queryTimeout bounds every statement the worker runs, so that a stuck
	// database cannot hang Run.
	queryTimeout = 15 * time.Second
	// finalFlushTimeout bounds the release and the last flush at shutdown.
	finalFlushTimeout = 4 * time.Second
	// maxShutdownGrace caps how long Run waits for handlers after it
	// cancelled them at ShutdownTimeout (a quarter of ShutdownTimeout, at
	// least a second). With the default ShutdownTimeout of 20s, Run returns
	// within 20s + 5s + finalFlushTimeout: inside a 30s container grace
	// period.
	maxShutdownGrace = 5 * time.Second
	// dbRetryMax caps the pause of a loop after repeated database errors.
	dbRetryMax = 5 * time.Second
)

// Worker runs a handler for the jobs of one queue: the engine behind
// skipjack.Worker, which a queue package's NewWorker creates and links to
// it.
//
// A worker runs Concurrency handlers at once and claims at most
// Concurrency further jobs ahead of them. Its own statements (claims,
// acknowledgements, heartbeats, maintenance) run on a small control pool
// of its own, built from the pool's configuration (up to controlConns
// connections, opened on demand), so they never wait for a connection
// behind handlers; the pool itself only serves handlers, so size it to at
// least the Concurrency of all the workers sharing it when handlers use
// it. Wake-ups come from one LISTEN connection per process and database,
// opened outside both pools.
type Worker[T any] struct {
	pool    *pgxpool.Pool
	spec    QueueSpec
	store   store
	bind    func(DBTX) queries // binds the queue's queries to the control pool; nil runs store as is
	slots   slotQueries
	handle  func(context.Context, *skipjack.Job[T]) error
	cfg     skipjack.WorkerConfig
	running atomic.Bool
}

// newWorker returns a worker that runs handle on the jobs of the queue
// described by spec, using qs for its SQL; cfg's zero fields take their
// defaults.
func newWorker[T any](pool *pgxpool.Pool, spec QueueSpec, qs queries, handle func(context.Context, *skipjack.Job[T]) error, cfg skipjack.WorkerConfig) *Worker[T] {
	return &Worker[T]{
		pool:   pool,
		spec:   spec.withDefaults(),
		store:  qs,
		slots:  qs.slots(),
		handle: handle,
		cfg:    configWithDefaults(cfg),
	}
}

// withControlPool makes each Run create a control pool from the worker's
// pool and run the queue's queries, bound to it by bind, there.
func (w *Worker[T]) withControlPool(bind func(DBTX) queries) *Worker[T] {
	w.bind = bind
	return w
}

// Run claims and works jobs until ctx is cancelled, then shuts down: it
// stops claiming, releases the jobs it prefetched but did not start, lets
// running handlers finish (cancelling their contexts once ShutdownTimeout
// has passed), flushes the outstanding acknowledgements and returns nil.
// Every goroutine Run started has ended when it returns; the process's
// shared LISTEN connection is closed with the last running worker of its
// database. Database errors never make Run return: it logs them and retries
// with backoff.
//
// A Worker runs once at a time; Run returns an error if it is already
// running.
func (w *Worker[T]) Run(ctx context.Context) error {
	return w.runIn(ctx, nil)
}

// runIn is Run as a member of the group g (skipjack.RunGroup), or of none
// when g is nil: every handler holds one of the group budget's tokens
// while its job runs, and the group's middleware wraps the worker's.
func (w *Worker[T]) runIn(ctx context.Context, g *link.Group) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("run %s: worker is already running", w.spec.Name)
	}
	defer w.running.Store(false)
	r := newRunner(w)
	if g != nil && g.Budget != nil {
		r.budget, r.member = g.Budget, g.Budget.Join()
		r.prepaid = w.spec.limited()
		if r.prepaid {
			// Its claims take only what the budget lets start: no
			// prefetch while limits do not bind either.
			r.heldCap.prefetchFree = false
		}
	}
	if g != nil {
		mws, _ := g.Middleware.([]skipjack.Middleware)
		r.handle = withMiddleware(r.handle, mws, r.hooks.jobInfo)
	}
	return r.run(ctx)
}

// runner is one Run of a Worker: the producer, which claims jobs
// (fetch.go), runs their handlers (execute.go), watches their deadlines
// (timeout.go) and lets a suspect run alone (isolate.go). It owns the jobs
// the run holds, under mu. Parts that work on those jobs under mu are
// types of their own, each owning its state: the handler goroutines'
// counts (handlerPool, execute.go), the leases' renewal and watch
// (leases, heartbeat.go), the operators' notifications (operatorNotes,
// operator.go), the release of prefetched jobs and its retries
// (releaser, release.go), how many jobs the run may hold (heldCap,
// prefetch.go) and the deadlines (timeoutList). The free list of claim
// buffers (claimBufs, fetch.go) needs no lock. The parts that do not need
// mu at all are its own types too: the claimer runs the claim statements
// and keeps their floors (claimer.go, floor.go), the workflow steps look
// up claimed jobs' workflows and write their outputs (workflowSteps,
// workflow.go), the completer writes results (completer.go), the
// liveness keeps the run's row in the workers table (liveness.go), the
// maintainer rescues, prunes and inserts periodic jobs (maintain.go,
// periodic.go), and the hook caller reports events (hooks.go). What the
// workers of one pool share is the pool's owner (owner.go). A new
// responsibility goes into a type of its own too: TestWalls caps the
// runner's methods. docs/architecture.md draws who calls whom.
type runner[T any] struct {
	w     *Worker[T]
	spec  QueueSpec
	cfg   skipjack.WorkerConfig
	store store
	log   *slog.Logger
	owner *owner // of the pool the handlers run on; nil in unit tests
	// budget is the handler budget of the group this run belongs to (nil
	// outside skipjack.RunGroup), in which it is member number member.
	budget *link.Budget
	member int
	// prepaid is set for a queue with limits in a group: a claimed job
	// counts against the queue's limits in every process (it holds a slot
	// of its concurrency limit, its claim used up the rate window), so the
	// worker takes the budget's tokens before it claims, claims no more
	// jobs than it got tokens, and every job in queue holds one token until
	// its handler returns (or the job is let go unstarted). Without that,
	// jobs claimed while other queues held the budget sat running without
	// a handler, holding the limit that other processes could have used,
	// and started in a burst past the rate once the budget freed.
	prepaid bool

	leases   leases[T]        // renews the held jobs' leases, or gives them up
	operator operatorNotes[T] // acts on operators' cancels and pauses
	releaser releaser[T]      // gives prefetched jobs back, again while that fails
	claimer  claimer          // runs the claim statements (claimer.go)
	workflow workflowSteps[T] // looks up claimed jobs' workflows, writes their outputs
	heldCap  heldCap          // how many jobs the run may hold (prefetch.go)
	// handle is the worker's handler wrapped in the middleware of its
	// config and of its group (middleware.go).
	handle func(context.Context, *skipjack.Job[T]) error

	hooks    *hookCaller[T]
	results  *completer[T]
	liveness *liveness
	due      earliest // when the earliest job this run retried or snoozed becomes due

	stmtTimeout  time.Duration // deadline of claims and flushes
	minClaim     int           // smallest claim worth a statement while busy
	backlogLimit int           // unflushed results above which claiming pauses

	mu        sync.Mutex
	held      map[int64]*entry[T] // every job whose claim this run holds
	queue     []*entry[T]         // claimed, not started
	inflight  int                 // prefetched + running + asked
	asked     int                 // capacity reserved by claims in flight (see reserve)
	stopped   bool                // no job starts any more
	pauses    int                 // pause notices so far: a claim in flight across one gives its jobs back
	pauseGate pauseGate           // a run that hears no notifications reads the pause before jobs start
	timeouts  *timeoutList[T]     // running attempts by deadline; nil: a timer per attempt (RunJob)

	handlers handlerPool // the handler goroutines; its counts guarded by mu

	// Wake-ups, named after what they announce.
	capacityFreed chan struct{}   // to the fetcher: held jobs were let go, or a due time was noted
	claimable     chan struct{}   // to the fetcher: jobs it could not claim may be claimable now (a rescue, the end of isolation, a settled job of a limited or serial queue)
	wake          <-chan struct{} // to the fetcher: the queue was notified; nil when polling only
	stopHandlers  chan struct{}   // closed when no job starts any more
	handlerBase   context.Context // parent of handler contexts: Run's values, never cancelled
	claims        sync.WaitGroup  // claim statements in flight
	claimBufs     claimBufs       // slices claims scan rows into, kept for the next claims
	// lastShort is set when the run's last claim took fewer jobs than it
	// asked for: jobs may be held back (see settled).
	lastShort atomic.Bool
	// sweeps counts the sweeps in flight (see claimFloor): a crowded
	// worker, which otherwise runs one claim at a time, runs a floored
	// claim beside a sweep.
	sweeps atomic.Int32
}

// entry is one claimed job.
type entry[T any] struct {
	row       ClaimedRow
	job       *skipjack.Job[T]        // the handler's view (&jobv), built and decoded at claim
	jobv      skipjack.Job[T]         // job's storage: entries are allocated per claim, so this saves an allocation per job
	decodeErr error                   // the payload did not decode into T
	cancel    context.CancelCauseFunc // cancels the running handler
	token     func()                  // gives back the group budget's token the running handler holds (once); nil outside RunGroup
	startedAt time.Time               // when the handler started; zero while prefetched
	abandoned bool                    // the handler overran timeout + lease; its abandonment is written, its own result dropped
	doubted   bool                    // the handler was cancelled because the worker could not prove it is alive
	cancelled bool                    // an operator cancelled the job before its handler started: it never starts
	checkedAt time.Time               // when the run last read whether the job was cancelled (its claim, a heartbeat); guarded by r.mu
	res       Resolution              // the outcome when it is not completion; the completer's
	// lost is set when another attempt owns the job (the database said
	// so): drop everything. settling is set while the job is inside an
	// ack, resolve or release statement. txAcked is set when CompleteTx
	// acknowledged the job in the handler's transaction. All three are read
	// without the run's lock, by the completer and by CompleteTx.
	lost, settling, txAcked atomic.Bool
	// endIsolation ends the isolation a suspect runs in (isolate.go), once,
	// whichever way its attempt ends first; nil for ordinary jobs.
	endIsolation func()
	// settled is closed when the run lets go of a suspect (its result
	// written or dropped); nil for ordinary jobs.
	settled chan struct{}

	// The timeout list (timeout.go), guarded by r.mu.
	timed        bool      // linked in r.timeouts
	tprev, tnext *entry[T] // neighbours in r.timeouts
	attemptCtx   attemptContext
}

func newRunner[T any](w *Worker[T]) *runner[T] {
	c := w.cfg.Concurrency
	b := w.cfg.BatchSize
	log := w.cfg.Logger.With("queue", w.spec.Name)
	r := &runner[T]{
		w:             w,
		spec:          w.spec,
		cfg:           w.cfg,
		store:         w.store,
		log:           log,
		hooks:         newHookCaller[T](w.spec.Name, w.cfg, log),
		stmtTimeout:   statementTimeout(w.spec.Lease),
		minClaim:      max(1, min(b, c)/2),
		backlogLimit:  2 * max(b, c),
		held:          make(map[int64]*entry[T]),
		capacityFreed: make(chan struct{}, 1),
		claimBufs:     newClaimBufs(),
		claimable:     make(chan struct{}, 1),
		stopHandlers:  make(chan struct{}),
	}
	r.handle = withMiddleware(w.handle, w.cfg.Middleware, r.hooks.jobInfo)
	r.leases.r, r.operator.r, r.releaser.r = r, r, r
	r.heldCap = newHeldCap(w.spec, c, &r.mu)
	r.handlers.limit, r.handlers.run = c, r.handlerLoop
	r.timeouts = &timeoutList[T]{mu: &r.mu, timeout: w.spec.Timeout, wake: make(chan struct{}, 1)}
	r.liveness = &liveness{id: liveID(w.cfg.WorkerID), lease: w.spec.Lease, name: w.spec.Name, log: log}
	r.claimer = claimer{spec: w.spec, bind: w.bind, worker: r.liveness.id, stmtTimeout: r.stmtTimeout}
	r.workflow = workflowSteps[T]{tables: w.spec.Workflow, queue: w.spec.Name, stmtTimeout: r.stmtTimeout, pool: w.pool}
	r.results = &completer[T]{
		name:        w.spec.Name,
		batchSize:   b,
		ackDelay:    w.cfg.AckDelay,
		stmtTimeout: r.stmtTimeout,
		log:         log,
		hooks:       r.hooks,
		settled:     r.settled,
		due:         r.noteDue,
		flushNow:    make(chan struct{}, 1),
	}
	return r
}

// useStore makes the run and its parts run their statements on s.
func (r *runner[T]) useStore(s store) {
	r.store, r.results.store, r.liveness.store, r.claimer.store = s, s, s, s
}

func (r *runner[T]) run(ctx context.Context) error {
	r.owner = acquire(r.w.pool)
	defer r.owner.release()
	demand := r.owner.join(r, r.cfg.Concurrency)
	defer r.owner.leave(r, r.cfg.Concurrency)
	if mc := int(r.w.pool.Config().MaxConns); mc < demand {
		r.log.Warn("skipjack: connection pool is smaller than the Concurrency of the workers sharing it; handlers that use the pool will wait for connections and may time out",
			"pool_max_conns", mc, "concurrency", r.cfg.Concurrency, "workers_concurrency", demand)
	}
	r.useStore(r.store)
	slots := r.w.slots
	// control is the pool the worker's own statements run on (nil when
	// they run on a store given as is, in tests).
	var control *pgxpool.Pool
	if r.w.bind != nil {
		var err error
		control, err = newControlPool(r.w.pool)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.spec.Name, err)
		}
		defer control.Close()
		warm(control, maxClaimsInFlight)
		r.useStore(r.w.bind(control))
		slots = r.w.bind(control).slots() // maintenance too: periodic jobs are inserted on time while handlers hold the pool
		r.claimer.control, r.workflow.control = control, control
		stall := clientStallLimit(r.stmtTimeout)
		r.claimer.steered = r.w.bind(claimBatch{pool: control, stall: stall})
		r.claimer.inTurn = r.w.bind(claimBatch{pool: control, stall: stall, turn: true, key: turnKey(r.spec.Name), wait: turnWait(r.stmtTimeout)})
	}
	if fs, ok := r.store.(floorStore); ok && fs.claimsFrom() && !r.spec.Serial && r.spec.PerKeyConcurrency == 0 {
		r.claimer.floor = newClaimFloor(r.spec.Priority, r.cfg.PollInterval, time.Now())
	}
	if err := r.liveness.renew(r.stmtTimeout); err != nil {
		if missingTable(err) {
			return fmt.Errorf("run %s: %w: the workers table is missing; apply this queue's migrations (skipjack migrate, or the generated Migrate) generated by this version of skipjack", r.spec.Name, err)
		}
		r.log.Warn("skipjack: proving this worker alive failed; retrying", "error", err)
	}
	r.liveness.provenAt(time.Now()) // the claims to come are what the lease protects
	defer r.liveness.gone()
	r.handlerBase = context.WithoutCancel(ctx)

	unsubscribe := func() {}
	if r.spec.Channel != "" && !r.cfg.PollOnly {
		var sub *subscription
		sub, unsubscribe = r.owner.subscribe(r.spec.Channel, r.cfg.Logger)
		r.wake, r.operator.cancelsNoted, r.operator.pauseNoted, r.operator.listening = sub.wake, sub.cancelled, sub.paused, sub.caughtUp
	} else {
		_, reads := r.store.(pausedReader)
		r.pauseGate.on = reads // no Pause reaches this run: it reads the pause itself
	}
	defer unsubscribe()

	maint := &maintainer{store: r.store, db: controlDB(control, r.w.pool), slots: slots, spec: r.spec, log: r.log, rescued: func() { signal(r.claimable) }}
	var flusher, background sync.WaitGroup
	final := make(chan struct{})
	flusher.Go(func() { r.results.flushLoop(final) })
	stopBackground := make(chan struct{})
	background.Go(func() { r.liveness.loop(stopBackground) })
	background.Go(func() { r.leases.heartbeatLoop(stopBackground) })
	background.Go(func() { r.leases.watchLoop(stopBackground) })
	background.Go(func() { r.timeouts.loop(stopBackground) })
	background.Go(func() { r.operator.loop(stopBackground) })
	background.Go(func() { maint.loop(stopBackground) })
	if len(r.spec.Schedules) > 0 && r.w.slots != nil {
		background.Go(func() { maint.scheduleLoop(stopBackground) })
	}

	r.fetchLoop(ctx)

	// Shutdown, timed from the cancellation: no job starts any more;
	// prefetched jobs go back at once, beside the running handlers, which
	// get ShutdownTimeout; claims still in flight release what they return.
	deadline := time.Now().Add(r.cfg.ShutdownTimeout)
	var release sync.WaitGroup
	r.mu.Lock()
	r.stopped = true
	queued := r.takeQueuedLocked()
	r.mu.Unlock()
	release.Go(func() { r.releaser.release(queued) })
	close(r.stopHandlers)
	stuck := r.waitHandlers(deadline)
	release.Wait()
	r.claims.Wait()
	close(final)
	flusher.Wait()
	close(stopBackground)
	background.Wait()
	if len(stuck) > 0 {
		return fmt.Errorf("run %s: handlers of jobs %v did not return within %v of being cancelled at ShutdownTimeout; their leases lapse and the jobs run again",
			r.spec.Name, stuck, shutdownGrace(r.cfg.ShutdownTimeout))
	}
	return nil
}

// errShutdown is the cause of a handler context cancelled because
// ShutdownTimeout passed; the job is then released with its attempt
// restored, as if it had never started.
var errShutdown = errors.New("skipjack: worker shutting down")

// shutdownGrace is how long Run waits for handlers it cancelled at
// ShutdownTimeout.
func shutdownGrace(timeout time.Duration) time.Duration {
	return min(maxShutdownGrace, max(timeout/4, time.Second))
}

// statementTimeout is the deadline of a claim or a flush statement: half
// the lease (at least a second, at most queryTimeout). A statement that waits
// longer, for a row lock say, is cancelled on the server and retried rather
// than left waiting while the jobs' leases run out.
func statementTimeout(lease time.Duration) time.Duration {
	return min(queryTimeout, max(lease/2, time.Second))
}

// takeQueuedLocked empties the prefetched queue and returns the jobs in it
// whose leases are not lost, marked as being settled, for releaser.release,
// giving back the budget tokens they held (see prepaid); r.mu must be
// held.
func (r *runner[T]) takeQueuedLocked() []*entry[T] {
	if r.prepaid {
		r.budget.ReleaseN(len(r.queue))
	}
	var out []*entry[T]
	for _, e := range r.queue {
		r.inflight--
		if !e.lost.Load() {
			e.settling.Store(true)
			out = append(out, e)
		}
	}
	r.queue = nil
	return out
}

// waitHandlers waits for the handler goroutines, cancelling their contexts at
// deadline with cause errShutdown, and then waiting at most shutdownGrace
// more. It returns the ids of the jobs whose handlers are still running
// then (they ignore their context); their goroutines are left behind.
func (r *runner[T]) waitHandlers(deadline time.Time) []int64 {
	done := make(chan struct{})
	go func() {
		r.handlers.group.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	r.log.Warn("skipjack: shutdown timeout passed; cancelling running handlers and releasing their jobs", "shutdown_timeout", r.cfg.ShutdownTimeout)
	r.mu.Lock()
	for _, e := range r.held {
		if e.cancel != nil {
			e.cancel(errShutdown)
		}
	}
	r.mu.Unlock()
	grace := shutdownGrace(r.cfg.ShutdownTimeout)
	t.Reset(grace)
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var stuck []int64
	for id, e := range r.held {
		if e.cancel != nil && !e.lost.Load() && !e.abandoned {
			stuck = append(stuck, id)
		}
	}
	slices.Sort(stuck)
	r.log.Error("skipjack: handlers ignored their cancelled contexts; returning without them", "jobs", stuck, "grace", grace)
	return stuck
}

// forget drops e from the held set; r.mu must be held.
func (r *runner[T]) forget(e *entry[T]) {
	if r.held[e.row.ID] != e {
		return
	}
	delete(r.held, e.row.ID)
	if e.settled != nil {
		close(e.settled)
	}
	if r.owner != nil {
		r.owner.nudge()
	}
}

// settled takes back a batch of results the completer wrote: the jobs are
// no longer held, whether the statement matched them or their lease was
// lost. It wakes the fetcher: capacity is free, and for a limited or
// serial queue the jobs these held back can be claimed now. When this
// worker cannot claim them itself (it is stopping, or has less room than
// a claim needs) and its last claim came back short (jobs were held back),
// it tells the queue's workers in other processes (see notifySettled).
func (r *runner[T]) settled(batch []*entry[T]) {
	r.mu.Lock()
	for _, e := range batch {
		r.forget(e)
	}
	full := r.stopped || r.heldCap.capLocked(time.Now())-r.inflight < r.minClaim
	r.mu.Unlock()
	signal(r.capacityFreed)
	if r.spec.Serial || r.spec.limited() {
		signal(r.claimable)
		// After a claim that took all it asked for, nothing was held back
		// that others wait for: a burn-down sends no NOTIFY per batch.
		if full && r.lastShort.Load() && r.spec.settlesFree() {
			r.notifySettled()
		}
	}
}

// notifySettled wakes the workers of the queue in every process with a
// NOTIFY on its channel: jobs this worker settled free room that other
// processes' claims wait for (a slot of the concurrency limit, of a key's
// per-key limit, a serial key), which they would otherwise find only at
// their next poll (limitPoll, or PollInterval for a serial key). The
// requests of one pool coalesce into one NOTIFY in flight (owner.notify),
// so a worker sends at most one per statement's round trip however fast
// it settles jobs; a queue declared with notify: false has no channel and
// sends none.
func (r *runner[T]) notifySettled() {
	if r.spec.Channel == "" || r.owner == nil {
		return
	}
	o := acquire(r.w.pool)
	if !o.notify(r.spec.Channel) {
		o.release()
	}
}

// signal does a non-blocking send on a wake-up channel.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func idsAndClaims[T any](es []*entry[T]) ([]int64, []int32) {
	// Sorted by id: batched writes then lock rows in id order, so two of
	// them (an ack and a heartbeat, say) can never deadlock.
	sorted := slices.Clone(es)
	slices.SortFunc(sorted, func(a, b *entry[T]) int { return cmp.Compare(a.row.ID, b.row.ID) })
	ids := make([]int64, len(sorted))
	claims := make([]int32, len(sorted))
	for i, e := range sorted {
		ids[i], claims[i] = e.row.ID, e.row.Claim
	}
	return ids, claims
}

// newJob builds the handler's view of a claimed row, without its payload,
// in e itself (one allocation per claim, not per job), and points e.job at
// it.
func newJob[T any](e *entry[T]) {
	row := &e.row
	e.jobv = skipjack.Job[T]{
		ID:          row.ID,
		Attempt:     int(row.Attempt),
		MaxAttempts: int(row.MaxAttempts),
		Priority:    int(row.Priority),
		CreatedAt:   row.CreatedAt,
		RunAt:       row.RunAt,
		Rescues:     int(row.Rescues),
		Claim:       row.Claim,
	}
	e.jobv.Errors = decodeErrors(row.Errors)
	e.jobv.Trace = decodeTrace(row.Trace)
	e.job = &e.jobv
}

// missingTable reports whether err is Postgres's undefined_table.
func missingTable(err error) bool { return sqlState(err) == "42P01" }
