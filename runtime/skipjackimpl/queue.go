package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/link"
	"github.com/skipjack-dev/skipjack/runtime/internal/opts"
)

// Queue is one queue's producer, consumer and admin logic, typed by its
// payload P and bound to the queue's sqlc queries. Each generated queue
// package holds one in a package variable and exposes its methods as
// package functions.
type Queue[P any] struct {
	spec QueueSpec
	bind func(DBTX) queries
}

// NewQueue returns the queue described by spec whose SQL is newQueries(db):
// the New function of the queue's sqlc package, whose DBTX interface
// package skipjack's DBTX must satisfy. Every type parameter but P is
// inferred from newQueries, so a generated package binds its queue with
//
//	var queue = skipjackimpl.NewQueue[Payload](Spec, dbgen.New)
//
// It panics when skipjack.DBTX does not satisfy D, or when spec declares a
// unique key or schedules but the queries lack the methods (with the
// signatures) the runtime calls for them, which would otherwise turn those
// features off silently.
func NewQueue[P, D any, Q interface {
	Queries[C, H, G, L, S, E, A, R, V, F, K]
	enqueueAllQueries[N]
}, C ClaimRow, H HeartbeatRow, G, L RecordRow, S StatsRow, E CopyRow, A CopyAtRow, R HeadroomRow, V ActivityRow, F FailureGroupRow, K CompleteRow, N EnqueueAllRow](spec QueueSpec, newQueries func(D) Q) *Queue[P] {
	if d := reflect.TypeFor[D](); d.Kind() != reflect.Interface || !reflect.TypeFor[DBTX]().Implements(d) {
		panic(fmt.Sprintf("skipjack: queue %s: its generated queries run on %v, which skipjack.DBTX does not satisfy; regenerate it with a matching skipjack", spec.Name, d))
	}
	var none D
	q := newQueries(none)
	if _, ok := any(q).(uniqueQueries); spec.Unique && !ok {
		panic(fmt.Sprintf("skipjack: queue %s has a unique key but its generated queries lack Duplicate or EnqueueBatch with the signatures this runtime calls; regenerate it with a matching skipjack", spec.Name))
	}
	if _, ok := any(q).(slotQueries); len(spec.Schedules) > 0 && !ok {
		panic(fmt.Sprintf("skipjack: queue %s has schedules but its generated queries lack EnqueueSlot or LastSlot with the signatures this runtime calls; regenerate it with a matching skipjack", spec.Name))
	}
	return &Queue[P]{
		spec: spec.withDefaults(),
		bind: func(db DBTX) queries {
			d, _ := db.(D) // fails only for a nil db, which stays nil
			qs := newQueries(d)
			b := newBinding[C, H, G, L, S, E, A, R, V, F, K](qs)
			b.all = enqueueAllOf[N](qs)
			return b
		},
	}
}

// Spec returns the queue's description.
func (q *Queue[P]) Spec() QueueSpec { return q.spec }

// enqueueOptions applies opts and validates them for this queue. It
// returns them with the job's priority and max attempts as the queries
// take them.
func (q *Queue[P]) enqueueOptions(list []skipjack.EnqueueOption) (opts.Enqueue, int16, int32, error) {
	var o opts.Enqueue
	for _, opt := range list {
		if opt != nil {
			opt(&o)
		}
	}
	var priority int16
	if o.HasPriority {
		if !q.spec.Priority {
			return o, 0, 0, fmt.Errorf("enqueue %s: Priority given but the queue is not declared with priority: true", q.spec.Name)
		}
		if o.Priority < 0 || o.Priority > 9 {
			return o, 0, 0, fmt.Errorf("enqueue %s: priority %d is outside 0..9", q.spec.Name, o.Priority)
		}
		priority = int16(o.Priority)
	}
	if o.Delay < 0 {
		return o, 0, 0, fmt.Errorf("enqueue %s: negative delay %v", q.spec.Name, o.Delay)
	}
	maxAttempts := int32(q.spec.MaxAttempts)
	if o.HasMaxAttempts {
		if o.MaxAttempts < 1 || o.MaxAttempts > math.MaxInt32 {
			return o, 0, 0, fmt.Errorf("enqueue %s: MaxAttempts(%d): a job needs at least 1 attempt and at most %d", q.spec.Name, o.MaxAttempts, math.MaxInt32)
		}
		maxAttempts = int32(o.MaxAttempts)
	}
	return o, priority, maxAttempts, nil
}

// encode encodes one payload, refusing NUL characters and payloads over
// the queue's max_payload_bytes.
func (q *Queue[P]) encode(p *P) ([]byte, error) {
	b, err := EncodePayload(p)
	if err != nil {
		return nil, err
	}
	if err := q.spec.checkPayloadSize(len(b)); err != nil {
		return nil, err
	}
	return b, nil
}

// checkPayloadSize refuses an encoded payload of n bytes over the queue's
// max_payload_bytes, with an error matching skipjack.ErrPayloadTooLarge.
func (s QueueSpec) checkPayloadSize(n int) error {
	if s.MaxPayloadBytes > 0 && n > s.MaxPayloadBytes {
		return fmt.Errorf("payload is %d bytes, over the queue's max_payload_bytes of %d: %w", n, s.MaxPayloadBytes, skipjack.ErrPayloadTooLarge)
	}
	return nil
}

// Enqueue inserts one job and returns its id, storing the trace context
// that the process's skipjack.TracePropagator injects for ctx (NULL
// without one). For a queue with a unique key, a duplicate returns the
// existing job's id and an error matching skipjack.ErrDuplicate; no
// statement fails, so a caller's transaction stays usable.
func (q *Queue[P]) Enqueue(ctx context.Context, db DBTX, p P, list ...skipjack.EnqueueOption) (int64, error) {
	o, priority, maxAttempts, err := q.enqueueOptions(list)
	if err != nil {
		return 0, err
	}
	payload, err := q.encode(&p)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
	}
	trace := traceText(encodeTrace(link.InjectTrace(ctx)))
	qs := q.bind(db)
	text := unsafe.String(unsafe.SliceData(payload), len(payload))
	// On a pool the insert is committed when it returns, so the workers
	// are woken after it rather than by a NOTIFY inside it (notifier.go).
	insert := qs.enqueue
	pool, onPool := db.(*pgxpool.Pool)
	quiet := qs.quiet()
	wakeAfter := onPool && quiet != nil && q.spec.Channel != ""
	if wakeAfter {
		insert = quiet.EnqueueQuiet
	}
	u := qs.unique()
	for range duplicateRaces {
		id, err := insert(ctx, text, o.RunAt, o.Delay, priority, trace, maxAttempts)
		if err == nil {
			if wakeAfter {
				wakeAfterCommit(pool, q.spec.Channel)
			}
			return id, nil
		}
		if u == nil || !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
		}
		// ON CONFLICT DO NOTHING inserted nothing: find the job that holds
		// the key. When it left the unique states meanwhile, the key is
		// free again and the insert is tried again.
		id, err = u.Duplicate(ctx, text)
		if err == nil {
			return id, fmt.Errorf("enqueue %s: %w", q.spec.Name, skipjack.ErrDuplicate)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("enqueue %s: find duplicate: %w", q.spec.Name, err)
		}
	}
	return 0, fmt.Errorf("enqueue %s: the job holding its unique key kept changing state; %d inserts found a duplicate that was gone when looked up", q.spec.Name, duplicateRaces)
}

// duplicateRaces bounds how often Enqueue inserts again after the job that
// held its unique key left the unique states between the insert and the
// lookup of its id.
const duplicateRaces = 3

// EnqueueMany inserts many jobs and returns how many it inserted: with one
// COPY, or for a queue with a unique key with one INSERT that skips
// duplicates. The options, and the trace context of ctx, apply to every
// job.
func (q *Queue[P]) EnqueueMany(ctx context.Context, db DBTX, ps []P, list ...skipjack.EnqueueOption) (int64, error) {
	o, priority, maxAttempts, err := q.enqueueOptions(list)
	if err != nil {
		return 0, err
	}
	if len(ps) == 0 {
		return 0, nil
	}
	payloads := make([][]byte, len(ps))
	for i := range ps {
		if payloads[i], err = q.encode(&ps[i]); err != nil {
			return 0, fmt.Errorf("enqueue %s: payload %d: %w", q.spec.Name, i, err)
		}
	}
	trace := encodeTrace(link.InjectTrace(ctx))
	qs := q.bind(db)
	if u := qs.unique(); u != nil {
		texts := make([]string, len(payloads))
		for i, p := range payloads {
			texts[i] = string(p)
		}
		n, err := u.EnqueueBatch(ctx, o.RunAt, o.Delay, priority, traceText(trace), maxAttempts, texts)
		if err != nil {
			return 0, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
		}
		return n, nil
	}
	runAt := o.RunAt
	if runAt == nil && o.Delay > 0 {
		at, err := qs.now(ctx, o.Delay)
		if err != nil {
			return 0, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
		}
		runAt = &at
	}
	n, err := qs.enqueueCopy(ctx, payloads, priority, runAt, trace, maxAttempts)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s: %w", q.spec.Name, err)
	}
	return n, nil
}

// CompleteTx acknowledges job inside the caller's transaction tx, so the
// handler's writes and the acknowledgement commit or roll back together. It
// returns an error matching skipjack.ErrLeaseLost when this attempt no
// longer owns the job; the caller should then roll back.
func (q *Queue[P]) CompleteTx(ctx context.Context, tx pgx.Tx, job *skipjack.Job[P]) error {
	if err := writeOutput(ctx, tx, q.spec.Workflow, q.spec.Name, job.ID, job.Claim, link.JobOutput(job)); err != nil {
		return err
	}
	return CompleteTx(ctx, job, q.bind(tx).completeOne)
}

// Stats counts the queue's jobs by state.
func (q *Queue[P]) Stats(ctx context.Context, db DBTX) (skipjack.Stats, error) {
	s, err := q.bind(db).stats(ctx)
	if err != nil {
		return s, fmt.Errorf("stats %s: %w", q.spec.Name, err)
	}
	return s, nil
}

// Get returns one job, or an error matching skipjack.ErrNotFound.
func (q *Queue[P]) Get(ctx context.Context, db DBTX, id int64) (*skipjack.Record[P], error) {
	raw, err := q.getRaw(ctx, db, id)
	if err != nil {
		return nil, err
	}
	return typed[P](raw)
}

func (q *Queue[P]) getRaw(ctx context.Context, db DBTX, id int64) (*skipjack.Record[[]byte], error) {
	r, err := q.bind(db).get(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get %s job %d: %w", q.spec.Name, id, skipjack.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s job %d: %w", q.spec.Name, id, err)
	}
	return r, nil
}

// List returns a page of jobs in id order (keyset pagination on the
// primary key: pass the last id of a page as the next page's AfterID).
func (q *Queue[P]) List(ctx context.Context, db DBTX, p skipjack.ListParams) ([]*skipjack.Record[P], error) {
	raws, err := q.listRaw(ctx, db, p)
	if err != nil {
		return nil, err
	}
	out := make([]*skipjack.Record[P], len(raws))
	for i, raw := range raws {
		if out[i], err = typed[P](raw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Listing limits.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func (q *Queue[P]) listRaw(ctx context.Context, db DBTX, p skipjack.ListParams) ([]*skipjack.Record[[]byte], error) {
	if err := q.checkList(p); err != nil {
		return nil, err
	}
	p.Limit = listLimit(p.Limit)
	if p.BeforeID > 0 && (p.UntilID == 0 || p.UntilID >= p.BeforeID) {
		if p.BeforeID-1 <= p.AfterID {
			return nil, nil
		}
		p.UntilID = p.BeforeID - 1
	}
	qs := q.bind(db)
	var rs []*skipjack.Record[[]byte]
	var err error
	if ByUniqueKey(q.spec.UniqueKeys, q.spec.UniqueStates, p) && qs.unique() != nil {
		rs, err = q.listByUniqueKey(ctx, qs, p)
	} else {
		rs, err = qs.list(ctx, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.spec.Name, err)
	}
	return rs, nil
}

// checkList refuses list parameters with an unknown state or a payload
// filter that is not a JSON object.
func (q *Queue[P]) checkList(p skipjack.ListParams) error {
	switch p.State {
	case "", skipjack.StatePending, skipjack.StateRunning, skipjack.StateCompleted, skipjack.StateFailed:
	default:
		return fmt.Errorf("list %s: unknown state %q (want pending, running, completed or failed)", q.spec.Name, p.State)
	}
	if err := checkPayloadFilter(p.Payload); err != nil {
		return fmt.Errorf("list %s: %w", q.spec.Name, err)
	}
	return nil
}

// listLimit is the page size of a List with limit: the default for 0 or
// less, at most maxListLimit.
func listLimit(limit int) int {
	if limit <= 0 {
		return defaultListLimit
	}
	return min(limit, maxListLimit)
}

// Retry makes failed or scheduled jobs pending now and returns how many
// changed.
func (q *Queue[P]) Retry(ctx context.Context, db DBTX, ids ...int64) (int64, error) {
	n, err := q.bind(db).retry(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("retry %s jobs: %w", q.spec.Name, err)
	}
	return n, nil
}

// Cancel fails pending jobs as cancelled and has the workers of claimed
// ones act on it: a running handler's context is cancelled (cause
// skipjack.ErrCancelled), a prefetched job never starts; those jobs end
// failed, not retried. Workers that listen for the queue's notifications
// learn of it at once (in db's transaction, at its commit), the others
// before a prefetched job starts and at their next heartbeat. It returns
// how many jobs changed.
func (q *Queue[P]) Cancel(ctx context.Context, db DBTX, ids ...int64) (int64, error) {
	n, err := q.bind(db).cancel(ctx, ids)
	if err == nil && n > 0 {
		err = q.tellWorkers(ctx, db, noteCancel)
	}
	if err != nil {
		return 0, fmt.Errorf("cancel %s jobs: %w", q.spec.Name, err)
	}
	return n, nil
}

// Pause stops every process from starting the queue's jobs until Resume:
// its jobs stay pending, enqueueing still works and jobs whose handlers
// run finish. Workers that listen for the queue's notifications give
// back the jobs they prefetched at once (in db's transaction, at its
// commit); every worker claims nothing more.
func (q *Queue[P]) Pause(ctx context.Context, db DBTX) error {
	err := q.bind(db).pause(ctx)
	if err == nil {
		err = q.tellWorkers(ctx, db, notePause)
	}
	if err != nil {
		return fmt.Errorf("pause %s: %w", q.spec.Name, err)
	}
	return nil
}

// tellWorkers notifies the queue's workers of an operator's act (see
// operator.go), unless the queue sends no notifications.
func (q *Queue[P]) tellWorkers(ctx context.Context, db DBTX, note string) error {
	if q.spec.Channel == "" {
		return nil
	}
	if _, err := db.Exec(ctx, "SELECT pg_notify($1, $2)", q.spec.Channel, note); err != nil {
		return fmt.Errorf("notify workers: %w", err)
	}
	return nil
}

// Resume lets workers claim the queue's jobs again and wakes those that
// listen for notifications.
func (q *Queue[P]) Resume(ctx context.Context, db DBTX) error {
	if err := q.bind(db).resume(ctx); err != nil {
		return fmt.Errorf("resume %s: %w", q.spec.Name, err)
	}
	return nil
}

// Admin returns the untyped operations view of the queue on db.
func (q *Queue[P]) Admin(db DBTX) skipjack.QueueAdmin { return admin[P]{q: q, db: db} }

// NewWorker returns a worker that runs handle on the queue's jobs, claimed
// from pool.
func (q *Queue[P]) NewWorker(pool *pgxpool.Pool, handle func(context.Context, *skipjack.Job[P]) error, cfg skipjack.WorkerConfig) *skipjack.Worker[P] {
	w := new(skipjack.Worker[P])
	link.SetWorkerRun(w, newWorker(pool, q.spec, q.bind(pool), handle, cfg).withControlPool(q.bind).runIn)
	return w
}

// typed decodes the payload of a raw record.
func typed[P any](raw *skipjack.Record[[]byte]) (*skipjack.Record[P], error) {
	var p P
	if err := json.Unmarshal(raw.Payload, &p); err != nil {
		return nil, fmt.Errorf("job %d: decode payload: %w", raw.ID, err)
	}
	return withPayload(raw, p), nil
}

// withPayload returns r with its payload replaced by p.
func withPayload[Q any](r *skipjack.Record[[]byte], p Q) *skipjack.Record[Q] {
	return &skipjack.Record[Q]{
		ID: r.ID, State: r.State, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Priority: r.Priority, RunAt: r.RunAt, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		LeaseExpiresAt: r.LeaseExpiresAt, Worker: r.Worker, Rescues: r.Rescues, Errors: r.Errors,
		Payload: p,
	}
}

var (
	_ skipjack.QueueAdmin    = admin[struct{}]{}
	_ skipjack.QueueInsights = admin[struct{}]{}
)

// admin implements skipjack.QueueAdmin, skipjack.QueueInsights,
// skipjack.QueueBrowser and skipjack.QueueLimiter.
type admin[P any] struct {
	q  *Queue[P]
	db DBTX
}

func (a admin[P]) Name() string { return a.q.spec.Name }

func (a admin[P]) Stats(ctx context.Context) (skipjack.Stats, error) { return a.q.Stats(ctx, a.db) }

func (a admin[P]) Finished(ctx context.Context, since time.Time) (completed, failed int64, err error) {
	qs := a.q.bind(a.db)
	if completed, err = qs.countFinished(ctx, skipjack.StateCompleted, since); err != nil {
		return 0, 0, fmt.Errorf("count finished %s jobs: %w", a.q.spec.Name, err)
	}
	if failed, err = qs.countFinished(ctx, skipjack.StateFailed, since); err != nil {
		return 0, 0, fmt.Errorf("count finished %s jobs: %w", a.q.spec.Name, err)
	}
	return completed, failed, nil
}

func (a admin[P]) Activity(ctx context.Context, since time.Time) ([]skipjack.ActivityMinute, error) {
	out, err := a.q.bind(a.db).activity(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("activity of %s: %w", a.q.spec.Name, err)
	}
	return out, nil
}

func (a admin[P]) FailureGroups(ctx context.Context, limit int) ([]skipjack.FailureGroup, error) {
	if limit <= 0 {
		limit = 100
	}
	out, err := a.q.bind(a.db).failureGroups(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("failure groups of %s: %w", a.q.spec.Name, err)
	}
	return out, nil
}

func (a admin[P]) Schedules(ctx context.Context) ([]skipjack.ScheduleInfo, error) {
	if len(a.q.spec.Schedules) == 0 {
		return nil, nil
	}
	slots := a.q.bind(a.db).slots()
	now := time.Now()
	out := make([]skipjack.ScheduleInfo, 0, len(a.q.spec.Schedules))
	for _, s := range a.q.spec.Schedules {
		last, err := slots.LastSlot(ctx, int32(s.Index))
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("schedules of %s: last slot: %w", a.q.spec.Name, err)
		}
		out = append(out, s.Info(last, now, skipjack.ScheduleSlotsShown))
	}
	return out, nil
}

func (a admin[P]) Get(ctx context.Context, id int64) (*skipjack.Record[json.RawMessage], error) {
	raw, err := a.q.getRaw(ctx, a.db, id)
	if err != nil {
		return nil, err
	}
	return rawMessage(raw), nil
}

func (a admin[P]) List(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	raws, err := a.q.listRaw(ctx, a.db, p)
	if err != nil {
		return nil, err
	}
	out := make([]*skipjack.Record[json.RawMessage], len(raws))
	for i, r := range raws {
		out[i] = rawMessage(r)
	}
	return out, nil
}

func (a admin[P]) Retry(ctx context.Context, ids ...int64) (int64, error) {
	return a.q.Retry(ctx, a.db, ids...)
}

func (a admin[P]) Cancel(ctx context.Context, ids ...int64) (int64, error) {
	return a.q.Cancel(ctx, a.db, ids...)
}

func (a admin[P]) Pause(ctx context.Context) error { return a.q.Pause(ctx, a.db) }

func (a admin[P]) Resume(ctx context.Context) error { return a.q.Resume(ctx, a.db) }

// rawMessage retypes a record's payload as JSON.
func rawMessage(r *skipjack.Record[[]byte]) *skipjack.Record[json.RawMessage] {
	return withPayload(r, json.RawMessage(r.Payload))
}

// maxErrorMessage caps one stored error message, so a handler returning a
// huge error cannot bloat its row.
const maxErrorMessage = 2048

// storableText returns msg as Postgres can store it in a text or jsonb
// value: NUL bytes dropped, invalid UTF-8 replaced with U+FFFD, and capped
// at maxErrorMessage bytes. Handler errors and panic values may carry any
// bytes (a binary response body, say); sent as they are, Postgres rejects
// the whole statement that carries them.
func storableText(msg string) string {
	if strings.IndexByte(msg, 0) >= 0 {
		msg = strings.ReplaceAll(msg, "\x00", "")
	}
	return capMessage(strings.ToValidUTF8(msg, "\uFFFD"))
}

// capMessage shortens msg to at most maxErrorMessage bytes, on a rune
// boundary.
func capMessage(msg string) string {
	if len(msg) <= maxErrorMessage {
		return msg
	}
	cut := maxErrorMessage - len("…")
	for cut > 0 && !utf8RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// decodeErrors decodes a row's error history; it is informative only, so a
// malformed history reads as empty.
func decodeErrors(b []byte) []skipjack.AttemptError {
	if len(b) <= 2 { // "[]"
		return nil
	}
	var out []skipjack.AttemptError
	_ = json.Unmarshal(b, &out)
	return out
}
