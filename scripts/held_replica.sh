#!/usr/bin/env bash
# The held-snapshot soak with the snapshot on a physical replica: a primary (127.0.0.1:5444,
# autovacuum on, as users run it) and a streaming replica (127.0.0.1:5445, hot_standby_feedback
# = on), a session on the replica holding a REPEATABLE READ snapshot for the whole run — through
# the feedback the primary's vacuum keeps what that snapshot may read, as for a session of its
# own — and `backlog bench --soak` against the primary.
#
#   scripts/held_replica.sh [BENCH ARGS...]     (default: --soak 15m --soak-rate 2000)
#
# The clusters (backlog_hr_primary, backlog_hr_replica) are made fresh each run and dropped at
# the end. Needs root (pg_createcluster) and a release build of the bench
# (cargo build --release -p backlog-bench). Before the soak it checks that the replica's
# snapshot does hold the primary's horizon (pg_stat_replication.backend_xmin).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$ROOT/target/release/backlog-bench}
[ -x "$BENCH" ] || { echo "build it first: cargo build --release -p backlog-bench" >&2; exit 1; }
# shellcheck source=scripts/pg_pair.sh
. "$ROOT/scripts/pg_pair.sh"
PRI=backlog_hr_primary PRI_PORT=5444
REP=backlog_hr_replica REP_PORT=5445
log() { echo "held_replica: $*" >&2; }
trap 'pg_pair_drop $PRI $REP' EXIT

log "primary $PRI on $PRI_PORT (autovacuum on), replica $REP on $REP_PORT (hot_standby_feedback)"
pg_pair_create $PRI $PRI_PORT $REP $REP_PORT "autovacuum = on" "hot_standby_feedback = on"
[ "$(pg_pair_psql $PRI_PORT 'SHOW autovacuum')" = on ] || { log "autovacuum is off"; exit 1; }

# The premise: a snapshot held on the replica shows on the primary as the standby's xmin.
pg_pair_psql $PRI_PORT "CREATE TABLE held_probe (n int)" >/dev/null
for _ in $(seq 1 40); do
    pg_pair_psql $REP_PORT "SELECT 1 FROM pg_class WHERE relname = 'held_probe'" | grep -q 1 && break
    sleep 0.25
done
psql -h 127.0.0.1 -p $REP_PORT -U postgres -d test -q \
    -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM held_probe" \
    -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
sleep 2
pg_pair_psql $PRI_PORT "INSERT INTO held_probe SELECT 1; DELETE FROM held_probe" >/dev/null
xmin=""
for _ in $(seq 1 20); do
    xmin=$(pg_pair_psql $PRI_PORT "SELECT backend_xmin FROM pg_stat_replication")
    [ -n "$xmin" ] && break
    sleep 0.1
done
wait
[ -n "$xmin" ] || { log "the replica reports no xmin: hot_standby_feedback is not in force"; exit 1; }
log "a snapshot on the replica holds the primary's horizon (backend_xmin $xmin)"
pg_pair_psql $PRI_PORT "DROP TABLE held_probe" >/dev/null

args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--soak 15m --soak-rate 2000)
"$BENCH" --database-url "postgres://postgres@127.0.0.1:$PRI_PORT/test" "${args[@]}" \
    --hold-transaction --hold-url "postgres://postgres@127.0.0.1:$REP_PORT/test"
