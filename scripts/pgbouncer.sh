#!/usr/bin/env bash
# PgBouncer in transaction pooling mode in front of the main PostgreSQL (127.0.0.1:5432), for tests
# of the PostgreSQL backend through a pooler:
#   postgres://postgres@127.0.0.1:6432/test   -> 127.0.0.1:5432/test, pool_mode = transaction
#   any other database name                   -> the same-named database on 127.0.0.1:5432
# One path for tests and humans:
#   scripts/pgbouncer.sh ensure    install (Debian's package) if missing, write the config, start
#                                  if not running (restart if the config changed), wait until up
#   scripts/pgbouncer.sh stop      stop it (nothing to do if it is not running)
#   scripts/pgbouncer.sh status    exit 0 if it answers on 127.0.0.1:6432
# Its own files, never the package's /etc/pgbouncer/: config in /etc/backlog-pgbouncer/, pid and
# log in /var/lib/backlog-pgbouncer/. Runs as user postgres (pgbouncer refuses root). Loopback
# only, no password (trust, like the server behind it). Runs as root (or through sudo).
#
# What transaction pooling means for clients (Debian 12 ships PgBouncer 1.18):
#   - A server connection is lent per transaction (until ReadyForQuery says idle). Named prepared
#     statements (sqlx's default, `sqlx_s_N`) end up on other clients' server connections: errors
#     ("prepared statement "sqlx_s_1" does not exist" / "already exists") and, worse, another
#     client's statement of the same name runs with your parameters. 1.18 has no
#     max_prepared_statements (1.21+). sqlx's `.persistent(false)` uses the unnamed statement but
#     in two round trips (Parse+Describe+Sync, then Bind+Execute+Sync): safe only inside an
#     explicit transaction. The simple protocol (`sqlx::raw_sql`) is always safe.
#   - Session state leaks between clients: SET outside a transaction, session advisory locks,
#     LISTEN. Use SET LOCAL, pg_advisory_xact_lock, and a direct connection for LISTEN.
#   - Startup parameters other than client_encoding, DateStyle, TimeZone, application_name and
#     standard_conforming_strings are refused ("unsupported startup parameter: ...") unless listed
#     in ignore_startup_parameters, which then drops them without passing them on. sqlx sends
#     extra_float_digits by default, so it is ignored here. `options` (`-c name=value`, e.g.
#     ?options=-c search_path=...) is refused by default rather than silently dropped; set
#     BACKLOG_PGBOUNCER_IGNORE_STARTUP=extra_float_digits,options to accept and drop it.
# Environment (read by `ensure`):
#   BACKLOG_PGBOUNCER_POOL_SIZE       server connections per database/user pair (default 4)
#   BACKLOG_PGBOUNCER_IGNORE_STARTUP  ignore_startup_parameters (default extra_float_digits)
set -euo pipefail

PORT=6432
PG_PORT=5432
ETC=/etc/backlog-pgbouncer
STATE=/var/lib/backlog-pgbouncer
INI="$ETC/pgbouncer.ini"
USERS="$ETC/userlist.txt"
PIDFILE="$STATE/pgbouncer.pid"
LOGFILE="$STATE/pgbouncer.log"
POOL_SIZE="${BACKLOG_PGBOUNCER_POOL_SIZE:-4}"
IGNORE_STARTUP="${BACKLOG_PGBOUNCER_IGNORE_STARTUP:-extra_float_digits}"

log() { echo "pgbouncer: $*" >&2; }
die() { log "$*"; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
wait_for() { # SECONDS COMMAND...: true once COMMAND succeeds within SECONDS
    local tries=$(($1 * 10)); shift
    for _ in $(seq 1 "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

bouncer_ok() { psql "postgres://postgres@127.0.0.1:$PORT/test" -Atc 'select 1' >/dev/null 2>&1; }
server_ok() { psql "postgres://postgres@127.0.0.1:$PG_PORT/test" -Atc 'select 1' >/dev/null 2>&1; }
our_pid() { as_root cat "$PIDFILE" 2>/dev/null; }
# PID is a live pgbouncer (an exited one can linger as a zombie until init reaps it).
alive() {
    local st; st=$(ps -o stat=,comm= -p "$1" 2>/dev/null) || return 1
    [[ "$st" != Z* && "$st" == *pgbouncer* ]]
}
gone() { ! alive "$1"; }
running() { local pid; pid=$(our_pid) && [ -n "$pid" ] && alive "$pid"; }
port_taken() { ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; }

install_pgbouncer() {
    [ -x /usr/sbin/pgbouncer ] && return 0
    log "installing pgbouncer (Debian package)"
    as_root apt-get update -qq
    local out
    out=$(DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq pgbouncer 2>&1) \
        || die "cannot install pgbouncer: $out"
    # The package's own instance (/etc/pgbouncer/pgbouncer.ini) also listens on localhost:6432;
    # where its service was started (a systemd or sysvinit machine), stop and disable it.
    if [ -d /run/systemd/system ]; then
        as_root systemctl disable --now pgbouncer.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/pgbouncer ]; then
        as_root /etc/init.d/pgbouncer stop >/dev/null 2>&1 || true
    fi
}

# Writes FILE (owned by postgres, mode 0640) from stdin; true if its content changed.
write_file() {
    local file="$1" tmp; tmp=$(mktemp)
    cat >"$tmp"
    if as_root cmp -s "$tmp" "$file" 2>/dev/null; then rm -f "$tmp"; return 1; fi
    as_root install -o postgres -g postgres -m 0640 "$tmp" "$file"
    rm -f "$tmp"
    return 0
}

write_config() { # true if anything changed
    local changed=1
    as_root install -d -o postgres -g postgres -m 0750 "$ETC" "$STATE"
    # trust still needs the user listed; the password is not checked.
    write_file "$USERS" <<'EOF' && changed=0
"postgres" ""
EOF
    write_file "$INI" <<EOF && changed=0
; Written by scripts/pgbouncer.sh: PgBouncer in transaction pooling mode for the tests.
[databases]
test = host=127.0.0.1 port=$PG_PORT dbname=test
; Any other database name (e.g. a database per test) goes to the same-named database.
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
; No Unix socket (the package's instance uses /var/run/postgresql).
unix_socket_dir =
auth_type = trust
auth_file = $USERS
; The console (psql -h 127.0.0.1 -p $PORT -U postgres pgbouncer -c 'show pools').
admin_users = postgres
pool_mode = transaction
; Few server connections, so that many client connections really share them.
default_pool_size = $POOL_SIZE
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
; Per-test databases' pools give their server connections back soon.
server_idle_timeout = 30
; sqlx sends extra_float_digits at connect; 1.18 refuses unknown startup parameters.
ignore_startup_parameters = $IGNORE_STARTUP
logfile = $LOGFILE
pidfile = $PIDFILE
log_connections = 0
log_disconnections = 0
EOF
    return $changed
}

start() {
    if port_taken; then
        die "127.0.0.1:$PORT is taken by another process: $(ss -Hltnp "sport = :$PORT" 2>/dev/null | head -1)"
    fi
    # -d: daemon. Every descriptor closed to the caller (a test reading this script's output would
    # otherwise wait on the daemon's end of the pipe); errors go to the log file.
    as_root runuser -u postgres -- /usr/sbin/pgbouncer -d "$INI" </dev/null >/dev/null 2>&1 \
        || die "pgbouncer did not start: $(as_root tail -n 3 "$LOGFILE" 2>/dev/null)"
    wait_for 30 bouncer_ok || die "pgbouncer is not reachable at 127.0.0.1:$PORT; see $LOGFILE"
}

stop() {
    local pid; pid=$(our_pid) || return 0
    if [ -z "$pid" ] || ! alive "$pid"; then as_root rm -f "$PIDFILE"; return 0; fi
    # SIGTERM: immediate shutdown (SIGINT would wait for clients to finish).
    as_root kill -TERM "$pid" 2>/dev/null || { as_root rm -f "$PIDFILE"; return 0; }
    wait_for 30 gone "$pid" || die "pgbouncer $pid did not stop"
    as_root rm -f "$PIDFILE"
}

ensure() {
    install_pgbouncer
    server_ok || die "PostgreSQL is not reachable at 127.0.0.1:$PG_PORT (scripts/services.sh starts it)"
    if write_config; then
        if running; then log "config changed: restarting"; stop; fi
    fi
    if ! running; then
        as_root rm -f "$PIDFILE"
        start
    fi
    bouncer_ok || die "pgbouncer is not reachable at 127.0.0.1:$PORT; see $LOGFILE"
    log "PgBouncer $(/usr/sbin/pgbouncer --version | awk 'NR == 1 {print $2}') (transaction pooling," \
        "127.0.0.1:$PORT -> 127.0.0.1:$PG_PORT, pool size $POOL_SIZE) is up"
}

case "${1:-}" in
    ensure) ensure ;;
    stop) stop ;;
    status) running && bouncer_ok ;;
    *) die "usage: $0 ensure|stop|status" ;;
esac
