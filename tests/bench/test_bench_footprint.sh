#!/bin/sh
# bench/footprint.py against the built rtugw, in its cheap mode:
# - the demo: rtugw's own code needs no libm (only liblua does), the
#   dynamic linker's file pages are not resident after start-up (gateway/trim.c
#   and -z now), the
#   figures have the documented shape, and 300 requests of one client are
#   answered (footprint.py checks every answer) at a cost that is a count of
#   something that happened;
# - a gateway with nothing to do (bench/footprint-idle.ini on free ports):
#   its I/O thread does not wake at all in 3 s (the TCP and HTTP sweeps run
#   only while there are connections; docs/footprint.md);
# - the demo polling, 3 s: the I/O thread wakes (the polls), the actor timer
#   thread and the workers never do (the poller and the buses are pinned to
#   the I/O thread and their timers are its host's: actor/host.c H4). A count,
#   not a time: a parked thread has no switch to count, however loaded the box.
set -eu
src=${srcdir:-.}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
/usr/bin/python3 "$src/bench/footprint.py" --arm "rtugw=$RTUGW_BIN" --rounds 1 --settle 1 \
    --requests 300 --json >"$dir/demo.json"
tcp=$(free_port); http=$(free_port)
sed -e "s/^port = 15961/port = $tcp/" -e "s/^port = 18961/port = $http/" \
    "$src/bench/footprint-idle.ini" >"$dir/idle.ini"
grep -q "^port = $tcp\$" "$dir/idle.ini" && grep -q "^port = $http\$" "$dir/idle.ini"
/usr/bin/python3 "$src/bench/footprint.py" --arm "rtugw=$RTUGW_BIN" --config "$dir/idle.ini" \
    --rounds 1 --settle 1 --idle 3 --json >"$dir/idle.json"
/usr/bin/python3 "$src/bench/footprint.py" --arm "rtugw=$RTUGW_BIN" --rounds 1 --settle 1.5 \
    --idle 3 --json >"$dir/polling.json"
# rtugw's own code calls nothing of libm (routing/numeric.c, tags/codec.c):
# libm is in its NEEDED list only with liblua5.4, the computed tags'
# interpreter (expr/), which needs it.
if readelf -d "$RTUGW_BIN" | grep -q 'NEEDED.*libm\.so' && ! readelf -d "$RTUGW_BIN" | grep -q 'NEEDED.*liblua'; then
    echo "FAIL: rtugw links libm: $(readelf -d "$RTUGW_BIN" | grep NEEDED | tr -s ' ' | tr '\n' ' ')"
    exit 1
fi
/usr/bin/python3 - "$dir/demo.json" "$dir/idle.json" "$dir/polling.json" <<'PY'
import json, sys
demo = json.load(open(sys.argv[1]))["arms"][0]
idle = json.load(open(sys.argv[2]))["arms"][0]
polling = json.load(open(sys.argv[3]))["arms"][0]["thread_wakeups_per_s"]
assert polling["main"][0] > 0, f"the demo's I/O thread never woke: no polls? {polling}"
off = {t: v[0] for t, v in polling.items() if (t == "rtugw-timers" or t.startswith("rtugw-worker")) and v[0] != 0}
assert not off, f"the demo's polls woke threads off the I/O thread: {off} (all: {polling})"
maps = demo["mappings_kib"]
# libasan itself needs libm: under the sanitizers the mapping proves nothing,
# and the NEEDED list (checked above, with readelf) is what rtugw links.
# With Lua (computed tags, expr/) libm is mapped for liblua; what of it is
# resident stays a few pages (the demo computes one tag).
assert "libm.so" not in maps or "libasan.so" in maps or ("liblua5.4.so" in maps and maps["libm.so"]["rss"] <= 32), maps
assert maps["rtugw"]["rss"] > 0 and maps["libc.so"]["rss"] > 0, maps
# Start-up's pages of read-only segments are given back at READY
# (gateway/trim.c) and rtugw is bound at load (-z now): the dynamic linker's
# file pages stay unmapped (its anonymous part, RELRO and data, stays). Before
# either: its whole text, 152 KiB on x86-64, stayed resident. (Under ASan its
# runtime calls into ld.so: the figure proves nothing there.)
ld = [n for n in maps if n.startswith("ld-")]
assert ld, f"no dynamic linker among the mappings: {sorted(maps)}"
ld_file = maps[ld[0]]["rss"] - maps[ld[0]]["anon"]
assert ld_file <= 8 or "libasan.so" in maps, f"{ld[0]}: {ld_file} KiB of file pages resident after start-up: {maps[ld[0]]}"
for k in ("VmRSS", "RssAnon", "RssFile", "Pss", "mappings"):
    med, p10, p90 = demo["status"][k]
    assert 0 < p10 <= med <= p90, (k, demo["status"][k])
load = demo["load"]
assert load["rps"][0] > 0, load
# Each answered request woke the gateway's I/O thread at least once.
assert load["io_ctxsw_per_req"][0] >= 1 and load["cpu_us_per_req"][0] > 0, load
threads = idle["thread_wakeups_per_s"]
assert "rtugw-timers" in threads and "rtugw-worker0" in threads, f"threads named for top -H: {sorted(threads)}"
wake = threads["main"][0]
assert wake == 0, f"idle I/O thread woke {wake} times a second: {idle['thread_wakeups_per_s']}"
print("footprint: demo VmRSS %d KiB (the dynamic linker's file pages %d KiB), %.1f us and %.2f context switches a request; idle I/O thread: 0 wake-ups;"
      " polling demo: I/O thread %.1f/s, timer thread and workers 0"
      % (demo["status"]["VmRSS"][0], ld_file, load["cpu_us_per_req"][0], load["ctxsw_per_req"][0], polling["main"][0]))
PY
