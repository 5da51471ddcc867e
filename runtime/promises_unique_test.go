package skipjack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// TestUniqueRetrySharedKey retries failed unique jobs that share keys, in
// one call with the ids in no particular order: for each key only the
// lowest id is retried ("all but the first" stay failed), a key that a
// live job holds is retried for none, and Retry neither fails nor makes a
// duplicate. Then, with the first of a key failed again and left out of
// the call, the lowest id among those passed is the one retried.
//
// Kills unique-retry-all-sharing-a-key and unique-retry-none-sharing-a-key.
func TestUniqueRetrySharedKey(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()

	failed := func(key string) int64 {
		t.Helper()
		id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := uniq.Cancel(ctx, pool, id); err != nil || n != 1 {
			t.Fatalf("Cancel %d: (%d, %v)", id, n, err)
		}
		return id
	}
	a1, b1, a2, c1, a3, b2 := failed("a"), failed("b"), failed("a"), failed("c"), failed("a"), failed("b")
	holder, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "c"})
	if err != nil {
		t.Fatal(err)
	}

	n, err := uniq.Retry(ctx, pool, a3, b2, c1, a1, a2, b1)
	if err != nil || n != 2 {
		t.Fatalf("Retry of a1..a3, b1, b2, c1: (%d, %v), want (2, nil): a1 and b1", n, err)
	}
	want := map[int64]string{a1: "pending", b1: "pending", a2: "failed", a3: "failed", b2: "failed", c1: "failed", holder: "pending"}
	checkStates := func(when string) {
		t.Helper()
		for id, r := range readRows(t, pool, "uniq") {
			if r.State != want[id] {
				t.Errorf("%s: job %d is %s, want %s", when, id, r.State, want[id])
			}
		}
		held := uniqIDs(t, pool)
		if held["a"] != want2(want, a1, a2) || held["b"] != b1 || held["c"] != holder || len(held) != 3 {
			t.Errorf("%s: keys held by %v", when, held)
		}
	}
	checkStates("after the first Retry")

	// The keys are held now: retrying the rest changes nothing.
	if n, err := uniq.Retry(ctx, pool, a2, a3, b2, c1); err != nil || n != 0 {
		t.Errorf("Retry while the keys are held: (%d, %v), want (0, nil)", n, err)
	}
	checkStates("after the second Retry")

	// a1 fails again and is left out: a2, the lowest id passed, wins.
	if n, err := uniq.Cancel(ctx, pool, a1); err != nil || n != 1 {
		t.Fatalf("Cancel a1: (%d, %v)", n, err)
	}
	if n, err := uniq.Retry(ctx, pool, a3, a2); err != nil || n != 1 {
		t.Errorf("Retry of a2, a3 with a1 failed: (%d, %v), want (1, nil): a2", n, err)
	}
	want[a1], want[a2] = "failed", "pending"
	checkStates("after a1 failed again")
}

// want2 returns whichever of a and b is pending in want.
func want2(want map[int64]string, a, b int64) int64 {
	if want[a] == "pending" {
		return a
	}
	return b
}

// TestUniqueEnqueueManyOptions enqueues a unique batch with RunAt and with
// Delay: the inserted jobs carry the option, exactly, and duplicates of
// them (of the scheduled jobs too: pending counts whatever its run_at) are
// skipped and reported as duplicates.
//
// Kills enqueue-many-runat-ignored (unique batch) and
// unique-duplicate-id-dropped.
func TestUniqueEnqueueManyOptions(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	at := micro(time.Now().Add(5 * time.Hour))
	n, err := uniq.EnqueueMany(ctx, pool, []uniq.Payload{{Key: "x", N: 1}, {Key: "y", N: 2}, {Key: "x", N: 3}}, skipjack.RunAt(at))
	if err != nil || n != 2 {
		t.Fatalf("EnqueueMany with RunAt: (%d, %v), want (2, nil)", n, err)
	}
	n, err = uniq.EnqueueMany(ctx, pool, []uniq.Payload{{Key: "y", N: 4}, {Key: "z", N: 5}}, skipjack.Delay(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("EnqueueMany with Delay: (%d, %v), want (1, nil)", n, err)
	}
	byN := map[int64]row{}
	for _, r := range readRows(t, pool, "uniq") {
		byN[r.N] = r
	}
	if len(byN) != 3 {
		t.Fatalf("jobs %v, want n = 1, 2, 5", byN)
	}
	for _, n := range []int64{1, 2} {
		if r, ok := byN[n]; !ok || !r.RunAt.Equal(at) {
			t.Errorf("job n=%d: run_at %v (present %v), want %v", n, r.RunAt, ok, at)
		}
	}
	if r, ok := byN[5]; !ok || r.RunAt.Sub(r.CreatedAt) != time.Minute {
		t.Errorf("job n=5: run_at - created_at = %v (present %v), want 1m", r.RunAt.Sub(r.CreatedAt), ok)
	}
	id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "x", N: 6})
	if !errors.Is(err, skipjack.ErrDuplicate) || id != byN[1].ID {
		t.Errorf("Enqueue of a scheduled job's key: (%d, %v), want (%d, ErrDuplicate)", id, err, byN[1].ID)
	}
}
