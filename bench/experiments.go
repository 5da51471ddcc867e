package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// experimentSystems returns the systems an experiment compares: those named
// with -systems, else the given defaults that exist in this build.
func (b *bench) experimentSystems(systems []system, defaults ...string) []system {
	if len(b.o.systems) > 0 {
		return systems
	}
	var out []system
	for _, s := range systems {
		if slices.Contains(defaults, s.name) {
			out = append(out, s)
		}
	}
	return out
}

// bloat measures burn-down as the table holds more and more finished rows
// (failed rows for a queue that deletes at ack, completed rows for one that
// keeps them), against the same burn-down on an empty table.
func (b *bench) bloat(ctx context.Context, systems []system) error {
	systems = b.experimentSystems(systems, "skipjack-tuned", "skipjack-kept", "river-tuned")
	counts := append([]int{0}, b.o.bloat...)
	fmt.Fprintf(b.out, "\nBurn-down of %d jobs with finished rows kept in the table (median of %d run(s), each run going through every system and count in turn; rows inserted, then VACUUM ANALYZE)\n\n", b.o.jobs, b.o.runs)
	type cell struct{ burns, claims []float64 }
	cells := make([][]cell, len(systems))
	for i := range cells {
		cells[i] = make([]cell, len(counts))
	}
	var errs []error
	for r := range b.o.runs {
		for i, s := range systems {
			for j, k := range counts {
				err := b.withDB(ctx, s, "bloat", func(dsn string) error {
					res, err := measureThroughput(ctx, s, dsn, b.o.jobs, b.o.batch, k, b.burnTimeout(s))
					if err != nil {
						return err
					}
					cells[i][j].burns = append(cells[i][j].burns, res.burn)
					cells[i][j].claims = append(cells[i][j].claims, res.claimMS)
					b.logf("bloat %s %d rows run %d: %.0f jobs/s", s.name, k, r+1, res.burn)
					return nil
				})
				if err != nil {
					errs = append(errs, fmt.Errorf("%s with %d rows: %w", s.name, k, err))
				}
			}
		}
	}
	fmt.Fprintln(b.out, "| system | finished rows kept | burn-down jobs/s | vs empty (medians) | vs empty (median of per-run ratios) | runs (jobs/s) | mean claim ms |")
	fmt.Fprintln(b.out, "|---|--:|--:|--:|--:|---|--:|")
	for i, s := range systems {
		empties := cells[i][0].burns
		empty := median(empties)
		for j, k := range counts {
			c := cells[i][j]
			burn := median(c.burns)
			vs, paired := "–", "–"
			if empty > 0 && burn > 0 {
				vs = fmt.Sprintf("%+.1f%%", (burn/empty-1)*100)
			}
			// The same run's empty-table burn-down ran just before this
			// one, so its ratio is less exposed to the machine's load
			// drifting over the whole experiment.
			if len(c.burns) == len(empties) && len(empties) > 0 {
				ratios := make([]float64, len(empties))
				for r := range empties {
					ratios[r] = c.burns[r] / empties[r]
				}
				paired = fmt.Sprintf("%+.1f%%", (median(ratios)-1)*100)
			}
			var each []string
			for _, x := range c.burns {
				each = append(each, num(x))
			}
			fmt.Fprintf(b.out, "| %s | %d | %s | %s | %s | %s | %s |\n", s.name, k, num(burn), vs, paired, strings.Join(each, ", "), ms(median(c.claims)))
		}
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// snapshotHeld measures burn-down while another session holds a REPEATABLE
// READ snapshot open: dead rows cannot be removed, so claims wade through
// more and more of them. Rounds of enqueue+burn-down repeat until the
// snapshot has been held for -snapshot; one round runs before it is taken
// and one after it is released.
func (b *bench) snapshotHeld(ctx context.Context, systems []system) error {
	systems = b.experimentSystems(systems, "skipjack-tuned", "river-tuned", "floor")
	fmt.Fprintf(b.out, "\nBurn-down rounds of %d jobs while a REPEATABLE READ snapshot is held for %v\n\n", b.o.jobs, b.o.snapshot)
	fmt.Fprintln(b.out, "| system | before (jobs/s) | first round held | last round held | rounds held | mean held | after release |")
	fmt.Fprintln(b.out, "|---|--:|--:|--:|--:|--:|--:|")
	var errs []error
	for _, s := range systems {
		err := b.withDB(ctx, s, "snap", func(dsn string) error {
			pool, q, err := openQueue(ctx, s, dsn, s.maxConns)
			if err != nil {
				return err
			}
			defer pool.Close()
			round := func() (float64, error) {
				if _, err := enqueueBulk(ctx, q, b.o.jobs, b.o.batch); err != nil {
					return 0, err
				}
				took, err := burnDown(ctx, q, b.o.jobs, b.burnTimeout(s))
				if err != nil {
					return 0, err
				}
				return float64(b.o.jobs) / took.Seconds(), nil
			}
			before, err := round()
			if err != nil {
				return fmt.Errorf("before: %w", err)
			}
			holder, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return fmt.Errorf("connect snapshot holder: %w", err)
			}
			defer holder.Close(context.WithoutCancel(ctx))
			tx, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			if err != nil {
				return fmt.Errorf("begin snapshot: %w", err)
			}
			if _, err := tx.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
				return fmt.Errorf("take snapshot: %w", err)
			}
			var held []float64
			until := time.Now().Add(b.o.snapshot)
			for len(held) == 0 || time.Now().Before(until) {
				r, err := round()
				if err != nil {
					_ = tx.Rollback(ctx)
					return fmt.Errorf("held round %d: %w", len(held)+1, err)
				}
				held = append(held, r)
				b.logf("snapshot %s round %d: %.0f jobs/s", s.name, len(held), r)
			}
			if err := tx.Rollback(ctx); err != nil {
				return fmt.Errorf("release snapshot: %w", err)
			}
			after, err := round()
			if err != nil {
				return fmt.Errorf("after: %w", err)
			}
			var sum float64
			for _, h := range held {
				sum += h
			}
			fmt.Fprintf(b.out, "| %s | %s | %s | %s | %d | %s | %s |\n", s.name, num(before), num(held[0]), num(held[len(held)-1]),
				len(held), num(sum/float64(len(held))), num(after))
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// benchChild is a process of this binary started with -child: a worker
// process of the processes experiment or the idle experiment's workers.
type benchChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it stops the child
	out   *bufio.Reader  // the child's standard output
}

// startChild starts exe as the child named name (-child) on the database
// dsn, with the extra flags args, its standard error passed through. The
// caller reads its first line with awaitReady before calling cmd.Wait.
func startChild(ctx context.Context, exe, name, dsn string, verbose bool, args ...string) (*benchChild, error) {
	args = append([]string{"-child", name, "-child-dsn", dsn}, args...)
	cmd := exec.CommandContext(ctx, exe, append(args, "-v="+strconv.FormatBool(verbose))...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	return &benchChild{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}, nil
}

// awaitReady reads the child's first line and returns an error unless it
// is "ready".
func (c *benchChild) awaitReady() error {
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		return fmt.Errorf("child did not get ready: %q %v", line, err)
	}
	return nil
}

// runChild is a worker process of the processes experiment: it connects,
// says "ready", starts working on "go" and stops when its stdin closes.
func runChild(ctx context.Context, o options) error {
	s, ok := systemByName(o, o.child)
	if !ok {
		return fmt.Errorf("unknown system %q", o.child)
	}
	pool, err := openPool(ctx, o.childDSN, s.maxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	q, err := s.open(pool)
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if line, err := in.ReadString('\n'); err != nil || line != "go\n" {
		return nil // the parent gave up before starting
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	// Report the jobs handled every few milliseconds ("handled N"), so
	// that the parent need not poll the database for the end of the
	// burn-down (its count of unfinished rows walks the claim index's dead
	// entries and would be charged to the systems).
	var handled atomic.Int64
	var outMu sync.Mutex
	reportDone := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		var last int64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-reportDone:
				return
			case <-t.C:
				if n := handled.Load(); n != last {
					last = n
					outMu.Lock()
					fmt.Printf("handled %d\n", n)
					outMu.Unlock()
				}
			}
		}
	}()
	err = q.work(ctx, func(int64) { handled.Add(1) })
	close(reportDone)
	<-reported
	// The parent reads one more line after closing stdin: what the
	// claims of this process asked for and got (zeros for systems that
	// do not report them).
	var calls, asked, got int64
	if sq, ok := q.(*skipjackQueue); ok {
		calls, asked, got = sq.claimCalls.Load(), sq.claimAsked.Load(), sq.claimGot.Load()
	}
	fmt.Printf("claims %d %d %d\n", calls, asked, got)
	return err
}
