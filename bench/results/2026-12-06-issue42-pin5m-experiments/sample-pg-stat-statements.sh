#!/bin/bash
# samples the runner's cluster every 10 s: pg_stat_statements top statements (cumulative) and autovacuum/checkpointer activity
out=$1
while true; do
  port=$(ps aux | grep -o "\-p [0-9]* -c fsync" | head -1 | awk '{print $2}')
  if [ -n "$port" ]; then
    db=$(psql -h 127.0.0.1 -p $port -U postgres -XAtc "select datname from pg_database where datname like '%skipjack%' or datname like 'skj%' order by oid desc limit 1" 2>/dev/null)
    {
      echo "=== $(date -u +%H:%M:%S) port $port db $db load $(cut -d' ' -f1 /proc/loadavg)"
      psql -h 127.0.0.1 -p $port -U postgres -XAtc "select backend_type, state, wait_event_type||':'||coalesce(wait_event,''), left(query,60) from pg_stat_activity where backend_type not in ('client backend') or query ilike '%vacuum%' or query ilike '%analyze%'" 2>/dev/null
      psql -h 127.0.0.1 -p $port -U postgres -d "$db" -XAtc "select calls, round(total_exec_time::numeric,0) ms, shared_blks_hit+shared_blks_read bufs, left(regexp_replace(query,'\s+',' ','g'),50) from pg_stat_statements where total_exec_time > 500 order by total_exec_time desc limit 12" 2>/dev/null
      psql -h 127.0.0.1 -p $port -U postgres -d "$db" -XAtc "select relname, n_dead_tup, autovacuum_count, autoanalyze_count, last_autovacuum from pg_stat_user_tables where n_dead_tup > 1000 or autovacuum_count > 0" 2>/dev/null
    } >> $out
  fi
  sleep 10
done
