#!/usr/bin/env bash
# The long runs behind SOAK.md (issue 18 items 6, 7 and 9): soaks at a steady rate with pruning,
# soaks with a transaction held open by another session, and a million jobs enqueued faster than
# a worker drains them. Not a CI test: each run takes minutes to an hour. Each run writes
# target/soak/NAME.txt (the report) and NAME.log (progress and the worker's warnings).
#
#   scripts/soak.sh                 every run below, in this order
#   scripts/soak.sh pg-hour mysql   only these
#
# Runs: pg-hour (PostgreSQL, autovacuum off, SOAK_LONG), pg-autovacuum (the fault cluster, with
# autovacuum on), mysql, sqlite (SOAK_SHORT each), pg-hold, mysql-hold, sqlite-hold (the same with
# a transaction held open throughout, SOAK_SHORT), overload-pg, overload-mysql, overload-sqlite
# (OVERLOAD_JOBS jobs).
#
# SOAK_LONG (default 1h), SOAK_SHORT (default 15m), SOAK_RATE (default 2000 jobs/s),
# OVERLOAD_JOBS (default 1000000). Only loopback servers are used.
set -euo pipefail
cd "$(dirname "$0")/.."

long=${SOAK_LONG:-1h}
short=${SOAK_SHORT:-15m}
rate=${SOAK_RATE:-2000}
jobs=${OVERLOAD_JOBS:-1000000}
pg=${BACKLOG_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
pg_autovacuum=${BACKLOG_TEST_FAULT_POSTGRES_URL:-postgres://postgres@127.0.0.1:5433/test}
my=${BACKLOG_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
out=target/soak
mkdir -p "$out"
sqlite="sqlite://$PWD/$out/soak.db"

bash scripts/services.sh
cargo build --release -q -p backlog-cli -p backlog-bench
bin=target/release/backlog

# run NAME URL BENCH-ARGS...
run() {
    local name=$1 url=$2
    shift 2
    if [[ $url == sqlite://* ]]; then rm -f "$out"/soak.db*; fi
    echo "soak: $name: backlog bench $* ($(date -u +%H:%M:%S))"
    "$bin" --database-url "$url" bench "$@" >"$out/$name.txt" 2>"$out/$name.log"
    tail -n 12 "$out/$name.txt"
}

soak=(--soak-rate "$rate")
runs=("$@")
if [[ ${#runs[@]} -eq 0 ]]; then
    runs=(pg-hour pg-autovacuum mysql sqlite pg-hold mysql-hold sqlite-hold
        overload-pg overload-mysql overload-sqlite)
fi
for r in "${runs[@]}"; do
    case $r in
    pg-hour) run "$r" "$pg" --soak "$long" "${soak[@]}" ;;
    pg-autovacuum) run "$r" "$pg_autovacuum" --soak "$short" "${soak[@]}" ;;
    mysql) run "$r" "$my" --soak "$short" "${soak[@]}" ;;
    sqlite) run "$r" "$sqlite" --soak "$short" "${soak[@]}" ;;
    pg-hold) run "$r" "$pg_autovacuum" --soak "$short" "${soak[@]}" --hold-transaction ;;
    mysql-hold) run "$r" "$my" --soak "$short" "${soak[@]}" --hold-transaction ;;
    sqlite-hold) run "$r" "$sqlite" --soak "$short" "${soak[@]}" --hold-transaction ;;
    overload-pg) run "$r" "$pg" --overload "$jobs" ;;
    overload-mysql) run "$r" "$my" --overload "$jobs" ;;
    overload-sqlite) run "$r" "$sqlite" --overload "$jobs" ;;
    *)
        echo "soak: unknown run '$r'" >&2
        exit 2
        ;;
    esac
done
