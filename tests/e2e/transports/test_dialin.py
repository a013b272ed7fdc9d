#!/usr/bin/python3
"""Dial-in devices (port = listen://): a simulated DTU -- this script's socket
client, with a registration prefix and heartbeats -- connects to rtugw and
carries the frames of an RTU slave (tests/lib/rtu_slave.py on a pseudo-terminal,
which the DTU bridges to its socket as a serial server does). rtugw polls the
slaves ([poll], interval 400 ms) and a Modbus TCP client reads through [tcp]
all along. The DTU drops and dials again CYCLES times (default 100), in turn
with a FIN and without one (its old link left open and silent, as a cellular
link that died: the new connection must take the bus back, and rtugw must
close the old one). Asserted: 0 wrong values (the TCP client's reads, each
register a of slave s holding s*1000+a), polling resumes within one interval
of each reconnect (after the port's 100 ms back-off and the line's quiet
after a reconnect with answers owed, I8: the owed slave's timeout, adapted
up to 4x the configured 50 ms by the old connection's late answers, which
the DTU forwards to the new one; the margin is for a loaded machine), rtugw closes every connection
the DTU abandoned, a DTU with the wrong registration is closed and counted,
every heartbeat is dropped and counted, never taken for a frame.

    tests/e2e/transports/test_dialin.py            # 100 reconnects (make check)
    CYCLES=1000 tests/e2e/transports/test_dialin.py   # the long run (make check-dialin)
"""
import os
import random
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tty

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Daemon, check, free_port, procs, run_tests, sanitizer_env, wait_for  # noqa: E402

PY = "/usr/bin/python3"
try:
    from test_dialin_kit import reader  # noqa: E402
except ImportError as e:
    print(f"missing {e.name}: install python3-pymodbus (scripts/bootstrap does)")
    sys.exit(1)

D = tempfile.mkdtemp(prefix="rtugw-dialin-")
CYCLES = int(os.environ.get("CYCLES", "100"))
INTERVAL = 0.4
REGISTER = bytes.fromhex("00fe") + b"site-17"
HEARTBEAT = b"\xfa\xfbHB"


class Gw(Daemon):
    def __init__(self, listen_port):
        self.http_port, self.tcp_port = free_port(), free_port()
        cfg = os.path.join(D, "rtugw.conf")
        with open(cfg, "w") as f:
            f.write(f"""[gateway]
log_level = info
[bus dtu]
port = listen://127.0.0.1:{listen_port}
register = hex:{REGISTER.hex()}
heartbeat = hex:{HEARTBEAT.hex()}
response_timeout_ms = 50
retries = 1
[device one]
bus = dtu
slave = 1
dead_after = 0
[device two]
bus = dtu
slave = 2
dead_after = 0
[poll p1]
device = one
function = 3
address = 0
count = 4
interval_ms = {int(INTERVAL * 1000)}
[poll p2]
device = two
function = 3
address = 10
count = 4
interval_ms = {int(INTERVAL * 1000)}
[tcp]
port = {self.tcp_port}
default_bus = dtu
[http]
port = {self.http_port}
""")
        self.log = open(os.path.join(D, "gw.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", cfg], stdout=self.log, stderr=self.log, env=sanitizer_env())
        procs.append(self.p)
        check(wait_for(lambda: "listen 127.0.0.1" in self.log_text(), 10), "rtugw listens for its DTU")

    def metric(self, name):
        return sum(v for k, v in self.metrics().items() if k == name or k.startswith(name + "{"))


class Dtu:
    """A DTU: the serial side is the pty rtu_slave.py serves, the network
    side a TCP connection to rtugw, opened and dropped by the test."""

    def __init__(self, link, port):
        self.serial = os.open(link, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.serial)
        self.port = port
        self.sock = None
        self.first_request = None    # time of the first request on the current connection
        self.requests = 0
        self.last_io = self.last_hb = time.monotonic()

    def connect(self, prefix=REGISTER):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(prefix)
        # heartbeats sent 60 ms or more before a connection ended: rtugw had
        # them (a takeover ends the old connection unread: later ones may be lost)
        now = time.monotonic()
        self.settled_hb = getattr(self, "settled_hb", 0) + sum(t < now - 0.06 for t in getattr(self, "hb_times", []))
        self.hb_times = []
        self.sock, self.first_request, self.t_connect = s, None, time.monotonic()
        return s

    def pump(self, seconds, heartbeat_every=0.12):
        """Bridges serial and socket for a while, with heartbeats on a quiet link."""
        end = time.monotonic() + seconds
        last_io, last_hb = self.last_io, self.last_hb
        while time.monotonic() < end:
            r, _, _ = select.select([self.serial, self.sock], [], [], 0.01)
            now = time.monotonic()
            if self.sock in r:
                data = self.sock.recv(512)
                if not data:
                    return False      # rtugw closed it
                if self.first_request is None:
                    self.first_request = now
                self.requests += 1
                os.write(self.serial, data)
                last_io = now
            if self.serial in r:
                self.sock.sendall(os.read(self.serial, 512))
                last_io = now
            if now - last_io > 0.03 and now - last_hb > heartbeat_every:
                self.sock.sendall(HEARTBEAT)
                self.heartbeats = getattr(self, "heartbeats", 0) + 1
                self.hb_times.append(now)
                last_hb = now
            self.last_io, self.last_hb = last_io, last_hb
        return True


def stranger(port, prefix):
    """A DTU of another site dials in with its own registration: is it closed?"""
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(prefix)
    s.settimeout(3)
    try:
        closed = s.recv(1) == b""
    except ConnectionResetError:
        closed = True
    s.close()
    return closed


def pick(rng):
    unit = rng.choice((1, 2))
    addr, count = rng.randint(0, 50), rng.randint(1, 6)
    return unit, addr, count, [(unit * 1000 + a) & 0xFFFF for a in range(addr, addr + count)], f"slave {unit}"


def test_dialin_reconnects():
    link = os.path.join(D, "plc")
    slave = subprocess.Popen([PY, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "rtu_slave.py"),
                              "--link", link, "--slaves", "1,2"], stdout=subprocess.PIPE,
                             stderr=open(os.path.join(D, "slave.log"), "w"))
    procs.append(slave)
    slave.stdout.readline()
    listen_port = free_port()
    gw = Gw(listen_port)
    dtu = Dtu(link, listen_port)

    # a stranger with the wrong registration is closed and counted
    closed = stranger(listen_port, b"\x00\xffsite-99")
    check(closed and wait_for(lambda: gw.metric("rtugw_bus_dialin_rejected_total") == 1, 3),
          "a DTU with the wrong registration is closed and counted")

    # while the DTU is connected, a stranger dials in: closed, counted, and
    # the DTU keeps its link (only a registered newcomer takes the bus)
    dtu.connect()
    dtu.pump(0.6)
    before = dtu.requests
    closed = stranger(listen_port, b"\x00\xfesite-18")
    kept = dtu.pump(0.6)
    check(closed and kept and dtu.requests > before and gw.metric("rtugw_bus_dialin_takeovers_total") == 0 and
          gw.metric("rtugw_bus_dialin_rejected_total") == 2,
          "a stranger dialling in while the DTU is connected is closed and counted; the DTU keeps its link")
    dtu.sock.close()

    out = dict(good=0, wrong=0, exceptions=0, errors=0)
    stop = threading.Event()
    t = threading.Thread(target=reader, args=(gw.tcp_port, stop, out, pick, 0.03))
    resumes, abandoned, not_closed = [], [], 0
    rng = random.Random(7)
    t0 = time.time()
    dtu.connect()
    t.start()
    for cycle in range(CYCLES):
        # connected until polling resumes (or a bound past the assertion's),
        # then a little longer: answers and polls are in flight at the drop
        end = time.monotonic() + INTERVAL + 1.0
        while dtu.first_request is None and time.monotonic() < end:
            dtu.pump(0.02)
        dtu.pump(rng.uniform(0.05, 0.2))
        if dtu.first_request is not None:
            resumes.append(dtu.first_request - dtu.t_connect)
        else:
            resumes.append(float("inf"))
        old = dtu.sock
        if cycle % 2:
            # a FIN: rtugw sees the hang-up and closes its side (read what it
            # still sends first, or close() would answer it with a reset)
            old.shutdown(socket.SHUT_WR)
            old.settimeout(1)
            try:
                while old.recv(4096):
                    pass
            except OSError:
                pass
            old.close()
        else:
            abandoned.append(old)       # silent: the new connection must take the bus back
        dtu.connect()
        for a in abandoned[-1:] if cycle % 2 == 0 else []:
            a.settimeout(2)
            try:
                gone = a.recv(4096) == b"" or a.recv(4096) == b""
            except (ConnectionResetError, socket.timeout):
                gone = False if isinstance(sys.exc_info()[1], socket.timeout) else True
            if not gone:
                not_closed += 1
            a.close()
    dtu.pump(0.5)
    stop.set()
    t.join()
    dt = time.time() - t0
    heartbeats = gw.metric("rtugw_bus_heartbeats_total")
    finite = sorted(r for r in resumes if r != float("inf"))
    worst = max(resumes)
    print(f"{CYCLES} reconnects in {dt:.1f} s; reads {out}; resume after connect: median "
          f"{finite[len(finite) // 2] * 1000:.0f} ms, p90 {finite[int(len(finite) * 0.9)] * 1000:.0f} ms, max "
          f"{worst * 1000:.0f} ms; takeovers {gw.metric('rtugw_bus_dialin_takeovers_total'):.0f}, accepted "
          f"{gw.metric('rtugw_bus_dialin_accepted_total'):.0f}, heartbeats dropped {heartbeats:.0f} of "
          f"{getattr(dtu, 'heartbeats', 0)} sent; " + ", ".join(
              f"{m} {gw.metric('rtugw_bus_' + m + '_total'):.0f}" for m in
              ("crc_errors", "timeouts", "retries", "reconnect_holds", "unavailable", "noise_bytes", "late_answers")),
          flush=True)
    check(out["wrong"] == 0 and out["good"] >= CYCLES // 2, f"0 wrong values ({out['good']} good reads)")
    check(worst <= INTERVAL + 0.45, f"polling resumes within one interval ({INTERVAL * 1000:.0f} ms) of each "
                                    f"reconnect, 450 ms margin (worst {worst * 1000:.0f} ms)")
    check(not_closed == 0, f"rtugw closes every connection its DTU abandoned ({not_closed} left open)")
    check(gw.metric("rtugw_bus_dialin_takeovers_total") >= CYCLES // 2, "every silent reconnect took the bus back")
    check(gw.metric("rtugw_bus_dialin_rejected_total") == 2, "no DTU of the test's own was rejected")
    check(heartbeats >= dtu.settled_hb > CYCLES // 2,
          f"heartbeats are dropped and counted ({heartbeats:.0f} >= {dtu.settled_hb} sent 60 ms before a drop)")
    check(gw.stop() == 0, "rtugw stops cleanly")


run_tests("test_dialin", [test_dialin_reconnects], cleanup=[] if os.environ.get("KEEP") else [D])
