package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// errRateLimited is what a handler's API client returns when told to back
// off.
var errRateLimited = errors.New("429 too many requests")

// requestIDKey carries a request id derived from the job through the
// handler's context.
type requestIDKey struct{}

// Middleware adds a value to every handler's context and turns a rate
// limit into a snooze, so that it costs no attempt. Give it to a worker
// with WorkerConfig.Middleware or to every worker of a group with
// GroupConfig.Middleware; the first of a list is the outermost.
func ExampleMiddleware() {
	backoff := func(ctx context.Context, job skipjack.JobInfo, next func(context.Context) error) error {
		ctx = context.WithValue(ctx, requestIDKey{}, fmt.Sprintf("%s-%d-%d", job.Queue, job.ID, job.Attempt))
		err := next(ctx)
		if errors.Is(err, errRateLimited) {
			return skipjack.Snooze(30 * time.Second)
		}
		return err
	}
	cfg := skipjack.WorkerConfig{Middleware: []skipjack.Middleware{backoff}}

	// What a worker does with the chain, by hand: the handler runs as next.
	handler := func(ctx context.Context) error {
		fmt.Println("handler sees request", ctx.Value(requestIDKey{}))
		return errRateLimited
	}
	err := cfg.Middleware[0](context.Background(), skipjack.JobInfo{Queue: "send_email", ID: 7, Attempt: 1}, handler)
	var snooze *skipjack.SnoozeError
	fmt.Println("snoozed:", errors.As(err, &snooze), snooze.Duration)
	// Output:
	// handler sees request send_email-7-1
	// snoozed: true 30s
}
