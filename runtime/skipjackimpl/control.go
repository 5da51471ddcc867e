package skipjackimpl

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// controlConns is the most connections one worker's control pool
	// opens: two claims, one flush, one heartbeat, one maintenance and one
	// schedule statement can run at once.
	controlConns = 6
	// controlIdle is how long an idle control connection stays open.
	controlIdle = time.Minute
	// controlPingIdle is how long a control connection may sit idle before
	// it is pinged when taken from the pool.
	controlPingIdle = 30 * time.Second
	// cancelDeadlineDelay is how long a statement whose context ended may
	// take to end on the server after the cancel request was sent before
	// the connection is closed anyway.
	cancelDeadlineDelay = 2 * time.Second
)

// newControlPool returns the pool a worker runs its own statements on
// (claim, acknowledgements, heartbeat, rescue, prune, release): built from
// the user's pool's configuration, so it reaches the same database with the
// same credentials and hooks, but with connections of its own, so control
// traffic never waits for a connection behind handlers.
//
// Its connections cancel a statement on the server when the statement's
// context ends (a cancel request, then a closed socket if the server does
// not answer): pgx's default only closes the socket, and a server backend
// waiting for a row lock does not notice that, so it would keep waiting and
// holding its own locks after the worker gave up on it.
//
// The pool connects lazily; the caller closes it.
func newControlPool(user *pgxpool.Pool) (*pgxpool.Pool, error) {
	cfg := user.Config()
	cfg.MaxConns = controlConns
	cfg.MinConns = 0
	cfg.MinIdleConns = 0
	cfg.MaxConnIdleTime = controlIdle
	// pgxpool pings every connection idle for over a second before handing
	// it out: for a worker polling every second, one extra round trip per
	// poll. Control statements have deadlines and retry on errors, so only
	// connections idle for long are checked first.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > controlPingIdle
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelDeadlineDelay}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("control pool: %w", err)
	}
	return pool, nil
}

// warm opens n connections of pool at once (within a second, ignoring
// errors), so that the first claims in flight together do not race a
// connection being opened against one that is ready: claims that finish
// out of order start their jobs out of priority order.
func warm(pool *pgxpool.Pool, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conns := make(chan *pgxpool.Conn, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if c, err := pool.Acquire(ctx); err == nil {
				conns <- c
			}
		})
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Release()
	}
}
