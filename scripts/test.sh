#!/usr/bin/env bash
# The one test command: starts (or installs) PostgreSQL and MariaDB (and the second server of each
# that fault tests restart), then runs every test against SQLite, PostgreSQL and MariaDB. A
# backend that cannot be reached fails the run; none is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
export BACKLOG_TEST_POSTGRES_URL="${BACKLOG_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export BACKLOG_TEST_MYSQL_URL="${BACKLOG_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}"
# The servers the restart tests restart (scripts/fault_server.sh).
export BACKLOG_TEST_FAULT_POSTGRES_URL="${BACKLOG_TEST_FAULT_POSTGRES_URL:-postgres://postgres@127.0.0.1:5433/test}"
export BACKLOG_TEST_FAULT_MYSQL_URL="${BACKLOG_TEST_FAULT_MYSQL_URL:-mysql://root@127.0.0.1:3307/test}"
cargo test --workspace "$@"
