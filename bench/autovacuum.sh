#!/usr/bin/env bash
# autovacuum.sh runs the bench against a throwaway PostgreSQL cluster with
# PostgreSQL's default settings (autovacuum on, fsync on, ...), because the
# shared development server has autovacuum off server-wide and production
# servers run with it on.
#
#   ./autovacuum.sh [bench flags...]        e.g. ./autovacuum.sh -runs 3 -jobs 50000 -latency 5s
#   PG_OPTS='-c max_connections=300' ./autovacuum.sh -no-main -idle 50
#
# It initdb's a cluster in a temporary directory, starts it on 127.0.0.1:$PORT
# (default 5499) as the postgres OS user when run as root, runs
# `go run . <flags> -database-url postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable`
# from this directory, and stops and removes the cluster on exit, whatever
# happens. Settings other than the defaults: only what $PG_OPTS passes to
# `pg_ctl -o` (empty by default). PG_BIN overrides the directory of initdb and
# pg_ctl (default: /usr/lib/postgresql/15/bin if it exists, else PATH).
# BENCH_BIN runs a prebuilt bench binary instead of `go run .` (for A/B
# runs of two builds against fresh clusters). PG_CPUS and BENCH_CPUS (taskset
# CPU lists, e.g. 0 and 1) pin the server and the bench with its worker
# processes to CPUs of their own, so that they share no core, as they would
# on separate hosts.
set -euo pipefail

cd "$(dirname "$0")"
PORT=${PORT:-5499}
PG_OPTS=${PG_OPTS:-}
if [[ -z "${PG_BIN:-}" && -x /usr/lib/postgresql/15/bin/initdb ]]; then
	PG_BIN=/usr/lib/postgresql/15/bin
fi
initdb=${PG_BIN:+$PG_BIN/}initdb
pg_ctl=${PG_BIN:+$PG_BIN/}pg_ctl

# as_pg runs a command as the postgres OS user when we are root (the server
# refuses to run as root), else as ourselves.
as_pg() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

if (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	echo "autovacuum.sh: port $PORT is in use; set PORT" >&2
	exit 2
fi

dir=$(mktemp -d /tmp/skjbench-pg.XXXXXX)
if [[ $(id -u) == 0 ]]; then
	chown postgres: "$dir"
fi
data=$dir/data
started=
cleanup() {
	if [[ -n $started ]]; then
		as_pg "$pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

as_pg "$initdb" -D "$data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1 ||
	{ cat "$dir/initdb.log" >&2; exit 1; }
start_pg=("$pg_ctl")
if [[ -n ${PG_CPUS:-} ]]; then
	start_pg=(taskset -c "$PG_CPUS" "$pg_ctl")
fi
as_pg "${start_pg[@]}" -D "$data" -l "$dir/server.log" -w \
	-o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$dir $PG_OPTS" start >/dev/null ||
	{ cat "$dir/server.log" >&2; exit 1; }
started=1

echo "autovacuum.sh: throwaway cluster on 127.0.0.1:$PORT in $dir (initdb defaults${PG_OPTS:+, plus $PG_OPTS})" >&2
bench_pin=()
if [[ -n ${BENCH_CPUS:-} ]]; then
	bench_pin=(taskset -c "$BENCH_CPUS")
fi
"${bench_pin[@]}" ${BENCH_BIN:-go run .} "$@" -database-url "postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
