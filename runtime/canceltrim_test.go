package skipjack_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestCancelKeepsLastTenErrors cancels pending jobs (due and scheduled)
// whose history already holds the 10 errors a job keeps: the cancel's own
// entry must push the oldest one out, as every other write of an error
// does. Before, Cancel appended without trimming and left 11.
func TestCancelKeepsLastTenErrors(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	for _, tc := range []struct{ name, set string }{
		{"due pending", ``},
		{"scheduled", `, run_at = now() + interval '1 hour'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pool.Exec(ctx, `UPDATE skipjack.demo SET attempt = 10, errors = (
				SELECT jsonb_agg(jsonb_build_object('attempt', i, 'at', now(), 'error', 'e' || i, 'worker', 'w') ORDER BY i)
				FROM generate_series(1, 10) AS i)`+tc.set+` WHERE id = $1`, id)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := demo.Cancel(ctx, pool, id); err != nil || n != 1 {
				t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
			}
			j, _ := getJob(t, pool, "demo", id)
			var got []string
			for _, e := range j.Errors {
				got = append(got, e.Error)
			}
			want := []string{"e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9", "e10", "cancelled"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after Cancel of a %s job with 10 errors: %d errors %q, want %d %q", tc.name, len(got), got, len(want), want)
			}
		})
	}
}
