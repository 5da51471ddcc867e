package skipjack

import (
	"fmt"
	"strings"
	"time"
)

// QueueFlow is what a QueueAdmin may also implement to describe the flow
// control its YAML declares: limits and serial key. The Admin of every
// generated queue package and the skipjack CLI's implement it; tools check
// for it at run time (a type assertion), as for QueueInsights.
type QueueFlow interface {
	// Flow returns the queue's declared limits and serial key.
	Flow() FlowInfo
}

// FlowInfo describes a queue's flow control as its YAML declares it. The
// zero value is a queue without limits or serial key.
type FlowInfo struct {
	// Concurrency is limits.concurrency: how many jobs of the queue may be
	// claimed (running or prefetched) at once in all processes; 0 for no
	// limit. Stats.Running is how many slots are in use.
	Concurrency int
	// RateCount and RatePer are limits.rate: at most RateCount jobs
	// started in any window of RatePer; RateCount is 0 for no rate limit.
	RateCount int
	RatePer   time.Duration
	// PerKeyBy and PerKeyConcurrency are limits.per_key: at most
	// PerKeyConcurrency claimed jobs per key made of the payload fields
	// PerKeyBy; PerKeyBy is empty for no per-key limit.
	PerKeyBy          []string
	PerKeyConcurrency int
	// Serial reports whether jobs with equal serial keys run one at a
	// time.
	Serial bool
}

// Limited reports whether the queue declares any limit.
func (f FlowInfo) Limited() bool {
	return f.Concurrency > 0 || f.RateCount > 0 || f.PerKeyConcurrency > 0
}

// String describes the flow control in a line, such as "concurrency 50,
// per key (tenant_id) 2", or returns "" for none.
func (f FlowInfo) String() string {
	var parts []string
	if f.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", f.Concurrency))
	}
	if f.RateCount > 0 {
		parts = append(parts, fmt.Sprintf("rate %d per %s", f.RateCount, f.RatePer))
	}
	if f.PerKeyConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("per key (%s) %d", strings.Join(f.PerKeyBy, ", "), f.PerKeyConcurrency))
	}
	if f.Serial {
		parts = append(parts, "serial")
	}
	return strings.Join(parts, ", ")
}
