#!/usr/bin/env bash
# Runs every check and test of every module against a real PostgreSQL:
# build, vet and staticcheck each module in the workspace (go.work, as the
# modules require each other at a version that is tagged only at release),
# then each module alone: the modules require each other in lockstep, no
# published go.mod replaces anything, and go mod tidy outside go.work, with
# the other modules served from a file-system module proxy, changes nothing
# (so a missing require cannot hide behind go.work); go test (with -race
# everywhere except the packages that link sqlc, whose parser a race build
# would recompile; internal/lockstep's test installs the CLI from that
# proxy as a user does, by go run pkg@version and by go tool), the exported
# API against api/*.txt (a removed or changed feature fails until the file
# records it),
# skipjack check over every committed generated tree, the README's main
# command (scripts/example.sh) and the benchmark's smoke mode. PostgreSQL is
# found like the tests find it: $DATABASE_URL, else 127.0.0.1:5432 as
# postgres, else a throwaway cluster started by the test harness
# (runtime/skipjacktest).
#
# Nothing here is a typed list that can fall behind: the modules are
# go.work's, the packages come from go list, the configs from git.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# The modules build together through go.work, which go finds by walking up
# from each module's folder. Not GOWORK=$root/go.work: tests that run go in
# a module of their own under /tmp (the golden cases, the install test)
# would then resolve it in this workspace, where it is no module.
unset GOWORK
staticcheck_version=v0.8.2

step() { printf '\n=== %s\n' "$*"; }
fail() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }

# One failing stage must not hide the others: each stage runs in a subshell
# (stage NAME -- COMMAND...), a failure is recorded and the run goes on, and
# every failed stage is listed at the end, which exits 1 if any failed.
failed=()
stage() {
	local name=$1
	shift
	[ "$1" = "--" ] && shift
	step "$name"
	# Not "if ! (...)": errexit is ignored inside a tested command, and the
	# stage's own commands must stop it at their first failure.
	local status
	set +e
	(set -euo pipefail; "$@")
	status=$?
	set -e
	if [ "$status" -ne 0 ]; then
		printf '\nFAIL: stage "%s" (exit %d)\n' "$name" "$status" >&2
		failed+=("$name")
	fi
}

# Every module of the workspace, as ./path (. for the root).
mapfile -t modules < <(go list -m -f '{{.Dir}}' | sed "s|^$root\$|.|; s|^$root/|./|")
[ "${#modules[@]}" -gt 1 ] || fail "go.work lists no modules"

# Modules whose tests are not run here: bench runs in smoke mode below.
untested=(./bench)
# Modules tested without -race: migrationtest's tests drive subprocesses (the
# CLI, go build, the migration tools), which a race build does not check.
norace=(./migrationtest)

# The migrationtest module's tests leave the migrations they generate here,
# for squawk below.
export SKIPJACK_MIGRATIONS_OUT
SKIPJACK_MIGRATIONS_OUT=$(mktemp -d)
cleanup_migrations() { rm -rf "$SKIPJACK_MIGRATIONS_OUT"; }
trap cleanup_migrations EXIT

contains() { local x=$1; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

# gotest runs go test and fails if any package ran no test: a child test
# started with -test.run, or a -run pattern here, that no longer matches a
# renamed test would otherwise pass as "ok ... [no tests to run]".
gotest() {
	local log status=0
	log=$(mktemp)
	go test "$@" 2>&1 | tee "$log" || status=$?
	if [ "$status" -eq 0 ] && grep -q 'no tests to run' "$log"; then
		grep 'no tests to run' "$log" >&2
		status=1
		printf 'FAIL: a go test run matched no test (renamed test?)\n' >&2
	fi
	rm -f "$log"
	return "$status"
}

build_vet() { cd "$1" && go build ./... && go vet ./... && go run "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" ./...; }
for m in "${modules[@]}"; do
	stage "build + vet + staticcheck: $m" -- build_vet "$m"
done

stage "each module alone: lockstep requirements, no replace, tidy outside go.work" -- \
	go run ./internal/release check

stage "the exported API of the runtime, the dashboard and the generated code against api/*.txt" -- \
	go run ./internal/release api

# Packages that link sqlc's parser (the CLI and the sqlc leaf) are tested
# without -race; every other package with it. The timeout is go test's
# default 10 minutes raised for a loaded machine: migrationtest builds every
# release of its rollout matrix, which takes minutes when cores are shared.
sqlc_cli=github.com/sqlc-dev/sqlc/pkg/cli
test_module() {
	local m=$1 race=() plain=()
	while read -r pkg links; do
		if [ -n "$links" ] || contains "$m" "${norace[@]}"; then plain+=("$pkg"); else race+=("$pkg"); fi
	done < <(cd "$m" && go list -f "{{.ImportPath}}{{range .Deps}}{{if eq . \"$sqlc_cli\"}} sqlc{{end}}{{end}}" ./...)
	local status=0
	if [ "${#race[@]}" -gt 0 ]; then (cd "$m" && gotest -race -count=1 -timeout 25m "${race[@]}") || status=1; fi
	if [ "${#plain[@]}" -gt 0 ]; then (cd "$m" && gotest -count=1 -timeout 25m "${plain[@]}") || status=1; fi
	return "$status"
}
for m in "${modules[@]}"; do
	contains "$m" "${untested[@]}" && continue
	stage "test: $m" -- test_module "$m"
done

squawk_all() {
	for f in plain golang-migrate goose tern; do
		[ -d "$SKIPJACK_MIGRATIONS_OUT/evolution-$f" ] || fail "the evolution test left no $f migrations in \$SKIPJACK_MIGRATIONS_OUT"
	done
	bash scripts/squawk.sh golden examples "$SKIPJACK_MIGRATIONS_OUT"
}
stage "squawk over every generated update migration (golden, examples, the evolution and live tests)" -- squawk_all

stage "fuzz the YAML loader for 60s (no panic, every error positioned)" -- \
	bash -c 'cd generator/config && go test -run "^\$" -fuzz "^FuzzLoad\$" -fuzztime 60s .'

bin=$(mktemp -d)
trap 'rm -rf "$bin"; cleanup_migrations' EXIT
stage "build the skipjack CLI" -- go build -o "$bin/skipjack" ./cmd/skipjack

check_all() {
	# Every committed skipjack.yaml except the golden inputs (whose expected
	# trees are *.golden files checked by go test ./generator).
	local configs status=0
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		mapfile -t configs < <(git ls-files -- 'skipjack.yaml' '*/skipjack.yaml' | grep -v '^golden/')
	else
		mapfile -t configs < <(find . -name skipjack.yaml -not -path './golden/*' | sed 's|^\./||' | sort)
	fi
	[ "${#configs[@]}" -gt 0 ] || fail "no skipjack.yaml found"
	for cfg in "${configs[@]}"; do
		[ -f "$cfg" ] || { printf 'FAIL: %s is committed but missing\n' "$cfg" >&2; status=1; continue; }
		"$bin/skipjack" check -f "$cfg" || status=1
	done
	return "$status"
}
stage "skipjack check over every committed generated tree" -- check_all

stage "the README's main command: bash scripts/example.sh (with go.work, as on a fresh clone)" -- \
	env -u GOWORK bash scripts/example.sh

example_unchanged() {
	"$bin/skipjack" check -f examples/shop/skipjack.yaml
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git diff --exit-code --stat -- examples/shop || fail "go generate in examples/shop changed committed files"
		local untracked
		untracked=$(git ls-files --others --exclude-standard -- examples/shop)
		[ -z "$untracked" ] || fail "go generate in examples/shop wrote untracked files: $untracked"
	fi
}
stage "the example's go generate left its committed output as it was" -- example_unchanged

stage "benchmark smoke run" -- bash -c 'cd bench && go run . -smoke'

# The adversity scenarios (issue 42) in seconds per phase, on a throwaway
# cluster of their own (the postgres-restart phase restarts it): fails on a
# lost, doubled or failed job.
stage "adversity scenarios smoke run" -- bash -c 'cd bench && go run . scenarios -smoke'

if [ "${#failed[@]}" -gt 0 ]; then
	printf '\n=== %d stage(s) failed:\n' "${#failed[@]}" >&2
	printf '  - %s\n' "${failed[@]}" >&2
	exit 1
fi
step "all checks passed"
