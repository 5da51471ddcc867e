package skipjackimpl

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// fakeMember is a worker holding held jobs; shed drops the prefetched ones.
type fakeMember struct {
	held, prefetched atomic.Int64
	resumed          atomic.Int64
}

func (m *fakeMember) shed()        { m.held.Add(-m.prefetched.Swap(0)) }
func (m *fakeMember) holding() int { return int(m.held.Load()) }
func (m *fakeMember) resume()      { m.resumed.Add(1) }

func (m *fakeMember) ackInTx(int64, any) bool { return false }

// joinFake adds m to the owner of pool, as a running worker does, and
// returns the owner with the function that removes m again.
func joinFake(pool *pgxpool.Pool, m member) (*owner, func()) {
	o := acquire(pool)
	o.join(m, 1)
	return o, func() {
		o.leave(m, 1)
		o.release()
	}
}

// TestIsolation checks the isolation protocol: a suspect waits for the
// pool's running handlers and held jobs, ordinary handlers are refused
// meanwhile, a second suspect is refused, and release lets work resume.
func TestIsolation(t *testing.T) {
	t.Parallel()
	self, other := &fakeMember{}, &fakeMember{}
	self.held.Store(1) // the suspect
	other.held.Store(3)
	other.prefetched.Store(2)
	pool := new(pgxpool.Pool) // a key of its own
	iso, leave := joinFake(pool, self)
	defer leave()
	_, leaveOther := joinFake(pool, other)
	defer leaveOther()

	if !iso.enter() {
		t.Fatal("an ordinary handler was refused with no suspect around")
	}
	type result struct{ ok, alone bool }
	got := make(chan result, 1)
	go func() {
		ok, alone := iso.isolate(self, nil, nil)
		got <- result{ok, alone}
	}()
	waitUntil(t, iso.isolating)
	if iso.enter() {
		t.Error("an ordinary handler was admitted while a suspect waits")
	}
	if ok, _ := iso.isolate(other, nil, nil); ok {
		t.Error("a second suspect took the pool while the first waits")
	}
	waitUntil(t, func() bool { return other.holding() == 1 }) // shed its 2 prefetched jobs
	select {
	case r := <-got:
		t.Fatalf("isolate returned %+v while a handler runs and another worker holds a job", r)
	case <-time.After(50 * time.Millisecond):
	}
	iso.exit()
	other.held.Add(-1) // its running job's result is written
	if r := <-got; !r.ok || !r.alone {
		t.Fatalf("isolate = %+v, want ok and alone", r)
	}
	iso.endIsolation()
	if iso.isolating() || other.resumed.Load() != 1 || self.resumed.Load() != 1 {
		t.Errorf("after release: isolating %v, resumed %d and %d; want false, 1 and 1", iso.isolating(), other.resumed.Load(), self.resumed.Load())
	}
	if !iso.enter() {
		t.Error("an ordinary handler was refused after release")
	}
	iso.exit()
}

// TestIsolationGivesUp checks that a waiting suspect stops when its
// context ends and leaves the pool to ordinary handlers.
func TestIsolationGivesUp(t *testing.T) {
	t.Parallel()
	self := &fakeMember{}
	self.held.Store(1)
	iso, leave := joinFake(new(pgxpool.Pool), self)
	defer leave()
	if !iso.enter() {
		t.Fatal("refused")
	}
	defer iso.exit()
	done := make(chan struct{})
	close(done)
	if ok, _ := iso.isolate(self, done, nil); ok {
		t.Error("isolate succeeded after its context ended")
	}
	if iso.isolating() {
		t.Error("the pool stays isolated after the suspect gave up")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
