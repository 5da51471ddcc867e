package skipjack

import (
	"context"
	"errors"

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
	run func(context.Context) error
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
	if w == nil || w.run == nil {
		return errors.New("skipjack: Run of a Worker not created by a queue package's NewWorker")
	}
	return w.run(ctx)
}

// setRun is what link.SetWorkerRun calls.
func (w *Worker[P]) setRun(run func(context.Context) error) { w.run = run }

func init() {
	link.SetWorkerRun = func(w any, run func(context.Context) error) {
		w.(interface {
			setRun(func(context.Context) error)
		}).setRun(run)
	}
}
