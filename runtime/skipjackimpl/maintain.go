package skipjackimpl

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

const (
	// maintainBatch bounds the rows one rescue or prune statement touches.
	maintainBatch = 1000
	// maintainBudget bounds how long one rescue or prune run keeps going
	// while its statements find full batches; when it runs out with work
	// left, the next run starts right away (after the other maintenance
	// task had its turn) instead of after the whole interval.
	maintainBudget = 5 * time.Second
	// pruneEvery is how often retained jobs are pruned, at most; queues
	// that retain jobs for less than two minutes prune every half
	// retention, but not more often than minPruneEvery.
	pruneEvery    = time.Minute
	minPruneEvery = time.Second
)

// maintainer is the maintenance one run does for its queue: rescue of
// jobs whose lease lapsed, pruning of retained jobs, and the periodic
// jobs of the queue's schedules (periodic.go). Every run of every worker
// does it; the statements skip locked rows and the slots table lets one
// insert per slot win. It holds no lock and never touches the run's state:
// it tells the run of rescued jobs through rescued.
type maintainer struct {
	store   store
	db      DBTX        // for the prune of finished workflows
	slots   slotQueries // nil: the queue has no schedules
	spec    QueueSpec
	log     *slog.Logger
	rescued func() // wakes the run's claimer
}

// loop rescues jobs whose lease lapsed (every Lease/2, with jitter,
// starting at once) and, when the queue retains finished jobs, prunes old
// ones (see pruneInterval), until stop is closed. Both statements are
// cheap indexed queries that skip locked rows.
func (m *maintainer) loop(stop <-chan struct{}) {
	rescue := time.NewTimer(0)
	defer rescue.Stop()
	every := m.pruneInterval()
	prune := time.NewTimer(jitter(every))
	defer prune.Stop()
	pruning := m.spec.RetainCompleted > 0 || m.spec.RetainFailed > 0 || m.spec.Workflow != nil
	if !pruning {
		prune.Stop()
	}
	for {
		select {
		case <-stop:
			return
		case <-rescue.C:
			more, err := m.rescue(stop)
			if err != nil {
				m.log.Warn("skipjack: rescuing lapsed leases failed", "error", err)
			}
			rescue.Reset(next(more, jitter(m.spec.Lease/2)))
		case <-prune.C:
			more, err := m.prune(stop)
			if err != nil {
				m.log.Warn("skipjack: pruning finished jobs failed", "error", err)
			}
			prune.Reset(next(more, jitter(every)))
		}
	}
}

// pruneInterval is how often the queue's retained jobs are pruned: every
// minute, or every half retention for shorter retentions, but at most once
// a second.
func (m *maintainer) pruneInterval() time.Duration {
	every := pruneEvery
	for _, keep := range []time.Duration{m.spec.RetainCompleted, m.spec.RetainFailed} {
		if keep > 0 {
			every = min(every, max(keep/2, minPruneEvery))
		}
	}
	return every
}

// next is when a maintenance task runs again: at once when its last run
// ran out of budget with work left, else after every.
func next(more bool, every time.Duration) time.Duration {
	if more {
		return 0
	}
	return every
}

// rescue makes jobs whose lease lapsed pending again and wakes the run's
// claimer when it found any. It reports whether it stopped with work left.
func (m *maintainer) rescue(stop <-chan struct{}) (bool, error) {
	total, more, err := inRounds(stop, maintainBudget, func(ctx context.Context) (int64, error) {
		return m.store.Rescue(ctx, maintainBatch)
	})
	if total > 0 {
		m.log.Info("skipjack: rescued jobs whose lease lapsed", "jobs", total)
		m.rescued()
	}
	if err != nil {
		return false, fmt.Errorf("rescue %s: %w", m.spec.Name, err)
	}
	return more, nil
}

// prune deletes retained jobs older than the queue's retention and, for
// a queue that workflows use, finished workflows (see pruneWorkflows). It
// reports whether it stopped with work left.
func (m *maintainer) prune(stop <-chan struct{}) (bool, error) {
	total, more, err := inRounds(stop, maintainBudget, func(ctx context.Context) (int64, error) {
		return m.store.Prune(ctx, m.spec.RetainCompleted, m.spec.RetainFailed, maintainBatch)
	})
	if total > 0 {
		m.log.Debug("skipjack: pruned finished jobs", "jobs", total)
	}
	if err != nil {
		return false, fmt.Errorf("prune %s: %w", m.spec.Name, err)
	}
	if m.spec.Workflow == nil || m.db == nil {
		return more, nil
	}
	flows, moreFlows, err := inRounds(stop, maintainBudget, func(ctx context.Context) (int64, error) {
		return pruneWorkflows(ctx, m.db, m.spec.Workflow, m.spec.Name, WorkflowRetention, maintainBatch)
	})
	if flows > 0 {
		m.log.Debug("skipjack: pruned finished workflows", "workflows", flows)
	}
	if err != nil {
		return false, fmt.Errorf("prune workflows of %s: %w", m.spec.Name, err)
	}
	return more || moreFlows, nil
}

// inRounds runs a bounded maintenance statement (each run touches at most
// maintainBatch rows per kind) again and again while its runs find full
// batches, each with its own deadline, until budget has passed or stop is
// closed. It returns the rows touched in all and whether it stopped with
// work left.
func inRounds(stop <-chan struct{}, budget time.Duration, stmt func(ctx context.Context) (int64, error)) (total int64, more bool, err error) {
	end := time.Now().Add(budget)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		n, err := stmt(ctx)
		cancel()
		if err != nil {
			return total, false, err
		}
		total += n
		if n < maintainBatch {
			return total, false, nil
		}
		select {
		case <-stop:
			return total, true, nil
		default:
		}
		if time.Now().After(end) {
			return total, true, nil
		}
	}
}
