#!/bin/bash
# Interleaved 5-minute-pin runs of two bench builds, with the pg_stat_statements sampler.
S=/work/main/bench/results/2026-12-06-issue42-pin5m-experiments/sample-pg-stat-statements.sh
for r in "$@"; do
  bin=/tmp/bench-${r%%-*}
  out=/tmp/pinruns/$r
  mkdir -p $out
  bash $S $out/pg-stat-statements-samples.txt & sp=$!
  echo "$r start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >> /tmp/pinruns/log
  (cd /work/main/bench && $bin scenarios -systems skipjack-default -phases clean=60s,idle-in-tx=5m,recovery=60s -out $out > $out/output.txt 2>&1)
  kill $sp
  echo "$r end $(date -u +%H:%M:%S) rc=$?" >> /tmp/pinruns/log
  grep -E "idle-in-tx \| skipjack" $out/summary.md | head -1 >> /tmp/pinruns/log
  sleep 20
done
