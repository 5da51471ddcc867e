package skipjack

import (
	"fmt"
	"strings"
)

// Limited reports whether the queue declares any limit.
func (f Limits) Limited() bool {
	return f.Concurrency > 0 || f.RateCount > 0 || f.PerKeyConcurrency > 0
}

// String describes the declared flow control in a line, such as "concurrency 50,
// per key (tenant_id) 2", or returns "" for none.
func (f Limits) String() string {
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
