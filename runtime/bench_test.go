package skipjack_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// benchJobs is the size of one burn-down.
const benchJobs = 100_000

// BenchmarkBurnDown measures how fast one worker empties a queue of 100k
// jobs with a no-op handler, reporting jobs/s. Run it with
//
//	go test -run '^$' -bench BurnDown -benchtime 1x
func BenchmarkBurnDown(b *testing.B) {
	cases := []struct {
		name string
		cfg  skipjack.WorkerConfig
	}{
		{"default", skipjack.WorkerConfig{}},
		{"tuned", skipjack.WorkerConfig{Concurrency: 1000, BatchSize: 1000}},
	}
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		cases = append(cases, struct {
			name string
			cfg  skipjack.WorkerConfig
		}{fmt.Sprintf("default_ackdelay=%v", d), skipjack.WorkerConfig{AckDelay: d}})
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			// The handlers do not use the pool; the worker itself needs a
			// handful of connections.
			pool := newQueues(b, 8)
			cfg := bc.cfg
			cfg.Logger = quietLogger(b)
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				enqueueDemo(b, pool, benchJobs)
				if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE skipjack.demo`); err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				all := make(chan struct{})
				w := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
					if n.Add(1) == benchJobs {
						close(all)
					}
					return nil
				}, cfg)
				b.StartTimer()
				begin := time.Now()
				stop := start(b, w)
				<-all
				waitFor(b, time.Minute, "acknowledgements", func() bool {
					return queryInt(b, pool, `SELECT count(*) FROM skipjack.demo`) == 0
				})
				elapsed += time.Since(begin)
				b.StopTimer()
				stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchJobs*b.N)/elapsed.Seconds(), "jobs/s")
		})
	}
}
