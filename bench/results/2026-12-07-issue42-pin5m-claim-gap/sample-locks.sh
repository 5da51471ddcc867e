#!/bin/bash
# Samples the runner's cluster twice a second: every backend waiting on a heavyweight lock,
# with the statement it runs and, for each of its blockers (pg_blocking_pids), the blocker's
# state, wait and statement.
out=$1
while true; do
  port=$(ps aux | grep -o "\-p [0-9]* -c fsync" | head -1 | awk '{print $2}')
  if [ -n "$port" ]; then
    db=$(psql -h 127.0.0.1 -p $port -U postgres -XAtc "select datname from pg_database where datname like 'skj%' order by oid desc limit 1" 2>/dev/null)
    r=$(psql -h 127.0.0.1 -p $port -U postgres -d "$db" -XAtc "
      select w.wait_event, left(regexp_replace(w.query,'\s+',' ','g'),45), b.pid, b.state, coalesce(b.wait_event_type||':'||b.wait_event,'-'), round(extract(epoch from now()-b.xact_start)*1000), left(regexp_replace(b.query,'\s+',' ','g'),45)
      from pg_stat_activity w cross join lateral unnest(pg_blocking_pids(w.pid)) as bp(pid) join pg_stat_activity b on b.pid = bp.pid
      where w.wait_event_type = 'Lock'" 2>/dev/null)
    if [ -n "$r" ]; then echo "=== $(date -u +%H:%M:%S.%N | cut -c1-12)"; echo "$r"; fi >> $out
  fi
  sleep 0.5
done
