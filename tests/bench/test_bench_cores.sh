#!/bin/sh
# `rtugw bench cores --smoke` with two arms (the gateway on one CPU; on any CPU
# with max_pending = 4): the JSON names both arms with their CPUs and keys,
# every answer came back right (the bench checks each one and exits 1
# otherwise), both arms answered from the poll cache, the percentiles are
# ordered and the first arm's ratio to itself is 1; the Markdown table names
# both arms. With --bus (and loops = 2) every read went through the device
# bus (no answer from a cache), still every one checked. A malformed
# --arm exits 2 naming what is wrong. Speed is not asserted. About 7 s.
set -eu
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
# the first CPU this test may run on (0 unless a cpuset says otherwise)
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
"$RTUGW_BIN" bench cores --smoke --arm "a:$cpu:" --arm 'b::max_pending = 4' --json >"$out"
/usr/bin/python3 - "$out" "$cpu" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["path"] == "cache" and d["clients"] == 20 and d["rounds"] == 2 and d["box_cpus"] >= 1 and len(d["arms"]) == 2, d
a, b = d["arms"]
assert (a["label"], a["cpus"], a["keys"]) == ("a", sys.argv[2], ""), a
assert (b["label"], b["cpus"], b["keys"]) == ("b", "", "max_pending = 4"), b
for x in d["arms"]:
    assert x["answers"] > 0 and x["rps"] > 0, x
    assert x["rps_p10"] <= x["rps"] <= x["rps_p90"], x
    assert 0 < x["us_p10"] <= x["us"] <= x["us_p90"], x
    assert x["cache_fraction"] >= 0.99, x
    assert x["gateway_cpu"] > 0 and x["client_cpu"] > 0 and x["box_cpu"] > 0, x
    assert 0 < x["gateway_thread_cpu"] <= x["gateway_cpu"] + 0.05, x
assert a["ratio"] == 1, a
print("ok: bench cores JSON shape and values;", ", ".join("%s %.0f/s" % (x["label"], x["rps"]) for x in d["arms"]))
PY
"$RTUGW_BIN" bench cores --smoke --bus --arm "a:$cpu:" --arm 'b::loops = 2' --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["path"] == "bus" and len(d["arms"]) == 2, d
for x in d["arms"]:
    assert x["answers"] > 0 and x["rps"] > 0 and x["cache_fraction"] <= 0.01, x
print("ok: bench cores --bus: every read through the device bus;", ", ".join("%s %.0f/s" % (x["label"], x["rps"]) for x in d["arms"]))
PY
"$RTUGW_BIN" bench cores --smoke --arm "one:$cpu:" --arm two:: >"$out"
grep -q "^| one | $cpu | - | [1-9]" "$out" || { cat "$out"; echo "FAIL: no row for arm one"; exit 1; }
grep -q '^| two | any | - | [1-9]' "$out" || { cat "$out"; echo "FAIL: no row for arm two"; exit 1; }
for bad in x 'x:0' ':0:' 'x:0-:' 'x::max_pending'; do
    rc=0
    "$RTUGW_BIN" bench cores --smoke --arm "$bad" >"$out" 2>"$err" || rc=$?
    [ "$rc" -eq 2 ] || { cat "$err"; echo "FAIL: --arm '$bad' exited $rc, expected 2"; exit 1; }
    grep -q "^rtugw bench cores: --arm '$bad': .*expected LABEL:CPUS:KEYS" "$err" ||
        { cat "$err"; echo "FAIL: --arm '$bad': no message naming it"; exit 1; }
done
echo "ok: bench cores Markdown rows; a bad --arm exits 2 with a message"
