# shellcheck shell=bash
# A PostgreSQL primary and a streaming replica on loopback, made fresh, for the scripts that
# need both (pg_failover.sh, held_replica.sh). Source it, then:
#   pg_pair_create PRIMARY PRIMARY_PORT REPLICA REPLICA_PORT [PRIMARY_CONF [REPLICA_CONF]]
#   pg_pair_drop PRIMARY REPLICA
# The *_CONF arguments are more lines for each server's conf.d file. Creates database `test` on
# the primary, which the replica then streams. Needs root (pg_createcluster).

PG_PAIR_VER=$(ls /etc/postgresql | sort -V | tail -1)

pg_pair_psql() { psql -h 127.0.0.1 -p "$1" -U postgres -d "${3:-test}" -Atc "$2"; }

pg_pair_drop() {
    for c in "$@"; do
        pg_dropcluster --stop "$PG_PAIR_VER" "$c" >/dev/null 2>&1 || true
    done
}

pg_pair_create() {
    local pri=$1 pri_port=$2 rep=$3 rep_port=$4 pri_conf=${5:-} rep_conf=${6:-}
    local etc=/etc/postgresql/$PG_PAIR_VER
    pg_pair_drop "$pri" "$rep"
    pg_createcluster "$PG_PAIR_VER" "$pri" -p "$pri_port" >/dev/null -- --auth-local=trust --auth-host=trust
    cat > "$etc/$pri/pg_hba.conf" <<'HBA'
local all all trust
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
HBA
    printf '%s\n' "listen_addresses = '127.0.0.1'" "wal_level = replica" "max_wal_senders = 5" \
        "max_connections = 200" "$pri_conf" > "$etc/$pri/conf.d/90-pair.conf"
    pg_ctlcluster --skip-systemctl-redirect "$PG_PAIR_VER" "$pri" start
    pg_pair_psql "$pri_port" "CREATE DATABASE test" postgres >/dev/null

    pg_createcluster "$PG_PAIR_VER" "$rep" -p "$rep_port" >/dev/null -- --auth-local=trust --auth-host=trust
    cp "$etc/$pri/pg_hba.conf" "$etc/$rep/pg_hba.conf"
    printf '%s\n' "listen_addresses = '127.0.0.1'" "hot_standby = on" "max_connections = 200" \
        "$rep_conf" > "$etc/$rep/conf.d/90-pair.conf"
    local data=/var/lib/postgresql/$PG_PAIR_VER/$rep
    find "$data" -mindepth 1 -delete
    su postgres -c "pg_basebackup -h 127.0.0.1 -p $pri_port -U postgres -D $data -R -X stream --checkpoint=fast" >/dev/null
    pg_ctlcluster --skip-systemctl-redirect "$PG_PAIR_VER" "$rep" start
    local _
    for _ in $(seq 1 60); do
        [ "$(pg_pair_psql "$pri_port" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && return 0
        sleep 0.5
    done
    echo "pg_pair: the replica $rep did not stream from $pri" >&2
    return 1
}
