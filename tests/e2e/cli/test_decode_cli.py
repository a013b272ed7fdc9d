#!/usr/bin/python3
"""rtugw decode end to end: every golden frame on every path gives exactly the
expected fields (parsed as JSON, compared as values), and the exit codes and
messages are what the help promises."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check as _check, finish  # noqa: E402
DATA = os.environ.get("RTUGW_TESTDATA", "tests/data")


def check(cond, what):
    _check(cond, what, quiet=True)


golden = [json.loads(l) for l in open(os.path.join(DATA, "golden.jsonl"))]
stdin = "".join(g["hex"] + "\n" for g in golden)
for path in ("reference", "fallback", "native", "auto"):
    p = subprocess.run([BIN, "decode", "--path", path], input=stdin, capture_output=True, text=True)
    check(p.returncode == 0, f"{path}: exit {p.returncode}: {p.stderr}")
    lines = p.stdout.splitlines()
    check(len(lines) == len(golden), f"{path}: {len(lines)} lines for {len(golden)} frames")
    for g, line in zip(golden, lines):
        got = json.loads(line)
        check(got.pop("path") == path, f"{path}: path field")
        if not g["expect"]["ok"]:
            check(got.get("ok") is False and "error" in got, f"{path}: {g['hex']} -> {line}")
            got.pop("error", None)
        check(got == g["expect"], f"{path}: {g['hex'][:40]}: got {got} want {g['expect']}")

# Arguments, with separators, the 255-byte tier frame.
tier = golden[2]["hex"]
spaced = " ".join(tier[i:i + 2] for i in range(0, len(tier), 2))
p = subprocess.run([BIN, "decode", spaced, tier.upper()], capture_output=True, text=True)
check(p.returncode == 0, "arguments: exit 0")
outs = [json.loads(l) for l in p.stdout.splitlines()]
check(len(outs) == 2 and all(len(o["registers"]) == 125 for o in outs), "arguments decode")

# Not hex: a message naming the line, exit 2; the good lines still decode.
p = subprocess.run([BIN, "decode"], input="01030244cbcad3\nzz\n", capture_output=True, text=True)
check(p.returncode == 2, f"non-hex exit {p.returncode}")
check("line 2" in p.stderr and "column 1" in p.stderr, f"non-hex message: {p.stderr!r}")
check(len(p.stdout.splitlines()) == 1, "good line before the bad one decoded")

# Invalid frames are data: exit 0.
p = subprocess.run([BIN, "decode", "0103", "01030244cbcad4"], capture_output=True, text=True)
check(p.returncode == 0, "invalid frames exit 0")
errs = [json.loads(l)["error"] for l in p.stdout.splitlines()]
check(errs == ["short", "crc"], f"error names {errs}")

# --slave: a response from another slave is flagged.
p = subprocess.run([BIN, "decode", "--slave", "2", "01030244cbcad3"], capture_output=True, text=True)
check(json.loads(p.stdout)["error"] == "slave", "slave mismatch")

# --request
p = subprocess.run([BIN, "decode", "--request", "01030000000a"], capture_output=True, text=True)
check(json.loads(p.stdout)["error"] == "crc", "request without CRC rejected")
p = subprocess.run([BIN, "decode", "--request", "01 03 00 6b 00 03 74 17"], capture_output=True, text=True)
req = json.loads(p.stdout)
check(req.get("ok") and req["address"] == 107 and req["count"] == 3, f"request decode {req}")

# Usage errors exit 2, --help exits 0.
check(subprocess.run([BIN, "decode", "--path", "fast"], capture_output=True).returncode == 2, "bad path")
check(subprocess.run([BIN, "decode", "--help"], capture_output=True).returncode == 0, "--help")
check(subprocess.run([BIN, "nosuch"], capture_output=True).returncode == 2, "unknown command")

finish("decode cli")
