#!/usr/bin/env bash
# The Debian package of the backlog command, made with Debian's own dpkg-deb from a built
# binary and the files in packaging/:
#
#   scripts/deb.sh build [BINARY]   target/debian/backlog_VERSION_ARCH.deb from BINARY (xz;
#                                   DEB_COMPRESS=gzip for dpkg-deb -Zgzip)
#                                   (default: target/release/backlog; build it first with
#                                   cargo build --release -p backlog-cli)
#   scripts/deb.sh check [BINARY]   builds the package (default binary: target/debug/backlog,
#                                   the one the tests built), installs it with dpkg -i, checks
#                                   the files, modes and owners, the systemd units
#                                   (systemd-analyze verify), runs `backlog demo` from PATH,
#                                   runs backlog-serve's command as its user and stops it with
#                                   SIGTERM, runs a worker the way backlog-work@QUEUE does, then
#                                   purges the package. Needs root.
#
# The package: /usr/bin/backlog (debug info stripped), its man page and bash/zsh/fish
# completions (made by the binary itself), units backlog-serve.service and
# backlog-work@.service, /etc/backlog/backlog.env (the services' environment, 0600 root) and,
# made at install, /etc/backlog/tokens (0600, the system user backlog's) and /var/lib/backlog.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/target/debian"
MARK=/var/lib/backlog/.installed-by-deb-check
log() { echo "deb: $*" >&2; }
die() { log "$*"; exit 1; }

version() {
    sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml"
}

# The packages that provide the shared libraries BINARY links to, as a Depends list.
depends() {
    local bin=$1 libs lib pkg deps=() glibc
    libs=$(ldd "$bin" | awk '/=> \// { print $3 }')
    for lib in $libs; do
        pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n1 | cut -d: -f1) ||
            pkg=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1) || true
        [ -n "$pkg" ] || die "no Debian package provides $lib (needed by $bin)"
        [[ " ${deps[*]} " == *" $pkg "* ]] || deps+=("$pkg")
    done
    glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
    local out=() d
    for d in "${deps[@]}"; do
        if [ "$d" = libc6 ] && [ -n "$glibc" ]; then out+=("libc6 (>= $glibc)"); else out+=("$d"); fi
    done
    (IFS=,; echo "${out[*]}" | sed 's/,/, /g')
}

build() {
    local bin=${1:-$ROOT/target/release/backlog}
    [ -x "$bin" ] || die "no binary at $bin: build it first (cargo build --release -p backlog-cli)"
    command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (Debian's dpkg package)"
    local ver arch stage deb
    ver=$(version) arch=$(dpkg --print-architecture)
    [ -n "$ver" ] || die "no version in $ROOT/Cargo.toml"
    stage=$(mktemp -d)
    chmod 0755 "$stage"
    install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/share/man/man1" \
        "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
        "$stage/usr/share/fish/vendor_completions.d" "$stage/lib/systemd/system" \
        "$stage/etc/backlog" "$stage/usr/share/doc/backlog"
    install -m 0755 "$bin" "$stage/usr/bin/backlog"
    strip --strip-debug "$stage/usr/bin/backlog"
    "$bin" man | gzip -9n >"$stage/usr/share/man/man1/backlog.1.gz"
    "$bin" completions bash >"$stage/usr/share/bash-completion/completions/backlog"
    "$bin" completions zsh >"$stage/usr/share/zsh/vendor-completions/_backlog"
    "$bin" completions fish >"$stage/usr/share/fish/vendor_completions.d/backlog.fish"
    install -m 0644 "$ROOT"/packaging/systemd/*.service "$stage/lib/systemd/system/"
    install -m 0600 "$ROOT/packaging/etc/backlog.env" "$stage/etc/backlog/"
    install -m 0644 "$ROOT/packaging/etc/work@QUEUE.env.example" "$stage/etc/backlog/"
    install -m 0644 "$ROOT/README.md" "$stage/usr/share/doc/backlog/README.md"
    gzip -9n -c "$ROOT/CHANGELOG.md" >"$stage/usr/share/doc/backlog/changelog.gz"
    install -m 0644 "$ROOT/packaging/debian/conffiles" "$stage/DEBIAN/"
    install -m 0755 "$ROOT"/packaging/debian/{postinst,prerm,postrm} "$stage/DEBIAN/"
    sed -e "s/@VERSION@/$ver/" -e "s/@ARCH@/$arch/" \
        -e "s/@SIZE@/$(du -sk --exclude=DEBIAN "$stage" | cut -f1)/" \
        -e "s/@DEPENDS@/$(depends "$stage/usr/bin/backlog")/" \
        "$ROOT/packaging/debian/control.in" >"$stage/DEBIAN/control"
    mkdir -p "$OUT"
    deb="$OUT/backlog_${ver}_${arch}.deb"
    dpkg-deb --root-owner-group "-Z${DEB_COMPRESS:-xz}" --build "$stage" "$deb" >/dev/null
    rm -rf "$stage"
    log "built $deb ($(du -h "$deb" | cut -f1))"
    echo "$deb"
}

# Fails the check with what was expected.
expect() { # DESCRIPTION COMMAND...
    local what=$1; shift
    "$@" || die "check failed: $what"
}

mode_owner() { stat -c '%a %U:%G' "$1"; }

check() {
    [ "$(id -u)" = 0 ] || die "check needs root (dpkg -i)"
    local bin=${1:-$ROOT/target/debug/backlog} deb port pid status
    # gzip: the check's package is made from the tests' unoptimized binary, which xz is slow on.
    deb=$(DEB_COMPRESS=gzip build "$bin")
    # A package an interrupted check left goes first; one installed for use stays untouched.
    if dpkg -s backlog >/dev/null 2>&1; then
        [ -e "$MARK" ] || die "the backlog package is installed on this machine (not by a check):" \
            "the check would replace it and purge /etc/backlog; remove it first (dpkg -r backlog)"
        dpkg -P backlog >/dev/null
    fi
    dpkg -i "$deb" >/dev/null
    touch "$MARK"
    tmp=$(mktemp -d) # global: the EXIT trap reads it
    trap 'rm -rf "$tmp"; dpkg -P backlog >/dev/null 2>&1 || true' EXIT
    expect "backlog on PATH is the package's" [ "$(command -v backlog)" = /usr/bin/backlog ]
    expect "the man page is installed" man -w backlog >/dev/null
    for f in /usr/share/bash-completion/completions/backlog /usr/share/zsh/vendor-completions/_backlog \
        /usr/share/fish/vendor_completions.d/backlog.fish; do
        expect "$f is installed" [ -s "$f" ]
    done
    expect "system user backlog" getent passwd backlog >/dev/null
    expect "/etc/backlog/backlog.env is 0600 root's" [ "$(mode_owner /etc/backlog/backlog.env)" = "600 root:root" ]
    expect "/etc/backlog/tokens is 0600 backlog's" [ "$(mode_owner /etc/backlog/tokens)" = "600 backlog:backlog" ]
    expect "/var/lib/backlog is backlog's" [ "$(mode_owner /var/lib/backlog)" = "750 backlog:backlog" ]
    # The units as systemd reads them (the template through an instance).
    systemd-analyze verify --man=no /lib/systemd/system/backlog-serve.service \
        /lib/systemd/system/backlog-work@.service 2>"$tmp/verify" ||
        { cat "$tmp/verify" >&2; die "check failed: systemd-analyze verify"; }
    if grep -q backlog "$tmp/verify"; then
        cat "$tmp/verify" >&2
        die "check failed: systemd-analyze verify warns about the units"
    fi
    log "installed; files, modes and units are as they should be"

    # The README's first command, from PATH, on the embedded default.
    (cd "$tmp" && backlog demo --jobs 20 >"$tmp/demo.out" 2>&1) ||
        { cat "$tmp/demo.out" >&2; die "check failed: backlog demo from PATH"; }
    expect "the demo completed jobs" grep -q "completed" "$tmp/demo.out"
    log "backlog demo ran from PATH"

    # backlog-serve.service's command as its user, with its environment file, then SIGTERM.
    set -a
    # shellcheck source=/dev/null
    . /etc/backlog/backlog.env
    set +a
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd /var/lib/backlog && exec setpriv --reuid=backlog --regid=backlog --init-groups env BACKLOG_DATABASE_URL="$BACKLOG_DATABASE_URL" \
        /usr/bin/backlog serve --listen "127.0.0.1:$port" --tokens /etc/backlog/tokens) 2>"$tmp/serve.err" &
    pid=$!
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        kill -0 $pid 2>/dev/null || { cat "$tmp/serve.err" >&2; die "check failed: backlog serve as user backlog exited"; }
        sleep 0.1
    done
    expect "backlog serve as user backlog answers /readyz" curl -fsS "http://127.0.0.1:$port/readyz" -o /dev/null
    kill -TERM $pid
    status=0
    wait $pid || status=$?
    [ $status = 0 ] || { cat "$tmp/serve.err" >&2; die "check failed: backlog serve exited $status on SIGTERM"; }
    expect "the embedded database is in /var/lib/backlog, backlog's" \
        [ "$(stat -c %U /var/lib/backlog/backlog.db)" = backlog ]
    log "backlog serve ran as user backlog and stopped on SIGTERM with status 0"

    # backlog-work@QUEUE's command line: a queue's jobs through a command, as user backlog.
    (cd /var/lib/backlog && setpriv --reuid=backlog --regid=backlog --init-groups env \
        BACKLOG_DATABASE_URL="$BACKLOG_DATABASE_URL" backlog enqueue deb-check '{"n": 1}' >/dev/null)
    (cd /var/lib/backlog && setpriv --reuid=backlog --regid=backlog --init-groups env BACKLOG_DATABASE_URL="$BACKLOG_DATABASE_URL" \
        /usr/bin/backlog work deb-check --concurrency=4 --drain -- /bin/cat >"$tmp/work.out" 2>&1) ||
        { cat "$tmp/work.out" >&2; die "check failed: backlog work as user backlog"; }
    expect "the worker ran the job's command" grep -q '"n"' "$tmp/work.out"
    log "backlog work ran a job as user backlog"

    dpkg -P backlog >/dev/null
    expect "purge removes the binary" [ ! -e /usr/bin/backlog ]
    expect "purge removes /etc/backlog" [ ! -e /etc/backlog ]
    expect "purge removes /var/lib/backlog" [ ! -e /var/lib/backlog ]
    log "purged; package check passed"
}

case "${1:-}" in
    build) shift; build "$@" >/dev/null ;;
    check) shift; check "$@" ;;
    *) echo "usage: $0 build [BINARY] | check [BINARY]" >&2; exit 2 ;;
esac
