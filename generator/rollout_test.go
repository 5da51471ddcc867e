package generator

import (
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
)

// TestSettlePriority checks how a priority change on a live table rolls
// out: it expands (the old claim index stays) with a note saying what to
// do, stays expanding until contract, and a second change before the
// contract is refused at the queue's position unless contract comes with
// it.
func TestSettlePriority(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Path: "skipjack.yaml", Queues: []config.Queue{{Name: "orders", Pos: config.Pos{Line: 7, Col: 3}}}}
	table := func(priority, expanding bool) state {
		return state{Schema: "skipjack", Tables: []schema.Table{{Schema: "skipjack", Name: "orders", Priority: priority, PriorityExpanding: expanding}}}
	}
	tests := []struct {
		name          string
		last          *state
		want          state
		contract      bool
		wantExpanding bool
		note, err     string
	}{
		{"new table", nil, table(true, false), false, false, "", ""},
		{"unchanged", ptr(table(false, false)), table(false, false), false, false, "", ""},
		{"turned on", ptr(table(false, false)), table(true, false), false, true, "priority rolled out in two steps", ""},
		{"turned on with contract", ptr(table(false, false)), table(true, false), true, true, "priority rolled out in two steps", ""},
		{"still expanding", ptr(table(true, true)), table(true, false), false, true, "", ""},
		{"contract", ptr(table(true, true)), table(true, false), true, false, "contract step of its priority change", ""},
		{"changed back before the contract", ptr(table(true, true)), table(false, false), false, false, "", "skipjack.yaml:7:3: queue orders: priority changed again before the contract step"},
		{"changed back with the contract", ptr(table(true, true)), table(false, false), true, true, "priority rolled out in two steps", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, notes, err := settlePriority(cfg, tc.last, tc.want, tc.contract)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e := got.Tables[0].PriorityExpanding; e != tc.wantExpanding {
				t.Errorf("PriorityExpanding = %v, want %v", e, tc.wantExpanding)
			}
			if tc.want.Tables[0].PriorityExpanding {
				t.Error("settlePriority changed the state it was given")
			}
			var text []string
			for _, n := range notes {
				text = append(text, n.msg)
			}
			if all := strings.Join(text, "\n"); (tc.note == "") != (all == "") || !strings.Contains(all, tc.note) {
				t.Errorf("notes %q, want one saying %q", all, tc.note)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
