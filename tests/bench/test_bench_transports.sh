#!/bin/sh
# `rtugw bench transports` in its cheap mode: every path measured, the JSON
# has the documented shape and the invariants hold (no failed request on
# either arm, both arms made progress, spreads ordered). Speed is not
# asserted here: figures come from the bench itself (docs/drivers.md).
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench transports --seconds 0.2 --rounds 2 --warmup 0 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cells = d["cells"]
assert [(c["path"], c["registers"], c["arm_clients"], c["base_clients"]) for c in cells] == [
    ("RTU over TCP bus", 1, 1, 1), ("RTU over TCP bus", 125, 1, 1),
    ("Modbus TCP device", 1, 1, 1), ("Modbus TCP device", 125, 1, 1),
    ("shared TCP device", 8, 8, 1), ("RTU over TCP front end", 8, 1, 1)], cells
for c in cells:
    assert c["errors"] == 0 and c["base_errors"] == 0, c
    assert c["requests"] > 0 and c["base_requests"] > 0 and c["rps"] > 0 and c["base_rps"] > 0, c
    assert c["rps_p10"] <= c["rps"] <= c["rps_p90"], c
    assert 0 < c["lat_p10_us"] <= c["lat_us"] <= c["lat_p90_us"], c
    assert 0 < c["base_lat_p10_us"] <= c["base_lat_us"] <= c["base_lat_p90_us"], c
print("ok: bench transports JSON shape and invariants;",
      ", ".join("%s %d: %.0f/%.0f rps" % (c["path"], c["registers"], c["rps"], c["base_rps"]) for c in cells))
PY
