package skipjackimpl

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Producers on a pool wake workers after their commit instead of from the
// insert trigger. A NOTIFY takes a lock that every notifying transaction
// holds through its commit, so when each enqueue notifies from inside its
// own transaction, concurrent producers commit one at a time. Enqueue on a
// *pgxpool.Pool is autocommit: it inserts with the trigger silenced
// (EnqueueQuiet), then
//
//   - wakes the workers of this process that listen to the queue at once,
//     with no round trip, and
//   - asks the process's notifier to send one NOTIFY for the queue, on its
//     own statement after the insert committed; while one is in flight,
//     further requests for the queue coalesce into one follow-up NOTIFY.
//
// So producers never serialize on the notification lock, workers in other
// processes are still woken within a round trip, and a NOTIFY can never
// arrive before the job it announces is visible. Enqueue inside a pgx.Tx
// (or on a *pgx.Conn) keeps the trigger's NOTIFY, sent at that commit.

// notifiers holds one notifier per pool and channel.
var notifiers = struct {
	mu sync.Mutex
	m  map[notifierKey]*notifier
}{m: make(map[notifierKey]*notifier)}

type notifierKey struct {
	pool    *pgxpool.Pool
	channel string
}

// notifier coalesces the NOTIFYs of one channel sent through one pool.
type notifier struct {
	mu       sync.Mutex
	inFlight bool // a goroutine is sending
	again    bool // another NOTIFY was asked for meanwhile
}

// notifyTimeout bounds one NOTIFY statement.
const notifyTimeout = 5 * time.Second

// wakeAfterCommit wakes the workers of channel after a committed insert.
func wakeAfterCommit(pool *pgxpool.Pool, channel string) {
	wakeLocal(pool, channel)
	notifiers.mu.Lock()
	k := notifierKey{pool, channel}
	n := notifiers.m[k]
	if n == nil {
		n = &notifier{}
		notifiers.m[k] = n
	}
	notifiers.mu.Unlock()

	n.mu.Lock()
	if n.inFlight {
		n.again = true
		n.mu.Unlock()
		return
	}
	n.inFlight = true
	n.mu.Unlock()
	go n.send(k)
}

// send NOTIFYs k's channel until no further request arrived while it ran,
// then drops the notifier from notifiers, so that pools and channels no
// longer in use leave nothing behind (the next enqueue makes a new one). A
// failed NOTIFY is not retried: workers poll, and the enqueue already
// succeeded.
func (n *notifier) send(k notifierKey) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		_, _ = k.pool.Exec(ctx, "SELECT pg_notify($1, '')", k.channel)
		cancel()
		notifiers.mu.Lock()
		n.mu.Lock()
		if !n.again {
			n.inFlight = false
			if notifiers.m[k] == n {
				delete(notifiers.m, k)
			}
			n.mu.Unlock()
			notifiers.mu.Unlock()
			return
		}
		n.again = false
		n.mu.Unlock()
		notifiers.mu.Unlock()
	}
}

// wakeLocal wakes the workers of this process subscribed to channel on the
// database pool connects to.
func wakeLocal(pool *pgxpool.Pool, channel string) {
	key, _ := listenerKey(pool)
	listeners.mu.Lock()
	l := listeners.m[key]
	listeners.mu.Unlock()
	if l != nil {
		l.wake(channel)
	}
}
