package skipjacktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// This file holds typed helpers for tests of code that enqueues or handles
// jobs. They work on any generated queue package through its exported
// functions and Spec: pass sendemail.List, sendemail.Spec and so on.

// ListFunc is a queue's generated List function, such as sendemail.List.
type ListFunc[P any] func(ctx context.Context, db skipjack.DBTX, p skipjack.ListParams) ([]*skipjack.Record[P], error)

// listPage is how many jobs Jobs reads per List call.
const listPage = 1000

// Jobs returns the queue's jobs, in every state and in id order, that
// match accepts (every job when match is nil), reading them with list on
// db. Pass the test's transaction as db to see jobs it enqueued but has
// not committed. It fails the test if List fails.
func Jobs[P any](t testing.TB, db skipjack.DBTX, list ListFunc[P], match func(*skipjack.Record[P]) bool) []*skipjack.Record[P] {
	t.Helper()
	var out []*skipjack.Record[P]
	for after := int64(0); ; {
		page, err := list(t.Context(), db, skipjack.ListParams{AfterID: after, Limit: listPage})
		if err != nil {
			t.Fatalf("skipjacktest: list jobs: %v", err)
		}
		for _, r := range page {
			if match == nil || match(r) {
				out = append(out, r)
			}
		}
		if len(page) < listPage {
			return out
		}
		after = page[len(page)-1].ID
	}
}

// RequireEnqueued fails the test now unless at least one of the queue's
// jobs on db matches match, and returns the matching jobs. The failure
// lists the jobs the queue holds, so a near miss is easy to spot:
//
//	skipjacktest.RequireEnqueued(t, tx, sendemail.List, func(r *sendemail.Record) bool {
//		return r.Payload.To == "ada@example.com"
//	})
func RequireEnqueued[P any](t testing.TB, db skipjack.DBTX, list ListFunc[P], match func(*skipjack.Record[P]) bool) []*skipjack.Record[P] {
	t.Helper()
	all := Jobs(t, db, list, nil)
	var got []*skipjack.Record[P]
	for _, r := range all {
		if match(r) {
			got = append(got, r)
		}
	}
	if len(got) == 0 {
		t.Fatalf("skipjacktest: no %T job matches; %s", *new(P), describe(all))
	}
	return got
}

// RequireNotEnqueued fails the test now if any of the queue's jobs on db
// matches match (every job when match is nil).
func RequireNotEnqueued[P any](t testing.TB, db skipjack.DBTX, list ListFunc[P], match func(*skipjack.Record[P]) bool) {
	t.Helper()
	if got := Jobs(t, db, list, match); len(got) > 0 {
		t.Fatalf("skipjacktest: want no matching %T job; %d match: %s", *new(P), len(got), describe(got))
	}
}

// describe lists up to ten jobs for a failure message.
func describe[P any](rs []*skipjack.Record[P]) string {
	if len(rs) == 0 {
		return "the queue holds no jobs"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the queue holds %d:", len(rs))
	for i, r := range rs {
		if i == 10 {
			fmt.Fprintf(&b, "\n\t... and %d more", len(rs)-i)
			break
		}
		payload, err := json.Marshal(r.Payload)
		if err != nil {
			payload = []byte(fmt.Sprintf("%+v", r.Payload))
		}
		fmt.Fprintf(&b, "\n\tjob %d %s, attempt %d, run_at %s: %s", r.ID, r.State, r.Attempt, r.RunAt.Format(time.RFC3339), payload)
	}
	return b.String()
}

// Result is how one attempt run by RunJob ended.
type Result[P any] struct {
	// Outcome says what a worker would do with the job next: completed,
	// retried, snoozed or failed (see skipjack.Outcome).
	Outcome skipjack.Outcome
	// Delay is how long until the job would run again, for retried (the
	// queue's backoff with jitter) and snoozed (the Snooze duration,
	// clamped to the poll interval) outcomes.
	Delay time.Duration
	// Err is the handler's error: as returned, or the timeout's, or a
	// *skipjack.PanicError, or the payload's decode error.
	Err error
	// Panic is the recovered panic when the handler panicked, else nil.
	Panic *skipjack.PanicError
	// Took is how long the handler ran.
	Took time.Duration
	// Job is the job as the handler saw it, payload decoded.
	Job *skipjack.Job[P]
}

// RunOption configures RunJob.
type RunOption func(*skipjackimpl.RunOnceOpts)

// Attempt runs the job as its attempt n (default 1); with n equal to the
// queue's max_attempts, an error fails the job instead of retrying it.
func Attempt(n int) RunOption { return func(o *skipjackimpl.RunOnceOpts) { o.Attempt = n } }

// Trace runs the job as if it had been enqueued with the trace context m,
// as a TracePropagator injects it: the handler sees it as Job.Trace, hooks
// as JobInfo.Trace. It lets a test check that a tracing hook continues the
// enqueuer's trace.
func Trace(m map[string]string) RunOption { return func(o *skipjackimpl.RunOnceOpts) { o.Trace = m } }

// WorkerConfig runs the job under cfg: its PollInterval (the floor of a
// snooze), Logger, Hooks and Middleware apply.
func WorkerConfig(cfg skipjack.WorkerConfig) RunOption {
	return func(o *skipjackimpl.RunOnceOpts) { o.Config = cfg }
}

// RunJob runs handle on one job with payload p synchronously, the way a
// worker of the queue described by spec (the generated package's Spec)
// runs a claimed job: the payload takes the real encode/decode path
// (Enqueue's JSON encoding and limits, the claim's decoding), the handler
// runs under the queue's timeout with panics recovered, and its result is
// resolved by the queue's rules (Snooze, Permanent, backoff, the last
// attempt) into the returned Result. It touches no database: the job is
// not in the table, so CompleteTx cannot acknowledge it; a handler that
// writes to the database should be given the test's transaction.
//
// It fails the test when Enqueue would refuse p (a NUL character in a
// string, a payload over max_payload_bytes).
func RunJob[P any](t testing.TB, spec skipjackimpl.QueueSpec, handle func(context.Context, *skipjack.Job[P]) error, p P, opts ...RunOption) Result[P] {
	t.Helper()
	var o skipjackimpl.RunOnceOpts
	for _, opt := range opts {
		opt(&o)
	}
	if o.Config.Logger == nil {
		o.Config.Logger = testLogger(t)
	}
	res, job, err := skipjackimpl.RunOnce(t.Context(), spec, handle, p, o)
	if err != nil {
		t.Fatalf("skipjacktest: %v", err)
	}
	out := Result[P]{Outcome: res.Outcome, Delay: res.Delay, Err: res.Err, Took: res.Took, Job: job}
	var pe *skipjack.PanicError
	if errors.As(res.Err, &pe) {
		out.Panic = pe
	}
	return out
}

// testLogger logs warnings and errors (a recovered panic, say) to the test
// log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
