#!/bin/sh
# make install into a staging DESTDIR, then check what landed where:
#  - the binary, the benchmarks' program rtugw-bench (pkglibexecdir, not on
#    PATH: `rtugw bench` runs it, and names the path when it is missing),
#    both man pages, the example config (never rtugw.conf itself)
#    both systemd units, the sysusers.d file for their user and the udev
#    rule for USB RS-485 adapters, at the paths ./configure chose;
#  - the man pages render without a single groff warning, describe every
#    command `rtugw --help` lists, every option of run, demo, decode, check
#    and bench parse, and every section and key of config/example.ini;
#  - the installed example config passes `rtugw check`;
#  - the units carry the required settings (structural check, always) and
#    pass `systemd-analyze verify` with no message at all;
#  - make uninstall removes every file again.
# Environment (set by man/local.mk): RTUGW_BUILDDIR, RTUGW_MAKE, RTUGW_SRCDIR,
# RTUGW_INST_{BINDIR,PKGLIBEXECDIR,MANDIR,CONFDIR,UNITDIR,SYSUSERSDIR,UDEVRULESDIR}.
set -u

builddir=${RTUGW_BUILDDIR:?run me from make check}
srcdir=${RTUGW_SRCDIR:?run me from make check}
bindir=${RTUGW_INST_BINDIR:?} libexecdir=${RTUGW_INST_PKGLIBEXECDIR:?} mandir=${RTUGW_INST_MANDIR:?}
confdir=${RTUGW_INST_CONFDIR:?} unitdir=${RTUGW_INST_UNITDIR:?}
sysusersdir=${RTUGW_INST_SYSUSERSDIR:?} udevrulesdir=${RTUGW_INST_UDEVRULESDIR:?}
make=${RTUGW_MAKE:-make}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtugw-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
dest=$tmp/root

# The man pages and units must be checkable: a missing tool is a failure that
# names its Debian package, never a silent skip.
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "FAIL: $1 not found: install the Debian package $2 (apt-get install $2)"
    exit 1
}
need groff groff-base
need man man-db

# ---- install ---------------------------------------------------------------
# MAKEFLAGS comes along (command-line overrides such as systemdsystemunitdir=
# must agree with the paths above); a jobserver warning, if any, goes to the log.
if ! $make -C "$builddir" install DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    echo "FAIL: make install DESTDIR=$dest"
    exit 1
fi

bin=$dest$bindir/rtugw
benchbin=$dest$libexecdir/rtugw-bench
page8=$dest$mandir/man8/rtugw.8
page5=$dest$mandir/man5/rtugw.conf.5
example=$dest$confdir/rtugw.conf.example
unit=$dest$unitdir/rtugw.service
tunit=$dest$unitdir/rtugw@.service
sysusers=$dest$sysusersdir/rtugw.conf
udevrule=$dest$udevrulesdir/60-rtugw-serial.rules
latencyrule=$dest$udevrulesdir/60-rtugw-cpu-latency.rules

[ -x "$bin" ] || fail "binary not installed at $bindir/rtugw"
[ -x "$benchbin" ] || fail "rtugw-bench not installed at $libexecdir/rtugw-bench"
for f in "$page8" "$page5" "$example" "$unit" "$tunit" "$sysusers" "$udevrule" "$latencyrule"; do
    [ -f "$f" ] || fail "not installed: ${f#"$dest"}"
done
[ -e "$dest$confdir/rtugw.conf" ] && fail "make install must not create $confdir/rtugw.conf"
if [ "$failures" -ne 0 ]; then
    echo "installed:"; find "$dest" -type f | sed "s|^$dest||" | sort
    exit 1
fi

"$bin" --version >/dev/null || fail "installed binary does not run"
"$benchbin" parse --help >/dev/null || fail "installed rtugw-bench does not run"
# The daemon carries no benchmark: staged under DESTDIR, rtugw finds no
# rtugw-bench beside it nor at the configured path, and says where it looked
# (exit 1). A copy really installed there would answer instead.
"$bin" bench parse --help >"$tmp/bench.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    [ $rc -eq 1 ] && grep -q "$libexecdir/rtugw-bench" "$tmp/bench.out" ||
        fail "rtugw bench without rtugw-bench: exit $rc, not 1 naming $libexecdir/rtugw-bench: $(cat "$tmp/bench.out")"
fi

# ---- example config ----------------------------------------------------------
"$bin" check -c "$example" >"$tmp/check.out" 2>&1 ||
    fail "installed example config does not pass rtugw check: $(cat "$tmp/check.out")"
grep -q "cp $confdir/rtugw.conf.example $confdir/rtugw.conf" "$example" ||
    fail "example config lacks the note to copy it to rtugw.conf"

# ---- man pages ------------------------------------------------------------------
for p in "$page8" "$page5"; do
    name=${p##*/}
    # -ww: every groff warning; -z: no output, only diagnostics.
    w=$(groff -man -Tutf8 -ww -z "$p" 2>&1)
    [ -z "$w" ] || fail "$name: groff warnings: $w"
    # As a user sees it, through man-db (-l: a file, not a page name).
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l "$p" 2>"$tmp/man.err")
    [ -s "$tmp/man.err" ] && fail "$name: man -l: $(cat "$tmp/man.err")"
    for s in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
        printf '%s\n' "$out" | grep -q "^$s" || fail "$name: no $s section"
    done
done
for s in COMMANDS SIGNALS ENVIRONMENT "EXIT STATUS" FILES "MODBUS EXCEPTIONS" HTTP; do
    grep -q "^\.SH \"*$s" "$page8" || fail "rtugw.8: no $s section"
done

# Every command `rtugw --help` lists has an entry in COMMANDS (".B demo",
# ".BI \"run \-c \" FILE", ...).
cmds=$("$bin" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ -n "$cmds" ] || fail "cannot read the command list from rtugw --help"
for c in run demo $cmds; do
    grep -Eq "^\.(B|BI|BR) \"?$c( |\"|\$)" "$page8" || fail "rtugw.8 does not describe the command '$c'"
done
# Every long option of these commands' --help appears in rtugw.8 (a command
# not built yet is described from the design brief, and skipped here; sim and
# replay have more options than the page lists, and point to their --help).
for c in "run" "demo" "decode" "check" "bench parse"; do
    # shellcheck disable=SC2086
    case $c in
    "bench parse") "$benchbin" parse --help >"$tmp/help" 2>/dev/null || continue ;;
    *) "$bin" $c --help >"$tmp/help" 2>/dev/null || continue ;;
    esac
    opts=$(grep -o -- '--[a-z][a-z-]*' "$tmp/help" | sort -u)
    for o in $opts; do
        esc=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
        grep -q -- "$esc" "$page8" || fail "rtugw.8 does not describe 'rtugw $c $o'"
    done
done
for v in RTUGW_WORKERS RTUGW_NATIVE_DISABLE SIGTERM SIGINT SIGHUP /metrics /status \
    0x01 0x06 0x0A 0x0B /etc/rtugw/rtugw.conf; do
    grep -q -- "$v" "$page8" || fail "rtugw.8 does not mention $v"
done

# Every section and key of config/example.ini is documented in rtugw.conf.5,
# as a ".B? \"key = \"" tag line.
sections=$(sed -n 's/^\[\([a-z]*\).*/\1/p' "$srcdir/config/example.ini" | sort -u)
for s in $sections; do
    grep -q "^\.SS \[$s" "$page5" || fail "rtugw.conf.5 has no section [$s]"
done
keys=$(sed -n 's/^\([a-z0-9_]*\) *=.*/\1/p' "$srcdir/config/example.ini" | sort -u)
[ -n "$keys" ] || fail "cannot read keys from config/example.ini"
for k in $keys; do
    grep -Eq "^\.(B|BI|BR) \"?$k = " "$page5" || fail "rtugw.conf.5 does not describe the key '$k'"
done

# ---- systemd units ------------------------------------------------------------------
# Structural checks, always: the paths are the configured ones, the settings the
# service depends on are there, nothing was left unsubstituted.
has() { grep -qx -- "$2" "$1" || fail "${1##*/}: missing line '$2'"; }
for u in "$unit" "$tunit"; do
    grep -n '@[a-z_]*@' "$u" && fail "${u##*/}: unsubstituted @variable@"
    # The daemon speaks sd_notify itself (gateway/notify.c), READY=1 and WATCHDOG=1.
    has "$u" "Type=notify"
    has "$u" "WatchdogSec=10s"
    has "$u" "Restart=on-failure"
    has "$u" "RestartPreventExitStatus=2"
    # A static user (sysusers.d), not DynamicUser=: files the config API
    # writes into $confdir keep one owner from start to start.
    has "$u" "User=rtugw"
    has "$u" "Group=rtugw"
    grep -q '^DynamicUser=yes' "$u" && fail "${u##*/}: DynamicUser=yes (the config API's files need a stable owner)"
    # The config API writes beside the config (docs/api.md): without this,
    # ProtectSystem=strict makes every write a 500 (read-only file system).
    has "$u" "ReadWritePaths=$confdir"
    has "$u" "SupplementaryGroups=dialout"
    has "$u" "NoNewPrivileges=yes"
    has "$u" "ProtectSystem=strict"
    has "$u" "ProtectHome=yes"
    has "$u" "PrivateTmp=yes"
    has "$u" "DevicePolicy=closed"
    has "$u" "DeviceAllow=char-ttyS rw"
    has "$u" "DeviceAllow=char-ttyUSB rw"
    has "$u" "WantedBy=multi-user.target"
    # PrivateDevices=yes would hide the serial ports themselves.
    grep -q '^PrivateDevices=yes' "$u" && fail "${u##*/}: PrivateDevices=yes hides the serial ports"
done
for c in "$unit rtugw.conf" "$tunit %i.conf"; do
    u=${c% *} f=$confdir/${c#* }
    has "$u" "ExecStart=$bindir/rtugw run -c $f"
    # A broken file stops a start before the daemon runs; a reload is
    # `rtugw reload`, which checks the file before it signals the daemon (it
    # keeps serving the old one) and fails when the daemon refuses it.
    has "$u" "ExecStartPre=$bindir/rtugw check -c $f"
    has "$u" "ExecReload=$bindir/rtugw reload -c $f --pid \$MAINPID"
    [ "$(grep -c '^ExecReload=' "$u")" = 1 ] || fail "${u##*/}: one ExecReload= (rtugw reload), not $(grep -c '^ExecReload=' "$u")"
done
# The template's settings are the plain unit's, except the marked lines.
settings() { grep -v -e '^#' -e '^$' -e '^ExecStart=' -e '^Exec[A-Za-z]*=.*rtugw \(check\|reload\) -c ' \
    -e '^SyslogIdentifier=' -e '^Description=' "$1"; }
settings "$unit" >"$tmp/u1"
settings "$tunit" >"$tmp/u2"
cmp -s "$tmp/u1" "$tmp/u2" || fail "rtugw.service and rtugw@.service differ: $(diff "$tmp/u1" "$tmp/u2")"

# systemd-analyze verify, where systemd is installed (Debian: package systemd;
# a build container may lack it, and then the structural checks above are all
# there is). It checks every key and value, the [Install] section, that
# Documentation= names man pages that exist (MANPATH: the staged ones), and that
# ExecStart= (and ExecStartPre=, ExecReload=) are executable: for that the
# copies point at the staged binary, since the configured path is only valid
# once installed for real.
if command -v systemd-analyze >/dev/null 2>&1; then
    mkdir "$tmp/verify"
    for u in "$unit" "$tunit"; do
        sed "s|^\(Exec[A-Za-z]*=\)$bindir/rtugw |\1$bin |" "$u" >"$tmp/verify/${u##*/}"
    done
    for u in rtugw.service rtugw@ttyUSB0.service; do
        out=$(cd "$tmp/verify" && MANPATH=$dest$mandir SYSTEMD_LOG_COLOR=0 \
            systemd-analyze verify "$tmp/verify/$u" 2>&1)
        rc=$?
        if [ $rc -ne 0 ] || [ -n "$out" ]; then
            fail "systemd-analyze verify $u (exit $rc): $out"
        fi
    done
else
    echo "note: systemd-analyze not installed (package systemd): structural unit checks only"
fi

# ---- the service user and the udev rule -----------------------------------------------
grep -Eq '^u rtugw ' "$sysusers" || fail "${sysusers##*/}: no line 'u rtugw ...'"
# the adapters docs/install.md names: FTDI, CH340, CP210x, PL2303
for id in 0403:6001 0403:6015 1a86:7523 10c4:ea60 067b:2303; do
    grep -q "ATTRS{idVendor}==\"${id%:*}\", ATTRS{idProduct}==\"${id#*:}\", ENV{ID_MM_DEVICE_IGNORE}=\"1\"" "$udevrule" ||
        fail "${udevrule##*/}: no ID_MM_DEVICE_IGNORE rule for $id"
done
# udevadm verify came with systemd 254; older ones have only the rule's own
# syntax to offer here, which the grep above covers.
if command -v udevadm >/dev/null 2>&1 && udevadm verify --help >/dev/null 2>&1; then
    out=$(udevadm verify "$udevrule" 2>&1) || fail "udevadm verify ${udevrule##*/}: $out"
fi

# ---- uninstall is symmetric -----------------------------------------------------------
if ! $make -C "$builddir" uninstall DESTDIR="$dest" >"$tmp/uninstall.log" 2>&1; then
    cat "$tmp/uninstall.log"
    fail "make uninstall DESTDIR=$dest"
fi
left=$(find "$dest" -type f)
[ -z "$left" ] || fail "make uninstall left files behind: $left"

echo "install: $failures failures"
[ "$failures" -eq 0 ]
