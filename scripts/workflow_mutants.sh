#!/usr/bin/env bash
# workflow_mutants.sh: mutation check of workflows (issue 45). The fan-in
# counter, the failure policy and the retry re-arm live in the SQL that the
# generator writes into the migration (schema/workflow.go), so a mutant of
# them changes golden output and TestGolden would kill it by comparison
# alone. Here each mutant patches a copy of the repository, generates the
# golden/workflows case with it into a temporary module (no comparison) and
# runs the case's own tests against PostgreSQL: KILLED when they fail,
# SURVIVED when they pass, STALE when the patch no longer matches.
#
# Usage: scripts/workflow_mutants.sh [name-regex]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
filter=${1:-.}

# name :: file :: sed expression :: tests (-run regex)
mutants=(
  "fanin-counter-unlocked :: schema/workflow.go :: s/AND \"state\" = 'waiting' ORDER BY \"step\" FOR UPDATE LOOP/AND \"state\" = 'waiting' LOOP/ :: TestFanInSimultaneousParents"
  "failure-policy-releases :: schema/workflow.go :: s/IF outcome = 'completed' OR d.\"run_on_failure\" THEN/IF true THEN/ :: TestUpstreamFailureCancelsTransitively"
  "run-policy-ignored :: schema/workflow.go :: s/IF outcome = 'completed' OR d.\"run_on_failure\" THEN/IF outcome = 'completed' THEN/ :: TestUpstreamFailureCancelsTransitively"
  "retry-does-not-rearm :: schema/workflow.go :: s/IF d.\"state\" = 'failed' AND d.\"cancelled_by\" = st.\"step\" THEN/IF false THEN/ :: TestRetryRearmsDownstream"
  "waiting-step-not-held :: schema/workflow.go :: s/NEW.\"run_at\" := OLD.\"run_at\";/NULL;/ :: TestCancelWorkflow"
  "output-read-nil :: runtime/skipjackimpl/workflow.go :: s/^\tif b == nil {$/\tif true {/ :: TestOutputsRoundTrip"
  "output-not-written :: runtime/skipjackimpl/workflow.go :: s/^\tif wt == nil || output == nil {$/\tif true {/ :: TestOutputsRoundTrip"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
killed=0 survived=0 stale=0
for m in "${mutants[@]}"; do
  name=${m%% :: *}; rest=${m#* :: }
  file=${rest%% :: *}; rest=${rest#* :: }
  expr=${rest%% :: *}; tests=${rest#* :: }
  [[ $name =~ $filter ]] || continue
  rm -rf "$work/repo" "$work/mod"
  mkdir "$work/repo" "$work/mod"
  (cd "$root" && tar -c --exclude=./.git .) | (cd "$work/repo" && tar -x)
  sed -i "$expr" "$work/repo/$file"
  if cmp -s "$root/$file" "$work/repo/$file"; then
    echo "STALE     $name"; stale=$((stale + 1)); continue
  fi
  (cd "$work/repo" && go build -o "$work/skipjack" ./cmd/skipjack)
  cp "$root/golden/workflows/skipjack.yaml" "$work/mod/"
  cp "$root/golden/workflows/workflows_test.go.txt" "$work/mod/workflows_test.go"
  cat >"$work/mod/go.mod" <<MOD
module example.com/golden/workflows

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/skipjack-dev/skipjack/runtime v0.0.0
)

replace github.com/skipjack-dev/skipjack/runtime => $work/repo/runtime
MOD
  (cd "$work/mod" && "$work/skipjack" generate >/dev/null && GOWORK=off go mod tidy >/dev/null 2>&1)
  if (cd "$work/mod" && GOWORK=off go test -count=1 -timeout 600s -run "$tests" . >"$work/out" 2>&1); then
    echo "SURVIVED  $name"; survived=$((survived + 1))
  else
    echo "KILLED    $name"; killed=$((killed + 1))
  fi
done
echo "killed $killed, survived $survived, stale $stale"
[[ $survived -eq 0 && $stale -eq 0 ]]
