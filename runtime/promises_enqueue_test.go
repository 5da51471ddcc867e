package skipjack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestEnqueueOptionsRows enqueues with every combination of RunAt, Delay
// and Priority, one job at a time and in batches, on a plain, a priority
// and a unique queue, and checks each row's run_at and priority against
// the values computed from the options:
//   - no option: run_at is the insert's now() (= created_at), priority 0;
//   - RunAt(t): run_at is t, to the microsecond;
//   - Delay(d): run_at is the database's now() plus d: exactly created_at
//   - d where the insert computes it, else within d of the now() of two
//     statements around the call;
//   - Priority(p): priority p on a priority queue, refused elsewhere.
//
// Kills enqueue-many-drops-priority, enqueue-delay-subtracted and
// enqueue-many-runat-ignored.
func TestEnqueueOptionsRows(t *testing.T) {
	t.Parallel()
	for _, q := range promiseQueues() {
		t.Run(q.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 4)
			ctx := context.Background()
			const delay = 90 * time.Minute
			at := micro(time.Now().Add(3 * time.Hour))

			type call struct {
				name     string
				ns       []int64 // one: Enqueue; more: EnqueueMany
				opts     []skipjack.EnqueueOption
				priority int // want; -1: refused on a queue without priority
				runAt    string
			}
			prio := func(p int) (skipjack.EnqueueOption, int) {
				if q.priority {
					return skipjack.Priority(p), p
				}
				return nil, 0
			}
			p3, want3 := prio(3)
			p7, want7 := prio(7)
			calls := []call{
				{"Enqueue", []int64{1}, nil, 0, "now"},
				{"Enqueue RunAt", []int64{2}, []skipjack.EnqueueOption{skipjack.RunAt(at)}, 0, "at"},
				{"Enqueue Delay", []int64{3}, []skipjack.EnqueueOption{skipjack.Delay(delay)}, 0, "delay"},
				{"Enqueue Priority RunAt", []int64{4}, []skipjack.EnqueueOption{p3, skipjack.RunAt(at)}, want3, "at"},
				{"Enqueue Priority Delay", []int64{5}, []skipjack.EnqueueOption{skipjack.Delay(delay), p7}, want7, "delay"},
				{"EnqueueMany", []int64{10, 11, 12}, nil, 0, "now"},
				{"EnqueueMany Priority", []int64{20, 21, 22}, []skipjack.EnqueueOption{p7}, want7, "now"},
				{"EnqueueMany RunAt", []int64{30, 31, 32}, []skipjack.EnqueueOption{skipjack.RunAt(at)}, 0, "at"},
				{"EnqueueMany Delay", []int64{40, 41, 42}, []skipjack.EnqueueOption{skipjack.Delay(delay)}, 0, "delay"},
				{"EnqueueMany Priority RunAt", []int64{50, 51, 52}, []skipjack.EnqueueOption{p3, skipjack.RunAt(at)}, want3, "at"},
				{"EnqueueMany Priority Delay", []int64{60, 61, 62}, []skipjack.EnqueueOption{skipjack.Delay(delay), p7}, want7, "delay"},
			}
			for _, c := range calls {
				before := dbNow(t, pool)
				var n int64
				var err error
				if len(c.ns) == 1 {
					_, err = q.enqueue(ctx, pool, c.ns[0], c.opts...)
					n = 1
				} else {
					n, err = q.many(ctx, pool, c.ns, c.opts...)
				}
				after := dbNow(t, pool)
				if err != nil || n != int64(len(c.ns)) {
					t.Fatalf("%s: (%d, %v), want (%d, nil)", c.name, n, err, len(c.ns))
				}
				var got []row
				for _, r := range readRows(t, pool, q.table) {
					for _, want := range c.ns {
						if r.N == want {
							got = append(got, r)
						}
					}
				}
				if len(got) != len(c.ns) {
					t.Fatalf("%s: %d rows for payloads %v, want %d", c.name, len(got), c.ns, len(c.ns))
				}
				for _, r := range got {
					if r.Priority != c.priority {
						t.Errorf("%s: job n=%d has priority %d, want %d", c.name, r.N, r.Priority, c.priority)
					}
					if r.State != skipjack.StatePending || r.Attempt != 0 || r.MaxAttempts != maxAttempts(q.table) {
						t.Errorf("%s: job n=%d is %s, attempt %d of %d; want pending, 0 of %d", c.name, r.N, r.State, r.Attempt, r.MaxAttempts, maxAttempts(q.table))
					}
					switch c.runAt {
					case "now":
						if !r.RunAt.Equal(r.CreatedAt) {
							t.Errorf("%s: job n=%d run_at %v, want its created_at %v", c.name, r.N, r.RunAt, r.CreatedAt)
						}
					case "at":
						if !r.RunAt.Equal(at) {
							t.Errorf("%s: job n=%d run_at %v, want RunAt's %v", c.name, r.N, r.RunAt, at)
						}
					case "delay":
						if r.RunAt.Before(before.Add(delay)) || r.RunAt.After(after.Add(delay)) {
							t.Errorf("%s: job n=%d run_at %v, want now() + %v, within [%v, %v]", c.name, r.N, r.RunAt, delay, before.Add(delay), after.Add(delay))
						}
						if len(c.ns) == 1 || q.table == "uniq" {
							// One INSERT computes run_at and created_at.
							if d := r.RunAt.Sub(r.CreatedAt); d != delay {
								t.Errorf("%s: job n=%d run_at - created_at = %v, want exactly %v", c.name, r.N, d, delay)
							}
						}
					}
					if !r.RunAt.Equal(got[0].RunAt) {
						t.Errorf("%s: jobs of one call have run_at %v and %v, want one instant", c.name, got[0].RunAt, r.RunAt)
					}
				}
			}

			// Refused options insert nothing.
			before := len(readRows(t, pool, q.table))
			refused := []struct {
				name string
				opts []skipjack.EnqueueOption
			}{
				{"Priority(10)", []skipjack.EnqueueOption{skipjack.Priority(10)}},
				{"Priority(-1)", []skipjack.EnqueueOption{skipjack.Priority(-1)}},
				{"Delay(-1s)", []skipjack.EnqueueOption{skipjack.Delay(-time.Second)}},
			}
			if !q.priority {
				refused = append(refused, struct {
					name string
					opts []skipjack.EnqueueOption
				}{"Priority(0) on a queue without priority", []skipjack.EnqueueOption{skipjack.Priority(0)}})
			}
			for _, r := range refused {
				if _, err := q.enqueue(ctx, pool, 90, r.opts...); err == nil {
					t.Errorf("Enqueue with %s: no error", r.name)
				}
				if _, err := q.many(ctx, pool, []int64{91, 92}, r.opts...); err == nil {
					t.Errorf("EnqueueMany with %s: no error", r.name)
				}
			}
			if after := len(readRows(t, pool, q.table)); after != before {
				t.Errorf("refused calls inserted %d jobs, want 0", after-before)
			}
		})
	}
}

// maxAttempts is the max_attempts of a test queue (skipjack.yaml).
func maxAttempts(table string) int {
	if table == "fast" {
		return 3
	}
	return 25
}

// TestNeverClaimedBeforeRunAt schedules jobs an hour ahead in every way a
// producer can (Enqueue and EnqueueMany with Delay and with RunAt, a SQL
// INSERT), plus a job due in a second, then works the queue until two due
// jobs enqueued after them have run, on a plain, a priority and a unique
// queue. The claims that ran those (the first takes up to BatchSize due
// jobs at once) never took a scheduled job: every one is still pending
// with attempt 0 and claim 0, and the job due in a second ran, not before
// its run_at. No timing decides the verdict: the due jobs' runs are the
// signal that claims happened.
//
// Kills claim-ignores-run-at (plain queue) and claim-ignores-run-at-priority.
func TestNeverClaimedBeforeRunAt(t *testing.T) {
	t.Parallel()
	for _, q := range promiseQueues() {
		t.Run(q.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 8)
			ctx := context.Background()
			later := time.Now().Add(time.Hour)
			steps := []func() (int64, error){
				func() (int64, error) { return q.enqueue(ctx, pool, 1, skipjack.Delay(time.Hour)) },
				func() (int64, error) { return q.enqueue(ctx, pool, 2, skipjack.RunAt(later)) },
				func() (int64, error) { return q.many(ctx, pool, []int64{3, 4, 5}, skipjack.Delay(time.Hour)) },
				func() (int64, error) { return q.many(ctx, pool, []int64{6, 7, 8}, skipjack.RunAt(later)) },
				func() (int64, error) {
					tag, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO skipjack.%q (payload, run_at) VALUES ($1, now() + interval '1 hour')`, q.table),
						fmt.Sprintf(`{"n": 9, "key": %q}`, uniqKey(9)))
					return tag.RowsAffected(), err
				},
			}
			for i, step := range steps {
				if _, err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			var scheduled []int64
			for id := range readRows(t, pool, q.table) {
				scheduled = append(scheduled, id)
			}
			if len(scheduled) != 9 {
				t.Fatalf("%d scheduled jobs, want 9", len(scheduled))
			}
			soon, err := q.enqueue(ctx, pool, 50, skipjack.Delay(time.Second))
			if err != nil {
				t.Fatal(err)
			}

			type run struct {
				id, n int64
				runAt time.Time
				at    time.Time
			}
			var mu sync.Mutex
			var runs []run
			due := make(chan int64, 10)
			w := q.worker(pool, func(id, n int64, runAt time.Time) {
				mu.Lock()
				runs = append(runs, run{id, n, runAt, time.Now()})
				mu.Unlock()
				if n >= 50 {
					due <- n
				}
			}, skipjack.WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond, Logger: quietLogger(t)})
			stop := start(t, w)
			seen := map[int64]bool{}
			waitDue := func(n int64) {
				t.Helper()
				for !seen[n] {
					select {
					case got := <-due:
						seen[got] = true
					case <-time.After(15 * time.Second):
						t.Fatalf("the due job n=%d did not run", n)
					}
				}
			}
			for _, n := range []int64{100, 101} {
				if _, err := q.enqueue(ctx, pool, n); err != nil {
					t.Fatal(err)
				}
				waitDue(n)
			}
			waitDue(50) // the job due in a second
			stop()

			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				if r.n < 50 {
					t.Errorf("job n=%d (id %d), scheduled an hour ahead, ran", r.n, r.id)
				}
				if r.id == soon && r.at.Before(r.runAt) {
					t.Errorf("job due at %v started at %v, before its run_at", r.runAt, r.at)
				}
			}
			if len(runs) != 3 {
				t.Errorf("%d runs, want 3 (the due jobs, once each)", len(runs))
			}
			for id, r := range readRows(t, pool, q.table, scheduled...) {
				if r.State != skipjack.StatePending || r.Attempt != 0 || r.Claim != 0 {
					t.Errorf("scheduled job %d (n=%d) is %s, attempt %d, claim %d; want pending, 0, 0 (never claimed)", id, r.N, r.State, r.Attempt, r.Claim)
				}
			}
		})
	}
}
