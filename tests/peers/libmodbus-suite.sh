#!/bin/sh
# tests/peers/libmodbus-suite.sh -- libmodbus v3.1.6's own unit tests through rtugw:
# its unit-test-server in RTU mode on one end of a socat pty pair, rtugw's
# [bus] on the other, and its unit-test-client in TCP mode against rtugw's
# Modbus/TCP front (units 255 and 18, the client's, routed to the server's
# slave 17; unit 0 is a broadcast, see UNIT0). Two clients: the stock one (stops at
# its first failed check) and one built to go on after a failure, which
# prints its count (108 checks in 3.1.6; 113 with Debian's CVE-2024-10918
# patches, 3.1.6-2.1+deb12u1).
#
# The source comes from Debian's libmodbus source package (apt-get source:
# it needs a deb-src line in /etc/apt/sources.list.d and apt-get update), or
# from LIBMODBUS_SRC (an unpacked libmodbus-3.1.6). The clients are built
# against the system's libmodbus (libmodbus-dev, 3.1.6). No source: it fails
# loudly (exit 2), it never skips.
#
#   tests/peers/libmodbus-suite.sh [RESPONSE_TIMEOUT_MS]    (default 540; RTUGW_BIN, default ./rtugw)
#   RTUGW_BUS_KEYS='copies = none' tests/peers/libmodbus-suite.sh    (more [bus] keys, one a line)
#   RTUGW_UNIT0=line:17 ...    (unit 0 routed to the server, not a broadcast)
#   RTUGW_LOG_LEVEL=debug RTUGW_KEEP=1 ...    (every frame in the kept $WORK/rtugw.log)
# A long run (two clients, each with its own timeouts: about a minute), not
# part of make check.
set -eu
RTUGW=${RTUGW_BIN:-./rtugw}
TIMEOUT_MS=${1:-540}
BUS_KEYS=${RTUGW_BUS_KEYS:-}
# The client's TCP mode asks unit 0 as the server itself ("Reply after a
# query with unit id == 0", as a Modbus/TCP device answers it). rtugw's
# default makes unit 0 a broadcast, and a broadcast read is refused (0x01):
# that check fails by design. RTUGW_UNIT0=line:17 routes it to the server.
UNIT0=${RTUGW_UNIT0:+"unit0 = $RTUGW_UNIT0"}
WORK=$(mktemp -d /tmp/rtugw-libmodbus-XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${RTUGW_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

SRC=${LIBMODBUS_SRC:-}
if [ -z "$SRC" ]; then
    if ! (cd "$WORK" && apt-get source --download-only libmodbus >"$WORK/apt.log" 2>&1) ||
       ! ls "$WORK"/libmodbus_3.1.6.orig.tar.gz >/dev/null 2>&1; then
        echo "FATAL: could not get libmodbus 3.1.6's source with apt-get source (a deb-src line in" \
             "/etc/apt/sources.list.d and apt-get update are needed; or set LIBMODBUS_SRC):" >&2
        cat "$WORK/apt.log" >&2
        exit 2
    fi
    tar xzf "$WORK"/libmodbus_3.1.6.orig.tar.gz -C "$WORK"
    SRC=$WORK/libmodbus-3.1.6
    # Debian's patches, as in the system's library the clients link (its float
    # byte order among them: the tests' constants must match it)
    tar xJf "$WORK"/libmodbus_3.1.6-*.debian.tar.xz -C "$SRC"
    while read -r patch; do
        case $patch in ''|'#'*) continue ;; esac    # blank lines and comments (deb12u1 has one)
        patch -s -d "$SRC" -p1 <"$SRC/debian/patches/$patch" ||
            { echo "FATAL: Debian's patch $patch does not apply" >&2; exit 2; }
    done <"$SRC/debian/patches/series"
fi
T=$SRC/tests
for f in unit-test-client.c unit-test-server.c unit-test.h.in; do
    [ -f "$T/$f" ] || { echo "FATAL: $T/$f missing" >&2; exit 2; }
done
if [ "$(pkg-config --modversion libmodbus)" != 3.1.6 ]; then
    echo "FATAL: the system's libmodbus is $(pkg-config --modversion libmodbus), not 3.1.6" >&2
    exit 2
fi

PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e 's/@HAVE_INTTYPES_H@/1/' -e 's/@HAVE_STDINT_H@/1/' "$T/unit-test.h.in" >"$WORK/unit-test.h"
sed -e "s|\"/dev/ttyUSB0\"|\"$WORK/server-pty\"|" "$T/unit-test-server.c" >"$WORK/server.c"
sed -e "s|modbus_new_tcp(\"127.0.0.1\", 1502)|modbus_new_tcp(\"127.0.0.1\", $PORT)|" "$T/unit-test-client.c" >"$WORK/client.c"
# the client that goes on: its ASSERT_TRUE counts a failure instead of leaving
grep -q '        goto close;                               \\' "$WORK/client.c" ||
    { echo "FATAL: unit-test-client.c's ASSERT_TRUE is not the one expected (3.1.6)" >&2; exit 2; }
sed -e 's|^        goto close;                               \\|        ;                                         \\|' \
    "$WORK/client.c" >"$WORK/client-on.c"
for p in server client client-on; do
    cc -O1 -w -I"$WORK" $(pkg-config --cflags libmodbus) -o "$WORK/$p" "$WORK/$p.c" $(pkg-config --libs libmodbus) ||
        { echo "FATAL: could not build $p" >&2; exit 2; }
done

socat "pty,raw,echo=0,link=$WORK/server-pty" "pty,raw,echo=0,link=$WORK/gw-pty" 2>"$WORK/socat.log" &
PIDS="$PIDS $!"
i=0
while [ ! -e "$WORK/gw-pty" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
(cd "$WORK" && exec ./server rtu) >"$WORK/server.log" 2>&1 &
PIDS="$PIDS $!"
cat >"$WORK/rtugw.conf" <<EOF
[gateway]
log_level = ${RTUGW_LOG_LEVEL:-warn}
[bus line]
port = $WORK/gw-pty
baud = 115200
parity = none
response_timeout_ms = $TIMEOUT_MS
$BUS_KEYS
[tcp]
port = $PORT
default_bus = line
unit255 = line:17
unit18 = line:17
$UNIT0
EOF
"$RTUGW" run -c "$WORK/rtugw.conf" >"$WORK/rtugw.log" 2>&1 &
PIDS="$PIDS $!"
i=0
while ! /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
    [ $i -lt 100 ] || { echo "FATAL: rtugw did not listen on $PORT" >&2; cat "$WORK/rtugw.log" >&2; exit 2; }
done
sleep 0.3

"$WORK/client" tcp >"$WORK/stock.log" 2>&1 || true
"$WORK/client-on" tcp >"$WORK/on.log" 2>&1 || true
stock=$(grep -c '^OK$\|OK$' "$WORK/stock.log" || true)
on_ok=$(grep -c 'OK$' "$WORK/on.log" || true)
on_failed=$(grep -c 'assertion error' "$WORK/on.log" || true)
echo "libmodbus 3.1.6 unit tests through $RTUGW at response_timeout_ms = $TIMEOUT_MS:"
echo "  stock client: $stock checks passed before its first failure"
echo "  client that goes on: $on_ok of $((on_ok + on_failed)) checks passed"
grep 'assertion error' "$WORK/on.log" | sed 's/^/    /' || true
