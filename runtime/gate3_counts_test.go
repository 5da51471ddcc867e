package skipjack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestGate3CountsKeptForADay checks the pruning of the counts behind the
// dashboard's charts: the first write of a worker in a minute deletes the
// queue's counts older than 25 hours (the "last day" chart reads a day),
// and keeps every minute of the last day. Rows of 30 minutes, 24.5 hours
// and 26 hours ago are planted; once a worker's result (a completion, or a
// failure, which another statement writes) is counted, the 26-hour row is
// gone, which shows the pruning ran, and the other two are still there.
func TestGate3CountsKeptForADay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{"completed", nil},
		{"failed", skipjack.Permanent(errors.New("no"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `INSERT INTO skipjack._skipjack_counts (queue, minute, worker, completed)
				SELECT 'demo', date_trunc('minute', now() - d), 'old', 1
				FROM unnest(ARRAY[interval '30 minutes', interval '24 hours 30 minutes', interval '26 hours']) AS d`); err != nil {
				t.Fatal(err)
			}
			if _, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1}); err != nil {
				t.Fatal(err)
			}
			start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error { return tt.err },
				skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
			waitFor(t, 30*time.Second, "the result to be counted", func() bool {
				return queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_counts WHERE worker <> 'old'`) > 0
			})
			if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_counts WHERE worker = 'old' AND minute < now() - interval '25 hours'`); n != 0 {
				t.Fatalf("the counts of 26 hours ago were not pruned (%d rows)", n)
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_counts WHERE worker = 'old'`); n != 2 {
				t.Errorf("%d of the counts of 30 minutes and 24.5 hours ago are left, want both: the charts read the last day", n)
			}
		})
	}
}
