// Command bench measures skipjack against River and two plain-SQL reference
// designs on one PostgreSQL server, in one process run: bulk enqueue
// throughput, burn-down throughput and enqueue->start latency, each the
// median of several runs, every system in a fresh database. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pid distinguishes this process's databases from another run's.
var pid = os.Getpid()

// skipjackSystems returns the skipjack rows. It is set by skipjack.go, which
// is compiled only when the runtime's Worker exists (see README.md).
var skipjackSystems func(o options, logger *slog.Logger) []system

// options are the command-line flags.
type options struct {
	databaseURL      string
	smoke            bool
	runs             int
	jobs             int
	batch            int
	rate             int
	latency          time.Duration
	warmup           time.Duration
	systems          []string
	tunedConcurrency int
	tunedBatch       int
	skipjackConns    int32
	workflows        int
	noMain           bool
	bloat            []int
	snapshot         time.Duration
	notify           time.Duration
	procs            []int
	insert           []int // the insert experiment's sizes
	procsWarm        bool
	procsApart       bool
	idle             int
	idleFor          time.Duration
	heap             int
	cpuProfile       string
	memProfile       string
	verbose          bool
	keepDBs          bool

	child    string // internal: run as a worker process of this system
	childDSN string
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "scenarios" || os.Args[1] == "scenario-worker") {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		var err error
		if os.Args[1] == "scenarios" {
			err = runScenarios(ctx, os.Args[2:], os.Stdout)
		} else {
			err = runScenarioWorker(ctx, os.Args[2:])
		}
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch {
	case o.child == idleChildSkipjack || o.child == idleChildRiver:
		err = runIdleChild(ctx, o)
	case o.child != "":
		err = runChild(ctx, o)
	default:
		err = run(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	defURL := os.Getenv("DATABASE_URL")
	if defURL == "" {
		defURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	fs.StringVar(&o.databaseURL, "database-url", defURL, "server to benchmark on (a maintenance database URL; the bench creates its own databases)")
	fs.BoolVar(&o.smoke, "smoke", false, "tiny sizes for CI: 2000 jobs, 1 run, 2s latency; exits non-zero if any system fails")
	fs.IntVar(&o.runs, "runs", 3, "runs per system; every figure is the median")
	fs.IntVar(&o.jobs, "jobs", 100_000, "jobs per burn-down")
	fs.IntVar(&o.batch, "batch", 5_000, "jobs per bulk enqueue call (River's bench inserts 5000 per call)")
	fs.IntVar(&o.rate, "rate", 500, "latency test: single inserts per second")
	fs.DurationVar(&o.latency, "latency", 10*time.Second, "latency test: measured duration (0 skips the latency test)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "latency test: unmeasured warm-up before it")
	systems := fs.String("systems", "", "comma-separated systems to run (default all): "+strings.Join(allSystemNames(), ","))
	fs.IntVar(&o.tunedConcurrency, "tuned-concurrency", 2000, "skipjack tuned: WorkerConfig.Concurrency (River tuned runs 2000 workers)")
	fs.IntVar(&o.tunedBatch, "tuned-batch", 2000, "skipjack tuned: WorkerConfig.BatchSize")
	conns := fs.Int("skipjack-conns", 20, "skipjack: pool MaxConns (the no-op handler does not use the pool)")
	fs.BoolVar(&o.noMain, "no-main", false, "skip the main table (run only the experiments selected below)")
	bloat := fs.String("bloat", "", "experiment: burn-down with these counts of finished rows kept, e.g. 100000,1000000,5000000")
	fs.DurationVar(&o.snapshot, "snapshot", 0, "experiment: burn-down while a REPEATABLE READ snapshot is held this long, e.g. 60s")
	fs.DurationVar(&o.notify, "notify", 0, "experiment: notify on vs off (skipjack-default vs skipjack-poll): latency and the enqueue rate of 32 concurrent single-row enqueuers, each measured this long, e.g. 5s")
	procs := fs.String("procs", "", "experiment: burn-down with N worker processes for each N given (skipjack-default, skipjack-tuned and river-tuned interleaved; jobs/s and CPU per job), e.g. 1,2,4,8,16")
	fs.BoolVar(&o.procsWarm, "procs-warm", false, "procs experiment: start the clocks (time and CPU) only once every worker process has handled a job, so that the figures leave out connecting (each new server backend costs milliseconds of CPU) and describe processes that were already running when the backlog met them; the jobs handled before are left out of every per-job figure")
	fs.BoolVar(&o.procsApart, "procs-apart", false, "procs experiment: also run every N with each worker process on a queue of its own (its own database, jobs/N jobs): the control in which processes share the machine and the server but no queue")
	fs.IntVar(&o.idle, "idle", 0, "experiment: idle cost of this many skipjack workers (default WorkerConfig) in one process with no jobs, and of one River client with as many queues, e.g. 50")
	fs.DurationVar(&o.idleFor, "idle-for", 30*time.Second, "idle experiment: measured duration (after a 5s settle)")
	insert := fs.String("insert", "", "experiment: one bulk insert call of N jobs for each N given, skipjack's EnqueueMany (COPY) and EnqueueAll beside River's InsertMany and InsertManyFast, e.g. 1,100,10000")
	fs.IntVar(&o.workflows, "workflows", 0, "experiment: burn-down of this many steps as plain jobs, 3-step chains and 10-wide fan-out/fan-in workflows (and plain jobs with the schema's workflow objects dropped), interleaved, e.g. 6000")
	fs.IntVar(&o.heap, "heap", 0, "experiment: Go heap per in-flight job of one worker at this Concurrency (MaxWorkers for River) with handlers blocked, e.g. 1000")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process to this file")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of this process to this file when the run ends")
	fs.BoolVar(&o.verbose, "v", false, "show the systems' warnings (River, skipjack) and progress")
	fs.BoolVar(&o.keepDBs, "keep-dbs", false, "do not drop the benchmark databases")
	fs.StringVar(&o.child, "child", "", "internal: run as a worker process of this system")
	fs.StringVar(&o.childDSN, "child-dsn", "", "internal: the child's database URL")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.skipjackConns = int32(*conns)
	if *systems != "" {
		o.systems = strings.Split(*systems, ",")
	}
	var err error
	if o.bloat, err = parseInts(*bloat); err != nil {
		return o, fmt.Errorf("-bloat: %w", err)
	}
	if o.procs, err = parseInts(*procs); err != nil {
		return o, fmt.Errorf("-procs: %w", err)
	}
	if o.insert, err = parseInts(*insert); err != nil {
		return o, fmt.Errorf("-insert: %w", err)
	}
	if o.smoke {
		o.runs, o.jobs, o.latency, o.warmup = 1, 2_000, 2*time.Second, 500*time.Millisecond
		o.bloat, o.procs, o.snapshot, o.notify = nil, nil, 0, 0
		o.idle, o.heap, o.insert, o.workflows = 0, 0, nil, 0
	}
	if o.idle < 0 || o.heap < 0 || o.idleFor <= 0 {
		return o, errors.New("-idle and -heap must not be negative, -idle-for must be positive")
	}
	if o.runs < 1 || o.jobs < 1 || o.batch < 1 || o.rate < 1 {
		return o, errors.New("-runs, -jobs, -batch and -rate must be positive")
	}
	return o, nil
}

func parseInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// logger returns the logger handed to River and skipjack: errors only,
// unless -v.
func (o options) logger() *slog.Logger {
	level := slog.LevelError
	if o.verbose {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// allSystems returns every system in table order.
func allSystems(o options) []system {
	logger := o.logger()
	var out []system
	if skipjackSystems != nil {
		out = append(out, skipjackSystems(o, logger)...)
	}
	return append(out,
		riverSystem(true, logger),
		riverSystem(false, logger),
		plainSystem(),
		floorSystem(),
	)
}

func allSystemNames() []string {
	var names []string
	for _, s := range allSystems(options{}) {
		names = append(names, s.name)
	}
	return names
}

// selected returns the systems chosen with -systems, in table order.
func selected(o options) ([]system, error) {
	all := allSystems(o)
	if len(o.systems) == 0 {
		return slices.DeleteFunc(slices.Clone(all), func(s system) bool { return s.experimentOnly }), nil
	}
	var out []system
	for _, s := range all {
		if slices.Contains(o.systems, s.name) {
			out = append(out, s)
		}
	}
	for _, n := range o.systems {
		if !slices.ContainsFunc(all, func(s system) bool { return s.name == n }) {
			return nil, fmt.Errorf("unknown system %q (known: %s)", n, strings.Join(allSystemNames(), ", "))
		}
	}
	return out, nil
}

func systemByName(o options, name string) (system, bool) {
	for _, s := range allSystems(o) {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if o.memProfile != "" {
		defer writeAllocProfile(o.memProfile, out)
	}
	systems, err := selected(o)
	if err != nil {
		return err
	}
	if skipjackSystems == nil {
		fmt.Fprintln(out, "note: built without skipjack rows (the runtime's Worker is not available; see README.md)")
	}
	a, err := newAdmin(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer a.close(context.WithoutCancel(ctx))
	b := &bench{o: o, a: a, out: out}
	if settings, err := a.settings(ctx); err == nil {
		fmt.Fprintln(out, "PostgreSQL settings:")
		for _, kv := range settings {
			fmt.Fprintf(out, "  %s = %s\n", kv[0], kv[1])
		}
	} else {
		fmt.Fprintln(out, "note: could not read server settings:", err)
	}

	var failed []string
	if !o.noMain {
		rows := b.mainTable(ctx, systems)
		printTable(out, o, rows)
		for _, r := range rows {
			if len(r.errs) > 0 {
				failed = append(failed, r.sys.name)
			}
		}
	}
	if len(o.bloat) > 0 {
		if err := b.bloat(ctx, systems); err != nil {
			failed = append(failed, "bloat: "+err.Error())
		}
	}
	if o.snapshot > 0 {
		if err := b.snapshotHeld(ctx, systems); err != nil {
			failed = append(failed, "snapshot: "+err.Error())
		}
	}
	if o.notify > 0 {
		if err := b.notifyOnOff(ctx); err != nil {
			failed = append(failed, "notify: "+err.Error())
		}
	}
	if len(o.procs) > 0 {
		if err := b.processes(ctx, systems); err != nil {
			failed = append(failed, "procs: "+err.Error())
		}
	}
	if o.idle > 0 {
		if err := b.idleCost(ctx); err != nil {
			failed = append(failed, "idle: "+err.Error())
		}
	}
	if o.heap > 0 {
		if err := b.heapPerJob(ctx); err != nil {
			failed = append(failed, "heap: "+err.Error())
		}
	}
	if o.workflows > 0 {
		if err := b.workflowThroughput(ctx); err != nil {
			failed = append(failed, "workflows: "+err.Error())
		}
	}
	if len(o.insert) > 0 {
		if err := b.insertSizes(ctx); err != nil {
			failed = append(failed, "insert: "+err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// bench holds what every measurement needs.
type bench struct {
	o   options
	a   *admin
	out io.Writer
}

func (b *bench) logf(format string, args ...any) {
	if b.o.verbose {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// withDB runs f on a fresh database for sys and drops it afterwards.
func (b *bench) withDB(ctx context.Context, sys system, phase string, f func(dsn string) error) error {
	name, dsn, err := b.a.freshDB(ctx, sys.name, phase)
	if err != nil {
		return err
	}
	err = f(dsn)
	if !b.o.keepDBs {
		if derr := b.a.dropDB(context.WithoutCancel(ctx), name); derr != nil && err == nil {
			err = derr
		}
	}
	return err
}

// withDBs runs f with k fresh databases for sys (see withDB).
func (b *bench) withDBs(ctx context.Context, sys system, phase string, k int, f func(dsns []string) error) error {
	var dsns []string
	var each func() error
	each = func() error {
		if len(dsns) == k {
			return f(dsns)
		}
		return b.withDB(ctx, sys, phase, func(dsn string) error {
			dsns = append(dsns, dsn)
			return each()
		})
	}
	return each()
}

// row is one system's line of the main table.
type row struct {
	sys           system
	enqueue, burn []float64
	workerCPU     []float64 // µs per job during the burn-down, this process
	serverCPU     []float64 // µs per job during the burn-down, the rest of the machine
	p50, p95, p99 []float64 // milliseconds
	errs          []error
	samples       int
}

// mainTable measures every system runs times, interleaving systems within a
// run so that machine noise spreads over all of them.
func (b *bench) mainTable(ctx context.Context, systems []system) []*row {
	rows := make([]*row, len(systems))
	for i, s := range systems {
		rows[i] = &row{sys: s}
	}
	for r := range b.o.runs {
		for _, rw := range rows {
			if ctx.Err() != nil {
				rw.errs = append(rw.errs, ctx.Err())
				continue
			}
			s := rw.sys
			err := b.withDB(ctx, s, "burn", func(dsn string) error {
				res, err := measureThroughput(ctx, s, dsn, b.o.jobs, b.o.batch, 0, b.burnTimeout(s))
				if err != nil {
					return err
				}
				rw.enqueue = append(rw.enqueue, res.enqueue)
				rw.burn = append(rw.burn, res.burn)
				rw.workerCPU = append(rw.workerCPU, res.workerCPU)
				rw.serverCPU = append(rw.serverCPU, res.serverCPU)
				b.logf("run %d %s: enqueue %.0f/s burn-down %.0f/s, CPU per job %.1f µs worker, %.1f µs server",
					r+1, s.name, res.enqueue, res.burn, res.workerCPU, res.serverCPU)
				return nil
			})
			if err != nil {
				rw.errs = append(rw.errs, fmt.Errorf("run %d burn-down: %w", r+1, err))
				fmt.Fprintf(os.Stderr, "bench: %s run %d burn-down: %v\n", s.name, r+1, err)
			}
			if b.o.latency <= 0 {
				continue
			}
			err = b.withDB(ctx, s, "lat", func(dsn string) error {
				l, err := measureLatency(ctx, s, dsn, b.o.rate, b.o.warmup, b.o.latency)
				if err != nil {
					return err
				}
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				rw.p50 = append(rw.p50, ms(l.p50))
				rw.p95 = append(rw.p95, ms(l.p95))
				rw.p99 = append(rw.p99, ms(l.p99))
				rw.samples = l.samples
				b.logf("run %d %s: latency p50 %v p95 %v p99 %v", r+1, s.name, l.p50, l.p95, l.p99)
				return nil
			})
			if err != nil {
				rw.errs = append(rw.errs, fmt.Errorf("run %d latency: %w", r+1, err))
				fmt.Fprintf(os.Stderr, "bench: %s run %d latency: %v\n", s.name, r+1, err)
			}
		}
	}
	return rows
}

// burnTimeout bounds one burn-down: generous for the slowest design (River
// with its defaults works about 1000 jobs/s here).
func (b *bench) burnTimeout(system) time.Duration {
	if b.o.smoke {
		return 30 * time.Second
	}
	return 60*time.Second + time.Duration(b.o.jobs)*5*time.Millisecond
}

// writeAllocProfile writes the allocation profile of this process to path;
// a failure is reported on out, since the benchmark's results stand.
func writeAllocProfile(path string, out io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(out, "memprofile: %v\n", err)
	}
}
