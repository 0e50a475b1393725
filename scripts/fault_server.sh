#!/usr/bin/env bash
# The database servers the fault tests may restart, apart from the main ones other tests use:
#   PostgreSQL cluster `backlog_fault` on 127.0.0.1:5433, trust auth, database `test`, autovacuum
#     on (as on users' servers; the main cluster runs with it off)
#   MariaDB instance on 127.0.0.1:3307, its own datadir (/var/lib/backlog-mariadb-fault), socket
#     and pid file (/run/backlog-mariadb-fault/), root with an empty password, database `test`
# One path for tests and humans:
#   scripts/fault_server.sh ensure postgres|mysql        create if missing, start, wait until up
#   scripts/fault_server.sh restart postgres fast|immediate
#   scripts/fault_server.sh restart mysql term|kill       SIGTERM (clean) or SIGKILL (a crash)
#   scripts/fault_server.sh stop postgres|mysql
# `restart` returns once the server accepts connections again. Runs as root (or through sudo);
# exits non-zero when a server cannot be had. Loopback only.
set -euo pipefail

PG_CLUSTER=backlog_fault
PG_PORT=5433
MY_PORT=3307
MY_DATADIR=/var/lib/backlog-mariadb-fault
MY_RUN=/run/backlog-mariadb-fault
# Every argument the fault mariadbd runs with; no option file is read (the main instance's
# /etc/mysql/my.cnf would give it the main port, socket and datadir).
MY_ARGS=(
    --no-defaults --user=mysql --datadir="$MY_DATADIR"
    --port="$MY_PORT" --bind-address=127.0.0.1 --skip-name-resolve
    --socket="$MY_RUN/mysqld.sock" --pid-file="$MY_RUN/mysqld.pid"
    --log-error="$MY_DATADIR/error.log"
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
    --innodb-buffer-pool-size=128M --max-connections=300
)

log() { echo "fault_server: $*" >&2; }
die() { log "$*"; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
wait_for() { # SECONDS COMMAND...: true once COMMAND succeeds within SECONDS
    local tries=$(($1 * 10)); shift
    for _ in $(seq 1 "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

pg_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -1; }
pg_ok() { psql "postgres://postgres@127.0.0.1:$PG_PORT/test" -Atc 'select 1' >/dev/null 2>&1; }
pg_ctl_fault() { as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" "$PG_CLUSTER" "$@"; }

ensure_postgres() {
    local ver; ver=$(pg_version)
    [ -n "$ver" ] || die "PostgreSQL is not installed (scripts/services.sh installs it)"
    local etc="/etc/postgresql/$ver/$PG_CLUSTER"
    if [ ! -d "$etc" ]; then
        log "creating PostgreSQL cluster $ver/$PG_CLUSTER on port $PG_PORT"
        as_root pg_createcluster "$ver" "$PG_CLUSTER" -p "$PG_PORT" >/dev/null \
            -- --auth-local=trust --auth-host=trust
    fi
    as_root mkdir -p "$etc/conf.d"
    as_root tee "$etc/conf.d/90-backlog-fault.conf" >/dev/null <<EOF
# Written by scripts/fault_server.sh: the cluster fault tests restart.
listen_addresses = '127.0.0.1'
port = $PG_PORT
autovacuum = on
max_connections = 300
EOF
    as_root tee "$etc/pg_hba.conf" >/dev/null <<'EOF'
# Written by scripts/fault_server.sh: loopback only, no password (a test cluster).
local all all trust
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
EOF
    if ! pg_ctl_fault status >/dev/null 2>&1; then
        pg_ctl_fault start || die "cannot start PostgreSQL cluster $ver/$PG_CLUSTER"
    else
        pg_ctl_fault reload >/dev/null
    fi
    wait_for 30 pg_isready -h 127.0.0.1 -p "$PG_PORT" -q || die "PostgreSQL (fault) did not come up"
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atc \
        "select 1 from pg_database where datname='test'" | grep -q 1 \
        || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc 'create database test'
    pg_ok || die "PostgreSQL (fault) is not reachable at 127.0.0.1:$PG_PORT"
    local av; av=$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d test -Atc 'show autovacuum')
    [ "$av" = on ] || die "PostgreSQL (fault) runs with autovacuum = $av"
    log "PostgreSQL (fault cluster $ver/$PG_CLUSTER, 127.0.0.1:$PG_PORT, autovacuum on) is up"
}

restart_postgres() {
    local mode="$1"
    case "$mode" in fast|immediate) ;; *) die "postgres restart mode: fast or immediate, not $mode";; esac
    pg_ctl_fault restart -m "$mode" >/dev/null || die "pg_ctlcluster restart -m $mode failed"
    wait_for 60 pg_ok || die "PostgreSQL (fault) did not come back after a $mode restart"
}

my_ok() { mariadb -h 127.0.0.1 -P "$MY_PORT" -u root test -e 'select 1' >/dev/null 2>&1; }
my_pid() { cat "$MY_RUN/mysqld.pid" 2>/dev/null; }
my_running() { local pid; pid=$(my_pid) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

try_start_mysql() {
    as_root mkdir -p "$MY_RUN"
    as_root chown mysql:mysql "$MY_RUN"
    # Detached, every descriptor closed to the caller (a test reading this script's output would
    # otherwise wait on the server's end of the pipe).
    as_root setsid /usr/sbin/mariadbd "${MY_ARGS[@]}" </dev/null >/dev/null 2>&1 &
    wait_for 60 my_ok_or_socket
}

start_mysql() {
    try_start_mysql || die "MariaDB (fault) did not start; see $MY_DATADIR/error.log"
}

# The datadir, made anew.
create_mysql_datadir() {
    log "creating MariaDB datadir $MY_DATADIR"
    as_root mkdir -p "$MY_DATADIR"
    as_root chown mysql:mysql "$MY_DATADIR"
    as_root mariadb-install-db --no-defaults --user=mysql --datadir="$MY_DATADIR" \
        --skip-test-db --auth-root-authentication-method=socket >/dev/null \
        || die "mariadb-install-db failed"
}

# Up enough to finish setup: TCP as root, or the socket before the TCP user exists.
my_ok_or_socket() {
    my_ok || mariadb --socket="$MY_RUN/mysqld.sock" -u root -e 'select 1' >/dev/null 2>&1
}

ensure_mysql() {
    [ -x /usr/sbin/mariadbd ] || die "MariaDB is not installed (scripts/services.sh installs it)"
    [ -d "$MY_DATADIR/mysql" ] || create_mysql_datadir
    if ! my_running && ! try_start_mysql; then
        # This instance holds nothing but what fault tests make and drop. A datadir its crash
        # recovery refuses (InnoDB has reported "Not applying INSERT_HEAP_DYNAMIC due to
        # corruption" after a SIGKILL here) would fail every later run: keep its log, start anew.
        stop_mysql KILL
        log "MariaDB (fault) did not start; its datadir is made anew (its log kept in /var/lib/backlog-mariadb-fault.error.log.failed)"
        as_root cp "$MY_DATADIR/error.log" "/var/lib/backlog-mariadb-fault.error.log.failed" || true
        as_root rm -rf "$MY_DATADIR"
        create_mysql_datadir
        start_mysql
    fi
    if ! my_ok; then
        # The new instance lets root in through its socket only: allow TCP from loopback without
        # a password, as the tests expect.
        as_root mariadb --socket="$MY_RUN/mysqld.sock" -u root -e "
            CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
            GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
    fi
    mariadb -h 127.0.0.1 -P "$MY_PORT" -u root -e 'CREATE DATABASE IF NOT EXISTS test'
    my_ok || die "MariaDB (fault) is not reachable at 127.0.0.1:$MY_PORT as root"
    log "MariaDB (fault instance $MY_DATADIR, 127.0.0.1:$MY_PORT) is up"
}

stop_mysql() { # SIGNAL: TERM shuts down cleanly, KILL is a crash (InnoDB recovers on start)
    local pid; pid=$(my_pid) || return 0
    [ -n "$pid" ] || return 0
    as_root kill -"$1" "$pid" 2>/dev/null || return 0
    wait_for 120 bash -c "! kill -0 $pid" || die "mariadbd $pid did not stop on SIG$1"
}

restart_mysql() {
    case "$1" in
        term) stop_mysql TERM ;;
        kill) stop_mysql KILL ;;
        *) die "mysql restart mode: term or kill, not $1" ;;
    esac
    start_mysql
    wait_for 60 my_ok || die "MariaDB (fault) did not come back after SIG${1^^}"
}

case "${1:-} ${2:-}" in
    "ensure postgres") ensure_postgres ;;
    "ensure mysql") ensure_mysql ;;
    "restart postgres") restart_postgres "${3:-fast}" ;;
    "restart mysql") restart_mysql "${3:-term}" ;;
    "stop postgres") pg_ctl_fault stop -m fast ;;
    "stop mysql") stop_mysql TERM ;;
    *) die "usage: $0 ensure|stop postgres|mysql, or restart postgres fast|immediate, or restart mysql term|kill" ;;
esac
