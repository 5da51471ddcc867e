// Package browsertest drives the dashboard in headless Chromium, as an
// operator would, with axe-core's accessibility rules on every page. It
// holds only tests, in a module of its own so that their browser driver
// (chromedp) stays out of the dashboard module's requirements, and so out
// of the module graph of every service that mounts the dashboard.
//
// The tests need chromium on PATH and axe-core in ../../.ci/axe (or
// $SKIPJACK_AXE_JS); .ci/run installs both. Outside CI (CI unset) they skip
// without them.
package browsertest
