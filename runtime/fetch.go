package skipjack

import (
	"context"
	"fmt"
	"time"
)

// fetchLoop claims jobs until ctx is cancelled.
//
// It claims when it has reason to believe jobs are due (at start, after a
// notification, a poll tick or a rescue, when a job it retried or snoozed
// becomes due, and right after a claim that filled its limit) and capacity is free. Capacity is Concurrency running
// plus Concurrency prefetched; while the worker is busy it waits until
// half a batch is free, so claims stay batched. It also pauses while too
// many results wait to be flushed.
func (r *runner[T]) fetchLoop(ctx context.Context) {
	more := true
	var pollAt time.Time
	poll := time.NewTimer(0)
	defer poll.Stop()
	resetPoll := func(d time.Duration) {
		poll.Reset(d)
		pollAt = time.Now().Add(d)
	}
	resetPoll(jitter(r.cfg.PollInterval))
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	backingOff := false
	bo := loopBackoff{max: dbRetryMax}

	for ctx.Err() == nil {
		if more && !backingOff {
			if limit := r.claimLimit(); limit > 0 {
				n, err := r.claim(limit)
				if err != nil {
					d := bo.next()
					r.log.Warn("skipjack: claim failed; retrying", "error", err, "retry_in", d)
					retry.Reset(d)
					backingOff = true
					continue
				}
				bo.reset()
				more = n == limit
				resetPoll(jitter(r.cfg.PollInterval))
				continue
			}
		}
		if due := r.takeDue(); !due.IsZero() && due.Before(pollAt) {
			resetPoll(time.Until(due))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			more = true
		case <-r.poke:
			more = true
		case <-poll.C:
			more = true
			resetPoll(jitter(r.cfg.PollInterval))
		case <-r.slotFreed:
		case <-retry.C:
			backingOff = false
		}
	}
}

// takeDue returns and clears the earliest time at which a job this worker
// retried or snoozed becomes due, or the zero time.
func (r *runner[T]) takeDue() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.dueAt
	r.dueAt = time.Time{}
	return t
}

// noteDue records that a job becomes due after d, so that the fetcher
// polls then instead of waiting for its next PollInterval tick (no
// notification is sent for retries and snoozes).
func (r *runner[T]) noteDue(d time.Duration) {
	t := time.Now().Add(d)
	r.mu.Lock()
	if r.dueAt.IsZero() || t.Before(r.dueAt) {
		r.dueAt = t
	}
	r.mu.Unlock()
	signal(r.slotFreed)
}

// claimLimit returns how many jobs the next claim may take, or 0 when it
// should wait for capacity.
func (r *runner[T]) claimLimit() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acks)+len(r.resolves)+r.flushing >= r.backlogLimit {
		return 0
	}
	free := r.maxHeld - r.inflight
	limit := min(free, r.cfg.BatchSize)
	if limit < r.minClaim && r.inflight > 0 {
		return 0
	}
	return max(limit, 0)
}

// claim runs one claim statement and queues what it returns. The
// statement is not cancelled by shutdown (it is short and bounded): jobs
// it claimed are then released instead of lingering until their leases
// lapse.
func (r *runner[T]) claim(limit int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	start := time.Now()
	rows, err := r.store.Claim(ctx, limit, r.spec.Lease, r.cfg.WorkerID)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("claim %s: %w", r.spec.Name, err)
	}
	if r.cfg.Hooks != nil {
		r.cfg.Hooks.Claimed(r.spec.Name, len(rows), time.Since(start))
	}
	if len(rows) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	for i := range rows {
		e := &entry[T]{row: rows[i]}
		r.held[e.row.ID] = e
		r.queue = append(r.queue, e)
	}
	r.inflight += len(rows)
	r.mu.Unlock()
	for range rows {
		signal(r.avail)
	}
	return len(rows), nil
}
