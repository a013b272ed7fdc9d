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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, check, run_tests  # noqa: E402

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


run_tests("test_scan", (test_scan_sim, test_scan_pymodbus))
