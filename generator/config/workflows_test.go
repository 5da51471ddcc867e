package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const workflowQueues = `queues:
  charge_card:
    payload: {order_id: int64}
    output: {charge_id: string}
  ship_parcel:
    payload: {order_id: int64}
  send_email:
    payload: {to: string}
  nightly:
    payload: {x: int}
    schedule:
      - cron: "@daily"
`

func TestParseWorkflows(t *testing.T) {
	t.Parallel()
	yaml := head + workflowQueues + `workflows:
  fulfil_order:
    steps:
      charge: {queue: charge_card}
      ship:   {queue: ship_parcel, after: [charge]}
      email:  {queue: send_email, after: [charge, ship], if_upstream_fails: run}
`
	cfg, err := Parse("skipjack.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	want := []Workflow{{
		Name: "fulfil_order", Package: "fulfilorder", Pos: Pos{16, 3},
		Steps: []Step{
			{Name: "charge", GoName: "Charge", Queue: "charge_card", Pos: Pos{18, 7}},
			{Name: "ship", GoName: "Ship", Queue: "ship_parcel", After: []string{"charge"}, Pos: Pos{19, 7}},
			{Name: "email", GoName: "Email", Queue: "send_email", After: []string{"charge", "ship"}, RunOnUpstreamFailure: true, Pos: Pos{20, 7}},
		},
	}}
	if !reflect.DeepEqual(cfg.Workflows, want) {
		t.Errorf("Workflows = %+v\nwant %+v", cfg.Workflows, want)
	}
	if out := cfg.Queues[0].Output; len(out) != 1 || out[0].GoName != "ChargeID" {
		t.Errorf("charge_card output = %+v, want one field ChargeID", out)
	}
}

func TestParseWorkflowErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string // every error, one per line
	}{
		{
			name: "queues and after",
			yaml: head + workflowQueues + `workflows:
  a:
    steps:
      one: {queue: charge_crad}
      two: {queue: nightly, after: [one, on, two]}
      three: {queue: send_email, after: [one, one], if_upstream_fails: retry}
      four: {after: [one]}
      five: {queue: send_email, if_upstream_fails: run}
`,
			want: `skipjack.yaml:18:20: unknown queue "charge_crad" (did you mean "charge_card"?)
skipjack.yaml:19:20: queue "nightly" has a schedule and cannot be a workflow step: its periodic jobs would look like steps; declare a queue without schedule for the step
skipjack.yaml:19:42: unknown step "on" in after (did you mean "one"?)
skipjack.yaml:19:46: step "two" cannot run after itself
skipjack.yaml:20:47: step "one" is listed twice in after
skipjack.yaml:20:72: unknown if_upstream_fails "retry": use cancel or run
skipjack.yaml:21:7: step "four" needs queue: the queue whose job the step is
skipjack.yaml:22:33: step "five" has if_upstream_fails but no after: it has no upstream step`,
		},
		{
			name: "cycles and duplicates",
			yaml: head + workflowQueues + `workflows:
  b:
    steps:
      x: {queue: send_email, after: [z]}
      y: {queue: send_email, after: [x]}
      z: {queue: send_email, after: [y]}
      x: {queue: send_email}
  send_email:
    steps:
      a: {queue: send_email}
  c:
    steps: {}
  d: {}
`,
			want: `skipjack.yaml:19:38: steps form a cycle: x after z after y after x
skipjack.yaml:21:7: duplicate step "x" (first on line 18)
skipjack.yaml:22:3: workflow "send_email" and queue send_email both become package sendemail
skipjack.yaml:26:5: workflow "c" must declare at least one step
skipjack.yaml:27:3: workflow "d" needs steps: at least one step such as {charge: {queue: charge_card}}`,
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
