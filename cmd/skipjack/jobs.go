package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// jobsCommands are skipjack jobs list|show|retry|cancel: the operations
// view of one queue, run on its table with the queries its generated Admin
// runs (internal/tableadmin), from the YAML alone.
var jobsCommands = []command{
	{
		name: "jobs list", synopsis: "QUEUE [--state STATE] [--after ID] [--limit N] [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "list a queue's jobs in id order, a page at a time", database: true, json: true,
		flags: listFlags, args: queueArgs(false), run: jobsList,
	},
	{
		name: "jobs show", synopsis: "QUEUE ID... [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "show jobs with their errors and payloads", database: true, json: true,
		args: queueArgs(true), run: jobsShow,
	},
	{
		name: "jobs retry", synopsis: "QUEUE (ID... | --state STATE) [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "make failed or scheduled jobs pending now", database: true, json: true,
		flags: stateFlag, args: changeArgs, run: jobsChange(opRetry, "retried", "failed or scheduled"),
	},
	{
		name: "jobs cancel", synopsis: "QUEUE (ID... | --state STATE) [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "fail pending jobs as cancelled and cancel the handlers of running ones", database: true, json: true,
		flags: stateFlag, args: changeArgs, run: jobsChange(opCancel, "cancelled", "pending or running"),
	},
}

// jobStates are the states a job row can be in.
var jobStates = []string{"pending", "running", "completed", "failed"}

// stateFlag adds --state.
func stateFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.state, "state", "", "only jobs in `STATE` ("+strings.Join(jobStates, ", ")+")")
}

// defaultLimit is the page size of jobs list without --limit.
const defaultLimit = 100

// listFlags adds the flags of jobs list.
func listFlags(fs *flag.FlagSet, o *options) {
	stateFlag(fs, o)
	fs.Int64Var(&o.after, "after", 0, "start after job `ID` (the last id of the previous page)")
	fs.IntVar(&o.limit, "limit", defaultLimit, "at most `N` jobs (up to 1000)")
}

// queueArgs parses QUEUE, followed by at least one ID if withIDs.
func queueArgs(withIDs bool) func(o *options, args []string) error {
	return func(o *options, args []string) error {
		if len(args) == 0 {
			return errors.New("missing QUEUE")
		}
		o.queue = args[0]
		if err := parseIDs(o, args[1:]); err != nil {
			return err
		}
		switch {
		case withIDs && len(o.ids) == 0:
			return errors.New("missing job ID")
		case !withIDs && len(o.ids) > 0:
			return fmt.Errorf("unexpected arguments %q", args[1:])
		case !withIDs && (o.limit < 1 || o.limit > 1000):
			return fmt.Errorf("--limit %d is not between 1 and 1000", o.limit)
		}
		return validState(o)
	}
}

// changeArgs parses the arguments of retry and cancel: QUEUE and either
// IDs or --state.
func changeArgs(o *options, args []string) error {
	if len(args) == 0 {
		return errors.New("missing QUEUE")
	}
	o.queue = args[0]
	if err := parseIDs(o, args[1:]); err != nil {
		return err
	}
	switch {
	case len(o.ids) == 0 && o.state == "":
		return errors.New("missing job IDs or --state: say which jobs")
	case len(o.ids) > 0 && o.state != "":
		return errors.New("give either job IDs or --state, not both")
	}
	return validState(o)
}

func parseIDs(o *options, args []string) error {
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("job ID %q is not a positive integer", a)
		}
		o.ids = append(o.ids, id)
	}
	return nil
}

func validState(o *options) error {
	if o.state != "" && !slices.Contains(jobStates, o.state) {
		return fmt.Errorf("--state %q is not one of %s", o.state, strings.Join(jobStates, ", "))
	}
	return nil
}

// jobsResult is what list, show, retry and cancel found.
type jobsResult struct {
	// Jobs are the listed or shown jobs; for retry and cancel by id, the
	// jobs as they were before.
	Jobs []*skipjack.Record[json.RawMessage]
	// Missing are the requested ids that no job has.
	Missing []int64
	// Matched and Changed count the jobs retry and cancel selected and
	// changed; both are 0 when an id is missing, as nothing is changed.
	Matched, Changed int64
}

// A jobsOp is list, get, retry or cancel.
type jobsOp int

const (
	opList jobsOp = iota
	opGet
	opRetry
	opCancel
)

// runJobs runs op on o's queue.
func runJobs(op jobsOp, o options) (*jobsResult, error) {
	var res *jobsResult
	err := withQueue(o, func(ctx context.Context, q *tableadmin.Admin) error {
		var err error
		res, err = jobs(ctx, q, op, o)
		return err
	})
	return res, err
}

// jobs runs op on q: list a page, or get, retry or cancel the jobs with
// o.ids, or (retry and cancel without ids) every job in o.state, a page at
// a time.
func jobs(ctx context.Context, q skipjack.QueueAdmin, op jobsOp, o options) (*jobsResult, error) {
	res := &jobsResult{Jobs: []*skipjack.Record[json.RawMessage]{}}
	if op == opList {
		page, err := q.List(ctx, skipjack.ListParams{State: o.state, AfterID: o.after, Limit: o.limit})
		res.Jobs = append(res.Jobs, page...)
		return res, err
	}
	var change func(ctx context.Context, ids ...int64) (int64, error)
	switch op {
	case opRetry:
		change = q.Retry
	case opCancel:
		change = q.Cancel
	}
	if len(o.ids) == 0 && change != nil {
		for after := int64(0); ; {
			page, err := q.List(ctx, skipjack.ListParams{State: o.state, AfterID: after, Limit: 1000})
			if err != nil || len(page) == 0 {
				return res, err
			}
			ids := make([]int64, len(page))
			for i, r := range page {
				ids[i] = r.ID
			}
			n, err := change(ctx, ids...)
			res.Matched += int64(len(ids))
			res.Changed += n
			if err != nil {
				return res, err
			}
			after = ids[len(ids)-1]
		}
	}
	var found []int64
	for _, id := range o.ids {
		r, err := q.Get(ctx, id)
		switch {
		case errors.Is(err, skipjack.ErrNotFound):
			res.Missing = append(res.Missing, id)
		case err != nil:
			return res, err
		default:
			res.Jobs = append(res.Jobs, r)
			found = append(found, id)
		}
	}
	// An id that names no job is most likely a typo: change none, so
	// that the command can be run again with the ids corrected.
	if change != nil && len(found) > 0 && len(res.Missing) == 0 {
		n, err := change(ctx, found...)
		res.Matched, res.Changed = int64(len(found)), n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// recordsJSON is the JSON of jobs as jobs list and show print it.
func recordsJSON(jobs []*skipjack.Record[json.RawMessage]) (json.RawMessage, error) {
	raw, err := json.Marshal(jobs)
	if err != nil {
		return nil, fmt.Errorf("print the jobs: %w", err)
	}
	return raw, nil
}

// jobsList prints one page of a queue's jobs.
func jobsList(o options, e env) error {
	res, err := runJobs(opList, o)
	if err != nil {
		return err
	}
	records := res.Jobs
	if o.asJSON {
		raw, err := recordsJSON(records)
		if err != nil {
			return err
		}
		return printJSON(e, raw)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-10s  %-9s  %-7s  %-25s  %-25s  %s\n", "ID", "STATE", "ATTEMPT", "RUN AT", "CREATED AT", "LAST ERROR")
	for _, r := range records {
		last := ""
		if len(r.Errors) > 0 {
			last = oneLine(r.Errors[len(r.Errors)-1].Error, 60)
		}
		fmt.Fprintf(&b, "%-10d  %-9s  %-7s  %-25s  %-25s  %s\n", r.ID, r.State,
			fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts), r.RunAt.Format(time.RFC3339), r.CreatedAt.Format(time.RFC3339), last)
	}
	if _, err := e.stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if len(records) >= o.limit {
		fmt.Fprintf(e.stderr, "more jobs may follow: %s\n", nextPage(o, records[len(records)-1].ID))
	}
	return nil
}

// nextPage is the jobs list command that prints the page after the job
// with id last: the same queue, state, limit and config as o, so that
// paging on keeps the selection.
func nextPage(o options, last int64) string {
	args := []string{"skipjack", "jobs", "list", o.queue}
	if o.state != "" {
		args = append(args, "--state", o.state)
	}
	args = append(args, "--after", strconv.FormatInt(last, 10))
	if o.limit != defaultLimit {
		args = append(args, "--limit", strconv.Itoa(o.limit))
	}
	if o.file != defaultFile {
		args = append(args, "-f", shellQuote(o.file))
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and the punctuation of ordinary paths.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// jobsShow prints jobs in full; an unknown id is a failure.
func jobsShow(o options, e env) error {
	res, err := runJobs(opGet, o)
	if err != nil {
		return err
	}
	if o.asJSON {
		var raw json.RawMessage
		if raw, err = recordsJSON(res.Jobs); err == nil {
			err = printJSON(e, raw)
		}
	} else {
		var b bytes.Buffer
		for i, r := range res.Jobs {
			if i > 0 {
				b.WriteByte('\n')
			}
			writeRecord(&b, o.queue, r)
		}
		_, err = e.stdout.Write(b.Bytes())
	}
	if err != nil {
		return err
	}
	return missingJobs(o.queue, res.Missing)
}

// jobsChange returns the runner of retry or cancel. Given ids of which
// some name no job, it changes none and fails naming them.
func jobsChange(op jobsOp, done, eligible string) func(o options, e env) error {
	return func(o options, e env) error {
		res, err := runJobs(op, o)
		if err != nil {
			return err
		}
		if o.asJSON {
			if err := printChange(e, o, res); err != nil {
				return err
			}
		}
		if err := missingJobs(o.queue, res.Missing); err != nil {
			return fmt.Errorf("%w; nothing %s", err, done)
		}
		if o.asJSON {
			return nil
		}
		fmt.Fprintf(e.stdout, "%s: %s %d of %s", o.queue, done, res.Changed, plural(int(res.Matched), "job"))
		if o.state != "" {
			fmt.Fprintf(e.stdout, " in state %s", o.state)
		}
		if skipped := res.Matched - res.Changed; skipped > 0 {
			fmt.Fprintf(e.stdout, " (%d not %s)", skipped, eligible)
		}
		fmt.Fprintln(e.stdout)
		return nil
	}
}

// changeResult is what jobs retry and cancel print with --json.
type changeResult struct {
	Queue   string  `json:"queue"`
	State   string  `json:"state,omitempty"` // the --state selection
	Matched int64   `json:"matched"`         // jobs selected
	Changed int64   `json:"changed"`         // jobs retried or cancelled
	Missing []int64 `json:"missing"`         // ids given that do not exist
}

// printChange prints the result of jobs retry or cancel as JSON.
func printChange(e env, o options, res *jobsResult) error {
	missing := res.Missing
	if missing == nil {
		missing = []int64{}
	}
	raw, err := json.Marshal(changeResult{Queue: o.queue, State: o.state, Matched: res.Matched, Changed: res.Changed, Missing: missing})
	if err != nil {
		return fmt.Errorf("print the result: %w", err)
	}
	return printJSON(e, raw)
}

// missingJobs is the failure of naming jobs that do not exist.
func missingJobs(queue string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return fmt.Errorf("%s: no job with id %s", queue, strings.Join(s, ", "))
}

// writeRecord writes one job as jobs show prints it.
func writeRecord(b *bytes.Buffer, queue string, r *skipjack.Record[json.RawMessage]) {
	field := func(name, value string) { fmt.Fprintf(b, "  %-12s %s\n", name, value) }
	fmt.Fprintf(b, "job %d of %s\n", r.ID, queue)
	field("state", r.State)
	field("attempt", fmt.Sprintf("%d of %d", r.Attempt, r.MaxAttempts))
	field("priority", strconv.Itoa(r.Priority))
	field("run at", r.RunAt.Format(time.RFC3339))
	field("created at", r.CreatedAt.Format(time.RFC3339))
	if r.FinishedAt != nil {
		field("finished at", r.FinishedAt.Format(time.RFC3339))
	}
	if r.LeaseExpiresAt != nil {
		field("lease until", r.LeaseExpiresAt.Format(time.RFC3339))
	}
	if r.Worker != "" {
		field("worker", r.Worker)
	}
	if r.Rescues > 0 {
		field("rescues", strconv.Itoa(r.Rescues))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(b, "  errors\n")
		for _, x := range r.Errors {
			// A job cancelled while pending has an entry no worker wrote.
			on := ""
			if x.Worker != "" {
				on = " on " + x.Worker
			}
			fmt.Fprintf(b, "    attempt %d at %s%s: %s\n", x.Attempt, x.At.Format(time.RFC3339), on, oneLine(x.Error, 200))
		}
	}
	var payload bytes.Buffer
	if err := json.Indent(&payload, r.Payload, "    ", "  "); err != nil {
		payload.Reset()
		payload.Write(r.Payload)
	}
	fmt.Fprintf(b, "  payload\n    %s\n", payload.String())
}

// printJSON prints raw JSON indented.
func printJSON(e env, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("read the result: %w", err)
	}
	b.WriteByte('\n')
	_, err := e.stdout.Write(b.Bytes())
	return err
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
