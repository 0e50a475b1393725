#!/usr/bin/env bash
# The one test command: every test against SQLite, PostgreSQL (directly and through PgBouncer),
# MariaDB and the Galera cluster, and the dashboard in Chromium. It starts (or installs)
# PostgreSQL and MariaDB, the second server of each that fault tests restart, a 3-node Galera
# cluster and PgBouncer (scripts/services.sh) while the tests build. A backend that cannot be
# reached fails the run; none is skipped.
#
# Tiers (see README, "The two commands"): a plain `cargo test` is the first alone (unit,
# in-memory and SQLite tests; no service needed). This script builds the server tier in (feature
# `servers`) and runs two groups of test binaries side by side once the build is done:
#   main      every other test binary, then the doc tests
#   faults    the fault and process tests (FAULT_TESTS): workers killed, servers restarted,
#             connections severed and stalled, a full disk; they restart only the fault servers
#             (5433, 3307), which the main group does not use
# (A third group, the binaries' tests apart, saved 60 s but loaded the machine enough that
# SQLite workers' 2 s leases ran out under `workers_survive_sigkill`: 8 jobs ran twice.)
# then the Debian package's check (scripts/deb.sh check: the tests' `backlog` binary packaged,
# installed with dpkg -i, its units verified, run from PATH, then purged), then the Galera
# node-kill test alone (it stops a node the main group uses), and prints how long
# each step took; the logs are in target/test-logs/. Arguments go to every `cargo test`: options
# such as `--no-fail-fast`, and after `--` the test binaries' own (a name to filter by).
set -euo pipefail
cd "$(dirname "$0")/.."
FAULT_TESTS=(processes network sqlite_faults)

export BACKLOG_TEST_POSTGRES_URL="${BACKLOG_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export BACKLOG_TEST_MYSQL_URL="${BACKLOG_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}"
# The Galera cluster's nodes (scripts/galera.sh), one URL listing them.
export BACKLOG_TEST_GALERA_URL="${BACKLOG_TEST_GALERA_URL:-mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test}"
# PgBouncer in transaction pooling mode in front of that PostgreSQL (scripts/pgbouncer.sh).
export BACKLOG_TEST_PGBOUNCER_URL="${BACKLOG_TEST_PGBOUNCER_URL:-postgres://postgres@127.0.0.1:6432/test}"
# The servers the restart tests restart (scripts/fault_server.sh).
export BACKLOG_TEST_FAULT_POSTGRES_URL="${BACKLOG_TEST_FAULT_POSTGRES_URL:-postgres://postgres@127.0.0.1:5433/test}"
export BACKLOG_TEST_FAULT_MYSQL_URL="${BACKLOG_TEST_FAULT_MYSQL_URL:-mysql://root@127.0.0.1:3307/test}"

logs=target/test-logs
mkdir -p "$logs"
began=$SECONDS
took() { echo "test.sh: $1 took $(($SECONDS - $2)) s" >&2; }

# Services start while the tests build: the one waits on the network and the package manager,
# the other on the CPU.
t=$SECONDS
scripts/services.sh >"$logs/services.log" 2>&1 &
services=$!
cargo test --workspace --features servers --no-run "$@" 2>&1 | { grep -v '^  Executable' >&2 || true; }
took build $t
if ! wait $services; then
    cat "$logs/services.log" >&2
    echo "test.sh: the services did not start (above)" >&2
    exit 1
fi
took "services (beside the build)" $t

# Every test binary of the workspace but the fault tests, by name (a name several crates use
# runs in each).
rm -f "$logs"/{main,faults,node_kill,package}.log
main_tests=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
skip = set(sys.argv[1:])
names = sorted({t["name"] for p in json.load(sys.stdin)["packages"] for t in p["targets"]
                if t["kind"] == ["test"] and t["name"] not in skip})
print(" ".join("--test " + n for n in names))' "${FAULT_TESTS[@]}")
fault_tests=$(printf -- '--test %s ' "${FAULT_TESTS[@]}")

run_group() {
    local name=$1 t=$SECONDS
    shift
    if "$@" >"$logs/$name.log" 2>&1; then
        took "$name" $t
    else
        took "$name (FAILED)" $t
        return 1
    fi
}
main_group() {
    # shellcheck disable=SC2086 # the list is words on purpose
    cargo test --workspace --features servers --lib --bins $main_tests "${cargo_args[@]}" \
        -- "${test_args[@]}" &&
        cargo test --workspace --features servers --doc "${cargo_args[@]}" -- "${test_args[@]}"
}

# The arguments before a `--` go to cargo, those after it to the test binaries.
cargo_args=() test_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cargo_args+=("$1"); shift; done
[ $# -gt 0 ] && shift
test_args=("$@")

t=$SECONDS
run_group main main_group &
main=$!
# The node-kill test stops a Galera node that the main group's tests use: it runs after both.
# shellcheck disable=SC2086
run_group faults cargo test --workspace --features servers $fault_tests "${cargo_args[@]}" \
    -- --skip node_kill "${test_args[@]}" &
faults=$!
status=0
wait $main || status=1
wait $faults || status=1
# The Debian package, from the binary the tests built: installed, checked, purged. Alone, after
# the groups: beside them its demo and compression made the fault tests' 1 s leases run out.
run_group package scripts/deb.sh check target/debug/backlog || status=1
if [ $status -eq 0 ]; then
    run_group node_kill cargo test --workspace --features servers --test processes \
        "${cargo_args[@]}" -- node_kill "${test_args[@]}" || status=1
fi
for name in main faults node_kill; do
    [ -f "$logs/$name.log" ] || continue
    grep -E '^(test result|     Running|   Doc-tests)|FAILED|panicked' "$logs/$name.log" | sed "s/^/$name: /" >&2 || true
done
if [ $status -ne 0 ]; then
    for name in main faults node_kill package; do
        if [ -f "$logs/$name.log" ] && grep -qE 'FAILED|^error|check failed' "$logs/$name.log"; then
            echo "=== $name (full log: $logs/$name.log) ===" >&2
            tail -n 200 "$logs/$name.log" >&2
        fi
    done
fi
took "tests (main and faults side by side, then the package, then node_kill)" $t
# One closing line over every group.
cat "$logs"/{main,faults,node_kill}.log 2>/dev/null | awk '/^test result:/ { p += $4; f += $6 }
    END { printf "%d passed, %d failed\n", p, f }'

took "test.sh" $began
exit $status
