package skipjackotel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	skipjackotel "github.com/skipjack-dev/skipjack/otel"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// This example makes a job's attempts part of the trace of the request
// that enqueued it. The wiring is one call at start-up, next to the
// OpenTelemetry SDK's own set-up, plus the hooks in every worker's config:
//
//	otel.SetTextMapPropagator(propagation.TraceContext{})
//	skipjack.SetTracePropagator(skipjackotel.Propagator())
//	hooks, err := skipjackotel.New()
//	w := sendemail.NewWorker(pool, handle, skipjack.WorkerConfig{Hooks: hooks})
//
// after which sendemail.Enqueue(ctx, ...) inside a span stores that span's
// trace context with the job. Here the hooks are called by hand with what a
// worker would pass them.
func Example_tracing() {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer provider.Shutdown(context.Background())
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	skipjack.SetTracePropagator(skipjackotel.Propagator())
	defer skipjack.SetTracePropagator(nil)
	hooks, err := skipjackotel.New()
	if err != nil {
		log.Fatal(err)
	}

	// A request enqueues a job inside its span: Enqueue stores what the
	// propagator injects for its ctx in the job's trace column.
	ctx, request := otel.Tracer("shop").Start(context.Background(), "POST /signup")
	stored := skipjackotel.Propagator().Inject(ctx) // what sendemail.Enqueue(ctx, pool, p) stores
	request.End()

	// A worker claims the job and hands the stored context to the hooks.
	job := skipjack.JobInfo{Queue: "send_email", ID: 1, Attempt: 1, MaxAttempts: 25, RunAt: time.Now(), Trace: stored}
	hctx := hooks.JobStart(context.Background(), job)
	hooks.JobEnd(hctx, job, skipjack.AttemptResult{Outcome: skipjack.OutcomeCompleted})

	for _, s := range recorder.Ended() {
		fmt.Printf("%s: in the request's trace %v, parent is the request's span %v\n", s.Name(),
			s.SpanContext().TraceID() == request.SpanContext().TraceID(), s.Parent().SpanID() == request.SpanContext().SpanID())
	}
	// Output:
	// POST /signup: in the request's trace true, parent is the request's span false
	// process send_email: in the request's trace true, parent is the request's span true
}
