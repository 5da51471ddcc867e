package skipjackimpl

import (
	"context"
	"fmt"
)

// releaser gives prefetched jobs back to the queue, pending again for
// other workers: those of a stopping or paused run, those an operator
// cancelled before they started, those a run in doubt lets go, and those a
// claim brought back after its run stopped. It owns the jobs whose release
// failed (unreleased); the held jobs it lets go are the run's, under the
// run's mu.
type releaser[T any] struct {
	r *runner[T]
	// unreleased are prefetched jobs whose release failed (guarded by
	// r.mu): they stay held, so heartbeats keep renewing their leases,
	// until a heartbeat releases them (retry). Forgotten instead, they
	// would stay running under a worker that proves itself alive, which
	// no rescue takes them from.
	unreleased []*entry[T]
}

// release makes prefetched jobs pending again for other workers.
func (rel *releaser[T]) release(es []*entry[T]) {
	if len(es) == 0 {
		return
	}
	r := rel.r
	ids, claims := idsAndClaims(es)
	ctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
	n, err := r.store.Release(ctx, ids, claims)
	cancel()
	if err != nil {
		r.log.Warn("skipjack: releasing prefetched jobs failed; they stay held and the next heartbeat releases them",
			"error", fmt.Errorf("release %s: %w", r.spec.Name, err), "jobs", len(es))
		r.mu.Lock()
		rel.unreleased = append(rel.unreleased, es...)
		r.mu.Unlock()
		return
	}
	r.log.Debug("skipjack: released prefetched jobs", "jobs", n)
	rows := make([]ClaimedRow, len(es))
	for i, e := range es {
		rows[i] = e.row
	}
	r.claimer.floor.released(rows)
	r.mu.Lock()
	for _, e := range es {
		r.forget(e)
	}
	r.mu.Unlock()
}

// retry releases again the prefetched jobs whose release failed
// (unreleased) and that the run still holds: a heartbeat that found one
// taken by a rescuer already let go of it.
func (rel *releaser[T]) retry() {
	r := rel.r
	r.mu.Lock()
	var es []*entry[T]
	for _, e := range rel.unreleased {
		if r.held[e.row.ID] == e && !e.lost.Load() {
			es = append(es, e)
		}
	}
	rel.unreleased = nil
	r.mu.Unlock()
	rel.release(es)
}
