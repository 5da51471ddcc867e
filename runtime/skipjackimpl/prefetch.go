package skipjackimpl

import (
	"sync"
	"time"
)

// heldCap decides how many jobs a run may hold, prefetched plus running:
// the fetcher reserves room under it (reserve), and a settled or finished
// job frees room under it (settled, finishAt). It owns whether a limit of
// the queue binds (bindingUntil), under the run's mu.
type heldCap struct {
	mu *sync.Mutex // the run's; guards bindingUntil
	// most is what the run holds while prefetching is not free:
	// prefetched + running.
	most int
	// prefetched is what it holds while it is: twice Concurrency.
	prefetched int
	// prefetchFree is set for a limited queue that may prefetch (see
	// prefetchesFree), outside a RunGroup: it holds up to 2×Concurrency,
	// as an unlimited queue does, except until bindingUntil, set when a
	// claim came back short while due jobs waited: a limit binds, and a
	// prefetched job would hold a slot of it without running.
	prefetchFree bool
	bindingUntil time.Time
}

// newHeldCap returns the cap of a run of a worker of spec with the given
// Concurrency, whose bindingUntil mu guards.
func newHeldCap(spec QueueSpec, concurrency int, mu *sync.Mutex) heldCap {
	most := 2 * concurrency
	if spec.limited() {
		// A queue with limits prefetches nothing while a limit binds (see
		// capLocked): a prefetched job would count against the
		// concurrency limit without running. A queue with a rate limit
		// never prefetches: its jobs would start later than the claims the
		// rate limit counted.
		most = concurrency
	}
	return heldCap{
		mu:           mu,
		most:         most,
		prefetched:   2 * concurrency,
		prefetchFree: prefetchesFree(spec, concurrency),
	}
}

// capLocked returns how many jobs the run may hold (prefetched plus
// running) at now: most, or twice Concurrency for a queue whose
// concurrency or per-key limit does not bind (prefetchFree), as for an
// unlimited queue (issue 43: without prefetch, a limited queue's handlers
// waited for every claim). A limit that does not bind leaves room for the
// prefetched jobs, and every claim still counts them against the limit, so
// the limit holds as exactly as without; once a claim comes back short
// while due jobs wait (noteBinding), the run holds no more than it runs
// for limitBindHold. Not in a RunGroup, whose claims take only what its
// budget lets start (runIn clears prefetchFree for a prepaid run). Called
// with the run's mu held.
func (h *heldCap) capLocked(now time.Time) int {
	if h.prefetchFree && !now.Before(h.bindingUntil) {
		return h.prefetched
	}
	return h.most
}

// prefetchesFree reports whether a worker of spec with the given
// Concurrency may prefetch while the queue's limits do not bind (see
// capLocked): a queue with a concurrency or per-key limit and no rate
// limit, whose concurrency limit, if any, is at least limitPrefetchRatio
// times the worker's Concurrency. Against a smaller limit a worker's
// prefetched jobs would be a large share of it, and a worker that frees
// and takes back its own slots sees no short claim, so it would keep them
// held while other processes' handlers wait for slots.
func prefetchesFree(spec QueueSpec, concurrency int) bool {
	return spec.limited() && spec.RateCount == 0 &&
		(spec.LimitConcurrency == 0 || spec.LimitConcurrency >= limitPrefetchRatio*concurrency)
}

// limitPrefetchRatio is how many times a worker's Concurrency a queue's
// concurrency limit must be for the worker to prefetch (prefetchesFree).
const limitPrefetchRatio = 8

// limitBindHold is how long a run of a limited queue prefetches nothing
// after a claim that a limit held back.
const limitBindHold = 5 * time.Second

// noteBinding records that a claim came back short while due jobs waited:
// a limit binds (see capLocked).
func (h *heldCap) noteBinding(now time.Time) {
	h.mu.Lock()
	h.bindingUntil = now.Add(limitBindHold)
	h.mu.Unlock()
}
