package skipjackimpl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// explosive is a payload type whose own decoding panics.
type explosive struct{}

func (*explosive) UnmarshalJSON([]byte) error { panic("bad decoder") }

// TestDecodePanicFailsJob claims jobs whose payload type panics while
// decoding: each job fails at once with the panic as its error, the
// handler never runs, and the process lives on.
func TestDecodePanicFailsJob(t *testing.T) {
	t.Parallel()
	f := &fakeStore{pending: ids(3)}
	var ran int
	cfg := skipjack.WorkerConfig{Concurrency: 2, PollInterval: 20 * time.Millisecond, Logger: discardLogger()}
	w := newWorker(lazyPool(t), QueueSpec{Name: "fake", Lease: 30 * time.Second}, f,
		func(context.Context, *skipjack.Job[explosive]) error { ran++; return nil }, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "three resolutions", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.resolves) >= 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ran != 0 {
		t.Errorf("handler ran %d times, want 0", ran)
	}
	for _, r := range f.resolves {
		if r.Action != ActionFail || !strings.Contains(r.Message, "decode payload: panic: bad decoder") {
			t.Errorf("resolution %+v, want fail with decode payload: panic: bad decoder", r)
		}
	}
}

// TestDecodeReturnsPanicError checks the error's type: handlers and hooks
// find the panic with errors.As.
func TestDecodeReturnsPanicError(t *testing.T) {
	t.Parallel()
	var p explosive
	err := decode(discardLogger(), []byte(`{}`), &p)
	var pe *skipjack.PanicError
	if !errors.As(err, &pe) || pe.Value != "bad decoder" || len(pe.Stack) == 0 {
		t.Fatalf("decode = %v, want a *skipjack.PanicError with the value and a stack", err)
	}
}
