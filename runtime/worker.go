package skipjack

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/skipjack-dev/skipjack/runtime/internal/link"
)

// Worker runs a handler on the jobs of one queue whose payload type is P.
// Every generated queue package declares its Worker as Worker[Payload] and
// creates it with its NewWorker function, which takes the handler, the pool
// the handler may use and a WorkerConfig (whose zero value is a good
// production default).
//
// A worker runs Concurrency handlers at once and claims at most Concurrency
// further jobs ahead of them. Its own statements (claims, acknowledgements,
// heartbeats, maintenance) run on a small control pool of its own, built
// from the given pool's configuration, so they never wait for a connection
// behind handlers: size the pool for the handlers of all the workers sharing
// it. Wake-ups come from one LISTEN connection per process and database
// (none with PollOnly). A job rescued twice (its workers died while it ran)
// runs alone among the workers sharing the pool, so that a job whose handler
// kills the process fails without failing the jobs beside it.
type Worker[P any] struct {
	run func(context.Context, *link.Group) error
}

// Run claims and works jobs until ctx is cancelled, then shuts down
// gracefully and returns nil: it stops claiming, releases the jobs it
// claimed but did not start, lets running handlers finish (cancelling their
// contexts once WorkerConfig.ShutdownTimeout has passed since ctx was
// cancelled, and releasing those jobs with their attempt restored) and
// flushes the outstanding acknowledgements. Every goroutine Run started has
// ended when it returns. Database errors never make Run return: it logs them
// and retries with backoff. A Worker runs once at a time; Run returns an
// error if it is already running.
func (w *Worker[P]) Run(ctx context.Context) error {
	return w.runWith(ctx, nil)
}

func (w *Worker[P]) runWith(ctx context.Context, g *link.Group) error {
	if w == nil || w.run == nil {
		return errors.New("skipjack: Run of a Worker not created by a queue package's NewWorker")
	}
	return w.run(ctx, g)
}

// setRun is what link.SetWorkerRun calls.
func (w *Worker[P]) setRun(run func(context.Context, *link.Group) error) { w.run = run }

func init() {
	link.SetWorkerRun = func(w any, run func(context.Context, *link.Group) error) {
		w.(interface {
			setRun(func(context.Context, *link.Group) error)
		}).setRun(run)
	}
}

// GroupWorker is a worker that RunGroup runs: every *Worker[P] of every
// generated queue package is one.
type GroupWorker interface {
	// Run runs the worker on its own, as Worker.Run documents.
	Run(ctx context.Context) error
	runWith(ctx context.Context, g *link.Group) error
}

// GroupConfig configures RunGroup.
type GroupConfig struct {
	// Concurrency is how many handlers run at once in total, over all the
	// group's workers; each worker's own WorkerConfig.Concurrency still
	// caps its share. 0 sets no shared cap: the workers then only share
	// RunGroup's one shutdown. Negative is an error.
	Concurrency int
	// Middleware wraps the handler of every attempt of every worker of
	// the group, the first outermost, outside each worker's own
	// WorkerConfig.Middleware (see Middleware). Default none.
	Middleware []Middleware
}

// RunGroup runs workers (of any queues) until ctx is cancelled, with at
// most cfg.Concurrency of their handlers running at once in total, and
// shuts them all down together, each as Worker.Run documents; it returns
// when every worker has returned. Handler slots that free up while several
// workers have jobs waiting go to those workers in turn, one slot each, so a
// queue with a deep backlog cannot starve a quiet one. Jobs a worker
// claimed wait for a slot prefetched (their leases renewed), so give each
// worker a Concurrency no larger than it needs. A worker of a queue with
// limits (limits.concurrency or limits.rate) claims only as many jobs as
// it holds free slots for, so its claimed jobs never hold the queue's
// limits (which count across processes) while they wait. A handler that
// ignores its cancelled context holds its slot of the group until its
// worker abandons the attempt, the queue's timeout plus its lease after it
// started (the job is then retried), and gives it back then even if it
// never returns; it keeps its slot of its own worker's Concurrency until
// it returns.
//
// If a worker's Run fails (it was already running, say, or the database
// lacks its migrations), RunGroup stops the others and returns the errors
// joined.
func RunGroup(ctx context.Context, cfg GroupConfig, workers ...GroupWorker) error {
	if cfg.Concurrency < 0 {
		return fmt.Errorf("skipjack: RunGroup: GroupConfig.Concurrency is %d, want 0 (no shared cap) or more", cfg.Concurrency)
	}
	if len(workers) == 0 {
		return errors.New("skipjack: RunGroup: no workers")
	}
	for i, w := range workers {
		if w == nil {
			return fmt.Errorf("skipjack: RunGroup: worker %d is nil", i)
		}
	}
	group := &link.Group{}
	if cfg.Concurrency > 0 {
		group.Budget = link.NewBudget(cfg.Concurrency)
	}
	if len(cfg.Middleware) > 0 {
		group.Middleware = cfg.Middleware
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			if err := w.runWith(ctx, group); err != nil {
				errs[i] = err
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
