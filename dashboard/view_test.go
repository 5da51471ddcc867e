package dashboard

import (
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestRetainedCountAtCap checks that a retained count at the runtime's cap
// reads as a lower bound.
func TestRetainedCountAtCap(t *testing.T) {
	t.Parallel()
	retained := funcs["retained"].(func(int64) string)
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {99_999, "99999"}, {skipjack.StatsRetainedCap, "100000+"}} {
		if got := retained(tc.n); got != tc.want {
			t.Errorf("retained(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
