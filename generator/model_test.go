package generator

import (
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
)

// TestRateSlot checks the slots in which limited claims log the starts of a
// rate window: a start stays counted for more than 104 of them (see
// rateSlotMillis), which must never be shorter than the declared window,
// and the slots are no coarser than a hundredth of it needs.
func TestRateSlot(t *testing.T) {
	t.Parallel()
	const counted = 104 // slots a start stays counted at least
	tests := []struct {
		per  time.Duration
		want int64 // slot in milliseconds
	}{
		{per: time.Millisecond, want: 1}, // below config.MinRatePer, still never a zero slot
		{per: 999 * time.Millisecond, want: 10},
		{per: time.Second, want: 10},
		{per: time.Second + time.Nanosecond, want: 11},
		{per: 1001 * time.Millisecond, want: 11},
		{per: 1099 * time.Millisecond, want: 11},
		{per: 1100 * time.Millisecond, want: 11},
		{per: 1101 * time.Millisecond, want: 12},
		{per: 2499 * time.Millisecond, want: 25},
		{per: 2501 * time.Millisecond, want: 26},
		{per: 7 * time.Second, want: 70},
		{per: 7*time.Second + 1*time.Millisecond, want: 71},
		{per: time.Minute, want: 600},
		{per: 24 * time.Hour, want: 864_000},
	}
	for _, tc := range tests {
		q := &config.Queue{Name: "paced", Limits: &config.Limits{Rate: &config.Rate{Count: 20, Per: tc.per}}}
		qq := queriesOf(schema.Table{Schema: "skipjack", Name: q.Name}, q)
		slot := time.Duration(qq.RateSlotMillis) * time.Millisecond
		if qq.RateSlotMillis != tc.want {
			t.Errorf("per %v: slots of %v, want %dms", tc.per, slot, tc.want)
		}
		if window := counted * slot; window < tc.per {
			t.Errorf("per %v: a start stays counted for as little as %v (%d slots of %v), shorter than per", tc.per, window, counted, slot)
		}
		if 100*slot >= tc.per+100*time.Millisecond {
			t.Errorf("per %v: slots of %v, coarser than a hundredth of per rounded up to a millisecond", tc.per, slot)
		}
		if qq.RateCount != 20 {
			t.Errorf("per %v: count %d, want 20", tc.per, qq.RateCount)
		}
	}
}
