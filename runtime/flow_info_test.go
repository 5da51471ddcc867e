package skipjack_test

import (
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

func TestFlowInfoString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		flow    skipjack.FlowInfo
		want    string
		limited bool
	}{
		{"none", skipjack.FlowInfo{}, "", false},
		{"serial only", skipjack.FlowInfo{Serial: true}, "serial", false},
		{"every limit", skipjack.FlowInfo{Concurrency: 50, RateCount: 100, RatePer: time.Second, PerKeyBy: []string{"region", "tenant_id"}, PerKeyConcurrency: 2, Serial: true},
			"concurrency 50, rate 100 per 1s, per key (region, tenant_id) 2, serial", true},
		{"per key alone", skipjack.FlowInfo{PerKeyBy: []string{"tenant_id"}, PerKeyConcurrency: 1}, "per key (tenant_id) 1", true},
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
