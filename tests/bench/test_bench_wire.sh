#!/bin/sh
# `rtugw bench wire` in a short run at both bauds, with --timeline: the JSON
# has the documented shape, every answer on every arm came back with the
# simulator's values (the bench checks each one), every arm made progress,
# the percentiles are ordered, and the gateway's timeline (gateway/timeline.c,
# RTUGW_TIMELINE) matched measured requests, with its stages adding up to no
# more than the client's own time per read. With --cpu-latency (root's
# /dev/cpu_dma_latency) each baud has a second row, the same arms in the same
# rounds with the request held, labelled with it. Speed is not asserted here.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench wire --baud 115200,9600 --seconds 0.6 --rounds 2 --warmup 1 --timeline --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [r["baud"] for r in rows] == [115200, 9600], rows
for r in rows:
    assert r["direct_errors"] == 0 and r["direct_requests"] > 0, r
    assert r["direct_rps_p10"] <= r["direct_rps"] <= r["direct_rps_p90"], r
    # a paced read takes at least its answer's wire time
    assert r["direct_us"] >= 0.9 * r["answer_wire_us"], r
    assert [a["arm"] for a in r["arms"]] == ["rtugw", "rtugw_nowiden", "rtugw_oneloop"], r
    for a in r["arms"]:
        assert a["errors"] == 0 and a["requests"] > 0 and a["rps"] > 0, a
        assert a["rps_p10"] <= a["rps"] <= a["rps_p90"], a
        assert a["ratio_p10"] <= a["ratio"] <= a["ratio_p90"] and 0 < a["ratio"] < 2, a
        assert a["us"] >= 0.9 * r["answer_wire_us"], a
        assert a["timeline_n"] > 0 and len(a["stages"]) == 7, a
        for s in a["stages"]:
            assert 0 <= s["us_p10"] <= s["us"] <= s["us_p90"], s
        # the stages partition the client's time per read: their medians add
        # up to about the read's median (not exactly: medians do not add)
        total = sum(s["us"] for s in a["stages"])
        assert 0.5 * a["us"] <= total <= 1.5 * a["us"], (total, a)
        # the answer's bytes take its wire time between the write and the last read
        wire = a["stages"][3]["us"] + a["stages"][4]["us"]
        assert wire >= 0.9 * r["answer_wire_us"], (wire, a)
print("ok: bench wire JSON shape, values and timeline;",
      ", ".join("%d baud %s %.3f" % (r["baud"], a["arm"], a["ratio"]) for r in rows for a in r["arms"]))
PY

# --cpu-latency: needs root (the device is root's), as CI and the test VM run.
[ "$(id -u)" -eq 0 ] || { echo "FAIL: --cpu-latency needs root for /dev/cpu_dma_latency"; exit 1; }
# (the lock: test_cpu_latency.py reads the machine's request as its daemon's)
flock /tmp/rtugw-cpu-latency.lock \
    "$RTUGW_BIN" bench wire --baud 115200 --seconds 0.4 --rounds 2 --warmup 0 --cpu-latency 0 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert [(r["baud"], r["cpu_latency_us"]) for r in rows] == [(115200, None), (115200, 0)], rows
for r in rows:
    assert r["direct_errors"] == 0 and r["direct_requests"] > 0, r
    for a in r["arms"]:
        assert a["errors"] == 0 and a["requests"] > 0 and 0 < a["ratio"] < 2, a
print("ok: bench wire --cpu-latency: both states, every arm,",
      ", ".join("%s %s %.3f" % (r["cpu_latency_us"], a["arm"], a["ratio"]) for r in rows for a in r["arms"]))
PY
