package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The -child values of the idle experiment's worker processes.
const (
	idleChildSkipjack = "idle-skipjack"
	idleChildRiver    = "idle-river"
)

// idleSettle is how long the idle experiment lets the workers start before
// it measures: long enough for start-up statements to be over and for the
// backends to have flushed their statistics of them (an idle backend
// flushes at most every 1s, and may wait up to 10s).
const idleSettle = 15 * time.Second

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the bench runs on).
const clockTicks = 100

// skipjackIdleWorkers runs n skipjack workers with the default WorkerConfig
// on pool until ctx ends. It is set by skipjack.go.
var skipjackIdleWorkers func(ctx context.Context, pool *pgxpool.Pool, n int, logger *slog.Logger) error

// skipjackMigrate creates the bench's skipjack queues. It is set by
// skipjack.go.
var skipjackMigrate func(ctx context.Context, pool *pgxpool.Pool) error

// idleSystem is one contender of the idle experiment.
type idleSystem struct {
	name    string
	child   string
	what    string
	migrate func(ctx context.Context, pool *pgxpool.Pool) error
}

// idleResult is what one idle run measured over its window.
type idleResult struct {
	window         time.Duration
	statements     int64   // sent by the worker process (its pgx tracer)
	xacts          int64   // xact_commit+xact_rollback of the database
	tupReturned    int64   // tup_returned of the database
	backendCPU     float64 // seconds, client backends of the database
	workerCPU      float64 // seconds, the worker process
	connsPeak      int     // client backends, most seen at once (from the start)
	connsEnd       int     // client backends at the end of the window
	listeners      int     // client backends whose last statement was LISTEN or a ping, at the end
	goroutines     int     // of the worker process, at the end
	rssMiB         float64 // of the worker process, at the end
	backendsExited int     // client backends that ended during the window
}

// idleCost starts -idle skipjack workers (default WorkerConfig, no jobs) in
// one child process, and then one River client with -idle queues, and
// measures over -idle-for what they cost while nothing is enqueued.
func (b *bench) idleCost(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	n := b.o.idle
	systems := []idleSystem{
		{name: "skipjack", child: idleChildSkipjack, migrate: skipjackMigrate,
			what: fmt.Sprintf("%d workers, `WorkerConfig{}`, alternating queues noop and kept", n)},
		{name: "river", child: idleChildRiver, migrate: migrateRiver,
			what: fmt.Sprintf("1 client, %d queues (MaxWorkers 100 each), River's defaults", n)},
	}
	if skipjackIdleWorkers == nil {
		systems = systems[1:]
	}
	fmt.Fprintf(b.out, "\nIdle cost: no jobs, measured for %v after %v of start-up, each system in its own worker process and fresh database (%d run(s), median)\n\n", b.o.idleFor, idleSettle, b.o.runs)
	fmt.Fprintln(b.out, "| system | what runs | statements/s (client) | xacts/s (server) | tup_returned/s | PG backend CPU % of a core | worker process CPU % of a core | connections peak | connections at end | LISTEN connections | goroutines | worker RSS MiB |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	results := make(map[string][]idleResult)
	var errs []error
	for r := range b.o.runs {
		for _, s := range systems {
			err := b.withDB(ctx, system{name: "idle_" + s.name}, "idle", func(dsn string) error {
				res, err := b.idleRun(ctx, exe, s, dsn)
				if err != nil {
					return err
				}
				b.logf("idle %s run %d: %+v", s.name, r+1, res)
				results[s.name] = append(results[s.name], res)
				return nil
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			}
		}
	}
	for _, s := range systems {
		rs := results[s.name]
		if len(rs) == 0 {
			continue
		}
		per := func(f func(idleResult) float64) float64 {
			xs := make([]float64, len(rs))
			for i, x := range rs {
				xs[i] = f(x) / x.window.Seconds()
			}
			return median(xs)
		}
		med := func(f func(idleResult) float64) float64 {
			xs := make([]float64, len(rs))
			for i, x := range rs {
				xs[i] = f(x)
			}
			return median(xs)
		}
		fmt.Fprintf(b.out, "| %s | %s | %.1f | %.1f | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f | %.1f |\n", s.name, s.what,
			per(func(x idleResult) float64 { return float64(x.statements) }),
			per(func(x idleResult) float64 { return float64(x.xacts) }),
			per(func(x idleResult) float64 { return float64(x.tupReturned) }),
			100*per(func(x idleResult) float64 { return x.backendCPU }),
			100*per(func(x idleResult) float64 { return x.workerCPU }),
			med(func(x idleResult) float64 { return float64(x.connsPeak) }),
			med(func(x idleResult) float64 { return float64(x.connsEnd) }),
			med(func(x idleResult) float64 { return float64(x.listeners) }),
			med(func(x idleResult) float64 { return float64(x.goroutines) }),
			med(func(x idleResult) float64 { return x.rssMiB }))
	}
	fmt.Fprintln(b.out)
	fmt.Fprintln(b.out, "statements/s: every statement the worker process sent (a pgx QueryTracer on the pool, which the control pools and the listener copy); xacts/s: xact_commit+xact_rollback of the database in pg_stat_database (backends flush these at most once a second when idle, so expect ±1 s of a window's worth); CPU: utime+stime deltas from /proc/<pid>/stat of the database's client backends and of the worker process; LISTEN connections: client backends whose last statement is LISTEN or pgx's \"-- ping\".")
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// idleRun runs one idle measurement of s on the fresh database dsn.
func (b *bench) idleRun(ctx context.Context, exe string, s idleSystem, dsn string) (idleResult, error) {
	var res idleResult
	u, err := url.Parse(dsn)
	if err != nil {
		return res, fmt.Errorf("parse dsn: %w", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	pool, err := openPool(ctx, dsn, 2)
	if err != nil {
		return res, err
	}
	err = s.migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	if s.child == idleChildSkipjack {
		// Every worker warms two control connections at start, and its
		// first rescue, at once, may take a third.
		if err := b.a.checkFreeConns(ctx, 3*b.o.idle+8); err != nil {
			return res, err
		}
	}

	c, err := startChild(ctx, exe, s.child, dsn, b.o.verbose, "-idle", strconv.Itoa(b.o.idle))
	if err != nil {
		return res, err
	}
	cmd, stdin, out := c.cmd, c.stdin, c.out
	exited := make(chan error, 1)
	defer func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	}()
	if err := c.awaitReady(); err != nil {
		go func() { exited <- cmd.Wait() }()
		return res, err
	}
	// ask returns the child's statement count and goroutines.
	ask := func() (int64, int, error) {
		if _, err := io.WriteString(stdin, "sample\n"); err != nil {
			return 0, 0, fmt.Errorf("ask child: %w", err)
		}
		line, err := out.ReadString('\n')
		if err != nil {
			return 0, 0, fmt.Errorf("read child: %w", err)
		}
		var stmts int64
		var gs int
		if _, err := fmt.Sscanf(line, "%d %d", &stmts, &gs); err != nil {
			return 0, 0, fmt.Errorf("child said %q: %w", line, err)
		}
		return stmts, gs, nil
	}
	childPid := cmd.Process.Pid

	// sample reads the database's client backends and their CPU, and
	// updates the peak; cpu maps a backend's pid to the CPU it had when
	// first seen in the window (0 for backends that started in it).
	last := make(map[int]float64)
	sample := func() (map[int]float64, error) {
		bs, err := b.a.backends(ctx, db)
		if err != nil {
			return nil, err
		}
		res.connsPeak = max(res.connsPeak, len(bs))
		res.connsEnd = len(bs)
		res.listeners = 0
		now := make(map[int]float64, len(bs))
		for _, be := range bs {
			if strings.HasPrefix(be.query, "LISTEN") || strings.HasPrefix(be.query, "-- ping") {
				res.listeners++
			}
			if c, err := procCPU(be.pid); err == nil {
				now[be.pid] = c
				last[be.pid] = c
			}
		}
		return now, nil
	}
	settleEnd := time.Now().Add(idleSettle)
	for time.Now().Before(settleEnd) {
		if _, err := sample(); err != nil {
			return res, err
		}
		time.Sleep(250 * time.Millisecond)
	}

	startCPU, err := sample()
	if err != nil {
		return res, err
	}
	for pid, c := range startCPU {
		last[pid] = c
	}
	startXacts, startTup, err := b.a.dbStats(ctx, db)
	if err != nil {
		return res, err
	}
	startWorker, err := procCPU(childPid)
	if err != nil {
		return res, fmt.Errorf("worker process CPU: %w", err)
	}
	startStmts, _, err := ask()
	if err != nil {
		return res, err
	}
	start := time.Now()
	end := start.Add(b.o.idleFor)
	for time.Now().Before(end) {
		time.Sleep(min(time.Second, time.Until(end)))
		if _, err := sample(); err != nil {
			return res, err
		}
	}
	endStmts, gs, err := ask()
	if err != nil {
		return res, err
	}
	res.window = time.Since(start)
	endWorker, err := procCPU(childPid)
	if err != nil {
		return res, fmt.Errorf("worker process CPU: %w", err)
	}
	endXacts, endTup, err := b.a.dbStats(ctx, db)
	if err != nil {
		return res, err
	}
	endCPU, err := sample()
	if err != nil {
		return res, err
	}
	for pid, c := range last {
		if c0, ok := startCPU[pid]; ok {
			res.backendCPU += c - c0
		} else {
			res.backendCPU += c // started during the window
		}
		if _, ok := endCPU[pid]; !ok {
			res.backendsExited++
		}
	}
	res.statements = endStmts - startStmts
	res.goroutines = gs
	res.rssMiB, _ = procRSS(childPid)
	res.xacts = endXacts - startXacts
	res.tupReturned = endTup - startTup
	res.workerCPU = endWorker - startWorker
	_ = stdin.Close()
	go func() { exited <- cmd.Wait() }()
	return res, nil
}

// procCPU returns the user+system CPU seconds of process pid so far.
func procCPU(pid int) (float64, error) {
	st, err := readProcStat(pid)
	return st.cpu, err
}

// procStat is what the bench reads of /proc/<pid>/stat.
type procStat struct {
	cpu         float64 // user+system CPU seconds so far
	minorFaults int64   // minor page faults so far: for a server backend, mostly first touches of shared buffers it had not mapped yet
}

// readProcStat reads process pid's CPU time (fields 14 and 15 of
// /proc/<pid>/stat) and minor page faults (field 10) in one read.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after its
	// closing parenthesis are space-separated, starting with field 3.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat of %d: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("stat of %d: %d fields", pid, len(f))
	}
	minflt, err1 := strconv.ParseInt(f[7], 10, 64)
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("stat of %d: %w", pid, err)
	}
	return procStat{cpu: float64(ut+st) / clockTicks, minorFaults: minflt}, nil
}

// procRSS returns the resident set size of process pid in MiB.
func procRSS(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb); err != nil {
				return 0, fmt.Errorf("status of %d: VmRSS %q: %w", pid, rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("status of %d: no VmRSS", pid)
}

// stmtCounter is a pgx QueryTracer and BatchTracer that counts the
// statements sent.
type stmtCounter struct{ n atomic.Int64 }

// TraceQueryStart implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// runIdleChild is a worker process of the idle experiment: it starts the
// idle workers, says "ready", answers every "sample" line with its
// statement count and goroutine count, and stops when stdin closes.
func runIdleChild(ctx context.Context, o options) error {
	cfg, err := pgxpool.ParseConfig(o.childDSN)
	if err != nil {
		return fmt.Errorf("parse pool config: %w", err)
	}
	// The handler pool: the idle workers never use it (River runs on it,
	// with pgxpool's default size, as in the main table).
	if o.child == idleChildSkipjack {
		cfg.MaxConns = 4
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "skipjack-bench"
	counter := &stmtCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer pool.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	switch o.child {
	case idleChildSkipjack:
		if skipjackIdleWorkers == nil {
			return errors.New("built without skipjack")
		}
		go func() { done <- skipjackIdleWorkers(ctx, pool, o.idle, o.logger()) }()
	default:
		go func() { done <- runRiverIdle(ctx, pool, o.idle, o.logger()) }()
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "sample" {
			fmt.Printf("%d %d\n", counter.n.Load(), runtime.NumGoroutine())
		}
	}
	cancel()
	return <-done
}
