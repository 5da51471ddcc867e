package skipjackimpl

import (
	"context"
	"time"
	"unsafe"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// DBTX is what the generated sqlc queries run on.
type DBTX = skipjack.DBTX

// ClaimRow is the shape of the row sqlc generates for a queue's Claim
// query. Generated rows convert to ClaimedRow with no per-queue code.
type ClaimRow interface{ ~claimedShape }

// HeartbeatRow is the shape of the row of a queue's Heartbeat query.
type HeartbeatRow interface{ ~heartbeatRow }

// RecordRow is the shape of the rows of a queue's Get and List queries.
type RecordRow interface{ ~recordRow }

// StatsRow is the shape of the row of a queue's Stats query.
type StatsRow interface {
	~struct {
		Pending       int64
		Scheduled     int64
		Running       int64
		Completed     int64
		Failed        int64
		OldestPending time.Duration
		Paused        bool
	}
}

// HeadroomRow is the shape of the row of a queue's Headroom query.
type HeadroomRow interface{ ~headroom }

// CompleteRow is the shape of the rows of a queue's Complete query.
type CompleteRow interface{ ~completeRow }

// ActivityRow is the shape of the rows of a queue's Activity query.
type ActivityRow interface{ ~activityRow }

// FailureGroupRow is the shape of the rows of a queue's FailureGroups
// query.
type FailureGroupRow interface{ ~failureGroupRow }

// CopyRow is the shape of one row of a queue's EnqueueCopy.
type CopyRow interface{ ~copyRow }

// CopyAtRow is the shape of one row of a queue's EnqueueCopyAt.
type CopyAtRow interface{ ~copyAtRow }

// Queries is the method set sqlc generates for every queue's queries.sql
// (with query_parameter_limit high enough that every parameter is
// positional). The type parameters are the queue's own row types; their
// shapes are fixed by the constraints above, so the runtime converts them
// once, here, for every queue.
type Queries[C ClaimRow, H HeartbeatRow, G, L RecordRow, S StatsRow, E CopyRow, A CopyAtRow, R HeadroomRow, V ActivityRow, F FailureGroupRow, K CompleteRow] interface {
	Enqueue(ctx context.Context, payload string, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32) (int64, error)
	EnqueueCopy(ctx context.Context, rows []E) (int64, error)
	EnqueueCopyAt(ctx context.Context, rows []A) (int64, error)
	Now(ctx context.Context, delay time.Duration) (time.Time, error)
	Claim(ctx context.Context, lease time.Duration, worker string, max int32) ([]C, error)
	Complete(ctx context.Context, ids []int64, claims []int32, waits []int64) ([]K, error)
	CompleteOne(ctx context.Context, id int64, claim int32) (int64, error)
	Resolve(ctx context.Context, ids []int64, claims []int32, outcomes []string, delays []time.Duration, messages []string) ([]int64, error)
	Heartbeat(ctx context.Context, ids []int64, claims []int32, lease time.Duration) ([]H, error)
	Release(ctx context.Context, ids []int64, claims []int32) (int64, error)
	Rescue(ctx context.Context, max int32) (int64, error)
	Live(ctx context.Context, worker string, lease time.Duration) error
	Gone(ctx context.Context, worker string) error
	PruneCompleted(ctx context.Context, age time.Duration, max int32) (int64, error)
	PruneFailed(ctx context.Context, age time.Duration, max int32) (int64, error)
	Stats(ctx context.Context) (S, error)
	CountFinished(ctx context.Context, state string, since time.Time) (int64, error)
	Get(ctx context.Context, id int64) (G, error)
	List(ctx context.Context, afterID int64, untilID int64, state string, payload string, errorGroup string, max int32) ([]L, error)
	FailureGroups(ctx context.Context, max int32, scan int32) ([]F, error)
	Activity(ctx context.Context, since time.Time) ([]V, error)
	Retry(ctx context.Context, ids []int64) (int64, error)
	Cancel(ctx context.Context, ids []int64) (int64, error)
	Admit(ctx context.Context, clientTimeout string) error
	Headroom(ctx context.Context) (R, error)
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// uniqueQueries are the extra queries of a queue with a unique key.
type uniqueQueries interface {
	Duplicate(ctx context.Context, payload string) (int64, error)
	FindUnique(ctx context.Context, payload string) ([]int64, error)
	EnqueueBatch(ctx context.Context, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32, payloads []string) (int64, error)
}

// claimIntoQueries and completeIntoQueries are the Claim and Complete
// that skipjack generates beside sqlc's: the same statements and scans,
// appending to a slice the caller keeps or sizes, so that a worker claims
// and acknowledges thousands of jobs a second without growing a new slice
// of rows, and allocating each row, for every batch.
type claimIntoQueries[C ClaimRow] interface {
	ClaimInto(ctx context.Context, dst []C, lease time.Duration, worker string, max int32) ([]C, error)
}

// claimFromQueries is the ClaimFromInto that skipjack generates for a
// queue without a serial key or a per-key limit: the claim that reads the
// claim index from a floor per priority on (see claimFloor), scanning
// into the row type of Claim and returning the statement's clock.
type claimFromQueries[C ClaimRow] interface {
	ClaimFromInto(ctx context.Context, dst []C, lease time.Duration, worker string, floorRunAts []time.Time, floorIDs []int64, max int32) ([]C, time.Time, error)
}

// giveBackQueries is the GiveBack of a queue generated by a skipjack that
// gives back the jobs of claims whose rows never reached their worker.
type giveBackQueries interface {
	GiveBack(ctx context.Context, worker string, held []int64, max int32) (int64, error)
}

// pausedQueries is the Paused of a queue generated by a skipjack that reads
// the pause flag alone.
type pausedQueries interface {
	Paused(ctx context.Context) (bool, error)
}

// completeIntoQueries is the CompleteInto of claimIntoQueries' comment.
type completeIntoQueries[K CompleteRow] interface {
	CompleteInto(ctx context.Context, dst []K, ids []int64, claims []int32, waits []int64) ([]K, error)
}

// quietQueries is the extra query of a queue with a notify trigger.
type quietQueries interface {
	EnqueueQuiet(ctx context.Context, payload string, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32) (int64, error)
}

// EnqueueAllRow is the shape of the rows of a queue's EnqueueAll query.
type EnqueueAllRow interface{ ~enqueueAllRow }

// enqueueAllRow is the shape of EnqueueAllRow, the layout of
// skipjack.EnqueueResult.
type enqueueAllRow = struct {
	ID        int64
	Duplicate bool
}

// enqueueAllQueries is the EnqueueAll that every queue's queries have.
// It is apart from Queries so that its row type N is a type parameter of
// NewQueue alone.
type enqueueAllQueries[N EnqueueAllRow] interface {
	EnqueueAll(ctx context.Context, payloads []string, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32) ([]N, error)
}

// enqueueAllParams are the arguments of one EnqueueAll statement.
type enqueueAllParams struct {
	payloads    []string
	runAt       *time.Time
	delay       time.Duration
	priority    int16
	trace       *string
	maxAttempts int32
}

// enqueueAllOf returns the function that runs q's EnqueueAll and converts
// its rows.
func enqueueAllOf[N EnqueueAllRow](q enqueueAllQueries[N]) func(context.Context, enqueueAllParams) ([]skipjack.EnqueueResult, error) {
	return func(ctx context.Context, e enqueueAllParams) ([]skipjack.EnqueueResult, error) {
		rows, err := q.EnqueueAll(ctx, e.payloads, e.runAt, e.delay, e.priority, e.trace, e.maxAttempts)
		if err != nil {
			return nil, err
		}
		out := make([]skipjack.EnqueueResult, len(rows))
		for i, r := range rows {
			out[i] = skipjack.EnqueueResult(enqueueAllRow(r))
		}
		return out, nil
	}
}

// slotQueries are the extra queries of a queue with periodic jobs.
type slotQueries interface {
	EnqueueSlot(ctx context.Context, payload string, schedule int32, slot time.Time) (int64, error)
	LastSlot(ctx context.Context, schedule int32) (time.Time, error)
}

// queries is the type-erased view of one queue's Queries on one DBTX that
// the rest of the runtime uses.
type queries interface {
	store
	enqueue(ctx context.Context, payload string, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32) (int64, error)
	enqueueCopy(ctx context.Context, payloads [][]byte, priority int16, runAt *time.Time, trace []byte, maxAttempts int32) (int64, error)
	enqueueAll(ctx context.Context, e enqueueAllParams) ([]skipjack.EnqueueResult, error)
	now(ctx context.Context, delay time.Duration) (time.Time, error)
	completeOne(ctx context.Context, id int64, claim int32) (int64, error)
	stats(ctx context.Context) (skipjack.Stats, error)
	countFinished(ctx context.Context, state string, since time.Time) (int64, error)
	get(ctx context.Context, id int64) (*skipjack.Record[[]byte], error)
	list(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[[]byte], error)
	retry(ctx context.Context, ids []int64) (int64, error)
	cancel(ctx context.Context, ids []int64) (int64, error)
	pause(ctx context.Context) error
	resume(ctx context.Context) error
	failureGroups(ctx context.Context, limit int) ([]skipjack.FailureGroup, error)
	activity(ctx context.Context, since time.Time) ([]skipjack.ActivityMinute, error)
	unique() uniqueQueries
	slots() slotQueries
	quiet() quietQueries
	browse() browseQueries
}

// binding adapts one queue's sqlc Queries to queries.
type binding[C ClaimRow, H HeartbeatRow, G, L RecordRow, S StatsRow, E CopyRow, A CopyAtRow, R HeadroomRow, V ActivityRow, F FailureGroupRow, K CompleteRow] struct {
	q Queries[C, H, G, L, S, E, A, R, V, F, K]
	// q's ClaimInto and CompleteInto; nil for queries generated before them.
	claimInto    claimIntoQueries[C]
	completeInto completeIntoQueries[K]
	// q's ClaimFromInto; nil for queries generated before it, and for
	// queues with a serial key or a per-key limit.
	claimFrom claimFromQueries[C]
	// q's GiveBack; nil for queries generated before it.
	giveBack giveBackQueries
	// q's Paused; nil for queries generated before it.
	paused pausedQueries
	// all runs q's EnqueueAll; NewQueue sets it.
	all func(ctx context.Context, e enqueueAllParams) ([]skipjack.EnqueueResult, error)
}

// newBinding binds q, noting whether it claims and completes into given
// slices.
func newBinding[C ClaimRow, H HeartbeatRow, G, L RecordRow, S StatsRow, E CopyRow, A CopyAtRow, R HeadroomRow, V ActivityRow, F FailureGroupRow, K CompleteRow](q Queries[C, H, G, L, S, E, A, R, V, F, K]) binding[C, H, G, L, S, E, A, R, V, F, K] {
	b := binding[C, H, G, L, S, E, A, R, V, F, K]{q: q}
	b.claimInto, _ = q.(claimIntoQueries[C])
	b.completeInto, _ = q.(completeIntoQueries[K])
	b.claimFrom, _ = q.(claimFromQueries[C])
	b.giveBack, _ = q.(giveBackQueries)
	b.paused, _ = q.(pausedQueries)
	return b
}

// isPaused reports whether the queue is paused, with Paused, or with Stats
// for queries generated before it.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) isPaused(ctx context.Context) (bool, error) {
	if b.paused != nil {
		return b.paused.Paused(ctx)
	}
	s, err := b.stats(ctx)
	return s.Paused, err
}

// givesBack reports whether the queries have GiveBack.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) givesBack() bool { return b.giveBack != nil }

// GiveBack makes pending again up to limit jobs running under worker
// whose leases lapsed and which are not among held, and returns how many
// it touched. It must only be called when givesBack reports true.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) GiveBack(ctx context.Context, worker string, held []int64, limit int) (int64, error) {
	return b.giveBack.GiveBack(ctx, worker, held, int32(limit))
}

// claimsFrom reports whether the queries have ClaimFrom.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) claimsFrom() bool { return b.claimFrom != nil }

// ClaimFrom runs the claim that reads the claim index from floors on and
// returns the rows appended to dst and the statement's clock (zero when it
// claimed nothing). It must only be called when claimsFrom reports true.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) ClaimFrom(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string, floors floors) ([]ClaimedRow, time.Time, error) {
	rows, at, err := b.claimFrom.ClaimFromInto(ctx, sameRows[C](dst), lease, worker, floors.runAts, floors.ids, int32(limit))
	return sameRows[ClaimedRow](rows), at, err
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Claim(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string) ([]ClaimedRow, error) {
	if b.claimInto != nil {
		rows, err := b.claimInto.ClaimInto(ctx, sameRows[C](dst), lease, worker, int32(limit))
		return sameRows[ClaimedRow](rows), err
	}
	rows, err := b.q.Claim(ctx, lease, worker, int32(limit))
	if err != nil {
		return dst, err
	}
	return append(dst, sameRows[ClaimedRow](rows)...), nil
}

// sameRows returns rows as a slice of another claim row type without
// copying them: every ClaimRow's underlying type is claimedShape (the
// constraint says so), ClaimedRow's too, so all share one memory layout.
// Go converts one such row type to another but not a slice of them, and a
// copy would cost a claim of thousands of jobs a second slice as large as
// the one it scanned. The capacity is kept, so that appending to the
// result reuses it.
func sameRows[To, From ClaimRow](rows []From) []To {
	return unsafe.Slice((*To)(unsafe.Pointer(unsafe.SliceData(rows))), cap(rows))[:len(rows)]
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Complete(ctx context.Context, ids []int64, claims []int32, waits []int64) ([]int64, time.Time, error) {
	var rows []K
	var err error
	if b.completeInto != nil {
		// At most one row per id: one allocation, sized once.
		rows, err = b.completeInto.CompleteInto(ctx, make([]K, 0, len(ids)), ids, claims, waits)
	} else {
		rows, err = b.q.Complete(ctx, ids, claims, waits)
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	matched := make([]int64, len(rows))
	var at time.Time
	for i, row := range rows {
		r := completeRow(row)
		matched[i], at = r.ID, r.At
	}
	return matched, at, nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Resolve(ctx context.Context, rs []Resolution) ([]int64, error) {
	ids := make([]int64, len(rs))
	claims := make([]int32, len(rs))
	outcomes := make([]string, len(rs))
	delays := make([]time.Duration, len(rs))
	messages := make([]string, len(rs))
	for i, r := range rs {
		ids[i], claims[i], outcomes[i], delays[i], messages[i] = r.ID, r.Claim, string(r.Action), r.Delay, storableText(r.Message)
	}
	return b.q.Resolve(ctx, ids, claims, outcomes, delays, messages)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Heartbeat(ctx context.Context, ids []int64, claims []int32, lease time.Duration) (alive, cancelled []int64, err error) {
	rows, err := b.q.Heartbeat(ctx, ids, claims, lease)
	if err != nil {
		return nil, nil, err
	}
	alive = make([]int64, len(rows))
	for i, row := range rows {
		r := heartbeatRow(row)
		alive[i] = r.ID
		if r.CancelRequested {
			cancelled = append(cancelled, r.ID)
		}
	}
	return alive, cancelled, nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Release(ctx context.Context, ids []int64, claims []int32) (int64, error) {
	return b.q.Release(ctx, ids, claims)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Rescue(ctx context.Context, limit int) (int64, error) {
	return b.q.Rescue(ctx, int32(limit))
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Live(ctx context.Context, worker string, lease time.Duration) error {
	return b.q.Live(ctx, worker, lease)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Gone(ctx context.Context, worker string) error {
	return b.q.Gone(ctx, worker)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Prune(ctx context.Context, completedAge, failedAge time.Duration, limit int) (int64, error) {
	var n int64
	if completedAge > 0 {
		c, err := b.q.PruneCompleted(ctx, completedAge, int32(limit))
		if err != nil {
			return n, err
		}
		n += c
	}
	if failedAge > 0 {
		f, err := b.q.PruneFailed(ctx, failedAge, int32(limit))
		if err != nil {
			return n, err
		}
		n += f
	}
	return n, nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) enqueue(ctx context.Context, payload string, runAt *time.Time, delay time.Duration, priority int16, trace *string, maxAttempts int32) (int64, error) {
	return b.q.Enqueue(ctx, payload, runAt, delay, priority, trace, maxAttempts)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) enqueueAll(ctx context.Context, e enqueueAllParams) ([]skipjack.EnqueueResult, error) {
	return b.all(ctx, e)
}

// copyRow and copyAtRow are the shapes of CopyRow and CopyAtRow, converted
// to the queue's own types. They and the other shapes below are aliases of
// unnamed struct types, which is what lets the constraints name them with ~.
type (
	copyRow = struct {
		Payload     []byte
		Priority    int16
		Trace       []byte
		MaxAttempts int32
	}
	copyAtRow = struct {
		Payload     []byte
		Priority    int16
		RunAt       time.Time
		Trace       []byte
		MaxAttempts int32
	}
)

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) enqueueCopy(ctx context.Context, payloads [][]byte, priority int16, runAt *time.Time, trace []byte, maxAttempts int32) (int64, error) {
	if runAt == nil {
		rows := make([]E, len(payloads))
		for i, p := range payloads {
			rows[i] = E(copyRow{Payload: p, Priority: priority, Trace: trace, MaxAttempts: maxAttempts})
		}
		return b.q.EnqueueCopy(ctx, rows)
	}
	rows := make([]A, len(payloads))
	for i, p := range payloads {
		rows[i] = A(copyAtRow{Payload: p, Priority: priority, RunAt: *runAt, Trace: trace, MaxAttempts: maxAttempts})
	}
	return b.q.EnqueueCopyAt(ctx, rows)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) now(ctx context.Context, delay time.Duration) (time.Time, error) {
	return b.q.Now(ctx, delay)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) completeOne(ctx context.Context, id int64, claim int32) (int64, error) {
	return b.q.CompleteOne(ctx, id, claim)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) stats(ctx context.Context) (skipjack.Stats, error) {
	s, err := b.q.Stats(ctx)
	if err != nil {
		return skipjack.Stats{}, err
	}
	return skipjack.Stats(s), nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) countFinished(ctx context.Context, state string, since time.Time) (int64, error) {
	return b.q.CountFinished(ctx, state, since)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) get(ctx context.Context, id int64) (*skipjack.Record[[]byte], error) {
	row, err := b.q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return record(recordRow(row)), nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) list(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[[]byte], error) {
	payload := "{}"
	if p.Payload != "" {
		payload = p.Payload
	}
	rows, err := b.q.List(ctx, p.AfterID, p.UntilID, p.State, payload, p.ErrorGroup, int32(p.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]*skipjack.Record[[]byte], len(rows))
	for i, r := range rows {
		out[i] = record(recordRow(r))
	}
	return out, nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) failureGroups(ctx context.Context, limit int) ([]skipjack.FailureGroup, error) {
	rows, err := b.q.FailureGroups(ctx, int32(limit), skipjack.FailureGroupsScan)
	if err != nil {
		return nil, err
	}
	out := make([]skipjack.FailureGroup, len(rows))
	for i, row := range rows {
		r := failureGroupRow(row)
		out[i] = skipjack.FailureGroup{Error: r.ErrorGroup, Example: r.Example, Jobs: r.Jobs, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
	}
	return out, nil
}

// activity sums the rows of the counts table (one per minute and worker)
// per minute.
func (b binding[C, H, G, L, S, E, A, R, V, F, K]) activity(ctx context.Context, since time.Time) ([]skipjack.ActivityMinute, error) {
	rows, err := b.q.Activity(ctx, since)
	if err != nil {
		return nil, err
	}
	var out []skipjack.ActivityMinute
	for _, row := range rows {
		r := activityRow(row)
		if n := len(out); n == 0 || !out[n-1].Minute.Equal(r.Minute) {
			out = append(out, skipjack.ActivityMinute{Minute: r.Minute})
		}
		m := &out[len(out)-1]
		m.Completed += r.Completed
		m.Failed += r.Failed
		m.Retried += r.Retried
		m.Waits = skipjack.AddWaits(m.Waits, r.Waits)
	}
	return out, nil
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) retry(ctx context.Context, ids []int64) (int64, error) {
	return b.q.Retry(ctx, ids)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) cancel(ctx context.Context, ids []int64) (int64, error) {
	return b.q.Cancel(ctx, ids)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Admit(ctx context.Context, client time.Duration) error {
	return b.q.Admit(ctx, millis(client))
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) Headroom(ctx context.Context) (headroom, error) {
	h, err := b.q.Headroom(ctx)
	return headroom(h), err
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) pause(ctx context.Context) error {
	return b.q.Pause(ctx)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) resume(ctx context.Context) error {
	return b.q.Resume(ctx)
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) unique() uniqueQueries {
	u, _ := b.q.(uniqueQueries)
	return u
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) quiet() quietQueries {
	q, _ := b.q.(quietQueries)
	return q
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) browse() browseQueries {
	q, _ := b.q.(browseQueries)
	return q
}

func (b binding[C, H, G, L, S, E, A, R, V, F, K]) slots() slotQueries {
	s, _ := b.q.(slotQueries)
	return s
}

// headroom is the shape of HeadroomRow: why a claim came back short.
type headroom = struct {
	Due        bool  // due pending jobs wait
	Claimed    int32 // jobs claimed (running or prefetched) in all processes
	RateWaitMs int64 // milliseconds until the rate window has room again
}

// heartbeatRow is the shape of HeartbeatRow.
type heartbeatRow = struct {
	ID              int64
	CancelRequested bool
}

// completeRow is the shape of CompleteRow: an acknowledged job and the
// database clock of the statement.
type completeRow = struct {
	ID int64
	At time.Time
}

// activityRow is the shape of ActivityRow.
type activityRow = struct {
	Minute    time.Time
	Completed int64
	Failed    int64
	Retried   int64
	Waits     []int64
}

// failureGroupRow is the shape of FailureGroupRow.
type failureGroupRow = struct {
	ErrorGroup string
	Jobs       int64
	FirstSeen  time.Time
	LastSeen   time.Time
	Example    string
}

// recordRow is the shape of RecordRow.
type recordRow = struct {
	ID             int64
	State          string
	Attempt        int32
	MaxAttempts    int32
	Priority       int16
	RunAt          time.Time
	CreatedAt      time.Time
	FinishedAt     *time.Time
	LeaseExpiresAt *time.Time
	Worker         *string
	Rescues        int32
	Errors         []byte
	Payload        []byte
}

// record turns a table row into a record with its payload still encoded.
func record(r recordRow) *skipjack.Record[[]byte] {
	rec := &skipjack.Record[[]byte]{
		ID:             r.ID,
		State:          r.State,
		Attempt:        int(r.Attempt),
		MaxAttempts:    int(r.MaxAttempts),
		Priority:       int(r.Priority),
		RunAt:          r.RunAt,
		CreatedAt:      r.CreatedAt,
		FinishedAt:     r.FinishedAt,
		LeaseExpiresAt: r.LeaseExpiresAt,
		Rescues:        int(r.Rescues),
		Errors:         decodeErrors(r.Errors),
		Payload:        r.Payload,
	}
	if r.Worker != nil {
		rec.Worker = *r.Worker
	}
	return rec
}
