#!/usr/bin/env bash
# mutants.sh: mutation check of the runtime's guarantees, run on demand (not
# in CI). Each mutant is a one-line sed patch of the runtime, applied to a
# temporary copy of runtime/; the tests that guard the guarantee then run
# against it (-race, GOWORK=off). A mutant is KILLED when they fail and
# SURVIVED when they pass; a patch that no longer matches is reported as
# STALE (update it here when the code moves).
#
# Usage: scripts/mutants.sh [name-regex]     e.g. scripts/mutants.sh shutdown
#        FULL=1 scripts/mutants.sh           run the whole runtime suite per mutant
# Needs Postgres as the runtime tests do ($DATABASE_URL or 127.0.0.1:5432).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
filter=${1:-.}

# name :: file (under runtime/) :: sed expression :: tests (-run regex) :: package
mutants=(
  "live-renews-1ms :: skipjackimpl/heartbeat.go :: s/r.store.Live(ctx, r.liveID, r.spec.Lease)/r.store.Live(ctx, r.liveID, time.Millisecond)/ :: TestLockHeldAcrossHeartbeats|TestTableLockLongerThanLease|TestRowLockThenFastRescuer :: ."
  "heartbeat-waits-on-row-locks :: internal/testqueue/slow/internal/db/queries.sql.go :: /-- name: Heartbeat/,/FOR NO KEY UPDATE SKIP LOCKED/s/FOR NO KEY UPDATE SKIP LOCKED/FOR NO KEY UPDATE/ :: TestOperatorLockAcrossHeartbeats :: ."
  "retry-delay-is-minimum :: skipjackimpl/backoff.go :: s/^\treturn j$/\treturn min/ :: TestRetryBackoffGrows :: ."
  "retry-delay-is-minimum-unit :: skipjackimpl/backoff.go :: s/^\treturn j$/\treturn min/ :: TestRetryDelayBounds :: ./skipjackimpl"
  "notedue-does-nothing :: skipjackimpl/fetch.go :: s/^\tt := time.Now().Add(d)$/\treturn\n\tt := time.Now().Add(d)/ :: TestRetryWakesWorker :: ."
  "lost-lease-bookkeeping-removed :: skipjackimpl/heartbeat.go :: /^\te.lost = true$/d;/^\tr.forget(e)$/d :: TestHeartbeatCancelsLostJob$|TestReclaimCancelsStaleRun$|TestLateAckAfterLostLease :: ."
  "lost-lease-bookkeeping-removed-unit :: skipjackimpl/heartbeat.go :: /^\te.lost = true$/d;/^\tr.forget(e)$/d :: TestLostLeaseResultDropped :: ./skipjackimpl"
  "reclaim-keeps-stale-attempt :: skipjackimpl/fetch.go :: s/old != nil && !old.lost/old != nil \&\& false/ :: TestReclaimCancelsStaleRun :: ."
  "no-lease-watch :: skipjackimpl/heartbeat.go :: s/if !r.doubtingLocked(now, proof) {/if true {/ :: TestPartitionCancelsHandlers :: ."
  "statement-deadline-15s :: skipjackimpl/worker.go :: s/return min(queryTimeout, max(lease\/2, time.Second))/return queryTimeout/ :: TestStatementCancelledOnServer :: ."
  "decode-panic-not-recovered :: skipjackimpl/fetch.go :: s/if v := recover(); v != nil {/if v := any(nil); v != nil {/ :: TestDecodePanicFailsJob :: ./skipjackimpl"
  "shutdown-cancels-at-once :: skipjackimpl/worker.go :: s/t := time.NewTimer(time.Until(deadline))/t := time.NewTimer(0)/ :: TestShutdown$|TestShutdownTimeoutFromCancellation :: ."
  "shutdown-clock-after-claims :: skipjackimpl/worker.go :: s/^\tdeadline := time.Now().Add(r.cfg.ShutdownTimeout)$/\tr.claims.Wait()\n\tdeadline := time.Now().Add(r.cfg.ShutdownTimeout)/ :: TestShutdownClockStartsAtCancellation :: ."
  "shutdown-interrupt-counts-attempt :: skipjackimpl/execute.go :: s/case err != nil \&\& (errors.Is(cause, errShutdown)/case err != nil \&\& false \&\& (errors.Is(cause, errShutdown)/ :: TestShutdownTimeoutFromCancellation :: ."
  "shutdown-never-cancels-handlers :: skipjackimpl/worker.go :: s/^\t\t\te.cancel(cause)$/\t\t\t_ = cause/ :: TestShutdownTimeoutFromCancellation :: ."
  "handler-stop-not-passed-on :: skipjackimpl/execute.go :: s/^\t\t\tsignal(r.avail)$/\t\t\t_ = 0/ :: TestNoGoroutineLeft :: ."
  "shutdown-waits-for-stuck-handlers :: skipjackimpl/worker.go :: s/^\tt.Reset(grace)$/\tt.Reset(time.Hour)/ :: TestShutdownStuckHandler :: ."
  "overrun-renewed-forever :: skipjackimpl/heartbeat.go :: s/if e.lost || e.abandoned || e.cancel == nil || e.startedAt.IsZero()/if true || e.lost/ :: TestOverrunAbandoned :: ."
  "no-poison-isolation :: skipjackimpl/isolate.go :: s/suspectRescues = 2$/suspectRescues = 1 << 30/ :: TestPoisonJobCrashLoop :: ."
  "maintenance-capped-at-10-batches :: skipjackimpl/maintain.go :: s/if time.Now().After(end) {/if time.Now().After(end) || total >= 10*maintainBatch {/ :: TestRescueKeepsUp|TestPruneKeepsUp :: ."
  "sigterm-interrupt-counts-attempt :: skipjackimpl/execute.go :: s/case err != nil \&\& (errors.Is(cause, errShutdown)/case err != nil \&\& false \&\& (errors.Is(cause, errShutdown)/ :: TestSigtermUnderLoad :: ."
  "sigterm-prefetched-not-released :: skipjackimpl/worker.go :: s/release.Go(func() { r.releaseQueued(queued) })/_ = queued/ :: TestSigtermUnderLoad :: ."
  "sigterm-cancels-at-once :: skipjackimpl/worker.go :: s/t := time.NewTimer(time.Until(deadline))/t := time.NewTimer(0)/ :: TestSigtermUnderLoad :: ."
  "prune-one-batch-per-run :: skipjackimpl/maintain.go :: s/if n < maintainBatch {/if true {/ :: TestPruneUnderLoad :: ."
  "prune-every-minute :: skipjackimpl/maintain.go :: s/every = min(every, max(keep\/2, minPruneEvery))/every = min(every, pruneEvery)/ :: TestPruneUnderLoad :: ."
  "prune-failed-walks-retained :: internal/testqueue/trim/internal/db/queries.sql.go :: /-- name: PruneFailed/,/FOR UPDATE SKIP LOCKED/s/\"finished_at\" < now() - \$1::interval/\"finished_at\" + \$1::interval < now()/ :: TestPruneUnderLoad :: ."
  "ack-ignores-claim-token :: internal/testqueue/demo/internal/db/queries.sql.go :: /-- name: Complete :many/,/RETURNING t.\"id\"/s/AND t.\"claim\" = ((SELECT \"claims\" FROM owned) ->> t.\"id\"::text)::integer/AND t.\"claim\" > 0/ :: TestStaleBatchedAckFenced :: ."
  "timeout-list-never-fires :: skipjackimpl/timeout.go :: s/for l.head != nil \&\& !r.deadline(l.head).After(now) {/for l.head != nil \&\& false {/ :: TestTimeoutListCancelsEachAtItsDeadline :: ./skipjackimpl"
  "timeout-list-not-rearmed :: skipjackimpl/timeout.go :: s/^\t\tcase <-r.timeouts.wake:$/\t\tcase <-make(chan struct{}):/ :: TestTimeoutListCancelsEachAtItsDeadline :: ./skipjackimpl"
  "timeout-reported-as-cancel :: skipjackimpl/timeout.go :: s/return context.DeadlineExceeded/return err/ :: TestTimeoutListCancelsEachAtItsDeadline :: ./skipjackimpl"
  "control-statements-on-user-pool :: skipjackimpl/worker.go :: s/r.store = r.w.bind(control)/r.store = r.w.bind(r.w.pool)/ :: TestPoolExhaustedByHandlers :: ."
  # Third round (issue 22).
  "error-text-sent-as-is :: skipjackimpl/queue.go :: s/^\treturn capMessage(strings.ToValidUTF8(msg, \"\\\\uFFFD\"))$/\treturn capMessage(msg)/ :: TestUnstorableErrorText :: ."
  "rejected-batch-not-split :: skipjackimpl/ack.go :: s/if err == nil || !dataError(err) {/if true {/ :: TestResolveSplitsRejectedBatch :: ./skipjackimpl"
  "suspect-isolated-until-return :: skipjackimpl/isolate.go :: s/^\te.endIsolation = end$/\t_ = end/ :: TestHungSuspectReleasesIsolation :: ."
  "prefetched-cancel-dropped :: skipjackimpl/heartbeat.go :: s/^\t\t\te.cancelled = true$/\t\t\t_ = e/ :: TestCancelPrefetched :: ."
  "rescue-ignores-liveness :: internal/testqueue/slow/internal/db/queries.sql.go :: s/AND (w.\"id\" IS NULL OR w.\"expires_at\" < now())// :: TestTableLockLongerThanLease|TestRowLockThenFastRescuer :: ."
  "ack-cancel-race-not-rechecked :: skipjackimpl/ack.go :: s/if err != nil || len(matched) == len(ids) {/if true {/ :: TestAckRacingCancel :: ."
  "rescues-never-reset :: internal/testqueue/fast/internal/db/queries.sql.go :: s/\"rescues\" = CASE WHEN locked.outcome = 'release' THEN t.\"rescues\" ELSE 0 END,// :: TestSuspectCountResets :: ."
  "duplicate-lookup-not-retried :: skipjackimpl/queue.go :: s/for range duplicateRaces {/for range 1 {/ :: TestDuplicateLeavesUniqueStates :: ."
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
killed=0 survived=0 stale=0
for m in "${mutants[@]}"; do
  name=${m%% :: *}; rest=${m#* :: }
  file=${rest%% :: *}; rest=${rest#* :: }
  expr=${rest%% :: *}; rest=${rest#* :: }
  tests=${rest%% :: *}; pkg=${rest#* :: }
  [[ $name =~ $filter ]] || continue
  rm -rf "$work/runtime"
  cp -r "$root/runtime" "$work/runtime"
  sed -i -e "$expr" "$work/runtime/$file"
  if cmp -s "$root/runtime/$file" "$work/runtime/$file"; then
    printf '%-40s STALE (patch matched nothing in %s)\n' "$name" "$file"
    stale=$((stale + 1))
    continue
  fi
  run=(-run "$tests" "$pkg")
  [[ -n ${FULL:-} ]] && run=(./...)
  if (cd "$work/runtime" && GOWORK=off go test -race -count=1 -timeout 300s "${run[@]}" >"$work/out" 2>&1); then
    printf '%-40s SURVIVED (%s)\n' "$name" "$tests"
    survived=$((survived + 1))
  elif grep -q '\[build failed\]\|\[setup failed\]' "$work/out"; then
    # A mutant that does not compile proves nothing: fix its patch.
    printf '%-40s STALE (does not compile: %s)\n' "$name" "$(grep -m1 -E '\.go:[0-9]+:[0-9]+: ' "$work/out" || true)"
    stale=$((stale + 1))
  else
    by=$(grep -oE -- '--- FAIL: [A-Za-z0-9_/]+' "$work/out" | sed 's/--- FAIL: //' | sort -u | tr '\n' ' ' || true)
    printf '%-40s killed by %s\n' "$name" "${by:-a crash of the test binary ($tests)}"
    killed=$((killed + 1))
  fi
done
echo "killed $killed, survived $survived, stale $stale"
[[ $survived -eq 0 && $stale -eq 0 ]]
