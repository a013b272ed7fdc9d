#!/usr/bin/python3
"""rtugw read against the simulator on its pseudo-terminal (Modbus RTU, with
libmodbus) and through a gateway (Modbus TCP): every type, in every order
side by side with --all-orders, decodes to what Python's struct computes
from the words the simulator was seeded with; --scale and --offset apply;
--count and --interval poll; a slave's exception, a silent slave and a port
that is not there exit 1 with a message; usage errors exit 2.
Seeded: replay with RTUGW_SEED=..."""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, Gateway, check, procs, run_tests  # noqa: E402
from tagsref import TYPES, as_json_text, decode, same_value, value_bytes, words_to_bytes  # noqa: E402

SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_read_cli: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)


def read(*args):
    return subprocess.run([BIN, "read", *args], capture_output=True, text=True, timeout=30)


def lines(p):
    return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


d = tempfile.mkdtemp(prefix="rtugw-read-")
link = os.path.join(d, "plc")
# One block of words per type at its own address; strings of text.
targets, load, at = [], [], 100
for typ, (_, regs, orders) in TYPES.items():
    for _ in range(3):
        words = [rng.randrange(65536) for _ in range(regs)]
        targets.append((typ, at, words, orders))
        load.append(f"1 holding {at} " + " ".join(map(str, words)))
        at += regs
text = bytes(rng.randrange(33, 127) for _ in range(8))
string_words = [w for w in (int.from_bytes(text[i:i + 2], "big") for i in range(0, 8, 2))]
load.append(f"1 holding 300 " + " ".join(map(str, string_words)))
load.append("1 input 7 4660")
with open(os.path.join(d, "load.txt"), "w") as f:
    f.write("\n".join(load) + "\n")
sim = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1", "--load", os.path.join(d, "load.txt")],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
procs.append(sim)
check(sim.stdout.readline().startswith("/dev/"), "simulator started")


def every_order(link_args, how):
    bad = 0
    for typ, (_, regs, orders) in TYPES.items():
        mine = [t for t in targets if t[0] == typ]
        p = read(*link_args, "--type", typ, "--all-orders", "--json", *[f"holding:{a}" for _, a, _, _ in mine])
        got = lines(p)
        if p.returncode != 0 or len(got) != len(mine):
            print(f"  {typ}: exit {p.returncode} {p.stderr} {p.stdout}")
            bad += 1
            continue
        for (_, a, words, orders), g in zip(mine, got):
            for order in orders:
                if not same_value(g["values"].get(order), decode(typ, order, words)) or g["words"] != words:
                    bad += 1
                    print(f"  {typ} {order} holding:{a}: {g['values'].get(order)} want {decode(typ, order, words)}")
    check(bad == 0, f"{how}: every type, every order side by side, equal to struct")
    # scaled, one order, human output
    typ, a, words, _ = [t for t in targets if t[0] == "int16"][0]
    p = read(*link_args, "--type", "int16", "--order", "BA", "--scale", "0.5", "--offset", "-3", f"holding:{a}")
    want = decode("int16", "BA", words, 0.5, -3.0)
    f = p.stdout.split()
    check(p.returncode == 0 and f[:3] == [f"holding:{a}", "int16", "BA"] and float(f[3]) == want and
          f[4] == f"[{words[0]:04x}]", f"{how}: --scale --offset, printed for people: {p.stdout!r} want {want}")
    p = read(*link_args, "--type", "string:4", "--all-orders", "--json", "holding:300")
    got = lines(p)
    want_ab = as_json_text(text)
    want_ba = as_json_text(b"".join(value_bytes(words_to_bytes([w]), "BA") for w in string_words).split(b"\0")[0])
    check(p.returncode == 0 and len(got) == 1 and got[0]["values"] == {"AB": want_ab, "BA": want_ba},
          f"{how}: a string in both byte orders ({got})")


def test_read():
    every_order(["--port", link, "--slave", "1", "--timeout", "2000"], "rtu")
    p = read("--port", link, "--slave", "1", "--type", "uint16", "input:7", "holding:5.3", "coil:3", "discrete:2")
    check(p.returncode == 0 and p.stdout.splitlines()[0].split()[:3] == ["input:7", "uint16", "AB"] and
          p.stdout.splitlines()[0].split()[3] == "4660" and
          p.stdout.splitlines()[1].split()[2] == ("true" if 1005 & 8 else "false") and
          p.stdout.splitlines()[2].split()[2] == ("true" if (3 + 1) % 3 == 0 else "false") and
          p.stdout.splitlines()[3].split()[2] == ("true" if (2 + 1) % 2 else "false"),
          f"input registers, a bit of a register, coils and discrete inputs: {p.stdout!r}")
    # one table-name parser (parser/rtu.h) for tags and the simulator's --load: hr, ir, co, di and any case
    a = read("--port", link, "--slave", "1", "holding:5", "input:7", "coil:3", "discrete:2")
    b = read("--port", link, "--slave", "1", "hr:5", "IR:7", "co:3", "Discrete:2")
    check(b.returncode == 0 and [ln.split()[2:] for ln in b.stdout.splitlines()] ==
          [ln.split()[2:] for ln in a.stdout.splitlines()],
          f"hr, IR, co, Discrete name the tables the simulator's --load calls so ({b.stdout!r} {b.stderr!r})")
    t0 = time.time()
    p = read("--port", link, "--slave", "1", "--count", "3", "--interval", "150", "holding:1")
    check(p.returncode == 0 and len(p.stdout.splitlines()) == 3 and time.time() - t0 >= 0.3,
          f"--count 3 --interval 150: three polls ({p.stdout!r})")
    p = read("--port", link, "--slave", "1", "holding:5000")
    check(p.returncode == 1 and "holding:5000" in p.stderr and "Illegal data address" in p.stderr,
          f"a slave's exception: exit 1, named ({p.stderr.strip()})")
    p = read("--port", link, "--slave", "2", "--timeout", "200", "holding:1")
    check(p.returncode == 1 and "timed out" in p.stderr, f"a silent slave: exit 1 ({p.stderr.strip()})")
    p = read("--port", os.path.join(d, "nothing"), "--slave", "1", "holding:1")
    check(p.returncode == 1 and "cannot open" in p.stderr, f"no such port: exit 1 ({p.stderr.strip()})")
    for args, what in ((["--port", link, "holding:1"], "--slave N is required"),
                       (["--port", link, "--slave", "1", "holdin:1"], "unknown table"),
                       (["--port", link, "--slave", "1", "--type", "float33", "holding:1"], "unknown type"),
                       (["--port", link, "--slave", "1", "--type", "int64", "--order", "CDABX", "holding:1"], "order"),
                       (["--port", link, "--slave", "1", "coil:1.2"], "coil is a bool"),
                       (["--tcp", "127.0.0.1", "holding:1"], "HOST:PORT"),
                       (["--port", link, "--tcp", "x:1", "--slave", "1", "holding:1"], "one of"),
                       (["--port", link, "--slave", "300", "holding:1"], "1..247")):
        p = read(*args)
        check(p.returncode == 2 and what in p.stderr, f"usage error exits 2: {' '.join(args)}: {p.stderr.strip()}")
    p = read("--help")
    check(p.returncode == 0 and "--all-orders" in p.stdout, "--help")

    # Through the gateway: the same values over Modbus TCP (the gateway owns the port now).
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices="[device plc]\nslave = 1\n", timeout_ms=1000)
    every_order(["--tcp", f"127.0.0.1:{g.tcp_port}", "--unit", "1"], "through the gateway")
    g.stop()
    sim.kill()


run_tests("test_read_cli", (test_read,))
