#!/usr/bin/python3
"""rtugw scan: finds exactly the slaves on a line, with their speed and
format, within the bound it prints first.

A pseudo-terminal carries bytes whatever speed either end asked for, so each
peer here models a line at one speed and format: `rtugw sim --pace` reads the
master's settings back from its pty and does not hear a master at another
one (docs/drivers.md), and pymodbus's RTU server sits behind a relay of this
test's that passes bytes only while the scanner's end is set to 19200 8N1
(the same reading: TCGETS on a pty master gives the other end's termios)."""
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import termios
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, crc16, run_tests  # noqa: E402

PY = "/usr/bin/python3"
CMSPAR = 0o10000000000


def scan(*args, timeout=60):
    t0 = time.time()
    p = subprocess.run([BIN, "scan"] + list(args), capture_output=True, text=True, timeout=timeout)
    return p, time.time() - t0


def bound_of(stderr):
    """The printed bound: 'at most X s plus N waits per slave found'."""
    m = re.search(r"at most ([0-9.]+) s", stderr)
    return float(m.group(1)) if m else None


def bounds_of(stderr):
    """The printed bound's two parts: 'at most X s plus at most Y s per slave found'."""
    m = re.search(r"at most ([0-9.]+) s plus at most ([0-9.]+) s per slave found", stderr)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)


def with_crc(body):
    return bytes(body) + crc16(body)


class Line(threading.Thread):
    """Slaves of this test's own on a fresh pseudo-terminal (the scanner
    opens self.path): they answer FC 1-4 at once, as many items as asked (holding/input
    register a of slave s holds s*1000 + a, bits 1), FC 43 and 17 with exception 01.
    glitch: one stray byte right before each answer, in the same write (a
    transceiver's turn-on glitch; or a set: only those slaves' answers);
    only: the functions answered, others ignored (or a dict: slave -> its
    functions, slaves not in it answer all); twins: ids where two slaves answer at once, their bytes
    colliding on the wire (a wired AND: the CRC fails); slaves=(): a silent
    line. self.requests counts what it heard."""

    def __init__(self, slaves, glitch=False, only=None, twins=()):
        super().__init__(daemon=True)
        self.master, self.slave = os.openpty()
        for fd in (self.master, self.slave):
            a = termios.tcgetattr(fd)
            a[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
            a[0] &= ~(termios.ICRNL | termios.IXON)
            a[1] &= ~termios.OPOST
            termios.tcsetattr(fd, termios.TCSANOW, a)
        self.path = os.ttyname(self.slave)
        self.slaves, self.glitch, self.only, self.twins = set(slaves), glitch, only, set(twins)
        self.stop, self.requests = threading.Event(), 0
        self.start()

    def answer(self, req, value):
        """Shaped as asked (the gateway's line core widens a question's
        quantity to tell a stale copy from an answer: docs/line.md, I6)."""
        s, fc = req[0], req[1]
        a, n = int.from_bytes(req[2:4], "big"), max(1, min(125, int.from_bytes(req[4:6], "big")))
        if fc in (1, 2):
            return with_crc([s, fc, (n + 7) // 8] + [0xFF] * ((n + 7) // 8))
        if fc in (3, 4):
            words = [(value + a + k) & 0xFFFF for k in range(n)]
            return with_crc([s, fc, 2 * n] + [b for v in words for b in (v >> 8, v & 0xFF)])
        return with_crc([s, fc | 0x80, 1])

    def run(self):
        buf = b""
        while not self.stop.is_set():
            r, _, _ = select.select([self.master], [], [], 0.05)
            if not r:
                buf = b""
                continue
            try:
                buf += os.read(self.master, 512)
            except OSError:
                return
            while buf:
                n = {1: 8, 2: 8, 3: 8, 4: 8, 0x2B: 7, 0x11: 4}.get(buf[1] if len(buf) > 1 else 3, 0)
                if not n or (len(buf) >= n and crc16(buf[:n]) != b"\0\0"):
                    buf = buf[1:]
                    continue
                if len(buf) < n:
                    break
                req, buf = buf[:n], buf[n:]
                self.requests += 1
                s, fc = req[0], req[1]
                only = self.only.get(s) if isinstance(self.only, dict) else self.only
                if (s not in self.slaves and s not in self.twins) or (only and fc not in only):
                    continue
                out = self.answer(req, s * 1000)
                if s in self.twins:
                    other = self.answer(req, 0x5A5A)
                    out = bytes(a & b for a, b in zip(out, other))
                glitch = s in self.glitch if isinstance(self.glitch, (set, frozenset)) else self.glitch
                os.write(self.master, (b"\xff" if glitch else b"") + out)

    def close(self):
        self.stop.set()
        self.join()
        os.close(self.master)
        os.close(self.slave)


def within(p, took, what, margin=0.5):
    """The scan ended within the bound it printed first (its search part plus
    its per-slave part for each slave found), with a margin for the process
    start; and within the bound it printed last."""
    search, per_slave = bounds_of(p.stderr)
    n = len(found(p) or [])
    m = re.search(r"found in [0-9.]+ s \(bound ([0-9.]+) s\)", p.stderr)
    ok = search is not None and m is not None and took <= search + n * per_slave + margin \
        and took <= float(m.group(1)) + margin
    check(ok, f"{what}: {took:.2f} s within the printed bound ({search} s + {n} x {per_slave} s; "
              f"{m.group(1) if m else None} s; margin {margin} s)")
    return took, (search + n * per_slave if search is not None else None)


def found(p):
    try:
        return [(s["slave"], s["baud"], s["format"]) for s in json.loads(p.stdout)["slaves"]]
    except (ValueError, KeyError):
        return None


def test_scan_sim():
    d = tempfile.mkdtemp(prefix="rtugw-scan-")
    sim = subprocess.Popen([BIN, "sim", "--slaves", "3,17", "--baud", "9600", "--format", "8E1", "--pace"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = sim.stdout.readline().strip()
        p, took = scan("--port", path, "--ids", "1-20", "--baud", "19200,9600",
                       "--format", "8N1,8E1,8O1,8N2", "--json")
        bound = bound_of(p.stderr)
        check(p.returncode == 0 and found(p) == [(3, 9600, "8E1"), (17, 9600, "8E1")],
              f"sim 3,17 at 9600 8E1: exactly those, at that speed and format ({found(p)}; {p.stderr[-300:]!r})")
        # identification: 8 waits of at most ~0.3 s at 9600 for each of the two; wide margin for load
        check(bound is not None and took < bound + 2 * 8 * 0.3 + 3,
              f"within the printed bound ({took:.1f} s, bound {bound} s + identification)")
        s = json.loads(p.stdout)["slaves"][0] if found(p) else {}
        check(s.get("reads") == [1, 2, 3, 4] and s.get("device_id") is None and s.get("server_id") is None,
              f"identified: FC 1-4 answer at 0, FC 43 and 17 refused by the simulator ({s})")
        # the 8E1 slaves were not found at 8N1 or 8O1 first: the formats before 8E1 got nothing
        check("9600 8O1" not in p.stderr and "9600 8N2" not in p.stderr,
              "a speed tries no format after the one that gave good frames")
        p, _ = scan("--port", path, "--ids", "3", "--baud", "9600", "--format", "8E1", "--snippet")
        conf = os.path.join(d, "snippet.conf")
        with open(conf, "w") as f:
            f.write(p.stdout)
        c = subprocess.run([BIN, "check", "-c", conf], capture_output=True, text=True, timeout=30)
        check(p.returncode == 0 and "baud = 9600" in p.stdout and "parity = even" in p.stdout
              and "slave = 3" in p.stdout and c.returncode == 0,
              f"--snippet is a configuration rtugw check accepts ({p.stdout!r}; {c.stderr.strip()})")
        p, _ = scan("--port", path, "--ids", "1-20", "--baud", "19200", "--format", "8E1")
        check(p.returncode == 1 and "no slave answered" in p.stdout, f"nothing at 19200: exit 1 ({p.stdout!r})")
        p, took = scan("--port", path, "--ids", "1-247", "--baud", "1200", "--budget", "1")
        check(p.returncode == 1 and "not finished: 1200 8E1 from id" in p.stderr and took < 5,
              f"--budget stops the scan and says what it did not try ({took:.1f} s; {p.stderr.strip()[-200:]!r})")
        for args, what in ((["--ids", "0-5"], "1-247"), (["--baud", "14400"], "expected a list"),
                           (["--format", "9Q1"], "8E1"), ([], "--port PATH is required")):
            p, _ = scan(*(["--port", path] if args else []) + args)
            check(p.returncode == 2 and what in p.stderr, f"usage error {args}: {p.stderr.strip()}")
    finally:
        sim.terminate()
        sim.wait()
    check(sim.returncode == 0, "the simulator stopped cleanly")
    # the simulator's default format is what its usage line shows (issue 44: it showed 8N1)
    h = subprocess.run([BIN, "sim", "--help"], capture_output=True, text=True, timeout=10)
    usage_format = re.search(r"\[--format (\w+)\]", h.stdout)
    sim = subprocess.Popen([BIN, "sim", "--slaves", "3", "--baud", "9600", "--pace"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = sim.stdout.readline().strip()
        p, _ = scan("--port", path, "--ids", "3", "--baud", "9600", "--format", "8N1,8O1,8E1", "--json",
                    "--no-identify")
        check(found(p) == [(3, 9600, "8E1")] and usage_format and usage_format.group(1) == "8E1",
              f"sim's default format is 8E1, as its usage line says ({found(p)}; "
              f"{usage_format.group(0) if usage_format else None})")
    finally:
        sim.terminate()
        sim.wait()


def relay(scanner_master, server_master, stop):
    """The line at 19200 8N1: bytes cross only while the scanner's end is set
    to it (rtugw's serial driver declares parity on a pty in CMSPAR)."""
    while not stop.is_set():
        r, _, _ = select.select([scanner_master, server_master], [], [], 0.05)
        for fd in r:
            try:
                data = os.read(fd, 512)
            except OSError:
                continue
            a = termios.tcgetattr(scanner_master)
            at_speed = a[4] == termios.B19200 and not a[2] & (termios.PARENB | CMSPAR | termios.CSTOPB)
            if at_speed:
                os.write(server_master if fd == scanner_master else scanner_master, data)


def test_scan_pymodbus():
    ma, sa = os.openpty()
    mb, sb = os.openpty()
    for fd in (ma, sa, mb, sb):
        a = termios.tcgetattr(fd)
        a[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
        a[0] &= ~(termios.ICRNL | termios.IXON)
        a[1] &= ~termios.OPOST
        termios.tcsetattr(fd, termios.TCSANOW, a)
    code = f"""
from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusRtuFramer
from pymodbus.device import ModbusDeviceIdentification
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusSlaveContext, ModbusServerContext
def store(s):
    return ModbusSlaveContext(hr=ModbusSequentialDataBlock(0, [s] * 10), ir=ModbusSequentialDataBlock(0, [s] * 10),
                              co=ModbusSequentialDataBlock(0, [1] * 10), di=ModbusSequentialDataBlock(0, [1] * 10))
ident = ModbusDeviceIdentification(info_name={{"VendorName": "Acme", "ProductCode": "PX7",
                                               "MajorMinorRevision": "2.1"}})
StartSerialServer(context=ModbusServerContext(slaves={{5: store(5), 9: store(9)}}, single=False),
                  identity=ident, framer=ModbusRtuFramer, port="{os.ttyname(sb)}", baudrate=19200,
                  parity="N", stopbits=1, ignore_missing_slaves=True)
"""
    server = subprocess.Popen([PY, "-c", code], stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    t = threading.Thread(target=relay, args=(ma, mb, stop), daemon=True)
    t.start()
    try:
        time.sleep(1.5)  # pymodbus opens its port
        check(server.poll() is None, "the pymodbus server runs")
        p, took = scan("--port", os.ttyname(sa), "--ids", "1-10", "--baud", "9600,19200",
                       "--format", "8E1,8N1", "--turnaround", "100", "--json")
        bound = bound_of(p.stderr)
        check(p.returncode == 0 and found(p) == [(5, 19200, "8N1"), (9, 19200, "8N1")],
              f"pymodbus 5,9 at 19200 8N1: exactly those ({found(p)}; {p.stderr[-300:]!r})")
        check(bound is not None and took < bound + 2 * 8 * 0.4 + 3, f"within the bound ({took:.1f} s, {bound} s)")
        s = json.loads(p.stdout)["slaves"][0] if found(p) else {}
        check(s.get("device_id") == {"vendor": "Acme", "product": "PX7", "revision": "2.1"}
              and s.get("server_id") is not None and s.get("reads") == [1, 2, 3, 4],
              f"identified by FC 43/14 and FC 17, FC 1-4 read at 0 ({s})")
    finally:
        stop.set()
        server.terminate()
        server.wait()
        t.join()
        for fd in (ma, sa, mb, sb):
            os.close(fd)


def test_scan_glitch():
    """Issue 44: a slave that sends one stray byte before each answer is found
    and identified (the line core skips such noise; so does scan now)."""
    line = Line([4, 9], glitch=True)
    try:
        p, took = scan("--port", line.path, "--ids", "1-12", "--baud", "9600", "--format", "8E1", "--json")
        check(p.returncode == 0 and found(p) == [(4, 9600, "8E1"), (9, 9600, "8E1")],
              f"slaves 4 and 9 behind a glitch byte: found ({found(p)}; {p.stdout.strip()[-200:]!r})")
        s = json.loads(p.stdout)["slaves"] if found(p) else []
        check(len(s) == 2 and all(x["reads"] == [1, 2, 3, 4] and x["noise_bytes"] >= 6 for x in s)
              and json.loads(p.stdout)["garbled"] == [],
              f"identified in full (FC 1-4), the noise counted, no answer called garbled ({s})")
        print(f"  glitch: {within(p, took, 'glitch')}")
    finally:
        line.close()
    # noise on half the answers (the simulator's own fault), glued to them
    sim = subprocess.Popen([BIN, "sim", "--slaves", "5", "--baud", "9600", "--format", "8E1", "--pace",
                            "--noise-rate", "0.5", "--noise-bytes", "1", "--noise-lead-ms", "0", "--seed", "7"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = sim.stdout.readline().strip()
        for _ in range(3):
            p, took = scan("--port", path, "--ids", "1-8", "--baud", "9600", "--format", "8E1", "--json")
            s = json.loads(p.stdout)["slaves"] if found(p) else []
            check(found(p) == [(5, 9600, "8E1")] and s[0]["reads"] == [1, 2, 3, 4],
                  f"noise on half the answers: found, FC 1-4 all read ({s})")
            within(p, took, "sim noise")
    finally:
        sim.terminate()
        sim.wait()


def test_scan_fc3_only():
    """Issue 44: 10 slaves that ignore FC 43, 17, 1, 2 and 4 at 9600 8E1: the
    printed bound holds (it was 4.1 s printed, 13.7 s taken), and --budget
    is a hard deadline (--budget 2 stopped at 2.76 s)."""
    line = Line(range(1, 11), only={3})
    try:
        p, took = scan("--port", line.path, "--ids", "1-10", "--baud", "9600", "--format", "8E1", "--json")
        s = json.loads(p.stdout)["slaves"] if found(p) else []
        check(p.returncode == 0 and len(s) == 10 and all(x["reads"] == [3] and x["device_id"] is None
                                                         and x["server_id"] is None for x in s),
              f"ten slaves that answer FC 3 only: found, reads [3] ({found(p)})")
        print(f"  fc3 only: {within(p, took, 'ten FC 3 only slaves', margin=0.3)}")
        for budget in ("2", "0.5"):
            p, took = scan("--port", line.path, "--ids", "1-10", "--baud", "9600", "--format", "8E1",
                           "--budget", budget)
            check(took <= float(budget) + 0.15 and "not finished" in p.stderr,
                  f"--budget {budget}: stopped before it ({took:.2f} s; {p.stderr.strip()[-160:]!r})")
            print(f"  --budget {budget}: {took:.2f} s")
    finally:
        line.close()


def test_scan_twins():
    """Issue 44: two slaves at one id garble each other's answers: the scan
    says so at that id, and still finds the slave beside them."""
    line = Line([2], twins=[6])
    try:
        p, took = scan("--port", line.path, "--ids", "1-8", "--baud", "9600", "--format", "8E1")
        check(p.returncode == 0 and re.search(r"^2 +9600 +8E1", p.stdout, re.M)
              and "garbled answers at id 6" in p.stdout and "two slaves at one id, or a wrong baud/parity?" in p.stdout
              and "garbled answers at id 2" not in p.stdout,
              f"slave 2 found, id 6 reported garbled ({p.stdout!r})")
        within(p, took, "twins")
        p, took = scan("--port", line.path, "--ids", "6", "--baud", "9600", "--format", "8E1", "--json")
        g = json.loads(p.stdout)["garbled"] if p.stdout.startswith("{") else None
        check(p.returncode == 1 and g and g[0]["slave"] == 6 and g[0]["answers"] == 1
              and "garbled answers at id 6" in p.stderr, f"--json: garbled per id ({g}; {p.stderr.strip()!r})")
        within(p, took, "twins, --json")
    finally:
        line.close()


def test_scan_silent():
    """A silent line: nothing found, within the bound, and no garbled answer."""
    line = Line([])
    try:
        p, took = scan("--port", line.path, "--ids", "1-30", "--baud", "9600,19200", "--format", "8E1,8N1")
        check(p.returncode == 1 and "no slave answered" in p.stdout and "garbled" not in p.stdout
              and line.requests == 120, f"silent: nothing, 120 probes heard ({line.requests}; {p.stdout!r})")
        print(f"  silent: {within(p, took, 'silent line')}")
    finally:
        line.close()


if __name__ == "__main__":   # tests/e2e/scan/test_scan_api.py imports Line
    run_tests("test_scan", (test_scan_sim, test_scan_pymodbus, test_scan_glitch, test_scan_fc3_only,
                            test_scan_twins, test_scan_silent))
