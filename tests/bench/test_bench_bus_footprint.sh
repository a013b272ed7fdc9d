#!/bin/sh
# bench/bus_footprint.py --smoke against the built rtugw (issue 45: each added
# bus must cost no more memory than one more mbusd process, ~133-155 KiB Pss):
# 1 and 4 buses, idle (an unreachable tcp:// port) and loaded (each bus polling
# one external `rtugw run` serving Modbus TCP from its simulator). The bench
# itself fails if any poll group's values are not the simulator's. Asserted
# here: the groups polled, and the anonymous memory each bus adds stays under
# 100 KiB, idle and loaded (RssAnon, this process's own pages: not moved by
# what other processes share). Before the slaves' state was made lazy
# (line/events.c, line_slave) it was ~180 KiB a bus, idle or not, and this fails.
set -eu
src=${srcdir:-.}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/python3 "$src/bench/bus_footprint.py" --smoke --json --arm "rtugw=$RTUGW_BIN" >"$out"
asan=0
if readelf -d "$RTUGW_BIN" | grep -q 'NEEDED.*libasan'; then asan=1; fi
/usr/bin/python3 - "$out" "$asan" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
asan = sys.argv[2] == "1"
res = {x["mode"]: x for x in r["results"]}
assert set(res) == {"idle", "loaded"}, sorted(res)
assert res["loaded"]["polls"] >= 5, f"the loaded gateways hardly polled: {res['loaded']['polls']} polls"
for mode, x in res.items():
    slope = x["anon"]["slope_kib_per_bus"]["median"]
    pss = x["pss"]["slope_kib_per_bus"]["median"]
    print(f"bus footprint, {mode}: RssAnon {slope:.1f} KiB/bus, Pss {pss:.1f} KiB/bus (1 and 4 buses)")
    if asan:
        print(f"  (ASan build: its allocator's redzones and quarantine make the per-bus figure no measure; not asserted)")
        continue
    assert slope < 100, f"{mode}: each bus adds {slope:.1f} KiB of anonymous memory (bound 100): {x['anon']}"
PY
