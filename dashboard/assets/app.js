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
  var paused = false, busy = false, timer = 0, count = 0;

  function say(text) { if (status) status.textContent = text; }
  function schedule() {
    clearTimeout(timer);
    if (!paused) timer = setTimeout(tick, every);
  }
  function tick() {
    // Skip a round while the tab is hidden, a fetch is under way, or the
    // keyboard focus is inside the region (replacing it would lose it).
    if (document.hidden || busy || live.contains(document.activeElement)) {
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
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      live.innerHTML = html;
      count++;
      live.setAttribute("data-refreshed", String(count));
      say("Updated " + new Date().toLocaleTimeString());
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
      if (paused) clearTimeout(timer); else tick();
    });
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && !paused) tick();
  });
  schedule();
})();
