package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skipjack-dev/skipjack/dashboard"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// uiFlags adds the flags of skipjack ui.
func uiFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "serve on `ADDR` (host:port)")
	fs.BoolVar(&o.actions, "actions", false, "enable retry and cancel (off: read-only)")
	fs.Var(&o.allowedHosts, "allowed-host", "also answer requests for `HOST`, a name browsers reach the dashboard by\n"+
		"\t(behind a reverse proxy, or a DNS name; with :PORT, only at that port);\n"+
		"\trepeatable or comma-separated. Without it, only IP addresses, localhost\n"+
		"\tand the name of --listen are answered, and any other Host gets\n"+
		"\t421 Misdirected Request: a guard against DNS rebinding")
}

// hostList is the value of --allowed-host: host names, from repeated flags
// or comma-separated in one.
type hostList []string

func (l *hostList) String() string { return strings.Join(*l, ",") }

func (l *hostList) Set(s string) error {
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if strings.Contains(h, "/") {
			return fmt.Errorf("want a host name with an optional port (jobs.example.com:8443), not the URL %q", h)
		}
		if h != "" {
			*l = append(*l, h)
		}
	}
	return nil
}

// ui serves the web dashboard over the YAML's live queues until interrupted.
func ui(o options, e env) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUI(ctx, o, e)
}

// serveUI serves the dashboard module's handler over the YAML's live
// queues, each read with the queries of its generated Admin
// (internal/tableadmin), until ctx ends; then it shuts down gracefully.
// It needs the YAML and the database only: no Go module, no generated code.
func serveUI(ctx context.Context, o options, e env) error {
	cfg, err := config.Load(o.file)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err // "listen tcp 127.0.0.1:8080: bind: address already in use"
	}
	defer ln.Close()
	if !isLoopback(o.listen) {
		fmt.Fprintf(e.stderr, "skipjack ui: note: %s is reachable from other machines, and the dashboard has no authentication of its own\n", o.listen)
		if len(o.allowedHosts) == 0 {
			fmt.Fprintf(e.stderr, "skipjack ui: note: it answers IP addresses and localhost only; for a name (a proxy, a DNS name), pass --allowed-host NAME\n")
		}
	}
	pool, err := connect(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	admins, err := queueAdmins(cfg, pool)
	if err != nil {
		return err
	}
	queues := make([]skipjack.QueueAdmin, len(admins))
	for i, a := range admins {
		queues[i] = a
	}
	h, err := dashboard.New(dashboard.Config{
		Queues:    queues,
		Workflows: workflowAdmins(cfg, pool),
		Actions:   o.actions,
		Title:     cfg.Name,
		Logger:    slog.New(slog.NewTextHandler(e.stderr, nil)),
		// Besides IP addresses and localhost, which it always answers.
		AllowedHosts: append(listenName(o.listen, ln.Addr()), o.allowedHosts...),
	})
	if err != nil {
		return err
	}
	mode := "read-only"
	if o.actions {
		mode = "actions enabled"
	}
	fmt.Fprintf(e.stdout, "skipjack ui: serving %s of %s on http://%s/ (%s); Ctrl-C stops\n", plural(len(queues), "queue"), cfg.Name, ln.Addr(), mode)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	<-served // http.ErrServerClosed
	return nil
}

// isLoopback reports whether addr (host:port) listens only on this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenName returns the host name of a --listen address that has one
// (devbox:8080), with the port ui listens on, for ui to answer besides
// --allowed-host. It returns nothing for an address without a host
// (":8080"), an IP address or localhost: the dashboard answers IP
// addresses and localhost anyway.
func listenName(listen string, at net.Addr) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return nil
	}
	tcp, ok := at.(*net.TCPAddr)
	if !ok {
		return []string{host}
	}
	return []string{net.JoinHostPort(host, strconv.Itoa(tcp.Port))}
}
