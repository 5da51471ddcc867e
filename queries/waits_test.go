package queries

import (
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/schema"
)

// TestWaitBoundsMatchRuntime checks that the wait histogram the
// acknowledging statements write (schema.WaitBoundsMS) has the buckets the
// runtime reads it with (skipjack.WaitBounds).
func TestWaitBoundsMatchRuntime(t *testing.T) {
	t.Parallel()
	if len(schema.WaitBoundsMS) != len(skipjack.WaitBounds) {
		t.Fatalf("schema has %d wait bounds, the runtime %d", len(schema.WaitBoundsMS), len(skipjack.WaitBounds))
	}
	for i, ms := range schema.WaitBoundsMS {
		if got := time.Duration(ms) * time.Millisecond; got != skipjack.WaitBounds[i] {
			t.Errorf("wait bound %d: schema %v, runtime %v", i, got, skipjack.WaitBounds[i])
		}
	}
	if got, want := (Queue{}).WaitBuckets(), len(schema.WaitBoundsMS); got != want {
		t.Errorf("WaitBuckets() = %d, want %d", got, want)
	}
}
