#!/usr/bin/python3
"""`rtugw bench tags` in a quick mode: its JSON parses and has the shape
docs/tags.md documents; on the generated 2,000-tag file the planner needs no
more reads than merging touching ranges, which needs fewer than one read per
tag, and the line times follow from the reads; every type has a decode
figure; --callgrind counts instructions per value for every type; bad options are refused with 2.
No assertion on speed: the machine may be loaded."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish  # noqa: E402

p = subprocess.run([BIN, "bench", "tags", "--rounds", "3", "--warmup", "1", "--json"],
                   capture_output=True, text=True)
check(p.returncode == 0, f"bench tags --json exits 0 ({p.stderr[-300:]})")
d = json.loads(p.stdout)
check(d["tags"] == 2000 and d["devices"] == 10, "2,000 tags on 10 devices")
reads = {r["method"]: r for r in d["reads"]}
check(set(reads) == {"planner", "touching_only", "one_per_tag"}, f"three methods: {set(reads)}")
check(reads["one_per_tag"]["reads"] == 2000, "one read per tag is 2,000 reads")
check(reads["planner"]["reads"] <= reads["touching_only"]["reads"] < 2000,
      f"planner {reads['planner']['reads']} <= touching {reads['touching_only']['reads']} < 2000")
for r in reads.values():
    # at least 8 + 5 bytes and two t3.5 gaps per read: 13 + 7 characters of 11 bits at 9600 baud
    floor = r["reads"] * 20 * 11 * 1000 / 9600
    check(r["cycle_ms"] >= floor and 0 < r["line_share"], f"{r['method']}: line time {r['cycle_ms']} >= {floor:.1f}")
check(reads["planner"]["cycle_ms"] < reads["one_per_tag"]["cycle_ms"], "the planner saves line time")
types = [x["type"] for x in d["decode"]]
check(len(types) == 12 and any("float32" in t for t in types) and "tags_table_apply" in types[-1],
      f"decode rows: {types}")
for x in d["decode"]:
    s = x["ns_per_value"]
    check(0 < s["p10"] <= s["median"] <= s["p90"] and s["rounds"] == 3, f"{x['type']}: {s}")

p = subprocess.run([BIN, "bench", "tags", "--type", "float32", "--iterations", "1000"], capture_output=True, text=True)
check(p.returncode == 0 and p.stdout.strip() in ("0", "1"), "--type float32 --iterations 1000 runs")
p = subprocess.run([BIN, "bench", "tags", "--callgrind", "--json"], capture_output=True, text=True)
with open(BIN, "rb") as f:
    sanitized = any(m in f.read() for m in (b"__asan_init", b"__tsan_init"))
if sanitized:
    # valgrind cannot run a sanitizer build: the bench must say so and fail, not report numbers.
    print("note: a sanitizer build; --callgrind is checked to refuse cleanly instead of measuring")
    check(p.returncode != 0 and "valgrind" in p.stderr, f"--callgrind under a sanitizer build fails, naming valgrind "
          f"({p.returncode}: {p.stderr[-200:]})")
else:
    check(p.returncode == 0, f"--callgrind exits 0 ({p.stderr[-200:]})")
    cg = json.loads(p.stdout)["callgrind"]
    check(len(cg) == 11 and all(10 < x["instructions_per_value"] < 2000 for x in cg),
          f"--callgrind: instructions per value for 11 types: {cg}")
for bad in (["--rounds", "0"], ["--type", "float33"], ["--bogus"], ["extra"]):
    p = subprocess.run([BIN, "bench", "tags"] + bad, capture_output=True, text=True)
    check(p.returncode == 2, f"{bad} refused with 2 (got {p.returncode})")
p = subprocess.run([BIN, "bench", "tags", "--file", "/nonexistent.csv"], capture_output=True, text=True)
check(p.returncode == 1 and "/nonexistent.csv" in p.stderr, "a missing file is named, exit 1")
finish("test_bench_tags")
