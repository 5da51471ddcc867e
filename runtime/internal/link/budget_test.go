package link

import (
	"testing"
)

// TestBudgetTurns checks that tokens freed while several members wait go
// to the members in turn, not in arrival order: a member with many
// waiters cannot starve one with a single waiter.
func TestBudgetTurns(t *testing.T) {
	t.Parallel()
	b := NewBudget(1)
	busy, quiet := b.Join(), b.Join()
	if !b.Acquire(busy, nil) {
		t.Fatal("first Acquire failed")
	}
	granted := make(chan int, 4)
	wait := func(m int) {
		go func() {
			if b.Acquire(m, nil) {
				granted <- m
			}
		}()
	}
	for range 3 {
		wait(busy)
	}
	waitQueued(t, b, 3)
	wait(quiet)
	waitQueued(t, b, 4)
	var got []int
	for range 4 {
		b.Release()
		got = append(got, <-granted)
	}
	// The turn starts after the member that took the last token (busy,
	// member 0): quiet, then busy again.
	if got[0] != quiet {
		t.Errorf("tokens went to %v; want the quiet member first", got)
	}
}

// TestBudgetStop checks that a waiter stopped before its turn leaves the
// queue holding nothing.
func TestBudgetStop(t *testing.T) {
	t.Parallel()
	b := NewBudget(1)
	m := b.Join()
	b.Acquire(m, nil)
	stop := make(chan struct{})
	res := make(chan bool)
	go func() { res <- b.Acquire(m, stop) }()
	waitQueued(t, b, 1)
	close(stop)
	if <-res {
		t.Fatal("a stopped Acquire returned true")
	}
	b.Release()
	if !b.Acquire(m, nil) {
		t.Fatal("the token was lost")
	}
}

func waitQueued(t *testing.T, b *Budget, n int) {
	t.Helper()
	for {
		b.mu.Lock()
		q := b.queued
		b.mu.Unlock()
		if q == n {
			return
		}
	}
}

// TestBudgetAcquireUpTo checks that AcquireUpTo takes every free token up
// to n, at least one (waiting for it), none past a waiting member, and
// that ReleaseN gives them all back.
func TestBudgetAcquireUpTo(t *testing.T) {
	t.Parallel()
	b := NewBudget(3)
	a, c := b.Join(), b.Join()
	if got := b.AcquireUpTo(a, 5, nil); got != 3 {
		t.Fatalf("AcquireUpTo(5) of 3 free tokens = %d, want 3", got)
	}
	res := make(chan int, 1)
	go func() { res <- b.AcquireUpTo(c, 2, nil) }()
	waitQueued(t, b, 1)
	b.Release()
	if got := <-res; got != 1 {
		t.Errorf("a waiting AcquireUpTo(2) given the one freed token got %d, want 1", got)
	}
	b.ReleaseN(2)
	if got := b.AcquireUpTo(a, 3, nil); got != 2 {
		t.Errorf("AcquireUpTo(3) with 2 free tokens = %d, want 2", got)
	}
	stop := make(chan struct{})
	close(stop)
	if got := b.AcquireUpTo(a, 1, stop); got != 0 {
		t.Errorf("AcquireUpTo with no token free and stop closed = %d, want 0", got)
	}
}
