package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// syncBuffer is a bytes.Buffer that the server's goroutines may write to
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUIAllowedHost serves skipjack ui with actions and --allowed-host
// given twice, once comma-separated, and replays a DNS rebinding attack
// on it: requests with a Host that is neither an IP address, localhost nor
// allowed get 421, read no payload and cancel nothing; the allowed names
// are answered.
func TestUIAllowedHost(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	o, _, err := commandNamed(t, "ui").parse([]string{"-f", yaml, "--database-url", dbURL, "--listen", "127.0.0.1:0", "--actions",
		"--allowed-host", "jobs.example.com, ops.example.com", "--allowed-host", "proxy.internal:8443"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stdoutW := io.Pipe()
	var stderr syncBuffer
	served := make(chan error, 1)
	go func() {
		served <- serveUI(ctx, o, env{stdout: stdoutW, stderr: &stderr})
		stdoutW.Close()
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("ui printed nothing; stderr:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	m := regexp.MustCompile(`on (http://127\.0\.0\.1:(\d+)/) \(actions enabled\)`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("ui's first line %q does not say where it serves", lines.Text())
	}
	base, port := m[1], m[2]
	const rebound = "rebind.attacker.example"

	do := func(method, path, host string, form url.Values, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}

	tests := []struct {
		host   string
		status int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"[::1]:" + port, 200},
		{"jobs.example.com", 200},
		{"OPS.example.com.:" + port, 200},
		{"proxy.internal:8443", 200},
		{"proxy.internal:" + port, 421},
		{rebound + ":" + port, 421},
		{"example.com", 421},
	}
	for _, tt := range tests {
		status, body := do("GET", "queues/send_email/jobs/1", tt.host, nil, nil)
		if status != tt.status {
			t.Errorf("GET with Host %s: status %d, want %d:\n%s", tt.host, status, tt.status, body)
		}
		if leaked := strings.Contains(body, "a@example.com"); leaked != (tt.status == 200) {
			t.Errorf("GET with Host %s: payload in the response: %v, want %v", tt.host, leaked, tt.status == 200)
		}
		if tt.status == 421 && !strings.Contains(body, "--allowed-host") {
			t.Errorf("GET with Host %s: the 421 does not name --allowed-host:\n%s", tt.host, body)
		}
	}

	// A token from a legitimate confirmation page, posted by the
	// attacker's page as a browser sends a same-origin form.
	_, page := do("GET", "queues/send_email/jobs/1/cancel", "127.0.0.1:"+port, nil, nil)
	token := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(page)
	if token == nil {
		t.Fatalf("no token on the confirmation page:\n%s", page)
	}
	status, body := do("POST", "queues/send_email/jobs/1/cancel", rebound+":"+port, url.Values{"token": {token[1]}},
		map[string]string{"Origin": "http://" + rebound + ":" + port, "Sec-Fetch-Site": "same-origin"})
	if status != http.StatusMisdirectedRequest {
		t.Errorf("rebound POST: status %d, want 421:\n%s", status, body)
	}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var state string
	if err := pool.QueryRow(t.Context(), `SELECT state FROM shop_jobs.send_email WHERE id = 1`).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "pending" {
		t.Errorf("job 1 is %s after the rebound POST, want pending", state)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("ui: %v", err)
	}
	if !strings.Contains(stderr.String(), "refused a request for a host") {
		t.Errorf("stderr does not log the refused requests:\n%s", stderr.String())
	}
}

// TestListenName checks which --listen addresses add their name to the
// hosts ui answers.
func TestListenName(t *testing.T) {
	t.Parallel()
	at := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 41234}
	tests := []struct {
		listen string
		want   []string
	}{
		{"devbox:8080", []string{"devbox:41234"}}, // the port listened on, as with devbox:0
		{"devbox.lan:0", []string{"devbox.lan:41234"}},
		{"localhost:8080", nil},
		{"LOCALHOST:8080", nil},
		{"127.0.0.1:8080", nil},
		{"[::1]:8080", nil},
		{"0.0.0.0:8080", nil},
		{":8080", nil},
	}
	for _, tt := range tests {
		if got := listenName(tt.listen, at); !slices.Equal(got, tt.want) {
			t.Errorf("listenName(%q) = %q, want %q", tt.listen, got, tt.want)
		}
	}
}
