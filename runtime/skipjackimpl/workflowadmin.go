package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// NewWorkflowAdmin returns the operations view of the workflow of spec on
// db: what a generated workflow package's Admin returns, and what the
// skipjack CLI builds from the YAML alone.
func NewWorkflowAdmin(db DBTX, spec *WorkflowSpec) skipjack.WorkflowAdmin {
	return workflowAdmin{spec: spec, db: db}
}

// workflowAdmin implements skipjack.WorkflowAdmin for one WorkflowSpec.
type workflowAdmin struct {
	spec *WorkflowSpec
	db   DBTX
}

func (a workflowAdmin) Name() string { return a.spec.Name }

func (a workflowAdmin) Steps() []skipjack.WorkflowStepInfo {
	out := make([]skipjack.WorkflowStepInfo, len(a.spec.StepSpecs))
	for i, st := range a.spec.StepSpecs {
		out[i] = skipjack.WorkflowStepInfo{Name: st.Name, Queue: st.Queue, After: slices.Clone(st.After)}
	}
	return out
}

func (a workflowAdmin) Get(ctx context.Context, id int64) (*skipjack.WorkflowRecord, error) {
	return GetWorkflow(ctx, a.db, a.spec, id)
}

func (a workflowAdmin) List(ctx context.Context, p skipjack.WorkflowListParams) ([]skipjack.WorkflowSummary, error) {
	return ListWorkflows(ctx, a.db, a.spec.Workflows, a.spec.Steps, a.spec.Name, p)
}

func (a workflowAdmin) JobWorkflow(ctx context.Context, queue string, jobID int64) (int64, error) {
	if !slices.ContainsFunc(a.spec.StepSpecs, func(st WorkflowStep) bool { return st.Queue == queue }) {
		return 0, nil
	}
	var id int64
	err := a.db.QueryRow(ctx, `SELECT s."workflow_id" FROM `+a.spec.Steps+` AS s JOIN `+a.spec.Workflows+` AS w ON w."id" = s."workflow_id"
WHERE s."queue" = $1 AND s."job_id" = $2 AND w."name" = $3`, queue, jobID, a.spec.Name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("workflow of %s job %d: %w", queue, jobID, err)
	}
	return id, nil
}

// workflowStates are the states a WorkflowListParams may select.
var workflowStates = []string{skipjack.WorkflowRunning, skipjack.WorkflowCompleted, skipjack.WorkflowFailed}

// ListWorkflows returns a page of the workflows in the tables workflows
// and steps (quoted, schema-qualified) named name, or of every name when
// name is "": newest first, or oldest first above p.AfterID. A workflow
// is running while a step has not finished, failed once all have and one
// failed, completed otherwise, as GetWorkflow decides.
func ListWorkflows(ctx context.Context, db DBTX, workflows, steps, name string, p skipjack.WorkflowListParams) ([]skipjack.WorkflowSummary, error) {
	if p.State != "" && !slices.Contains(workflowStates, p.State) {
		return nil, fmt.Errorf("list workflows: unknown state %q", p.State)
	}
	if p.BeforeID < 0 || p.AfterID < 0 {
		return nil, errors.New("list workflows: negative id bound")
	}
	order := "DESC"
	if p.AfterID > 0 {
		order = "ASC"
	}
	rows, err := db.Query(ctx, `SELECT w."id", w."name", w."created_at", s.steps, s.finished, s.failed FROM `+workflows+` AS w
CROSS JOIN LATERAL (
    SELECT count(*)::int AS steps,
        (count(*) FILTER (WHERE s."state" IN ('completed', 'failed')))::int AS finished,
        (count(*) FILTER (WHERE s."state" = 'failed'))::int AS failed
    FROM `+steps+` AS s WHERE s."workflow_id" = w."id"
) AS s
WHERE ($1 = '' OR w."name" = $1)
  AND ($2::bigint = 0 OR w."id" < $2) AND w."id" > $3
  AND ($4 = '' OR $4 = CASE WHEN s.finished < s.steps THEN 'running' WHEN s.failed > 0 THEN 'failed' ELSE 'completed' END)
ORDER BY w."id" `+order+` LIMIT $5`, name, p.BeforeID, p.AfterID, p.State, listLimit(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (skipjack.WorkflowSummary, error) {
		var w skipjack.WorkflowSummary
		err := row.Scan(&w.ID, &w.Name, &w.CreatedAt, &w.Steps, &w.Finished, &w.Failed)
		switch {
		case w.Finished < w.Steps:
			w.State = skipjack.WorkflowRunning
		case w.Failed > 0:
			w.State = skipjack.WorkflowFailed
		default:
			w.State = skipjack.WorkflowCompleted
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}
