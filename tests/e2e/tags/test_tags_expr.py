#!/usr/bin/python3
"""Computed tags (expr) in the daemon, end to end, against rtugw's simulator
on a pseudo-terminal of its own:

- SunSpec: config/sunspec.csv (the shipped template, value and scale-factor
  registers) read for one inverter; /tags gives each computed value equal to
  the one computed here from the same registers (value x 10^sf), and again
  after the scale factors are rewritten through Modbus TCP;
- quality: a silent inverter makes its inputs bad and the computed tags bad
  (reason input, the error naming the input); they come good with it;
- hostile expressions (an endless loop, a string doubled without end, endless
  recursion, a table filled without end) are bad with their reason in /tags,
  evaluated at every poll, while Modbus TCP reads through the gateway are all
  answered (and the honest computed tag keeps its value);
- a write to a computed tag without an inverse is refused with a clear error (HTTP 409);
- config/sunspec.ini checks clean; rtugw check refuses a syntax error, an unknown tag and a cycle, with
  FILE:LINE, the tag and the expression."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, check_config_refused, procs, run_tests  # noqa: E402
from tagscheck import TOKEN, put, tag_values, wait_for  # noqa: E402

SRC = os.environ.get("RTUGW_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
# SunSpec model 101's registers (protocol addresses) and what the simulator holds there
REGS = {"A": 40071, "A_SF": 40075, "W": 40083, "W_SF": 40084, "Hz": 40085, "Hz_SF": 40086, "WH": 40093,
        "WH_SF": 40095}
HOSTILE = {
    "loop": ("(function() while true do end end)() + inv1.W", "step budget"),
    "bomb": ("#(function() local s = 'x' for i = 1, 64 do s = s .. s end return s end)() + inv1.W", "memory cap"),
    "deep": ("(function(f) return 1 + f(f) end)(function(f) return 1 + f(f) end) + inv1.W", ""),
    "fill": ("(function() local t = {} for i = 1, 1e9 do t[i] = i end return 0 end)() + inv1.W", "memory cap"),
}


class PtySim:
    """`rtugw sim --link DIR/plc`, serving once it has printed its pseudo-terminal
    (test_tags_gw.py's, which runs its tests when imported)."""

    def __init__(self, d, slaves, args):
        self.link = os.path.join(d, "plc")
        self.p = subprocess.Popen([BIN, "sim", "--link", self.link, "--slaves", slaves, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(self.p)
        if not self.p.stdout.readline().startswith("/dev/"):
            print(f"FATAL: rtugw sim {' '.join(args)} did not start (exit {self.p.poll()})", flush=True)
            sys.exit(1)
        wait_for(lambda: os.path.exists(self.link), 5)

    def signal(self, sig):
        self.p.send_signal(sig)

    def kill(self):
        self.p.kill()
        self.p.wait()


def s16(v):
    return v - 65536 if v >= 32768 else v


def expected(words):
    """The engineering values, computed here from the registers (SunSpec's rule)."""
    return {"current": words["A"] * 10.0 ** s16(words["A_SF"]),
            "power": s16(words["W"]) * 10.0 ** s16(words["W_SF"]),
            "frequency": words["Hz"] * 10.0 ** s16(words["Hz_SF"]),
            "energy": (words["WH"] << 16 | words["WH+1"]) * 10.0 ** s16(words["WH_SF"])}


def close(a, b):
    return a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def computed_match(g, want):
    tags = tag_values(g)
    return all(tags.get(f"inv1.{k}", {}).get("quality") == "good" and close(tags[f"inv1.{k}"]["value"], v)
               for k, v in want.items())


def test_sunspec():
    d = tempfile.mkdtemp(prefix="rtugw-expr-")
    shutil.copy(os.path.join(SRC, "config", "sunspec.csv"), d)
    words = {"A": 1234, "A_SF": 65534, "W": 65536 - 3456, "W_SF": 65535, "Hz": 5001, "Hz_SF": 65534,
             "WH": 0x0001, "WH+1": 0x86A0, "WH_SF": 3}
    with open(os.path.join(d, "load.txt"), "w") as f:
        for k, a in REGS.items():
            f.write(f"1 holding {a} {words[k]}\n")
        f.write(f"1 holding {REGS['WH'] + 1} {words['WH+1']}\n")
    sim = PtySim(d, "1", ["--registers", "40200", "--load", os.path.join(d, "load.txt")])
    hostile = "".join(f"[tag {n}]\ndevice = inv1\nexpr = {e}\n" for n, (e, _) in HOSTILE.items())
    devices = ("[template sunspec]\ntags_file = sunspec.csv\n"
               "[device inv1]\nslave = 1\ntemplate = sunspec\naddressing = modicon\ninterval_ms = 200\n")
    g = Gateway(bus=f"port = {sim.link}\nbaud = 19200\n", devices=devices, timeout_ms=300, dir=d,
                extra=f"write_token = {TOKEN}\n" + hostile)
    want = expected(words)
    check(wait_for(lambda: computed_match(g, want), 10),
          f"SunSpec values computed from value and scale factor: {want}")

    # the scale factors change (a device may change them): the values follow
    c = g.client()
    for k, v in (("W_SF", 0), ("A_SF", 65535)):
        r = c.write_register(REGS[k], v, slave=1)
        check(not r.isError(), f"write {k} = {s16(v)} through Modbus TCP")
        words[k] = v
    c.close()
    want = expected(words)
    check(wait_for(lambda: computed_match(g, want), 10), f"the computed values follow the new scale factors: {want}")

    # hostile expressions: bad with their reason, evaluated at every poll,
    # while Modbus TCP reads are answered
    tags = tag_values(g)
    for n, (_, why) in HOSTILE.items():
        t = tags.get(n, {})
        check(t.get("quality") == "bad" and t.get("reason") == "expr" and why in t.get("error", ""),
              f"hostile '{n}' is bad with its reason ({t.get('error')})")
    first = tags["loop"]["timestamp"]
    c = g.client()
    answered, worst, t_end = 0, 0.0, time.time() + 2.0
    while time.time() < t_end:
        t0 = time.time()
        r = c.read_holding_registers(REGS["W"], 2, slave=1)
        worst = max(worst, time.time() - t0)
        answered += not r.isError() and list(r.registers) == [words["W"], words["W_SF"]]
    c.close()
    tags = tag_values(g)
    check(tags["loop"]["timestamp"] > first and tags["loop"]["quality"] == "bad",
          f"the hostile expressions ran during the reads (evaluated at {first} and {tags['loop']['timestamp']})")
    check(answered >= 20 and worst < 1.0,
          f"Modbus TCP reads answered while they ran: {answered} in 2 s, the slowest {worst * 1000:.0f} ms")
    check(computed_match(g, want), "the honest computed tags kept their values")

    # writes to a computed tag: refused
    status, body = put(g, "inv1.power", "5")
    check(status == 409 and "computed" in str(body) and "no inverse" in str(body),
          f"PUT to a computed tag without an inverse refused: {status} {body}")

    # quality: the inverter goes silent, its inputs and the computed tags go bad
    sim.signal(signal.SIGSTOP)

    def input_bad():
        t = tag_values(g).get("inv1.power", {})
        return t.get("quality") == "bad" and t.get("reason") == "input" and "inv1.W" in t.get("error", "")
    check(wait_for(input_bad, 10), f"silent inverter: the computed tag is bad, naming its input "
          f"({tag_values(g).get('inv1.power')})")
    sim.signal(signal.SIGCONT)
    check(wait_for(lambda: computed_match(g, want), 10), "the inverter back: the computed tags good again")
    rc, _ = g.stop()
    check(rc == 0, "the gateway stopped cleanly")
    sim.kill()
    shutil.rmtree(d, ignore_errors=True)


def test_check_errors():
    example = os.path.join(SRC, "config", "sunspec.ini")
    r = subprocess.run([BIN, "check", "-c", example], capture_output=True, text=True)
    check(r.returncode == 0 and "26 tags" in r.stdout + r.stderr and "warning" not in r.stdout + r.stderr,
          f"config/sunspec.ini checks clean: {(r.stdout + r.stderr).strip()[:200]}")
    d = tempfile.mkdtemp(prefix="rtugw-expr-check-")
    base = ("[bus line]\nport = sim:1\n[device plc]\nslave = 1\n"
            "[tag x]\ntable = holding\naddress = 1\ntype = uint16\n")
    cases = [
        ("[tag y]\nexpr = x +\n", ":9: tag y: expr 'x +'", "expr:1:"),
        ("[tag y]\nexpr = nosuch * 2\n", ":9: tag y: expr 'nosuch * 2'", "unknown tag 'nosuch'"),
        ("[tag y]\nexpr = os.execute('true') or x\n", ":9: tag y", "unknown tag 'os'"),
        ("[tag a]\nexpr = b + x\n[tag b]\nexpr = a + 1\n", ":9: tag a", "a cycle: a -> b -> a"),
        ("[tag y]\nexpr = x\ntable = holding\n", ":9: [tag y]", "takes no table or address"),
        ("[tag y]\nexpr = x\nwritable = true\n", ":9: [tag y]", "not writable"),
    ]
    for extra, where, why in cases:
        check_config_refused(os.path.join(d, "gw.ini"), base + extra, where, why)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_tags_expr", [test_sunspec, test_check_errors])
