package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// skipjackHeapSystem returns the skipjack worker of the heap experiment
// (queue noop, Concurrency -heap). It is set by skipjack.go.
var skipjackHeapSystem func(o options, logger *slog.Logger) system

// pendingCounter is implemented by the queues that can count the jobs no
// worker has claimed yet.
type pendingCounter interface {
	pending(ctx context.Context) (int64, error)
}

// memSample is the process's memory after two forced collections.
type memSample struct {
	heap, stack uint64
	goroutines  int
}

func readMem() memSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{heap: m.HeapAlloc, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// heapStep is one measured state of the heap experiment.
type heapStep struct {
	label   string
	jobs    int // jobs the worker holds
	running int // of which handlers run
	mem     memSample
}

// heapPerJob measures what in-flight jobs cost in Go memory: one worker at
// Concurrency -heap (River: MaxWorkers -heap) whose handlers block until
// released. It samples the heap with the worker idle on an empty queue,
// with -heap jobs running, and (skipjack) with as many more prefetched;
// River does not prefetch, so its second step shows the same jobs running.
func (b *bench) heapPerJob(ctx context.Context) error {
	n := b.o.heap
	logger := b.o.logger()
	var systems []system
	if skipjackHeapSystem != nil {
		systems = append(systems, skipjackHeapSystem(b.o, logger))
	}
	systems = append(systems, riverWorkersSystem(n, logger))
	fmt.Fprintf(b.out, "\nGo memory per in-flight job: one worker at Concurrency %d (River: MaxWorkers %d), handlers blocked until released; HeapAlloc and StackInuse after two runtime.GC() calls, minus the same worker idle on an empty queue\n\n", n, n)
	fmt.Fprintln(b.out, "| system | state | jobs held | running | heap bytes | heap bytes/job | stack bytes | stack bytes/job | goroutines | goroutines/job |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	var errs []error
	for _, s := range systems {
		err := b.withDB(ctx, s, "heap", func(dsn string) error {
			steps, err := b.heapRun(ctx, s, dsn)
			if err != nil {
				return err
			}
			base := steps[0].mem
			for _, st := range steps {
				perHeap, perStack, perG := "–", "–", "–"
				if st.jobs > 0 {
					perHeap = fmt.Sprintf("%.0f", (float64(st.mem.heap)-float64(base.heap))/float64(st.jobs))
					perStack = fmt.Sprintf("%.0f", (float64(st.mem.stack)-float64(base.stack))/float64(st.jobs))
					perG = fmt.Sprintf("%.2f", float64(st.mem.goroutines-base.goroutines)/float64(st.jobs))
				}
				fmt.Fprintf(b.out, "| %s | %s | %d | %d | %d | %s | %d | %s | %d | %s |\n", s.name, st.label, st.jobs, st.running,
					st.mem.heap, perHeap, st.mem.stack, perStack, st.mem.goroutines, perG)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// heapRun takes the heap experiment's samples of one system.
func (b *bench) heapRun(ctx context.Context, s system, dsn string) ([]heapStep, error) {
	n := b.o.heap
	pool, q, err := openQueue(ctx, s, dsn, s.maxConns)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	pc, ok := q.(pendingCounter)
	if !ok {
		return nil, fmt.Errorf("%s cannot count pending jobs", s.name)
	}
	release := make(chan struct{})
	var entered atomic.Int64
	handle := func(int64) {
		entered.Add(1)
		<-release
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	werr := make(chan error, 1)
	go func() { werr <- q.work(wctx, handle) }()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// waitUntil polls cond every 50ms for up to a minute.
	waitUntil := func(what string, cond func() (bool, error)) error {
		deadline := time.Now().Add(time.Minute)
		for {
			ok, err := cond()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if ok {
				return nil
			}
			select {
			case err := <-werr:
				return fmt.Errorf("worker stopped while waiting for %s: %v", what, err)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out waiting for %s", what)
			}
		}
	}

	time.Sleep(2 * time.Second) // let the worker start and settle
	steps := []heapStep{{label: "idle, empty queue", mem: readMem()}}

	if _, err := enqueueBulk(ctx, q, n, b.o.batch); err != nil {
		return nil, err
	}
	if err := waitUntil(fmt.Sprintf("%d handlers running", n), func() (bool, error) {
		return entered.Load() >= int64(n), nil
	}); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	steps = append(steps, heapStep{label: "running", jobs: n, running: n, mem: readMem()})

	if _, err := enqueueBulk(ctx, q, n, b.o.batch); err != nil {
		return nil, err
	}
	// skipjack prefetches up to Concurrency more jobs; River fetches only
	// what its free workers take.
	prefetches := !strings.HasPrefix(s.name, "river")
	held := n
	if prefetches {
		if err := waitUntil("prefetch", func() (bool, error) {
			left, err := pc.pending(ctx)
			return left == 0, err
		}); err != nil {
			return nil, err
		}
		held = 2 * n
	}
	time.Sleep(time.Second)
	label := "running + prefetched"
	if !prefetches {
		label = "running, as many pending (not fetched)"
	}
	steps = append(steps, heapStep{label: label, jobs: held, running: n, mem: readMem()})

	close(release)
	released = true
	if err := waitUntil("burn-down", func() (bool, error) {
		left, err := q.unfinished(ctx)
		return left == 0, err
	}); err != nil {
		return nil, err
	}
	stop()
	select {
	case err := <-werr:
		if err != nil {
			return nil, fmt.Errorf("worker stopped: %w", err)
		}
	case <-time.After(time.Minute):
		return nil, errors.New("worker did not stop within 1m")
	}
	return steps, nil
}
