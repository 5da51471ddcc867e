package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/link"
)

// WorkflowTables names the tables of a queue that workflows use: the
// schema's workflows and steps tables and the queue's own table, all
// quoted and schema-qualified.
type WorkflowTables struct {
	Workflows string
	Steps     string
	Table     string
}

// WorkflowSpec describes one workflow to the runtime; generated workflow
// packages build it from the YAML.
type WorkflowSpec struct {
	// Name is the workflow's name in skipjack.yaml.
	Name string
	// Workflows and Steps are the schema's workflows and steps tables,
	// quoted and schema-qualified.
	Workflows, Steps string
	// Start is the statement that inserts a workflow and every step's job,
	// taking the steps' encoded payloads in StepSpecs' order and
	// returning the workflow's id.
	Start string
	// StepSpecs are the workflow's steps, upstream steps before the steps
	// that run after them.
	StepSpecs []WorkflowStep
}

// WorkflowStep is one step of a WorkflowSpec.
type WorkflowStep struct {
	// Name is the step's name in skipjack.yaml.
	Name string
	// Queue is its queue's name, and Table the queue's table, quoted and
	// schema-qualified.
	Queue, Table string
	// After are the steps it runs after, as declared.
	After []string
	// Cancel is the queue package's Cancel.
	Cancel func(ctx context.Context, db DBTX, ids ...int64) (int64, error)
	// MaxPayloadBytes is the queue's max_payload_bytes (0: no cap).
	MaxPayloadBytes int
}

// StartWorkflow inserts the workflow of spec with one statement, so that
// either every step's job exists or none does, and returns its id.
// payloads are the steps' payloads in spec.StepSpecs' order.
func StartWorkflow(ctx context.Context, db DBTX, spec *WorkflowSpec, payloads ...any) (int64, error) {
	args := make([]any, len(payloads))
	for i, p := range payloads {
		b, err := EncodePayload(p)
		if err != nil {
			return 0, fmt.Errorf("start workflow %s: step %s: %w", spec.Name, spec.StepSpecs[i].Name, err)
		}
		if err := (QueueSpec{MaxPayloadBytes: spec.StepSpecs[i].MaxPayloadBytes}).checkPayloadSize(len(b)); err != nil {
			return 0, fmt.Errorf("start workflow %s: step %s: %w", spec.Name, spec.StepSpecs[i].Name, err)
		}
		args[i] = string(b)
	}
	var id int64
	if err := db.QueryRow(ctx, spec.Start, args...).Scan(&id); err != nil {
		return 0, fmt.Errorf("start workflow %s: %w", spec.Name, err)
	}
	return id, nil
}

// GetWorkflow returns the workflow of spec with the given id, or an error
// matching skipjack.ErrWorkflowNotFound.
func GetWorkflow(ctx context.Context, db DBTX, spec *WorkflowSpec, id int64) (*skipjack.WorkflowRecord, error) {
	rec := &skipjack.WorkflowRecord{ID: id, Steps: make(map[string]skipjack.StepRecord, len(spec.StepSpecs))}
	err := db.QueryRow(ctx, `SELECT "name", "created_at" FROM `+spec.Workflows+` WHERE "id" = $1`, id).Scan(&rec.Name, &rec.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && rec.Name != spec.Name) {
		return nil, fmt.Errorf("get workflow %s %d: %w", spec.Name, id, skipjack.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %s %d: %w", spec.Name, id, err)
	}
	// A ready step's job says whether it is pending or running; a
	// finished one's may be gone (deleted at its ack, or pruned), and the
	// step row keeps how it ended.
	var query string
	for i, st := range spec.StepSpecs {
		if i > 0 {
			query += "\nUNION ALL\n"
		}
		query += fmt.Sprintf(`SELECT s."step", s."queue", s."job_id", CASE WHEN s."state" = 'ready' THEN coalesce(j."state", 'completed') ELSE s."state" END, coalesce(s."error", '')
FROM %s AS s LEFT JOIN %s AS j ON s."state" = 'ready' AND j."id" = s."job_id"
WHERE s."workflow_id" = $1 AND s."step" = %s`, spec.Steps, st.Table, quoteLiteral(st.Name))
	}
	rows, err := db.Query(ctx, query, id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %s %d: %w", spec.Name, id, err)
	}
	defer rows.Close()
	finished, failed := 0, 0
	for rows.Next() {
		var name string
		var s skipjack.StepRecord
		if err := rows.Scan(&name, &s.Queue, &s.JobID, &s.State, &s.Error); err != nil {
			return nil, fmt.Errorf("get workflow %s %d: %w", spec.Name, id, err)
		}
		switch s.State {
		case "completed":
			finished++
		case "failed":
			finished++
			failed++
		}
		rec.Steps[name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get workflow %s %d: %w", spec.Name, id, err)
	}
	switch {
	case finished < len(rec.Steps):
		rec.State = skipjack.WorkflowRunning
	case failed > 0:
		rec.State = skipjack.WorkflowFailed
	default:
		rec.State = skipjack.WorkflowCompleted
	}
	return rec, nil
}

// CancelWorkflow cancels every step of the workflow that has not finished
// (see a queue's Cancel) and returns how many it cancelled. It cancels the
// last steps first, so that no step that runs after a failed upstream is
// released by the cancel of its upstream.
func CancelWorkflow(ctx context.Context, db DBTX, spec *WorkflowSpec, id int64) (int64, error) {
	if _, err := GetWorkflow(ctx, db, spec, id); err != nil {
		return 0, fmt.Errorf("cancel: %w", err)
	}
	jobs := make(map[string]int64, len(spec.StepSpecs))
	rows, err := db.Query(ctx, `SELECT "step", "job_id" FROM `+spec.Steps+` WHERE "workflow_id" = $1 AND "state" IN ('waiting', 'ready')`, id)
	if err != nil {
		return 0, fmt.Errorf("cancel workflow %s %d: %w", spec.Name, id, err)
	}
	for rows.Next() {
		var step string
		var job int64
		if err := rows.Scan(&step, &job); err != nil {
			rows.Close()
			return 0, fmt.Errorf("cancel workflow %s %d: %w", spec.Name, id, err)
		}
		jobs[step] = job
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("cancel workflow %s %d: %w", spec.Name, id, err)
	}
	var n int64
	for i := len(spec.StepSpecs) - 1; i >= 0; i-- {
		st := spec.StepSpecs[i]
		job, ok := jobs[st.Name]
		if !ok {
			continue
		}
		c, err := st.Cancel(ctx, db, job)
		if err != nil {
			return n, fmt.Errorf("cancel workflow %s %d: step %s: %w", spec.Name, id, st.Name, err)
		}
		n += c
	}
	return n, nil
}

// WorkflowOutputs returns the encoded outputs of the workflow's completed
// steps that recorded one, by step name.
func WorkflowOutputs(ctx context.Context, db DBTX, spec *WorkflowSpec, id int64) (map[string][]byte, error) {
	if _, err := GetWorkflowName(ctx, db, spec, id); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT "step", "output"::text FROM `+spec.Steps+` WHERE "workflow_id" = $1 AND "state" = 'completed' AND "output" IS NOT NULL`, id)
	if err != nil {
		return nil, fmt.Errorf("outputs of workflow %s %d: %w", spec.Name, id, err)
	}
	defer rows.Close()
	out := make(map[string][]byte)
	for rows.Next() {
		var step, output string
		if err := rows.Scan(&step, &output); err != nil {
			return nil, fmt.Errorf("outputs of workflow %s %d: %w", spec.Name, id, err)
		}
		out[step] = []byte(output)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outputs of workflow %s %d: %w", spec.Name, id, err)
	}
	return out, nil
}

// GetWorkflowName checks that a workflow of spec has the given id,
// returning an error matching skipjack.ErrWorkflowNotFound when none has.
func GetWorkflowName(ctx context.Context, db DBTX, spec *WorkflowSpec, id int64) (string, error) {
	var name string
	err := db.QueryRow(ctx, `SELECT "name" FROM `+spec.Workflows+` WHERE "id" = $1`, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && name != spec.Name) {
		return "", fmt.Errorf("workflow %s %d: %w", spec.Name, id, skipjack.ErrWorkflowNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("workflow %s %d: %w", spec.Name, id, err)
	}
	return name, nil
}

// DecodeOutput decodes one step's encoded output into a new O, or returns
// nil when there is none.
func DecodeOutput[O any](b []byte) (*O, error) {
	if b == nil {
		return nil, nil
	}
	o := new(O)
	if err := json.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("decode step output: %w", err)
	}
	return o, nil
}

// SetOutput records o as the output of job (a *skipjack.Job[T]), written
// when the job is acknowledged. Generated output structs always encode; a
// string with a NUL character, which jsonb refuses, fails the write, and
// the job is retried with that error.
func SetOutput(job any, o any) {
	b, err := json.Marshal(o)
	if err != nil {
		b = []byte("\x00")
	}
	link.SetJobOutput(job, b)
}

// writeOutput stores the output the handler of the job with id and claim
// recorded, if any, in the job's step row, on db (the ack's transaction
// for CompleteTx). It writes only while the claim owns the job, so an
// attempt that lost its lease cannot overwrite the output of a newer one.
func writeOutput(ctx context.Context, db DBTX, wt *WorkflowTables, queue string, id int64, claim int32, output []byte) error {
	if wt == nil || output == nil {
		return nil
	}
	_, err := db.Exec(ctx, `UPDATE `+wt.Steps+` AS s SET "output" = $3::text::jsonb
FROM `+wt.Table+` AS j
WHERE s."queue" = $1 AND s."job_id" = $2 AND j."id" = $2 AND j."claim" = $4 AND j."state" = 'running'`, queue, id, string(output), claim)
	if err != nil {
		return fmt.Errorf("write output of %s job %d: %w", queue, id, err)
	}
	return nil
}

// workflowIDs sets the WorkflowID of the claimed jobs of a queue that
// workflows use, with one lookup in the steps table.
func workflowIDs[T any](ctx context.Context, db DBTX, wt *WorkflowTables, queue string, entries []entry[T]) error {
	if wt == nil || len(entries) == 0 {
		return nil
	}
	ids := make([]int64, len(entries))
	for i := range entries {
		ids[i] = entries[i].row.ID
	}
	rows, err := db.Query(ctx, `SELECT "job_id", "workflow_id" FROM `+wt.Steps+` WHERE "queue" = $1 AND "job_id" = ANY($2::bigint[])`, queue, ids)
	if err != nil {
		return fmt.Errorf("workflow ids of %s jobs: %w", queue, err)
	}
	defer rows.Close()
	byJob := make(map[int64]int64, len(entries))
	for rows.Next() {
		var job, wf int64
		if err := rows.Scan(&job, &wf); err != nil {
			return fmt.Errorf("workflow ids of %s jobs: %w", queue, err)
		}
		byJob[job] = wf
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("workflow ids of %s jobs: %w", queue, err)
	}
	for i := range entries {
		entries[i].job.WorkflowID = byJob[entries[i].row.ID]
	}
	return nil
}

// WorkflowRetention is how long a finished workflow (every step completed
// or failed) is kept after its last step finished, whatever the retention
// of its queues: Get, Outputs and the tools read it until then. The
// maintenance of every worker of a queue the workflow uses then deletes
// the workflow and its step rows.
const WorkflowRetention = 7 * 24 * time.Hour

// pruneWorkflows deletes up to limit workflows that have a step in queue,
// whose steps all finished, the last one longer than keep ago. A workflow
// with a step not finished is never deleted, nor are its steps' jobs
// (pending and running jobs are never pruned; a finished step's state and
// output live in its step row, so a live workflow needs no finished job).
// It skips workflows another transaction holds.
func pruneWorkflows(ctx context.Context, db DBTX, wt *WorkflowTables, queue string, keep time.Duration, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM `+wt.Workflows+` WHERE "id" = ANY(ARRAY(
    SELECT w."id" FROM `+wt.Workflows+` AS w
    WHERE w."id" IN (SELECT s."workflow_id" FROM `+wt.Steps+` AS s WHERE s."queue" = $1 AND s."finished_at" < now() - $2::interval)
      AND NOT EXISTS (SELECT FROM `+wt.Steps+` AS o WHERE o."workflow_id" = w."id" AND (o."finished_at" IS NULL OR o."finished_at" >= now() - $2::interval))
    ORDER BY w."id"
    LIMIT $3
    FOR UPDATE SKIP LOCKED
))`, queue, keep, limit)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// quoteLiteral quotes a Postgres string literal.
func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// workflowSteps is what a run of a queue that workflows use does with
// the steps table: it looks up the workflows of the jobs it claims and
// writes the outputs their handlers record. It owns where those
// statements run: the run's control pool, or the handlers' pool in tests
// without one. For a queue that no workflow uses (tables is nil) it does
// nothing.
type workflowSteps[T any] struct {
	tables      *WorkflowTables // the queue's spec.Workflow
	queue       string
	stmtTimeout time.Duration
	control     *pgxpool.Pool // the run's control pool; nil without one
	pool        *pgxpool.Pool // the handlers' pool
}

// setIDs sets the WorkflowID of the claimed jobs in entries.
func (s *workflowSteps[T]) setIDs(entries []entry[T]) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.stmtTimeout)
	defer cancel()
	return workflowIDs(ctx, controlDB(s.control, s.pool), s.tables, s.queue, entries)
}

// storeOutput writes the output the handler of e recorded, if any, before
// its acknowledgement is queued.
func (s *workflowSteps[T]) storeOutput(e *entry[T]) error {
	out := link.JobOutput(e.job)
	if s.tables == nil || out == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.stmtTimeout)
	defer cancel()
	return writeOutput(ctx, controlDB(s.control, s.pool), s.tables, s.queue, e.job.ID, e.job.Claim, out)
}

// controlDB is what a run's own statements outside the store run on: its
// control pool, or its handlers' pool in tests without one.
func controlDB(control, pool *pgxpool.Pool) DBTX {
	if control == nil {
		return pool
	}
	return control
}
