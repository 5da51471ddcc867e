package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// partialHeader asks for only the live region of a page: the auto-refresh
// script sends it and swaps the region in place.
const partialHeader = "X-Skipjack-Partial"

// contentSecurityPolicy allows the dashboard's own script, style sheet and
// forms, and nothing else.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// assetVersion changes with the assets' content; pages link to
// assets/file?v=assetVersion so the assets can be cached for long.
var assetVersion = func() string {
	sum := sha256.New()
	_ = fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		sum.Write([]byte(p))
		sum.Write(b)
		return err
	})
	return hex.EncodeToString(sum.Sum(nil))[:12]
}()

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"overview", "queue", "job", "confirm", "confirmmany", "confirmgroup", "confirmqueue", "failures", "workflows", "workflow", "error"}

// views holds the parsed page templates.
type views struct {
	pages map[string]*template.Template
}

// parseViews parses every page with the layout.
func parseViews() (*views, error) {
	v := &views{pages: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/charts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parse %s template: %w", name, err)
		}
		v.pages[name] = t
	}
	return v, nil
}

// funcs are the templates' formatting helpers.
var funcs = template.FuncMap{
	"ts":  formatTime,
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"dur": formatDuration,
	"ms":  func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond },
	// f1 writes an SVG coordinate with one decimal.
	"f1": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	// queuePath is the first page of a queue's jobs in a state.
	"queuePath": func(queue, state string) string { return queuePath(queue, state) },
	"title":     stateTitle,
	// retained prints a retained count, marking one at the runtime's cap
	// as a lower bound.
	"retained": func(n int64) string {
		if n >= skipjack.StatsRetainedCap {
			return strconv.FormatInt(n, 10) + "+"
		}
		return strconv.FormatInt(n, 10)
	},
}

// crumb is one step of the breadcrumb after the dashboard's title.
type crumb struct {
	Label string
	URL   string
}

// page is what every template gets: the layout's fields and the page's
// own model in Data.
type page struct {
	Title     string
	Heading   string
	Base      string
	Assets    string
	RefreshMS int64
	Actions   bool
	// Workflows says whether the dashboard shows workflows (the header
	// then links to them).
	Workflows bool
	Crumbs    []crumb
	Now       time.Time
	Flash     *flash
	Data      any
}

// newPage starts the model of the page at seg.
func (h *Handler) newPage(seg []string, heading string, now time.Time) *page {
	p := &page{
		Title: h.cfg.Title, Heading: heading, Base: baseOf(seg), Assets: assetVersion,
		Actions: h.cfg.Actions, Workflows: len(h.flows) > 0, Now: now,
	}
	if h.cfg.RefreshInterval > 0 {
		p.RefreshMS = h.cfg.RefreshInterval.Milliseconds()
	}
	return p
}

// Rel says how long ago (or in how long) t is, as of the page's time.
func (p *page) Rel(t time.Time) string {
	d := p.Now.Sub(t)
	switch {
	case d >= time.Second:
		return formatDuration(d) + " ago"
	case d <= -time.Second:
		return "in " + formatDuration(-d)
	}
	return "now"
}

// render writes page p with the template name, or only its live region
// when the auto-refresh script asks for it.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	t := h.views.pages[name]
	tmpl := "layout"
	if r.Header.Get(partialHeader) != "" {
		tmpl = "live"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, tmpl, p); err != nil {
		h.log.ErrorContext(r.Context(), "dashboard: render failed", "page", name, "err", err)
		http.Error(w, "dashboard: render failed", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	setSecurityHeaders(hd)
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Vary", partialHeader)
	if tmpl == "live" {
		// Tells the script the answer is a region of this dashboard and
		// not, say, a sign-in page an auth middleware redirected to.
		hd.Set(partialHeader, "live")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// setSecurityHeaders sets the headers every page carries.
func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
}

// errorData is the error page's model.
type errorData struct {
	Message string
}

// errorPage writes a page that says what went wrong.
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, seg []string, status int, heading, msg string) {
	p := h.newPage(seg, heading, h.now())
	p.RefreshMS = 0
	p.Data = errorData{Message: msg}
	h.render(w, r, status, "error", p)
}

// notFound writes a 404 page.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, seg []string, msg string) {
	h.errorPage(w, r, seg, http.StatusNotFound, "Not found", msg)
}

// serverError writes a 500 page.
func (h *Handler) serverError(w http.ResponseWriter, r *http.Request, seg []string, msg string) {
	h.errorPage(w, r, seg, http.StatusInternalServerError, "Database error", msg)
}

// serveAsset serves an embedded asset. Versioned URLs (?v=) may be cached
// for a year.
func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	b, err := assetFS.ReadFile(path.Join("assets", name))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	switch {
	case strings.HasSuffix(name, ".css"):
		hd.Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		hd.Set("Content-Type", "image/svg+xml")
	}
	if r.URL.Query().Get("v") == assetVersion {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// formatTime shows an instant in UTC to the second.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// formatDuration shows a duration in at most two units: 850ms, 42s, 3m 12s,
// 2h 5m, 3d 4h.
func formatDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return twoUnits(int(d/time.Minute), "m", int(d%time.Minute/time.Second), "s")
	case d < 24*time.Hour:
		return twoUnits(int(d/time.Hour), "h", int(d%time.Hour/time.Minute), "m")
	}
	return twoUnits(int(d/(24*time.Hour)), "d", int(d%(24*time.Hour)/time.Hour), "h")
}

// twoUnits formats "3m 12s", dropping a zero second unit ("3m").
func twoUnits(a int, ua string, b int, ub string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, ua)
	}
	return fmt.Sprintf("%d%s %d%s", a, ua, b, ub)
}
