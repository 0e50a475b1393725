#!/usr/bin/env bash
# One sitting of the reference figures in BENCHMARKS.md: builds the release binaries, runs
# `backlog bench --json` on each backend and graphile-worker beside it on the same PostgreSQL
# (alternating), writes every output and sitting.json to docs/bench-data/DATE/, and then
# BENCHMARKS.md from them (scripts/benchmarks_md.py).
#
#   scripts/bench_sitting.sh [ROUNDS]       # default 3 rounds a run
#
# PostgreSQL is the second cluster (127.0.0.1:5433, autovacuum on, as users run it;
# scripts/fault_server.sh makes it), MariaDB the main server, SQLite a file under target/.
# Nothing else should run on the machine meanwhile. Took 5 minutes here on 2026-11-29 (30 before).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
PG=${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5433/test}
MY=${BENCH_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
day=$(date -u +%F)
out=docs/bench-data/$day
mkdir -p "$out" target/bench-sitting
bash scripts/services.sh >/dev/null
cargo build --release -q -p backlog-cli -p backlog-bench
bin=target/release/backlog
build=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- crates Cargo.toml Cargo.lock; then build="$build+changes"; fi
pg_port=${PG#*127.0.0.1:}
pg_port=${pg_port%%/*}

bench() { # FILE URL ARGS...
    local file=$1 url=$2
    shift 2
    echo "sitting: $file: backlog bench $* ($(date -u +%H:%M:%S))" >&2
    "$bin" --database-url "$url" bench --json --rounds "$ROUNDS" "$@" >"$out/$file"
}
peer() { # REP
    echo "sitting: graphile-worker run $1 ($(date -u +%H:%M:%S))" >&2
    PGPORT=$pg_port DATABASE_URL="${PG%/*}/peer_graphile_js" REPS=1 \
        ../shared/peers/graphile-worker/run.sh | sed "s/run=1 /run=$1 /" >>"$out/graphile-worker.txt"
}

: >"$out/graphile-worker.txt"
peer 1
bench postgres.defaults.json "$PG"
peer 2
bench postgres.tuned.json "$PG" --only enqueue,drain --concurrency 500 --shards 16
peer 3
bench mysql.defaults.json "$MY"
rm -f target/bench-sitting/bench.db*
bench sqlite.defaults.json "sqlite://$PWD/target/bench-sitting/bench.db"

pg_version=$(psql "$PG" -Atc "SELECT current_setting('server_version')")
pg_settings=$(psql "$PG" -Atc "SELECT 'autovacuum ' || current_setting('autovacuum') || ', shared_buffers ' || current_setting('shared_buffers')")
my_version=$(mysql -h 127.0.0.1 -P "$(echo "$MY" | sed -E 's|.*:([0-9]+)/.*|\1|')" -u root -Nse 'SELECT VERSION()')
cores=$(nproc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
python3 - "$out/sitting.json" <<EOF
import json, sys
json.dump({
    "date": "$day",
    "build": "$build",
    "profile": "release build, rustc $(rustc --version | cut -d' ' -f2)",
    "machine": "$cores cores ($cpu), the database servers on the same machine",
    "servers": {
        "PostgreSQL": "$pg_version on 127.0.0.1:$pg_port, $pg_settings",
        "MariaDB": "$my_version, InnoDB defaults of Debian's package",
        "SQLite": "the bundled SQLite of sqlx, a file on local disk (WAL)",
    },
    "order": ["PostgreSQL", "MariaDB", "SQLite"],
    "runs": [
        {"label": "PostgreSQL, the defaults", "backend": "PostgreSQL",
         "command": "backlog bench --json --rounds $ROUNDS", "files": ["postgres.defaults.json"]},
        {"label": "PostgreSQL, tuned", "backend": "PostgreSQL",
         "command": "backlog bench --json --rounds $ROUNDS --only enqueue,drain --concurrency 500 --shards 16",
         "files": ["postgres.tuned.json"]},
        {"label": "MariaDB, the defaults", "backend": "MariaDB",
         "command": "backlog bench --json --rounds $ROUNDS", "files": ["mysql.defaults.json"]},
        {"label": "SQLite, the defaults", "backend": "SQLite",
         "command": "backlog bench --json --rounds $ROUNDS", "files": ["sqlite.defaults.json"]},
    ],
    "peers": [
        {"name": "graphile-worker 0.18", "file": "graphile-worker.txt",
         "command": "../shared/peers/graphile-worker/run.sh (REPS=1, three times, between the PostgreSQL runs)",
         "beside": [{"label": "PostgreSQL, the defaults"}, {"label": "PostgreSQL, tuned"}]},
    ],
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 scripts/benchmarks_md.py "$out" --write
echo "sitting: done; BENCHMARKS.md written from $out" >&2
