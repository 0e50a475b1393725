#!/usr/bin/env bash
# Plans made on an empty table (docs/explain.md): the runtime's claim, completion, and claim
# with the previous batch's completion folded in, each prepared as a generic plan while the job
# table is empty and freshly vacuumed, then run once the table holds 300,000 available jobs.
#     bash scripts/pg_empty_plans.sh            # as backlog's connections run (enable_seqscan off)
#     SEQSCAN=on bash scripts/pg_empty_plans.sh # without that setting
# Makes (and leaves) a database `plans` on the server at PGURL (default the local test server).
set -euo pipefail
cd "$(dirname "$0")/.."
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/test}
SEQSCAN=${SEQSCAN:-off}
psql "$PGURL" -qc "DROP DATABASE IF EXISTS plans" -c "CREATE DATABASE plans" >/dev/null
url="${PGURL%/*}/plans"
for f in crates/backlog-sql/migrations/postgres/*.sql; do
    psql "$url" -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null
done
q=crates/backlog-sql/queries/postgres
prepare() { # name file: PREPARE name AS <the statement, its comments left out>
    printf 'PREPARE %s AS\n' "$1"
    grep -v '^ *--' "$2" | sed '$s/;*$/;/'
}
{
    echo "SET statement_timeout = '60s'; SET plan_cache_mode = force_generic_plan;"
    echo "SET enable_seqscan = $SEQSCAN;"
    echo "INSERT INTO backlog_queue (name) VALUES ('q');"
    echo "INSERT INTO backlog_job (queue, payload) SELECT 'q', '{}' FROM generate_series(1, 1000);"
    echo "DELETE FROM backlog_job; VACUUM ANALYZE backlog_job;"
    echo "SELECT relpages, reltuples FROM pg_class WHERE relname = 'backlog_job';"
    prepare claim "$q/job_claim_fifo.sql"
    prepare complete "$q/job_complete_delete.sql"
    prepare folded "$q/job_complete_then_claim_delete_fifo.sql"
    # The first execution of each makes its generic plan, on the empty table.
    echo "EXECUTE claim(1, 'w', 2, 3, 'q', NULL, 100);"
    echo "EXECUTE complete(ARRAY[1]::bigint[], ARRAY[1]::bigint[]);"
    echo "EXECUTE folded(1, 'w', 2, 3, 'q', NULL, 100, ARRAY[1]::bigint[], ARRAY[1]::bigint[]);"
    echo "INSERT INTO backlog_job (queue, payload, run_at) SELECT 'q', '{}', 0 FROM generate_series(1, 300000);"
    echo "\\timing on"
    echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE claim(5, 'w', 2, 3, 'q', NULL, 100);"
    echo "SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM backlog_job WHERE lease_token = 5 \\gset"
    echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE complete(:'ids', :'tokens');"
    echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE folded(6, 'w', 2, 3, 'q', NULL, 100, ARRAY[1]::bigint[], ARRAY[1]::bigint[]);"
} | psql "$url" -v ON_ERROR_STOP=1
