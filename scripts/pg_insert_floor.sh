#!/usr/bin/env bash
# The server's own cost of a batch of 1,000 jobs on PostgreSQL, without any client: each form
# runs under pgbench (one connection unless named) on a freshly migrated database, rows a second.
# It bounds what a batched enqueue can gain over the bench's bare multi-row INSERT by changing the
# statement alone (docs/bench-journal/2026-11-27-pg-batched-enqueue-floor.md).
#
#   scripts/pg_insert_floor.sh [BACKLOG_BINARY] [ROUNDS] [SECONDS] [PORT]
#
# Needs pgbench (PostgreSQL's client package) and a PostgreSQL on 127.0.0.1 (PORT, 5432 unless
# given; 5433 is the fault cluster of scripts/fault_server.sh, with autovacuum on), user postgres
# with trust auth; creates and drops the database `backlog_insert_floor`. COPY reads a file on
# the server's machine, so the server must run on this one.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/backlog}"
rounds="${2:-3}"
seconds="${3:-10}"
host=127.0.0.1 port="${4:-5432}" user=postgres db=backlog_insert_floor
for n in "$rounds" "$seconds" "$port"; do
    if [[ ! "$n" =~ ^[1-9][0-9]*$ ]]; then
        echo "pg_insert_floor: ROUNDS, SECONDS and PORT are positive whole numbers, not '$n'" >&2
        exit 2
    fi
done
if [[ ! -x "$bin" ]]; then
    echo "pg_insert_floor: no backlog binary at $bin (cargo build --release)" >&2
    exit 2
fi
export PGOPTIONS="-c client_min_messages=warning"
psql=(psql -qX -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U "$user")
work="$(mktemp -d)"
chmod 755 "$work"
"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" || true; rm -rf "$work"' EXIT
"$bin" --database-url "postgres://$user@$host:$port/$db" migrate > /dev/null
"${psql[@]}" -d "$db" \
    -c "CREATE TABLE bare (LIKE backlog_job INCLUDING ALL)" \
    -c "CREATE UNLOGGED TABLE bare_unlogged (LIKE backlog_job INCLUDING ALL)"

python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        f.write("q\t{\"i\": %d}\t0\n" % i)
' "$work/rows.txt"
chmod 644 "$work/rows.txt"
payloads="(SELECT array_agg('{\"i\": ' || g || '}') FROM generate_series(1, 1000) g)"
# The bench's bare form: a multi-row INSERT from one text[] of payloads, on a copy of the table
# with its indexes and without the wake-up trigger.
echo "INSERT INTO bare (queue, payload, shard)
      SELECT 'q', p::jsonb, floor(random() * 1) FROM unnest($payloads) AS t(p);" > "$work/insert_bare.sql"
# The runtime's statement (job_insert_uniform): the job table, its trigger, ids back in one array.
echo "SET backlog.notify = 'off';
      WITH ins AS (
          INSERT INTO backlog_job (queue, payload, shard, created_at)
          SELECT 'q', p::jsonb, floor(random() * 1), 5
          FROM unnest($payloads) WITH ORDINALITY AS t(p, ord) ORDER BY ord RETURNING id)
      SELECT array_agg(id) FROM ins;" > "$work/insert_job.sql"
echo "COPY bare (queue, payload, shard) FROM '$work/rows.txt';" > "$work/copy_bare.sql"
echo "SET backlog.notify = 'off';
      COPY backlog_job (queue, payload, shard) FROM '$work/rows.txt';" > "$work/copy_job.sql"
# An upper bound for any statement: constant rows (nothing parsed) into a table without WAL.
echo "INSERT INTO bare_unlogged (queue, payload, shard)
      SELECT 'q', '{\"i\": 1}'::jsonb, 0 FROM generate_series(1, 1000);" > "$work/const_unlogged.sql"

forms=(insert_bare insert_job copy_bare copy_job const_unlogged insert_bare:2)
echo "rows a second (1,000-row statements, ${seconds} s each), rounds alternating"
printf '%-22s' form; for r in $(seq "$rounds"); do printf '%12s' "round $r"; done; echo
declare -A out
for r in $(seq "$rounds"); do
    for f in "${forms[@]}"; do
        name="${f%%:*}" clients=1
        [[ "$f" == *:* ]] && clients="${f##*:}"
        "${psql[@]}" -d "$db" -c "TRUNCATE bare, bare_unlogged, backlog_job" -c "CHECKPOINT"
        log=$(pgbench -h "$host" -p "$port" -U "$user" -n -c "$clients" -j "$clients" \
            -T "$seconds" -f "$work/$name.sql" "$db" 2>&1) || {
            echo "pg_insert_floor: pgbench failed on $name: $log" >&2
            exit 1
        }
        tps=$(awk '/^tps/ {print $3}' <<< "$log")
        out[$f]+=$(awk -v t="$tps" 'BEGIN {printf "%12.0f", t * 1000}')
    done
done
for f in "${forms[@]}"; do
    label="${f%%:*}"
    [[ "$f" == *:* ]] && label="$label (${f##*:} conns)"
    printf '%-22s%s\n' "$label" "${out[$f]}"
done
