package dashboard

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// fakeQueue is an in-memory QueueAdmin for the tests of rendering, routing
// and CSRF, which do not depend on Postgres (the tests against generated
// queues on a real server are in postgres_test.go).
type fakeQueue struct {
	name string
	now  time.Time

	mu      sync.Mutex
	jobs    map[int64]*skipjack.Record[json.RawMessage]
	err     error // returned by every call when set
	lists   []skipjack.ListParams
	stats   int // Stats calls
	retries []int64
	cancels []int64
	paused  bool
}

// newFakeQueue returns a queue with n jobs: ids 1..n, job 1 failed with two
// errors, job 2 running, job 3 scheduled, the rest pending.
func newFakeQueue(name string, n int, now time.Time) *fakeQueue {
	q := &fakeQueue{name: name, now: now, jobs: map[int64]*skipjack.Record[json.RawMessage]{}}
	for id := int64(1); id <= int64(n); id++ {
		rec := &skipjack.Record[json.RawMessage]{
			ID: id, State: skipjack.StatePending, MaxAttempts: 3,
			RunAt: now.Add(-time.Minute), CreatedAt: now.Add(-2 * time.Minute),
			Payload: json.RawMessage(`{"n":` + itoa(id) + `,"label":"job"}`),
		}
		switch id {
		case 1:
			fin := now.Add(-30 * time.Second)
			rec.State, rec.Attempt, rec.FinishedAt, rec.Worker = skipjack.StateFailed, 3, &fin, "host-1/7"
			rec.Errors = []skipjack.AttemptError{
				{Attempt: 2, At: now.Add(-40 * time.Second), Error: "smtp: connection refused", Worker: "host-1/7"},
				{Attempt: 3, At: fin, Error: "smtp: 550 mailbox unavailable", Worker: "host-2/3"},
			}
		case 2:
			lease := now.Add(20 * time.Second)
			rec.State, rec.Attempt, rec.LeaseExpiresAt, rec.Worker = skipjack.StateRunning, 1, &lease, "host-1/7"
		case 3:
			rec.RunAt = now.Add(time.Hour)
		}
		q.jobs[id] = rec
	}
	return q
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func (q *fakeQueue) Name() string { return q.name }

func (q *fakeQueue) Stats(context.Context) (skipjack.Stats, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stats++
	s := skipjack.Stats{Paused: q.paused}
	if q.err != nil {
		return s, q.err
	}
	for _, r := range q.jobs {
		switch {
		case r.State == skipjack.StatePending && r.RunAt.After(q.now):
			s.Scheduled++
		case r.State == skipjack.StatePending:
			s.Pending++
			s.OldestPending = max(s.OldestPending, q.now.Sub(r.RunAt))
		case r.State == skipjack.StateRunning:
			s.Running++
		case r.State == skipjack.StateCompleted:
			s.Completed++
		case r.State == skipjack.StateFailed:
			s.Failed++
		}
	}
	return s, nil
}

func (q *fakeQueue) Finished(_ context.Context, since time.Time) (completed, failed int64, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0, 0, q.err
	}
	for _, r := range q.jobs {
		if r.FinishedAt == nil || r.FinishedAt.Before(since) {
			continue
		}
		if r.State == skipjack.StateCompleted {
			completed++
		} else {
			failed++
		}
	}
	return completed, failed, nil
}

func (q *fakeQueue) Get(_ context.Context, id int64) (*skipjack.Record[json.RawMessage], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.err
	}
	r, ok := q.jobs[id]
	if !ok {
		return nil, skipjack.ErrNotFound
	}
	c := *r
	return &c, nil
}

func (q *fakeQueue) List(_ context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lists = append(q.lists, p)
	if q.err != nil {
		return nil, q.err
	}
	var ids []int64
	for id, r := range q.jobs {
		if id > p.AfterID && (p.State == "" || r.State == p.State) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []*skipjack.Record[json.RawMessage]
	for _, id := range ids[:min(len(ids), limit)] {
		c := *q.jobs[id]
		out = append(out, &c)
	}
	return out, nil
}

func (q *fakeQueue) Retry(_ context.Context, ids ...int64) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.retries = append(q.retries, ids...)
	var n int64
	for _, id := range ids {
		if r, ok := q.jobs[id]; ok && (r.State == skipjack.StateFailed || r.RunAt.After(q.now)) {
			r.State, r.RunAt, r.FinishedAt = skipjack.StatePending, q.now, nil
			n++
		}
	}
	return n, q.err
}

func (q *fakeQueue) Cancel(_ context.Context, ids ...int64) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancels = append(q.cancels, ids...)
	var n int64
	for _, id := range ids {
		if r, ok := q.jobs[id]; ok && r.State == skipjack.StatePending {
			r.State = skipjack.StateFailed
			n++
		}
	}
	return n, q.err
}

func (q *fakeQueue) Pause(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.paused = true
	return q.err
}

func (q *fakeQueue) Resume(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.paused = false
	return q.err
}

// calls returns what Retry, Cancel and List were called with.
func (q *fakeQueue) calls() (retries, cancels []int64, lists []skipjack.ListParams) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.retries), slices.Clone(q.cancels), slices.Clone(q.lists)
}
