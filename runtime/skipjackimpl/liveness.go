package skipjackimpl

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// liveness is one run's row in the schema's workers table: the run proves
// that it is alive by renewing it every Lease/3, and rescue takes a job
// whose lease lapsed only from a run whose row expired or is gone (see
// heartbeat.go). It has no lock: the time of the last proof is atomic.
type liveness struct {
	store store
	id    string // the run's row, and the worker column of its claims
	lease time.Duration
	name  string // the queue's
	log   *slog.Logger
	// at is when the last renewal that succeeded started, nil before the
	// first. It keeps time.Now's monotonic reading: a proof's age measured
	// on the wall clock would jump with every step of the system clock (an
	// NTP correction, a VM resumed), cancelling every handler when the clock
	// steps forward and hiding a real loss of contact when it steps back.
	at atomic.Pointer[time.Time]
}

// loop renews the run's row every Lease/3, until stop is closed.
func (l *liveness) loop(stop <-chan struct{}) {
	interval := l.lease / 3
	tick(stop, interval, func() {
		if err := l.renew(interval); err != nil {
			l.log.Warn("skipjack: proving this worker alive failed; its jobs may be rescued if it keeps failing", "error", err)
		}
	})
}

// tick calls f every interval until stop is closed.
func tick(stop <-chan struct{}, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		f()
	}
}

// renew renews the run's row, on a statement bounded by timeout (at least
// a second), and records when the renewal started.
func (l *liveness) renew(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	defer cancel()
	start := time.Now()
	if err := l.store.Live(ctx, l.id, l.lease); err != nil {
		return fmt.Errorf("live %s: %w", l.name, err)
	}
	l.provenAt(start)
	return nil
}

// provenAt records that the run was proven alive at t, unless a later
// proof is recorded already.
func (l *liveness) provenAt(t time.Time) {
	for {
		old := l.at.Load()
		if old != nil && !t.After(*old) || l.at.CompareAndSwap(old, &t) {
			return
		}
	}
}

// doubting reports whether the run's last proof of life is more than
// proof old at now. Both times come from time.Now, so the age is measured
// on the monotonic clock.
func (l *liveness) doubting(now time.Time, proof time.Duration) bool {
	at := l.at.Load()
	return at != nil && now.Sub(*at) > proof
}

// gone marks the run's row expired and stopped when Run returns, so that
// the jobs it could not settle (handlers that ignored shutdown, a final
// flush that failed) are rescued as soon as their leases lapse, without
// counting a rescue against them: the worker did not crash.
func (l *liveness) gone() {
	ctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
	defer cancel()
	if err := l.store.Gone(ctx, l.id); err != nil {
		l.log.Warn("skipjack: marking this worker stopped in the workers table failed; its leftover jobs are rescued once its row expires", "error", err)
	}
}

// liveID returns the id under which one run of a worker proves it is alive
// and claims jobs: the WorkerID with a suffix of its own, so that a
// process restarted with the same WorkerID (a StatefulSet's pod name, say)
// never vouches for the jobs its dead predecessor held.
func liveID(workerID string) string {
	return storableText(workerID) + "/" + randomHex()
}
