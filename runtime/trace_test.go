package skipjack_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// traceKey is the context key under which these tests put the trace
// context that ctxPropagator injects.
type traceKey struct{}

// ctxPropagator injects the map stored under traceKey, so that only the
// contexts of these tests carry a trace context: the propagator is
// process-wide, and every other test's enqueues keep storing NULL.
type ctxPropagator struct{}

func (ctxPropagator) Inject(ctx context.Context) map[string]string {
	m, _ := ctx.Value(traceKey{}).(map[string]string)
	return m
}

var setPropagator sync.Once

// traced returns a context carrying the trace context m, with
// ctxPropagator registered.
func traced(m map[string]string) context.Context {
	setPropagator.Do(func() { skipjack.SetTracePropagator(ctxPropagator{}) })
	return context.WithValue(context.Background(), traceKey{}, m)
}

// storedTrace reads the trace column of a job: nil for NULL.
func storedTrace(t *testing.T, pool *pgxpool.Pool, table string, id int64) map[string]string {
	t.Helper()
	var m map[string]string
	if err := pool.QueryRow(context.Background(), `SELECT trace FROM skipjack.`+table+` WHERE id = $1`, id).Scan(&m); err != nil {
		t.Fatalf("read trace of %s job %d: %v", table, id, err)
	}
	return m
}

// TestTraceStoredByEveryEnqueuePath checks that each way of enqueueing
// stores the propagator's map in the trace column, and NULL for a context
// without one or a map that cannot or should not be stored.
func TestTraceStoredByEveryEnqueuePath(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	want := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v"}
	ctx := traced(want)
	bg := context.Background()
	lastID := func(table string) int64 {
		return queryInt(t, pool, `SELECT max(id) FROM skipjack.`+table)
	}

	tests := []struct {
		name    string
		table   string
		enqueue func(t *testing.T) // inserts one job, the newest of table
		want    map[string]string
	}{{
		name: "Enqueue on a pool (quiet insert)", table: "fast", want: want,
		enqueue: func(t *testing.T) { mustEnqueue(t)(fast.Enqueue(ctx, pool, fast.Payload{N: 1})) },
	}, {
		name: "Enqueue in a transaction (notifying insert)", table: "fast", want: want,
		enqueue: func(t *testing.T) {
			tx, err := pool.Begin(bg)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(bg)
			mustEnqueue(t)(fast.Enqueue(ctx, tx, fast.Payload{N: 2}))
			if err := tx.Commit(bg); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "EnqueueMany due now (COPY)", table: "fast", want: want,
		enqueue: func(t *testing.T) { mustEnqueue(t)(fast.EnqueueMany(ctx, pool, []fast.Payload{{N: 3}})) },
	}, {
		name: "EnqueueMany with RunAt (COPY with run_at)", table: "fast", want: want,
		enqueue: func(t *testing.T) {
			mustEnqueue(t)(fast.EnqueueMany(ctx, pool, []fast.Payload{{N: 4}}, skipjack.RunAt(time.Now().Add(time.Hour))))
		},
	}, {
		name: "Enqueue of a unique queue", table: "uniq", want: want,
		enqueue: func(t *testing.T) { mustEnqueue(t)(uniq.Enqueue(ctx, pool, uniq.Payload{Key: "a"})) },
	}, {
		name: "EnqueueMany of a unique queue (INSERT skipping duplicates)", table: "uniq", want: want,
		enqueue: func(t *testing.T) { mustEnqueue(t)(uniq.EnqueueMany(ctx, pool, []uniq.Payload{{Key: "b"}})) },
	}, {
		name: "no trace context", table: "fast", want: nil,
		enqueue: func(t *testing.T) { mustEnqueue(t)(fast.Enqueue(bg, pool, fast.Payload{N: 5})) },
	}, {
		name: "empty map", table: "fast", want: nil,
		enqueue: func(t *testing.T) {
			mustEnqueue(t)(fast.Enqueue(traced(map[string]string{}), pool, fast.Payload{N: 6}))
		},
	}, {
		name: "NUL character, which jsonb rejects", table: "fast", want: nil,
		enqueue: func(t *testing.T) {
			mustEnqueue(t)(fast.Enqueue(traced(map[string]string{"traceparent": "a\x00b"}), pool, fast.Payload{N: 7}))
		},
	}, {
		name: "over MaxTraceBytes", table: "fast", want: nil,
		enqueue: func(t *testing.T) {
			big := map[string]string{"baggage": strings.Repeat("x", skipjack.MaxTraceBytes)}
			mustEnqueue(t)(fast.Enqueue(traced(big), pool, fast.Payload{N: 8}))
		},
	}}
	// Sequential: each case reads the newest row of its table.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.enqueue(t)
			if got := storedTrace(t, pool, tc.table, lastID(tc.table)); !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("trace column = %v, want %v", got, tc.want)
			}
		})
	}
}

// mustEnqueue returns a function that fails t when an enqueue's error is
// not nil: mustEnqueue(t)(fast.Enqueue(...)).
func mustEnqueue(t *testing.T) func(int64, error) {
	return func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
}

// traceHooks records the trace context JobStart sees, by job id.
type traceHooks struct {
	skipjack.NopHooks
	mu     sync.Mutex
	traces map[int64]map[string]string
}

func (h *traceHooks) JobStart(ctx context.Context, job skipjack.JobInfo) context.Context {
	h.mu.Lock()
	h.traces[job.ID] = job.Trace
	h.mu.Unlock()
	return ctx
}

// TestTraceReachesHandlerAndHooks checks that the claim hands the stored
// trace context to the handler (Job.Trace) and to JobStart
// (JobInfo.Trace), that a job without one gets nil, and that a trace value
// a SQL producer wrote that is not an object of strings reads as nil
// without failing the job.
func TestTraceReachesHandlerAndHooks(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	want := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	tracedID, err := fast.Enqueue(traced(want), pool, fast.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	plainID, err := fast.Enqueue(context.Background(), pool, fast.Payload{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	junkID := queryInt(t, pool, `INSERT INTO skipjack.fast (payload, trace) VALUES ('{"n": 3}', '["not", "a", "map"]') RETURNING id`)

	hooks := &traceHooks{traces: map[int64]map[string]string{}}
	var mu sync.Mutex
	seen := map[int64]map[string]string{}
	done := make(chan struct{}, 3)
	w := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		mu.Lock()
		seen[job.ID] = job.Trace
		mu.Unlock()
		done <- struct{}{}
		return nil
	}, skipjack.WorkerConfig{Hooks: hooks, Logger: quietLogger(t), Concurrency: 2, PollInterval: 50 * time.Millisecond})
	stop := start(t, w)
	for range 3 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for the three jobs to run")
		}
	}
	stop()

	for _, c := range []struct {
		id   int64
		want map[string]string
	}{{tracedID, want}, {plainID, nil}, {junkID, nil}} {
		if got := seen[c.id]; !maps.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("job %d: Job.Trace = %v, want %v", c.id, got, c.want)
		}
		hooks.mu.Lock()
		got, ok := hooks.traces[c.id]
		hooks.mu.Unlock()
		if !ok || !maps.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("job %d: JobInfo.Trace = %v (reported %v), want %v", c.id, got, ok, c.want)
		}
	}
}
