#!/usr/bin/env bash
# Throughput on the 3-node Galera cluster of scripts/galera.sh: every worker process on one node,
# against the same processes spread over the three nodes (each given the node list from another
# node on), with the certification conflicts each run cost. For docs/scaling.md §4.
#   scripts/galera_throughput.sh [JOBS] [PROCESSES] [RUNS] [SHARDS]   (defaults 20000, 3,6, 2, 1)
# SHARDS: the queue's claim point spread over that many shards (`bench --shards`).
# Uses the release binary (built if missing); the cluster is started if it is not running.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${1:-20000}"
PROCESSES="${2:-3,6}"
RUNS="${3:-2}"
SHARDS="${4:-1}"
BIN=target/release/backlog
[ -x "$BIN" ] && [ -x target/release/backlog-bench ] || cargo build --release -p backlog-cli -p backlog-bench
scripts/galera.sh ensure >&2

ONE="mysql://root@127.0.0.1:3311/test"
ALL="mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test"

# Transactions certification rolled back so far, over the three nodes: a node's own that failed
# certification, and its local ones aborted by a replicated one that won.
conflicts() {
    local sum=0 n v
    for n in 1 2 3; do
        v=$(mariadb -h 127.0.0.1 -P "331$n" -u root -N -e \
            "SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS
             WHERE VARIABLE_NAME IN ('WSREP_LOCAL_CERT_FAILURES', 'WSREP_LOCAL_BF_ABORTS')")
        sum=$((sum + v))
    done
    echo "$sum"
}

echo "| run | nodes | processes | jobs/s | conflicts rolled back (per 1,000 jobs) |"
echo "|---|---|---|---|---|"
for run in $(seq 1 "$RUNS"); do
    for setup in one all; do
        url=$ONE; nodes=1
        if [ "$setup" = all ]; then url=$ALL; nodes=3; fi
        IFS=, read -ra counts <<<"$PROCESSES"
        for p in "${counts[@]}"; do
            before=$(conflicts)
            rate=$("$BIN" --database-url "$url" bench --processes "$p" --jobs "$JOBS" \
                --process-connections 2 --shards "$SHARDS" --json 2>/dev/null |
                python3 -c 'import json,sys; print(round(json.load(sys.stdin)["runs"][0]["jobs_per_s"]))')
            after=$(conflicts)
            c=$((after - before))
            per=$(python3 -c "print(round($c * 1000 / $JOBS))")
            echo "| $run | $nodes | $p | $rate | $c ($per) |"
        done
    done
done
