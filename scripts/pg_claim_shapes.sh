#!/usr/bin/env bash
# PostgreSQL claim shapes as bare SQL through pgbench: a client written in C that costs next to
# nothing, so the figures say what the server alone does on this machine. Each transaction
# deletes the batch the client claimed before (fenced by its lease token) and claims the next
# 100 jobs from a random one of 16 shards, as backlog's folded complete-and-claim does.
#
#   scripts/pg_claim_shapes.sh [CLIENTS] [ROUNDS] [SHAPES]
#
# Shapes (default all):
#   status   a slim job table as today's: a partial claim index (state = 'available') and a
#            partial lease index, so that a claim moves each row out of the one and into the
#            other (a new row version with new index entries).
#   hot      the same table with a claim that writes no indexed column: the claim index covers
#            every row (claimed ones are passed over by the state filter), no lease index (a
#            lease row per claim in a table of its own instead), fillfactor 70, so that
#            PostgreSQL can update the row in place (HOT) without touching an index.
#   wide     status on a table as wide as backlog's (its 22 columns, JSON defaults, the state
#            CHECK): a claim copies the whole row into its new version.
#   ready    the wide table, never written by a claim: the claimable jobs also live in a narrow
#            table (queue, shard, priority, run_at, id) that a claim deletes from, and the lease
#            is a row per claim in a table of its own (token, expiry, ids); the completion
#            deletes the job rows and the lease row. Enqueue would write two rows a job.
#   runtime  backlog's own statement (queries/postgres/job_complete_with_claim_delete_one_fifo.sql)
#            on backlog's own table, migrated by the release build ($BACKLOG).
#   bare     the `backlog bench` bare one-statement form on the same table.
#   txclaim  transaction claim mode on backlog's table: one transaction locks 100 jobs (FOR UPDATE
#            SKIP LOCKED, from a random shard, writing nothing) and deletes them before it
#            commits, as the runtime does with jobs that end in their first poll.
# Prints jobs/s per shape and round. Needs pgbench (Debian's postgresql-client) and a
# PostgreSQL on $PGURL (default: the test database the project's scripts start).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-4}
ROUNDS=${2:-3}
SHAPES=${3:-status,hot,wide,ready,runtime,bare,txclaim}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/test}
BACKLOG=${BACKLOG:-target/release/backlog}
JOBS=400000
TX=$((360000 / CLIENTS / 100)) # 360,000 jobs claimed of 400,000 queued: never an empty head
for shape in ${SHAPES//,/ }; do
  case $shape in
    status | hot | wide | ready | runtime | bare | txclaim) ;;
    *) echo "unknown shape: $shape (status, hot, wide, ready, runtime, bare, txclaim)" >&2; exit 2 ;;
  esac
done
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/slim.sql" <<'EOF'
DROP TABLE IF EXISTS shape_job_status, shape_job_hot, shape_lease_hot, shape_job_wide,
  shape_job_ready, shape_ready, shape_lease_ready;
CREATE TABLE shape_job_status (id bigint PRIMARY KEY, queue text NOT NULL, shard int NOT NULL,
  state text NOT NULL DEFAULT 'available', priority int NOT NULL DEFAULT 0,
  run_at bigint NOT NULL DEFAULT 0, attempt int NOT NULL DEFAULT 0, lease_token bigint,
  lease_owner text, lease_expires_at bigint, payload jsonb NOT NULL DEFAULT '{}');
CREATE INDEX ON shape_job_status (queue, shard, priority, run_at, id) WHERE state = 'available';
CREATE INDEX ON shape_job_status (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE TABLE shape_job_hot (LIKE shape_job_status INCLUDING DEFAULTS) WITH (fillfactor = 70);
ALTER TABLE shape_job_hot ADD PRIMARY KEY (id);
CREATE INDEX ON shape_job_hot (queue, shard, priority, run_at, id);
CREATE TABLE shape_lease_hot (token bigint PRIMARY KEY, expires_at bigint NOT NULL, ids bigint[] NOT NULL);
CREATE INDEX ON shape_lease_hot (expires_at);
CREATE TABLE shape_job_wide (LIKE shape_job_status INCLUDING DEFAULTS);
ALTER TABLE shape_job_wide ADD PRIMARY KEY (id),
  ADD COLUMN kind text, ADD COLUMN max_attempts int, ADD COLUMN unique_key text,
  ADD COLUMN errors jsonb NOT NULL DEFAULT '[]', ADD COLUMN result jsonb, ADD COLUMN progress jsonb,
  ADD COLUMN created_at bigint NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
  ADD COLUMN attempted_at bigint, ADD COLUMN finished_at bigint, ADD COLUMN cancel_requested_at bigint,
  ADD COLUMN trace_context text, ADD COLUMN group_key text,
  ADD CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held', 'waiting'));
CREATE INDEX ON shape_job_wide (queue, shard, priority, run_at, id) WHERE state = 'available';
CREATE INDEX ON shape_job_wide (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE TABLE shape_job_ready (LIKE shape_job_wide INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE shape_job_ready ADD PRIMARY KEY (id);
CREATE TABLE shape_ready (queue text NOT NULL, shard int NOT NULL, priority int NOT NULL,
  run_at bigint NOT NULL, id bigint NOT NULL, attempt int NOT NULL DEFAULT 0);
CREATE INDEX ON shape_ready (queue, shard, priority, run_at, id);
CREATE TABLE shape_lease_ready (token bigint PRIMARY KEY, expires_at bigint NOT NULL, ids bigint[] NOT NULL);
CREATE INDEX ON shape_lease_ready (expires_at);
EOF
cat > "$work/fill_wide.sql" <<EOF
TRUNCATE shape_job_wide;
INSERT INTO shape_job_wide (id, queue, kind, shard, payload)
  SELECT g, 'q', 'noop', (random() * 15)::int, jsonb_build_object('i', g) FROM generate_series(1, $JOBS) g;
VACUUM ANALYZE shape_job_wide;
EOF
cat > "$work/fill_ready.sql" <<EOF
TRUNCATE shape_job_ready, shape_ready, shape_lease_ready;
INSERT INTO shape_job_ready (id, queue, kind, shard, payload)
  SELECT g, 'q', 'noop', (random() * 15)::int, jsonb_build_object('i', g) FROM generate_series(1, $JOBS) g;
INSERT INTO shape_ready (queue, shard, priority, run_at, id)
  SELECT queue, shard, priority, run_at, id FROM shape_job_ready;
VACUUM ANALYZE shape_job_ready;
VACUUM ANALYZE shape_ready;
VACUUM ANALYZE shape_lease_ready;
EOF
cat > "$work/fill_status.sql" <<EOF
TRUNCATE shape_job_status;
INSERT INTO shape_job_status (id, queue, shard, payload)
  SELECT g, 'q', (random() * 15)::int, jsonb_build_object('i', g) FROM generate_series(1, $JOBS) g;
VACUUM ANALYZE shape_job_status;
EOF
cat > "$work/fill_hot.sql" <<EOF
TRUNCATE shape_job_hot, shape_lease_hot;
INSERT INTO shape_job_hot (id, queue, shard, payload)
  SELECT g, 'q', (random() * 15)::int, jsonb_build_object('i', g) FROM generate_series(1, $JOBS) g;
VACUUM ANALYZE shape_job_hot;
VACUUM ANALYZE shape_lease_hot;
EOF
cat > "$work/fill_backlog.sql" <<EOF
DELETE FROM backlog_job WHERE queue = 'shape_q';
INSERT INTO backlog_queue (name, shards, retention) VALUES ('shape_q', 16, 'delete')
  ON CONFLICT (name) DO UPDATE SET shards = 16;
INSERT INTO backlog_job (queue, kind, payload, shard, run_at)
  SELECT 'shape_q', 'noop', jsonb_build_object('i', g), (random() * 15)::int, 0
  FROM generate_series(1, $JOBS) g;
VACUUM ANALYZE backlog_job;
EOF

# pgbench scripts: :ids and :tok carry the previous batch from one transaction to the next.
claim() { # table, extra SET columns
  echo "UPDATE $1 j SET state = 'running', attempt = j.attempt + 1, lease_token = :newtok::bigint,
    lease_owner = 'host-1234', lease_expires_at = 99$2
  FROM (SELECT id FROM $1 WHERE queue = 'q' AND shard = :shard::int AND state = 'available'
        AND run_at <= 1 ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id RETURNING j.id, j.payload"
}
# The status and wide shapes: the previous batch deleted (fenced by its token), the next claimed.
status_script() { # table, extra SET columns
  cat <<EOF
\set shard random(0, 15)
\set newtok random(1, 1000000000000)
BEGIN;
DELETE FROM $1 WHERE id = ANY(:ids::bigint[]) AND lease_token = :tok::bigint;
WITH c AS ($(claim "$1" "$2")) SELECT coalesce(array_agg(id), '{}')::text AS ids FROM c \gset
COMMIT;
\set tok :newtok
EOF
}
status_script shape_job_status "" > "$work/status.sql"
status_script shape_job_wide ", attempted_at = 1" > "$work/wide.sql"
cat > "$work/ready.sql" <<'EOF'
\set shard random(0, 15)
\set newtok random(1, 1000000000000)
BEGIN;
DELETE FROM shape_job_ready WHERE id = ANY(:ids::bigint[])
  AND EXISTS (SELECT 1 FROM shape_lease_ready WHERE token = :tok::bigint);
DELETE FROM shape_lease_ready WHERE token = :tok::bigint;
WITH r AS (
  DELETE FROM shape_ready WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM shape_ready WHERE queue = 'q' AND shard = :shard::int AND run_at <= 1
    ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED))
  RETURNING id),
l AS (INSERT INTO shape_lease_ready SELECT :newtok::bigint, 99, array_agg(id) FROM r HAVING count(*) > 0)
SELECT coalesce(array_agg(j.id), '{}')::text AS ids, max(length(j.payload::text)) AS longest
FROM shape_job_ready j WHERE j.id IN (SELECT id FROM r) \gset
COMMIT;
\set tok :newtok
EOF
cat > "$work/hot.sql" <<EOF
\set shard random(0, 15)
\set newtok random(1, 1000000000000)
BEGIN;
DELETE FROM shape_job_hot WHERE id = ANY(:ids::bigint[]) AND lease_token = :tok::bigint;
DELETE FROM shape_lease_hot WHERE token = :tok::bigint;
WITH c AS ($(claim shape_job_hot "")),
  l AS (INSERT INTO shape_lease_hot SELECT :newtok::bigint, 99, array_agg(id) FROM c HAVING count(*) > 0)
SELECT coalesce(array_agg(id), '{}')::text AS ids FROM c \gset
COMMIT;
\set tok :newtok
EOF
# backlog's own statement, its parameters written in; its last UPDATE becomes a CTE so that the
# claimed ids can be kept.
python3 - "$work/runtime.sql" <<'EOF'
import re, sys
sql = open("crates/backlog-sql/queries/postgres/job_complete_with_claim_delete_one_fifo.sql").read()
sql = " ".join(l for l in sql.splitlines() if not l.startswith("--"))
for k, v in [(r"\$1\b", ":newtok::bigint"), (r"\$2\b", "'host-1234'"), (r"\$3\b", "99::bigint"),
             (r"\$4\b", "1::bigint"), (r"\$5\b", "'shape_q'"), (r"\$6::text\[\]", "NULL::text[]"),
             (r"\$7\b", "100"), (r"\$8::bigint\[\]", ":ids::bigint[]"), (r"\$9::bigint", ":tok::bigint")]:
    sql = re.sub(k, v, sql)
assert "$" not in sql, sql
i = sql.rindex("UPDATE backlog_job j")
sql = (sql[:i].rstrip() + ", claimed AS (" + sql[i:].strip().rstrip(";") +
       ") SELECT coalesce(array_agg(id), '{}')::text AS ids FROM claimed \\gset")
open(sys.argv[1], "w").write("\\set newtok random(1, 1000000000000)\n" + sql + "\n\\set tok :newtok\n")
EOF
cat > "$work/bare.sql" <<'EOF'
\set newtok random(1, 1000000000000)
\set first random(0, 15)
WITH done AS (DELETE FROM backlog_job WHERE id = ANY(:ids::bigint[]) AND lease_token = :tok::bigint), picked AS (SELECT c.id FROM generate_series(0, 15) AS s(i) CROSS JOIN LATERAL (SELECT id FROM backlog_job WHERE queue = 'shape_q' AND shard = (:first::int + s.i) % 16 AND state = 'available' AND run_at <= 1 ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) c LIMIT 100), claimed AS (UPDATE backlog_job j SET state = 'running', attempt = j.attempt + 1, lease_token = :newtok::bigint, lease_expires_at = 99, attempted_at = 1 WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) RETURNING j.id, j.kind, j.payload::text) SELECT coalesce(array_agg(id), '{}')::text AS ids FROM claimed \gset
\set tok :newtok
EOF

cat > "$work/txclaim.sql" <<'EOF'
\set first random(0, 15)
BEGIN;
WITH picked AS (SELECT id, kind, payload::text FROM backlog_job WHERE queue = 'shape_q' AND shard = :first::int AND state = 'available' AND run_at <= 1 ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) SELECT coalesce(array_agg(id), '{}')::text AS ids FROM picked \gset
DELETE FROM backlog_job WHERE id = ANY(:ids::bigint[]);
COMMIT;
EOF

PGOPTIONS="-c client_min_messages=warning" psql -q "$PGURL" -f "$work/slim.sql" >/dev/null
if [[ ",$SHAPES," == *,runtime,* || ",$SHAPES," == *,bare,* ]]; then
  "$BACKLOG" --database-url "$PGURL" migrate >/dev/null
fi
for round in $(seq 1 "$ROUNDS"); do
  for shape in ${SHAPES//,/ }; do
    case $shape in
      status) psql -q "$PGURL" -f "$work/fill_status.sql" >/dev/null ;;
      hot) psql -q "$PGURL" -f "$work/fill_hot.sql" >/dev/null ;;
      wide) psql -q "$PGURL" -f "$work/fill_wide.sql" >/dev/null ;;
      ready) psql -q "$PGURL" -f "$work/fill_ready.sql" >/dev/null ;;
      runtime | bare | txclaim) psql -q "$PGURL" -f "$work/fill_backlog.sql" >/dev/null ;;
    esac
    # As backlog's connections run (docs/explain.md, "Plans made on an empty table").
    tps=$(PGOPTIONS='-c enable_seqscan=off -c jit=off' pgbench -n -M prepared -c "$CLIENTS" \
      -j 2 -t "$TX" -D ids='{}' -D tok=0 -f "$work/$shape.sql" "$PGURL" 2>&1 \
      | awk '/^tps/ {print $3}')
    [ -n "$tps" ] || { echo "pgbench failed on $shape" >&2; exit 1; }
    echo "round $round $shape: $(python3 -c "print(f'{$tps * 100:,.0f}')") jobs/s ($CLIENTS clients, claims of 100)"
  done
done
psql -q "$PGURL" -c "DROP TABLE IF EXISTS shape_job_status, shape_job_hot, shape_lease_hot, \
  shape_job_wide, shape_job_ready, shape_ready, shape_lease_ready" \
  -c "DELETE FROM backlog_job WHERE queue = 'shape_q'" -c "DELETE FROM backlog_queue WHERE name = 'shape_q'" >/dev/null
