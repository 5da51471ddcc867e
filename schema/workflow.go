package schema

import (
	"fmt"
	"strings"
)

// The per-schema objects of workflows. A workflow's steps are ordinary
// jobs of their queues; what a step waits for, and what its upstream
// steps' ends do to it, lives beside them in the steps table and in the
// trigger that every queue used by a workflow carries. The trigger runs
// inside the statement that settles a job (the ack, a failure, a cancel,
// an admin retry), so a step's counter of upstream steps is decremented
// in the same transaction as the upstream's acknowledgement, under the
// step row's lock: two upstreams that finish at once are counted one
// after the other, and exactly one of them releases the step.
const (
	// WorkflowsTable holds one row per started workflow.
	WorkflowsTable = "_skipjack_workflows"
	// StepsTable holds one row per step of a started workflow.
	StepsTable = "_skipjack_workflow_steps"
	// workflowStepFunc is the trigger function that settles a step when
	// its job ends or is retried.
	workflowStepFunc = "_skipjack_workflow_step"
	// workflowHoldFunc is the trigger function that keeps a waiting
	// step's job unclaimable whatever moves its run_at (an admin Retry of
	// "scheduled" jobs).
	workflowHoldFunc = "_skipjack_workflow_hold"
	// WorkflowTrigger, WorkflowAckTrigger and WorkflowHoldTrigger are the
	// names of the triggers on each queue table a workflow uses: a job's
	// state changing, a job deleted at its ack, a waiting job's run_at.
	WorkflowTrigger     = "_skipjack_workflow_step"
	WorkflowAckTrigger  = "_skipjack_workflow_ack"
	WorkflowHoldTrigger = "_skipjack_workflow_hold"
)

// Waiting is the run_at of a step's job while it waits for its upstream
// steps: a pending job the claim never reaches (it stops at now()), at the
// end of the claim index.
const Waiting = "'infinity'::timestamptz"

// Workflows is the quoted, schema-qualified name of the workflows table.
func Workflows(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(WorkflowsTable) }

// Steps is the quoted, schema-qualified name of the steps table.
func Steps(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(StepsTable) }

// CreateWorkflows returns the DDL of the workflow tables and trigger
// functions of schema.
func CreateWorkflows(schema string) string {
	r := strings.NewReplacer("WORKFLOWS", Workflows(schema), "STEPS", Steps(schema),
		"STEPFUNC", QuoteIdent(schema)+"."+QuoteIdent(workflowStepFunc),
		"HOLDFUNC", QuoteIdent(schema)+"."+QuoteIdent(workflowHoldFunc),
		"FINISHEDIDX", QuoteIdent(StepsTable+"_finished_idx"))
	return r.Replace(workflowsDDL)
}

// DropWorkflows returns the DDL that drops what CreateWorkflows creates.
func DropWorkflows(schema string) string {
	return fmt.Sprintf("DROP FUNCTION IF EXISTS %s.%s();\nDROP FUNCTION IF EXISTS %s.%s();\nDROP TABLE IF EXISTS %s;\nDROP TABLE IF EXISTS %s;\n",
		QuoteIdent(schema), QuoteIdent(workflowHoldFunc), QuoteIdent(schema), QuoteIdent(workflowStepFunc), Steps(schema), Workflows(schema))
}

// CreateWorkflowTriggers returns the DDL of the triggers of t, a queue
// table that a workflow uses. Their WHEN clauses keep the claim, the
// heartbeat and retries of a running job from calling the function.
func CreateWorkflowTriggers(t Table) string {
	s := QuoteIdent(t.Schema)
	return fmt.Sprintf(`CREATE TRIGGER %[1]s AFTER UPDATE OF "state" ON %[2]s
    FOR EACH ROW WHEN (OLD."state" <> NEW."state" AND (NEW."state" IN ('completed', 'failed') OR OLD."state" = 'failed'))
    EXECUTE FUNCTION %[3]s.%[4]s();

CREATE TRIGGER %[5]s AFTER DELETE ON %[2]s
    FOR EACH ROW WHEN (OLD."state" = 'running') EXECUTE FUNCTION %[3]s.%[4]s();

CREATE TRIGGER %[6]s BEFORE UPDATE OF "run_at" ON %[2]s
    FOR EACH ROW WHEN (OLD."run_at" = 'infinity' AND NEW."run_at" <> 'infinity' AND NEW."state" = 'pending')
    EXECUTE FUNCTION %[3]s.%[7]s();
`, QuoteIdent(WorkflowTrigger), t.QualifiedName(), s, QuoteIdent(workflowStepFunc), QuoteIdent(WorkflowAckTrigger), QuoteIdent(WorkflowHoldTrigger), QuoteIdent(workflowHoldFunc))
}

// DropWorkflowTriggers returns the DDL that drops the triggers of t.
func DropWorkflowTriggers(t Table) string {
	var b strings.Builder
	for _, name := range []string{WorkflowHoldTrigger, WorkflowAckTrigger, WorkflowTrigger} {
		fmt.Fprintf(&b, "DROP TRIGGER IF EXISTS %s ON %s;\n", QuoteIdent(name), t.QualifiedName())
	}
	return b.String()
}

// workflowsDDL is the template of CreateWorkflows.
//
// A step is waiting (its job pending at run_at infinity) while upstream
// steps it counts in "waiting" have not finished, ready once released
// (its job tells whether it is pending or running), and completed or
// failed when its job ended so; a step cancelled because an upstream
// failed records that upstream in cancelled_by, so that an admin retry of
// the upstream re-arms it.
const workflowsDDL = `CREATE TABLE IF NOT EXISTS WORKFLOWS (
    "id" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "name" text NOT NULL,
    "created_at" timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS STEPS (
    "workflow_id" bigint NOT NULL REFERENCES WORKFLOWS ("id") ON DELETE CASCADE,
    "step" text NOT NULL,
    "queue" text NOT NULL,
    "job_id" bigint NOT NULL,
    "after" text[] NOT NULL DEFAULT '{}',
    "run_on_failure" boolean NOT NULL DEFAULT false,
    "channel" text,
    "waiting" integer NOT NULL DEFAULT 0,
    "state" text NOT NULL DEFAULT 'waiting' CHECK ("state" IN ('waiting', 'ready', 'completed', 'failed')),
    "error" text,
    "cancelled_by" text,
    "output" jsonb,
    "finished_at" timestamptz,
    PRIMARY KEY ("workflow_id", "step"),
    UNIQUE ("queue", "job_id")
);

-- The prune of finished workflows (runtime maintenance) looks up the
-- steps of a queue that finished before a time.
CREATE INDEX IF NOT EXISTS FINISHEDIDX ON STEPS ("queue", "finished_at") WHERE "finished_at" IS NOT NULL;

CREATE OR REPLACE FUNCTION STEPFUNC() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j record;
    st record;
    d record;
    outcome text;
    rearmed bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- Only an ack deletes a running job.
        IF OLD."state" <> 'running' THEN
            RETURN NULL;
        END IF;
        j := OLD;
        outcome := 'completed';
    ELSIF OLD."state" = NEW."state" THEN
        RETURN NULL;
    ELSIF NEW."state" IN ('completed', 'failed') THEN
        j := NEW;
        outcome := NEW."state";
    ELSIF OLD."state" = 'failed' THEN
        j := NEW;
        outcome := 'retried';
    ELSE
        RETURN NULL;
    END IF;
    SELECT * INTO st FROM STEPS WHERE "queue" = TG_TABLE_NAME AND "job_id" = j."id" FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF outcome = 'retried' THEN
        IF st."state" = 'failed' THEN
            UPDATE STEPS SET "state" = 'ready', "error" = NULL, "cancelled_by" = NULL, "finished_at" = NULL
            WHERE "workflow_id" = st."workflow_id" AND "step" = st."step";
        END IF;
        -- The steps this step's failure cancelled wait for it again; those
        -- that still wait and run anyway count it again.
        FOR d IN SELECT * FROM STEPS WHERE "workflow_id" = st."workflow_id" AND st."step" = ANY("after") ORDER BY "step" FOR UPDATE LOOP
            IF d."state" = 'failed' AND d."cancelled_by" = st."step" THEN
                -- Only a step whose job is still stored (not pruned by its
                -- queue's retention, not deleted) waits again; any other
                -- stays cancelled, so that no step waits without a job.
                EXECUTE format('UPDATE %I.%I SET "state" = ''pending'', "run_at" = ''infinity'', "finished_at" = NULL, "cancel_requested" = false WHERE "id" = $1 AND "state" = ''failed''', TG_TABLE_SCHEMA, d."queue") USING d."job_id";
                GET DIAGNOSTICS rearmed = ROW_COUNT;
                IF rearmed > 0 THEN
                    UPDATE STEPS AS s SET "state" = 'waiting', "error" = NULL, "cancelled_by" = NULL, "finished_at" = NULL,
                        "waiting" = (SELECT count(*) FROM STEPS AS u WHERE u."workflow_id" = s."workflow_id" AND u."step" = ANY(s."after") AND u."state" <> 'completed')
                    WHERE s."workflow_id" = d."workflow_id" AND s."step" = d."step";
                END IF;
            ELSIF d."state" = 'waiting' AND d."run_on_failure" THEN
                UPDATE STEPS SET "waiting" = "waiting" + 1 WHERE "workflow_id" = d."workflow_id" AND "step" = d."step";
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    UPDATE STEPS SET "state" = outcome, "finished_at" = now(),
        "error" = CASE WHEN outcome = 'failed' THEN coalesce(j."errors" -> -1 ->> 'error', 'failed') END
    WHERE "workflow_id" = st."workflow_id" AND "step" = st."step";
    FOR d IN SELECT * FROM STEPS WHERE "workflow_id" = st."workflow_id" AND st."step" = ANY("after") AND "state" = 'waiting' ORDER BY "step" FOR UPDATE LOOP
        IF outcome = 'completed' OR d."run_on_failure" THEN
            UPDATE STEPS SET "waiting" = "waiting" - 1, "state" = CASE WHEN "waiting" <= 1 THEN 'ready' ELSE 'waiting' END
            WHERE "workflow_id" = d."workflow_id" AND "step" = d."step";
            IF d."waiting" <= 1 THEN
                EXECUTE format('UPDATE %I.%I SET "run_at" = now() WHERE "id" = $1 AND "state" = ''pending''', TG_TABLE_SCHEMA, d."queue") USING d."job_id";
                IF d."channel" IS NOT NULL THEN
                    PERFORM pg_notify(d."channel", '');
                END IF;
            END IF;
        ELSE
            UPDATE STEPS SET "cancelled_by" = st."step" WHERE "workflow_id" = d."workflow_id" AND "step" = d."step";
            EXECUTE format('UPDATE %I.%I SET "state" = ''failed'', "finished_at" = now(), "cancel_requested" = true, "errors" = "errors" || jsonb_build_array(jsonb_build_object(''attempt'', "attempt", ''at'', now(), ''error'', ''cancelled'', ''worker'', '''')) WHERE "id" = $1 AND "state" = ''pending''', TG_TABLE_SCHEMA, d."queue") USING d."job_id";
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION HOLDFUNC() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM STEPS WHERE "queue" = TG_TABLE_NAME AND "job_id" = NEW."id" AND "state" = 'waiting') THEN
        NEW."run_at" := OLD."run_at";
    END IF;
    RETURN NEW;
END
$$;
`
