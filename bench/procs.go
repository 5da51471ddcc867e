package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// procRun is one burn-down of the -procs experiment: one system, N worker
// processes, one fresh database.
type procRun struct {
	rate       float64 // jobs/s
	serverCPU  float64 // µs/job: the machine's busy time less the bench and its children
	backendCPU float64 // µs/job: the database's client backends (/proc/<pid>/stat)
	workerCPU  float64 // µs/job: the worker processes together
	// midRate is the jobs/s between the moments the children had
	// reported a tenth and nine tenths of the jobs handled: the rate
	// without the processes' start-up and the burn-down's tail.
	midRate float64
	// newBackends counts the database's client backends that started
	// during the burn-down (connections the pools opened on demand).
	newBackends int
	// backendFaults is the database's client backends' minor page faults
	// per job.
	backendFaults float64
	// handledBefore counts the jobs handled before the clocks started
	// (with -procs-warm), left out of every per-job figure.
	handledBefore int64
	// From the children (skipjack only; zero for River): claim statements,
	// the jobs they were allowed to take and the jobs they took.
	claims, asked, got int64
	// From pg_stat_statements when the server preloads it (stmts < 0
	// otherwise): the database's claim statements (SKIP LOCKED with
	// UPDATE), their rows, shared buffers (hit + read) and execution time,
	// and every statement's execution time.
	stmts, claimCalls, claimRows, claimBufs float64
	claimExecMs, allExecMs                  float64
	top                                     []string // the costliest statements, one line each
}

// procVariant is one line group of the -procs table: a system whose
// processes share one queue, or, with apart, each work a queue of its own.
type procVariant struct {
	sys   system
	apart bool
}

// label names the variant in the table.
func (v procVariant) label() string {
	if v.apart {
		return v.sys.name + " apart"
	}
	return v.sys.name
}

// procRow collects one variant's runs at one process count.
type procRow struct {
	sys  string
	n    int
	runs []procRun
}

func (r *procRow) med(f func(procRun) float64) float64 {
	xs := make([]float64, 0, len(r.runs))
	for _, x := range r.runs {
		xs = append(xs, f(x))
	}
	return median(xs)
}

// processes measures burn-down with N worker processes per system: the
// bench binary re-executes itself as children that each run the system's
// full worker configuration against the same fresh database. Within each
// run, every process count and system follow each other, so that skipjack
// and River share the machine's noise; every figure is the median of -runs.
func (b *bench) processes(ctx context.Context, systems []system) error {
	systems = b.experimentSystems(systems, "skipjack-default", "skipjack-tuned", "river-tuned")
	var variants []procVariant
	for _, s := range systems {
		variants = append(variants, procVariant{sys: s})
		if b.o.procsApart {
			variants = append(variants, procVariant{sys: s, apart: true})
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	pgss := b.a.enablePGSS(ctx)
	rows := map[string]*procRow{}
	key := func(s string, n int) string { return s + "/" + strconv.Itoa(n) }
	for _, v := range variants {
		for _, p := range b.o.procs {
			rows[key(v.label(), p)] = &procRow{sys: v.label(), n: p}
		}
	}
	var errs []error
	for r := range b.o.runs {
		for _, p := range b.o.procs {
			for _, v := range variants {
				dbs := 1
				if v.apart {
					dbs = p
				}
				err := b.withDBs(ctx, v.sys, "procs", dbs, func(dsns []string) error {
					res, err := b.processRun(ctx, exe, v.sys, dsns, p, pgss)
					if err != nil {
						return err
					}
					row := rows[key(v.label(), p)]
					row.runs = append(row.runs, res)
					fmt.Fprintf(b.out, "procs run %d %s N=%d: %.0f jobs/s (%.0f from 10%% to 90%% of the jobs), server CPU %.1f µs/job, PG backends %.1f µs/job (%d started during the run, %.2f minor page faults per job), workers %.1f µs/job, %d jobs before the clocks started, claims %d asked %d got %d, pgss claim calls %.0f rows %.0f buffers %.0f exec %.0f ms, all statements %.0f exec %.0f ms (load %s)\n",
						r+1, v.label(), p, res.rate, res.midRate, res.serverCPU, res.backendCPU, res.newBackends, res.backendFaults, res.workerCPU, res.handledBefore,
						res.claims, res.asked, res.got, res.claimCalls, res.claimRows, res.claimBufs, res.claimExecMs, res.stmts, res.allExecMs, loadAvg())
					for _, l := range res.top {
						fmt.Fprintln(b.out, l)
					}
					return nil
				})
				if err != nil {
					errs = append(errs, fmt.Errorf("%s with %d processes: %w", v.label(), p, err))
					fmt.Fprintf(b.out, "procs run %d %s N=%d: failed: %v\n", r+1, v.label(), p, err)
				}
			}
		}
	}

	timed := "timed from the moment the processes start"
	if b.o.procsWarm {
		timed = "timed from the moment every process has handled a job (-procs-warm: connecting left out)"
	}
	fmt.Fprintf(b.out, "\nBurn-down of %d jobs by N worker processes on one queue, each process with the system's full worker config, %s; median of %d run(s), systems interleaved within each run\n\n", b.o.jobs, timed, b.o.runs)
	fmt.Fprintln(b.out, "| system | N | burn-down jobs/s | ÷ river-tuned | jobs/s from 10% to 90% | server CPU µs/job | PG backend CPU µs/job | worker CPU µs/job | claims per 1k jobs | jobs asked per claim | jobs got per claim | claim buffers per claim | claim exec µs/job | all statements exec µs/job |")
	fmt.Fprintln(b.out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	per := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	for _, v := range variants {
		for _, p := range b.o.procs {
			row := rows[key(v.label(), p)]
			if len(row.runs) == 0 {
				fmt.Fprintf(b.out, "| %s | %d | failed | | | | | | | | | | | |\n", v.label(), p)
				continue
			}
			rate := row.med(func(x procRun) float64 { return x.rate })
			vsRiver := "–"
			if rr := rows[key(procVariant{sys: system{name: "river-tuned"}, apart: v.apart}.label(), p)]; rr != nil && len(rr.runs) > 0 && v.sys.name != "river-tuned" {
				vsRiver = fmt.Sprintf("%.2f×", rate/rr.med(func(x procRun) float64 { return x.rate }))
			}
			claims, asked, got := "–", "–", "–"
			if row.runs[0].claims > 0 {
				claims = fmt.Sprintf("%.1f", row.med(func(x procRun) float64 { return 1000 * float64(x.claims) / float64(x.got) }))
				asked = fmt.Sprintf("%.0f", row.med(func(x procRun) float64 { return per(float64(x.asked), float64(x.claims)) }))
				got = fmt.Sprintf("%.0f", row.med(func(x procRun) float64 { return per(float64(x.got), float64(x.claims)) }))
			}
			bufs, cex, aex := "–", "–", "–"
			if pgss {
				bufs = fmt.Sprintf("%.0f", row.med(func(x procRun) float64 { return per(x.claimBufs, x.claimCalls) }))
				cex = fmt.Sprintf("%.1f", row.med(func(x procRun) float64 { return 1000 * x.claimExecMs / float64(b.o.jobs) }))
				aex = fmt.Sprintf("%.1f", row.med(func(x procRun) float64 { return 1000 * x.allExecMs / float64(b.o.jobs) }))
			}
			fmt.Fprintf(b.out, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				v.label(), p, num(rate), vsRiver, num(row.med(func(x procRun) float64 { return x.midRate })),
				us(row.med(func(x procRun) float64 { return x.serverCPU })),
				us(row.med(func(x procRun) float64 { return x.backendCPU })),
				us(row.med(func(x procRun) float64 { return x.workerCPU })),
				claims, asked, got, bufs, cex, aex)
		}
	}
	fmt.Fprintln(b.out)
	// The scale-out figures, from the medians above.
	for _, v := range variants {
		// at is the median of f over the variant's runs at n processes (0
		// without runs).
		at := func(n int, f func(procRun) float64) float64 {
			if row := rows[key(v.label(), n)]; row != nil && len(row.runs) > 0 {
				return row.med(f)
			}
			return 0
		}
		rate := func(n int) float64 { return at(n, func(x procRun) float64 { return x.rate }) }
		mid := func(n int) float64 { return at(n, func(x procRun) float64 { return x.midRate }) }
		var parts []string
		if best := max(rate(2), rate(4)); best > 0 && rate(8) > 0 {
			parts = append(parts, fmt.Sprintf("8 ÷ best of 2 and 4 = %.2f", rate(8)/best))
		}
		if best := max(mid(2), mid(4)); best > 0 && mid(8) > 0 {
			parts = append(parts, fmt.Sprintf("from 10%% to 90%% of the jobs, 8 ÷ best of 2 and 4 = %.2f", mid(8)/best))
		}
		if rate(8) > 0 && rate(16) > 0 {
			parts = append(parts, fmt.Sprintf("16 ÷ 8 = %.2f", rate(16)/rate(8)))
		}
		lo, hi := 0.0, 0.0
		for _, n := range []int{2, 4, 8} {
			if row := rows[key(v.label(), n)]; row != nil && len(row.runs) > 0 {
				c := row.med(func(x procRun) float64 { return x.backendCPU })
				if lo == 0 || c < lo {
					lo = c
				}
				hi = max(hi, c)
			}
		}
		if lo > 0 {
			parts = append(parts, fmt.Sprintf("PG backend CPU per job, highest ÷ lowest of 2, 4, 8 = %.2f", hi/lo))
		}
		if len(parts) > 0 {
			if !v.apart {
				if shared, apart := rate(8), rows[key(procVariant{sys: v.sys, apart: true}.label(), 8)]; shared > 0 && apart != nil && len(apart.runs) > 0 {
					parts = append(parts, fmt.Sprintf("8 on one queue ÷ 8 apart = %.2f", shared/apart.med(func(x procRun) float64 { return x.rate })))
				}
			}
			fmt.Fprintf(b.out, "%s: %s\n", v.label(), strings.Join(parts, "; "))
		}
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// processRun enqueues the jobs, starts n children, lets them go at once and
// times until the databases hold no unfinished job. With one database all
// children work its queue; with several (one per child), each child works
// the queue of its own, which holds its share of the jobs.
func (b *bench) processRun(ctx context.Context, exe string, s system, dsns []string, n int, pgss bool) (procRun, error) {
	var res procRun
	dbs := make([]string, len(dsns))
	var qs queues
	for i, dsn := range dsns {
		dbs[i] = dbName(dsn)
		pool, q, err := openQueue(ctx, s, dsn, 4)
		if err != nil {
			return res, err
		}
		defer pool.Close()
		share := b.o.jobs / len(dsns)
		if i == 0 {
			share += b.o.jobs % len(dsns)
		}
		if _, err := enqueueBulk(ctx, q, share, b.o.batch); err != nil {
			return res, err
		}
		qs = append(qs, q)
	}

	var children []*benchChild
	exited := make(chan error, n)
	// Each child prints "handled N" as it goes and "claims <calls> <asked>
	// <got>" when it stops.
	handled := make([]atomic.Int64, n)
	final := make(chan [3]int64, n)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range children {
			_ = c.stdin.Close()
		}
		for range children {
			select {
			case f := <-final:
				res.claims += f[0]
				res.asked += f[1]
				res.got += f[2]
			case <-time.After(time.Minute):
			}
		}
		for range children {
			select {
			case <-exited:
			case <-time.After(time.Minute):
				return
			}
		}
	}
	defer stop()
	for i := range n {
		c, err := startChild(ctx, exe, s.name, dsns[i%len(dsns)], b.o.verbose,
			"-tuned-concurrency", strconv.Itoa(b.o.tunedConcurrency),
			"-tuned-batch", strconv.Itoa(b.o.tunedBatch),
			"-skipjack-conns", strconv.Itoa(int(b.o.skipjackConns)))
		if err != nil {
			return res, err
		}
		children = append(children, c)
		readyErr := c.awaitReady()
		go func() {
			for {
				line, err := c.out.ReadString('\n')
				f := strings.Fields(line)
				switch {
				case len(f) == 2 && f[0] == "handled":
					v, _ := strconv.ParseInt(f[1], 10, 64)
					handled[i].Store(v)
				case len(f) == 4 && f[0] == "claims":
					var x [3]int64
					for j := range x {
						x[j], _ = strconv.ParseInt(f[j+1], 10, 64)
					}
					final <- x
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			err := c.cmd.Wait()
			if err == nil {
				err = errors.New("exited")
			}
			exited <- fmt.Errorf("worker process: %w", err)
		}()
		if readyErr != nil {
			return res, readyErr
		}
	}
	// Let the children's start-up statements settle before the clocks start.
	time.Sleep(200 * time.Millisecond)
	// startClocks resets the statement statistics and reads the CPU
	// counters the burn-down's figures are measured from.
	var cpu0 procCPUReading
	startClocks := func() error {
		if pgss {
			if _, err := b.a.conn.Exec(ctx, `SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database WHERE datname = ANY($1)`, dbs); err != nil {
				return fmt.Errorf("reset pg_stat_statements: %w", err)
			}
		}
		var err error
		cpu0, err = b.processCPU(ctx, dbs, children)
		return err
	}
	handledSum := func() int64 {
		var sum int64
		for i := range handled {
			sum += handled[i].Load()
		}
		return sum
	}
	// With -procs-warm, the clocks start once every child has handled a
	// job, and the jobs handled before are left out.
	if !b.o.procsWarm {
		if err := startClocks(); err != nil {
			return res, err
		}
	}
	start := time.Now()
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return res, fmt.Errorf("start child: %w", err)
		}
	}
	before := int64(0) // jobs handled before the clocks started
	if b.o.procsWarm {
		if err := waitEveryChildWorking(ctx, handled, b.burnTimeout(s), exited); err != nil {
			return res, err
		}
		if err := startClocks(); err != nil {
			return res, err
		}
		start = time.Now()
		before = handledSum()
		res.handledBefore = before
	}
	var tenth, nineTenths time.Time // see procRun.midRate
	total := int64(b.o.jobs)
	took, err := waitFinished(ctx, qs, func() bool {
		h := handledSum()
		if tenth.IsZero() && h >= total/10 {
			tenth = time.Now()
		}
		if nineTenths.IsZero() && h >= total*9/10 {
			nineTenths = time.Now()
		}
		return h >= total
	}, start, b.burnTimeout(s), exited)
	if err != nil {
		return res, err
	}
	cpu1, err := b.processCPU(ctx, dbs, children)
	if err != nil {
		return res, err
	}
	jobs := float64(int64(b.o.jobs) - before)
	res.rate = jobs / took.Seconds()
	if !tenth.IsZero() && nineTenths.After(tenth) {
		res.midRate = float64(total*9/10-total/10) / nineTenths.Sub(tenth).Seconds()
	}
	var workers float64
	for pid, c := range cpu1.children {
		workers += c - cpu0.children[pid]
	}
	var backends float64
	for pid, c := range cpu1.backends {
		c0, ok := cpu0.backends[pid] // a backend that started during the run has used c since
		if !ok {
			res.newBackends++
		}
		backends += c - c0
	}
	var faults int64
	for pid, n := range cpu1.backendFaults {
		faults += n - cpu0.backendFaults[pid]
	}
	self := cpu1.self - cpu0.self
	res.workerCPU = workers * 1e6 / jobs
	res.backendCPU = backends * 1e6 / jobs
	res.backendFaults = float64(faults) / jobs
	res.serverCPU = max(0, cpu1.machine-cpu0.machine-self-workers) * 1e6 / jobs
	if pgss {
		err := b.a.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::float8,
			coalesce(sum(calls) FILTER (WHERE claim), 0)::float8,
			coalesce(sum(rows) FILTER (WHERE claim), 0)::float8,
			coalesce(sum(shared_blks_hit + shared_blks_read) FILTER (WHERE claim), 0)::float8,
			coalesce(sum(total_exec_time) FILTER (WHERE claim), 0)::float8,
			coalesce(sum(total_exec_time), 0)::float8
			FROM (SELECT *, query ILIKE '%SKIP LOCKED%' AND query ILIKE '%UPDATE%' AS claim
			      FROM pg_stat_statements WHERE dbid IN (SELECT oid FROM pg_database WHERE datname = ANY($1))) s`, dbs).
			Scan(&res.stmts, &res.claimCalls, &res.claimRows, &res.claimBufs, &res.claimExecMs, &res.allExecMs)
		if err != nil {
			return res, fmt.Errorf("read pg_stat_statements: %w", err)
		}
		// The statements that cost the most, for the raw output.
		rows, err := b.a.conn.Query(ctx, `SELECT calls, rows, shared_blks_hit + shared_blks_read, wal_records, total_exec_time,
			regexp_replace(left(query, 400), '\s+', ' ', 'g')
			FROM pg_stat_statements WHERE dbid IN (SELECT oid FROM pg_database WHERE datname = ANY($1))
			ORDER BY total_exec_time DESC LIMIT 6`, dbs)
		if err != nil {
			return res, fmt.Errorf("read pg_stat_statements: %w", err)
		}
		for rows.Next() {
			var calls, nrows, bufs, wal int64
			var exec float64
			var query string
			if err := rows.Scan(&calls, &nrows, &bufs, &wal, &exec, &query); err != nil {
				return res, fmt.Errorf("read pg_stat_statements: %w", err)
			}
			res.top = append(res.top, fmt.Sprintf("  pgss %s N=%d: calls %d rows %d buffers/call %.0f WAL records/row %.2f exec %.0f ms (%.1f µs/job): %.110s",
				s.name, n, calls, nrows, float64(bufs)/float64(max(calls, 1)), float64(wal)/float64(max(nrows, 1)), exec, 1000*exec/jobs, query))
		}
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("read pg_stat_statements: %w", err)
		}
	}
	stop()
	return res, nil
}

// procCPU is a reading of the clocks the -procs experiment compares.
type procCPUReading struct {
	self, machine      float64
	children, backends map[int]float64 // pid -> CPU seconds
	backendFaults      map[int]int64   // pid -> minor page faults
}

func (b *bench) processCPU(ctx context.Context, dbs []string, children []*benchChild) (procCPUReading, error) {
	r := procCPUReading{children: map[int]float64{}, backends: map[int]float64{}, backendFaults: map[int]int64{}}
	for _, db := range dbs {
		bs, err := b.a.backends(ctx, db)
		if err != nil {
			return r, err
		}
		for _, be := range bs {
			if st, err := readProcStat(be.pid); err == nil {
				r.backends[be.pid] = st.cpu
				r.backendFaults[be.pid] = st.minorFaults
			}
		}
	}
	for _, c := range children {
		v, err := procCPU(c.cmd.Process.Pid)
		if err != nil {
			return r, err
		}
		r.children[c.cmd.Process.Pid] = v
	}
	var err error
	if r.self, err = procCPU(os.Getpid()); err != nil {
		return r, err
	}
	if r.machine, err = machineBusy(); err != nil {
		return r, err
	}
	return r, nil
}

// waitEveryChildWorking waits until every child has reported a handled
// job: each has opened its connections and runs at full speed. It gives up
// at timeout or when a child exits.
func waitEveryChildWorking(ctx context.Context, handled []atomic.Int64, timeout time.Duration, exited <-chan error) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for i := range handled {
			all = all && handled[i].Load() > 0
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("workers stopped early: %w", cmp.Or(err, errNoError))
		case <-deadline:
			return fmt.Errorf("not every worker process handled a job within %v", timeout)
		case <-tick.C:
		}
	}
}

// enablePGSS creates pg_stat_statements in the maintenance database when
// the server preloads it, and reports whether it can be read.
func (a *admin) enablePGSS(ctx context.Context) bool {
	var libs string
	if err := a.conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs); err != nil ||
		!strings.Contains(libs, "pg_stat_statements") {
		return false
	}
	_, err := a.conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	return err == nil
}

// dbName returns the database name of a URL from admin.dsn.
func dbName(dsn string) string {
	s := dsn
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	s, _, _ = strings.Cut(s, "?")
	return s
}

// loadAvg returns the 1-minute load average, for the raw lines.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
