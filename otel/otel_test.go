package skipjackotel_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	skipjackotel "github.com/skipjack-dev/skipjack/otel"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is an SDK meter and tracer provider recording in memory.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewInMemoryExporter()
	tel := &telemetry{
		reader: reader,
		mp:     sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		spans:  spans,
		tp:     sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
	}
	t.Cleanup(func() {
		_ = tel.mp.Shutdown(context.Background())
		_ = tel.tp.Shutdown(context.Background())
	})
	return tel
}

func (tel *telemetry) hooks(t *testing.T) *skipjackotel.Hooks {
	t.Helper()
	h, err := skipjackotel.New(skipjackotel.WithMeterProvider(tel.mp), skipjackotel.WithTracerProvider(tel.tp))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

// points collects the data points of one metric as "attrs=value" strings,
// sorted: the value of a sum or gauge, the count of a histogram.
func (tel *telemetry) points(t *testing.T, name string) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var out []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s=%d", attrs(p.Attributes), p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s=%d", attrs(p.Attributes), p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s=%g", attrs(p.Attributes), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s=%d", attrs(p.Attributes), p.Count))
				}
			default:
				t.Fatalf("metric %s has unexpected data %T", name, m.Data)
			}
		}
	}
	sort.Strings(out)
	return out
}

func attrs(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, string(a.Key)+":"+a.Value.String())
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// spec is a queue like fast in the runtime's tests: 3 attempts, backoff
// 10ms..50ms.
var spec = skipjackimpl.QueueSpec{Name: "email", MaxAttempts: 3, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Timeout: time.Second}

type payload struct {
	To string `json:"to"`
}

// TestAttempts runs one attempt per kind of handler result through the
// worker's execute path (skipjacktest.RunJob) with the adapter as hooks,
// and checks the counters, histograms and spans it produced: one root
// consumer span per attempt that the handler's own spans are children
// of, with the outcome, and an error status for failed attempts only.
func TestAttempts(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	cfg := skipjacktest.WorkerConfig(skipjack.WorkerConfig{Hooks: tel.hooks(t), PollInterval: 20 * time.Millisecond})
	var handlerSpan trace.SpanContext
	handlers := []struct {
		want   skipjack.Outcome
		handle func(ctx context.Context, job *skipjack.Job[payload]) error
	}{
		{skipjack.OutcomeCompleted, func(ctx context.Context, job *skipjack.Job[payload]) error {
			_, child := tel.tp.Tracer("app").Start(ctx, "send mail")
			handlerSpan = child.SpanContext()
			child.End()
			return nil
		}},
		{skipjack.OutcomeRetried, func(ctx context.Context, job *skipjack.Job[payload]) error { return errors.New("smtp down") }},
		{skipjack.OutcomeRetried, func(ctx context.Context, job *skipjack.Job[payload]) error { panic("kaboom") }},
		{skipjack.OutcomeSnoozed, func(ctx context.Context, job *skipjack.Job[payload]) error { return skipjack.Snooze(time.Second) }},
		{skipjack.OutcomeFailed, func(ctx context.Context, job *skipjack.Job[payload]) error {
			return skipjack.Permanent(errors.New("no such mailbox"))
		}},
	}
	for _, h := range handlers {
		if res := skipjacktest.RunJob(t, spec, h.handle, payload{To: "ada@example.com"}, cfg); res.Outcome != h.want {
			t.Fatalf("RunJob = %s (%v), want %s", res.Outcome, res.Err, h.want)
		}
	}

	want := []string{
		"{outcome:completed,queue:email}=1",
		"{outcome:failed,queue:email}=1",
		"{outcome:retried,queue:email}=2",
		"{outcome:snoozed,queue:email}=1",
	}
	for _, name := range []string{"skipjack.job.attempts", "skipjack.job.duration"} {
		if got := tel.points(t, name); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := tel.points(t, "skipjack.job.wait"); fmt.Sprint(got) != "[{queue:email}=5]" {
		t.Errorf("skipjack.job.wait = %v, want 5 observations for email", got)
	}

	stubs := tel.spans.GetSpans()
	var attempts []tracetest.SpanStub
	for _, s := range stubs {
		if s.Name == "process email" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != len(handlers) || len(stubs) != len(handlers)+1 {
		t.Fatalf("%d spans, %d of them attempts; want %d attempts and the handler's span", len(stubs), len(attempts), len(handlers))
	}
	for i, s := range attempts {
		got := map[attribute.Key]string{}
		for _, a := range s.Attributes {
			got[a.Key] = a.Value.String()
		}
		if s.SpanKind != trace.SpanKindConsumer || s.Parent.IsValid() || got["messaging.destination.name"] != "email" ||
			got["messaging.message.id"] != "1" || got["skipjack.job.attempt"] != "1" || got["skipjack.outcome"] != string(handlers[i].want) {
			t.Errorf("attempt span %d: kind %v, parent %v, attributes %v; want a root consumer span of job 1 attempt 1 with outcome %s",
				i, s.SpanKind, s.Parent, got, handlers[i].want)
		}
		failed := handlers[i].want == skipjack.OutcomeRetried || handlers[i].want == skipjack.OutcomeFailed
		if failed != (s.Status.Code == codes.Error) || failed != (len(s.Events) == 1 && s.Events[0].Name == "exception") {
			t.Errorf("attempt span %d (%s): status %v, events %v; want an error status and exception event only for failed attempts",
				i, handlers[i].want, s.Status, s.Events)
		}
	}
	var child tracetest.SpanStub
	for _, s := range stubs {
		if s.Name == "send mail" {
			child = s
		}
	}
	if child.SpanContext.SpanID() != handlerSpan.SpanID() || child.Parent.SpanID() != attempts[0].SpanContext.SpanID() {
		t.Errorf("handler's span has parent %v, want the attempt span %v", child.Parent.SpanID(), attempts[0].SpanContext.SpanID())
	}
}

// TestAttemptSpanIsARoot checks that an attempt's span starts a trace of
// its own even when the worker's context carries a span (Run's context is
// the handlers' parent).
func TestAttemptSpanIsARoot(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	h := tel.hooks(t)
	ctx, outer := tel.tp.Tracer("app").Start(context.Background(), "main")
	defer outer.End()
	info := skipjack.JobInfo{Queue: "email", ID: 9, Attempt: 2, MaxAttempts: 3, RunAt: time.Now()}
	h.JobEnd(h.JobStart(ctx, info), info, skipjack.AttemptResult{Outcome: skipjack.OutcomeCompleted})
	spans := tel.spans.GetSpans()
	if len(spans) != 1 || spans[0].Parent.IsValid() || spans[0].SpanContext.TraceID() == outer.SpanContext().TraceID() {
		t.Errorf("spans %+v, want one root span outside the worker's trace", spans)
	}
}

// TestClaimsAndAcks feeds claim and acknowledgement events as a worker
// reports them (the runtime's TestHooksReportEveryEvent checks that it
// does) and checks the latency histograms and the counters of claimed
// jobs, lost results and database errors.
func TestClaimsAndAcks(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	h := tel.hooks(t)
	h.ClaimDone(skipjack.ClaimInfo{Queue: "email", Limit: 10, Jobs: 3, Took: 2 * time.Millisecond})
	h.ClaimDone(skipjack.ClaimInfo{Queue: "email", Limit: 10, Jobs: 4, Took: 3 * time.Millisecond})
	h.ClaimDone(skipjack.ClaimInfo{Queue: "email", Limit: 10, Took: time.Second, Err: errors.New("timeout")})
	h.AckDone(skipjack.AckInfo{Queue: "email", Op: skipjack.AckComplete, Jobs: 5, Matched: 4, Took: time.Millisecond})
	h.AckDone(skipjack.AckInfo{Queue: "email", Op: skipjack.AckResolve, Jobs: 2, Matched: 2, Took: time.Millisecond})
	h.AckDone(skipjack.AckInfo{Queue: "email", Op: skipjack.AckResolve, Jobs: 2, Took: time.Millisecond, Err: errors.New("conn reset")})

	for name, want := range map[string]string{
		"skipjack.claim.duration": "[{queue:email}=3]",
		"skipjack.claim.jobs":     "[{queue:email}=7]",
		"skipjack.ack.duration":   "[{op:complete,queue:email}=1 {op:resolve,queue:email}=2]",
		"skipjack.ack.lost":       "[{op:complete,queue:email}=1]",
		"skipjack.db.errors":      "[{op:claim,queue:email}=1 {op:resolve,queue:email}=1]",
	} {
		if got := fmt.Sprint(tel.points(t, name)); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// statsQueue is a skipjack.QueueAdmin whose Stats returns fixed figures.
type statsQueue struct {
	skipjack.QueueAdmin // the other methods are not used
	name                string
	stats               skipjack.Stats
	err                 error
}

func (q statsQueue) Name() string { return q.name }
func (q statsQueue) Stats(context.Context) (skipjack.Stats, error) {
	return q.stats, q.err
}

// TestObserveQueues checks the queue gauges at collection time, that a
// queue whose Stats fails leaves the others reported, and that
// unregistering stops them.
func TestObserveQueues(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	reg, err := skipjackotel.ObserveQueues([]skipjack.QueueAdmin{
		statsQueue{name: "email", stats: skipjack.Stats{Pending: 5, Scheduled: 2, Running: 3, Completed: 0, Failed: 1, OldestPending: 90 * time.Second}},
		statsQueue{name: "broken", err: errors.New("database is down")},
	}, skipjackotel.WithMeterProvider(tel.mp))
	if err != nil {
		t.Fatalf("ObserveQueues: %v", err)
	}
	wantDepth := "[{queue:email,state:completed}=0 {queue:email,state:failed}=1 {queue:email,state:pending}=5 {queue:email,state:running}=3 {queue:email,state:scheduled}=2]"
	if got := fmt.Sprint(tel.points(t, "skipjack.queue.jobs")); got != wantDepth {
		t.Errorf("skipjack.queue.jobs = %s, want %s", got, wantDepth)
	}
	if got := fmt.Sprint(tel.points(t, "skipjack.queue.oldest_pending_age")); got != "[{queue:email}=90]" {
		t.Errorf("skipjack.queue.oldest_pending_age = %s, want 90s for email", got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := tel.points(t, "skipjack.queue.jobs"); len(got) != 0 {
		t.Errorf("after Unregister: %v, want nothing", got)
	}
}
