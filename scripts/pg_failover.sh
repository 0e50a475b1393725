#!/usr/bin/env bash
# PostgreSQL failover under load: a primary and a streaming replica on loopback, producers and
# workers pointed at both (`postgres://…@127.0.0.1:5442,127.0.0.1:5443/test`, the multi-host URL
# that moves to whichever server takes writes), the primary stopped hard (`-m immediate`, as a
# crash) in the middle of the run and the replica promoted. Then every acknowledged job must be
# there and completed, and each job's side effect is counted.
#
#   scripts/pg_failover.sh [async|sync] [JOBS]     (default: async 3000)
#
# async: the replica streams asynchronously (PostgreSQL's default). sync: the primary waits for
# the replica to flush each commit (synchronous_standby_names = '*', synchronous_commit = on).
# The clusters (backlog_fo_primary on 5442, backlog_fo_replica on 5443) are made fresh each run
# and dropped at the end. Needs root (pg_createcluster) and a release build of `backlog`
# (cargo build --release -p backlog-cli); prints a summary line for docs/scaling.md.
set -euo pipefail

MODE=${1:-async}
JOBS=${2:-3000}
case "$MODE" in async | sync) ;; *) echo "usage: $0 [async|sync] [JOBS]" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BACKLOG=${BACKLOG:-$ROOT/target/release/backlog}
[ -x "$BACKLOG" ] || { echo "build it first: cargo build --release -p backlog-cli" >&2; exit 1; }
# shellcheck source=scripts/pg_pair.sh
. "$ROOT/scripts/pg_pair.sh"
VER=$PG_PAIR_VER
PRI=backlog_fo_primary PRI_PORT=5442
REP=backlog_fo_replica REP_PORT=5443
export BACKLOG_DATABASE_URL="postgres://postgres@127.0.0.1:$PRI_PORT,127.0.0.1:$REP_PORT/test"
WORK=$(mktemp -d /tmp/backlog-failover.XXXXXX)
chmod 755 "$WORK"

log() { echo "failover: $*" >&2; }
ms() { date +%s%3N; }
psql_at() { pg_pair_psql "$@"; }
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    pg_pair_drop $PRI $REP
}
trap cleanup EXIT

log "primary $VER/$PRI on $PRI_PORT, replica $VER/$REP on $REP_PORT (pg_basebackup -R)"
pg_pair_create $PRI $PRI_PORT $REP $REP_PORT
if [ "$MODE" = sync ]; then
    # Only now: with no standby yet, every commit (CREATE DATABASE too) would wait.
    {
        echo "synchronous_standby_names = '*'"
        echo "synchronous_commit = on"
    } >> "/etc/postgresql/$VER/$PRI/conf.d/90-pair.conf"
    pg_ctlcluster --skip-systemctl-redirect "$VER" "$PRI" reload
    for _ in $(seq 1 60); do
        [ "$(psql_at "$PRI_PORT" "SELECT sync_state FROM pg_stat_replication")" = sync ] && break
        sleep 0.5
    done
fi
log "streaming ($(psql_at "$PRI_PORT" "SELECT sync_state FROM pg_stat_replication"))"

"$BACKLOG" migrate >/dev/null

# Producers: 3, each enqueueing its share one call at a time with a unique key, retrying a failed
# call with the same key (a retry never makes a second job), and noting each id acknowledged.
produce() {
    local p=$1
    for ((i = p; i < JOBS; i += 3)); do
        local id=""
        for _ in $(seq 1 200); do
            if id=$("$BACKLOG" enqueue fo "{\"n\":$i}" --unique-key "n-$i" 2>>"$WORK/producer-$p.err"); then
                break
            fi
            echo "retry n-$i" >>"$WORK/producer-$p.retries"
            sleep 0.1
        done
        [ -n "$id" ] || { echo "gave up on n-$i" >>"$WORK/producer-$p.err"; continue; }
        echo "$i $id" >>"$WORK/acked-$p"
    done
}
for p in 0 1 2; do produce $p & done
PRODUCERS=$(jobs -p)

# Workers: 2 processes of 8; each job appends its id to a file (its side effect).
for w in 0 1; do
    "$BACKLOG" work fo --concurrency 8 --poll 200ms \
        -- sh -c "echo \$BACKLOG_JOB_ID >> $WORK/done" 2>>"$WORK/worker-$w.err" &
done

done_count() { [ -f "$WORK/done" ] && wc -l <"$WORK/done" || echo 0; }
while [ "$(done_count)" -lt $((JOBS / 3)) ]; do sleep 0.2; done
before=$(done_count)
log "$before done; stopping the primary (immediate) and promoting the replica"
t_stop=$(ms)
pg_ctlcluster --skip-systemctl-redirect "$VER" "$PRI" stop -m immediate
pg_ctlcluster --skip-systemctl-redirect "$VER" "$REP" promote
t_promoted=$(ms)
# Recovered: a job completed on the new primary (a completion committed there, not a side
# effect of a job that was already running).
completed_new() { psql_at "$REP_PORT" "SELECT count(*) FROM backlog_job_all WHERE queue = 'fo' AND state = 'completed'"; }
at_promotion=$(completed_new)
while [ "$(completed_new)" -le "$at_promotion" ]; do sleep 0.05; done
t_next=$(ms)
log "promoted after $((t_promoted - t_stop)) ms; next completion on the new primary $((t_next - t_stop)) ms after the stop"

for pid in $PRODUCERS; do wait "$pid"; done
acked=$(cat "$WORK"/acked-* | wc -l)
log "producers done: $acked acknowledged"
# Workers: until every job is completed (or 5 minutes).
for _ in $(seq 1 600); do
    left=$(psql_at "$REP_PORT" "SELECT count(*) FROM backlog_job_all WHERE queue = 'fo' AND state <> 'completed'")
    [ "$left" = 0 ] && break
    sleep 0.5
done
jobs -p | xargs -r kill 2>/dev/null || true
wait 2>/dev/null || true

# What the new primary holds, against what the producers were told and what the workers did.
cat "$WORK"/acked-* | awk '{print $1}' | sort -n >"$WORK/acked-n"
psql_at "$REP_PORT" "SELECT (payload->>'n')::int FROM backlog_job_all WHERE queue = 'fo' ORDER BY 1" >"$WORK/stored-n"
psql_at "$REP_PORT" "SELECT (payload->>'n')::int FROM backlog_job_all WHERE queue = 'fo' AND state = 'completed' ORDER BY 1" >"$WORK/completed-n"
lost=$(comm -23 "$WORK/acked-n" "$WORK/stored-n" | wc -l)
not_completed=$(comm -23 "$WORK/stored-n" "$WORK/completed-n" | wc -l)
stored=$(wc -l <"$WORK/stored-n")
twice=$(sort "$WORK/done" | uniq -d | wc -l)
runs=$(wc -l <"$WORK/done")
retries=$(cat "$WORK"/producer-*.retries 2>/dev/null | wc -l)
echo "mode=$MODE jobs=$JOBS acknowledged=$acked stored=$stored lost_acknowledged=$lost" \
    "not_completed=$not_completed runs=$runs ran_twice=$twice producer_retries=$retries" \
    "promote_ms=$((t_promoted - t_stop)) next_completion_ms=$((t_next - t_stop))"
[ "$lost" = 0 ] && [ "$not_completed" = 0 ] || { log "work files kept in $WORK"; exit 1; }
rm -rf "$WORK"
