#!/usr/bin/env bash
# connbudget.sh: checks that the runtime module's test suite fits a
# PostgreSQL server with max_connections=100 (the default), so that no test
# fails with "too many clients already" because others took the
# connections. It starts a throwaway cluster with that limit (initdb and
# pg_ctl from PATH or /usr/lib/postgresql/*/bin, as the postgres user when
# run as root), runs `go test -race -count=1 ./...` in runtime/ against it
# (GOWORK=off), samples the client connections every 100 ms and prints the
# peak, the test databases with the highest peaks (each test has its own),
# the server's refusals and the suite's result. Run on demand, not in
# CI.
#
# Usage: scripts/connbudget.sh [go test flags...]   e.g. scripts/connbudget.sh -run TestUnique
#        MAX_CONNECTIONS=60 scripts/connbudget.sh    a tighter server
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
max=${MAX_CONNECTIONS:-100}

if ! command -v initdb >/dev/null; then
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$bin" ] || { echo "connbudget: no initdb on PATH or in /usr/lib/postgresql/*/bin" >&2; exit 1; }
	PATH=$bin:$PATH
fi
dir=$(mktemp -d)
as=()
if [ "$(id -u)" = 0 ]; then
	chown postgres "$dir"
	as=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" initdb -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1
"${as[@]}" pg_ctl -D "$dir/data" -w -l "$dir/server.log" \
	-o "-p $port -c max_connections=$max -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off" start >/dev/null
sampler=
stop() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	"${as[@]}" pg_ctl -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap stop EXIT
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

# One psql session samples for the whole run (its own connection is
# subtracted below): the client connections in all, then per database
# (each test has a database of its own).
psql "$url" -qtA >"$dir/samples" 2>/dev/null <<'EOF' &
SELECT sum(n), string_agg(d || '=' || n, ',') FROM (SELECT coalesce(datname, '-') AS d, count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1) AS s
\watch 0.1
EOF
sampler=$!

start=$(date +%s)
status=0
(cd "$root/runtime" && DATABASE_URL=$url GOWORK=off go test -race -count=1 "$@" ./...) >"$dir/test.log" 2>&1 || status=$?
took=$(($(date +%s) - start))
grep -E '^(ok|FAIL|---)' "$dir/test.log" || true
peak=$(grep -E '^[0-9]+[|]' "$dir/samples" | cut -d'|' -f1 | sort -n | tail -n 1)
echo "the test databases with the most connections at once:"
grep -E '^[0-9]+[|]' "$dir/samples" | cut -d'|' -f2 | tr ',' '\n' | grep '^skipjacktest_' |
	awk -F= '$2 > peak[$1] { peak[$1] = $2 } END { for (d in peak) print peak[d], d }' | sort -rn | head -n 5 || true
refused=$(grep -c 'too many clients' "$dir/server.log" || true)
echo "max_connections $max: peak $((peak - 1)) client connections (sampled every 100 ms), $refused refused; suite exit $status in ${took}s"
[ "$status" -eq 0 ] && [ "$refused" -eq 0 ]
