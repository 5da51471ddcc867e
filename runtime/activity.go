package skipjack

import (
	"encoding/json"
	"time"
)

// ActivityMinute is what the workers of one queue recorded in one minute,
// as the statements that acknowledge and resolve jobs count it in the
// schema's counts table (so it covers queues that delete jobs at ack).
type ActivityMinute struct {
	// Minute is the minute's start.
	Minute time.Time `json:"minute"`
	// Completed counts the jobs acknowledged as completed.
	Completed int64 `json:"completed"`
	// Failed counts the jobs that ended failed: attempts used up,
	// permanent errors, cancelled running jobs.
	Failed int64 `json:"failed"`
	// Retried counts the failed attempts that were scheduled to run again.
	Retried int64 `json:"retried"`
	// Waits is a histogram of how long the completed jobs waited from their
	// run_at (for a job enqueued without delay: its enqueue) until their
	// handlers started: Waits[i] counts the waits below WaitBounds[i] and
	// at least WaitBounds[i-1]; the last element counts the waits of at
	// least the last bound. It has len(WaitBounds)+1 elements.
	Waits []int64 `json:"waits"`
}

// WaitBounds are the upper bounds of the buckets of ActivityMinute.Waits.
// Steps of 1-2-5 keep a quantile read from the histogram within a factor
// of 2.5 and make its bounds round numbers.
var WaitBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour,
}

// WaitQuantile returns the bound below which the fraction q (0 < q <= 1)
// of the waits in the histogram waits fall: the upper bound of the bucket
// that holds the quantile. ok is false when the histogram is empty. A
// quantile in the last, unbounded bucket reads as the last bound; over
// reports it, meaning "at least".
func WaitQuantile(waits []int64, q float64) (d time.Duration, over, ok bool) {
	var total int64
	for _, n := range waits {
		total += n
	}
	if total == 0 {
		return 0, false, false
	}
	rank := int64(q*float64(total) + 0.999999)
	rank = max(1, min(rank, total))
	var seen int64
	for i, n := range waits {
		seen += n
		if seen >= rank {
			if i >= len(WaitBounds) {
				return WaitBounds[len(WaitBounds)-1], true, true
			}
			return WaitBounds[i], false, true
		}
	}
	return WaitBounds[len(WaitBounds)-1], true, true
}

// AddWaits adds the histogram src to dst element by element, growing dst
// as needed, and returns it.
func AddWaits(dst, src []int64) []int64 {
	for len(dst) < len(src) {
		dst = append(dst, 0)
	}
	for i, n := range src {
		dst[i] += n
	}
	return dst
}

// FailureGroup is the failed jobs of a queue whose last errors read the
// same once ids and numbers are folded (uuids and long hex strings become
// <id>, digit runs N).
type FailureGroup struct {
	// Error is the normalised error text that the jobs share; a queue's
	// ListParams.ErrorGroup selects them.
	Error string `json:"error"`
	// Example is the most recent of the group's error messages as written.
	Example string `json:"example"`
	// Jobs counts the group's jobs among those read.
	Jobs int64 `json:"jobs"`
	// FirstSeen and LastSeen are when the first and the last of those jobs
	// failed.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// FailureGroupsScan is how many of a queue's most recently failed jobs
// FailureGroups reads, so that grouping never scans a large history.
const FailureGroupsScan = 10_000

// ScheduleInfo describes one periodic job of a queue, as its YAML
// schedule: declares it.
type ScheduleInfo struct {
	// Spec is the schedule as written: "0 6 * * 1", "@hourly", "@every
	// 30s".
	Spec string `json:"spec"`
	// Timezone is the zone the cron fields are read in.
	Timezone string `json:"timezone"`
	// Payload is the payload of the jobs it inserts.
	Payload json.RawMessage `json:"payload"`
	// Missed is "skip" or "once": what happens to slots missed while no
	// worker ran.
	Missed string `json:"missed"`
	// Last is the last slot a worker inserted, or nil.
	Last *time.Time `json:"last"`
	// Next are the next slots, soonest first.
	Next []time.Time `json:"next"`
	// Err says why the schedule cannot run (a time zone that does not
	// load), or is "".
	Err string `json:"error,omitempty"`
}

// ScheduleSlotsShown is how many upcoming slots QueueAdmin.Schedules
// lists per schedule.
const ScheduleSlotsShown = 3
