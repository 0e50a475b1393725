#!/usr/bin/env bash
# Makes sure PostgreSQL and MariaDB are installed, running, and reachable the way the tests expect:
#   PostgreSQL on 127.0.0.1:5432, trust auth, database `test`
#   MariaDB    on 127.0.0.1:3306, root with an empty password, database `test`
#   and, for the fault tests that restart a server (scripts/fault_server.sh), a second of each:
#   PostgreSQL cluster `backlog_fault` on 127.0.0.1:5433 with autovacuum on, MariaDB on
#   127.0.0.1:3307 with its own datadir; same users and database
#   a 3-node MariaDB Galera cluster on 127.0.0.1:3311-3313 (scripts/galera.sh), for the
#     conformance suite and the runtime tests on a cluster
#   PgBouncer in transaction pooling mode on 127.0.0.1:6432 in front of PostgreSQL
#     (scripts/pgbouncer.sh), for the conformance suite and the runtime tests through a pooler
#   Python with psycopg, PyMySQL and mypy, for the Python client in clients/python
#   Node with the TypeScript client's compiler and drivers (`npm ci` in clients/typescript)
#   Ruby with pg, mysql2, sqlite3 and Active Job, for the Ruby client in clients/ruby
# and Chromium with chromedriver for the dashboard's browser test (crates/backlog-cli/tests/
# dashboard.rs). Installs them from Debian's packages when absent. Exits non-zero if any cannot be
# had: the test suite never skips a backend or the browser test.
set -euo pipefail

log() { echo "services: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
    if [ -z "${APT_UPDATED:-}" ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

pg_ok() { psql "postgres://postgres@127.0.0.1:5432/test" -Atc 'select 1' >/dev/null 2>&1; }

ensure_postgres() {
    if pg_ok; then log "PostgreSQL is up"; return; fi
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
        log "installing PostgreSQL"
        apt_install postgresql postgresql-client
    fi
    local ver; ver=$(ls /etc/postgresql | sort -V | tail -1)
    local hba="/etc/postgresql/$ver/main/pg_hba.conf"
    if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
        # Tests connect over TCP without a password.
        sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
    fi
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null \
        || pg_ctlcluster --skip-systemctl-redirect "$ver" main reload 2>/dev/null || true
    for _ in $(seq 1 60); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 0.5; done
    psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname='test'" | grep -q 1 \
        || psql -h 127.0.0.1 -U postgres -d postgres -c 'create database test' >/dev/null
    pg_ok || { log "PostgreSQL is not reachable at 127.0.0.1:5432"; exit 1; }
    log "PostgreSQL started"
}

my_ok() { mariadb -h 127.0.0.1 -P 3306 -u root test -e 'select 1' >/dev/null 2>&1; }

ensure_mariadb() {
    if my_ok; then log "MariaDB is up"; return; fi
    if [ ! -x /usr/sbin/mariadbd ]; then
        log "installing MariaDB"
        apt_install mariadb-server mariadb-client
    fi
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do mariadb -u root -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
    # A fresh install lets root in through the socket only: allow TCP without a password, as tests expect.
    mariadb -u root -e "CREATE DATABASE IF NOT EXISTS test;
        CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
        GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" >/dev/null 2>&1 || true
    my_ok || { log "MariaDB is not reachable at 127.0.0.1:3306 as root"; exit 1; }
    log "MariaDB started"
}

# The Python client's drivers and its type checker (.ci/run runs mypy), from Debian's packages,
# for Debian's interpreter (a python3 earlier on PATH, such as pyenv's, does not see them; the
# tests run BACKLOG_TEST_PYTHON, by default /usr/bin/python3).
ensure_python_drivers() {
    local py="${BACKLOG_TEST_PYTHON:-/usr/bin/python3}"
    if "$py" -c 'import psycopg, pymysql, mypy' 2>/dev/null; then log "Python drivers are there"; return; fi
    log "installing python3-psycopg, python3-pymysql and python3-mypy"
    apt_install python3-psycopg python3-pymysql python3-mypy
    "$py" -c 'import psycopg, pymysql, mypy' || { log "$py cannot import psycopg, pymysql and mypy"; exit 1; }
}

# The Ruby client's drivers and Active Job, from Debian's packages (the gem registry may be out
# of reach; the tests run BACKLOG_TEST_RUBY, by default /usr/bin/ruby, which sees them).
ensure_ruby_drivers() {
    local rb="${BACKLOG_TEST_RUBY:-/usr/bin/ruby}"
    local probe='require "pg"; require "mysql2"; require "sqlite3"; require "active_job"'
    if [ -x "$rb" ] && "$rb" -e "$probe" 2>/dev/null; then log "Ruby drivers are there"; return; fi
    log "installing ruby, ruby-pg, ruby-mysql2, ruby-sqlite3 and ruby-activejob"
    apt_install ruby ruby-pg ruby-mysql2 ruby-sqlite3 ruby-activejob
    "$rb" -e "$probe" || { log "$rb cannot load pg, mysql2, sqlite3 and active_job"; exit 1; }
}

# The TypeScript client's compiler and drivers (typescript, pg, mysql2, better-sqlite3, whose
# native part node-gyp builds from source when no prebuilt binary can be fetched), from the npm
# registry as clients/typescript/package-lock.json pins them; `npm ci` also builds its dist/.
ensure_typescript_client() {
    local dir; dir="$(cd "$(dirname "$0")/.." && pwd)/clients/typescript"
    command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
    local probe='for (const m of ["typescript", "pg", "mysql2"]) require.resolve(m); new (require("better-sqlite3"))(":memory:")'
    if (cd "$dir" && node -e "$probe") 2>/dev/null; then log "TypeScript client's dependencies are there"; return; fi
    log "installing the TypeScript client's dependencies (npm ci in clients/typescript)"
    (cd "$dir" && npm ci --no-audit --no-fund >&2) || { log "npm ci failed in $dir"; exit 1; }
    (cd "$dir" && node -e "$probe") || { log "clients/typescript cannot load its dependencies"; exit 1; }
}

command -v psql >/dev/null || apt_install postgresql-client
command -v mariadb >/dev/null || apt_install mariadb-client
command -v sqlite3 >/dev/null || apt_install sqlite3
# SQLite's fault tests make and repair small ext4 file systems on loop devices.
command -v mkfs.ext4 >/dev/null && command -v e2fsck >/dev/null || apt_install e2fsprogs
command -v chromium >/dev/null && command -v chromedriver >/dev/null \
    || { log "installing Chromium and chromedriver"; apt_install chromium chromium-driver; }
command -v chromedriver >/dev/null || { log "chromedriver is not installed"; exit 1; }
ensure_postgres
ensure_mariadb
"$(dirname "$0")/fault_server.sh" ensure postgres
"$(dirname "$0")/fault_server.sh" ensure mysql
"$(dirname "$0")/galera.sh" ensure
"$(dirname "$0")/pgbouncer.sh" ensure
ensure_python_drivers
ensure_ruby_drivers
ensure_typescript_client
