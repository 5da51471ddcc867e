// Package tableadmin implements skipjack.QueueAdmin over a queue's table,
// with payloads as raw JSON, from the YAML alone: it runs the very admin
// queries that the queue's generated package runs (rendered from the same
// template by generator.QueueSQLs), so the CLI's stats, jobs and ui need
// neither the generated code nor a Go toolchain.
package tableadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/robfig/cron/v3"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"

	"github.com/skipjack-dev/skipjack/generator"
)

// DBTX is what an Admin runs its statements on: *pgxpool.Pool, *pgx.Conn
// or pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// The queries an Admin runs, by their sqlc names.
var adminQueries = []string{"Stats", "CountFinished", "Get", "List", "Retry", "Cancel", "Pause", "Resume", "Activity", "FailureGroups", "ListNewest", "CountMatching", "Delete", "Headroom"}

// Admin is the operations view of one queue's table.
type Admin struct {
	name    string
	table   string
	channel string // the queue's NOTIFY channel, or ""
	db      DBTX
	// sql maps a query's sqlc name to its text with positional
	// parameters; params to its parameter names in $n order.
	sql    map[string]string
	params map[string][]string
	// schedules are the queue's periodic jobs, as its workers run them.
	schedules []skipjackimpl.Schedule
	// uniqueKeys and uniqueStates are the queue's unique key fields and
	// states, when its key is made of fields (FindUnique then exists).
	uniqueKeys, uniqueStates []string
	// limits is the queue's declared flow control, without its use.
	limits skipjack.Limits
}

var _ skipjack.QueueAdmin = (*Admin)(nil)

var _ skipjack.QueueInsights = (*Admin)(nil)

var _ skipjack.QueueBrowser = (*Admin)(nil)

// New returns the admin of queue q on db.
func New(q generator.QueueSQL, db DBTX) (*Admin, error) {
	sections := parseQueries(q.Queries)
	a := &Admin{name: q.Name, table: q.Table, channel: q.Channel, db: db, sql: map[string]string{}, params: map[string][]string{}}
	if l := q.Limits; l != nil {
		a.limits.Concurrency = l.Concurrency
		if l.Rate != nil {
			a.limits.RateCount, a.limits.RatePer = l.Rate.Count, l.Rate.Per
		}
	}
	if l := q.Limits; l != nil && l.PerKey != nil {
		a.limits.PerKeyBy, a.limits.PerKeyConcurrency = l.PerKey.By, l.PerKey.Concurrency
	}
	if s := q.Serial; s != nil {
		a.limits.Serial, a.limits.SerialBy = true, s.By
	}
	for _, name := range adminQueries {
		text, ok := sections[name]
		if !ok {
			return nil, fmt.Errorf("queue %s: the rendered queries lack %s", q.Name, name)
		}
		a.sql[name], a.params[name] = positional(text)
	}
	for i, sc := range q.Schedules {
		if sc.Every > 0 {
			a.schedules = append(a.schedules, skipjackimpl.EverySchedule(i, sc.Every, sc.PayloadJSON, sc.Missed))
		} else {
			a.schedules = append(a.schedules, skipjackimpl.CronSchedule(i, sc.Cron, sc.Timezone, cron.ParseStandard, sc.PayloadJSON, sc.Missed))
		}
	}
	if u := q.Unique; u != nil && len(u.By) > 0 {
		text, ok := sections["FindUnique"]
		if !ok {
			return nil, fmt.Errorf("queue %s: the rendered queries lack FindUnique", q.Name)
		}
		a.sql["FindUnique"], a.params["FindUnique"] = positional(text)
		a.uniqueKeys, a.uniqueStates = u.By, u.States
	}
	if len(a.schedules) > 0 {
		text, ok := sections["LastSlot"]
		if !ok {
			return nil, fmt.Errorf("queue %s: the rendered queries lack LastSlot", q.Name)
		}
		a.sql["LastSlot"], a.params["LastSlot"] = positional(text)
	}
	return a, nil
}

// nameLine starts a query of a sqlc query file.
var nameLine = regexp.MustCompile(`(?m)^-- name: (\w+) :\w+\s*$`)

// parseQueries splits a sqlc query file into its queries by name, each
// without its comment lines.
func parseQueries(file string) map[string]string {
	out := map[string]string{}
	locs := nameLine.FindAllStringSubmatchIndex(file, -1)
	for i, loc := range locs {
		end := len(file)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var body []string
		for line := range strings.SplitSeq(file[loc[1]:end], "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "--") {
				body = append(body, line)
			}
		}
		out[file[loc[2]:loc[3]]] = strings.TrimSpace(strings.Join(body, "\n"))
	}
	return out
}

// sqlcArg is a parameter of a sqlc query.
var sqlcArg = regexp.MustCompile(`sqlc\.arg\((\w+)\)`)

// positional rewrites the sqlc.arg(name) parameters of query to $1, $2, ...
// in order of first use (a name used twice is one parameter) and returns
// the names in that order.
func positional(query string) (string, []string) {
	var names []string
	text := sqlcArg.ReplaceAllStringFunc(query, func(m string) string {
		name := sqlcArg.FindStringSubmatch(m)[1]
		for i, n := range names {
			if n == name {
				return fmt.Sprintf("$%d", i+1)
			}
		}
		names = append(names, name)
		return fmt.Sprintf("$%d", len(names))
	})
	return text, names
}

// args orders named arguments as query's parameters.
func (a *Admin) args(query string, named map[string]any) []any {
	out := make([]any, len(a.params[query]))
	for i, n := range a.params[query] {
		out[i] = named[n]
	}
	return out
}

// Name is the queue's name in the YAML.
func (a *Admin) Name() string { return a.name }

// Stats counts the queue's jobs by state.
func (a *Admin) Stats(ctx context.Context) (skipjack.Stats, error) {
	var s skipjack.Stats
	var oldest pgtype.Interval
	err := a.db.QueryRow(ctx, a.sql["Stats"]).Scan(&s.Pending, &s.Scheduled, &s.Running, &s.Completed, &s.Failed, &oldest, &s.Paused)
	if err != nil {
		return skipjack.Stats{}, a.wrap(err)
	}
	s.OldestPending = duration(oldest)
	return s, nil
}

// duration converts an interval of a difference of timestamps (no months)
// to a time.Duration.
func duration(i pgtype.Interval) time.Duration {
	return time.Duration(i.Microseconds)*time.Microsecond + time.Duration(i.Days)*24*time.Hour
}

// Finished counts the retained jobs that completed and failed since the
// given time.
func (a *Admin) Finished(ctx context.Context, since time.Time) (completed, failed int64, err error) {
	count := func(state string) (int64, error) {
		var n int64
		err := a.db.QueryRow(ctx, a.sql["CountFinished"], a.args("CountFinished", map[string]any{"state": state, "since": since})...).Scan(&n)
		return n, err
	}
	if completed, err = count(skipjack.StateCompleted); err != nil {
		return 0, 0, a.wrap(err)
	}
	if failed, err = count(skipjack.StateFailed); err != nil {
		return 0, 0, a.wrap(err)
	}
	return completed, failed, nil
}

// Get returns one job, or an error matching skipjack.ErrNotFound.
func (a *Admin) Get(ctx context.Context, id int64) (*skipjack.Record[json.RawMessage], error) {
	rows, err := a.db.Query(ctx, a.sql["Get"], a.args("Get", map[string]any{"id": id})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, a.wrap(err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("job %d: %w", id, skipjack.ErrNotFound)
	}
	return recs[0], nil
}

// Listing limits, those of the generated List.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// List returns a page of jobs in id order.
func (a *Admin) List(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	switch p.State {
	case "", skipjack.StatePending, skipjack.StateRunning, skipjack.StateCompleted, skipjack.StateFailed:
	default:
		return nil, fmt.Errorf("unknown state %q (want pending, running, completed or failed)", p.State)
	}
	if p.Limit <= 0 {
		p.Limit = defaultListLimit
	}
	p.Limit = min(p.Limit, maxListLimit)
	payload := "{}"
	if len(p.Payload) > 0 {
		var filter map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p.Payload), &filter); err != nil {
			return nil, fmt.Errorf("the payload filter is not a JSON object: %w", err)
		}
		payload = p.Payload
	}
	if p.BeforeID > 0 && (p.UntilID == 0 || p.UntilID >= p.BeforeID) {
		if p.BeforeID-1 <= p.AfterID {
			return nil, nil
		}
		p.UntilID = p.BeforeID - 1
	}
	if skipjackimpl.ByUniqueKey(a.uniqueKeys, a.uniqueStates, p) {
		return a.listByUniqueKey(ctx, p)
	}
	rows, err := a.db.Query(ctx, a.sql["List"], a.args("List", map[string]any{
		"after_id": p.AfterID, "until_id": p.UntilID, "state": p.State, "payload": payload,
		"error_group": p.ErrorGroup, "max": int64(p.Limit),
	})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, a.wrap(err)
	}
	return recs, nil
}

// listByUniqueKey lists the page p selects through the unique index.
func (a *Admin) listByUniqueKey(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	rows, err := a.db.Query(ctx, a.sql["FindUnique"], a.args("FindUnique", map[string]any{"payload": p.Payload})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, a.wrap(err)
	}
	return skipjackimpl.PageOfIDs(ctx, ids, p, func(ctx context.Context, id int64) (*skipjack.Record[json.RawMessage], string, bool, error) {
		rec, err := a.Get(ctx, id)
		if errors.Is(err, skipjack.ErrNotFound) {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", false, err
		}
		return rec, rec.State, true, nil
	})
}

// Activity returns what the queue's workers recorded per minute since the
// given time, summed over workers, in minute order.
func (a *Admin) Activity(ctx context.Context, since time.Time) ([]skipjack.ActivityMinute, error) {
	rows, err := a.db.Query(ctx, a.sql["Activity"], a.args("Activity", map[string]any{"since": since})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	defer rows.Close()
	var out []skipjack.ActivityMinute
	for rows.Next() {
		var r skipjack.ActivityMinute
		if err := rows.Scan(&r.Minute, &r.Completed, &r.Failed, &r.Retried, &r.Waits); err != nil {
			return nil, a.wrap(err)
		}
		if n := len(out); n > 0 && out[n-1].Minute.Equal(r.Minute) {
			m := &out[n-1]
			m.Completed += r.Completed
			m.Failed += r.Failed
			m.Retried += r.Retried
			m.Waits = skipjack.AddWaits(m.Waits, r.Waits)
			continue
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, a.wrap(err)
	}
	return out, nil
}

// FailureGroups groups the queue's most recently failed jobs by their
// normalised last error, largest group first.
func (a *Admin) FailureGroups(ctx context.Context, limit int) ([]skipjack.FailureGroup, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := a.db.Query(ctx, a.sql["FailureGroups"], a.args("FailureGroups", map[string]any{"max": int64(limit), "scan": int64(skipjack.FailureGroupsScan)})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	defer rows.Close()
	var out []skipjack.FailureGroup
	for rows.Next() {
		var g skipjack.FailureGroup
		if err := rows.Scan(&g.Error, &g.Jobs, &g.FirstSeen, &g.LastSeen, &g.Example); err != nil {
			return nil, a.wrap(err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, a.wrap(err)
	}
	return out, nil
}

// Declared returns the queue's flow control as its YAML declares it,
// without its use now (see Limits).
func (a *Admin) Declared() skipjack.Limits { return a.limits }

// Schedules describes the queue's periodic jobs with their last and next
// slots.
func (a *Admin) Schedules(ctx context.Context) ([]skipjack.ScheduleInfo, error) {
	now := time.Now()
	var out []skipjack.ScheduleInfo
	for _, s := range a.schedules {
		var last time.Time
		err := a.db.QueryRow(ctx, a.sql["LastSlot"], a.args("LastSlot", map[string]any{"schedule": int32(s.Index)})...).Scan(&last)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, a.wrap(err)
		}
		out = append(out, s.Info(last, now, skipjack.ScheduleSlotsShown))
	}
	return out, nil
}

// Retry makes failed or scheduled jobs pending now and returns how many
// changed.
func (a *Admin) Retry(ctx context.Context, ids ...int64) (int64, error) {
	return a.change(ctx, "Retry", ids)
}

// Cancel fails pending jobs as cancelled and flags claimed ones, and
// notifies the queue's workers, which cancel those handlers and give back
// those jobs not yet started at once (the others at their next heartbeat,
// or before the job starts); it returns how many jobs changed.
func (a *Admin) Cancel(ctx context.Context, ids ...int64) (int64, error) {
	n, err := a.change(ctx, "Cancel", ids)
	if err == nil && n > 0 {
		err = a.tellWorkers(ctx, noteCancel)
	}
	return n, err
}

// Pause stops every process from claiming the queue's jobs until Resume,
// and notifies the queue's workers, which give back the jobs they
// prefetched.
func (a *Admin) Pause(ctx context.Context) error {
	if _, err := a.db.Exec(ctx, a.sql["Pause"]); err != nil {
		return a.wrap(err)
	}
	return a.tellWorkers(ctx, notePause)
}

// The payloads of the notifications that tell a queue's workers of an
// operator's act, as the runtime's own Cancel and Pause send them
// (skipjackimpl's noteCancel and notePause).
const (
	noteCancel = "cancel"
	notePause  = "pause"
)

// tellWorkers notifies the queue's workers of an operator's act, unless
// the queue sends no notifications.
func (a *Admin) tellWorkers(ctx context.Context, note string) error {
	if a.channel == "" {
		return nil
	}
	if _, err := a.db.Exec(ctx, "SELECT pg_notify($1, $2)", a.channel, note); err != nil {
		return a.wrap(fmt.Errorf("notify workers: %w", err))
	}
	return nil
}

// Resume lets workers claim the queue's jobs again.
func (a *Admin) Resume(ctx context.Context) error {
	if _, err := a.db.Exec(ctx, a.sql["Resume"]); err != nil {
		return a.wrap(err)
	}
	return nil
}

func (a *Admin) change(ctx context.Context, query string, ids []int64) (int64, error) {
	if ids == nil {
		ids = []int64{}
	}
	tag, err := a.db.Exec(ctx, a.sql[query], a.args(query, map[string]any{"ids": ids})...)
	if err != nil {
		return 0, a.wrap(err)
	}
	return tag.RowsAffected(), nil
}

// scanRecords reads the rows of Get or List.
func scanRecords(rows pgx.Rows) ([]*skipjack.Record[json.RawMessage], error) {
	defer rows.Close()
	var out []*skipjack.Record[json.RawMessage]
	for rows.Next() {
		var (
			r        skipjack.Record[json.RawMessage]
			priority int16
			worker   *string
			errs     []byte
			payload  []byte
		)
		if err := rows.Scan(&r.ID, &r.State, &r.Attempt, &r.MaxAttempts, &priority, &r.RunAt, &r.CreatedAt,
			&r.FinishedAt, &r.LeaseExpiresAt, &worker, &r.Rescues, &errs, &payload); err != nil {
			return nil, err
		}
		r.Priority = int(priority)
		if worker != nil {
			r.Worker = *worker
		}
		if len(errs) > 2 { // "[]"
			// The history is informative only: a malformed one reads as
			// empty, as in the generated code.
			_ = json.Unmarshal(errs, &r.Errors)
		}
		r.Payload = json.RawMessage(payload)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// wrap explains the errors an operator can act on: a table that does not
// exist yet, or one whose columns are not those of this skipjack.
func (a *Admin) wrap(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "42P01": // undefined_table
			return fmt.Errorf("table %s does not exist; apply the migrations first (skipjack migrate): %w", a.table, err)
		case "42703": // undefined_column
			return fmt.Errorf("table %s lacks a column this skipjack reads; apply the pending migrations (skipjack migrate): %w", a.table, err)
		}
	}
	return err
}
