// Package skipjackotel reports skipjack workers to OpenTelemetry: metrics
// of every attempt, claim and acknowledgement, queue depth gauges, and one
// trace span per attempt. It is its own module, so the runtime stays
// dependent on pgx alone.
//
//	import skipjackotel "github.com/skipjack-dev/skipjack/otel"
//
//	hooks, err := skipjackotel.New() // global providers, or WithMeterProvider/WithTracerProvider
//	w := sendemail.NewWorker(pool, handle, skipjack.WorkerConfig{Hooks: hooks})
//	reg, err := skipjackotel.ObserveQueues([]skipjack.QueueAdmin{sendemail.Admin(pool)})
//
// Metrics (names as OpenTelemetry sees them; the Prometheus exporter turns
// skipjack.job.attempts into skipjack_job_attempts_total and
// skipjack.job.duration, in seconds, into skipjack_job_duration_seconds):
//
//   - skipjack.job.attempts (counter; queue, outcome): attempts by outcome:
//     completed, retried, snoozed, failed, cancelled, lease_lost.
//   - skipjack.job.duration (histogram, s; queue, outcome): handler run time.
//   - skipjack.job.wait (histogram, s; queue): from a job's run_at to the
//     start of its attempt, i.e. how far workers lag behind due jobs.
//   - skipjack.claim.duration (histogram, s; queue): claim statements.
//   - skipjack.claim.jobs (counter; queue): jobs claimed.
//   - skipjack.ack.duration (histogram, s; queue, op): batched result
//     writes; op is complete or resolve.
//   - skipjack.ack.lost (counter; queue, op): results that matched no
//     running attempt because the lease was lost; those jobs may run again.
//   - skipjack.db.errors (counter; queue, op): failed claim, complete and
//     resolve statements (the worker retries them with backoff).
//   - skipjack.queue.jobs (gauge; queue, state) and
//     skipjack.queue.oldest_pending_age (gauge, s; queue): from each
//     queue's Stats at collection time (ObserveQueues).
//
// Traces: one span per attempt, named "process <queue>", of kind consumer,
// started right before the handler with the handler's context, so spans
// the handler starts are its children. The span carries the job's id,
// attempt and outcome; a failed attempt records its error and an Error
// status.
//
// To make attempts part of the trace of the code that enqueued their job,
// register Propagator once at start-up:
//
//	skipjack.SetTracePropagator(skipjackotel.Propagator())
//
// Every Enqueue and EnqueueMany then stores the W3C trace context of its
// ctx (traceparent, tracestate: whatever the propagator writes) with the
// job, and the attempt's span is a child of the enqueuing span, with a
// span link to it as well (the OpenTelemetry messaging conventions' way
// to name a message's creation context). With WithRootSpans each attempt
// starts a trace of its own, linked to the enqueuing span, which keeps
// traces short when jobs are delayed for long or retried for days. A job
// without a stored trace context (enqueued without a span, by SQL, or by
// a schedule) gets a root span.
package skipjackotel

import (
	"context"
	"errors"
	"strconv"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meters and tracers.
const ScopeName = "github.com/skipjack-dev/skipjack/otel"

// durationBuckets are the histogram bounds, in seconds: from a fast
// statement to a handler that runs for minutes.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Option configures New and ObserveQueues.
type Option func(*config)

type config struct {
	mp           metric.MeterProvider
	tp           trace.TracerProvider
	prop         propagation.TextMapPropagator
	rootSpans    bool
	statsTimeout time.Duration
}

// WithMeterProvider sets the meter provider. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the tracer provider. Default
// otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator sets the propagator that Propagator injects the
// enqueuer's trace context with and that the hooks extract it with; use
// the same on both sides. Default otel.GetTextMapPropagator(), which
// propagates nothing until the application calls otel.SetTextMapPropagator
// (with propagation.TraceContext{}, say), as most OpenTelemetry set-ups do.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// WithRootSpans makes every attempt's span the root of a trace of its own,
// linked to the enqueuing span, instead of that span's child. Use it when
// jobs run long after they were enqueued (delays, retries over hours), so
// that a request's trace does not grow with every attempt of its jobs.
func WithRootSpans() Option { return func(c *config) { c.rootSpans = true } }

// WithStatsTimeout bounds each queue's Stats query in ObserveQueues.
// Default 5s.
func WithStatsTimeout(d time.Duration) Option { return func(c *config) { c.statsTimeout = d } }

func newConfig(opts []Option) config {
	c := config{statsTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	return c
}

// Propagator returns the skipjack.TracePropagator to register with
// skipjack.SetTracePropagator: it injects the trace context of an Enqueue
// call's ctx with the configured propagator (WithPropagator; the other
// options do not apply), and returns nil when that writes nothing (no
// span in ctx), so untraced jobs store NULL.
func Propagator(opts ...Option) skipjack.TracePropagator {
	return tracePropagator{p: newConfig(opts).prop}
}

// tracePropagator implements skipjack.TracePropagator.
type tracePropagator struct{ p propagation.TextMapPropagator }

func (t tracePropagator) Inject(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	t.p.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// Hooks reports worker events to OpenTelemetry. Set it as
// skipjack.WorkerConfig.Hooks (one value may serve every worker of a
// process); combine it with other hooks with skipjack.MultiHooks. Create it
// with New.
type Hooks struct {
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	rootSpans bool
	attempts  metric.Int64Counter
	duration  metric.Float64Histogram
	wait      metric.Float64Histogram
	claimTime metric.Float64Histogram
	claimJobs metric.Int64Counter
	ackTime   metric.Float64Histogram
	ackLost   metric.Int64Counter
	dbErrors  metric.Int64Counter
}

// The hooks Hooks implements.
var (
	_ skipjack.Hooks        = (*Hooks)(nil)
	_ skipjack.JobStartHook = (*Hooks)(nil)
	_ skipjack.JobEndHook   = (*Hooks)(nil)
	_ skipjack.ClaimHook    = (*Hooks)(nil)
	_ skipjack.AckHook      = (*Hooks)(nil)
)

// New returns Hooks recording to the configured providers.
func New(opts ...Option) (*Hooks, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	h := &Hooks{tracer: c.tp.Tracer(ScopeName), prop: c.prop, rootSpans: c.rootSpans}
	var errs []error
	seconds := func(name, desc string) metric.Float64Histogram {
		hist, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return hist
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	h.attempts = count("skipjack.job.attempts", "{attempt}", "Job attempts by queue and outcome.")
	h.duration = seconds("skipjack.job.duration", "How long job handlers ran, by queue and outcome.")
	h.wait = seconds("skipjack.job.wait", "How long due jobs waited for a worker: from run_at to the start of the attempt.")
	h.claimTime = seconds("skipjack.claim.duration", "How long claim statements took.")
	h.claimJobs = count("skipjack.claim.jobs", "{job}", "Jobs claimed.")
	h.ackTime = seconds("skipjack.ack.duration", "How long batched result writes (complete, resolve) took.")
	h.ackLost = count("skipjack.ack.lost", "{job}", "Job results that matched no running attempt (lease lost); those jobs may run again.")
	h.dbErrors = count("skipjack.db.errors", "{error}", "Failed claim, complete and resolve statements.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// spanKey holds the attempt's span in the context JobStart returns, so
// JobEnd ends this adapter's span even when other hooks or the handler
// derive contexts with spans of their own.
type spanKey struct{}

// JobStart starts the attempt's span and records how long the job waited.
// The span continues the trace stored with the job (JobInfo.Trace) as the
// enqueuing span's child, linked to it, or as a linked root with
// WithRootSpans; without a stored trace it is a root. It never becomes a
// child of a span in the worker's own context. Baggage stored with the
// job reaches the handler's context.
func (h *Hooks) JobStart(ctx context.Context, job skipjack.JobInfo) context.Context {
	h.wait.Record(ctx, max(time.Since(job.RunAt), 0).Seconds(), metric.WithAttributes(attribute.String("queue", job.Queue)))
	newRoot := true
	var links []trace.Link
	if len(job.Trace) > 0 {
		enq := h.prop.Extract(context.Background(), propagation.MapCarrier(job.Trace))
		if b := baggage.FromContext(enq); b.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
		if sc := trace.SpanContextFromContext(enq); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
			if !h.rootSpans {
				// The stored context replaces any span of the worker's
				// context as the parent.
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
				newRoot = false
			}
		}
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("messaging.system", "skipjack"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", job.Queue),
			attribute.String("messaging.message.id", strconv.FormatInt(job.ID, 10)),
			attribute.Int("skipjack.job.attempt", job.Attempt),
			attribute.Int("skipjack.job.max_attempts", job.MaxAttempts),
			attribute.String("skipjack.worker", job.Worker),
		),
	}
	if newRoot {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := h.tracer.Start(ctx, "process "+job.Queue, opts...)
	return context.WithValue(ctx, spanKey{}, span)
}

// JobEnd counts the attempt, records its duration and ends its span.
func (h *Hooks) JobEnd(ctx context.Context, job skipjack.JobInfo, res skipjack.AttemptResult) {
	attrs := metric.WithAttributes(attribute.String("queue", job.Queue), attribute.String("outcome", string(res.Outcome)))
	h.attempts.Add(ctx, 1, attrs)
	h.duration.Record(ctx, res.Took.Seconds(), attrs)

	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	span.SetAttributes(attribute.String("skipjack.outcome", string(res.Outcome)))
	if res.Delay > 0 {
		span.SetAttributes(attribute.Float64("skipjack.retry_in_seconds", res.Delay.Seconds()))
	}
	if res.Err != nil && res.Outcome != skipjack.OutcomeSnoozed {
		span.RecordError(res.Err)
		span.SetStatus(codes.Error, res.Err.Error())
	}
	span.End()
}

// ClaimDone records a claim statement.
func (h *Hooks) ClaimDone(c skipjack.ClaimInfo) {
	ctx := context.Background()
	q := attribute.String("queue", c.Queue)
	h.claimTime.Record(ctx, c.Took.Seconds(), metric.WithAttributes(q))
	if c.Err != nil {
		h.dbErrors.Add(ctx, 1, metric.WithAttributes(q, attribute.String("op", "claim")))
		return
	}
	h.claimJobs.Add(ctx, int64(c.Jobs), metric.WithAttributes(q))
}

// AckDone records a batched write of results.
func (h *Hooks) AckDone(a skipjack.AckInfo) {
	ctx := context.Background()
	attrs := metric.WithAttributes(attribute.String("queue", a.Queue), attribute.String("op", a.Op))
	h.ackTime.Record(ctx, a.Took.Seconds(), attrs)
	if a.Err != nil {
		h.dbErrors.Add(ctx, 1, attrs)
		return
	}
	if lost := a.Jobs - a.Matched; lost > 0 {
		h.ackLost.Add(ctx, int64(lost), attrs)
	}
}

// ObserveQueues registers the gauges skipjack.queue.jobs (by queue and
// state: pending, scheduled, running, completed, failed) and
// skipjack.queue.oldest_pending_age (seconds, by queue), read with each
// queue's Stats (one query per queue, bounded by WithStatsTimeout) every
// time the meter provider collects. Pass each generated package's
// Admin(pool). A queue whose Stats fails is left out of that collection
// and the error goes to otel.Handle. Unregister the returned registration
// to stop.
func ObserveQueues(queues []skipjack.QueueAdmin, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	depth, err := m.Int64ObservableGauge("skipjack.queue.jobs", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs in the queue table by state: pending (due), scheduled (pending, run_at in the future), running, completed (retained), failed."))
	if err != nil {
		return nil, err
	}
	age, err := m.Float64ObservableGauge("skipjack.queue.oldest_pending_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest due pending job: how far the queue is behind."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		for _, q := range queues {
			sctx, cancel := context.WithTimeout(ctx, c.statsTimeout)
			s, err := q.Stats(sctx)
			cancel()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			name := attribute.String("queue", q.Name())
			for _, x := range []struct {
				state string
				n     int64
			}{
				{skipjack.StatePending, s.Pending}, {"scheduled", s.Scheduled}, {skipjack.StateRunning, s.Running},
				{skipjack.StateCompleted, s.Completed}, {skipjack.StateFailed, s.Failed},
			} {
				o.ObserveInt64(depth, x.n, metric.WithAttributes(name, attribute.String("state", x.state)))
			}
			o.ObserveFloat64(age, s.OldestPending.Seconds(), metric.WithAttributes(name))
		}
		if err := errors.Join(errs...); err != nil {
			otel.Handle(err)
		}
		return nil
	}, depth, age)
}
