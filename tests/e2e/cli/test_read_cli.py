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
import struct
import subprocess
import sys
import tempfile
import time
from decimal import Decimal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
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
load.append("1 holding 400 4660 22136 16968 12345 65285")   # bcd32, float16, fixed16:2, int8h
load.append("1 holding 410 4779 4660 22264")   # 0x12AB: no bcd16; 1234 56f8: no bcd32 (issue 44)
load.append("1 holding 420 31744 64512 32256 15360")   # float16 +inf, -inf, NaN, 1.0
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
    want = {}
    for order, pair_order in (("AB", "ABCD"), ("CDAB", "CDAB"), ("BA", "BADC"), ("DCBA", "DCBA")):
        # each pair of registers in value order by the 32-bit order's letters
        raw = b"".join(value_bytes(words_to_bytes(string_words[i:i + 2]), pair_order) for i in (0, 2))
        want[order] = as_json_text(raw.split(b"\0")[0])
    check(p.returncode == 0 and len(got) == 1 and got[0]["values"] == want,
          f"{how}: a string in its byte and word orders ({got})")


def shortest_half(x):
    """The fewest significant digits that struct 'e' packs to the same float16."""
    for digits in range(1, 6):
        y = float("%.*g" % (digits, x))
        if abs(y) < 65520 and struct.pack(">e", y) == struct.pack(">e", x):
            return y
    return x


def new_types_all_orders(link_args, how):
    """The vendors' types side by side: BCD in the four orders (digits read
    from the value bytes' hex), float16 by struct 'e' in its shortest text,
    fixed-point as a decimal, a byte of a register (no orders)."""
    b = lambda w, o: value_bytes(words_to_bytes(w), o)   # noqa: E731
    cases = [("bcd32", 400, {o: int(b([4660, 22136], o).hex()) for o in ("ABCD", "CDAB", "BADC", "DCBA")}),
             ("float16", 402, {"AB": 3.14, "BA": shortest_half(struct.unpack(">e", b([16968], "BA"))[0])}),
             ("fixed16:2", 403, {"AB": 123.45, "BA": float(Decimal(struct.unpack(">h", b([12345], "BA"))[0])
                                                           .scaleb(-2))}),
             ("int8h", 404, None)]
    for typ, a, want in cases:
        p = read(*link_args, "--type", typ, "--all-orders", "--json", f"holding:{a}")
        got = lines(p)
        ok = p.returncode == 0 and len(got) == 1
        if want is None:
            ok = ok and got[0].get("value") == -1 and "values" not in got[0]
        else:
            ok = ok and got[0].get("values") == want
        check(ok, f"{how}: --all-orders {typ}: {got or p.stderr.strip()} want {want}")


def test_read():
    every_order(["--port", link, "--slave", "1", "--timeout", "2000"], "rtu")
    new_types_all_orders(["--port", link, "--slave", "1", "--timeout", "2000"], "rtu")
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
    check(p.returncode == 1 and "no answer from slave 2" in p.stderr and "timed out" not in p.stderr,
          f"a silent slave: exit 1, named ({p.stderr.strip()})")
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


def test_read_bad_data():
    """Issue 44: words that are no value of the type (a BCD digit above 9)
    read as the daemon decodes them, bad_data, never as 0 with exit 0."""
    rtu = ["--port", link, "--slave", "1", "--timeout", "2000"]
    p = read(*rtu, "--type", "bcd16", "holding:410")
    f = p.stdout.split()
    check(p.returncode == 1 and f[:4] == ["holding:410", "bcd16", "AB", "bad_data"] and "12ab" in p.stderr
          and "bad_data" in p.stderr, f"bcd16 on 0x12AB: bad_data, the word named, exit 1 ({p.stdout!r} {p.stderr!r})")
    p = read(*rtu, "--type", "bcd32", "--json", "holding:411")
    got = lines(p)
    check(p.returncode == 1 and len(got) == 1 and got[0]["value"] is None and got[0]["quality"] == "bad"
          and got[0]["reason"] == "bad_data" and got[0]["words"] == [4660, 22264],
          f"bcd32 on 1234 56f8 --json: null, quality bad, reason bad_data ({p.stdout!r})")
    p = read(*rtu, "--type", "bcd32", "--all-orders", "holding:411")
    check(p.returncode == 1 and all(f"{o}=bad_data" in p.stdout for o in ("ABCD", "CDAB", "BADC", "DCBA")),
          f"--all-orders: every column says bad_data ({p.stdout!r})")
    p = read(*rtu, "--type", "bcd16", "--all-orders", "--json", "holding:410", "holding:411")
    got = lines(p)
    check(p.returncode == 1 and len(got) == 2 and got[0]["values"] == {"AB": None, "BA": None}
          and got[0]["quality"] == {"AB": "bad_data", "BA": "bad_data"}
          and got[1]["values"] == {"AB": 1234, "BA": 3412} and got[1]["quality"] == {"AB": "good", "BA": "good"},
          f"--all-orders --json: null and bad_data per column, good ones good ({p.stdout!r})")
    p = read(*rtu, "--type", "bcd16", "--json", "holding:411")
    check(p.returncode == 0 and lines(p)[0].get("value") == 1234 and lines(p)[0].get("quality") == "good",
          f"a good BCD word still reads, quality good ({p.stdout!r})")


def test_read_nonfinite():
    """Issue 44: a float16 that is an infinity or NaN is no value for JSON:
    read says bad_data as /tags does (null, quality bad), exit 1."""
    rtu = ["--port", link, "--slave", "1", "--timeout", "2000"]
    p = read(*rtu, "--type", "float16", "--json", "holding:420", "holding:421", "holding:422", "holding:423")
    got = lines(p)
    check(p.returncode == 1 and [g.get("value") for g in got] == [None, None, None, 1]
          and [g.get("quality") for g in got] == ["bad", "bad", "bad", "good"]
          and [g.get("why") for g in got[:3]] == ["inf", "-inf", "nan"],
          f"float16 +inf, -inf, NaN: null, quality bad; 1.0 good ({p.stdout!r})")
    p = read(*rtu, "--type", "float16", "holding:420")
    check(p.returncode == 1 and p.stdout.split()[3] == "bad_data" and "(inf)" in p.stderr,
          f"for people: bad_data, and why ({p.stdout!r} {p.stderr!r})")


def test_read_frictions():
    """Issue 44: a Modicon reference gets a hint, --order with a word swap on
    a one-register type is refused."""
    rtu = ["--port", link, "--slave", "1", "--timeout", "2000"]
    p = read(*rtu, "holding:40101")
    check(p.returncode == 1 and "Illegal data address" in p.stderr and
          "40101 looks like a Modicon reference: holding register 100 is `holding:100`" in p.stderr,
          f"holding:40101: a Modicon hint ({p.stderr.strip()})")
    p = read(*rtu, "holding:4000")
    check(p.returncode == 1 and "Modicon" not in p.stderr, f"no hint for a 4-digit address ({p.stderr.strip()})")
    for typ in ("uint16", "int16", "float16", "bcd16"):
        p = read(*rtu, "--type", typ, "--order", "CDAB", "holding:1")
        check(p.returncode == 2 and "no word order" in p.stderr and not p.stdout,
              f"--order CDAB on {typ} is refused ({p.stderr.strip()})")
    p = read(*rtu, "--type", "uint16", "--order", "BA", "holding:1")
    check(p.returncode == 0 and p.stdout.split()[2] == "BA", f"--order BA on uint16 still reads ({p.stdout!r})")


run_tests("test_read_cli", (test_read, test_read_bad_data, test_read_nonfinite, test_read_frictions))
