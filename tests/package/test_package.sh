#!/bin/sh
# tests/package/test_package.sh -- the Debian package, installed and run in a
# booted Debian 12 (make check-package; not part of make check: it needs root,
# the Debian archive, systemd-nspawn, and several minutes).
#
#  1. builds the source and binary packages from a copy of this tree
#     (dpkg-buildpackage -us -uc) and runs lintian on them: no error, no warning;
#  2. makes a Debian 12 root with mmdebstrap (cached under $RTUGW_PKGTEST_CACHE
#     for a day) and boots it with systemd-nspawn, on a private network (the
#     gateway's ports cannot meet the host's);
#  3. inside: apt install ./rtugw_*.deb (dependencies from the archive, fetched
#     before the boot), then the service: active as the user rtugw; a Modbus
#     read through it; the configuration API's writes (a device from a
#     template, a template's CSV) under the unit's sandbox; a reload of a
#     broken file fails and the daemon keeps serving; stop exits 0; the
#     optional modules install; an upgrade to a package with a higher version
#     keeps the changed conffile and restarts the daemon once; apt remove
#     keeps the configuration; apt purge leaves no file, user or group behind.
# Prints each check as PASS/FAIL, and the time taken; exit 1 on any failure,
# 77 (skip) when not root.
#
# Environment: RTUGW_PKGTEST_DIR (work folder, default a new one under
# /var/tmp, removed at the end unless RTUGW_PKGTEST_KEEP=1),
# RTUGW_PKGTEST_CACHE (default /var/tmp/rtugw-pkgtest-cache).
set -u

t0=$(date +%s)
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
step() { echo "== [$(($(date +%s) - t0)) s] $*"; }
die() { fail "$*"; finish; }

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (mmdebstrap, systemd-nspawn, nsenter)"
    exit 77
fi

work=${RTUGW_PKGTEST_DIR:-$(mktemp -d /var/tmp/rtugw-pkgtest.XXXXXX)}
cache=${RTUGW_PKGTEST_CACHE:-/var/tmp/rtugw-pkgtest-cache}
mkdir -p "$work" "$cache"
rootfs=$work/rootfs
nspawn_pid=""

finish() {
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        # SIGRTMIN+4 to the container's systemd: poweroff.
        [ -n "${init_pid:-}" ] && kill -s RTMIN+4 "$init_pid" 2>/dev/null
        i=0
        while kill -0 "$nspawn_pid" 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
        kill "$nspawn_pid" 2>/dev/null
        wait "$nspawn_pid" 2>/dev/null
    fi
    # nspawn leaves an empty folder when the host's /run is not a tmpfs.
    [ -n "${machine:-}" ] && rmdir "/run/systemd/nspawn/propagate/$machine" 2>/dev/null
    if [ "${RTUGW_PKGTEST_KEEP:-0}" != 1 ]; then
        rm -rf "$work"
    else
        echo "kept: $work"
    fi
    echo "package test: $failures failures, $(($(date +%s) - t0)) s"
    [ "$failures" -eq 0 ] && exit 0
    exit 1
}
trap 'failures=$((failures + 1)); finish' INT TERM

# ---- tools -----------------------------------------------------------------------
step "tools"
need=""
for p in dpkg-dev debhelper lintian fakeroot mmdebstrap systemd-container git; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
    echo "installing:$need"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need ||
        die "apt-get install$need"
fi

# ---- build ---------------------------------------------------------------------------
# A copy of the tree as git sees it (tracked files and new ones not ignored),
# so the in-place configured build tree cannot leak into the package.
step "build the packages"
version=$(dpkg-parsechangelog -l "$srcdir/debian/changelog" -S Version) || die "debian/changelog"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
if [ -n "${RTUGW_PKGTEST_DEBS:-}" ]; then
    # Packages built before (a folder with rtugw_$version_$arch.deb and the
    # module packages): no build, no lintian; for working on this script.
    mkdir -p "$work/build"
    cp "$RTUGW_PKGTEST_DEBS"/*_"$version"_"$arch".deb "$work/build/" || die "no packages in $RTUGW_PKGTEST_DEBS"
    echo "note: packages from $RTUGW_PKGTEST_DEBS, not built here"
else
    copy=$work/build/rtugw-$version
    mkdir -p "$copy"
    if git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$srcdir" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - --no-recursion) |
            tar xf - -C "$copy" || die "copy of the tree"
    else
        cp -a "$srcdir/." "$copy/" || die "copy of the tree"   # an unpacked release: already clean
    fi
    if ! (cd "$copy" && dpkg-checkbuilddeps) >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$copy" >/dev/null || die "apt-get build-dep"
    fi
    if (cd "$copy" && dpkg-buildpackage -us -uc) >"$work/build.log" 2>&1; then
        pass "dpkg-buildpackage -us -uc ($version)"
    else
        tail -40 "$work/build.log"
        die "dpkg-buildpackage -us -uc: see above"
    fi
    changes=$work/build/rtugw_${version}_$arch.changes
    # --fail-on error,warning: exit non-zero on either; the overrides in debian/
    # say why each is there.
    if lintian --fail-on error,warning --display-info "$changes" >"$work/lintian.log" 2>&1; then
        pass "lintian: no error, no warning ($(grep -c '^[EWIP]:' "$work/lintian.log") info/pedantic)"
    else
        cat "$work/lintian.log"
        fail "lintian"
    fi
    cat "$work/lintian.log"
fi

# The upgrade: the same package with a higher version (its files and scripts
# as built; only the version differs, as after a rebuild with a new changelog
# entry). Its rtugw.conf is the same as the installed one's original, the
# usual case: dpkg keeps the administrator's changed file without a question.
newver=$version+pkgtest1
mkdir -p "$work/v2"
dpkg-deb -R "$work/build/rtugw_${version}_$arch.deb" "$work/v2/rtugw" &&
    sed -i "s/^Version: .*/Version: $newver/" "$work/v2/rtugw/DEBIAN/control" &&
    dpkg-deb -b --root-owner-group "$work/v2/rtugw" "$work/build/rtugw_${newver}_$arch.deb" >/dev/null ||
    die "repack as $newver"

# ---- a Debian 12 root, booted ------------------------------------------------------
step "Debian 12 root (mmdebstrap)"
include=systemd,systemd-sysv,dbus,python3,mbpoll,curl
tarball=$cache/bookworm-$(echo "$include" | tr ',' '-').tar
if [ -z "$(find "$tarball" -mmin -1440 2>/dev/null)" ]; then
    # (--format: the .tmp name alone makes mmdebstrap write a directory,
    # which a fresh machine then failed to unpack as the tarball)
    mmdebstrap --variant=apt --format=tar --include=$include bookworm "$tarball.tmp" >"$work/mmdebstrap.log" 2>&1 ||
        { tail -20 "$work/mmdebstrap.log"; die "mmdebstrap"; }
    mv "$tarball.tmp" "$tarball"
fi
mkdir -p "$rootfs"
tar xf "$tarball" -C "$rootfs" || die "unpack $tarball"
mkdir -p "$rootfs/root/t"
cp "$work"/build/*.deb "$rootfs/root/t/"
cp "$srcdir/tests/package/probe.py" "$rootfs/root/t/probe.py"
echo rtugw-pkgtest >"$rootfs/etc/hostname"
# The container has no network of its own (--private-network): fetch the
# dependencies now, into its apt cache, with the host's network.
# --keep-unit and --register=no: no systemd on the host is needed (none runs
# there on a build machine or in CI), so no scope unit or machine registration.
machine=rtugw-pkgtest-$$
if ! systemd-nspawn -q --register=no --keep-unit -M "$machine" -D "$rootfs" --pipe sh -c \
    'apt-get update -qq && apt-get install -y -qq --download-only /root/t/rtugw_'"$version"'_*.deb /root/t/rtugw-tls_*.deb /root/t/rtugw-mqtt_*.deb /root/t/rtugw-bench_*.deb' \
    >"$work/download.log" 2>&1; then
    tail -20 "$work/download.log"
    die "fetching the dependencies"
fi

step "boot"
systemd-nspawn -q --register=no --keep-unit -M "$machine" --private-network -D "$rootfs" -b \
    >"$work/console.log" 2>&1 </dev/null &
nspawn_pid=$!
init_pid=""
i=0
while [ -z "$init_pid" ] && [ $i -lt 60 ]; do
    sleep 1
    i=$((i + 1))
    # The container's init is systemd-nspawn's child (its outer child exits).
    init_pid=$(pgrep -P "$nspawn_pid" -x systemd)
    kill -0 "$nspawn_pid" 2>/dev/null || { cat "$work/console.log"; die "systemd-nspawn exited"; }
done
[ -n "$init_pid" ] || die "the container's systemd did not appear"
# inside: run a shell command inside the booted container.
inside() {
    nsenter -t "$init_pid" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive sh -c "$1"
}
state=$(inside 'systemctl is-system-running --wait' 2>&1)
case $state in
running) pass "booted: $state (init pid $init_pid)" ;;
*) fail "booted: $state"; inside 'systemctl --failed --no-legend' ;;
esac

# Every file of the root, except what changes by itself (logs, caches, apt's
# and dpkg's own records, runtime state), before install and after purge.
snapshot() {
    inside 'find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
        -o -path /var/tmp -o -path /var/log -o -path /var/cache -o -path /var/lib/apt \
        -o -path /var/lib/dpkg -o -path /var/lib/systemd -o -path /root/t \) -prune -o -print' |
        grep -v -e '^/etc/\(passwd\|group\|shadow\|gshadow\|subuid\|subgid\)-$' | sort
}
snapshot >"$work/before.txt"
inside 'cp /etc/passwd /etc/group /root/t/'

# ---- install --------------------------------------------------------------------------
step "install"
if inside 'apt-get install -y -q /root/t/rtugw_'"$version"'_*.deb' >"$work/install.log" 2>&1; then
    pass "apt install ./rtugw_${version}_$arch.deb"
else
    cat "$work/install.log"; die "apt install"
fi
inside 'ldd /usr/bin/rtugw' | grep -E -q 'libssl|libcrypto|libmosquitto|libprotobuf' &&
    fail "rtugw links TLS or MQTT libraries: $(inside 'ldd /usr/bin/rtugw')" ||
    pass "the daemon links no TLS or MQTT library"
deps=$(inside 'dpkg-query -W -f="\${Depends}" rtugw')
case $deps in
*ssl* | *mosquitto* | *protobuf*) fail "rtugw depends on a TLS or MQTT library: $deps" ;;
*) pass "rtugw's dependencies: $deps" ;;
esac
inside 'dpkg-query -W -f="\${Conffiles}\n" rtugw' | grep -q '/etc/rtugw/rtugw.conf ' &&
    pass "/etc/rtugw/rtugw.conf is a conffile" || fail "/etc/rtugw/rtugw.conf is not a conffile"
perms=$(inside 'stat -c "%a %U:%G %n" /etc/rtugw /etc/rtugw/rtugw.conf' | tr '\n' ' ')
[ "$perms" = "2775 root:rtugw /etc/rtugw 640 root:rtugw /etc/rtugw/rtugw.conf " ] &&
    pass "permissions: $perms" || fail "permissions: $perms"

# ---- the service -----------------------------------------------------------------------
step "service"
wait_active() {
    i=0
    while [ $i -lt 20 ]; do
        s=$(inside 'systemctl is-active rtugw')
        [ "$s" = active ] && return 0
        sleep 0.5; i=$((i + 1))
    done
    return 1
}
inside 'systemctl start rtugw' && wait_active && pass "systemctl start rtugw: active" ||
    { fail "systemctl start rtugw: $(inside 'systemctl status --no-pager rtugw; journalctl -u rtugw --no-pager | tail -20')"; }
# The installed units as systemd reads them: no message at all from verify
# (--man=no: this minimal root has no man; tests/package/test_install.sh checks that
# Documentation= names pages that exist), and an exposure of at most 2.0 with
# the serial devices allowed.
out=$(inside 'systemd-analyze verify --man=no rtugw.service rtugw@ttyUSB0.service' 2>&1)
[ -z "$out" ] && pass "systemd-analyze verify: clean" || fail "systemd-analyze verify: $out"
exposure=$(inside 'systemd-analyze security --no-pager rtugw.service' | sed -n 's/.*exposure level for rtugw.service: \([0-9.]*\).*/\1/p')
if [ -n "$exposure" ] && awk "BEGIN { exit !($exposure <= 2.0) }"; then
    pass "systemd-analyze security rtugw.service: exposure $exposure"
else
    fail "systemd-analyze security rtugw.service: exposure '$exposure' (at most 2.0)"
fi
user=$(inside 'stat -c %U /proc/$(systemctl show -P MainPID rtugw)')
[ "$user" = rtugw ] && pass "runs as user rtugw" || fail "runs as '$user', not rtugw"
modbus() { inside 'python3 /root/t/probe.py modbus 127.0.0.1 1502 1 0 10'; }
sleep 1
out=$(modbus) && pass "Modbus TCP read through the gateway: $out" || fail "Modbus read: $out"
out=$(inside 'mbpoll -m tcp -p 1502 -a 1 -r 1 -c 10 -1 127.0.0.1' 2>&1) &&
    pass "mbpoll reads slave 1: $(echo "$out" | grep -c '^\[') registers" || fail "mbpoll: $out"

# ---- [gateway] cpu_latency_us under the unit ------------------------------------------
# udev does not run in a container, so the node that 60-rtugw-cpu-latency.rules
# gives the group rtugw is made here as the rule leaves it (the host's 10:MINOR,
# root:rtugw 0660); the unit's device policy (DevicePolicy=closed,
# DeviceAllow=/dev/cpu_dma_latency w) must then let the service hold the request,
# read back on the host: the container's node is the host's device.
step "cpu latency request"
host_latency() { /usr/bin/python3 -c 'import struct; print(struct.unpack("i", open("/dev/cpu_dma_latency", "rb").read(4))[0])'; }
set_latency() {
    inside "sed -i '/^cpu_latency_us = /d; s/^\\[gateway\\]\$/[gateway]\\ncpu_latency_us = $1/' /etc/rtugw/rtugw.conf"
}
minor=$(sed -n 's/^MINOR=//p' /sys/devices/virtual/misc/cpu_dma_latency/uevent 2>/dev/null)
base=$(host_latency 2>/dev/null)
inside 'grep -q "KERNEL==.cpu_dma_latency.*GROUP=.rtugw., MODE=.0660." /lib/udev/rules.d/60-rtugw-cpu-latency.rules' &&
    inside 'grep -q "^DeviceAllow=/dev/cpu_dma_latency w" /lib/systemd/system/rtugw.service' &&
    pass "the udev rule and the unit's DeviceAllow are installed" || fail "the udev rule or DeviceAllow missing"
if [ -z "$minor" ] || [ -z "$base" ] || [ "$base" -le 13 ]; then
    fail "cpu latency: the host has no /dev/cpu_dma_latency to read (minor '$minor', in force '$base')"
else
    inside "mknod -m 0660 /dev/cpu_dma_latency c 10 $minor && chgrp rtugw /dev/cpu_dma_latency" &&
        set_latency 13 && inside 'systemctl restart rtugw' && wait_active && sleep 0.5
    got=$(host_latency)
    [ "$got" = 13 ] && pass "cpu_latency_us = 13 under the unit: in force (read on the host)" ||
        fail "cpu_latency_us = 13 under the unit: $got in force; $(inside 'journalctl -u rtugw --no-pager | grep -i latency | tail -3')"
    pid=$(inside 'systemctl show -P MainPID rtugw')
    set_latency off && inside 'systemctl reload rtugw' >/dev/null 2>&1
    got=$(host_latency)
    [ "$got" = "$base" ] && [ "$(inside 'systemctl show -P MainPID rtugw')" = "$pid" ] &&
        pass "systemctl reload to off: the request dropped, same process ($pid)" ||
        fail "reload to off: $got in force, not $base; pid $pid -> $(inside 'systemctl show -P MainPID rtugw')"
    inside "sed -i '/^cpu_latency_us = /d' /etc/rtugw/rtugw.conf; rm -f /dev/cpu_dma_latency"
fi

# ---- the configuration API under the unit ----------------------------------------------
# The conffile changed by hand (a write token, a template over the shipped
# example tag file), as an integrator would; then the API writes under the
# unit's sandbox, the writes this issue was about.
step "configuration API"
inside "sed -i 's/^; write_token = .*/write_token = pkgtest-token-0123456789/' /etc/rtugw/rtugw.conf &&
    printf '\n[template meter]\ntags_file = example-tags.csv\n' >>/etc/rtugw/rtugw.conf &&
    rtugw check -c /etc/rtugw/rtugw.conf && systemctl restart rtugw" &&
    wait_active && pass "conffile edited, restarted" || fail "edit and restart"
api=http://127.0.0.1:8502
tok=pkgtest-token-0123456789
out=$(inside "python3 /root/t/probe.py add-device $api $tok meter1 '{\"bus\": \"line1\", \"slave\": 3, \"template\": \"meter\"}'") &&
    pass "add a device from a template: $out" || fail "add a device: $out"
inside "grep -q '^\[device meter1\]' /etc/rtugw/rtugw.conf" && pass "rtugw.conf holds [device meter1]" ||
    fail "rtugw.conf lacks [device meter1]"
inside 'printf "name,table,address,type,scale,unit,interval_ms,description\nvoltage,holding,0,uint16,0.1,V,1000,Voltage\nenergy,holding,2,uint32,0.01,kWh,1000,Energy\n" >/root/t/meter.csv'
out=$(inside "python3 /root/t/probe.py import-csv $api $tok meter /root/t/meter.csv") &&
    pass "import a template's CSV: $out" || fail "import CSV: $out"
inside 'cmp -s /root/t/meter.csv /etc/rtugw/example-tags.csv' && pass "example-tags.csv holds the imported CSV" ||
    fail "example-tags.csv is not the imported CSV"
perms=$(inside 'stat -c "%a %U:%G" /etc/rtugw/rtugw.conf')
[ "${perms%% *}" = 640 ] && pass "rtugw.conf after the API's write: $perms" || fail "rtugw.conf after the API's write: $perms"

# ---- reload -------------------------------------------------------------------------------
step "reload"
pid=$(inside 'systemctl show -P MainPID rtugw')
inside 'cp -p /etc/rtugw/rtugw.conf /root/t/good.conf && printf "\n[device broken]\nslave = 999\n" >>/etc/rtugw/rtugw.conf'
if inside 'systemctl reload rtugw' >"$work/reload.log" 2>&1; then
    fail "systemctl reload with a broken file succeeded"
else
    pass "systemctl reload with a broken file fails: $(tr '\n' ' ' <"$work/reload.log" | cut -c1-120)"
fi
[ "$(inside 'systemctl is-active rtugw')" = active ] && [ "$(inside 'systemctl show -P MainPID rtugw')" = "$pid" ] &&
    pass "still active, same process ($pid)" || fail "the daemon did not survive the broken reload"
out=$(modbus) && pass "still serving: $out" || fail "not serving after the broken reload: $out"
inside 'journalctl -u rtugw --no-pager -n 30' | grep -q 'slave' && pass "the journal names the error" ||
    fail "the journal does not name the error"
inside 'cp -p /root/t/good.conf /etc/rtugw/rtugw.conf'
inside 'systemctl reload rtugw' && [ "$(inside 'systemctl show -P MainPID rtugw')" = "$pid" ] &&
    pass "reload of the good file: ok, same process" ||
    fail "reload of the good file: $(inside 'systemctl status --no-pager -n 15 rtugw')"
# ExecReload is `rtugw reload`: the daemon's verdict in the journal, and in STATUS=
st=$(inside 'systemctl show -P StatusText rtugw')
case "$st" in "last reload: applied"*) pass "StatusText: $st" ;; *) fail "StatusText after the reload: '$st'" ;; esac
inside 'journalctl -u rtugw --no-pager -n 40' | grep -q 'rtugw.conf: applied' &&
    pass "the journal has rtugw reload's verdict (applied)" || fail "no verdict of rtugw reload in the journal"

# ---- stop ----------------------------------------------------------------------------------
step "stop"
inside 'systemctl stop rtugw' && pass "systemctl stop: exit 0" || fail "systemctl stop"
res=$(inside 'systemctl show -P Result rtugw; systemctl show -P ExecMainStatus rtugw' | tr '\n' ' ')
[ "$res" = "success 0 " ] && pass "stopped: Result=success, status 0" || fail "stopped: $res"
inside 'systemctl start rtugw' && wait_active || fail "start again"

# ---- the optional modules ------------------------------------------------------------------
step "modules"
inside 'apt-get install -y -q /root/t/rtugw-tls_*.deb /root/t/rtugw-mqtt_*.deb /root/t/rtugw-bench_*.deb' >"$work/modules.log" 2>&1 &&
    pass "apt install rtugw-tls rtugw-mqtt rtugw-bench: $(inside 'ls /usr/lib/*/rtugw/' | tr '\n' ' ')" ||
    { cat "$work/modules.log"; fail "apt install of the modules"; }

# ---- upgrade --------------------------------------------------------------------------------
step "upgrade"
started() { inside 'journalctl -u rtugw --no-pager -o cat' | grep -c '^Started rtugw.service'; }
n0=$(started)
pid=$(inside 'systemctl show -P MainPID rtugw')
inside 'md5sum /etc/rtugw/rtugw.conf' >"$work/conf.md5"
if inside "apt-get install -y -q /root/t/rtugw_${newver}_$arch.deb" >"$work/upgrade.log" 2>&1; then
    pass "upgrade to $newver"
else
    cat "$work/upgrade.log"; fail "upgrade to $newver"
fi
[ "$(inside 'md5sum /etc/rtugw/rtugw.conf')" = "$(cat "$work/conf.md5")" ] &&
    pass "the changed conffile is kept" || fail "the conffile changed on upgrade"
wait_active
n1=$(started)
pid1=$(inside 'systemctl show -P MainPID rtugw')
[ "$pid1" != "$pid" ] && [ $((n1 - n0)) -eq 1 ] &&
    pass "restarted once on upgrade (pid $pid -> $pid1)" || fail "restarts on upgrade: $((n1 - n0)), pid $pid -> $pid1"
out=$(modbus) && pass "serving after the upgrade: $out" || fail "not serving after the upgrade: $out"

# ---- remove, purge ----------------------------------------------------------------------------
step "remove"
inside 'apt-get remove -y -q rtugw' >"$work/remove.log" 2>&1 && pass "apt remove rtugw" ||
    { cat "$work/remove.log"; fail "apt remove"; }
inside 'grep -q "^\[device meter1\]" /etc/rtugw/rtugw.conf' && pass "remove keeps /etc/rtugw/rtugw.conf (changed)" ||
    fail "remove lost the configuration"
inside 'test ! -e /usr/bin/rtugw && ! systemctl is-active -q rtugw' && pass "binary gone, service stopped" ||
    fail "remove left the binary or the service"

step "purge"
inside 'apt-get purge -y -q rtugw rtugw-tls rtugw-mqtt rtugw-bench && apt-get autoremove --purge -y -q' >"$work/purge.log" 2>&1 &&
    pass "apt purge rtugw, autoremove --purge" || { cat "$work/purge.log"; fail "apt purge"; }
snapshot >"$work/after.txt"
if diff -u "$work/before.txt" "$work/after.txt" >"$work/left.diff"; then
    pass "purge leaves no file behind ($(wc -l <"$work/after.txt") paths compared)"
else
    fail "purge left a difference: $(grep '^[-+]/' "$work/left.diff" | tr '\n' ' ')"
fi
inside 'cmp -s /etc/passwd /root/t/passwd && cmp -s /etc/group /root/t/group' &&
    pass "passwd and group as before install (user and group rtugw gone)" ||
    fail "passwd/group differ: $(inside 'diff /root/t/passwd /etc/passwd; diff /root/t/group /etc/group' | tr '\n' ' ')"
inside 'dpkg-statoverride --list | grep rtugw' && fail "statoverrides left" || pass "no statoverride left"

finish
