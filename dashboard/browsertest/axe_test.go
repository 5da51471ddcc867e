package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// axeSource reads axe-core's axe.min.js: $SKIPJACK_AXE_JS, else where
// .ci/run installs it (npm install --prefix .ci/axe). Outside CI a missing
// axe skips the test; in CI (CI set) it fails it, as chromiumPath does.
func axeSource(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SKIPJACK_AXE_JS")
	if p == "" {
		p = filepath.Join("..", "..", ".ci", "axe", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no axe-core (%v); .ci/run installs it with npm install --prefix .ci/axe axe-core", err)
		}
		t.Skipf("no axe-core (%v): npm install --prefix .ci/axe axe-core@4.14.1", err)
	}
	return string(b)
}

// axeViolation is one rule that axe found violated, with the elements.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkAccessibility injects axe-core into the current page (through the
// DevTools protocol, which the page's Content-Security-Policy does not
// govern) and fails the test on every serious or critical violation of the
// WCAG 2 A and AA rules and axe's best practices.
func checkAccessibility(t *testing.T, ctx context.Context, page, axe string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axe+";\ntypeof axe === 'object'")); err != nil {
		t.Fatalf("%s: inject axe-core: %v", page, err)
	}
	const run = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}, resultTypes: ["violations"]})
		.then(r => JSON.stringify(r.violations
			.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))}))))`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](run, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: run axe-core: %v", page, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("%s: read axe-core's result %q: %v", page, out, err)
	}
	for _, v := range vs {
		t.Errorf("%s: accessibility (%s, %s): %s at %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, "; "))
	}
}

// noFakeButtons fails the test when the page acts on clicks through
// anything but links and buttons (a div with a click handler or a button
// role cannot be used from the keyboard by default).
func noFakeButtons(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("[onclick], div[role=button], span[role=button], a:not([href])").length`))
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("%s: %d elements act as buttons without being links or buttons", page, n)
	}
}

// tabTo presses Tab until the element that matches selector has the focus
// (at most 80 times), checking that every element focused on the way shows
// a visible focus outline; it fails the test if the element is not in the
// page's tab order.
func tabTo(t *testing.T, ctx context.Context, page, selector string) {
	t.Helper()
	for range 80 {
		step(t, ctx, "press Tab on "+page, chromedp.KeyEvent("\t"))
		res, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const el = document.activeElement;
			if (!el || el === document.body) return ["", ""];
			const s = getComputedStyle(el);
			const visible = (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== "none";
			return [el.matches(`+jsString(selector)+`) ? "match" : "", visible ? "" : (el.outerHTML.slice(0, 120))];
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if res[1] != "" {
			t.Errorf("%s: focus is not visible on %s", page, res[1])
		}
		if res[0] == "match" {
			return
		}
	}
	t.Fatalf("%s: Tab never reached %s", page, selector)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
