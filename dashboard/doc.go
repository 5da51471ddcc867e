// Package dashboard serves a web dashboard for skipjack queues: an overview
// of every queue, a job list per queue and state (newest first, keyset pages
// both ways, tabs that count under the active filter), and one page per job
// with its pretty-printed payload, timings and error history. Operators can
// retry, cancel and delete a job, the jobs of a page or a selection of them
// at once, when actions are enabled. A queue page also shows the queue's
// flow control and how much of it is in use. Pages refresh
// themselves in place every few seconds with a few lines of embedded
// JavaScript; no asset comes from a CDN, so the dashboard works offline.
//
// The overview and every queue page lead with charts of the last hour (per
// minute) or day (per hour): jobs completed and failed, and how long jobs
// waited from their run time until their handlers started (p50 and p95).
// They are SVG drawn on the server, with their data in a table under them,
// so they read without JavaScript and with a screen reader. The figures
// come from the schema's counts table, which the statements that
// acknowledge and resolve jobs write (skipjack.QueueInsights.Activity, which
// every generated Admin implements), so they cover queues that delete jobs
// at ack. For a QueueAdmin without QueueInsights the overview counts the
// last hour from retained rows (Finished) and the charts, failure groups and
// schedules say they are unavailable.
//
// A queue's failures page groups its most recent failed jobs by their last
// error, with numbers and ids folded ("account N not found"), links to
// each group's jobs and, with actions enabled, retries a group after a
// confirmation. Queue pages find jobs by payload field values (customer =
// 42: a jsonb containment bound as a parameter, in bounded windows of the
// primary key) and list the queue's periodic jobs with their next slots.
//
// It is its own module so that the runtime stays pgx-only, and it reads and
// changes jobs only through the admin view every generated queue package
// returns from its Admin function ([skipjack.QueueAdmin]): no SQL is ever
// built from a request, and every list is bounded by a page size.
// Workflows (Config.Workflows, each generated workflow package's Admin,
// [skipjack.WorkflowAdmin]) get a list page and a page per workflow that
// draws its steps as a graph.
//
// Mount it under any prefix, behind your own authentication:
//
//	dash, err := dashboard.New(dashboard.Config{
//		Queues:  []skipjack.QueueAdmin{sendemail.Admin(pool), resizeimage.Admin(pool)},
//		Actions: true,
//	})
//	if err != nil { ... }
//	mux.Handle("/admin/jobs/", requireAdmin(http.StripPrefix("/admin/jobs", dash)))
//
// All links the dashboard writes are relative, so it needs no knowledge of
// the prefix.
//
// `skipjack ui --database-url URL [--listen 127.0.0.1:8080] [--actions]`
// runs it standalone over the queues of a skipjack.yaml: the skipjack
// binary links this package and reads the queue tables with the queries of
// their generated Admin, so it needs only the YAML and the database, not
// your module or a Go toolchain.
//
// # Safety
//
// Actions (retry, cancel, delete, retrying a failure group, pause and
// resume) are off unless [Config.Actions] is set. Every
// action is a POST from a confirmation page and carries a token, an HMAC of
// the action, queue, job ids and an expiry under a secret key
// ([Config.Secret], random per process by default); cross-origin browser
// requests are refused by their Sec-Fetch-Site and Origin headers
// ([net/http.CrossOriginProtection]). Pages are sent with a strict
// Content-Security-Policy that allows only the dashboard's own script and
// style sheet.
//
// Those checks cannot see a DNS rebinding attack: a page on a name the
// attacker controls, whose DNS answer then changes to 127.0.0.1, is
// same-origin with a dashboard on the victim's machine, so it could read
// payloads and post actions with a valid token. The dashboard therefore
// answers only requests whose Host is an IP address, localhost, or one of
// [Config.AllowedHosts]; any other gets 421 Misdirected Request on every
// path, saying which option to set. A dashboard reached by a name (a
// reverse proxy that passes the browser's Host on, the machine's DNS
// name) must list it:
//
//	dashboard.Config{Queues: queues, AllowedHosts: []string{"jobs.example.com"}}
//
// (skipjack ui: --allowed-host jobs.example.com). A service that checks
// the Host itself can set AllowedHosts to "*".
//
// # A read-only database role
//
// Without actions the dashboard only reads. Give it a role that can do
// nothing else (replace skipjack with your config's schema):
//
//	CREATE ROLE skipjack_dashboard LOGIN PASSWORD '...';
//	ALTER ROLE skipjack_dashboard SET default_transaction_read_only = on;
//	GRANT USAGE ON SCHEMA skipjack TO skipjack_dashboard;
//	GRANT SELECT ON ALL TABLES IN SCHEMA skipjack TO skipjack_dashboard;
//	ALTER DEFAULT PRIVILEGES IN SCHEMA skipjack GRANT SELECT ON TABLES TO skipjack_dashboard;
//
// (ALTER DEFAULT PRIVILEGES covers tables that later migrations create when
// they are run by the role that runs this statement.) With actions enabled,
// the role needs UPDATE as well, INSERT on the queues table (pausing a queue
// for the first time adds its row), and read-write transactions:
//
//	ALTER ROLE skipjack_dashboard SET default_transaction_read_only = off;
//	GRANT UPDATE ON ALL TABLES IN SCHEMA skipjack TO skipjack_dashboard;
//	GRANT INSERT ON skipjack._skipjack_queues TO skipjack_dashboard;
//	ALTER DEFAULT PRIVILEGES IN SCHEMA skipjack GRANT UPDATE ON TABLES TO skipjack_dashboard;
package dashboard
