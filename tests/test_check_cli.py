#!/usr/bin/python3
"""rtugw check: exit 0 for valid files, 2 with FILE:LINE messages otherwise."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, check as _check, finish  # noqa: E402
SRC = os.environ.get("RTUGW_SRCDIR", ".")


def check(cond, what):
    _check(cond, what, quiet=True)


def run(*args):
    return subprocess.run([BIN, "check", *args], capture_output=True, text=True)


p = run("--demo")
check(p.returncode == 0 and "ok: 1 bus, 3 devices, 2 poll groups" in p.stdout, f"demo: {p.stdout} {p.stderr}")
p = run("-c", os.path.join(SRC, "config", "example.ini"))
check(p.returncode == 0, f"example.ini: {p.stderr}")
p = run("--demo", "--print")
check(p.returncode == 0 and "[bus sim]" in p.stdout, "print demo")

with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
    f.write("[bus a]\nport = /dev/x\nbaud = fast\n")
    bad = f.name
p = run("-c", bad)
check(p.returncode == 2, f"bad file exit {p.returncode}")
check(f"{bad}:3: [bus a] baud = 'fast'" in p.stderr, f"message: {p.stderr!r}")
os.unlink(bad)

p = run("-c", "/nonexistent.ini")
check(p.returncode == 2 and "/nonexistent.ini: cannot open" in p.stderr, f"missing file: {p.stderr!r}")
check(run().returncode == 2, "no arguments is a usage error")
check(run("--help").returncode == 0, "--help")

finish("check cli")
