#!/bin/sh
# `rtugw bench router` in a quick mode: it runs (its own check that routed
# decodes equal the reference passes), its JSON parses and has the shape
# docs/router.md documents: three tiers with the five forms, the metrics, a
# verdict, both oracles, and the router's report with its pairs and timer
# resolution; --bytes measures only the tiers it names; --policy thompson
# is named in the output; bad options are refused with status 2.
# No assertion on speed or on which arm wins: the machine may be loaded.
set -eu
: "${RTUGW_BIN:?RTUGW_BIN must point at the rtugw binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$RTUGW_BIN" bench router --rounds 5 --warmup 2 --frames 20000 --json >"$tmp/out.json"
/usr/bin/python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rounds"] == 5 and d["warmup"] == 2 and d["frames_per_round"] == 20000, d
assert d["timer_resolution_ns"] >= 0 and d["timer_overhead_ns"] >= 0
arms = {"native", "fallback"}
tiers = {t["bytes"]: t for t in d["tiers"]}
assert sorted(tiers) == [7, 21, 255], tiers.keys()
for b, t in tiers.items():
    assert set(t["forms"]) == {"native", "fallback", "routed", "dispatch_native",
                               "dispatch_fallback"}, t["forms"]
    for f in t["forms"].values():
        assert 0 < f["ns_p10"] <= f["ns_median"] <= f["ns_p90"], f
    for m in ("routed_over_bound", "routed_over_faster", "exploration_ns",
              "router_overhead_ns", "dispatch_overhead_ns",
              "dispatch_fallback_overhead_ns", "bound_ns"):
        assert t[m]["p10"] <= t[m]["median"] <= t[m]["p90"], (b, m, t[m])
    assert t["routed_over_bound"]["median"] > 0
    assert t["target"] == (1.10 if b <= 8 else 1.05)
    assert t["oracle_arm"] in arms and t["oracle_in_context_arm"] in arms, t
    v = t["verdict"]
    assert v in ("not converged", "default, not a decision") or \
        v in ("converged to native", "converged to fallback"), v
    # the flags follow from the fields
    conv = v.startswith("converged to ")
    assert t["converged_to_oracle"] == (conv and v.endswith(t["oracle_arm"])), t
    assert t["converged_to_oracle_in_context"] == \
        (conv and v.endswith(t["oracle_in_context_arm"])), t
r = d["report"]["router"]
assert r["policy"] == "epsilon-greedy" and r["explore_run"] == 64
assert r["timer_resolution_ns"] == d["timer_resolution_ns"]
by_hi = {b["hi"]: b for b in r["buckets"]}
for hi in (8, 32, 256):   # the buckets of 7, 21 and 255 bytes
    b = by_hi[hi]
    # 8 rounds x 20000 frames explore in pairs: some pairs, a ratio for them
    assert b["pairs"] > 0 and b["paired_ratio"] > 0, b
    assert b["pulls"]["native"] + b["pulls"]["fallback"] >= 7 * 20000, b
PY

# one tier alone (as under callgrind)
"$RTUGW_BIN" bench router --rounds 2 --warmup 1 --frames 2000 --bytes 255,21 --json >"$tmp/one.json"
/usr/bin/python3 - "$tmp/one.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [t["bytes"] for t in d["tiers"]] == [21, 255], d["tiers"]
assert d["policy"] == "epsilon-greedy" and d["report"]["router"]["policy"] == "epsilon-greedy"
PY

# the other policy, named in both places
"$RTUGW_BIN" bench router --rounds 2 --warmup 1 --frames 2000 --bytes 7 --policy thompson \
    --json >"$tmp/ts.json"
/usr/bin/python3 - "$tmp/ts.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["policy"] == "thompson" and d["report"]["router"]["policy"] == "thompson", d["policy"]
PY

# bad options: status 2 and a message naming the option
for bad in "--rounds 0" "--explore-run 0" "--epsilon 2" "--frames x" "--bogus" \
    "--bytes 8" "--bytes 7,,21" "--bytes 21x" "--bytes ," "--policy greedy"; do
    set +e
    "$RTUGW_BIN" bench router $bad >"$tmp/o" 2>"$tmp/e"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || { echo "bench router $bad: exit $rc, want 2"; cat "$tmp/e"; exit 1; }
    [ -s "$tmp/e" ] || { echo "bench router $bad: no message"; exit 1; }
done
echo "bench router: quick run and option checks passed"
