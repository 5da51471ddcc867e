package skipjack_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tick"
)

// TestPeriodicWhilePoolExhausted checks that periodic jobs are inserted on
// the worker's control pool, as the rest of its maintenance is: the pool
// given to the worker has exactly Concurrency connections (as the docs
// advise), and handlers take every one of them and hold it for 8 seconds.
// The "@every 1s" slots of that time must still be inserted on time (each
// at most maxLate after its instant, generous for a loaded machine) and
// none may be lost. Inserted through the handlers' pool, each waited for a
// connection until the handlers let go (issue 40: 2-19 s late, and 15 slots
// lost under a 45 s hold).
func TestPeriodicWhilePoolExhausted(t *testing.T) {
	t.Parallel()
	const (
		concurrency = 3
		hold        = 8 * time.Second
		maxLate     = 3 * time.Second
		holder      = 100 // the payload of the jobs whose handlers hold a connection
	)
	pool := newQueues(t, concurrency)
	ctx := context.Background()
	admin := adminPool(t, pool)

	ps := make([]tick.Payload, concurrency)
	for i := range ps {
		ps[i] = tick.Payload{N: holder}
	}
	if n, err := tick.EnqueueMany(ctx, admin, ps); err != nil || n != concurrency {
		t.Fatalf("EnqueueMany = %d, %v; want %d, nil", n, err, concurrency)
	}
	var holding atomic.Int64
	allHeld := make(chan struct{})
	release := make(chan struct{})
	stop := start(t, tick.NewWorker(pool, func(ctx context.Context, job *tick.Job) error {
		if job.Payload.N != holder {
			return nil
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if holding.Add(1) == concurrency {
			close(allHeld)
		}
		<-release
		return nil
	}, skipjack.WorkerConfig{Concurrency: concurrency, Logger: quietLogger(t)}))

	select {
	case <-allHeld:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d of %d handlers took a connection within 30s", holding.Load(), concurrency)
	}
	heldFrom := time.Now()
	if n := pool.Stat().AcquiredConns(); n != concurrency {
		t.Fatalf("%d of the pool's %d connections taken while every handler holds one; want all", n, concurrency)
	}
	time.Sleep(hold) // the scenario: every handler connection taken for hold
	close(release)
	heldUntil := time.Now()
	// The first slot after the hold tells that the schedule went on.
	waitFor(t, 30*time.Second, "the slot after the hold to be inserted", func() bool {
		return queryInt(t, admin, `SELECT count(*) FROM skipjack.tick WHERE payload->>'n' = '1' AND run_at > $1`, heldUntil) > 0
	})
	stop()

	rows, err := admin.Query(ctx, `SELECT run_at, created_at FROM skipjack.tick WHERE payload->>'n' = '1' ORDER BY run_at`)
	if err != nil {
		t.Fatal(err)
	}
	type slot struct{ at, inserted time.Time }
	var got []slot
	for rows.Next() {
		var s slot
		if err := rows.Scan(&s.at, &s.inserted); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	ats := make([]time.Time, len(got))
	for i, s := range got {
		ats[i] = s.at
	}
	checkContiguous(t, "tick", ats)
	during, worst := 0, time.Duration(0)
	for _, s := range got {
		if s.at.Before(heldFrom) || s.at.After(heldUntil) {
			continue
		}
		during++
		late := s.inserted.Sub(s.at)
		worst = max(worst, late)
		if late > maxLate {
			t.Errorf("slot %s inserted %v late while handlers held the pool, want at most %v",
				s.at.UTC().Format(time.TimeOnly), late.Round(time.Millisecond), maxLate)
		}
	}
	if want := int(hold/time.Second) - 1; during < want {
		t.Errorf("%d slots inserted for the %v the pool was held, want at least %d", during, hold, want)
	}
	if !t.Failed() {
		t.Logf("%d slots while the pool was held for %v, the latest inserted %v after its instant", during, hold, worst.Round(time.Millisecond))
	}
}
