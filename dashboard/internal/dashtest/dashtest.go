// Package dashtest holds the helpers that the dashboard's tests and its
// browser tests (the dashboard/browsertest module, which cannot import
// another module's test files) share: a database with the test queues
// migrated, their admin views, a polling wait and a worker run for the
// length of a test.
package dashtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/syncaccount"
)

// NewDB returns a pool on a fresh database with the test queues migrated.
func NewDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := skipjacktest.NewPool(t)
	if err := testjobs.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// Admins returns the admin views of the test queues on db.
func Admins(db skipjack.DBTX) []skipjack.QueueAdmin {
	return []skipjack.QueueAdmin{sendemail.Admin(db), resizeimage.Admin(db), syncaccount.Admin(db)}
}

// WaitFor polls cond until it holds, failing the test after 30s.
func WaitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunWorker runs run (a worker's Run) until stop is called, or the test
// ends; stop returns after Run has.
func RunWorker(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
