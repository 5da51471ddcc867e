package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// queueStats is one queue's line of stats --json: skipjack.Stats with the
// queue's name, the oldest pending job's wait in seconds, and that wait
// again as lateness, 0 for a paused queue.
type queueStats struct {
	Queue     string `json:"queue"`
	Pending   int64  `json:"pending"`
	Scheduled int64  `json:"scheduled"`
	Running   int64  `json:"running"`
	Completed int64  `json:"completed"`
	Failed    int64  `json:"failed"`
	// OldestPendingSeconds is how long the oldest due pending job has
	// waited, in seconds (millisecond precision).
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
	// OldestPending is the same in nanoseconds (a time.Duration), the key
	// that stats --json printed first; kept for the scripts that read it.
	//
	// Deprecated: use OldestPendingSeconds.
	OldestPending time.Duration `json:"oldest_pending"`
	// Paused reports whether the queue is paused (skipjack queues pause).
	Paused bool `json:"paused"`
	// LateSeconds is how late the queue is: OldestPendingSeconds while it
	// runs, 0 while it is paused, since a paused queue's jobs wait on
	// purpose. Alert on this rather than on OldestPendingSeconds, so a
	// deliberate pause does not page anyone.
	LateSeconds float64 `json:"late_seconds"`
	// Limits is the queue's flow control as its YAML declares it, such as
	// "concurrency 50, per key (tenant_id) 2"; "" for none. Running is
	// how many of the concurrency slots are in use.
	Limits string `json:"limits,omitempty"`
}

// stats prints the counts of every live queue, as a table or as JSON.
func stats(o options, e env) error {
	return withQueues(o, func(ctx context.Context, _ *config.Config, admins []*tableadmin.Admin) error {
		rows := make([]queueStats, 0, len(admins))
		for _, q := range admins {
			s, err := q.Stats(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", q.Name(), err)
			}
			r := newQueueStats(q.Name(), s)
			r.Limits = q.Declared().String()
			rows = append(rows, r)
		}
		if o.asJSON {
			raw, err := json.Marshal(rows)
			if err != nil {
				return fmt.Errorf("print stats: %w", err)
			}
			return printJSON(e, raw)
		}
		return printStats(e, rows)
	})
}

// newQueueStats is the stats line of queue name.
func newQueueStats(name string, s skipjack.Stats) queueStats {
	r := queueStats{
		Queue: name, Pending: s.Pending, Scheduled: s.Scheduled, Running: s.Running,
		Completed: s.Completed, Failed: s.Failed,
		OldestPendingSeconds: s.OldestPending.Round(time.Millisecond).Seconds(),
		OldestPending:        s.OldestPending,
		Paused:               s.Paused,
	}
	if !s.Paused {
		r.LateSeconds = r.OldestPendingSeconds
	}
	return r
}

// printStats prints rows as a table: queue names left-aligned (a paused
// queue's marked so), counts right-aligned under their headers, and the
// oldest pending job's wait, which for a paused queue reads "paused"
// before it: its jobs wait on purpose, they are not late.
func printStats(e env, rows []queueStats) error {
	width := len("QUEUE")
	for i, r := range rows {
		if r.Paused {
			rows[i].Queue += " (paused)"
		}
		width = max(width, len(rows[i].Queue))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-*s  %9s  %9s  %9s  %9s  %9s  %14s\n", width, "QUEUE", "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "OLDEST PENDING")
	for _, r := range rows {
		oldest := time.Duration(r.OldestPendingSeconds * float64(time.Second)).Round(time.Millisecond)
		wait := oldest.String()
		if r.Paused {
			wait = "paused " + wait
		}
		fmt.Fprintf(&b, "%-*s  %9d  %9d  %9d  %9d  %9d  %14s\n", width, r.Queue, r.Pending, r.Scheduled, r.Running, r.Completed, r.Failed, wait)
	}
	// The flow control of the queues that declare any, below the counts.
	for _, r := range rows {
		if r.Limits != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.Queue, r.Limits)
		}
	}
	_, err := e.stdout.Write(b.Bytes())
	return err
}
