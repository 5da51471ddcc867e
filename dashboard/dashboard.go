package dashboard

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// Defaults and limits of Config.
const (
	defaultTitle    = "skipjack"
	defaultRefresh  = 5 * time.Second
	defaultPageSize = 50
	// maxPageSize keeps a page and its look-ahead row (List with
	// PageSize+1) within List's own cap of 1000 rows.
	maxPageSize         = 500
	defaultQueryTimeout = 10 * time.Second
	minSecretLen        = 32
)

// Config configures a dashboard. Only Queues is required; the zero value of
// every other field is a good default.
type Config struct {
	// Queues are the queues to show, in this order: the Admin view of each
	// generated queue package (sendemail.Admin(pool)). Names must be unique.
	Queues []skipjack.QueueAdmin
	// Workflows are the workflows to show under /workflows: the Admin
	// view of each generated workflow package (fulfilorder.Admin(pool)).
	// Names must be unique. Default none: no Workflows page.
	Workflows []skipjack.WorkflowAdmin
	// Actions enables retry, cancel and delete (of jobs, a page or a
	// selection of jobs; retry also of a failure group) and pause and
	// resume (of a queue). Off by default: the dashboard then only reads,
	// and works with a read-only database role.
	Actions bool
	// Title names the dashboard in page titles and the header. Default
	// "skipjack".
	Title string
	// RefreshInterval is how often open pages refresh their figures in
	// place. Default 5s; negative turns auto-refresh off.
	RefreshInterval time.Duration
	// PageSize is how many jobs a queue page lists. Default 50, at most
	// 500.
	PageSize int
	// QueryTimeout bounds the database calls of one request. Default 10s.
	QueryTimeout time.Duration
	// Secret signs the tokens of action forms (at least 32 bytes). Default:
	// random per New, so a token outlives neither the process nor the
	// handler. Set the same secret on every replica behind one load
	// balancer.
	Secret []byte
	// TrustedOrigins are origins ("https://ops.example.com") whose
	// cross-origin POSTs are accepted, for a dashboard behind a proxy that
	// rewrites the Host header. Default none.
	TrustedOrigins []string
	// AllowedHosts are the names, besides IP addresses and localhost, that
	// the dashboard answers requests for: each a host name
	// ("jobs.example.com", any port) or a name and port
	// ("jobs.example.com:8443"), compared without case or a trailing dot.
	// A request for any other Host gets 421 Misdirected Request and a Warn
	// log. This stops DNS rebinding: a page on the attacker's name, which
	// the attacker's DNS then points at this server, is same-origin with
	// the dashboard for the browser, so only its Host gives it away. A
	// dashboard reached by a name (behind a reverse proxy that passes the
	// browser's Host on, or at the machine's DNS name) must list that name
	// here. "*" answers every Host, for a service that checks the Host
	// itself. Default none.
	AllowedHosts []string
	// Logger receives errors of database calls, performed actions (Info)
	// and refused ones (Warn). Default: slog.Default().
	Logger *slog.Logger
}

// Handler is the dashboard: an http.Handler that serves its pages under
// whatever prefix it is mounted at (use http.StripPrefix).
type Handler struct {
	cfg     Config
	queues  map[string]skipjack.QueueAdmin
	names   []string
	flows   []skipjack.WorkflowAdmin
	log     *slog.Logger
	tokens  tokenSigner
	origins *http.CrossOriginProtection
	hosts   hostPolicy
	views   *views
	now     func() time.Time
	figures sharedFigures
}

// New checks cfg and returns the dashboard's handler.
func New(cfg Config) (*Handler, error) {
	if len(cfg.Queues) == 0 {
		return nil, errors.New("dashboard: no queues")
	}
	h := &Handler{
		cfg:     cfg,
		queues:  make(map[string]skipjack.QueueAdmin, len(cfg.Queues)),
		log:     cfg.Logger,
		origins: http.NewCrossOriginProtection(),
		now:     time.Now,
	}
	for i, q := range cfg.Queues {
		if q == nil {
			return nil, fmt.Errorf("dashboard: queue %d is nil", i)
		}
		name := q.Name()
		if name == "" || strings.ContainsAny(name, "/?#\x00") || name == "." || name == ".." {
			return nil, fmt.Errorf("dashboard: queue %d: name %q cannot be a path segment", i, name)
		}
		if _, dup := h.queues[name]; dup {
			return nil, fmt.Errorf("dashboard: queue %q is listed twice", name)
		}
		h.queues[name] = q
		h.names = append(h.names, name)
	}
	seen := make(map[string]bool, len(cfg.Workflows))
	for i, wf := range cfg.Workflows {
		if wf == nil {
			return nil, fmt.Errorf("dashboard: workflow %d is nil", i)
		}
		if seen[wf.Name()] {
			return nil, fmt.Errorf("dashboard: workflow %q is listed twice", wf.Name())
		}
		seen[wf.Name()] = true
		h.flows = append(h.flows, wf)
	}
	if h.cfg.Title == "" {
		h.cfg.Title = defaultTitle
	}
	if h.cfg.RefreshInterval == 0 {
		h.cfg.RefreshInterval = defaultRefresh
	}
	switch {
	case h.cfg.PageSize == 0:
		h.cfg.PageSize = defaultPageSize
	case h.cfg.PageSize < 0 || h.cfg.PageSize > maxPageSize:
		return nil, fmt.Errorf("dashboard: page size %d is outside 1..%d", h.cfg.PageSize, maxPageSize)
	}
	if h.cfg.QueryTimeout <= 0 {
		h.cfg.QueryTimeout = defaultQueryTimeout
	}
	secret := cfg.Secret
	if secret == nil {
		secret = make([]byte, minSecretLen)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("dashboard: random secret: %w", err)
		}
	} else if len(secret) < minSecretLen {
		return nil, fmt.Errorf("dashboard: secret has %d bytes, want at least %d", len(secret), minSecretLen)
	}
	h.tokens = tokenSigner{key: append([]byte(nil), secret...), ttl: tokenTTL}
	for _, o := range cfg.TrustedOrigins {
		if err := h.origins.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("dashboard: trusted origin: %w", err)
		}
	}
	hosts, err := newHostPolicy(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	h.hosts = hosts
	if h.log == nil {
		h.log = slog.Default()
	}
	v, err := parseViews()
	if err != nil {
		return nil, err
	}
	h.views = v
	return h, nil
}

// ServeHTTP routes a request by its path relative to the mount point:
//
//	/                               the overview of all queues
//	/queues/{queue}                 one queue's jobs, newest first (?state=, ?before=, ?after=, ?where=, ?error=, ?id=)
//	/queues/{queue}/jobs/{id}       one job
//	/queues/{queue}/jobs/{id}/retry GET: confirmation page; POST: retry
//	/queues/{queue}/jobs/{id}/cancel
//	/queues/{queue}/retry?ids=1,2   the same for several jobs of a page
//	/queues/{queue}/cancel?ids=1,2
//	/queues/{queue}/delete?ids=1,2  (and /queues/{queue}/jobs/{id}/delete)
//	/queues/{queue}/pause           GET: confirmation; POST: pause the queue
//	/queues/{queue}/resume          the same to resume it
//	/queues/{queue}/failures        failed jobs grouped by error
//	/queues/{queue}/failures/retry?error=  GET: confirmation; POST: retry the group
//	/workflows                      workflows, newest first (?name=, ?state=, ?before=, ?after=)
//	/workflows/{id}                 one workflow: its steps as a graph and a table
//	/assets/{file}                  the embedded style sheet and script
//
// A request whose Host the dashboard does not answer (see
// [Config.AllowedHosts]) gets 421 Misdirected Request, whatever its path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hosts.allows(r.Host) {
		h.misdirected(w, r)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/")
	var seg []string
	if rest != "" {
		seg = strings.Split(rest, "/")
	}
	for _, s := range seg {
		if s == "" || s == "." || s == ".." {
			h.notFound(w, r, seg, "No such page.")
			return
		}
	}
	switch {
	case len(seg) == 0:
		if h.redirectToSlash(w, r) {
			return
		}
		if h.allow(w, r, http.MethodGet) {
			h.overview(w, r, seg)
		}
	case len(seg) == 2 && seg[0] == "assets":
		if h.allow(w, r, http.MethodGet) {
			serveAsset(w, r, seg[1])
		}
	case len(seg) >= 2 && seg[0] == "queues":
		h.routeQueue(w, r, seg)
	case len(seg) <= 2 && seg[0] == "workflows" && len(h.flows) > 0:
		h.routeWorkflows(w, r, seg)
	default:
		h.notFound(w, r, seg, "No such page.")
	}
}

// routeQueue serves the pages under /queues/{queue}.
func (h *Handler) routeQueue(w http.ResponseWriter, r *http.Request, seg []string) {
	q, ok := h.queues[seg[1]]
	if !ok {
		h.notFound(w, r, seg, fmt.Sprintf("There is no queue named %q.", seg[1]))
		return
	}
	switch {
	case len(seg) == 2:
		if h.allow(w, r, http.MethodGet) {
			h.queuePage(w, r, seg, q)
		}
	case len(seg) == 3 && seg[2] == "failures":
		if h.allow(w, r, http.MethodGet) {
			h.failuresPage(w, r, seg, q)
		}
	case len(seg) == 4 && seg[2] == "failures" && seg[3] == "retry":
		h.routeAction(w, r, seg,
			func() { h.confirmGroupPage(w, r, seg, q) },
			func() { h.actGroup(w, r, seg, q) })
	case len(seg) == 3 && queueActions[seg[2]].Name != "":
		a := queueActions[seg[2]]
		h.routeAction(w, r, seg,
			func() { h.confirmQueuePage(w, r, seg, q, a) },
			func() { h.actQueue(w, r, seg, q, a) })
	case len(seg) == 3:
		a, ok := actions[seg[2]]
		if !ok || !a.offered(q) {
			h.notFound(w, r, seg, "No such page.")
			return
		}
		h.routeAction(w, r, seg,
			func() { h.confirmManyPage(w, r, seg, q, a) },
			func() { h.actMany(w, r, seg, q, a) })
	case (len(seg) == 4 || len(seg) == 5) && seg[2] == "jobs":
		id, err := strconv.ParseInt(seg[3], 10, 64)
		if err != nil || id <= 0 || strconv.FormatInt(id, 10) != seg[3] {
			h.notFound(w, r, seg, "A job id is a positive whole number.")
			return
		}
		if len(seg) == 4 {
			if h.allow(w, r, http.MethodGet) {
				h.jobPage(w, r, seg, q, id)
			}
			return
		}
		a, ok := actions[seg[4]]
		if !ok || !a.offered(q) {
			h.notFound(w, r, seg, "No such action.")
			return
		}
		h.routeAction(w, r, seg,
			func() { h.confirmPage(w, r, seg, q, id, a) },
			func() { h.act(w, r, seg, q, id, a) })
	default:
		h.notFound(w, r, seg, "No such page.")
	}
}

// routeAction serves an action's URL: GET shows its confirmation page,
// POST (with its form read) performs it.
func (h *Handler) routeAction(w http.ResponseWriter, r *http.Request, seg []string, confirm, perform func()) {
	if !h.allow(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method != http.MethodPost {
		confirm()
		return
	}
	if h.readForm(w, r, seg) {
		perform()
	}
}

// allow answers 405 and returns false unless the request's method is one of
// methods (GET also admits HEAD).
func (h *Handler) allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// redirectToSlash redirects a request for the mount point itself without
// its trailing slash ("/admin/jobs" when mounted with
// http.StripPrefix("/admin/jobs", ...)) to the same path with one, so that
// the relative links of the overview resolve under the mount point. It
// reports whether it redirected.
func (h *Handler) redirectToSlash(w http.ResponseWriter, r *http.Request) bool {
	orig := r.URL.Path
	if r.RequestURI != "" {
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
			orig = u.Path
		}
	}
	if orig == "" || strings.HasSuffix(orig, "/") {
		return false
	}
	seeOther(w, path.Base(orig)+"/", http.StatusMovedPermanently)
	return true
}

// seeOther redirects to a location relative to the request's URL. Unlike
// http.Redirect it never rewrites the location against r.URL.Path, which
// http.StripPrefix has shortened.
func seeOther(w http.ResponseWriter, location string, code int) {
	w.Header().Set("Location", location)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
}

// baseOf returns the relative path from the page at seg back to the mount
// point ("./", "../", "../../", ...).
func baseOf(seg []string) string {
	if len(seg) <= 1 {
		return "./"
	}
	return strings.Repeat("../", len(seg)-1)
}
