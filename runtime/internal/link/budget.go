package link

import "sync"

// Budget is the handler budget of a group of workers (skipjack.RunGroup):
// at most n handlers hold a token at once, and tokens that free up while
// workers wait go to the waiting workers in turn, one token each, so that a
// busy worker cannot starve a quiet one.
type Budget struct {
	mu      sync.Mutex
	free    int
	waiting [][]chan struct{} // per member, in arrival order
	queued  int               // len of all of waiting together
	next    int               // the member whose turn it is
}

// NewBudget returns a budget of n tokens.
func NewBudget(n int) *Budget { return &Budget{free: n} }

// Join adds a member and returns its number, which Acquire takes.
func (b *Budget) Join() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting = append(b.waiting, nil)
	return len(b.waiting) - 1
}

// Acquire takes a token for member, waiting for one if none is free. It
// returns false, holding no token, when stop is closed first.
func (b *Budget) Acquire(member int, stop <-chan struct{}) bool {
	b.mu.Lock()
	if b.free > 0 && b.queued == 0 {
		b.free--
		b.next = member + 1 // the turn passes on from the last taker
		b.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	b.waiting[member] = append(b.waiting[member], ch)
	b.queued++
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-stop:
	}
	b.mu.Lock()
	q := b.waiting[member]
	for i, c := range q {
		if c == ch {
			b.waiting[member] = append(q[:i:i], q[i+1:]...)
			b.queued--
			b.mu.Unlock()
			return false
		}
	}
	b.mu.Unlock()
	// Granted while stopping: hand the token on.
	b.Release()
	return false
}

// AcquireUpTo takes between 1 and n tokens for member: it waits for the
// first as Acquire does, then takes as many more as are free, up to n,
// unless other members wait (their turn comes first). It returns 0,
// holding no token, when n < 1 or stop is closed first. A worker whose
// claims count against a queue's limits takes its tokens this way before
// it claims, so that it claims only jobs that can start at once.
func (b *Budget) AcquireUpTo(member, n int, stop <-chan struct{}) int {
	if n < 1 || !b.Acquire(member, stop) {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	extra := 0
	if b.queued == 0 {
		extra = min(b.free, n-1)
	}
	b.free -= extra
	return 1 + extra
}

// ReleaseN gives n tokens back, each as Release does.
func (b *Budget) ReleaseN(n int) {
	for range n {
		b.Release()
	}
}

// Release gives a token back: to the next waiting member in turn, or to
// the free tokens.
func (b *Budget) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued == 0 {
		b.free++
		return
	}
	for i := range len(b.waiting) {
		m := (b.next + i) % len(b.waiting)
		if q := b.waiting[m]; len(q) > 0 {
			close(q[0])
			b.waiting[m] = q[1:]
			b.queued--
			b.next = m + 1
			return
		}
	}
}
