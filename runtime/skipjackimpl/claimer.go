package skipjackimpl

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// claimer runs a run's claim statements (runner.claim decides when, and
// what becomes of the rows): on the control pool, steered or in turns for
// a queue without limits (claimBatch), after Admit for a queue with limits
// or a serial key (admitBatch), from the floors where the queue has them
// (claimFloor). It owns what those paths need: the control pool's claim
// stores and the floors. Its fields are set before the run's first claim
// and only read after, so it needs no lock (the floors have their own).
type claimer struct {
	spec        QueueSpec
	store       store              // the run's store (runner.useStore)
	bind        func(DBTX) queries // binds the queue's queries to a claim's round trip
	worker      string             // the worker column of the claims (the run's liveness id)
	stmtTimeout time.Duration      // the claims' deadline, which bounds a stalled client (clientStallLimit)
	// control is the run's control pool (nil when the run's statements
	// run on a store given as is, in tests): claims of a queue with
	// limits open their transactions there.
	control *pgxpool.Pool
	// steered and inTurn run the claims of a queue without limits on the
	// control pool (see claimBatch): steered ones alone, inTurn ones in
	// turns with the other processes' claims. Both are nil with no control
	// pool.
	steered, inTurn queries
	// floor keeps where claims start reading the claim index (see
	// claimFloor); nil when the queue's claims read all of it.
	floor *claimFloor
}

// claimRows runs the claim statement. A queue without limits claims in one
// round trip that first steers the planner and, with inTurn, waits for the
// queue's turn (see claimBatch). A queue with limits or a serial key
// claims after Admit (see admittedClaim). When a limited claim comes back
// short, it asks why (Headroom) and returns the answer.
//
// A floored plan runs ClaimFrom, whose statement's clock it returns (the
// zero time for other plans, or when nothing was claimed).
func (c *claimer) claimRows(ctx context.Context, dst []ClaimedRow, plan claimPlan, inTurn bool) ([]ClaimedRow, time.Time, *headroom, error) {
	limit := plan.limit
	if !(c.spec.limited() || c.spec.Serial) || c.control == nil {
		s := c.store
		if inTurn && c.inTurn != nil {
			s = c.inTurn
		} else if c.steered != nil {
			s = c.steered
		}
		rows, at, err := c.claimPlanned(ctx, s, dst, plan)
		return rows, at, nil, err
	}
	rows, at, err := c.admittedClaim(ctx, dst, plan)
	if err != nil || len(rows) >= limit || !c.spec.limited() {
		return rows, at, nil, err
	}
	// Why the claim came back short, asked after its transaction ended
	// (the answer only says when to claim next), and only then: a claim
	// that filled its limit needs no answer.
	h, err := c.store.(limitStore).Headroom(ctx)
	if err != nil {
		return rows, at, nil, fmt.Errorf("headroom: %w", err)
	}
	return rows, at, &h, nil
}

// admittedClaim runs the claim of a queue with limits or a serial key:
// Admit, then Claim (ClaimFrom for a floored plan, returning its clock),
// in one transaction on the control pool and, through admitBatch, in one
// round trip. Admit makes the claims of a limited queue take turns across
// all processes, so that each counts the jobs the ones before it claimed,
// and steers the planner to the claim's index scans.
func (c *claimer) admittedClaim(ctx context.Context, dst []ClaimedRow, plan claimPlan) ([]ClaimedRow, time.Time, error) {
	limit := plan.limit
	if c.spec.PerKeyConcurrency == 0 {
		qs := c.bind(&admitBatch{db: c.control}).(limitStore)
		if err := qs.Admit(ctx, clientStallLimit(c.stmtTimeout)); err != nil {
			return dst, time.Time{}, fmt.Errorf("admit: %w", err)
		}
		return c.claimPlanned(ctx, qs, dst, plan)
	}
	// A per-key queue has no ClaimFrom (the generator leaves it out):
	// its claims pass over jobs waiting for their key.
	conn, err := c.control.Acquire(ctx)
	if err != nil {
		return dst, time.Time{}, fmt.Errorf("acquire: %w", err)
	}
	defer conn.Release()
	ab := &admitBatch{db: conn, begin: true}
	qs := c.bind(ab).(limitStore)
	rows, err := c.perKeyClaims(ctx, qs, dst, limit)
	return rows, time.Time{}, ab.finish(ctx, err)
}

// claimPlanned runs plan's claim statement on s: ClaimFrom, returning its
// clock, for a floored plan; Claim otherwise (a sweep, or a queue without
// floors), returning the zero time.
func (c *claimer) claimPlanned(ctx context.Context, s store, dst []ClaimedRow, plan claimPlan) ([]ClaimedRow, time.Time, error) {
	if fs, ok := s.(floorStore); ok && plan.floored {
		return fs.ClaimFrom(ctx, dst, plan.limit, c.spec.Lease, c.worker, plan.floors)
	}
	rows, err := s.Claim(ctx, dst, plan.limit, c.spec.Lease, c.worker)
	return rows, time.Time{}, err
}

// perKeyClaims runs the claims of one turn of a queue with a per-key
// limit, in the transaction of qs. A per-key claim leaves the jobs it
// picked beyond their key's room pending, so a short claim that took jobs
// may have filled keys whose other jobs hid jobs of other keys from it:
// claiming again in the same turn passes over the filled keys (it sees its
// own claims), so that a busy key never delays another key's job to a
// later turn.
func (c *claimer) perKeyClaims(ctx context.Context, qs limitStore, dst []ClaimedRow, limit int) ([]ClaimedRow, error) {
	if err := qs.Admit(ctx, clientStallLimit(c.stmtTimeout)); err != nil {
		return dst, fmt.Errorf("admit: %w", err)
	}
	rows, err := qs.Claim(ctx, dst, limit, c.spec.Lease, c.worker)
	if err != nil {
		return dst, err
	}
	prev := len(dst)
	for n := 1; c.spec.PerKeyConcurrency > 0 && n < maxPerKeyClaims && len(rows) > prev && len(rows) < limit; n++ {
		prev = len(rows)
		if rows, err = qs.Claim(ctx, rows, limit-prev, c.spec.Lease, c.worker); err != nil {
			return dst, err
		}
	}
	return rows, nil
}

// maxPerKeyClaims bounds the claim statements of one turn of a queue with a
// per-key limit (see claimRows): each statement after the first runs only
// when the one before took jobs and filled keys, so it takes more than two
// only when keys with more jobs than room crowd the front of the queue.
const maxPerKeyClaims = 8
