package skipjack_test

import (
	"context"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tick"
)

// TestPeriodicSlotTiming runs two workers of the tick queue ("@every 1s")
// on one database and checks when each job of a slot after the one they
// inserted at start was inserted, by the database's clock: its run_at is
// the slot's instant, a whole second; exactly one job exists per slot
// although both workers insert every slot; no job was inserted before its slot (created_at >=
// run_at); and jobs are inserted at their slot, not one slot later: at
// least half of them within their own second (a schedule that inserts
// each slot an interval late does that for at most one, the slot a worker
// started late inserts at its start, however fast the machine; a correct
// one misses it only if most inserts are a whole second late).
//
// Kills periodic-inserted-one-slot-late, periodic-run-at-after-slot and
// periodic-slot-reinserted. The first slot a worker inserts at start (the
// latest slot, if less than a minute old) is checked exactly by
// TestScheduleSlots in skipjackimpl.
func TestPeriodicSlotTiming(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	cfg := skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)}
	for range 2 {
		start(t, tick.NewWorker(pool, func(context.Context, *tick.Job) error { return nil }, cfg))
	}
	// A worker inserts its first slot (the latest one) as it starts; the
	// slots after it are inserted by its timer, and those are judged.
	var startup time.Time
	waitFor(t, 30*time.Second, "the slot inserted at start", func() bool {
		return pool.QueryRow(ctx, `SELECT max(run_at) FROM skipjack.tick WHERE payload->>'n' = '1' HAVING count(*) > 0`).Scan(&startup) == nil
	})
	const want = 4
	type job struct{ runAt, createdAt time.Time }
	read := func() []job {
		rows, err := pool.Query(ctx, `SELECT run_at, created_at FROM skipjack.tick
			WHERE payload->>'n' = '1' AND run_at > $1 ORDER BY run_at, id`, startup)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []job
		for rows.Next() {
			var j job
			if err := rows.Scan(&j.runAt, &j.createdAt); err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitFor(t, 30*time.Second, "jobs of 4 slots after the one inserted at start", func() bool { return len(read()) >= want })
	// A slot being inserted right now may still get its second insert:
	// judge the slots up to the last one that is a second old.
	waitFor(t, 30*time.Second, "the last judged slot to be a second old", func() bool {
		return dbNow(t, pool).Sub(read()[want-1].runAt) > 2*time.Second
	})
	jobs := read()
	var ats []time.Time
	onTime := 0
	for _, j := range jobs {
		if j.runAt.After(jobs[want-1].runAt) {
			break
		}
		ats = append(ats, j.runAt)
		lag := j.createdAt.Sub(j.runAt)
		t.Logf("slot %s inserted %v after it", j.runAt.UTC().Format(time.TimeOnly), lag)
		if lag < 0 {
			t.Errorf("the job of slot %v was inserted at %v, before its slot", j.runAt, j.createdAt)
		}
		if lag < time.Second {
			onTime++
		}
	}
	checkContiguous(t, "@every 1s", ats)
	if len(ats) != want {
		t.Errorf("%d jobs for %d slots, want one per slot: %v", len(ats), want, ats)
	}
	// Half: the second worker may have started a second after the first,
	// and then inserted one judged slot at its start, on time whatever its
	// timer does.
	if onTime < want/2 {
		t.Errorf("%d jobs of %d slots were inserted within a second of their slot, want at least %d: slots are inserted an interval late", onTime, len(ats), want/2)
	}
}
