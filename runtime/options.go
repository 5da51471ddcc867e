package skipjack

import (
	"fmt"
	"time"
)

// EnqueueOption adjusts one Enqueue or EnqueueMany call. Create options with
// RunAt, Delay and Priority.
type EnqueueOption func(*EnqueueOpts)

// EnqueueOpts is the result of applying EnqueueOptions. Generated code reads
// it; applications use the option functions instead.
type EnqueueOpts struct {
	// RunAt is an absolute time to run at (application clock), or nil.
	RunAt *time.Time
	// Delay is added to the database's now() when RunAt is nil.
	Delay time.Duration
	// Priority is the job's priority, 0 (first) to 9 (last).
	Priority int16

	priority    int
	hasPriority bool
}

// RunAt schedules the job to run no earlier than t. It is the only option
// that carries the application's clock; prefer Delay when clocks may differ.
func RunAt(t time.Time) EnqueueOption {
	return func(o *EnqueueOpts) { o.RunAt = &t; o.Delay = 0 }
}

// Delay schedules the job to run d after the database's current time.
func Delay(d time.Duration) EnqueueOption {
	return func(o *EnqueueOpts) { o.Delay = d; o.RunAt = nil }
}

// Priority sets the job's priority from 0 (runs first) to 9 (runs last). It
// is only accepted by queues declared with priority: true.
func Priority(p int) EnqueueOption {
	return func(o *EnqueueOpts) { o.priority = p; o.hasPriority = true }
}

// NewEnqueueOpts applies opts for the queue described by spec and validates
// the result.
func NewEnqueueOpts(spec QueueSpec, opts []EnqueueOption) (EnqueueOpts, error) {
	var o EnqueueOpts
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.hasPriority {
		if !spec.Priority {
			return o, fmt.Errorf("enqueue %s: Priority given but the queue is not declared with priority: true", spec.Name)
		}
		if o.priority < 0 || o.priority > 9 {
			return o, fmt.Errorf("enqueue %s: priority %d is outside 0..9", spec.Name, o.priority)
		}
		o.Priority = int16(o.priority)
	}
	if o.Delay < 0 {
		return o, fmt.Errorf("enqueue %s: negative delay %v", spec.Name, o.Delay)
	}
	return o, nil
}
