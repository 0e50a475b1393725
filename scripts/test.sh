#!/usr/bin/env bash
# The one test command: starts (or installs) PostgreSQL and MariaDB (and the second server of each
# that fault tests restart, a 3-node Galera cluster, and PgBouncer), then runs every test against
# SQLite, PostgreSQL (directly and through PgBouncer), MariaDB and the Galera cluster. A
# backend that cannot be reached fails the run; none is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
export BACKLOG_TEST_POSTGRES_URL="${BACKLOG_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export BACKLOG_TEST_MYSQL_URL="${BACKLOG_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}"
# The Galera cluster's nodes (scripts/galera.sh), one URL listing them.
export BACKLOG_TEST_GALERA_URL="${BACKLOG_TEST_GALERA_URL:-mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test}"
# PgBouncer in transaction pooling mode in front of that PostgreSQL (scripts/pgbouncer.sh).
export BACKLOG_TEST_PGBOUNCER_URL="${BACKLOG_TEST_PGBOUNCER_URL:-postgres://postgres@127.0.0.1:6432/test}"
# The servers the restart tests restart (scripts/fault_server.sh).
export BACKLOG_TEST_FAULT_POSTGRES_URL="${BACKLOG_TEST_FAULT_POSTGRES_URL:-postgres://postgres@127.0.0.1:5433/test}"
export BACKLOG_TEST_FAULT_MYSQL_URL="${BACKLOG_TEST_FAULT_MYSQL_URL:-mysql://root@127.0.0.1:3307/test}"
cargo test --workspace "$@"
