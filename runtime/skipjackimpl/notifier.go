package skipjackimpl

import (
	"context"
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
//   - asks the pool's owner to send one NOTIFY for the queue, on its own
//     statement after the insert committed; while one is in flight,
//     further requests for the queue coalesce into one follow-up NOTIFY.
//
// So producers never serialize on the notification lock, workers in other
// processes are still woken within a round trip, and a NOTIFY can never
// arrive before the job it announces is visible. Enqueue inside a pgx.Tx
// (or on a *pgx.Conn) keeps the trigger's NOTIFY, sent at that commit.

// notifier is the NOTIFY in flight for one channel of one pool.
type notifier struct {
	again bool // another NOTIFY was asked for meanwhile; guarded by owner.mu
}

// notifyTimeout bounds one NOTIFY statement.
const notifyTimeout = 5 * time.Second

// wakeAfterCommit wakes the workers of channel after a committed insert
// on pool.
func wakeAfterCommit(pool *pgxpool.Pool, channel string) {
	o := acquire(pool)
	o.wakeLocal(channel)
	if !o.notify(channel) {
		o.release()
	}
}

// notify asks for one NOTIFY of channel. It starts a sender, which takes
// over the caller's reference to o and reports true, unless one is in
// flight: that one then sends once more, and notify reports false.
func (o *owner) notify(channel string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := o.notifiers[channel]; n != nil {
		n.again = true
		return false
	}
	n := &notifier{}
	o.notifiers[channel] = n
	go o.send(channel, n)
	return true
}

// send NOTIFYs channel until no further request arrived while it ran,
// then forgets n and drops its reference to o, so that pools and channels
// no longer in use leave nothing behind. A failed NOTIFY is not retried:
// workers poll, and the enqueue already succeeded.
func (o *owner) send(channel string, n *notifier) {
	defer o.release()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		_, _ = o.pool.Exec(ctx, "SELECT pg_notify($1, '')", channel)
		cancel()
		o.mu.Lock()
		if !n.again {
			delete(o.notifiers, channel)
			o.mu.Unlock()
			return
		}
		n.again = false
		o.mu.Unlock()
	}
}
