package skipjackotel_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	skipjackotel "github.com/skipjack-dev/skipjack/otel"
	"github.com/skipjack-dev/skipjack/otel/internal/testjobs"
	"github.com/skipjack-dev/skipjack/otel/internal/testjobs/notifyuser"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// w3c is the propagator of these tests, passed explicitly so that they do
// not depend on (or change) the global one.
var w3c = skipjackotel.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

// TestPropagatorInjects checks what Propagator stores: the W3C trace
// context of a ctx with a span, nothing (NULL) for a ctx without one.
func TestPropagatorInjects(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	p := skipjackotel.Propagator(w3c)
	if got := p.Inject(context.Background()); got != nil {
		t.Errorf("Inject without a span = %v, want nil", got)
	}
	ctx, span := tel.tp.Tracer("app").Start(context.Background(), "checkout")
	defer span.End()
	got := p.Inject(ctx)
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if len(got) != 1 || got["traceparent"] != want {
		t.Errorf("Inject in a span = %v, want only traceparent %s", got, want)
	}
}

// attemptSpan returns the one "process <queue>" span recorded.
func attemptSpan(t *testing.T, spans tracetest.SpanStubs, queue string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "process "+queue {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d attempt spans of %s, want 1 (spans: %v)", len(found), queue, spans)
	}
	return found[0]
}

// linksTo reports whether s has exactly one link, to sc.
func linksTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	return len(s.Links) == 1 && s.Links[0].SpanContext.TraceID() == sc.TraceID() && s.Links[0].SpanContext.SpanID() == sc.SpanID()
}

// TestAttemptContinuesEnqueuersTrace runs an attempt through the worker's
// execute path with the trace context an Enqueue inside a span stored,
// and checks that the attempt's span is that span's child (and linked to
// it), that the handler's spans and the enqueuer's baggage follow, and
// that WithRootSpans makes it a linked root instead.
func TestAttemptContinuesEnqueuersTrace(t *testing.T) {
	t.Parallel()
	for _, roots := range []bool{false, true} {
		name := "child"
		if roots {
			name = "WithRootSpans"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			opts := []skipjackotel.Option{skipjackotel.WithTracerProvider(tel.tp), skipjackotel.WithMeterProvider(tel.mp), w3c}
			if roots {
				opts = append(opts, skipjackotel.WithRootSpans())
			}
			hooks, err := skipjackotel.New(opts...)
			if err != nil {
				t.Fatal(err)
			}

			member, _ := baggage.NewMember("tenant", "acme")
			bag, _ := baggage.New(member)
			ctx := baggage.ContextWithBaggage(context.Background(), bag)
			ctx, enqueue := tel.tp.Tracer("app").Start(ctx, "checkout")
			stored := skipjackotel.Propagator(w3c).Inject(ctx)
			enqueue.End()
			parent := enqueue.SpanContext()

			var tenant string
			var handlerSpan trace.SpanContext
			res := skipjacktest.RunJob(t, spec, func(ctx context.Context, job *skipjack.Job[payload]) error {
				tenant = baggage.FromContext(ctx).Member("tenant").Value()
				_, child := tel.tp.Tracer("app").Start(ctx, "send mail")
				handlerSpan = child.SpanContext()
				child.End()
				return nil
			}, payload{To: "ada@example.com"}, skipjacktest.Trace(stored), skipjacktest.WorkerConfig(skipjack.WorkerConfig{Hooks: hooks}))
			if res.Outcome != skipjack.OutcomeCompleted || res.Job.Trace["traceparent"] != stored["traceparent"] {
				t.Fatalf("RunJob = %s (%v), Job.Trace %v; want completed with trace %v", res.Outcome, res.Err, res.Job.Trace, stored)
			}

			s := attemptSpan(t, tel.spans.GetSpans(), "email")
			if !linksTo(s, parent) {
				t.Errorf("attempt span links %v, want one link to the enqueuing span %v", s.Links, parent.SpanID())
			}
			if roots {
				if s.Parent.IsValid() || s.SpanContext.TraceID() == parent.TraceID() {
					t.Errorf("attempt span: trace %v, parent %v; want the root of a new trace", s.SpanContext.TraceID(), s.Parent)
				}
			} else if s.SpanContext.TraceID() != parent.TraceID() || s.Parent.SpanID() != parent.SpanID() || !s.Parent.IsRemote() {
				t.Errorf("attempt span: trace %v, parent %v; want trace %v, remote parent %v (the enqueuing span)",
					s.SpanContext.TraceID(), s.Parent.SpanID(), parent.TraceID(), parent.SpanID())
			}
			if handlerSpan.TraceID() != s.SpanContext.TraceID() {
				t.Errorf("handler's span is in trace %v, want the attempt's %v", handlerSpan.TraceID(), s.SpanContext.TraceID())
			}
			if tenant != "acme" {
				t.Errorf("handler's baggage tenant = %q, want the enqueuer's acme", tenant)
			}
		})
	}
}

// TestAttemptWithoutTraceIsARoot checks that a job whose stored trace
// context holds no valid span context (a SQL producer's junk) gets a root
// span without links, as a job without one does (TestAttempts).
func TestAttemptWithoutTraceIsARoot(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	hooks, err := skipjackotel.New(skipjackotel.WithTracerProvider(tel.tp), skipjackotel.WithMeterProvider(tel.mp), w3c)
	if err != nil {
		t.Fatal(err)
	}
	res := skipjacktest.RunJob(t, spec, func(context.Context, *skipjack.Job[payload]) error { return nil },
		payload{}, skipjacktest.Trace(map[string]string{"traceparent": "garbage"}), skipjacktest.WorkerConfig(skipjack.WorkerConfig{Hooks: hooks}))
	if res.Outcome != skipjack.OutcomeCompleted {
		t.Fatalf("RunJob = %s (%v), want completed", res.Outcome, res.Err)
	}
	if s := attemptSpan(t, tel.spans.GetSpans(), "email"); s.Parent.IsValid() || len(s.Links) != 0 {
		t.Errorf("attempt span has parent %v and links %v, want a root without links", s.Parent, s.Links)
	}
}

var registerPropagator sync.Once

// TestEnqueueToAttempt is the whole path on PostgreSQL: with Propagator
// registered, a job enqueued inside a span runs in an attempt span that is
// that span's child, and a job enqueued without a span runs in a root span
// (its trace column NULL).
func TestEnqueueToAttempt(t *testing.T) {
	t.Parallel()
	registerPropagator.Do(func() { skipjack.SetTracePropagator(skipjackotel.Propagator(w3c)) })
	tel := newTelemetry(t)
	hooks, err := skipjackotel.New(skipjackotel.WithTracerProvider(tel.tp), skipjackotel.WithMeterProvider(tel.mp), w3c)
	if err != nil {
		t.Fatal(err)
	}
	pool := skipjacktest.NewPool(t)
	ctx := context.Background()
	if err := testjobs.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}

	spanCtx, enqueue := tel.tp.Tracer("app").Start(ctx, "signup")
	tracedID, err := notifyuser.Enqueue(spanCtx, pool, notifyuser.Payload{UserID: 1})
	enqueue.End()
	if err != nil {
		t.Fatal(err)
	}
	plainID, err := notifyuser.Enqueue(ctx, pool, notifyuser.Payload{UserID: 2})
	if err != nil {
		t.Fatal(err)
	}
	var null bool
	if err := pool.QueryRow(ctx, `SELECT trace IS NULL FROM skipjack.notify_user WHERE id = $1`, plainID).Scan(&null); err != nil || !null {
		t.Errorf("trace column of the job enqueued without a span: NULL %v (%v), want NULL", null, err)
	}

	done := make(chan int64, 2)
	w := notifyuser.NewWorker(pool, func(ctx context.Context, job *notifyuser.Job) error {
		done <- job.ID
		return nil
	}, skipjack.WorkerConfig{Hooks: hooks, Concurrency: 2, PollInterval: 50 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	for range 2 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for both jobs to run")
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}

	byJob := map[string]tracetest.SpanStub{}
	for _, s := range tel.spans.GetSpans() {
		if s.Name != "process notify_user" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == "messaging.message.id" {
				byJob[a.Value.AsString()] = s
			}
		}
	}
	parent := enqueue.SpanContext()
	if s, ok := byJob[itoa(tracedID)]; !ok || s.SpanContext.TraceID() != parent.TraceID() || s.Parent.SpanID() != parent.SpanID() {
		t.Errorf("traced job's attempt span (found %v): trace %v, parent %v; want trace %v, parent %v",
			ok, s.SpanContext.TraceID(), s.Parent.SpanID(), parent.TraceID(), parent.SpanID())
	}
	if s, ok := byJob[itoa(plainID)]; !ok || s.Parent.IsValid() || len(s.Links) != 0 {
		t.Errorf("untraced job's attempt span (found %v): parent %v, links %v; want a root without links", ok, s.Parent, s.Links)
	}
}

// TestStoredTraceWinsOverWorkersSpan checks that the enqueuer's span, not
// a span in the worker's own context (Run's context is the handlers'
// parent), becomes the attempt span's parent.
func TestStoredTraceWinsOverWorkersSpan(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	hooks, err := skipjackotel.New(skipjackotel.WithTracerProvider(tel.tp), skipjackotel.WithMeterProvider(tel.mp), w3c)
	if err != nil {
		t.Fatal(err)
	}
	enqCtx, enqueue := tel.tp.Tracer("app").Start(context.Background(), "checkout")
	info := skipjack.JobInfo{Queue: "email", ID: 7, Attempt: 1, MaxAttempts: 3, RunAt: time.Now(),
		Trace: skipjackotel.Propagator(w3c).Inject(enqCtx)}
	enqueue.End()
	runCtx, outer := tel.tp.Tracer("app").Start(context.Background(), "worker main")
	defer outer.End()
	hooks.JobEnd(hooks.JobStart(runCtx, info), info, skipjack.AttemptResult{Outcome: skipjack.OutcomeCompleted})
	s := attemptSpan(t, tel.spans.GetSpans(), "email")
	if s.Parent.SpanID() != enqueue.SpanContext().SpanID() || s.SpanContext.TraceID() != enqueue.SpanContext().TraceID() {
		t.Errorf("attempt span's parent %v in trace %v, want the enqueuing span %v, not the worker's %v",
			s.Parent.SpanID(), s.SpanContext.TraceID(), enqueue.SpanContext().SpanID(), outer.SpanContext().SpanID())
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
