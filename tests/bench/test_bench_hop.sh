#!/bin/sh
# `rtugw bench hop` in a short run with two arms (this rtugw twice): the JSON
# has the documented shape, every answer came back with the device's values
# (the bench checks each one), both arms answered, the percentiles are
# ordered and the first arm's ratio to itself is 1. Speed is not asserted.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench hop --rtugw "$RTUGW_BIN" --rtugw "$RTUGW_BIN" --clients 4 --seconds 0.6 --rounds 3 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["clients"] == 4 and len(d["arms"]) == 2, d
for a in d["arms"]:
    assert a["errors"] == 0 and a["answers"] > 0 and a["rps"] > 0, a
    assert a["rps_p10"] <= a["rps"] <= a["rps_p90"], a
    assert 0 < a["us_p10"] <= a["us"] <= a["us_p90"], a
assert d["arms"][0]["ratio"] == 1, d
print("ok: bench hop JSON shape and values;", ", ".join("%.0f/s" % a["rps"] for a in d["arms"]))
PY
