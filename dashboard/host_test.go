package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// rebound is the Host of a DNS rebinding attack: a page on
// rebind.attacker.example whose name the attacker's DNS server then points
// at 127.0.0.1, so that the victim's browser sends its requests, with that
// Host, to the dashboard on the victim's machine.
const rebound = "rebind.attacker.example:8080"

// TestPostgresDNSRebinding replays a DNS rebinding attack on a dashboard
// with actions, as a handler mounted in a service sees it: the attacker's
// page reads a job's payload, fetches a confirmation page for its token
// and posts it with the Origin and Sec-Fetch-Site a browser sends for a
// same-origin request. Every step must be refused with 421, and the job
// must stay pending.
func TestPostgresDNSRebinding(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := New(Config{Queues: admins(s.pool), Actions: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	job := "/queues/send_email/jobs/" + strconv.FormatInt(s.pending[0], 10)
	attack := func(r *http.Request) *http.Request {
		r.Host = rebound
		r.Header.Set("Origin", "http://"+rebound)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		return r
	}

	for _, target := range []string{job, job + "/cancel", "/queues/send_email", "/"} {
		res, body := do(t, h, attack(httptest.NewRequest("GET", target, nil)))
		if res.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host %s: status %d, want 421", target, rebound, res.StatusCode)
		}
		for _, leak := range []string{`name="token"`, "bob0@example.com", "smtp: 550"} {
			if strings.Contains(body, leak) {
				t.Errorf("GET %s with Host %s: the response holds %q:\n%s", target, rebound, leak, body)
			}
		}
	}

	// A token the attacker could not have read: the POST must fail on its
	// Host alone.
	r := httptest.NewRequest("GET", job+"/cancel", nil)
	r.Host = "127.0.0.1:8080"
	token := confirmTokenOf(t, h, r)
	res, body := do(t, h, attack(post(job+"/cancel", token, nil)))
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("POST %s/cancel with Host %s: status %d, want 421:\n%s", job, rebound, res.StatusCode, body)
	}
	rec, err := sendemail.Get(t.Context(), s.pool, s.pending[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != skipjack.StatePending {
		t.Errorf("job %d is %s after the rebound POST, want pending", s.pending[0], rec.State)
	}
}

// TestHostCheck checks which Host headers a dashboard answers, by default
// and with AllowedHosts.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host    string
		allowed []string
		ok      bool
	}{
		// IP literals and localhost, with or without a port: no one
		// else's DNS can point them here.
		{"127.0.0.1:8080", nil, true},
		{"127.0.0.1", nil, true},
		{"127.0.0.1.:8080", nil, true},
		{"[::1]:8080", nil, true},
		{"[::1]", nil, true},
		{"[::ffff:127.0.0.1]:8080", nil, true},
		{"localhost:8080", nil, true},
		{"localhost", nil, true},
		{"LocalHost:8080", nil, true},
		{"localhost.:8080", nil, true},
		{"10.0.0.5:8080", nil, true}, // listening on 0.0.0.0, reached over the LAN or a Docker port
		{"[2001:db8::1]:443", nil, true},
		{"", nil, true}, // HTTP/1.0: not a browser

		// Names the attacker may own.
		{rebound, nil, false},
		{"rebind.attacker.example", nil, false},
		{"REBIND.attacker.example.:8080", nil, false},
		{"127.0.0.1.nip.io:8080", nil, false},
		{"localhost.attacker.example:8080", nil, false},
		{"app.localhost:8080", nil, false},
		{"jobs.example.com", nil, false},
		// Malformed.
		{"::1", nil, false},
		{"[::1", nil, false},
		{"[127.0.0.1]:8080", nil, false},
		{"127.0.0.1:80x", nil, false},
		{"[::1]x", nil, false},
		{":8080", nil, false},

		// Configured names: any port without one, only that port with one.
		{"jobs.example.com", []string{"jobs.example.com"}, true},
		{"jobs.example.com:8443", []string{"jobs.example.com"}, true},
		{"JOBS.Example.COM.:8443", []string{"jobs.example.com"}, true},
		{"jobs.example.com", []string{"Jobs.Example.com."}, true},
		{"localhost:8080", []string{"jobs.example.com"}, true},
		{"ops.example.com", []string{"jobs.example.com", "ops.example.com"}, true},
		{"example.com", []string{"jobs.example.com"}, false},
		{"x.jobs.example.com", []string{"jobs.example.com"}, false},
		{rebound, []string{"jobs.example.com"}, false},
		{"proxy.internal:8443", []string{"proxy.internal:8443"}, true},
		{"proxy.internal", []string{"proxy.internal:8443"}, false},
		{"proxy.internal:8080", []string{"proxy.internal:8443"}, false},
		{rebound, []string{"*"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.host+" "+strings.Join(tt.allowed, ","), func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, Config{AllowedHosts: append([]string{}, tt.allowed...)})
			r := httptest.NewRequest("GET", "/queues/alpha/jobs/1", nil)
			r.Host = tt.host
			res, body := do(t, h, r)
			if tt.ok {
				if res.StatusCode != http.StatusOK {
					t.Fatalf("Host %q with AllowedHosts %q: status %d, want 200:\n%s", tt.host, tt.allowed, res.StatusCode, body)
				}
				return
			}
			if res.StatusCode != http.StatusMisdirectedRequest {
				t.Fatalf("Host %q with AllowedHosts %q: status %d, want 421:\n%s", tt.host, tt.allowed, res.StatusCode, body)
			}
			for _, want := range []string{"AllowedHosts", "--allowed-host"} {
				if !strings.Contains(body, want) {
					t.Errorf("the 421 body does not say to set %s:\n%s", want, body)
				}
			}
		})
	}
}

// TestHostCheckEveryRoute checks that a request for a host the dashboard
// does not answer gets 421 on every route, whatever its method, before the
// route is looked at: pages, their live regions, assets, actions, and
// paths that do not exist.
func TestHostCheckEveryRoute(t *testing.T) {
	t.Parallel()
	h, alpha := newTestHandler(t, Config{Actions: true})
	token := confirmToken(t, h, "/queues/alpha/jobs/1/retry")
	tests := []struct {
		method, target string
		hdr            map[string]string
	}{
		{"GET", "/", nil},
		{"GET", "/queues/alpha", nil},
		{"GET", "/queues/alpha?state=failed", map[string]string{partialHeader: "live"}},
		{"GET", "/queues/alpha/jobs/1", map[string]string{partialHeader: "live"}},
		{"HEAD", "/queues/alpha/jobs/1", nil},
		{"GET", "/queues/alpha/failures", nil},
		{"GET", "/queues/alpha/failures/retry?error=x", nil},
		{"GET", "/queues/alpha/cancel?ids=1,2", nil},
		{"GET", "/queues/alpha/pause", nil},
		{"GET", "/assets/app.js", nil},
		{"GET", "/nowhere", nil},
		{"DELETE", "/queues/alpha", nil},
		{"POST", "/queues/alpha/jobs/1/retry", nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, tt.target, nil)
			if tt.method == "POST" {
				r = post(tt.target, token, map[string]string{"Origin": "http://" + rebound})
			}
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			r.Host = rebound
			res, body := do(t, h, r)
			if res.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("status %d, want 421:\n%s", res.StatusCode, body)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q, want text/plain", ct)
			}
		})
	}
	t.Cleanup(func() {
		if retries, _, _ := alpha.calls(); len(retries) > 0 {
			t.Errorf("Retry called %d times for a refused host", len(retries))
		}
	})
}
