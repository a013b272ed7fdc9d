#!/bin/sh
# `rtugw bench mqtt` in its cheap mode: it starts its own broker, every
# message of every phase must reach the subscriber (exit 1 otherwise), and
# the report must carry each figure for both sides; json, then sparkplug.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for format in json sparkplug; do
"$RTUGW_BIN" bench mqtt --format $format --values 10 --messages 400 --rounds 2 --rate 400 --latency-messages 200 >"$out"
grep -q "format $format" "$out" || { echo "FAIL: the report does not say format $format"; cat "$out"; exit 1; }
for row in "values/s delivered" "CPU us per 1,000 values" "latency p50 ms" "latency p99 ms"; do
    grep -q "^| $row" "$out" || { echo "FAIL: no row '$row'"; cat "$out"; exit 1; }
done
# Every figure is a positive number on both sides.
/usr/bin/python3 - "$out" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| ") and "[" in l and "median" not in l]
assert len(rows) == 4, rows
for l in rows:
    cells = [c.strip() for c in l.strip().strip("|").split("|")]
    for c in cells[1:3]:
        assert float(c.split()[0]) > 0, l
print("ok: bench mqtt: %d rows, both sides measured" % len(rows))
PY
done
