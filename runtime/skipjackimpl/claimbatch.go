package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimBatch runs the claim statement of a queue without limits in one
// round trip, behind the statements that prepare its implicit transaction.
// All go out as one pipelined batch with a single Sync, so they run in one
// transaction that commits after the claim:
//
//   - The first statement steers the planner, for that transaction only, to
//     the index scan the claim is written for (steerSQL), as a limited
//     queue's Admit does, and bounds how long the server waits for the
//     client to read the claimed rows (stall: tcp_user_timeout, see
//     clientStallLimit): the backend of a claim whose client stopped
//     reading blocks writing them, and its uncommitted claim keeps their
//     jobs locked, skipped by every other claim, until the session ends.
//   - With turn set, it then takes the transaction-scoped advisory lock
//     under which the claims of the queue take turns across all processes
//     (turnKey). The claim takes its snapshot only once the lock is
//     granted, so it sees every claim that held the lock before it as
//     committed: it never walks past rows another claim holds locked, or
//     claimed while it ran (see crowdWindow). It waits for the lock at most
//     wait (lock_timeout, for that statement only): a claim holds the lock
//     until it commits, and the backend of a claim whose client stopped
//     reading its rows (a frozen process, a host cut off the network) does
//     not commit until TCP gives up on the client, which can take many
//     minutes. A wait that times out fails the batch with errTurnWaited,
//     and the runner claims again without turns (runner.claim).
//
// It implements only Query, the method a :many claim runs on.
type claimBatch struct {
	pool  *pgxpool.Pool
	stall time.Duration // how long the claim's rows may stay unread
	turn  bool
	key   int64         // the turn lock, when turn is set
	wait  time.Duration // the longest wait for the turn lock, when turn is set
}

// steerSQL turns off, until the end of the transaction, the plans that
// would read every due job to pick a few: without statistics, or with
// statistics taken while the queue was nearly empty (a burst after a quiet
// spell), the planner's custom plans for a connection's first executions of
// the claim scan all pending jobs through a bitmap and sort them, a cost
// that grows with the backlog and that every new connection pays again.
//
// It also sets tcp_user_timeout ($1, the claim batch's stall) for the
// transaction.
const steerSQL = "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), set_config('tcp_user_timeout', $1, true)"

// The statements that take the queue's turn lock, after steerSQL: the
// first bounds the wait ($1, lock_timeout for the transaction), the second
// waits for the lock ($1, the key), the third gives the claim its usual
// lock_timeout back (the session's default: a value the session SET itself
// is not restored, only for this claim's transaction). Separate statements,
// because the order in which one statement evaluates its expressions is
// not defined.
const (
	turnWaitSQL = "SELECT set_config('lock_timeout', $1, true)"
	turnSQL     = "SELECT pg_advisory_xact_lock($1)"
	turnDoneSQL = "SET LOCAL lock_timeout TO DEFAULT"
)

// errTurnWaited is the error of a claim batch whose wait for the queue's
// turn lock timed out; nothing was claimed.
var errTurnWaited = errors.New("skipjack: waited too long for the queue's claim turn")

// turnKey returns the advisory lock key under which the claims of the
// queue named name take turns while other processes claim it too: a 64-bit
// FNV-1a hash of "skipjack:claim-turn:" and the name. Queues of that name
// in two schemas of one database share it, which only makes their claims
// take turns with each other too.
func turnKey(name string) int64 {
	return lockKey("skipjack:claim-turn:" + name)
}

// errClaimOnly is what claimBatch returns for anything but Query.
var errClaimOnly = errors.New("skipjack: a claim batch runs only the claim query")

// Query runs sql, the claim, after the statements that prepare its
// transaction, in one implicit transaction and one round trip.
func (c claimBatch) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(steerSQL, millis(c.stall))
	turnAt := -1 // the position of the statement that waits for the turn
	if c.turn {
		b.Queue(turnWaitSQL, millis(c.wait))
		turnAt = b.Len()
		b.Queue(turnSQL, c.key)
		b.Queue(turnDoneSQL)
	}
	b.Queue(sql, args...)
	br := c.pool.SendBatch(ctx, b)
	for i := range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			if i == turnAt && sqlState(err) == "55P03" {
				return nil, fmt.Errorf("%w (%v): %w", errTurnWaited, c.wait, err)
			}
			return nil, fmt.Errorf("prepare claim: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br}, nil
}

// Exec is not used by the claim; it returns an error.
func (claimBatch) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errClaimOnly
}

// QueryRow is not used by the claim; its row returns an error.
func (claimBatch) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errClaimOnly}
}

// CopyFrom is not used by the claim; it returns an error.
func (claimBatch) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errClaimOnly
}

// errRow is a row whose Scan returns err.
type errRow struct{ err error }

// Scan returns the row's error.
func (r errRow) Scan(...any) error { return r.err }

// batchRows are the claim's rows. Once they are read to the end, the batch
// is closed, which reads the outcome of the implicit transaction's commit:
// an error there is the rows' error, so that no claim whose commit failed
// is taken for claimed.
type batchRows struct {
	pgx.Rows
	batch  pgx.BatchResults
	err    error
	closed bool
}

// Next advances to the next row; after the last one it closes the batch.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// Close closes the rows and the batch, keeping the first error.
func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.Rows.Err()
	if err := r.batch.Close(); err != nil && r.err == nil {
		r.err = err
	}
}

// Err returns the error of the rows or of the transaction's commit.
func (r *batchRows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Rows.Err()
}
