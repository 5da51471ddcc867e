package main

import (
	"testing"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// TestNoTransactionMarker checks that the generator marks non-transactional
// migrations with the line the runtime's applier looks for: the two
// modules cannot share the constant.
func TestNoTransactionMarker(t *testing.T) {
	t.Parallel()
	if generator.NoTransactionMarker != skipjackimpl.NoTransactionMarker {
		t.Fatalf("generator writes %q, the runtime's applier reads %q", generator.NoTransactionMarker, skipjackimpl.NoTransactionMarker)
	}
}
