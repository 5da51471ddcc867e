package skipjackimpl

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/link"
)

// EnqueueAll inserts the jobs of ps with one statement and returns, for
// each payload in the order given, the id of its job and whether it was a
// duplicate (a duplicate's id is that of the job holding its unique key,
// which may have been inserted for an earlier payload of the same call).
// The options, and the trace context of ctx, apply to every job. Inside a
// pgx.Tx the jobs exist only if that transaction commits; no statement
// fails for a duplicate, so the transaction stays usable.
//
// The statement finds a holder through its snapshot. A holder that
// another transaction committed while the statement ran is invisible to
// it; such payloads alone are looked up again, and inserted again if
// their holder left the unique states meanwhile, as Enqueue does.
func (q *Queue[P]) EnqueueAll(ctx context.Context, db DBTX, ps []P, list ...skipjack.EnqueueOption) ([]skipjack.EnqueueResult, error) {
	o, priority, maxAttempts, err := q.enqueueOptions(list)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return []skipjack.EnqueueResult{}, nil
	}
	texts := make([]string, len(ps))
	for i := range ps {
		b, err := q.encode(&ps[i])
		if err != nil {
			return nil, fmt.Errorf("enqueue %s: payload %d: %w", q.spec.Name, i, err)
		}
		texts[i] = string(b)
	}
	qs := q.bind(db)
	params := enqueueAllParams{
		payloads:    texts,
		runAt:       o.RunAt,
		delay:       o.Delay,
		priority:    priority,
		trace:       traceText(encodeTrace(link.InjectTrace(ctx))),
		maxAttempts: maxAttempts,
	}
	results, err := qs.enqueueAll(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
	}
	if len(results) != len(texts) {
		return nil, fmt.Errorf("enqueue %s: %d payloads got %d results", q.spec.Name, len(texts), len(results))
	}
	if err := q.findHolders(ctx, qs, params, results); err != nil {
		return nil, err
	}
	return results, nil
}

// findHolders fills in the duplicates of results whose holder the
// EnqueueAll statement could not see (id 0): each is looked up with a
// new snapshot, and the payloads whose holder is gone by then are
// inserted again, at most duplicateRaces times.
func (q *Queue[P]) findHolders(ctx context.Context, qs queries, params enqueueAllParams, results []skipjack.EnqueueResult) error {
	var unseen []int
	for i, r := range results {
		if r.ID == 0 {
			unseen = append(unseen, i)
		}
	}
	if len(unseen) == 0 {
		return nil
	}
	u := qs.unique()
	if u == nil {
		return fmt.Errorf("enqueue %s: the insert returned no id for payload %d", q.spec.Name, unseen[0])
	}
	for range duplicateRaces {
		var gone []int
		for _, i := range unseen {
			id, err := u.Duplicate(ctx, params.payloads[i])
			switch {
			case err == nil:
				results[i] = skipjack.EnqueueResult{ID: id, Duplicate: true}
			case errors.Is(err, pgx.ErrNoRows):
				gone = append(gone, i)
			default:
				return fmt.Errorf("enqueue %s: find duplicate of payload %d: %w", q.spec.Name, i, err)
			}
		}
		if len(gone) == 0 {
			return nil
		}
		again := params
		again.payloads = make([]string, len(gone))
		for j, i := range gone {
			again.payloads[j] = params.payloads[i]
		}
		rs, err := qs.enqueueAll(ctx, again)
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
		}
		unseen = unseen[:0]
		for j, i := range gone {
			results[i] = rs[j]
			if rs[j].ID == 0 {
				unseen = append(unseen, i)
			}
		}
		if len(unseen) == 0 {
			return nil
		}
	}
	return fmt.Errorf("enqueue %s: the jobs holding the unique keys of %d payloads kept changing state; %d inserts found duplicates that were gone when looked up", q.spec.Name, len(unseen), duplicateRaces)
}
