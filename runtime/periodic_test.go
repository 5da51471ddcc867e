package skipjack_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tick"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tock"
)

// The tick and tock queues keep completed jobs and have two schedules
// each: 0 is "@every 1s" with payload {n: 1}, 1 is "@every 8760h" (one slot
// a year, never due during a test) with payload {n: 2}. tick's schedules
// are missed: skip, tock's missed: once.

// year is the interval of schedule 1.
const year = 8760 * time.Hour

// slotFloor returns the last multiple of d since the Unix epoch at or
// before t: the latest "@every d" slot.
func slotFloor(t time.Time, d time.Duration) time.Time {
	ns := t.UnixNano()
	return time.Unix(0, ns-ns%int64(d))
}

// runTick is the child mode "tick": a worker of the tick queue.
func runTick(ctx context.Context, pool *pgxpool.Pool) error {
	w := tick.NewWorker(pool, func(context.Context, *tick.Job) error { return nil }, skipjack.WorkerConfig{Concurrency: 1})
	return w.Run(ctx)
}

// slots returns the run_at of the jobs of schedule n (the payload's n) of
// table, in order, failing the test if two jobs share a slot.
func slots(t *testing.T, pool *pgxpool.Pool, table string, n int) []time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), fmt.Sprintf(
		`SELECT run_at, count(*) FROM skipjack.%q WHERE payload->>'n' = $1 GROUP BY run_at ORDER BY run_at`, table), fmt.Sprint(n))
	if err != nil {
		t.Fatalf("read slots: %v", err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at time.Time
		var count int
		if err := rows.Scan(&at, &count); err != nil {
			t.Fatalf("scan: %v", err)
		}
		if count != 1 {
			t.Errorf("%s: %d jobs for slot %s, want 1", table, count, at.UTC().Format(time.TimeOnly+".000"))
		}
		out = append(out, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read slots: %v", err)
	}
	return out
}

// checkContiguous fails the test unless ats are consecutive "@every 1s"
// slots.
func checkContiguous(t *testing.T, what string, ats []time.Time) {
	t.Helper()
	for i, at := range ats {
		if !at.Equal(slotFloor(at, time.Second)) {
			t.Errorf("%s: run_at %v is not a slot of @every 1s", what, at)
		}
		if i > 0 && at.Sub(ats[i-1]) != time.Second {
			t.Errorf("%s: slots %v and %v are not consecutive", what, ats[i-1], at)
		}
	}
}

// seedSlot records slot as the last inserted slot of a queue's schedule,
// as if workers ran until then.
func seedSlot(t *testing.T, pool *pgxpool.Pool, queue string, schedule int, slot time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(),
		`INSERT INTO skipjack._skipjack_slots (queue, schedule, slot) VALUES ($1, $2, $3)`, queue, schedule, slot)
	if err != nil {
		t.Fatalf("seed slot: %v", err)
	}
}

// lastSlot reads the last inserted slot of a queue's schedule.
func lastSlot(t *testing.T, pool *pgxpool.Pool, queue string, schedule int) time.Time {
	t.Helper()
	var at time.Time
	err := pool.QueryRow(context.Background(),
		`SELECT slot FROM skipjack._skipjack_slots WHERE queue = $1 AND schedule = $2`, queue, schedule).Scan(&at)
	if err != nil {
		t.Fatalf("read last slot: %v", err)
	}
	return at
}

// TestPeriodicProcesses races 5 worker processes over the slots of
// "@every 1s": every slot gets exactly one job. Then all of them are killed
// at a slot boundary and restarted after a few seconds: still one job per
// slot, and (missed: skip) no job for the slots missed while they were
// down.
func TestPeriodicProcesses(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	const processes = 5
	// The children connect under an application name of their own, so
	// that their sessions can be told from the test's.
	childURL, err := url.Parse(pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := childURL.Query()
	q.Set("application_name", "tick-child")
	childURL.RawQuery = q.Encode()
	startAll := func() []*child {
		cs := make([]*child, processes)
		for i := range cs {
			cs[i] = startChildURL(t, "tick", childURL.String())
		}
		return cs
	}
	childSessions := func() int64 {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'tick-child'`)
	}
	killAll := func(cs []*child) {
		if childSessions() == 0 {
			t.Fatal("no session carries the children's application name: the wait below would prove nothing")
		}
		for _, c := range cs {
			_ = c.cmd.Process.Kill()
		}
		for _, c := range cs {
			_ = c.wait()
		}
		// A statement a child sent just before it died still runs to its
		// end on the server, even one its backend has not read yet (and
		// shows idle): wait for the children's sessions to end, which
		// they do once they read past it, so the slots read next are all
		// there will be. Waiting for no session to be active was not
		// enough at load 20: a slot inserted by a killed child showed up
		// after the read, as if the restart had backfilled it.
		waitFor(t, 30*time.Second, "the killed workers' sessions to end", func() bool { return childSessions() == 0 })
	}
	count := func(since time.Time) int64 {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.tick WHERE run_at >= $1`, since)
	}

	cs := startAll()
	waitFor(t, 20*time.Second, "4 slots", func() bool { return count(time.Time{}) >= 4 })
	// Kill them all 2ms before the next slot: some may be inserting it.
	boundary := slotFloor(time.Now(), time.Second).Add(time.Second)
	time.Sleep(time.Until(boundary.Add(-2 * time.Millisecond)))
	killAll(cs)
	before := slots(t, pool, "tick", 1)
	checkContiguous(t, "before the kill", before)
	killedAfter := before[len(before)-1]

	// Down for at least two whole slots.
	time.Sleep(time.Until(killedAfter.Add(2200 * time.Millisecond)))
	restart := time.Now()
	cs = startAll()
	waitFor(t, 20*time.Second, "2 slots after the restart", func() bool { return count(restart.Add(-time.Second)) >= 2 })
	killAll(cs)

	all := slots(t, pool, "tick", 1)
	after := all[len(before):]
	checkContiguous(t, "after the restart", after)
	if !after[0].After(killedAfter.Add(time.Second)) {
		t.Errorf("first slot after the restart at %v is %v; the last before the kill was %v: missed slots were backfilled",
			restart, after[0], killedAfter)
	}
	if first := slotFloor(restart, time.Second); after[0].Before(first) {
		t.Errorf("first slot after the restart at %v is %v, want >= %v", restart, after[0], first)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.tick WHERE payload->>'n' <> '1'`); n != 0 {
		t.Errorf("%d jobs of the yearly schedule, want 0", n)
	}
	t.Logf("%d slots before the kill, %d after the restart, %d workers each time", len(before), len(after), processes)
}

// TestPeriodicMissedSkip starts a worker long after the last inserted
// slots: under missed: skip it inserts no job for the missed slots, only
// the current and next ones.
func TestPeriodicMissedSkip(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()
	now := time.Now()
	lastYearly := slotFloor(now, year).Add(-2 * year)
	seedSlot(t, pool, tick.Name, 0, slotFloor(now, time.Second).Add(-time.Hour))
	seedSlot(t, pool, tick.Name, 1, lastYearly)

	started := slotFloor(time.Now(), time.Second)
	stop := start(t, tick.NewWorker(pool, func(context.Context, *tick.Job) error { return nil },
		skipjack.WorkerConfig{Logger: quietLogger(t)}))
	// The first @every 1s job is inserted after every schedule's start-up.
	waitFor(t, 10*time.Second, "a job of @every 1s", func() bool { return len(slots(t, pool, "tick", 1)) > 0 })
	stop()

	secs := slots(t, pool, "tick", 1)
	if secs[0].Before(started) {
		t.Errorf("first @every 1s job at %v, before the worker started (%v): missed slots were backfilled", secs[0], started)
	}
	checkContiguous(t, "@every 1s", secs)
	if yearly := slots(t, pool, "tick", 2); len(yearly) != 0 {
		t.Errorf("yearly schedule: jobs at %v, want none (missed: skip)", yearly)
	}
	if got := lastSlot(t, pool, tick.Name, 1); !got.Equal(lastYearly) {
		t.Errorf("yearly schedule's last slot %v, want %v unchanged", got, lastYearly)
	}
	if s, err := tick.Stats(ctx, pool); err != nil || s.Running != 0 {
		t.Errorf("Stats: %+v, %v", s, err)
	}
}

// TestPeriodicMissedOnce starts a worker long after the last inserted
// slots: under missed: once it inserts one job for the missed slots, at
// the last missed slot, and a restart inserts no second one.
func TestPeriodicMissedOnce(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	now := time.Now()
	latestYearly := slotFloor(now, year)
	seedSlot(t, pool, tock.Name, 1, latestYearly.Add(-2*year))
	// Start early in a second, so the worker starts in the same second.
	for time.Now().Nanosecond() > 500_000_000 {
		time.Sleep(10 * time.Millisecond)
	}
	started := slotFloor(time.Now(), time.Second)
	seedSlot(t, pool, tock.Name, 0, started.Add(-time.Hour))

	handle := func(context.Context, *tock.Job) error { return nil }
	cfg := skipjack.WorkerConfig{Logger: quietLogger(t)}
	stop := start(t, tock.NewWorker(pool, handle, cfg))
	waitFor(t, 10*time.Second, "the missed jobs and a current one", func() bool {
		secs := slots(t, pool, "tock", 1)
		return len(slots(t, pool, "tock", 2)) > 0 && len(secs) > 0 && !secs[len(secs)-1].Before(started)
	})
	stop()

	check := func(when string) {
		t.Helper()
		if yearly := slots(t, pool, "tock", 2); len(yearly) != 1 || !yearly[0].Equal(latestYearly) {
			t.Errorf("%s: yearly jobs at %v, want one at the last missed slot %v", when, yearly, latestYearly)
		}
		secs := slots(t, pool, "tock", 1)
		if want := started.Add(-time.Second); !secs[0].Equal(want) {
			t.Errorf("%s: first @every 1s job at %v, want one at the last missed slot %v", when, secs[0], want)
		}
		checkContiguous(t, when, secs)
	}
	check("first run")
	lastBefore := slots(t, pool, "tock", 1)
	last := lastBefore[len(lastBefore)-1]

	// A restart finds nothing missed beyond what it runs now.
	start(t, tock.NewWorker(pool, handle, cfg))
	waitFor(t, 10*time.Second, "a job after the restart", func() bool {
		secs := slots(t, pool, "tock", 1)
		return secs[len(secs)-1].After(last)
	})
	check("after a restart")
}

// TestPeriodicOnceNeverRan starts a missed: once schedule that never ran:
// nothing was missed, so its first job is the current slot.
func TestPeriodicOnceNeverRan(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	started := slotFloor(time.Now(), time.Second)
	stop := start(t, tock.NewWorker(pool, func(context.Context, *tock.Job) error { return nil },
		skipjack.WorkerConfig{Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "a job of @every 1s", func() bool { return len(slots(t, pool, "tock", 1)) > 0 })
	stop()
	if secs := slots(t, pool, "tock", 1); secs[0].Before(started) {
		t.Errorf("first job at %v, before the worker started (%v)", secs[0], started)
	}
	if yearly := slots(t, pool, "tock", 2); len(yearly) != 0 {
		t.Errorf("yearly jobs at %v, want none", yearly)
	}
}
