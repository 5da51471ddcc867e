package skipjackimpl

import (
	"context"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// withMiddleware returns handle wrapped in mws, the first outermost (see
// skipjack.Middleware), each given the job as info describes it. Nil
// entries are skipped; without middleware it returns handle itself, so a
// worker without any pays nothing per job. The list is copied: changing
// the caller's slice later changes nothing.
func withMiddleware[T any](handle func(context.Context, *skipjack.Job[T]) error, mws []skipjack.Middleware, info func(*skipjack.Job[T]) skipjack.JobInfo) func(context.Context, *skipjack.Job[T]) error {
	var chain []skipjack.Middleware
	for _, mw := range mws {
		if mw != nil {
			chain = append(chain, mw)
		}
	}
	if len(chain) == 0 {
		return handle
	}
	return func(ctx context.Context, job *skipjack.Job[T]) error {
		c := middlewareCall[T]{chain: chain, handle: handle, job: job, info: info(job)}
		return c.run(ctx, 0)
	}
}

// middlewareCall is one attempt's way through a middleware chain.
type middlewareCall[T any] struct {
	chain  []skipjack.Middleware
	handle func(context.Context, *skipjack.Job[T]) error
	job    *skipjack.Job[T]
	info   skipjack.JobInfo
}

// run runs the chain from its i-th middleware on, with ctx; past the last
// one, the handler. Each next runs the rest of the chain from where its
// middleware stands, however often it is called, and passes ctx on when
// given nil.
func (c *middlewareCall[T]) run(ctx context.Context, i int) error {
	if i == len(c.chain) {
		return c.handle(ctx, c.job)
	}
	return c.chain[i](ctx, c.info, func(inner context.Context) error {
		if inner == nil {
			inner = ctx
		}
		return c.run(inner, i+1)
	})
}
