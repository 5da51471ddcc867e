package skipjack_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// Child processes: the test binary re-executes itself with childEnv set to
// a mode, the database URL in childDBEnv and, for "burn", an output file in
// childOutEnv. A child works until SIGTERM (or until it is killed).
const (
	childDBEnv  = "SKIPJACK_TEST_DB"
	childOutEnv = "SKIPJACK_TEST_OUT"
)

// runChild is the child's main.
func runChild(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: connect:", err)
		return 1
	}
	defer pool.Close()

	switch mode {
	case "hang":
		// Claims fast jobs and never finishes them; the parent kills it.
		w := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
			<-make(chan struct{})
			return nil
		}, skipjack.WorkerConfig{Concurrency: 1})
		err = w.Run(ctx)
	case "pollburn":
		err = runPollBurn(ctx, pool) // pgbouncer_test.go
	case "poison":
		err = runPoison(ctx, pool) // poison_test.go
	case "tick":
		err = runTick(ctx, pool) // periodic_test.go
	case "sigterm":
		err = runSigterm(ctx, pool) // sigterm_test.go
	case "capped":
		err = runCapped(ctx, pool) // flow_test.go
	case "tenanted":
		err = runTenanted(ctx, pool) // perkey_test.go
	case "diamond":
		err = runDiamond(ctx, pool) // workflowkill_test.go
	case "bigclaim":
		err = runBigClaim(ctx, pool) // frozen_test.go
	case "burn":
		// Works demo jobs and writes the ids it completed to a file.
		var mu sync.Mutex
		var ids []int64
		w := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
			mu.Lock()
			ids = append(ids, job.ID)
			mu.Unlock()
			return nil
		}, skipjack.WorkerConfig{})
		if err = w.Run(ctx); err == nil {
			var b strings.Builder
			for _, id := range ids {
				fmt.Fprintln(&b, id)
			}
			err = os.WriteFile(os.Getenv(childOutEnv), []byte(b.String()), 0o644)
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	output bytes.Buffer
	done   chan struct{}
	err    error
}

// wait waits for the child to exit and returns its exit error.
func (c *child) wait() error {
	<-c.done
	return c.err
}

// startChild starts the test binary as a child in mode against the
// database of pool. It is killed at cleanup if still running.
func startChild(t *testing.T, mode string, pool *pgxpool.Pool, extraEnv ...string) *child {
	t.Helper()
	return startChildURL(t, mode, pool.Config().ConnString(), extraEnv...)
}

// startChildURL is startChild with the child's connection string.
func startChildURL(t *testing.T, mode, dbURL string, extraEnv ...string) *child {
	t.Helper()
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+mode, childDBEnv+"="+dbURL)
	c.cmd.Env = append(c.cmd.Env, extraEnv...)
	c.cmd.Stdout = &c.output
	c.cmd.Stderr = &c.output
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("child %s output:\n%s", mode, c.output.String())
		}
	})
	return c
}

// readIDs reads the ids a "burn" child wrote.
func readIDs(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read child output: %v", err)
	}
	var ids []int64
	for _, f := range strings.Fields(string(b)) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("child output: %v", err)
		}
		ids = append(ids, id)
	}
	return ids
}
