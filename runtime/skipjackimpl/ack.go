package skipjackimpl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// flushLoop writes results (acknowledgements and resolutions) in batches:
// as soon as BatchSize of them are waiting, or when the oldest has waited
// AckDelay. One statement runs at a time, so while it runs the next batch
// grows; under load batches fill up by themselves. When final is closed it
// flushes everything that is left, on a fresh bounded context, and returns.
func (r *runner[T]) flushLoop(final <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	bo := loopBackoff{max: dbRetryMax}
	var deadline time.Time // of the final flush
	stopping := false

	for {
		if !stopping {
			select {
			case <-final:
				stopping = true
				deadline = time.Now().Add(finalFlushTimeout)
			default:
			}
		}
		r.mu.Lock()
		n := len(r.acks) + len(r.resolves)
		wait := r.cfg.AckDelay - time.Since(r.pendingSince)
		r.mu.Unlock()

		if n > 0 && (stopping || n >= r.cfg.BatchSize || wait <= 0) {
			ctx, cancel := context.WithTimeout(context.Background(), r.stmtTimeout)
			if stopping {
				ctx, cancel = context.WithDeadline(context.Background(), deadline)
			}
			err := r.flush(ctx)
			cancel()
			if err == nil {
				bo.reset()
				continue
			}
			d := bo.next()
			if stopping && time.Now().Add(d).After(deadline) {
				r.log.Error("skipjack: giving up on flushing results at shutdown; these jobs run again once their leases lapse",
					"error", err, "jobs", r.unflushed())
				return
			}
			r.log.Warn("skipjack: flushing job results failed; retrying", "error", err, "retry_in", d)
			timer.Reset(d)
			<-timer.C
			continue
		}
		if stopping {
			return
		}
		if n > 0 {
			timer.Reset(wait)
		}
		select {
		case <-r.kick:
		case <-timer.C:
		case <-final:
		}
		timer.Stop()
	}
}

func (r *runner[T]) unflushed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks) + len(r.resolves)
}

// flush writes one batch of acknowledgements and one of resolutions.
func (r *runner[T]) flush(ctx context.Context) error {
	if acks := r.take(&r.acks); len(acks) > 0 {
		start := time.Now()
		matched, err := r.complete(ctx, acks)
		r.ackDone(skipjack.AckComplete, len(acks), len(matched), time.Since(start), err)
		r.settle(&r.acks, acks, matched, err)
		if err != nil {
			return fmt.Errorf("complete %s: %w", r.spec.Name, err)
		}
	}
	if res := r.take(&r.resolves); len(res) > 0 {
		rs := make([]Resolution, len(res))
		for i, e := range res {
			rs[i] = e.res
		}
		// Sorted by id, like every batched write (see idsAndClaims).
		slices.SortFunc(rs, func(a, b Resolution) int { return cmp.Compare(a.ID, b.ID) })
		start := time.Now()
		matched, err := r.resolve(ctx, rs)
		r.ackDone(skipjack.AckResolve, len(rs), len(matched), time.Since(start), err)
		r.settle(&r.resolves, res, matched, err)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", r.spec.Name, err)
		}
		soonest := time.Duration(-1)
		for _, x := range rs {
			if x.Action != ActionFail && (soonest < 0 || x.Delay < soonest) {
				soonest = x.Delay
			}
		}
		if soonest >= 0 {
			r.noteDue(soonest)
		}
	}
	return nil
}

// complete acknowledges acks and returns the ids it matched. A job an
// operator cancels while its acknowledgement is in flight can match
// neither branch of the statement (its completion re-checks the committed
// cancel, its cancellation reads the statement's older snapshot), so the
// jobs a first statement did not match go through a second one, which
// sees the cancel: the ack and the cancel end in one decision, and the job
// ends failed "cancelled" instead of staying running. Jobs it does not
// match either are no longer this attempt's.
func (r *runner[T]) complete(ctx context.Context, acks []*entry[T]) ([]int64, error) {
	ids, claims := idsAndClaims(acks)
	waits := waitHistogram(&r.clock, acks)
	sent := time.Now()
	matched, dbNow, err := r.store.Complete(ctx, ids, claims, waits)
	r.clock.observe(sent, time.Now(), dbNow)
	if err != nil || len(matched) == len(ids) {
		return matched, err
	}
	seen := make(map[int64]bool, len(matched))
	for _, id := range matched {
		seen[id] = true
	}
	var rest []*entry[T]
	for _, e := range acks {
		if !seen[e.row.ID] {
			rest = append(rest, e)
		}
	}
	// The first statement counted the waits of the whole batch.
	ids, claims = idsAndClaims(rest)
	again, _, err := r.store.Complete(ctx, ids, claims, make([]int64, len(waits)))
	if err != nil {
		return matched, err
	}
	return append(matched, again...), nil
}

// unstorable is the error message written instead of one that Postgres
// still rejected after storableText.
const unstorable = "skipjack: the attempt's error text could not be stored"

// resolve writes rs (sorted by id) and returns the ids it matched. When
// Postgres rejects the batch's data (SQLSTATE class 22), one row must be
// to blame: the batch is split in halves until that row is alone, and it
// is written with a placeholder message, so one bad row never holds back
// the rest of its batch.
func (r *runner[T]) resolve(ctx context.Context, rs []Resolution) ([]int64, error) {
	matched, err := r.store.Resolve(ctx, rs)
	if err == nil || !dataError(err) {
		return matched, err
	}
	if len(rs) == 1 {
		if rs[0].Message == unstorable {
			return nil, err
		}
		r.log.Error("skipjack: Postgres rejected a job's result; writing it with a placeholder error message", "job_id", rs[0].ID, "error", err)
		x := rs[0]
		x.Message = unstorable
		return r.store.Resolve(ctx, []Resolution{x})
	}
	half := len(rs) / 2
	first, err := r.resolve(ctx, rs[:half])
	if err != nil {
		return first, err
	}
	second, err := r.resolve(ctx, rs[half:])
	return append(first, second...), err
}

// dataError reports whether Postgres rejected a statement's data
// (SQLSTATE class 22: data exception).
func dataError(err error) bool { return strings.HasPrefix(sqlState(err), "22") }

// sqlState returns the SQLSTATE of the Postgres error in err's chain, or ""
// when there is none.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// take removes up to BatchSize results from *list, skipping those whose
// lease was lost, and marks them settling.
func (r *runner[T]) take(list *[]*entry[T]) []*entry[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*entry[T]
	i := 0
	for ; i < len(*list) && len(out) < r.cfg.BatchSize; i++ {
		e := (*list)[i]
		if e.lost {
			continue
		}
		e.settling = true
		out = append(out, e)
	}
	*list = append((*list)[:0:0], (*list)[i:]...)
	r.flushing += len(out)
	return out
}

// settle records the outcome of a flush statement. On error the batch goes
// back to the front of *list to be retried; otherwise its jobs are no
// longer held. Jobs the statement did not match had lost their lease.
func (r *runner[T]) settle(list *[]*entry[T], batch []*entry[T], matched []int64, err error) {
	r.mu.Lock()
	r.flushing -= len(batch)
	if err != nil {
		for _, e := range batch {
			e.settling = false
		}
		*list = append(batch, *list...)
	} else {
		for _, e := range batch {
			r.forget(e)
		}
		if len(*list) == 0 && len(r.acks)+len(r.resolves) == 0 {
			r.pendingSince = time.Time{}
		}
	}
	r.mu.Unlock()
	signal(r.slotFreed)
	if err == nil && (r.spec.Serial || r.spec.limited()) {
		// The jobs just settled held a serial key or counted against a
		// limit: the jobs they held back can be claimed now.
		signal(r.poke)
	}
	if err == nil && len(matched) < len(batch) {
		r.log.Warn("skipjack: some job results matched no running attempt (their lease was lost); those jobs may run again",
			"results", len(batch), "matched", len(matched))
	}
}

// txAcked holds the jobs (keyed by their *skipjack.Job pointer) that
// CompleteTx acknowledged, so the worker neither acknowledges them again nor
// counts them as lost. The worker deletes each entry when the job's handler
// returns.
var txAcked sync.Map

// ackedInTx reports whether CompleteTx acknowledged job, forgetting it when
// forget is set.
func ackedInTx(job any, forget bool) bool {
	if forget {
		_, ok := txAcked.LoadAndDelete(job)
		return ok
	}
	_, ok := txAcked.Load(job)
	return ok
}

// CompleteTx acknowledges job by running complete (the queue's fenced
// single-job acknowledgement) in the caller's transaction, so that the
// handler's writes and the acknowledgement commit or roll back together.
// Generated packages wrap it as CompleteTx(ctx, tx, job).
//
// It returns an error wrapping skipjack.ErrLeaseLost when this attempt no longer
// owns the job; the caller should roll back. After it succeeds the worker
// neither renews the job's lease (the open transaction holds the row's
// lock, which keeps rescuers away) nor acknowledges the job again when the
// handler returns nil. If the transaction then rolls back, the handler
// should return an error promptly: the job is retried as usual, or rescued
// once its unrenewed lease lapses.
func CompleteTx[T any](ctx context.Context, job *skipjack.Job[T], complete func(ctx context.Context, id int64, claim int32) (int64, error)) error {
	n, err := complete(ctx, job.ID, job.Claim)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", job.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("complete job %d: %w", job.ID, skipjack.ErrLeaseLost)
	}
	txAcked.Store(job, struct{}{})
	return nil
}
