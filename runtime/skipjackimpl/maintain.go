package skipjackimpl

import (
	"context"
	"fmt"
	"time"
)

const (
	// maintainBatch bounds the rows one rescue or prune statement touches.
	maintainBatch = 1000
	// maintainRounds bounds the statements of one rescue or prune run.
	maintainRounds = 10
	// pruneEvery is how often retained jobs are pruned, at most; queues
	// that retain jobs for less than two minutes prune every half
	// retention, but not more often than minPruneEvery.
	pruneEvery    = time.Minute
	minPruneEvery = time.Second
)

// maintainLoop rescues jobs whose lease lapsed (every Lease/2, with
// jitter, starting at once) and, when the queue retains finished jobs,
// prunes old ones (see pruneInterval), until stop is closed. Every worker does
// this: both statements are cheap indexed queries that skip locked rows.
func (r *runner[T]) maintainLoop(stop <-chan struct{}) {
	rescue := time.NewTimer(0)
	defer rescue.Stop()
	every := r.pruneInterval()
	prune := time.NewTimer(jitter(every))
	defer prune.Stop()
	pruning := r.spec.RetainCompleted > 0 || r.spec.RetainFailed > 0
	if !pruning {
		prune.Stop()
	}
	for {
		select {
		case <-stop:
			return
		case <-rescue.C:
			if err := r.rescue(); err != nil {
				r.log.Warn("skipjack: rescuing lapsed leases failed", "error", err)
			}
			rescue.Reset(jitter(r.spec.Lease / 2))
		case <-prune.C:
			if err := r.prune(); err != nil {
				r.log.Warn("skipjack: pruning finished jobs failed", "error", err)
			}
			prune.Reset(jitter(every))
		}
	}
}

// pruneInterval is how often the queue's retained jobs are pruned: every
// minute, or every half retention for shorter retentions, but at most once
// a second.
func (r *runner[T]) pruneInterval() time.Duration {
	every := pruneEvery
	for _, keep := range []time.Duration{r.spec.RetainCompleted, r.spec.RetainFailed} {
		if keep > 0 {
			every = min(every, max(keep/2, minPruneEvery))
		}
	}
	return every
}

// rescue makes jobs whose lease lapsed pending again and wakes the fetcher
// when it found any.
func (r *runner[T]) rescue() error {
	total, err := inRounds(func(ctx context.Context) (int64, error) {
		return r.store.Rescue(ctx, maintainBatch)
	})
	if err != nil {
		return fmt.Errorf("rescue %s: %w", r.spec.Name, err)
	}
	if total > 0 {
		r.log.Info("skipjack: rescued jobs whose lease lapsed", "jobs", total)
		signal(r.poke)
	}
	return nil
}

// prune deletes retained jobs older than the queue's retention.
func (r *runner[T]) prune() error {
	total, err := inRounds(func(ctx context.Context) (int64, error) {
		return r.store.Prune(ctx, r.spec.RetainCompleted, r.spec.RetainFailed, maintainBatch)
	})
	if err != nil {
		return fmt.Errorf("prune %s: %w", r.spec.Name, err)
	}
	if total > 0 {
		r.log.Debug("skipjack: pruned finished jobs", "jobs", total)
	}
	return nil
}

// inRounds runs a bounded maintenance statement (each run touches at most
// maintainBatch rows) until a run touches fewer or maintainRounds have run,
// each with its own deadline, and returns the rows touched in all.
func inRounds(stmt func(ctx context.Context) (int64, error)) (int64, error) {
	var total int64
	for range maintainRounds {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		n, err := stmt(ctx)
		cancel()
		if err != nil {
			return total, err
		}
		total += n
		if n < maintainBatch {
			break
		}
	}
	return total, nil
}
