#!/bin/sh
# `rtugw bench gateway` in its cheap mode: the JSON has the documented shape
# and the invariants hold (no failed request on either arm, both arms made
# progress, percentiles ordered). Speed is not asserted here.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench gateway --seconds 0.3 --paced-cycles 2 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert sorted((r["registers"], r["clients"]) for r in rows) == \
    [(1, 1), (1, 4), (8, 1), (8, 4), (125, 1), (125, 4)], rows
for r in rows:
    for k in ("registers", "clients", "rtugw_rps", "direct_rps", "p50_us", "p99_us", "direct_p50_us"):
        assert isinstance(r[k], (int, float)), (k, r)
    assert r["rtugw_rps"] > 0 and r["direct_rps"] > 0, r
    assert 0 < r["p50_us"] <= r["p99_us"], r
    assert r["direct_p50_us"] > 0, r
    assert r["rtugw_rps_p10"] <= r["rtugw_rps"] <= r["rtugw_rps_p90"], r
    assert r["errors"] == 0 and r["direct_errors"] == 0, r
    assert r["requests"] > 0 and r["direct_requests"] > 0, r
rss = d["rss"]
assert rss["clients"] == 32 and rss["errors"] == 0 and rss["idle_kib"] > 0 and rss["busy_kib"] > 0, rss
p = d["paced"]
assert p["cycles"] == 2 and p["cycle_ms"] > 0 and p["wire_ms"] > 0, p
print("ok: bench gateway JSON shape and invariants;",
      ", ".join("%dx%d %.0f/%.0f rps" % (r["registers"], r["clients"], r["rtugw_rps"], r["direct_rps"]) for r in rows))
PY
