package skipjackotel_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	skipjackotel "github.com/skipjack-dev/skipjack/otel"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// This example exports a worker's metrics to Prometheus: an OpenTelemetry
// meter provider reading through the Prometheus exporter into a registry
// that /metrics serves. In a service the hooks go into every worker's
// config, and ObserveQueues gets each queue's Admin(pool):
//
//	w := sendemail.NewWorker(pool, handle, skipjack.WorkerConfig{Hooks: hooks})
//	reg, err := skipjackotel.ObserveQueues([]skipjack.QueueAdmin{sendemail.Admin(pool)},
//		skipjackotel.WithMeterProvider(provider))
//
// Here the hooks are called by hand, as a worker calls them for one
// attempt, to show what Prometheus scrapes.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	hooks, err := skipjackotel.New(skipjackotel.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}
	cfg := skipjack.WorkerConfig{Hooks: hooks} // for each queue's NewWorker
	_ = cfg
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	// What a worker reports for one claim, one completed attempt and its
	// acknowledgement.
	job := skipjack.JobInfo{Queue: "send_email", ID: 1, Attempt: 1, MaxAttempts: 25, RunAt: time.Now()}
	hooks.ClaimDone(skipjack.ClaimInfo{Queue: "send_email", Limit: 100, Jobs: 1, Took: time.Millisecond})
	ctx := hooks.JobStart(context.Background(), job)
	hooks.JobEnd(ctx, job, skipjack.AttemptResult{Outcome: skipjack.OutcomeCompleted, Took: 20 * time.Millisecond})
	hooks.AckDone(skipjack.AckInfo{Queue: "send_email", Op: skipjack.AckComplete, Jobs: 1, Matched: 1, Took: time.Millisecond})

	families, err := registry.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "skipjack_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Printf("%s %s %s\n", f.GetType(), f.GetName(), strings.Join(labels, ","))
		}
	}
	// Output:
	// HISTOGRAM skipjack_ack_duration_seconds op=complete,queue=send_email
	// HISTOGRAM skipjack_claim_duration_seconds queue=send_email
	// COUNTER skipjack_claim_jobs_total queue=send_email
	// COUNTER skipjack_job_attempts_total outcome=completed,queue=send_email
	// HISTOGRAM skipjack_job_duration_seconds outcome=completed,queue=send_email
	// HISTOGRAM skipjack_job_wait_seconds queue=send_email
}
