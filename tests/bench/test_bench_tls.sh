#!/bin/sh
# bench/tls.py in its cheap mode: the JSON has the documented shape and the
# invariants hold (every arm measured, resumed handshakes really resumed,
# percentiles ordered, TLS connections cost memory that plain ones do not).
# Speed is not asserted here: figures come from full runs (docs/security.md).
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/python3 "${RTUGW_SRCDIR:-.}/bench/tls.py" --bin "$RTUGW_BIN" --rounds 2 --warmup 1 --handshakes 4 \
    --requests 20 --connections 8 --rss-rounds 1 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
setup = d["setup"]
assert sorted(setup) == ["plain", "tls12_full", "tls12_resumed", "tls13_full", "tls13_resumed"], setup
for arm, v in setup.items():
    for k in ("handshake_us", "first_answer_us"):
        s = v[k]
        assert s["n"] == 8 and 0 < s["p10"] <= s["median"] <= s["p90"], (arm, k, s)
    assert v["handshake_us"]["median"] <= v["first_answer_us"]["median"], (arm, v)
assert d["not_resumed"] == 0, d["not_resumed"]
lat = d["latency"]
for k in ("plain_us", "tls_us"):
    assert lat[k]["n"] == 40 and 0 < lat[k]["p10"] <= lat[k]["median"] <= lat[k]["p90"], lat
assert lat["ratio"]["n"] == 2 and lat["ratio"]["median"] > 0, lat
rss = d["rss_per_connection"]
assert rss["tls"]["rssanon_kib"]["median"] > rss["plain"]["rssanon_kib"]["median"], rss
foot = d["footprint"]
assert foot["tls"]["rssanon_kib"]["median"] > foot["no_tls"]["rssanon_kib"]["median"] > 0, foot
print("ok: bench tls JSON shape and invariants; tls13 full %.0f us, resumed %.0f us, plain %.0f us" %
      (setup["tls13_full"]["first_answer_us"]["median"], setup["tls13_resumed"]["first_answer_us"]["median"],
       setup["plain"]["first_answer_us"]["median"]))
PY
