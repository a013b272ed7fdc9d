#!/usr/bin/python3
"""Several dial-in buses on one listening port (port = listen://, the same
ADDR:PORT for three buses), told apart by their registrations. Three
simulated DTUs -- this script's socket clients, each with its registration
prefix and heartbeats -- carry the frames of three `rtugw sim` slaves on
pseudo-terminals, each loaded with values of its own (holding register a of
slave s behind DTU k holds k*10000 + s*100 + a), so a value that crossed to
another bus's line would show. Each bus polls slave 1 at the SAME addresses
as the others and slave 2 at DIFFERENT ones; a Modbus TCP client reads every
bus all along ([tcp] unitN = bus:slave). The DTUs drop and dial again
CYCLES times (default 60) in random order, with a FIN or silently (a
cellular link that died: the new connection must take the bus back), the
registration sometimes in two pieces. Meanwhile an impostor dials in with a
registration no bus has, and another sends half of one bus's registration
and stalls.

Asserted: 0 wrong values (each bus's reads come from its own DTU's
simulator), polling resumes within one interval of each reconnect (450 ms
margin for a loaded machine, as tests/e2e/transports/test_dialin.py), every abandoned
connection closed by rtugw, the impostor closed and counted once per port
(rtugw_bus_dialin_unclaimed_total, on each bus), the staller closed after
its connect timeout and counted on the one bus whose registration it began
(rtugw_bus_dialin_rejected_total), no DTU of the test's own rejected, and
the other DTUs keep their links through all of it. test_out_of_fds: a DTU
dialling in while rtugw has no fd left (prlimit) waits in the backlog with
no loop spinning, and gets its bus once fds are back.

    tests/e2e/transports/test_dialin_shared.py            # 60 reconnects (make check)
    CYCLES=300 tests/e2e/transports/test_dialin_shared.py   # the long run (make check-dialin)
"""
import os
import random
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tty

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Daemon, check, free_port, procs, run_tests, sanitizer_env, wait_for  # noqa: E402

try:
    from test_dialin_kit import reader  # noqa: E402
except ImportError as e:
    print(f"missing {e.name}: install python3-pymodbus (scripts/bootstrap does)")
    sys.exit(1)

D = tempfile.mkdtemp(prefix="rtugw-dialin-shared-")
CYCLES = int(os.environ.get("CYCLES", "60"))
INTERVAL = 0.4
CONNECT_TIMEOUT = 1.0
HEARTBEAT = b"\xfa\xfbHB"
# none begins another; two share their first bytes (a half of SOUTH's fits it alone)
BUSES = {"north": (1, b"\x00\xfeNORTH-7"), "south": (2, b"\x00\xfeSOUTH-7"), "east": (3, b"EAST-3")}
SLAVE2_ADDR = {"north": 5, "south": 10, "east": 15}   # different addresses; slave 1 polled at 0 on every bus


def value(k, slave, addr):
    return k * 10000 + slave * 100 + addr


class Gw(Daemon):
    def __init__(self, listen_port):
        self.http_port, self.tcp_port = free_port(), free_port()
        text = "[gateway]\nlog_level = info\n"
        units = []
        for name, (k, reg) in BUSES.items():
            text += (f"[bus {name}]\nport = listen://127.0.0.1:{listen_port}\nregister = hex:{reg.hex()}\n"
                     f"heartbeat = hex:{HEARTBEAT.hex()}\nresponse_timeout_ms = 50\nretries = 1\n"
                     f"connect_timeout_ms = {int(CONNECT_TIMEOUT * 1000)}\n")
            for s in (1, 2):
                text += f"[device {name}{s}]\nbus = {name}\nslave = {s}\ndead_after = 0\n"
                units.append(f"unit{k * 10 + s} = {name}:{s}\n")
            text += (f"[poll {name}1]\ndevice = {name}1\nfunction = 3\naddress = 0\ncount = 4\n"
                     f"interval_ms = {int(INTERVAL * 1000)}\n"
                     f"[poll {name}2]\ndevice = {name}2\nfunction = 3\naddress = {SLAVE2_ADDR[name]}\ncount = 4\n"
                     f"interval_ms = {int(INTERVAL * 1000)}\n")
        text += f"[tcp]\nport = {self.tcp_port}\ndefault_bus = north\n" + "".join(units)
        text += f"[http]\nport = {self.http_port}\n"
        self.cfg = cfg = os.path.join(D, "rtugw.conf")
        with open(cfg, "w") as f:
            f.write(text)
        self.log = open(os.path.join(D, "gw.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", cfg], stdout=self.log, stderr=self.log, env=sanitizer_env())
        procs.append(self.p)
        check(wait_for(lambda: self.log_text().count("shared by 3 buses") >= 3, 10),
              "the three buses listen on one shared port")

    def metric(self, name, bus=None):
        m = self.metrics()
        if bus:
            return m.get(f'{name}{{bus="{bus}"}}', 0)
        return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


class Dtu:
    """A DTU: the serial side a pty `rtugw sim` serves, the network side a
    TCP connection to rtugw that the test opens and drops."""

    def __init__(self, name, port):
        self.name = name
        self.k, self.reg = BUSES[name]
        link = os.path.join(D, f"plc-{name}")
        values = os.path.join(D, f"values-{name}")
        with open(values, "w") as f:
            for s in (1, 2):
                f.write(f"{s} holding 0 " + " ".join(str(value(self.k, s, a)) for a in range(40)) + "\n")
        self.sim = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1,2", "--load", values],
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(D, f"sim-{name}.log"), "w"))
        procs.append(self.sim)
        self.sim.stdout.readline()
        self.serial = os.open(link, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.serial)
        self.port = port
        self.sock = None
        self.resumes = []
        self.first_request = None
        self.last_io = self.last_hb = time.monotonic()
        self.heartbeats = 0

    def connect(self, rng=None):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rng and rng.random() < 0.3:    # the registration in two pieces, as a slow link may send it
            cut = rng.randint(1, len(self.reg) - 1)
            s.sendall(self.reg[:cut])
            time.sleep(0.02)
            s.sendall(self.reg[cut:])
        else:
            s.sendall(self.reg)
        self.sock, self.first_request, self.t_connect = s, None, time.monotonic()

    def on_socket(self, now):
        data = self.sock.recv(512)
        if not data:
            return False
        if self.first_request is None:
            self.first_request = now
        os.write(self.serial, data)
        self.last_io = now
        return True

    def on_serial(self, now):
        data = os.read(self.serial, 512)
        try:
            self.sock.sendall(data)
        except OSError:
            pass
        self.last_io = now

    def heartbeat(self, now):
        if now - self.last_io > 0.03 and now - self.last_hb > 0.12:
            try:
                self.sock.sendall(HEARTBEAT)
                self.heartbeats += 1
            except OSError:
                pass
            self.last_hb = now


def pump(dtus, seconds, until=None):
    """Bridges every DTU for a while (or until until() is true); the names of
    DTUs whose connection rtugw closed."""
    end = time.monotonic() + seconds
    lost = set()
    while time.monotonic() < end and not (until and until()):
        fds = [d.serial for d in dtus] + [d.sock for d in dtus if d.name not in lost]
        r, _, _ = select.select(fds, [], [], 0.01)
        now = time.monotonic()
        for d in dtus:
            if d.sock in r and d.name not in lost and not d.on_socket(now):
                lost.add(d.name)
            if d.serial in r:
                d.on_serial(now)
            if d.name not in lost:
                d.heartbeat(now)
    return lost


def closed_by_peer(s, timeout):
    """Whether rtugw closes s within timeout (what it sent before is read and dropped)."""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            s.settimeout(max(end - time.monotonic(), 0.001))
            if s.recv(4096) == b"":
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        pass
    return False


def intruders(port, out):
    """An impostor (a registration no bus has) and a staller (half of
    south's, then nothing): each must be closed, the staller after its
    connect timeout."""
    time.sleep(1.5)
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"\x00\xfeWEST-9")
    out["impostor_closed"] = closed_by_peer(s, 3)
    s.close()
    time.sleep(0.5)
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    t0 = time.monotonic()
    s.sendall(BUSES["south"][1][:5])
    out["staller_closed"] = closed_by_peer(s, CONNECT_TIMEOUT + 3)
    out["staller_after"] = time.monotonic() - t0
    s.close()


def pick(rng):
    name = rng.choice(list(BUSES))
    k, slave = BUSES[name][0], rng.choice((1, 2))
    addr, count = rng.randint(0, 30), rng.randint(1, 6)
    return k * 10 + slave, addr, count, [value(k, slave, a) for a in range(addr, addr + count)], \
        f"bus {name} slave {slave}"


def test_dialin_shared_port():
    listen_port = free_port()
    dtus = [Dtu(name, listen_port) for name in BUSES]
    gw = Gw(listen_port)
    # rtugw check says which registration goes to which bus
    out = subprocess.run([BIN, "check", "-c", gw.cfg], capture_output=True, text=True, timeout=30).stdout
    check(all(f"dial-in 127.0.0.1:{listen_port}: registration hex:{reg.hex()} (\"" in out and
              f"-> bus {name} (3 buses share the port)" in out for name, (k, reg) in BUSES.items()),
          "rtugw check lists each registration and its bus")
    rng = random.Random(11)
    for d in dtus:
        d.connect()
    lost = pump(dtus, 3, until=lambda: all(d.first_request for d in dtus))
    check(not lost and all(d.first_request for d in dtus), "each DTU registers and its bus polls it")

    out = dict(good=0, wrong=0, exceptions=0, errors=0)
    intr = {}
    stop = threading.Event()
    t = threading.Thread(target=reader, args=(gw.tcp_port, stop, out, pick, 0.015))
    ti = threading.Thread(target=intruders, args=(listen_port, intr))
    t.start()
    ti.start()
    abandoned, not_closed, unexpected = [], 0, []
    t0 = time.time()
    for cycle in range(CYCLES):
        d = rng.choice(dtus)
        old = d.sock
        if cycle % 2:
            old.shutdown(socket.SHUT_WR)   # a FIN; what rtugw still sends is the pump's to forward
            abandoned.append((old, True))
        else:
            abandoned.append((old, False))  # silent: the new connection must take the bus back
        d.connect(rng)
        # the others keep being pumped until the one reconnected is polled again,
        # then a little longer, so a drop finds polls in flight
        end = time.monotonic() + INTERVAL + 1.0
        lost = pump(dtus, end - time.monotonic(), until=lambda: d.first_request is not None)
        lost |= pump(dtus, rng.uniform(0.05, 0.25))
        unexpected += sorted(lost)
        d.resumes.append(d.first_request - d.t_connect if d.first_request else float("inf"))
        for s, fin in abandoned:
            if not closed_by_peer(s, 0.01 if fin else 2):
                if not fin:
                    not_closed += 1
            s.close()
        abandoned = []
        for x in dtus:   # a DTU whose connection rtugw closed dials again at once
            if x.name in lost:
                x.connect(rng)
    pump(dtus, 0.5)
    ti.join()
    stop.set()
    t.join()
    dt = time.time() - t0
    resumes = [r for d in dtus for r in d.resumes]
    finite = sorted(r for r in resumes if r != float("inf"))
    worst = max(resumes)
    per = {d.name: len(d.resumes) for d in dtus}
    print(f"{CYCLES} reconnects ({per}) in {dt:.1f} s; reads {out}; resume after connect: median "
          f"{finite[len(finite) // 2] * 1000:.0f} ms, p10 {finite[len(finite) // 10] * 1000:.0f} ms, p90 "
          f"{finite[int(len(finite) * 0.9)] * 1000:.0f} ms, max {worst * 1000:.0f} ms; intruders {intr}; " +
          ", ".join(f"{b}: accepted {gw.metric('rtugw_bus_dialin_accepted_total', b):.0f} takeovers "
                    f"{gw.metric('rtugw_bus_dialin_takeovers_total', b):.0f} rejected "
                    f"{gw.metric('rtugw_bus_dialin_rejected_total', b):.0f} unclaimed "
                    f"{gw.metric('rtugw_bus_dialin_unclaimed_total', b):.0f} heartbeats "
                    f"{gw.metric('rtugw_bus_heartbeats_total', b):.0f}" for b in BUSES), flush=True)
    check(out["wrong"] == 0 and out["good"] >= CYCLES, f"0 wrong values: each bus's reads come from its own DTU "
                                                      f"({out['good']} good reads)")
    check(worst <= INTERVAL + 0.45, f"polling resumes within one interval ({INTERVAL * 1000:.0f} ms) of each "
                                    f"reconnect, 450 ms margin (worst {worst * 1000:.0f} ms)")
    check(not_closed == 0, f"rtugw closes every connection a DTU abandoned ({not_closed} left open)")
    check(not unexpected, f"no DTU lost its link but by its own reconnect ({unexpected})")
    check(intr.get("impostor_closed") and
          all(gw.metric("rtugw_bus_dialin_unclaimed_total", b) == 1 for b in BUSES),
          "an impostor with a registration no bus has is closed and counted once for the port, on each bus")
    check(intr.get("staller_closed") and CONNECT_TIMEOUT - 0.1 <= intr.get("staller_after", 0) <= CONNECT_TIMEOUT + 1,
          f"half a registration, then silence: closed after the connect timeout ({intr.get('staller_after', 0):.2f} s)")
    check(gw.metric("rtugw_bus_dialin_rejected_total", "south") == 1 and
          gw.metric("rtugw_bus_dialin_rejected_total", "north") == 0 and
          gw.metric("rtugw_bus_dialin_rejected_total", "east") == 0,
          "the staller counted on the one bus whose registration it began; no DTU of the test's own rejected")
    check(all(gw.metric("rtugw_bus_heartbeats_total", d.name) > 0 for d in dtus),
          "every bus drops its DTU's heartbeats")
    check(gw.stop() == 0, "rtugw stops cleanly")


def test_out_of_fds():
    """A DTU dials in while rtugw has no fd left: the connection waits in the
    backlog, no loop spins on the listening socket (the hub takes it out of
    its set for a while), and once fds are back the DTU gets its bus."""
    prlimit = "/usr/bin/prlimit"
    check(os.access(prlimit, os.X_OK), "prlimit (util-linux) is there")
    gw = Gw(free_port())
    port = int(open(gw.cfg).read().split("listen://127.0.0.1:")[1].split("\n")[0])
    pid = gw.p.pid
    fds = set(int(x) for x in os.listdir(f"/proc/{pid}/fd"))
    lowest = min(set(range(len(fds) + 1)) - fds)
    subprocess.run([prlimit, "--pid", str(pid), f"--nofile={lowest}:4096"], check=True)

    def cpu():
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(BUSES["north"][1])
    time.sleep(0.2)
    c0 = cpu()
    time.sleep(1.0)
    spent = cpu() - c0
    up_before = "bus north: port open" in gw.log_text()
    subprocess.run([prlimit, "--pid", str(pid), "--nofile=1024:4096"], check=True)
    check(not up_before and spent < 0.2, f"out of fds: the DTU waits, no loop spins ({spent:.2f} s of CPU in 1 s)")
    check(wait_for(lambda: "bus north: port open" in gw.log_text(), 2), "fds back: the DTU gets its bus")
    s.close()
    check(gw.stop() == 0, "rtugw stops cleanly")


run_tests("test_dialin_shared", [test_dialin_shared_port, test_out_of_fds], cleanup=[] if os.environ.get("KEEP") else [D])
