package skipjack

import "time"

// Stats counts a queue's jobs by state.
type Stats struct {
	// Pending counts pending jobs that are due.
	Pending int64 `json:"pending"`
	// Scheduled counts pending jobs whose run_at is in the future (delays,
	// backoff, snoozes).
	Scheduled int64 `json:"scheduled"`
	// Running counts claimed jobs.
	Running int64 `json:"running"`
	// Completed counts retained completed jobs (0 when they are deleted at
	// ack), up to StatsRetainedCap.
	Completed int64 `json:"completed"`
	// Failed counts retained failed jobs, up to StatsRetainedCap.
	Failed int64 `json:"failed"`
	// OldestPending is how long the oldest due pending job has waited.
	OldestPending time.Duration `json:"oldest_pending"`
	// Paused reports whether the queue is paused: no process claims its
	// jobs until it is resumed.
	Paused bool `json:"paused"`
}

// StatsRetainedCap is where Stats stops counting retained completed and
// failed jobs, so that polling Stats never scans a large history: a count
// equal to it means "at least".
const StatsRetainedCap = 100_000
