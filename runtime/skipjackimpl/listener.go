package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wake-ups are shared: a process holds ONE listening connection per
// database, however many workers and queues it runs. The registry (see
// owner.go) keeps it by the database's connection string (and the host,
// port, database and user it resolves to), reference counted by its
// subscriptions: the first worker of a database to start creates the
// listener, the last one to stop closes its connection and waits for its
// goroutine, so no goroutine outlives the last Run.
//
// The listener runs on a dedicated pgx.Conn built from the pool's
// ConnConfig, not on a pooled connection, so it never takes a slot from
// handlers. It LISTENs to the channel of every subscribed queue, pings the
// server when it has been quiet for listenerPing, and after a reconnect
// re-LISTENs and wakes every subscribed worker once, because notifications
// sent while it was disconnected are lost. Workers poll every PollInterval
// as well, so a listener that cannot connect delays jobs but never strands
// them.

const (
	// listenerPing is how long the listener waits for a notification
	// before it pings the server to detect a dead connection.
	listenerPing = 5 * time.Second
	// listenerTimeout bounds connecting, LISTEN and ping.
	listenerTimeout = 10 * time.Second
)

// listener is one process's LISTEN connection to one database.
type listener struct {
	config *pgx.ConnConfig
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	subs       map[string]map[*subscription]struct{} // channel -> subscribers
	refs       int
	dirty      bool               // the set of channels changed since the last LISTEN sync
	waitCancel context.CancelFunc // interrupts the current wait, or nil
}

// Notification payloads. An insert's NOTIFY carries none: it wakes the
// fetchers. An operator's Cancel and Pause carry one of these, so that the
// workers act on the jobs they hold at once, not at their next heartbeat.
const (
	noteCancel = "cancel"
	notePause  = "pause"
)

// subscription is one worker's interest in one channel. Each channel
// holds one coalesced signal.
type subscription struct {
	channel   string
	wake      chan struct{} // jobs were inserted or resumed, or the listener (re)connected
	cancelled chan struct{} // an operator cancelled jobs of the queue, or the listener (re)connected
	paused    chan struct{} // an operator paused the queue
	caughtUp  chan struct{} // the listener (re)connected: a pause notified before may have been missed
}

// newSubscription returns a subscription to channel.
func newSubscription(channel string) *subscription {
	return &subscription{
		channel:   channel,
		wake:      make(chan struct{}, 1),
		cancelled: make(chan struct{}, 1),
		paused:    make(chan struct{}, 1),
		caughtUp:  make(chan struct{}, 1),
	}
}

// signalFor returns the signal a notification with payload raises.
func (s *subscription) signalFor(payload string) chan struct{} {
	switch payload {
	case noteCancel:
		return s.cancelled
	case notePause:
		return s.paused
	}
	return s.wake
}

// startListener starts the listener of the database config connects to;
// stop ends it.
func startListener(config *pgx.ConnConfig, log *slog.Logger) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		config: config,
		log:    log,
		cancel: cancel,
		done:   make(chan struct{}),
		subs:   make(map[string]map[*subscription]struct{}),
	}
	go l.run(ctx)
	return l
}

// stop closes the listener's connection and returns once its goroutine
// has ended.
func (l *listener) stop() {
	l.cancel()
	<-l.done
}

func (l *listener) add(s *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.subs[s.channel]
	if set == nil {
		set = make(map[*subscription]struct{})
		l.subs[s.channel] = set
		l.dirty = true
		if l.waitCancel != nil {
			l.waitCancel()
		}
	}
	set[s] = struct{}{}
	l.refs++
}

// remove drops s and reports whether it was the last subscriber.
func (l *listener) remove(s *subscription) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.subs[s.channel]
	delete(set, s)
	if len(set) == 0 {
		delete(l.subs, s.channel)
		l.dirty = true
	}
	l.refs--
	return l.refs == 0
}

// wake signals every subscriber of channel, or of every channel when
// channel is "", as a notification with payload does.
func (l *listener) wake(channel, payload string) {
	l.each(channel, func(s *subscription) { signal(s.signalFor(payload)) })
}

// each calls f for every subscriber of channel, or of every channel when
// channel is "", under l.mu.
func (l *listener) each(channel string, f func(*subscription)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch, set := range l.subs {
		if channel != "" && ch != channel {
			continue
		}
		for s := range set {
			f(s)
		}
	}
}

// caughtUp signals the subscribers of channel (of every channel when
// channel is "") whose notifications may have been lost while the
// listener was not listening (it had not run its LISTEN yet, or was
// reconnecting): their fetchers claim, their workers check for cancels,
// and they read whether the queue is paused, since a pause notified
// meanwhile reached none of them and their prefetched jobs would start.
func (l *listener) caughtUp(channel string) {
	l.each(channel, func(s *subscription) {
		signal(s.wake)
		signal(s.cancelled)
		signal(s.caughtUp)
	})
}

// run keeps a listening connection open until ctx is cancelled.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	bo := loopBackoff{max: 10 * time.Second}
	for {
		err := l.session(ctx, &bo)
		if ctx.Err() != nil {
			return
		}
		d := bo.next()
		l.log.Warn("skipjack: listener connection failed; workers fall back to polling until it reconnects",
			"error", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one connection: connect, LISTEN, wake everyone once, then
// deliver notifications until the connection fails or ctx is cancelled.
func (l *listener) session(ctx context.Context, bo *loopBackoff) error {
	cctx, cancel := context.WithTimeout(ctx, listenerTimeout)
	conn, err := pgx.ConnectConfig(cctx, l.config.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), listenerTimeout)
		defer cancel()
		conn.Close(cctx)
	}()

	listening := make(map[string]bool)
	connected := false
	for {
		if err := l.sync(ctx, conn, listening, !connected); err != nil {
			return err
		}
		if !connected {
			connected = true
			bo.reset()
		}

		wctx, wcancel := context.WithTimeout(ctx, listenerPing)
		l.mu.Lock()
		if l.dirty {
			l.mu.Unlock()
			wcancel()
			continue
		}
		l.waitCancel = wcancel
		l.mu.Unlock()

		n, err := conn.WaitForNotification(wctx)

		l.mu.Lock()
		l.waitCancel = nil
		l.mu.Unlock()
		timedOut := errors.Is(wctx.Err(), context.DeadlineExceeded)
		wcancel()

		switch {
		case n != nil:
			l.wake(n.Channel, n.Payload)
		case ctx.Err() != nil:
			return nil
		case err != nil && conn.IsClosed():
			return fmt.Errorf("wait for notification: %w", err)
		case err != nil && timedOut:
			pctx, cancel := context.WithTimeout(ctx, listenerTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		case err != nil && wctx.Err() == nil:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// sync makes the connection LISTEN to exactly the subscribed channels and
// wakes the subscribers of newly listened channels (all of them after a
// reconnect), whose notifications may have been missed before.
func (l *listener) sync(ctx context.Context, conn *pgx.Conn, listening map[string]bool, all bool) error {
	l.mu.Lock()
	l.dirty = false
	want := make(map[string]bool, len(l.subs))
	for ch := range l.subs {
		want[ch] = true
	}
	l.mu.Unlock()

	var added []string
	for ch := range want {
		if listening[ch] {
			continue
		}
		if err := l.exec(ctx, conn, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
		listening[ch] = true
		added = append(added, ch)
	}
	for ch := range listening {
		if want[ch] {
			continue
		}
		if err := l.exec(ctx, conn, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("unlisten %s: %w", ch, err)
		}
		delete(listening, ch)
	}
	if all {
		l.caughtUp("")
		return nil
	}
	for _, ch := range added {
		l.caughtUp(ch)
	}
	return nil
}

func (l *listener) exec(ctx context.Context, conn *pgx.Conn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, listenerTimeout)
	defer cancel()
	_, err := conn.Exec(ctx, sql)
	return err
}
