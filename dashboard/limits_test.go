package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// flowQueue is a fake queue that also implements skipjack.QueueFlow.
type flowQueue struct {
	*fakeQueue
	flow skipjack.FlowInfo
}

func (q flowQueue) Flow() skipjack.FlowInfo { return q.flow }

// TestQueuePageShowsLimits checks that the queue page shows the limits a
// QueueFlow declares with the slots in use now (the fake's one running
// job), and no limits line for a queue without any or for an admin that
// does not implement QueueFlow.
func TestQueuePageShowsLimits(t *testing.T) {
	t.Parallel()
	limited := flowQueue{newFakeQueue("limited", 5, testNow), skipjack.FlowInfo{Concurrency: 50, PerKeyBy: []string{"tenant_id"}, PerKeyConcurrency: 2}}
	serial := flowQueue{newFakeQueue("serial", 5, testNow), skipjack.FlowInfo{Serial: true}}
	none := flowQueue{newFakeQueue("none", 5, testNow), skipjack.FlowInfo{}}
	plain := plainAdmin{newFakeQueue("plain", 5, testNow)}
	h, _ := newTestHandler(t, Config{Queues: []skipjack.QueueAdmin{limited, serial, none, plain}})
	tests := []struct {
		path string
		want string // "" for no limits line
	}{
		{"/queues/limited", "concurrency 50, per key (tenant_id) 2</span> <span class=\"muted\">1 claimed now of 50 slots</span>"},
		{"/queues/serial", "<span>serial</span></p>"},
		{"/queues/none", ""},
		{"/queues/plain", ""},
	}
	for _, tt := range tests {
		res, body := do(t, h, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tt.path, res.StatusCode)
			continue
		}
		has := strings.Contains(body, `id="queue-limits"`)
		switch {
		case tt.want == "" && has:
			t.Errorf("GET %s: the page shows a limits line, want none", tt.path)
		case tt.want != "" && !strings.Contains(body, tt.want):
			i := strings.Index(body, `id="queue-limits"`)
			t.Errorf("GET %s: the page lacks %q (limits line at %d: %.200s)", tt.path, tt.want, i, body[max(i, 0):])
		}
	}
}
