// skipjack dashboard: refreshes the page's live region in place every
// data-refresh milliseconds, without reloading the page.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  var every = main ? Number(main.getAttribute("data-refresh")) : 0;
  if (!live || !every) return;
  var status = document.getElementById("refresh-status");
  var toggle = document.getElementById("refresh-toggle");
  var paused = false, stopped = false, busy = false, timer = 0, count = 0, last = "";

  function say(text) { if (status) status.textContent = text; }
  function schedule() {
    clearTimeout(timer);
    if (!paused && !stopped) timer = setTimeout(tick, every);
  }
  function tick() {
    // Skip a round while the tab is hidden, a fetch is under way, or the
    // keyboard focus, a text selection or a checked job is inside the
    // region (replacing it would lose them).
    var sel = window.getSelection();
    var selecting = sel && !sel.isCollapsed && live.contains(sel.anchorNode);
    var checked = live.querySelector("input[type=checkbox]:checked");
    if (document.hidden || busy || selecting || checked || live.contains(document.activeElement)) {
      schedule();
      return;
    }
    busy = true;
    live.setAttribute("aria-busy", "true");
    fetch(location.href, {
      headers: { "X-Skipjack-Partial": "live" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (r) {
      // Only a region of this dashboard is swapped in, never, say, a
      // sign-in page that an expired session was redirected to.
      if (r.headers.get("X-Skipjack-Partial") !== "live") {
        throw new Error(r.ok ? "not a dashboard answer; signed out?" : "HTTP " + r.status);
      }
      // A page that is gone (a job deleted at completion) says so, and
      // refreshing stops.
      if (r.status === 404) stopped = true;
      else if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      // Paused meanwhile, or the same figures: leave the page alone.
      if (paused || html === last) return;
      last = html;
      // Disclosures the reader opened (a chart's data table) stay open.
      var open = [];
      live.querySelectorAll("details[id][open]").forEach(function (d) { open.push(d.id); });
      live.innerHTML = html;
      open.forEach(function (id) {
        var d = document.getElementById(id);
        if (d) d.open = true;
      });
      count++;
      live.setAttribute("data-refreshed", String(count));
      say(stopped ? "Auto-refresh stopped" : "Updated " + new Date().toLocaleTimeString());
    }).catch(function (e) {
      say("Refresh failed (" + e.message + "), retrying");
    }).then(function () {
      busy = false;
      live.setAttribute("aria-busy", "false");
      schedule();
    });
  }
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.setAttribute("aria-pressed", String(paused));
      say(paused ? "Auto-refresh paused" : "Auto-refresh on");
      if (paused) clearTimeout(timer); else if (!stopped) tick();
    });
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && !paused && !stopped) tick();
  });
  schedule();
})();
