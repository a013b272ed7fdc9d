#!/bin/sh
# `rtugw bench crossover` in a quick mode: it runs, its JSON parses and has the
# shape docs/crossover.md documents (gate passed with >= 15 inputs per tier;
# every tier with all three forms in both layers; every verdict one of
# faster/slower/undecided); and the equivalence gate really stops the run
# (test hook RTUGW_CROSSOVER_BREAK corrupts one envelope byte of one form).
# No assertion on speed: the machine may be loaded.
set -eu
: "${RTUGW_BIN:?RTUGW_BIN must point at the rtugw binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick="--rounds 5 --warmup 1 --frames 200 --tasks 50 --no-progress"

# 1. a quick run, JSON on standard output, Markdown to a file
"$RTUGW_BIN" bench crossover $quick --json --out "$tmp/report.md" >"$tmp/out.json"
/usr/bin/python3 - "$tmp/out.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
V = {"faster", "slower", "undecided"}
g = d["gate"]
assert g["passed"] is True, g
assert g["inputs"] >= 15, g
tiers = {t["bytes"]: t for t in g["tiers"]}
assert sorted(tiers) == [7, 21, 255], tiers
for t in tiers.values():
    assert t["inputs"] >= 15 and t["distinct"] >= 15, t
    assert sorted(t["forms"]) == ["fallback", "native", "routed"], t
    assert sorted(t["layers"]) == ["actors", "direct"], t
assert 0 <= d["exploration_rate"] <= 1
assert d["rounds"] == 5 and d["warmup"] == 1
assert d["crossover_bytes"] is None or 5 <= d["crossover_bytes"] <= 256
seen = {}
for row in d["tiers"]:
    key = (row["bytes"], row["layer"], row["concurrency"])
    seen[key] = row
    for f in ("fallback", "native", "routed"):
        assert isinstance(row[f + "_ns"], (int, float)) and row[f + "_ns"] >= 0, (key, f)
        assert len(row["samples"][f]) == 5, (key, f)
    assert row["verdict"] in V, row["verdict"]
    assert row["faster"] in ("native", "fallback", "undecided"), row["faster"]
    assert len(row["pairs"]) == 3
    for p in row["pairs"]:
        assert p["verdict"] in V, p
        # the verdict follows from the interquartile range, nothing else
        lo, hi = p["diff_ns"]["p25"], p["diff_ns"]["p75"]
        want = "faster" if hi < 0 else "slower" if lo > 0 else "undecided"
        assert p["verdict"] == want, p
    assert set(row["routed_arms"]) == {"native", "fallback"}
for b in (7, 21, 255):
    assert (b, "direct", 1) in seen, b
    for c in (1, 2, 4):
        assert (b, "actors", c) in seen, (b, c)
routing = [r for r in d["routing"] if r["tier"]]
assert len(routing) == 6, routing
for r in routing:
    assert r["layer"] in ("direct", "actors")
    assert r["paired_winner"] in ("native", "fallback", "undecided")
    assert r["exploration_rate"] == d["exploration_rate"]
    if r["default_not_a_decision"]:
        assert "default, not a decision" in r["router_verdict"], r
for k in ("favourable", "unfavourable", "no_winner"):
    assert isinstance(d[k], list), k
print("json ok:", len(d["tiers"]), "rows")
EOF
for section in "## Environment" "## Method" "## Equivalence gate" "## Direct layer" \
               "## Actor layer" "## Crossover" "## Routing verdicts" \
               "## Unfavourable results" "## No winner"; do
    grep -q "^$section" "$tmp/report.md" || { echo "FAIL: '$section' missing from the report"; exit 1; }
done

# 1b. the sweep: every length 5..256 gated and measured; the chart is valid XML
"$RTUGW_BIN" bench crossover --rounds 3 --warmup 0 --frames 50 --tasks 20 --no-progress \
    --sweep --json=$tmp/sweep.json --svg "$tmp/chart.svg" >/dev/null
/usr/bin/python3 - "$tmp/sweep.json" "$tmp/chart.svg" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
assert d["gate"]["sweep"]["lengths"] == 252 and d["gate"]["sweep"]["min_inputs"] >= 15, d["gate"]
rows = d["sweep"]
assert [r["bytes"] for r in rows] == list(range(5, 257)), "sweep lengths"
for r in rows:
    assert r["verdict"] in ("faster", "slower", "undecided"), r["bytes"]
    for f in ("fallback", "native", "routed"):
        assert r[f + "_ns"] >= 0
und = [r["bytes"] for r in rows if r["verdict"] == "undecided"]
assert d["undecided_bytes"] == und, (d["undecided_bytes"], und)
ET.parse(sys.argv[2])
print("sweep ok")
EOF

# 2. the gate stops the run: exit 1, "gate" on stderr, no timing anywhere
for form in native fallback routed native@actors routed@actors; do
    rc=0
    RTUGW_CROSSOVER_BREAK=$form "$RTUGW_BIN" bench crossover $quick --json=$tmp/broken.json \
        >"$tmp/broken.out" 2>"$tmp/broken.err" || rc=$?
    [ "$rc" -eq 1 ] || { echo "FAIL: broken $form: exit $rc, expected 1"; exit 1; }
    grep -q "gate" "$tmp/broken.err" || { echo "FAIL: broken $form: no 'gate' on stderr"; exit 1; }
    case $form in *@actors) layer="actor layer";; *) layer="direct layer";; esac
    grep -q "form ${form%@*}, .*$layer" "$tmp/broken.err" ||
        { echo "FAIL: broken $form: form or layer not named"; cat "$tmp/broken.err"; exit 1; }
    if grep -q "ns" "$tmp/broken.out" || [ -s "$tmp/broken.out" ] || [ -e "$tmp/broken.json" ]; then
        echo "FAIL: broken $form: timing reported after a failed gate"; exit 1
    fi
    echo "gate stops the run for a broken $form envelope: ok"
done

# 3. the issue's spelling `--json FILE` writes the file, Markdown stays on stdout
"$RTUGW_BIN" bench crossover $quick --json "$tmp/spelt.json" >"$tmp/spelt.md"
grep -q "^# rtugw bench crossover" "$tmp/spelt.md" || { echo "FAIL: --json FILE: no Markdown"; exit 1; }
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/spelt.json"

# 4. usage errors
rc=0; "$RTUGW_BIN" bench crossover --rounds 0 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --rounds 0 gave $rc, expected 2"; exit 1; }
rc=0; RTUGW_CROSSOVER_BREAK=bogus "$RTUGW_BIN" bench crossover $quick >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: RTUGW_CROSSOVER_BREAK=bogus gave $rc, expected 2"; exit 1; }
echo "test_bench_crossover: ok"
