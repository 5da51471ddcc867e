#!/bin/bash
# Interleaved 5-minute-pin runs: old = 9b66a07 (no claim spacing), main = 1f84dc6 (20 ms gap),
# adapt = 2f3afa4 (gap of 4x the last claim, at most 20 ms). A run named *-L* runs beside two
# burners of half a core each (burn.sh).
for r in "$@"; do
  bin=/tmp/bench-${r%%-*}
  out=/tmp/pin13/$r
  mkdir -p $out
  case $r in *-L*) touch /tmp/pin13/burn.on; /tmp/pin13/burn.sh & /tmp/pin13/burn.sh & ;; esac
  vmstat 5 > $out/vmstat.txt & v=$!
  echo "$r start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >> /tmp/pin13/log
  (cd /work/main/bench && $bin scenarios -systems skipjack-default -phases clean=60s,idle-in-tx=5m,recovery=60s -out $out > $out/output.txt 2>&1)
  echo "$r end $(date -u +%H:%M:%S) rc=$?" >> /tmp/pin13/log
  kill $v
  rm -f /tmp/pin13/burn.on
  grep -E "^\| 1 \| idle-in-tx \| skipjack" $out/output.txt | head -1 >> /tmp/pin13/log
  sleep 20
done
