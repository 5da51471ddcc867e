package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlowControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		yaml       string
		wantLimits *Limits
		wantSerial *Serial
	}{
		{
			name: "none",
			yaml: head + "queues:\n  a:\n    payload: {x: int}\n",
		},
		{
			name:       "concurrency alone",
			yaml:       head + "queues:\n  a:\n    payload: {x: int}\n    limits: {concurrency: 5}\n",
			wantLimits: &Limits{Concurrency: 5, Pos: Pos{6, 5}},
		},
		{
			name:       "rate with the default window",
			yaml:       head + "queues:\n  a:\n    payload: {x: int}\n    limits:\n      rate: {count: 100}\n",
			wantLimits: &Limits{Rate: &Rate{Count: 100, Per: time.Second}, Pos: Pos{6, 5}},
		},
		{
			name:       "both limits and a serial key in written order",
			yaml:       head + "queues:\n  sync_account:\n    payload: {account_id: int64, region: string}\n    limits:\n      concurrency: 5\n      rate: {count: 100, per: 1m}\n    serial:\n      by: [region, account_id]\n",
			wantLimits: &Limits{Concurrency: 5, Rate: &Rate{Count: 100, Per: time.Minute}, Pos: Pos{6, 5}},
			wantSerial: &Serial{By: []string{"region", "account_id"}, Pos: Pos{9, 5}},
		},
		{
			name:       "per_key alone",
			yaml:       head + "queues:\n  a:\n    payload: {tenant_id: int64, region: string}\n    limits:\n      per_key: {by: [region, tenant_id], concurrency: 2}\n",
			wantLimits: &Limits{PerKey: &PerKey{By: []string{"region", "tenant_id"}, Concurrency: 2, Pos: Pos{7, 7}}, Pos: Pos{6, 5}},
		},
		{
			name:       "per_key beside concurrency",
			yaml:       head + "queues:\n  a:\n    payload: {tenant_id: int64}\n    limits:\n      concurrency: 50\n      per_key:\n        by: [tenant_id]\n        concurrency: 2\n",
			wantLimits: &Limits{Concurrency: 50, PerKey: &PerKey{By: []string{"tenant_id"}, Concurrency: 2, Pos: Pos{8, 7}}, Pos: Pos{6, 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("skipjack.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			q := cfg.Queues[0]
			if !reflect.DeepEqual(q.Limits, tt.wantLimits) {
				t.Errorf("Limits = %+v, want %+v", q.Limits, tt.wantLimits)
			}
			if !reflect.DeepEqual(q.Serial, tt.wantSerial) {
				t.Errorf("Serial = %+v, want %+v", q.Serial, tt.wantSerial)
			}
		})
	}
}

func TestParseFlowControlErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string // every error, one per line
	}{
		{
			name: "limits values",
			yaml: head + `queues:
  a:
    limits: {concurrency: 0}
  b:
    limits: {concurrency: -3, rate: {count: 0, per: 500ms}}
  c:
    limits: {}
  d:
    limits:
  e:
    limits: {concurency: 2}
  f:
    limits: {rate: {per: 2s}}
  g:
    limits: {rate: {count: 10, per: 48h, burst: 3}}
  h:
    limits: {concurrency: many}
`,
			want: `skipjack.yaml:5:27: limits.concurrency must be at least 1 (leave it out for no limit)
skipjack.yaml:7:27: limits.concurrency must be at least 1 (leave it out for no limit)
skipjack.yaml:7:45: limits.rate.count must be at least 1
skipjack.yaml:7:53: limits.rate.per must be between 1s and 24h, not 500ms (for finer rates scale count: 5 per 100ms is 50 per 1s)
skipjack.yaml:9:13: limits sets no limit: give concurrency, rate, per_key or several
skipjack.yaml:11:5: limits must be a mapping such as {concurrency: 5} or {rate: {count: 100, per: 1s}}
skipjack.yaml:13:14: unknown key "concurency" in limits (did you mean "concurrency"?)
skipjack.yaml:15:20: limits.rate needs count: how many jobs may start per window
skipjack.yaml:17:37: limits.rate.per must be between 1s and 24h, not 48h0m0s (for finer rates scale count: 5 per 100ms is 50 per 1s)
skipjack.yaml:17:42: unknown key "burst" in limits.rate
skipjack.yaml:19:27: concurrency must be an integer, not the string "many"`,
		},
		{
			name: "per_key",
			yaml: head + `queues:
  a:
    payload: {tenant_id: int64, ratio: float64}
    limits: {per_key: {by: [tenant, ratio], concurrency: 0}}
  b:
    payload: {tenant_id: int64}
    limits: {per_key: {by: [], concurency: 2}}
  c:
    payload: {tenant_id: int64}
    limits: {per_key: {concurrency: two}}
  d:
    payload: {tenant_id: int64}
    limits: {per_key: }
  e:
    payload: {tenant_id: int64}
    limits: {per_key: {by: [tenant_id, tenant_id]}}
`,
			want: `skipjack.yaml:6:29: unknown field "tenant" in limits.per_key.by: the payload has no such field
skipjack.yaml:6:37: field "ratio" (float64) cannot be part of a limits.per_key key: floating-point values that print alike may differ; use an integer or a string
skipjack.yaml:6:58: limits.per_key.concurrency must be at least 1 (leave per_key out for no limit per key)
skipjack.yaml:9:23: limits.per_key needs concurrency: how many jobs of one key may run at once
skipjack.yaml:9:28: limits.per_key.by lists no fields; list the payload fields whose equal values make a key
skipjack.yaml:9:32: unknown key "concurency" in limits.per_key (did you mean "concurrency"?)
skipjack.yaml:12:23: limits.per_key needs by: the payload fields whose equal values make a key, such as {by: [tenant_id], concurrency: 2}
skipjack.yaml:12:37: concurrency must be an integer, not the string "two"
skipjack.yaml:15:14: limits.per_key must be a mapping such as {by: [tenant_id], concurrency: 2}
skipjack.yaml:18:23: limits.per_key needs concurrency: how many jobs of one key may run at once
skipjack.yaml:18:40: duplicate field "tenant_id" in limits.per_key.by (first on line 18)`,
		},
		{
			name: "serial keys",
			yaml: head + `queues:
  a:
    payload: {account_id: int64, ratio: float64, tags: "[]string"}
    serial: {by: [acount_id, ratio, tags, account_id, account_id]}
  b:
    payload: {x: int}
    serial: {by: []}
  c:
    payload: {x: int}
    serial: {}
  d:
    payload: {x: int}
    serial:
  e:
    payload: {x: int}
    serial: {by: [x]}
    schedule:
      - cron: "@hourly"
`,
			want: `skipjack.yaml:6:19: unknown field "acount_id" in serial.by: the payload has no such field (did you mean "account_id"?)
skipjack.yaml:6:30: field "ratio" (float64) cannot be part of a serial key: floating-point values that print alike may differ; use an integer or a string
skipjack.yaml:6:37: field "tags" ([]string) cannot be part of a serial key: lists and maps are not keys; list scalar fields instead
skipjack.yaml:6:55: duplicate field "account_id" in serial.by (first on line 6)
skipjack.yaml:9:18: serial.by lists no fields; list the payload fields whose equal values make jobs run one at a time
skipjack.yaml:12:13: serial needs by: the payload fields whose equal values make jobs run one at a time, such as {by: [account_id]}
skipjack.yaml:15:5: serial must be a mapping such as {by: [account_id]}
skipjack.yaml:18:5: serial cannot be combined with schedule: a schedule's jobs all carry its one payload, so they would share a key; use limits.concurrency: 1 to run them one at a time`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("skipjack.yaml", []byte(tt.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			if got := strings.TrimSpace(err.Error()); got != tt.want {
				t.Errorf("errors:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
