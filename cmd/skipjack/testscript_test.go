package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
	"github.com/skipjack-dev/skipjack/generator/sqlcrun/sqlcchild"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestMain makes the test binary act as sqlc when the generator starts it
// as a child, and as the skipjack command inside scripts.
func TestMain(m *testing.M) {
	if code, ok := sqlcchild.Main(); ok {
		os.Exit(code)
	}
	testscript.Main(stopCluster{m}, map[string]func(){
		"skipjack": func() {
			// Inside a script the executable is this test binary, whose
			// TestMain dispatches the sqlc child above.
			exe, err := os.Executable()
			if err != nil {
				exe = os.Args[0]
			}
			os.Exit(run(os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, sqlc: sqlcrun.Runner(exe)}))
		},
	})
}

// stopCluster runs the tests, then stops the throwaway PostgreSQL cluster
// that skipjacktest started if no server was found.
type stopCluster struct{ m *testing.M }

func (s stopCluster) Run() int { return skipjacktest.Main(s.m) }

// TestScripts runs the CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status":        cmdStatus,
			"newdb":         cmdNewDB,
			"sql":           cmdSQL,
			"startworkflow": cmdStartWorkflow,
		},
	})
}

// cmdStatus runs a command and expects its exact exit status:
//
//	status 2 skipjack nosuchcommand
//
// Its stdout and stderr can be matched afterwards as after exec.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status CODE COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: bad exit status %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			ts.Fatalf("status: %v", err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdNewDB creates an empty database for the script, dropped when the
// script ends, and points $DATABASE_URL at it:
//
//	newdb
func cmdNewDB(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: newdb")
	}
	dbURL, drop, err := skipjacktest.CreateDatabase(context.Background(), "script")
	if err != nil {
		ts.Fatalf("newdb: %v", err)
	}
	ts.Defer(func() {
		if err := drop(context.Background()); err != nil {
			ts.Logf("newdb: %v", err)
		}
	})
	ts.Setenv("DATABASE_URL", dbURL)
}

// cmdSQL runs each argument as one SQL statement on $DATABASE_URL:
//
//	sql 'INSERT INTO skipjack.ping (payload) VALUES ($${}$$)'
func cmdSQL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: sql STATEMENT...")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ts.Getenv("DATABASE_URL"))
	if err != nil {
		ts.Fatalf("sql: %v", err)
	}
	defer conn.Close(ctx)
	for _, stmt := range args {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			ts.Fatalf("sql %s: %v", stmt, err)
		}
	}
}

// cmdStartWorkflow starts a workflow of skipjack.yaml on $DATABASE_URL
// with the statement its generated Start runs, every step's payload {}:
//
//	startworkflow fulfil_order
func cmdStartWorkflow(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: startworkflow NAME")
	}
	cfg, err := config.Load(ts.MkAbs("skipjack.yaml"))
	if err != nil {
		ts.Fatalf("startworkflow: %v", err)
	}
	for _, w := range generator.WorkflowSQLs(cfg) {
		if w.Name != args[0] {
			continue
		}
		spec := &skipjackimpl.WorkflowSpec{Name: w.Name, Workflows: w.Workflows, Steps: w.Steps, Start: w.Start}
		payloads := make([]any, len(w.Order))
		for i, j := range w.Order {
			spec.StepSpecs = append(spec.StepSpecs, skipjackimpl.WorkflowStep{Name: w.StepSQLs[j].Name, Queue: w.StepSQLs[j].Queue, Table: w.StepSQLs[j].Table})
			payloads[i] = map[string]any{}
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, ts.Getenv("DATABASE_URL"))
		if err != nil {
			ts.Fatalf("startworkflow: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := skipjackimpl.StartWorkflow(ctx, conn, spec, payloads...); err != nil {
			ts.Fatalf("startworkflow: %v", err)
		}
		return
	}
	ts.Fatalf("startworkflow: no workflow %q", args[0])
}
