#!/usr/bin/env bash
# Runs every check and test of every module against a real PostgreSQL:
# build and vet each module alone (GOWORK=off, so a missing require cannot
# hide behind go.work), staticcheck, go test (with -race everywhere except
# the one package that links sqlc, whose parser a race build would
# recompile), skipjack check over every example, and the benchmark's smoke
# mode. PostgreSQL is found like the tests find it: $DATABASE_URL, else
# 127.0.0.1:5432 as postgres, else a throwaway cluster started by the test
# harness (runtime/skipjacktest).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export GOWORK=off
staticcheck_version=v0.8.2
modules=(. runtime examples/shop bench dashboard)

step() { printf '\n=== %s\n' "$*"; }

for m in "${modules[@]}"; do
	step "build + vet + staticcheck: $m"
	(cd "$m" && go build ./... && go vet ./... && go run "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" ./...)
done

step "test: root module (-race except the sqlc leaf cmd/skipjack)"
go test -race -count=1 ./generator/... ./schema/... ./queries/... ./templates/...
go test -count=1 ./cmd/...

step "test: runtime (-race)"
(cd runtime && go test -race -count=1 ./...)

step "test: examples"
for ex in examples/*/; do
	(cd "$ex" && go test -race -count=1 ./...)
done

step "test: dashboard (-race; the browser test drives headless Chromium)"
(cd dashboard && go test -race -count=1 ./...)

step "skipjack check over every committed generated tree"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/skipjack" ./cmd/skipjack
for cfg in examples/*/skipjack.yaml bench/skipjack.yaml runtime/internal/testqueue/skipjack.yaml dashboard/internal/testjobs/skipjack.yaml; do
	if [ -f "$cfg" ]; then "$bin/skipjack" check -f "$cfg"; fi
done

step "benchmark smoke run"
(cd bench && go run . -smoke)

step "all checks passed"
