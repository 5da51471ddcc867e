package skipjackimpl

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// admitBatch runs the claim of a queue with limits or a serial key, Admit
// then Claim, in one round trip: Exec (Admit) only queues its statement,
// and Query (the claim) sends everything queued before it together with
// the claim as one pipelined batch. A claim sent to the pool, with one
// Sync, runs in one implicit READ COMMITTED transaction that commits after
// the claim: Admit's turn lock and settings hold until that commit, and the
// claim's snapshot, taken once the lock is granted, sees every claim that
// held the lock before it (issue 43: four round trips per claim, BEGIN,
// Admit, Claim, COMMIT, held the queue's turn for three of them).
//
// With begin set it runs on one connection and opens an explicit
// transaction instead (BEGIN goes first in the batch), which stays open
// after the claim, so that the caller can claim again in the same turn
// and then ends it with finish: a queue with a per-key limit claims again
// in its turn after a claim that filled keys (see claimRows).
//
// Like claimBatch, it implements what the claim path runs: Exec for Admit,
// Query for Claim. QueryRow and CopyFrom return errors.
type admitBatch struct {
	db     batchSender
	begin  bool
	sent   bool // the batch went out: statements now run as they come
	queued pgx.Batch
}

// batchSender is what admitBatch sends its batch on: a pool (one implicit
// transaction per batch) or a connection (an explicit transaction).
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// beginSQL opens the explicit transaction of an admitBatch with begin set.
const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// Exec queues sql until the claim is sent; once it was, it runs sql in the
// open transaction.
func (a *admitBatch) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if a.sent {
		return a.db.Exec(ctx, sql, args...)
	}
	if a.begin && a.queued.Len() == 0 {
		a.queued.Queue(beginSQL)
	}
	a.queued.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// Query sends the statements queued so far and then sql, the claim, in one
// batch and returns the claim's rows; once the batch went out (begin set),
// it runs sql in the open transaction.
func (a *admitBatch) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if a.sent {
		return a.db.Query(ctx, sql, args...)
	}
	a.sent = true
	if a.begin && a.queued.Len() == 0 {
		a.queued.Queue(beginSQL)
	}
	a.queued.Queue(sql, args...)
	br := a.db.SendBatch(ctx, &a.queued)
	for range a.queued.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("admit: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br}, nil
}

// QueryRow is not used by the claim; its row returns an error.
func (*admitBatch) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errClaimOnly}
}

// CopyFrom is not used by the claim; it returns an error.
func (*admitBatch) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errClaimOnly
}

// rollbackTimeout bounds the ROLLBACK of a failed claim transaction.
const rollbackTimeout = 5 * time.Second

// finish ends the explicit transaction of an admitBatch with begin set:
// it commits when err is nil and rolls back otherwise, returning err or
// the commit's error.
func (a *admitBatch) finish(ctx context.Context, err error) error {
	if !a.sent {
		return err
	}
	if err != nil {
		// Bounded apart from the claim's deadline, which may be what
		// ended it; a connection pgx closed meanwhile fails at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, _ = a.db.Exec(rctx, "ROLLBACK")
		return err
	}
	if _, err := a.db.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit claim: %w", err)
	}
	return nil
}
