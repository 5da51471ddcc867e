package skipjack_test

import (
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

func TestLimitsString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		flow    skipjack.Limits
		want    string
		limited bool
	}{
		{"none", skipjack.Limits{}, "", false},
		{"serial only", skipjack.Limits{Serial: true}, "serial", false},
		{"every limit", skipjack.Limits{Concurrency: 50, RateCount: 100, RatePer: time.Second, PerKeyBy: []string{"region", "tenant_id"}, PerKeyConcurrency: 2, Serial: true},
			"concurrency 50, rate 100 per 1s, per key (region, tenant_id) 2, serial", true},
		{"per key alone", skipjack.Limits{PerKeyBy: []string{"tenant_id"}, PerKeyConcurrency: 1}, "per key (tenant_id) 1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.flow.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := tt.flow.Limited(); got != tt.limited {
				t.Errorf("Limited() = %v, want %v", got, tt.limited)
			}
		})
	}
}
