package skipjackimpl

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// BenchmarkEngine measures what the worker itself costs per job, without a
// database: an in-memory store hands out jobs with a two-field payload as
// fast as the worker claims them and acknowledges them at once, and the
// handler does nothing. It reports ns, bytes and allocations per job, so
// changes to the per-job path can be compared exactly (allocations) and
// with less noise than a burn-down against Postgres; cpu-ns/job (the
// process's user and system time, every core) counts the work, where
// ns/job (elapsed) also depends on how much of the machine the benchmark
// got. Run it with
//
//	go test -run '^$' -bench Engine -benchtime 1x -count 5 ./skipjackimpl
func BenchmarkEngine(b *testing.B) {
	type payload struct {
		N     int64  `json:"n"`
		Label string `json:"label"`
	}
	for _, cfg := range []skipjack.WorkerConfig{
		{},
		{Concurrency: 1000, BatchSize: 1000},
	} {
		name := "default"
		if cfg.Concurrency != 0 {
			name = fmt.Sprintf("concurrency=%d", cfg.Concurrency)
		}
		b.Run(name, func(b *testing.B) {
			const jobs = 200_000
			f := &fakeStore{pending: ids(jobs), payload: []byte(`{"n": 7, "label": "bench"}`), discardAcks: true}
			done := make(chan struct{})
			var handled int
			cfg := cfg
			cfg.Logger = discardLogger()
			cfg.PollInterval = time.Millisecond
			w := newWorker(lazyPool(b), QueueSpec{Name: "bench", Lease: 30 * time.Second}, f,
				func(context.Context, *skipjack.Job[payload]) error { return nil }, cfg)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			ran := make(chan error, 1)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpuBefore := processCPU(b)
			b.ResetTimer()
			go func() { ran <- w.Run(ctx) }()
			go func() {
				for {
					f.mu.Lock()
					n := f.acked
					f.mu.Unlock()
					if n >= jobs {
						handled = n
						close(done)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			<-done
			b.StopTimer()
			cpu := processCPU(b) - cpuBefore
			stop()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(handled), "ns/job")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(handled), "cpu-ns/job")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(handled), "allocs/job")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(handled), "B/job")
		})
	}
}

// processCPU returns the CPU time this process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
