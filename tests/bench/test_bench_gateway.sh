#!/bin/sh
# `rtugw bench gateway` in its cheap mode: the JSON has the documented shape
# and the invariants hold (no failed request on any arm, every arm made
# progress, percentiles ordered, the per-request costs are counts of
# something that happened). Speed is not asserted here.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$RTUGW_BIN" bench gateway --seconds 0.3 --paced-cycles 2 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert sorted((r["registers"], r["clients"]) for r in rows) == \
    [(1, 1), (1, 4), (1, 8), (8, 1), (8, 4), (8, 8), (125, 1), (125, 4), (125, 8)], rows
for r in rows:
    for k in ("registers", "clients", "rtugw_rps", "direct_rps", "p50_us", "p99_us", "direct_p50_us"):
        assert isinstance(r[k], (int, float)), (k, r)
    assert r["rtugw_rps"] > 0 and r["direct_rps"] > 0, r
    assert 0 < r["p50_us"] <= r["p99_us"], r
    assert r["direct_p50_us"] > 0, r
    assert r["rtugw_rps_p10"] <= r["rtugw_rps"] <= r["rtugw_rps_p90"], r
    assert r["errors"] == 0 and r["direct_errors"] == 0, r
    assert r["requests"] > 0 and r["direct_requests"] > 0, r
    for k in ("cpu_us_per_req", "ctxsw_per_req", "direct_cpu_us_per_req", "direct_ctxsw_per_req",
              "client_cpu_us_per_req", "io_ctxsw_per_req", "direct_master_ctxsw_per_req"):
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
        assert r[k + "_p10"] <= r[k] <= r[k + "_p90"], (k, r)
    # Every answered request woke at least the gateway's TCP side and its bus:
    # more than one context switch per request, on either arm at least one.
    assert r["ctxsw_per_req"] > 1 and r["direct_ctxsw_per_req"] > 0, r
    # The main thread is one of the threads counted.
    assert r["io_ctxsw_per_req"] <= r["ctxsw_per_req"] and r["io_ctxsw_per_req"] > 0, r
    assert r["direct_master_ctxsw_per_req"] <= r["direct_ctxsw_per_req"], r
    assert r["rss_kib"] > 0 and r["direct_rss_kib"] > 0 and r["gateway_threads"] >= 2, r
# CPU time comes in clock ticks (10 ms): a 30 ms segment may see none, but
# over all the cells the gateway must have used some.
assert sum(r["cpu_us_per_req"] for r in rows) > 0, rows
rss = d["rss"]
assert rss["clients"] == 32 and rss["errors"] == 0 and rss["idle_kib"] > 0 and rss["busy_kib"] > 0, rss
p = d["paced"]
assert p["cycles"] == 2 and p["cycle_ms"] > 0 and p["wire_ms"] > 0, p
print("ok: bench gateway JSON shape and invariants;",
      ", ".join("%dx%d %.0f/%.0f rps %.0f/%.0f us" % (r["registers"], r["clients"], r["rtugw_rps"], r["direct_rps"],
                                                   r["cpu_us_per_req"], r["direct_cpu_us_per_req"]) for r in rows))
PY
# --relay (implies --sim-outside): the gateway on a pty as a serial port, the
# simulator in the bench process, and the floor (bench/relay.c) as a third arm
# on a simulator of its own; the same invariants for both, and the flags are
# reported.
"$RTUGW_BIN" bench gateway --relay --seconds 0.3 --rounds 2 --warmup 0 --paced-cycles 0 --json >"$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sim_outside"] is True and d["relay"] is True, d
for r in d["rows"]:
    assert r["errors"] == 0 and r["direct_errors"] == 0 and r["requests"] > 0, r
    assert r["ctxsw_per_req"] > 0 and r["io_ctxsw_per_req"] <= r["ctxsw_per_req"], r
    # The relay answered every request it was asked, and each woke it.
    assert r["relay_errors"] == 0 and r["relay_requests"] > 0 and r["relay_rps"] > 0, r
    assert r["relay_ctxsw_per_req"] > 0 and 0 < r["relay_p50_us"] <= r["relay_p99_us"], r
    assert r["rtugw_per_relay_p10"] <= r["rtugw_per_relay"] <= r["rtugw_per_relay_p90"], r
    assert r["rtugw_per_relay"] > 0 and r["relay_cpu_us_per_req"] >= 0, r
assert d["rss"]["errors"] == 0, d["rss"]
print("ok: --relay,", ", ".join("%dx%d rtugw/relay %.2f, %.2f/%.2f ctxsw" % (
    r["registers"], r["clients"], r["rtugw_per_relay"], r["ctxsw_per_req"], r["relay_ctxsw_per_req"])
    for r in d["rows"]))
PY
