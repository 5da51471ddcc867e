package skipjackimpl

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The engine's shared state has one owner per pool.
//
// Everything the workers and producers of one *pgxpool.Pool in this
// process share lives in that pool's owner (the role River's Client plays):
// the handler demand behind the pool-size warning, the isolation of
// suspect jobs, the coalescing NOTIFY senders of its producers, and the
// runs of its workers, through which CompleteTx finds the attempt it
// acknowledged. Owners, and the LISTEN connection of each database the
// owners' workers subscribe to, are held in registry, the engine's only
// package-level variable, and reference counted in one place (acquire and
// release): a worker's Run holds a reference while it runs, a NOTIFY
// sender while it sends. Every goroutine an owner starts holds a reference
// too, so none outlives it.
var registry = struct {
	mu        sync.Mutex
	owners    map[*pgxpool.Pool]*owner
	listeners map[string]*listener // by listenerKey
}{
	owners:    make(map[*pgxpool.Pool]*owner),
	listeners: make(map[string]*listener),
}

// owner is the shared state of one pool's workers and producers.
type owner struct {
	pool *pgxpool.Pool
	key  func() string // the pool's database, the key of its listener (computed once, when first needed)
	refs int           // guarded by registry.mu

	// active is set while a suspect waits for the pool's workers to
	// settle, or runs (see isolate.go).
	active atomic.Bool
	// running counts the ordinary handlers that run now.
	running atomic.Int64
	// changed wakes a waiting suspect when a handler returned or a run
	// let go of a job.
	changed chan struct{}

	mu        sync.Mutex
	demand    int                  // handler slots of the running workers
	runs      map[member]struct{}  // the running workers
	notifiers map[string]*notifier // NOTIFYs in flight, by channel
}

// member is a running worker, as its pool's owner sees it.
type member interface {
	// shed gives back the jobs the worker prefetched and flushes its
	// results now.
	shed()
	// holding returns how many jobs the worker holds: claimed and not yet
	// settled by a written result or a release.
	holding() int
	// resume wakes the worker's claimer once isolation ends.
	resume()
	// ackInTx records that CompleteTx acknowledged job, the handler's view
	// of the job with id id, and reports whether the worker holds it.
	ackInTx(id int64, job any) bool
}

// acquire returns the owner of pool, creating it if needed, with one more
// reference; the caller calls release when done with it.
func acquire(pool *pgxpool.Pool) *owner {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	o := registry.owners[pool]
	if o == nil {
		o = &owner{
			pool:      pool,
			key:       sync.OnceValue(func() string { return listenerKey(pool) }),
			changed:   make(chan struct{}, 1),
			runs:      make(map[member]struct{}),
			notifiers: make(map[string]*notifier),
		}
		registry.owners[pool] = o
	}
	o.refs++
	return o
}

// release drops one reference to o; the last one removes o from the
// registry.
func (o *owner) release() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	o.refs--
	if o.refs == 0 && registry.owners[o.pool] == o {
		delete(registry.owners, o.pool)
	}
}

// join adds a running worker with concurrency handler slots to o and
// returns the handler slots of all of o's running workers.
func (o *owner) join(m member, concurrency int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs[m] = struct{}{}
	o.demand += concurrency
	return o.demand
}

// leave removes a worker that join added.
func (o *owner) leave(m member, concurrency int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.runs, m)
	o.demand -= concurrency
}

// members returns the running workers.
func (o *owner) members() []member {
	o.mu.Lock()
	defer o.mu.Unlock()
	ms := make([]member, 0, len(o.runs))
	for m := range o.runs {
		ms = append(ms, m)
	}
	return ms
}

// ackedInTx records, in the run that holds it, that CompleteTx
// acknowledged job (id id), and reports whether a run of this process
// held it. The owners are few (one per pool) and their runs too, and each
// run finds the job by id.
func ackedInTx(id int64, job any) bool {
	registry.mu.Lock()
	owners := make([]*owner, 0, len(registry.owners))
	for _, o := range registry.owners {
		owners = append(owners, o)
	}
	registry.mu.Unlock()
	for _, o := range owners {
		for _, m := range o.members() {
			if m.ackInTx(id, job) {
				return true
			}
		}
	}
	return false
}

// subscribe registers interest in channel on the listener of o's
// database, starting the listener if needed. The subscription's signals
// receive a value (coalesced) whenever channel is notified (see
// subscription) and after every (re)connect; unsubscribe must be called
// exactly once and returns after the listener's goroutine has ended if
// this was its last subscriber.
func (o *owner) subscribe(channel string, log *slog.Logger) (*subscription, func()) {
	s := newSubscription(channel)
	registry.mu.Lock()
	l := registry.listeners[o.key()]
	if l == nil {
		l = startListener(o.pool.Config().ConnConfig, log)
		registry.listeners[o.key()] = l
	}
	l.add(s)
	registry.mu.Unlock()

	var once sync.Once
	return s, func() {
		once.Do(func() {
			registry.mu.Lock()
			last := l.remove(s)
			if last && registry.listeners[o.key()] == l {
				delete(registry.listeners, o.key())
			}
			registry.mu.Unlock()
			if last {
				l.stop()
			}
		})
	}
}

// wakeLocal wakes the workers of this process subscribed to channel on
// o's database, whichever pool they run on.
func (o *owner) wakeLocal(channel string) {
	registry.mu.Lock()
	l := registry.listeners[o.key()]
	registry.mu.Unlock()
	if l != nil {
		l.wake(channel, "")
	}
}

// listenerKey identifies the database a pool connects to.
func listenerKey(pool *pgxpool.Pool) string {
	cfg := pool.Config().ConnConfig
	return fmt.Sprintf("%s|%s:%d/%s?user=%s", cfg.ConnString(), cfg.Host, cfg.Port, cfg.Database, cfg.User)
}
