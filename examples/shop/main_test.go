package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/chargecard"
	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/resizeimage"
	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/sendemail"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// TestRun runs the whole example on a fresh database: every job is handled
// exactly as the handlers decide, and every queue ends empty apart from the
// rows its retention keeps.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := skipjacktest.NewPool(t)
	got, err := run(ctx, pool, io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	want := summary{sent: emails, resized: images - images/50, refused: images / 50, charged: charges}
	if got != want {
		t.Errorf("handlers did %+v, want %+v", got, want)
	}
	for name, stats := range statsFuncs {
		s, err := stats(ctx, pool)
		if err != nil {
			t.Fatalf("stats %s: %v", name, err)
		}
		if s.Pending+s.Scheduled+s.Running != 0 {
			t.Errorf("%s: %+v, want no pending, scheduled or running job", name, s)
		}
	}
	// Retention: send_email deletes at ack, resize_image keeps the refused
	// (failed) jobs, charge_card keeps completed jobs for 24h.
	checks := []struct {
		name            string
		completed, fail int64
	}{
		{sendemail.Name, 0, 0},
		{resizeimage.Name, 0, images / 50},
		{chargecard.Name, charges, 0},
	}
	for _, c := range checks {
		s, _ := statsFuncs[c.name](ctx, pool)
		if s.Completed != c.completed || s.Failed != c.fail {
			t.Errorf("%s kept %d completed and %d failed, want %d and %d", c.name, s.Completed, s.Failed, c.completed, c.fail)
		}
	}
	var ledger int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM shop_ledger`).Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	if ledger != charges {
		t.Errorf("ledger has %d charges, want %d (each charge committed with its ack)", ledger, charges)
	}
}
