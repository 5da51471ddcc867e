package skipjack_test

import (
	"context"
	"errors"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// TestEncodePayloadNUL checks that a NUL character is refused before the
// database sees it, while a literal backslash-u0000 text is fine.
func TestEncodePayloadNUL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		label   string
		wantNUL bool
	}{
		{"plain", false},
		{"a\x00b", true},
		{"\x00", true},
		{`\u0000`, false}, // the six characters, not a NUL
		{`\` + "\x00", true},
	}
	for _, tc := range tests {
		_, err := skipjackimpl.EncodePayload(demo.Payload{Label: tc.label})
		if got := errors.Is(err, skipjack.ErrNULInPayload); got != tc.wantNUL {
			t.Errorf("EncodePayload(%q) = %v, want NUL refusal %v", tc.label, err, tc.wantNUL)
		}
	}
}

// TestEnqueueNUL checks the refusal through the generated API, for both
// Enqueue and the COPY of EnqueueMany, and that a literal \u0000 text
// round-trips through jsonb.
func TestEnqueueNUL(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	if _, err := demo.Enqueue(ctx, pool, demo.Payload{Label: "a\x00b"}); !errors.Is(err, skipjack.ErrNULInPayload) {
		t.Errorf("Enqueue with NUL = %v, want ErrNULInPayload", err)
	}
	if _, err := demo.EnqueueMany(ctx, pool, []demo.Payload{{Label: "ok"}, {Label: "\x00"}}); !errors.Is(err, skipjack.ErrNULInPayload) {
		t.Errorf("EnqueueMany with NUL = %v, want ErrNULInPayload", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`); n != 0 {
		t.Errorf("%d jobs inserted, want 0", n)
	}
	id, err := demo.Enqueue(ctx, pool, demo.Payload{Label: `\u0000`})
	if err != nil {
		t.Fatalf("Enqueue of a literal \\u0000: %v", err)
	}
	var label string
	if err := pool.QueryRow(ctx, `SELECT payload->>'label' FROM skipjack.demo WHERE id = $1`, id).Scan(&label); err != nil || label != `\u0000` {
		t.Errorf("stored label %q, %v; want the literal \\u0000", label, err)
	}
}
