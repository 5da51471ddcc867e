package skipjackimpl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// completer writes the results of one run's attempts: acknowledgements of
// completed jobs (Complete) and every other outcome (Resolve), batched,
// with the database's verdict handed back to the run through settled. It
// has its own lock, which it never holds while calling the run, so the
// run may call it with its own lock held.
type completer[T any] struct {
	store       store
	name        string // the queue's
	batchSize   int
	ackDelay    time.Duration
	stmtTimeout time.Duration
	log         *slog.Logger
	hooks       *hookCaller[T]
	// settled hands a written batch back to the run: the jobs it matched
	// are no longer held, the others lost their lease. It is not called
	// for a batch whose statement failed; that batch is retried.
	settled func(batch []*entry[T])
	// due tells the run when the earliest job it retried or snoozed
	// becomes due.
	due   func(d time.Duration)
	clock dbClock // the database clock's skew, for counted waits (counts.go); flush loop only

	mu           sync.Mutex
	acks         []*entry[T]   // completed, not yet acknowledged
	resolves     []*entry[T]   // other outcomes, not yet written
	flushing     int           // results inside a flush statement now
	pendingSince time.Time     // when the oldest unflushed result arrived
	idleFlush    bool          // the run went idle with idleFlushMin results waiting: flush without waiting out AckDelay
	flushNow     chan struct{} // a batch is full, the first result arrived, or the run went idle
}

// idleFlushMin is how many results must be waiting for the completer to
// flush them without waiting out AckDelay when the run has nothing left
// prefetched or running (add's idle), at the end of a burst. AckDelay
// lets the results of a steady trickle share a commit (about ten per
// commit at a few hundred jobs/s); those gather while the run is idle
// between jobs, so a run that goes idle with few results waiting still
// waits. With this many, the commit is already shared widely, no more
// results are coming soon to share it, and waiting would only keep the
// burst's last jobs unacknowledged (running, leased) for up to AckDelay.
const idleFlushMin = 100

// add queues the result of e's attempt: its acknowledgement when
// completed, else res. It wakes the flusher when the result is the first
// unflushed one (which starts the AckDelay clock), fills a batch, or is
// the last of a burst: idle reports that the run has no other job
// prefetched or running, and at least idleFlushMin results are waiting.
func (c *completer[T]) add(e *entry[T], res Resolution, completed, idle bool, now time.Time) {
	c.mu.Lock()
	if len(c.acks)+len(c.resolves) == 0 {
		c.pendingSince = now
	}
	if completed {
		c.acks = append(c.acks, e)
	} else {
		res.ID, res.Claim = e.row.ID, e.row.Claim
		e.res = res
		c.resolves = append(c.resolves, e)
	}
	n := len(c.acks) + len(c.resolves)
	early := idle && n >= idleFlushMin
	if early {
		c.idleFlush = true
	}
	c.mu.Unlock()
	if n == 1 || n == c.batchSize || early {
		signal(c.flushNow)
	}
}

// backlog returns how many results wait to be written or are being
// written.
func (c *completer[T]) backlog() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acks) + len(c.resolves) + c.flushing
}

// flushSoon wakes the flusher to write what is queued without waiting for
// AckDelay's timer.
func (c *completer[T]) flushSoon() { signal(c.flushNow) }

// flushLoop writes results (acknowledgements and resolutions) in batches:
// as soon as BatchSize of them are waiting, or when the oldest has waited
// AckDelay. One statement runs at a time, so while it runs the next batch
// grows; under load batches fill up by themselves. When final is closed it
// flushes everything that is left, on a fresh bounded context, and returns.
func (c *completer[T]) flushLoop(final <-chan struct{}) {
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
		c.mu.Lock()
		n := len(c.acks) + len(c.resolves)
		wait := c.ackDelay - time.Since(c.pendingSince)
		early := c.idleFlush
		c.idleFlush = false
		c.mu.Unlock()

		if n > 0 && (stopping || n >= c.batchSize || wait <= 0 || early) {
			ctx, cancel := context.WithTimeout(context.Background(), c.stmtTimeout)
			if stopping {
				ctx, cancel = context.WithDeadline(context.Background(), deadline)
			}
			err := c.flush(ctx)
			cancel()
			if err == nil {
				bo.reset()
				continue
			}
			d := bo.next()
			if stopping && time.Now().Add(d).After(deadline) {
				c.log.Error("skipjack: giving up on flushing results at shutdown; these jobs run again once their leases lapse",
					"error", err, "jobs", c.unflushed())
				return
			}
			c.log.Warn("skipjack: flushing job results failed; retrying", "error", err, "retry_in", d)
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
		case <-c.flushNow:
		case <-timer.C:
		case <-final:
		}
		timer.Stop()
	}
}

func (c *completer[T]) unflushed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acks) + len(c.resolves)
}

// flush writes one batch of acknowledgements and one of resolutions.
func (c *completer[T]) flush(ctx context.Context) error {
	if acks := c.take(&c.acks); len(acks) > 0 {
		start := time.Now()
		matched, err := c.complete(ctx, acks)
		c.hooks.ackDone(skipjack.AckComplete, len(acks), len(matched), time.Since(start), err)
		c.settle(&c.acks, acks, matched, err)
		if err != nil {
			return fmt.Errorf("complete %s: %w", c.name, err)
		}
	}
	if res := c.take(&c.resolves); len(res) > 0 {
		rs := make([]Resolution, len(res))
		for i, e := range res {
			rs[i] = e.res
		}
		// Sorted by id, like every batched write (see idsAndClaims).
		slices.SortFunc(rs, func(a, b Resolution) int { return cmp.Compare(a.ID, b.ID) })
		start := time.Now()
		matched, err := c.resolve(ctx, rs)
		c.hooks.ackDone(skipjack.AckResolve, len(rs), len(matched), time.Since(start), err)
		c.settle(&c.resolves, res, matched, err)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", c.name, err)
		}
		soonest := time.Duration(-1)
		for _, x := range rs {
			if x.Action != ActionFail && (soonest < 0 || x.Delay < soonest) {
				soonest = x.Delay
			}
		}
		if soonest >= 0 {
			c.due(soonest)
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
func (c *completer[T]) complete(ctx context.Context, acks []*entry[T]) ([]int64, error) {
	ids, claims := idsAndClaims(acks)
	waits := waitHistogram(&c.clock, acks)
	sent := time.Now()
	matched, dbNow, err := c.store.Complete(ctx, ids, claims, waits)
	c.clock.observe(sent, time.Now(), dbNow)
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
	again, _, err := c.store.Complete(ctx, ids, claims, make([]int64, len(waits)))
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
func (c *completer[T]) resolve(ctx context.Context, rs []Resolution) ([]int64, error) {
	matched, err := c.store.Resolve(ctx, rs)
	if err == nil || !dataError(err) {
		return matched, err
	}
	if len(rs) == 1 {
		if rs[0].Message == unstorable {
			return nil, err
		}
		c.log.Error("skipjack: Postgres rejected a job's result; writing it with a placeholder error message", "job_id", rs[0].ID, "error", err)
		x := rs[0]
		x.Message = unstorable
		return c.store.Resolve(ctx, []Resolution{x})
	}
	half := len(rs) / 2
	first, err := c.resolve(ctx, rs[:half])
	if err != nil {
		return first, err
	}
	second, err := c.resolve(ctx, rs[half:])
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
func (c *completer[T]) take(list *[]*entry[T]) []*entry[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*entry[T]
	i := 0
	for ; i < len(*list) && len(out) < c.batchSize; i++ {
		e := (*list)[i]
		if e.lost.Load() {
			continue
		}
		e.settling.Store(true)
		out = append(out, e)
	}
	*list = append((*list)[:0:0], (*list)[i:]...)
	c.flushing += len(out)
	return out
}

// settle records the outcome of a flush statement. On error the batch goes
// back to the front of *list to be retried; otherwise it goes back to the
// run (settled), which holds its jobs no more. Jobs the statement did not
// match had lost their lease.
func (c *completer[T]) settle(list *[]*entry[T], batch []*entry[T], matched []int64, err error) {
	c.mu.Lock()
	c.flushing -= len(batch)
	if err != nil {
		for _, e := range batch {
			e.settling.Store(false)
		}
		*list = append(batch, *list...)
	} else if len(*list) == 0 && len(c.acks)+len(c.resolves) == 0 {
		c.pendingSince = time.Time{}
	}
	c.mu.Unlock()
	if err != nil {
		return
	}
	c.settled(batch)
	if len(matched) < len(batch) {
		if lost := unmatched(batch, matched); lost > 0 {
			c.log.Warn("skipjack: some job results matched no running attempt (their lease was lost); those jobs may run again",
				"results", len(batch), "matched", len(matched), "lost", lost)
		}
	}
}

// unmatched returns how many jobs of batch a flush statement did not match
// (matched holds the ids it did) for a reason other than CompleteTx: a job
// whose CompleteTx committed is written already, and its result finds no
// running attempt, as it should.
func unmatched[T any](batch []*entry[T], matched []int64) int {
	seen := make(map[int64]bool, len(matched))
	for _, id := range matched {
		seen[id] = true
	}
	n := 0
	for _, e := range batch {
		if !seen[e.row.ID] && !e.txAcked.Load() {
			n++
		}
	}
	return n
}

// CompleteTx acknowledges job by running complete (the queue's fenced
// single-job acknowledgement) in the caller's transaction, so that the
// handler's writes and the acknowledgement commit or roll back together.
// Generated packages wrap it as CompleteTx(ctx, tx, job).
//
// It returns an error wrapping skipjack.ErrLeaseLost when this attempt no
// longer owns the job; the caller should roll back. After it succeeds the
// worker still holds the job (its heartbeat keeps it renewed, skipping the
// row while the open transaction locks it) until the handler returns: the
// worker cannot see whether the transaction committed, so it then writes
// the handler's result as for any job, fenced by the claim token. When the
// transaction committed, that write matches nothing (the job is completed
// already); when it rolled back, the result settles the job: nil completes
// it, an error retries or fails it.
func CompleteTx[T any](ctx context.Context, job *skipjack.Job[T], complete func(ctx context.Context, id int64, claim int32) (int64, error)) error {
	n, err := complete(ctx, job.ID, job.Claim)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", job.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("complete job %d: %w", job.ID, skipjack.ErrLeaseLost)
	}
	ackedInTx(job.ID, job)
	return nil
}
