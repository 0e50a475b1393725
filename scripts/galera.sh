#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback, for tests; the main MariaDB (3306) and the fault
# instance (3307, scripts/fault_server.sh) are not touched.
#   node N (1..3): client 127.0.0.1:331N, Galera group 127.0.0.1:451N, IST 127.0.0.1:452N,
#   SST (rsync) 127.0.0.1:453N; datadir /var/lib/backlog-galera/nodeN, error log
#   /var/lib/backlog-galera/log/nodeN.err, socket and pid file in /run/backlog-galera/nodeN/;
#   root with an empty password from 127.0.0.1, database `test` (replicated to every node)
# One path for tests and humans:
#   scripts/galera.sh ensure     install if missing, create, start, wait until all 3 are Synced
#   scripts/galera.sh kill N     SIGKILL node N (a crash); returns once it is gone and the others
#                                have dropped it from the cluster view
#   scripts/galera.sh start N    start node N again; returns once it is Synced and in the view
#   scripts/galera.sh stop       stop every node cleanly (3, 2, then 1)
#   scripts/galera.sh status     each node's pid, cluster size, state and component
#   scripts/galera.sh reset      stop every node and delete the datadirs (the next ensure starts
#                                from nothing)
# Runs as root (or through sudo); exits non-zero when the cluster cannot be had. Every wait is
# bounded. Concurrent calls are serialised on a lock file.
#
# State transfer: rsync SST, which needs no SQL user or password (mariabackup SST would need
# wsrep_sst_auth and a user on the donor), and an rsync daemon bound to 127.0.0.1 only. A node
# that was only briefly down rejoins by IST from a donor's gcache (512M each, kept across
# restarts by gcache.recover), so a kill and start a minute later copies only the missed writes.
#
# When no node runs, `ensure` bootstraps the cluster again from the node with the most recent
# state, keeping the data: the seqno in grastate.dat after a clean stop, or the position
# `mariadbd --wsrep-recover` finds in InnoDB after a crash (grastate.dat then says seqno -1). That
# node gets safe_to_bootstrap: 1 and --wsrep-new-cluster; the others join it (IST, or SST if
# their state is too old or foreign). If that ever fails, `reset` and `ensure` start afresh: it is
# test data.
#
# Loopback only: every listener (mysqld, gcomm, IST, the SST rsync daemon) is bound to 127.0.0.1,
# and every peer address is 127.0.0.1. (The SST scripts also read /etc/mysql/my.cnf through
# my_print_defaults for options such as log-bin; the main instance's file sets none of those.)
set -euo pipefail

BASE=/var/lib/backlog-galera
RUN=/run/backlog-galera
PROVIDER=/usr/lib/galera/libgalera_smm.so
NODES=(1 2 3)
WAIT=120
CLUSTER_ADDRESS=gcomm://127.0.0.1:4511,127.0.0.1:4512,127.0.0.1:4513

log() { echo "galera: $*" >&2; }
die() { log "$*"; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
wait_for() { # SECONDS COMMAND...: true once COMMAND succeeds within SECONDS
    local end=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.1; done
}

apt_install() {
    if [ -z "${APT_UPDATED:-}" ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

ensure_installed() {
    local missing=()
    [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
    command -v mariadb >/dev/null || missing+=(mariadb-client)
    [ -e "$PROVIDER" ] || missing+=(galera-4)
    command -v rsync >/dev/null || missing+=(rsync)      # the SST method
    command -v ss >/dev/null || missing+=(iproute2)      # wsrep_sst_rsync checks its port with ss
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt_install "${missing[@]}" || die "cannot install ${missing[*]}"
    fi
    [ -e "$PROVIDER" ] || die "$PROVIDER is missing after installing galera-4"
}

datadir() { echo "$BASE/node$1"; }
errlog() { echo "$BASE/log/node$1.err"; }
sock() { echo "$RUN/node$1/mysqld.sock"; }
pidfile() { echo "$RUN/node$1/mysqld.pid"; }
port() { echo $((3310 + $1)); }

# Every argument node N's mariadbd runs with; no option file is read (the main instance's
# /etc/mysql/my.cnf would give it the main port, socket and datadir).
node_args() {
    local n="$1"
    local opts="base_host=127.0.0.1;base_port=$((4510 + n))"
    opts+=";gmcast.listen_addr=tcp://127.0.0.1:$((4510 + n))"
    opts+=";ist.recv_addr=127.0.0.1:$((4520 + n))"
    opts+=";gcache.size=512M;gcache.recover=yes"
    ARGS=(
        --no-defaults --user=mysql --datadir="$(datadir "$n")"
        --port="$(port "$n")" --bind-address=127.0.0.1 --skip-name-resolve
        --socket="$(sock "$n")" --pid-file="$(pidfile "$n")"
        --log-error="$(errlog "$n")"
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
        --innodb-buffer-pool-size=128M --max-connections=300
        --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2
        --wsrep-on=ON --wsrep-provider="$PROVIDER"
        --wsrep-cluster-name=backlog_galera --wsrep-cluster-address="$CLUSTER_ADDRESS"
        --wsrep-node-name="node$n" --wsrep-node-address="127.0.0.1:$((4510 + n))"
        --wsrep-node-incoming-address="127.0.0.1:$(port "$n")"
        --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((4530 + n))"
        --wsrep-provider-options="$opts"
    )
}

check_node() { case "${1:-}" in 1|2|3) ;; *) die "node: 1, 2 or 3, not '${1:-}'";; esac; }

# The pid of node N's mariadbd, if it runs: the mariadbd process with this node's datadir (its
# pid file appears only once a joiner's state transfer is over).
node_pid() {
    local pid
    for pid in $(pgrep -x mariadbd); do
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--datadir=$(datadir "$1") " || continue
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--wsrep-recover" && continue
        echo "$pid"; return 0
    done
    return 1
}
running() { node_pid "$1" >/dev/null; }
running_nodes() { local n; for n in "${NODES[@]}"; do running "$n" && echo "$n"; done; return 0; }
count_running() { running_nodes | grep -c . || true; }

# As root through node N's socket (works before root@127.0.0.1 exists, and during SST/IST).
sql() { local n="$1"; shift; as_root mariadb --socket="$(sock "$n")" -u root -N -B "$@"; }

# "size state status" of node N, e.g. "3 Synced Primary".
wsrep_state() {
    sql "$1" -e "SHOW GLOBAL STATUS WHERE Variable_name IN
        ('wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status')" 2>/dev/null |
        awk '{v[$1]=$2} END {
            if (!("wsrep_cluster_size" in v)) exit 1
            print v["wsrep_cluster_size"], v["wsrep_local_state_comment"], v["wsrep_cluster_status"]
        }'
}
view_is() { local st; st=$(wsrep_state "$1") && [ "${st%% *}" = "$2" ]; }
# True when node N is Synced in the primary component of SIZE nodes.
synced() { [ "$(wsrep_state "$1")" = "$2 Synced Primary" ]; }

tcp_ok() { mariadb -h 127.0.0.1 -P "$(port "$1")" -u root test -e 'select 1' >/dev/null 2>&1; }

fail_node() { # N MESSAGE: die, with the end of node N's error log
    local n="$1"; shift
    log "$* (see $(errlog "$n")); its last lines:"
    tail -n 15 "$(errlog "$n")" 2>/dev/null | sed 's/^/    /' >&2 || true
    exit 1
}

# Starts node N's mariadbd in the background; BOOTSTRAP=1 makes it a new primary component.
spawn() {
    local n="$1" bootstrap="${2:-0}"
    recover "$n"
    node_args "$n"
    [ "$bootstrap" = 1 ] && ARGS+=(--wsrep-new-cluster)
    [ -n "${RECOVERED[$n]}" ] && ARGS+=(--wsrep-start-position="${RECOVERED[$n]}")
    as_root mkdir -p "$RUN/node$n" "$(datadir "$n")" "$BASE/log"
    as_root chown mysql:mysql "$RUN/node$n" "$(datadir "$n")" "$BASE/log"
    # Detached, every descriptor closed to the caller (a test reading this script's output would
    # otherwise wait on the server's end of the pipe; fd 9 is this script's lock).
    as_root setsid /usr/sbin/mariadbd "${ARGS[@]}" </dev/null >/dev/null 2>&1 9>&- &
}

# Waits until node N is Synced in a primary component of SIZE nodes.
wait_synced() {
    local n="$1" size="$2" end=$((SECONDS + WAIT)) pid
    # A node just spawned may not show as running yet (a fresh datadir takes seconds to start).
    wait_for 30 running "$n" || fail_node "$n" "node $n is not running"
    pid=$(node_pid "$n") || fail_node "$n" "node $n is not running"
    while [ "$SECONDS" -lt "$end" ]; do
        synced "$n" "$size" && return 0
        kill -0 "$pid" 2>/dev/null || fail_node "$n" "node $n (pid $pid) exited while starting"
        sleep 0.25
    done
    fail_node "$n" "node $n is not Synced in a cluster of $size within ${WAIT}s (now: $(wsrep_state "$n" || echo unreachable))"
}

# Waits until every running node sees a cluster of exactly the running nodes, all Synced.
wait_cluster() {
    local nodes size n; nodes=$(running_nodes); size=$(count_running)
    for n in $nodes; do wait_synced "$n" "$size"; done
}

start_node() { # N: join the running cluster
    local n="$1"
    running "$n" && return 0
    [ -n "$(running_nodes)" ] || die "no node runs: node $n has no cluster to join (run: $0 ensure)"
    wait_for 10 any_primary || die "no running node is in a primary component (quorum lost): node $n has no cluster to join (run: $0 ensure)"
    log "starting node $n (127.0.0.1:$(port "$n"))"
    spawn "$n" 0
    wait_for 30 running "$n" || fail_node "$n" "node $n did not start"
}

# grastate.dat field FIELD of node N (empty if absent).
grastate() { sed -n "s/^$2:[[:space:]]*//p" "$(datadir "$1")/grastate.dat" 2>/dev/null | head -1; }

# The uuid:seqno node N's data is at, when grastate.dat does not say (seqno -1: it crashed, or
# was killed during a state transfer): InnoDB's, as `mariadbd --wsrep-recover` finds it. Without
# it the node would ask for a full SST (what Debian's systemd unit does through galera_recovery).
# Sets RECOVERED[N] (empty when grastate.dat has the position or nothing is found).
declare -A RECOVERED=()
recover() {
    local n="$1" out
    [ -z "${RECOVERED[$n]+set}" ] || return 0
    RECOVERED[$n]=""
    [ -f "$(datadir "$n")/grastate.dat" ] && [ "$(grastate "$n" seqno)" = -1 ] \
        && [ -d "$(datadir "$n")/mysql" ] || return 0
    node_args "$n"
    as_root mkdir -p "$RUN/node$n"; as_root chown mysql:mysql "$RUN/node$n"
    out=$(as_root timeout "$WAIT" /usr/sbin/mariadbd "${ARGS[@]}" --wsrep-recover --skip-networking \
        --disable-log-error 2>&1 >/dev/null </dev/null 9>&-) || true
    echo "$out" >>"$(errlog "$n")" 2>/dev/null || true
    RECOVERED[$n]=$(echo "$out" |
        sed -n 's/.*WSREP: Recovered position: *\([-0-9a-f]*:-\{0,1\}[0-9]*\).*/\1/p' | tail -1)
    log "node $n: position recovered from InnoDB: ${RECOVERED[$n]:-none}"
}

# The seqno node N's data is at (-1 when unknown).
node_seqno() {
    local n="$1" seqno; seqno=$(grastate "$n" seqno)
    if [ "${seqno:--1}" = -1 ]; then recover "$n"; seqno=${RECOVERED[$n]##*:}; fi
    echo "${seqno:--1}"
}

# Nothing runs: start the node with the most recent data (or a new datadir on node 1) as a new
# primary component.
bootstrap() {
    local n best="" best_seqno=-2 seqno
    for n in "${NODES[@]}"; do
        # Only datadirs with a whole copy of the data: not fresh ones, nor one an SST was cut off in.
        [ -d "$(datadir "$n")/mysql" ] && [ ! -e "$(datadir "$n")/sst_in_progress" ] || continue
        [ "$(grastate "$n" seqno)" = -1 ] && recover "$n"   # here, not in node_seqno's subshell
        seqno=$(node_seqno "$n")
        log "node $n: data at seqno $seqno"
        if [ "$seqno" -gt "$best_seqno" ]; then best=$n; best_seqno=$seqno; fi
    done
    if [ -z "$best" ]; then
        best=1
        log "creating datadir $(datadir 1)"
        as_root rm -rf "$(datadir 1)"
        as_root mkdir -p "$(datadir 1)"; as_root chown mysql:mysql "$(datadir 1)"
        as_root mariadb-install-db --no-defaults --user=mysql --datadir="$(datadir 1)" \
            --skip-test-db --auth-root-authentication-method=socket >/dev/null 9>&- \
            || die "mariadb-install-db failed for $(datadir 1)"
    fi
    # A saved primary component view (pc.recovery) would have the node wait for its old peers.
    for n in "${NODES[@]}"; do as_root rm -f "$(datadir "$n")/gvwstate.dat"; done
    [ -f "$(datadir "$best")/grastate.dat" ] &&
        as_root sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$(datadir "$best")/grastate.dat"
    log "bootstrapping the cluster on node $best (127.0.0.1:$(port "$best"))"
    spawn "$best" 1
    wait_synced "$best" 1
}

primary() { [ "$(wsrep_state "$1" | cut -d' ' -f3)" = Primary ]; }
any_primary() { local n; for n in $(running_nodes); do primary "$n" && return 0; done; return 1; }

# Nodes run but none is in a primary component (the others crashed and took the majority with
# them): make the most advanced running node a primary component again (pc.bootstrap).
restore_primary() {
    wait_for 3 any_primary && return 0
    local n best="" best_seqno=-2 seqno
    for n in $(running_nodes); do
        seqno=$(sql "$n" -e "SHOW GLOBAL STATUS LIKE 'wsrep_last_committed'" 2>/dev/null | awk '{print $2}')
        if [ "${seqno:--1}" -gt "$best_seqno" ]; then best=$n; best_seqno=${seqno:--1}; fi
    done
    [ -n "$best" ] || die "no running node answers"
    log "no running node is in a primary component: bootstrapping node $best (seqno $best_seqno) again"
    sql "$best" -e "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'" \
        || fail_node "$best" "cannot bootstrap node $best"
    wait_for "$WAIT" any_primary || fail_node "$best" "node $best did not become primary"
}

ensure() {
    ensure_installed
    local n up; up=$(count_running)
    if [ "$up" = 3 ] && synced 1 3 && synced 2 3 && synced 3 3 && tcp_ok 1 && tcp_ok 2 && tcp_ok 3; then
        log "the cluster is up: 3 nodes Synced on 127.0.0.1:3311-3313"
        return 0
    fi
    as_root mkdir -p "$BASE" "$RUN"
    if [ "$up" = 0 ]; then bootstrap; else restore_primary; wait_cluster; fi
    # One at a time: each joiner takes a donor out of Synced for its state transfer.
    for n in "${NODES[@]}"; do
        if ! running "$n"; then start_node "$n"; wait_cluster; fi
    done
    wait_cluster
    for n in "${NODES[@]}"; do synced "$n" 3 || fail_node "$n" "node $n is not Synced in a cluster of 3"; done
    # The new datadir lets root in through the socket only: allow TCP from loopback without a
    # password, as the tests expect. Account statements and DDL replicate to every node.
    if ! tcp_ok 1; then
        sql 1 -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
            GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
            CREATE DATABASE IF NOT EXISTS test;" || die "cannot create root@127.0.0.1 on node 1"
    fi
    for n in "${NODES[@]}"; do
        wait_for 30 tcp_ok "$n" || die "node $n is not reachable at 127.0.0.1:$(port "$n") as root"
    done
    log "the cluster is up: 3 nodes Synced on 127.0.0.1:3311-3313"
}

kill_node() {
    local n="$1" pid; pid=$(node_pid "$n") || { log "node $n is not running"; return 0; }
    log "killing node $n (pid $pid)"
    as_root kill -KILL "$pid" 2>/dev/null || true
    wait_for 30 bash -c "! kill -0 $pid" || die "mariadbd $pid (node $n) did not die on SIGKILL"
    # Until the survivors drop it from the view (evs.suspect_timeout, 5 s), their commits stall.
    # (Survivors without a majority of the last view go non-Primary; that is for the caller to see.)
    local m rest size; rest=$(running_nodes); size=$(count_running)
    for m in $rest; do
        wait_for "$WAIT" view_is "$m" "$size" \
            || fail_node "$m" "node $m still sees a cluster of $(wsrep_state "$m" || echo ?) after ${WAIT}s"
    done
    log "node $n is gone; the others see a cluster of $size"
}

stop_node() {
    local n="$1" pid; pid=$(node_pid "$n") || return 0
    log "stopping node $n (pid $pid)"
    as_root kill -TERM "$pid" 2>/dev/null || return 0
    wait_for "$WAIT" bash -c "! kill -0 $pid" || die "mariadbd $pid (node $n) did not stop on SIGTERM within ${WAIT}s"
}

status() {
    local n pid st
    for n in "${NODES[@]}"; do
        if pid=$(node_pid "$n"); then
            st=$(wsrep_state "$n") || st="? unreachable -"
            set -- $st
            echo "node$n 127.0.0.1:$(port "$n") pid $pid cluster_size $1 state $2 component $3"
        else
            echo "node$n 127.0.0.1:$(port "$n") down"
        fi
    done
}

usage() { die "usage: $0 ensure | kill N | start N | stop | status | reset   (N: 1, 2 or 3)"; }

cmd="${1:-}"
case "$cmd" in
    status) status; exit 0 ;;
    ensure|kill|start|stop|reset) ;;
    *) usage ;;
esac
# One change at a time (tests may call this concurrently); mariadbd is started with fd 9 closed.
as_root mkdir -p "$RUN"
exec 9>"$RUN/lock"
flock -w $((WAIT * 3)) 9 || die "another $0 holds $RUN/lock"
case "$cmd" in
    ensure) ensure ;;
    kill) check_node "${2:-}"; kill_node "$2" ;;
    start)
        check_node "${2:-}"; ensure_installed; start_node "$2"; wait_cluster
        log "node $2 is Synced; cluster size $(count_running)"
        ;;
    stop) for n in 3 2 1; do stop_node "$n"; done; log "all nodes stopped" ;;
    reset)
        for n in 3 2 1; do stop_node "$n"; done
        as_root rm -rf "$BASE"
        log "all nodes stopped; $BASE removed"
        ;;
esac
