#!/bin/sh
# `rtugw bench soak` in its cheap mode: 2000 mixed requests from 4 clients.
# Exit 0 means every invariant held (client counts = the gateway's /metrics,
# read-backs equal, RSS and fds flat); the JSON is checked on top of that.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench soak --requests 2000 --clients 4 --sample-ms 100 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["pass"] is True, d
assert d["requests"] == 2000 and d["clients"] == 4, d
assert d["sent"] == 2000 and d["failed"] == 0 and d["mismatches"] == 0, d
assert d["ok"] + d["exceptions_expected"] + d["exceptions_unexpected"] == d["sent"], d
assert d["exceptions_unexpected"] == 0 and d["exceptions_expected"] > 0, d
assert d["gateway_requests"] == d["sent"] and d["gateway_answers"] == d["sent"], d
assert d["answered_exactly_once"] is True, d
assert sorted(int(k) for k in d["by_function"]) == [1, 2, 3, 4, 5, 6, 15, 16], d["by_function"]
assert d["fds"]["min"] == d["fds"]["max"], d
# Under ASan/TSan RSS is reported but not judged (quarantine, shadow memory).
assert d["rss_kib"]["growth_pct"] <= 5 or d["rss_kib"]["judged"] is False, d
assert d["fds"]["after_close"] == d["fds"]["before"], d
assert len(d["samples"]) >= 2, d
print("ok: bench soak: %d requests answered once, RSS %+.2f %%, fds %d" %
      (d["sent"], d["rss_kib"]["growth_pct"], d["fds"]["baseline"]))
PY
