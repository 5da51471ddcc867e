package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/skipjack-dev/skipjack/bench/internal/jobs"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/capped"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/kept"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/noop"
)

// The phases of the scenario runner (see README.md, "Scenarios").
const (
	phClean       = "clean"
	phIdleInTx    = "idle-in-tx"
	phReaders     = "active-readers"
	phCapacity    = "capacity"
	phHighLoad    = "high-load"
	phRecovery    = "recovery"
	phBackendKill = "backend-kill"
	phPoolExhaust = "pool-exhaustion"
	phPGRestart   = "postgres-restart"
	phKillWorker  = "kill-worker"
	phStartWorker = "start-worker"
	phMixed       = "mixed-queue"
)

var knownPhases = []string{phClean, phIdleInTx, phReaders, phCapacity, phHighLoad, phRecovery,
	phBackendKill, phPoolExhaust, phPGRestart, phKillWorker, phStartWorker, phMixed}

// defaultPhases is the full run: every stress phase is followed by what
// shows whether the system comes back.
const defaultPhases = "clean,idle-in-tx,recovery,active-readers,recovery,capacity,high-load,recovery," +
	"backend-kill,recovery,pool-exhaustion,recovery,postgres-restart,recovery,kill-worker,start-worker,mixed-queue"

// smokePhases is the CI version: seconds per phase, the faults that can
// lose or double a job.
const smokePhases = "clean=1s,idle-in-tx=2s,backend-kill=2s,postgres-restart=3s,mixed-queue=1s"

// faultAppName marks the runner's own adversarial sessions (the held
// transaction, the readers, the held connections), which the wait-event
// histogram leaves out.
const faultAppName = "adversity-fault"

// phaseSpec is one phase of a run.
type phaseSpec struct {
	name string
	dur  time.Duration
}

// scenarioOptions are the flags of `bench scenarios`.
type scenarioOptions struct {
	databaseURL string
	ownCluster  bool
	pgBin       string
	pgOpts      string
	systems     []string
	phases      []phaseSpec
	rate        int
	producers   int
	conns       int
	readers     int
	killEvery   time.Duration
	drain       time.Duration
	warmup      time.Duration
	outDir      string
	reportFrom  string
	smoke       bool
	verbose     bool
	keepDBs     bool
}

func parseScenarioFlags(args []string) (scenarioOptions, error) {
	var o scenarioOptions
	fs := flag.NewFlagSet("scenarios", flag.ContinueOnError)
	fs.StringVar(&o.databaseURL, "database-url", "", "server to run on (a maintenance database URL) instead of a cluster of the runner's own; postgres-restart and pool-exhaustion are skipped there")
	fs.BoolVar(&o.ownCluster, "own-cluster", true, "initdb and start a throwaway cluster (PostgreSQL's defaults, fsync off) and run there; required by postgres-restart and pool-exhaustion")
	fs.StringVar(&o.pgBin, "pg-bin", "", "folder of initdb and pg_ctl (default: PATH, then /usr/lib/postgresql/15/bin)")
	fs.StringVar(&o.pgOpts, "pg-opts", "", "extra server options for the own cluster, e.g. '-c max_connections=200'")
	systems := fs.String("systems", strings.Join(scenarioSystems, ","), "systems to run, one after another")
	phases := fs.String("phases", defaultPhases, "phases in order, each name or name=duration")
	phaseDur := fs.Duration("phase-dur", 60*time.Second, "duration of a phase without =duration")
	recoveryDur := fs.Duration("recovery-dur", 30*time.Second, "duration of a recovery phase without =duration")
	fs.IntVar(&o.rate, "rate", 1000, "single-row enqueues per second (high-load: 1.5x the capacity phase's completed/s)")
	fs.IntVar(&o.producers, "producers", 8, "producer goroutines (web handlers), sharing the rate")
	fs.IntVar(&o.conns, "conns", 30, "pool size of the worker process and of the producers")
	fs.IntVar(&o.readers, "readers", 4, "active-readers: REPEATABLE READ sessions scanning the queue table")
	fs.DurationVar(&o.killEvery, "kill-every", 500*time.Millisecond, "backend-kill: terminate a random backend of the worker process this often")
	fs.DurationVar(&o.warmup, "warmup", 10*time.Second, "producers and the worker run this long before the first phase (not measured: connections, caches, plans)")
	fs.DurationVar(&o.drain, "drain", 120*time.Second, "after the last phase: wait this long at most for every job to finish")
	fs.StringVar(&o.outDir, "out", "", "folder for samples.jsonl, summary.md, summary.json and the SVG plots (default: a new temporary folder)")
	fs.StringVar(&o.reportFrom, "report", "", "only rewrite the summary and plots of an earlier run from this folder's summary.json and samples.jsonl")
	fs.BoolVar(&o.smoke, "smoke", false, "CI: "+smokePhases+" at 200 jobs/s, exit 1 on a lost or doubled job")
	fs.BoolVar(&o.verbose, "v", false, "progress and the systems' warnings on stderr")
	fs.BoolVar(&o.keepDBs, "keep-dbs", false, "do not drop the databases")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.databaseURL != "" {
		o.ownCluster = false
	}
	if o.smoke {
		*phases = smokePhases
		o.rate, o.drain, o.warmup = 200, 90*time.Second, time.Second
	}
	o.systems = strings.Split(*systems, ",")
	for _, s := range o.systems {
		if !contains(scenarioSystems, s) {
			return o, fmt.Errorf("unknown system %q (known: %s)", s, strings.Join(scenarioSystems, ", "))
		}
	}
	for _, f := range strings.Split(*phases, ",") {
		name, d, hasDur := strings.Cut(strings.TrimSpace(f), "=")
		if !contains(knownPhases, name) {
			return o, fmt.Errorf("unknown phase %q (known: %s)", name, strings.Join(knownPhases, ", "))
		}
		p := phaseSpec{name: name, dur: *phaseDur}
		if name == phRecovery {
			p.dur = *recoveryDur
		}
		if hasDur {
			dur, err := time.ParseDuration(d)
			if err != nil || dur <= 0 {
				return o, fmt.Errorf("phase %s: bad duration %q", name, d)
			}
			p.dur = dur
		}
		o.phases = append(o.phases, p)
	}
	if o.rate < 1 || o.producers < 1 || o.conns < 2 || o.killEvery <= 0 {
		return o, errors.New("-rate, -producers, -conns and -kill-every must be positive")
	}
	return o, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// runScenarios is `bench scenarios`: every system in turn, each in a fresh
// database, through every phase.
func runScenarios(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseScenarioFlags(args)
	if err != nil {
		return err
	}
	if o.reportFrom != "" {
		return rewriteScenarioReport(o, out)
	}
	if o.outDir == "" {
		if o.outDir, err = os.MkdirTemp("", "skjadversity-out-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	maintURL := o.databaseURL
	var cluster *ownCluster
	if o.ownCluster {
		bin, err := findPGBin(o.pgBin)
		if err != nil {
			return err
		}
		if cluster, err = startOwnCluster(bin, o.pgOpts); err != nil {
			return err
		}
		defer cluster.stop()
		maintURL = cluster.url()
		fmt.Fprintf(out, "own cluster on 127.0.0.1:%d (%s)\n", cluster.port, cluster.serverOptions())
	} else if maintURL == "" {
		maintURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	maint, err := pgxpool.New(ctx, maintURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", maintURL, err)
	}
	defer maint.Close()
	samples, err := os.Create(filepath.Join(o.outDir, "samples.jsonl"))
	if err != nil {
		return err
	}
	defer samples.Close()
	var results []*systemResult
	var failed []string
	for _, sys := range o.systems {
		r := &sysRun{o: &o, sys: sys, exe: exe, cluster: cluster, maint: maint, maintURL: maintURL, samplesOut: samples}
		res, err := r.run(ctx)
		if err != nil {
			failed = append(failed, sys+": "+err.Error())
			fmt.Fprintf(os.Stderr, "bench scenarios: %s: %v\n", sys, err)
		}
		if res != nil {
			results = append(results, res)
			if o.smoke && (res.Lost > 0 || res.Twice > 0 || res.Failed > 0) {
				failed = append(failed, fmt.Sprintf("%s: %d lost, %d run twice, %d failed", sys, res.Lost, res.Twice, res.Failed))
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := writeScenarioReport(o, results, out); err != nil {
		failed = append(failed, "report: "+err.Error())
	}
	fmt.Fprintf(out, "\nraw output in %s\n", o.outDir)
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// sysRun is one system's pass through the phases.
type sysRun struct {
	o          *scenarioOptions
	sys        string
	exe        string
	cluster    *ownCluster
	maint      *pgxpool.Pool
	maintURL   string
	samplesOut io.Writer

	db, dsn string
	pool    *pgxpool.Pool // producers and the sampler
	enqueue func(ctx context.Context, queue int, seq int64) error
	table   string // the queue table whose size and dead tuples are sampled
	start   time.Time

	seqs    seqStore
	nextSeq atomic.Int64
	enqOK   atomic.Int64
	enqErr  atomic.Int64
	phase   atomic.Int32
	target  atomic.Int64 // enqueues per second; 0: as fast as the producers can
	mixed   atomic.Bool

	mu          sync.Mutex // guards what the worker's lines update
	completed   int64      // distinct jobs reported completed
	dupReports  int64
	handlerErrs int64
	secHist     *latencyHist // pickups reported this second
	phaseHist   []*latencyHist
	faultEnd    []time.Time // per phase, zero when none
	resume      []time.Duration
	resumed     []bool

	worker  *workerProc
	phases  []*phaseResult
	samples []scenarioSample
}

// systemResult is one system's run: its phases and the final accounting.
type systemResult struct {
	System      string           `json:"system"`
	Phases      []*phaseResult   `json:"phases"`
	Enqueued    int64            `json:"enqueued"`
	EnqueueErrs int64            `json:"enqueue_errors"`
	Lost        int64            `json:"lost"`
	Twice       int64            `json:"run_twice"`
	Ambiguous   int64            `json:"ambiguous_enqueues_run"`
	Failed      int64            `json:"failed"`
	Unfinished  int64            `json:"unfinished_after_drain"`
	HandlerErrs int64            `json:"handler_errors"`
	DrainTook   float64          `json:"final_drain_s"`
	Samples     []scenarioSample `json:"-"`
}

// phaseResult is one phase's figures for one system.
type phaseResult struct {
	Index         int     `json:"index"`
	Name          string  `json:"phase"`
	Seconds       float64 `json:"seconds"`
	Target        int64   `json:"target_rate"`
	Enqueued      int64   `json:"enqueued"`
	EnqueueErrs   int64   `json:"enqueue_errors"`
	Completed     int64   `json:"completed"`
	P50, P95, P99 float64 `json:"-"`
	P50ms         float64 `json:"p50_ms"`
	P95ms         float64 `json:"p95_ms"`
	P99ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	Backlog       int64   `json:"backlog_end"`
	DeadTuples    int64   `json:"dead_tuples_end"`
	TableBytes    int64   `json:"table_bytes_end"`
	IndexBytes    int64   `json:"index_bytes_end"`
	// From pg_stat_statements (when the server preloads it): the claim
	// statements of the phase (skipjack's Claim, River's
	// JobGetAvailable), the jobs they took and the shared buffers they
	// touched.
	Claims      int64          `json:"claims"`
	ClaimedJobs int64          `json:"claimed_jobs"`
	ClaimBufs   int64          `json:"claim_buffers"`
	Waits       map[string]int `json:"waits"`
	DrainS      float64        `json:"backlog_le_1s_after_s"` // -1: never within the phase
	ResumeMs    float64        `json:"resume_ms"`             // -1: no fault end, or no completion after it
	Lost        int64          `json:"lost"`
	Twice       int64          `json:"run_twice"`
	Note        string         `json:"note,omitempty"`

	start, end        time.Time
	enq0, err0, done0 int64
}

// scenarioSample is one second of one system's run, a line of samples.jsonl.
type scenarioSample struct {
	System     string         `json:"system"`
	T          float64        `json:"t"`
	Phase      string         `json:"phase"`
	PhaseIndex int            `json:"phase_index"`
	Enqueued   int64          `json:"enqueued"`
	EnqErrs    int64          `json:"enqueue_errors"`
	Completed  int64          `json:"completed"`
	P50ms      float64        `json:"p50_ms"`
	P99ms      float64        `json:"p99_ms"`
	Backlog    int64          `json:"backlog"`
	Dead       int64          `json:"dead_tuples"`
	Live       int64          `json:"live_tuples"`
	TableBytes int64          `json:"table_bytes"`
	IndexBytes int64          `json:"index_bytes"`
	Waits      map[string]int `json:"waits,omitempty"`
	Load1      string         `json:"load1"`
}

func (r *sysRun) logf(format string, args ...any) {
	if r.o.verbose {
		fmt.Fprintf(os.Stderr, "%s %s "+format+"\n", append([]any{time.Now().Format("15:04:05"), r.sys}, args...)...)
	}
}

// run sets up the system's database, starts its worker process and the
// producers, runs every phase, drains and accounts for every job.
func (r *sysRun) run(ctx context.Context) (*systemResult, error) {
	prefix := "skjadversity_"
	r.db = fmt.Sprintf("%s%s_%d", prefix, strings.ReplaceAll(r.sys, "-", "_"), pid)
	if _, err := r.maint.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{r.db}.Sanitize()+" WITH (FORCE)"); err != nil {
		return nil, fmt.Errorf("drop database: %w", err)
	}
	if _, err := r.maint.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{r.db}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	if !r.o.keepDBs {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_, _ = r.maint.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{r.db}.Sanitize()+" WITH (FORCE)")
		}()
	}
	r.dsn = withDatabase(r.maintURL, r.db)
	cfg, err := pgxpool.ParseConfig(r.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(r.o.producers + 4)
	cfg.ConnConfig.RuntimeParams["application_name"] = "adversity-producer"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "10s"
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	defer r.pool.Close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	n := len(r.o.phases)
	r.phaseHist = make([]*latencyHist, n)
	for i := range r.phaseHist {
		r.phaseHist[i] = newLatencyHist()
	}
	r.secHist = newLatencyHist()
	r.faultEnd, r.resume, r.resumed = make([]time.Time, n), make([]time.Duration, n), make([]bool, n)

	if err := r.startWorker(ctx); err != nil {
		return nil, err
	}
	defer func() { r.worker.stop() }()

	r.start = time.Now()
	r.target.Store(int64(r.o.rate))
	// Jobs enqueued in the warm-up belong to no phase (index n).
	r.phase.Store(int32(n))
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var pwg sync.WaitGroup
	for g := range r.o.producers {
		pwg.Go(func() { r.produce(pctx, g) })
	}
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	var swg sync.WaitGroup
	swg.Go(func() { r.sampleLoop(sctx) })

	select {
	case <-ctx.Done():
	case <-time.After(r.o.warmup):
	}
	var capacity float64
	for i, ph := range r.o.phases {
		if ctx.Err() != nil {
			break
		}
		switch ph.name {
		case phCapacity:
			r.target.Store(0)
		case phHighLoad:
			t := int64(1.5 * float64(r.o.rate))
			if capacity > 0 {
				t = int64(1.5 * capacity)
			}
			r.target.Store(t)
		default:
			r.target.Store(int64(r.o.rate))
		}
		r.mixed.Store(ph.name == phMixed)
		res := r.beginPhase(i, ph)
		r.logf("phase %d %s for %v at %d/s", i, ph.name, ph.dur, r.target.Load())
		actx, cancel := context.WithTimeout(ctx, ph.dur)
		note, err := r.fault(actx, i, ph)
		<-actx.Done()
		cancel()
		if err != nil {
			note = strings.TrimSpace(note + " fault failed: " + err.Error())
			r.logf("phase %s: %v", ph.name, err)
		}
		r.endPhase(ctx, res, note)
		if ph.name == phCapacity {
			capacity = float64(res.Completed) / res.Seconds
		}
	}
	stopProducers()
	pwg.Wait()
	if r.worker.exited() {
		// A run that ends on kill-worker still drains.
		if err := r.startWorker(ctx); err != nil {
			return nil, err
		}
	}
	drainStart := time.Now()
	unfinished, derr := r.waitDrained(ctx)
	drainTook := time.Since(drainStart)
	time.Sleep(1100 * time.Millisecond) // one more sample of the idle end
	stopSampler()
	swg.Wait()
	r.worker.stop()

	res, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	res.Unfinished, res.DrainTook = unfinished, drainTook.Seconds()
	if derr != nil {
		r.logf("drain: %v", derr)
	}
	return res, nil
}

// withDatabase returns u with its database replaced by db.
func withDatabase(u, db string) string {
	base, query, _ := strings.Cut(u, "?")
	i := strings.LastIndexByte(base, '/')
	s := base[:i+1] + db
	if query != "" {
		s += "?" + query
	}
	return s
}

// setup migrates the system's tables and the effects table and binds the
// producers' enqueue function.
func (r *sysRun) setup(ctx context.Context) error {
	// Claim buffers per phase, where the server preloads the extension.
	_, _ = r.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	if _, err := r.pool.Exec(ctx, `CREATE TABLE `+effectsTable+` (seq bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fmt.Errorf("create effects table: %w", err)
	}
	switch r.sys {
	case scenRiverTuned:
		if err := migrateRiver(ctx, r.pool); err != nil {
			return err
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverArgs]) error { return nil }))
		client, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{Workers: workers, Logger: quietLogger(r.o.verbose)})
		if err != nil {
			return fmt.Errorf("river insert client: %w", err)
		}
		r.table = "river_job"
		r.enqueue = func(ctx context.Context, q int, seq int64) error {
			_, err := client.Insert(ctx, riverArgs{N: seq, Label: "adversity"}, &river.InsertOpts{Queue: riverMixedQueues[q]})
			return err
		}
	default:
		if err := jobs.Migrate(ctx, r.pool); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		r.table = `"skipjack"."noop"`
		r.enqueue = func(ctx context.Context, q int, seq int64) error {
			p := payload{N: seq, Label: "adversity"}
			var err error
			switch q {
			case 1:
				_, err = kept.Enqueue(ctx, r.pool, kept.Payload(p))
			case 2:
				_, err = capped.Enqueue(ctx, r.pool, capped.Payload(p))
			default:
				_, err = noop.Enqueue(ctx, r.pool, noop.Payload(p))
			}
			return err
		}
	}
	return nil
}

// produce is one producer goroutine: single-row enqueues at its share of
// the target rate (open loop: a slot missed by more than a second is
// dropped, as a web request that failed is not retried later), or as fast
// as it can when the target is 0.
func (r *sysRun) produce(ctx context.Context, g int) {
	var next time.Time
	lastTarget := int64(-1)
	for ctx.Err() == nil {
		target := r.target.Load()
		if target != lastTarget {
			lastTarget, next = target, time.Now()
		}
		if target > 0 {
			interval := time.Duration(float64(time.Second) * float64(r.o.producers) / float64(target))
			now := time.Now()
			if next.Before(now.Add(-time.Second)) {
				next = now
			}
			if d := next.Sub(now); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			next = next.Add(interval)
		}
		seq := r.nextSeq.Add(1)
		q := 0
		if r.mixed.Load() {
			q = int(seq % 3)
		}
		r.seqs.setEnqueue(seq, time.Now().UnixNano(), r.phase.Load())
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.enqueue(ectx, q, seq)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.enqErr.Add(1)
			time.Sleep(10 * time.Millisecond) // a server that is down refuses at once
			continue
		}
		r.seqs.setOK(seq)
		r.enqOK.Add(1)
	}
}

// beginPhase starts phase i's bookkeeping.
func (r *sysRun) beginPhase(i int, ph phaseSpec) *phaseResult {
	r.mu.Lock()
	done := r.completed
	r.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, _ = r.pool.Exec(rctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = $1), 0)`, r.db)
	cancel()
	res := &phaseResult{Index: i, Name: ph.name, start: time.Now(), enq0: r.enqOK.Load(), err0: r.enqErr.Load(), done0: done, Target: r.target.Load()}
	r.phase.Store(int32(i))
	r.phases = append(r.phases, res)
	return res
}

// endPhase records the phase's figures at its end.
func (r *sysRun) endPhase(ctx context.Context, res *phaseResult, note string) {
	res.end = time.Now()
	res.Seconds = res.end.Sub(res.start).Seconds()
	r.mu.Lock()
	done := r.completed
	r.mu.Unlock()
	enq := r.enqOK.Load()
	res.Enqueued, res.EnqueueErrs, res.Completed = enq-res.enq0, r.enqErr.Load()-res.err0, done-res.done0
	res.Backlog = max(0, enq-done)
	st := r.tableStats(ctx)
	res.DeadTuples, res.TableBytes, res.IndexBytes = st.dead, st.table, st.index
	res.Note = note
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_ = r.pool.QueryRow(cctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(rows), 0)::bigint,
		coalesce(sum(shared_blks_hit + shared_blks_read), 0)::bigint
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		  AND query ~ 'name: (Claim|ClaimFrom|JobGetAvailable) '`, r.db).Scan(&res.Claims, &res.ClaimedJobs, &res.ClaimBufs)
}

// fault runs phase i's adversity until ctx ends (or, for one-off faults,
// returns at once) and returns a note for the table.
func (r *sysRun) fault(ctx context.Context, i int, ph phaseSpec) (string, error) {
	switch ph.name {
	case phIdleInTx:
		conn, err := r.faultConn(ctx)
		if err != nil {
			return "", err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var xid int64
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			return "", err
		}
		if err := conn.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
			return "", err
		}
		<-ctx.Done()
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Sprintf("xid %d held", xid), nil
	case phReaders:
		var wg sync.WaitGroup
		var scans atomic.Int64
		for range r.o.readers {
			wg.Go(func() {
				conn, err := r.faultConn(ctx)
				if err != nil {
					return
				}
				defer conn.Close(context.WithoutCancel(ctx))
				if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
					return
				}
				for ctx.Err() == nil {
					var n int64
					if conn.QueryRow(ctx, "SELECT count(*) FROM "+r.table).Scan(&n) == nil {
						scans.Add(1)
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
		}
		wg.Wait()
		return fmt.Sprintf("%d scans", scans.Load()), nil
	case phBackendKill:
		t := time.NewTicker(r.o.killEvery)
		defer t.Stop()
		kills := 0
		for {
			select {
			case <-ctx.Done():
				r.setFaultEnd(i, time.Now())
				return fmt.Sprintf("%d backends terminated", kills), nil
			case <-t.C:
				var ok bool
				err := r.pool.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM (
					SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2
					ORDER BY random() LIMIT 1) s`, r.db, workerAppName).Scan(&ok)
				if err == nil && ok {
					kills++
				}
			}
		}
	case phPoolExhaust:
		if r.cluster == nil {
			return "skipped: not on an own cluster", nil
		}
		var held []*pgx.Conn
		for len(held) < 2000 {
			c, err := r.faultConn(ctx)
			if err != nil {
				break
			}
			held = append(held, c)
		}
		<-ctx.Done()
		for _, c := range held {
			c.Close(context.WithoutCancel(ctx))
		}
		r.setFaultEnd(i, time.Now())
		return fmt.Sprintf("%d connections held (the server's every free slot)", len(held)), nil
	case phPGRestart:
		if r.cluster == nil {
			return "skipped: not on an own cluster", nil
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(ph.dur / 4):
		}
		t0 := time.Now()
		err := r.cluster.restart()
		r.setFaultEnd(i, time.Now())
		return fmt.Sprintf("restart took %.1fs", time.Since(t0).Seconds()), err
	case phKillWorker:
		r.worker.kill()
		return "worker process SIGKILLed", nil
	case phStartWorker:
		if !r.worker.exited() {
			return "worker was running", nil
		}
		r.setFaultEnd(i, time.Now())
		return "", r.startWorker(ctx)
	}
	return "", nil
}

// faultConn opens one of the runner's adversarial sessions.
func (r *sysRun) faultConn(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(r.dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = faultAppName
	return pgx.ConnectConfig(ctx, cfg)
}

func (r *sysRun) setFaultEnd(i int, t time.Time) {
	r.mu.Lock()
	r.faultEnd[i] = t
	r.mu.Unlock()
}

// workerProc is a running worker process of the system.
type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{} // closed when the process has exited
	killed atomic.Bool
}

func (w *workerProc) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and waits for it.
func (w *workerProc) kill() {
	w.killed.Store(true)
	_ = w.cmd.Process.Kill()
	<-w.done
}

// stop asks the process to stop cleanly and kills it after 40s.
func (w *workerProc) stop() {
	if w.exited() {
		return
	}
	_ = w.stdin.Close()
	select {
	case <-w.done:
	case <-time.After(40 * time.Second):
		w.kill()
	}
}

// startWorker starts a worker process and the goroutine that reads its
// lines, and waits until it is ready.
func (r *sysRun) startWorker(ctx context.Context) error {
	args := []string{"scenario-worker", "-system", r.sys, "-dsn", r.dsn, "-conns", strconv.Itoa(r.o.conns)}
	if r.o.verbose {
		args = append(args, "-v")
	}
	cmd := exec.Command(r.exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker process: %w", err)
	}
	w := &workerProc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				once.Do(func() { close(ready) })
				continue
			}
			r.workerLine(line)
		}
		_ = cmd.Wait()
		once.Do(func() { close(ready) })
		close(w.done)
	}()
	r.worker = w
	select {
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.exited() {
		return errors.New("worker process exited before it was ready")
	}
	return nil
}

// workerLine takes one line of the worker process.
func (r *sysRun) workerLine(line string) {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "c":
		seq, err1 := strconv.ParseInt(f[1], 10, 64)
		startNs, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return
		}
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.seqs.markSeen(seq) {
			r.dupReports++
			return
		}
		r.completed++
		for i, t := range r.faultEnd {
			if !t.IsZero() && !r.resumed[i] && now.After(t) {
				r.resumed[i], r.resume[i] = true, now.Sub(t)
			}
		}
		enqNs, phase, ok := r.seqs.enqueued(seq)
		if !ok {
			return
		}
		d := time.Duration(startNs - enqNs)
		r.secHist.record(d)
		if int(phase) < len(r.phaseHist) {
			r.phaseHist[phase].record(d)
		}
	case len(f) == 2 && f[0] == "e":
		r.mu.Lock()
		r.handlerErrs++
		r.mu.Unlock()
	}
}

// tableSample is the queue table's size and tuples.
type tableSample struct{ dead, live, table, index int64 }

func (r *sysRun) tableStats(ctx context.Context) tableSample {
	var s tableSample
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_ = r.pool.QueryRow(ctx, `SELECT coalesce(n_dead_tup, 0), coalesce(n_live_tup, 0), pg_table_size($1::regclass), pg_indexes_size($1::regclass)
		FROM pg_stat_user_tables WHERE relid = $1::regclass`, r.table).Scan(&s.dead, &s.live, &s.table, &s.index)
	return s
}

// waits samples pg_stat_activity: the system's active sessions by wait
// event ("CPU" when a session waits for nothing), without the runner's
// adversarial sessions.
func (r *sysRun) waits(ctx context.Context) map[string]int {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.pool.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)::int
		FROM pg_stat_activity
		WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend'
		  AND pid <> pg_backend_pid() AND application_name <> $2
		GROUP BY 1`, r.db, faultAppName)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if rows.Scan(&k, &n) == nil {
			out[k] = n
		}
	}
	rows.Close()
	return out
}

// sampleLoop writes one sample per second until ctx ends.
func (r *sysRun) sampleLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastEnq, lastErr, lastDone int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := int(r.phase.Load())
		st := r.tableStats(ctx)
		w := r.waits(ctx)
		r.mu.Lock()
		done := r.completed
		h := r.secHist
		r.secHist = newLatencyHist()
		for k, n := range w {
			if i < len(r.phases) {
				if r.phases[i].Waits == nil {
					r.phases[i].Waits = map[string]int{}
				}
				r.phases[i].Waits[k] += n
			}
		}
		r.mu.Unlock()
		enq, errs := r.enqOK.Load(), r.enqErr.Load()
		s := scenarioSample{
			System: r.sys, T: time.Since(r.start).Seconds(), PhaseIndex: i,
			Enqueued: enq - lastEnq, EnqErrs: errs - lastErr, Completed: done - lastDone,
			P50ms: ms2(h.quantile(0.50)), P99ms: ms2(h.quantile(0.99)),
			Backlog: max(0, enq-done), Dead: st.dead, Live: st.live, TableBytes: st.table, IndexBytes: st.index,
			Waits: w, Load1: loadAvg(),
		}
		s.Phase = "warm-up"
		if i < len(r.o.phases) {
			s.Phase = r.o.phases[i].name
		}
		lastEnq, lastErr, lastDone = enq, errs, done
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		if b, err := json.Marshal(s); err == nil {
			_, _ = r.samplesOut.Write(append(b, '\n'))
		}
	}
}

func ms2(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitDrained waits until the queue tables hold no unfinished job, for at
// most -drain, and returns how many are left.
func (r *sysRun) waitDrained(ctx context.Context) (int64, error) {
	q := `SELECT (SELECT count(*) FROM "skipjack"."noop" WHERE state IN ('pending', 'running'))
		+ (SELECT count(*) FROM "skipjack"."kept" WHERE state IN ('pending', 'running'))
		+ (SELECT count(*) FROM "skipjack"."capped" WHERE state IN ('pending', 'running'))`
	if r.sys == scenRiverTuned {
		q = `SELECT count(*) FROM river_job WHERE state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`
	}
	deadline := time.Now().Add(r.o.drain)
	for {
		var n int64
		err := r.pool.QueryRow(ctx, q).Scan(&n)
		if err == nil && n == 0 {
			return 0, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%d jobs unfinished after %v (last error: %v)", n, r.o.drain, err)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// account reads the effects table: lost jobs (enqueued, never run to
// completion), jobs run twice, failed jobs, and fills in each phase's
// latency and loss.
func (r *sysRun) account(ctx context.Context) (*systemResult, error) {
	res := &systemResult{System: r.sys, Phases: r.phases, Enqueued: r.enqOK.Load(), EnqueueErrs: r.enqErr.Load()}
	rows, err := r.pool.Query(ctx, `SELECT seq, count(*) FROM `+effectsTable+` GROUP BY seq`)
	if err != nil {
		return nil, fmt.Errorf("read effects: %w", err)
	}
	effects := map[int64]int64{}
	for rows.Next() {
		var seq, n int64
		if err := rows.Scan(&seq, &n); err != nil {
			rows.Close()
			return nil, err
		}
		effects[seq] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	phaseOf := func(seq int64) *phaseResult {
		if _, p, ok := r.seqs.enqueued(seq); ok && int(p) < len(r.phases) {
			return r.phases[p]
		}
		return nil
	}
	last := r.nextSeq.Load()
	for seq := int64(1); seq <= last; seq++ {
		n := effects[seq]
		ok := r.seqs.isOK(seq)
		switch {
		case ok && n == 0:
			res.Lost++
			if p := phaseOf(seq); p != nil {
				p.Lost++
			}
		case !ok && n > 0:
			res.Ambiguous++ // the enqueue failed for the producer, yet committed
		}
		if n > 1 {
			res.Twice++
			if p := phaseOf(seq); p != nil {
				p.Twice++
			}
		}
	}
	fq := `SELECT (SELECT count(*) FROM "skipjack"."noop" WHERE state = 'failed')
		+ (SELECT count(*) FROM "skipjack"."kept" WHERE state = 'failed')
		+ (SELECT count(*) FROM "skipjack"."capped" WHERE state = 'failed')`
	if r.sys == scenRiverTuned {
		fq = `SELECT count(*) FROM river_job WHERE state IN ('discarded', 'cancelled')`
	}
	if err := r.pool.QueryRow(ctx, fq).Scan(&res.Failed); err != nil {
		return nil, fmt.Errorf("count failed jobs: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res.HandlerErrs = r.handlerErrs
	for i, p := range r.phases {
		h := r.phaseHist[i]
		p.P50ms, p.P95ms, p.P99ms, p.MaxMs = ms2(h.quantile(0.5)), ms2(h.quantile(0.95)), ms2(h.quantile(0.99)), ms2(h.max())
		p.ResumeMs = -1
		if r.resumed[i] {
			p.ResumeMs = float64(r.resume[i].Microseconds()) / 1000
		}
		p.DrainS = -1
		from := p.start.Sub(r.start).Seconds()
		for _, s := range r.samples {
			// The final drain's samples carry the last phase's index, but
			// its producers have stopped: they do not count.
			if s.PhaseIndex == i && s.T-from <= p.Seconds && s.Backlog <= int64(r.o.rate) {
				p.DrainS = s.T - from
				break
			}
		}
	}
	res.Samples = r.samples
	return res, nil
}

// seqStore holds, per job sequence number, when it was enqueued, in which
// phase, whether its enqueue succeeded and whether it was seen completed;
// in chunks allocated on demand, so that memory follows the jobs.
type seqStore struct {
	chunks [1 << 14]atomic.Pointer[seqChunk]
}

const seqChunkBits = 14

type seqChunk struct {
	enq   [1 << seqChunkBits]atomic.Int64
	phase [1 << seqChunkBits]atomic.Int32
	ok    [1 << seqChunkBits]atomic.Bool
	seen  [1 << seqChunkBits]bool // the worker-line reader's, under sysRun.mu
}

func (s *seqStore) chunk(seq int64, alloc bool) (*seqChunk, int) {
	ci, i := seq>>seqChunkBits, int(seq&(1<<seqChunkBits-1))
	if ci < 0 || ci >= int64(len(s.chunks)) {
		return nil, 0
	}
	c := s.chunks[ci].Load()
	if c == nil && alloc {
		s.chunks[ci].CompareAndSwap(nil, new(seqChunk))
		c = s.chunks[ci].Load()
	}
	return c, i
}

func (s *seqStore) setEnqueue(seq, ns int64, phase int32) {
	if c, i := s.chunk(seq, true); c != nil {
		c.phase[i].Store(phase)
		c.enq[i].Store(ns)
	}
}

func (s *seqStore) setOK(seq int64) {
	if c, i := s.chunk(seq, true); c != nil {
		c.ok[i].Store(true)
	}
}

func (s *seqStore) isOK(seq int64) bool {
	c, i := s.chunk(seq, false)
	return c != nil && c.ok[i].Load()
}

func (s *seqStore) enqueued(seq int64) (ns int64, phase int32, ok bool) {
	c, i := s.chunk(seq, false)
	if c == nil {
		return 0, 0, false
	}
	ns = c.enq[i].Load()
	return ns, c.phase[i].Load(), ns != 0
}

// markSeen marks seq completed and reports whether it was not before.
func (s *seqStore) markSeen(seq int64) bool {
	c, i := s.chunk(seq, true)
	if c == nil || c.seen[i] {
		return false
	}
	c.seen[i] = true
	return true
}

// quietLogger is the logger of the runner's own River insert client.
func quietLogger(verbose bool) *slog.Logger {
	return options{verbose: verbose}.logger()
}
