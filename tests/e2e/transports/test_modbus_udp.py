#!/usr/bin/python3
"""Modbus UDP both ways, against peers nobody here wrote, on a lossy path.

    pymodbus ModbusUdpClient x2 --relay A--> rtugw [udp] --> bus dev, port = udp://
        --relay B--> pymodbus UDP server (slave 1: unique values, slave 2: all equal)

Each relay is the test's own: it forwards every datagram both ways, drops 1 %,
duplicates 1 % and delays 3 % by 5-60 ms (so some arrive out of order and
after their attempt gave up), and relay B also sends, for 1 % of the device's
answers, a forged copy with other values from a socket of its own (another
source port). Asserted:
  - 0 wrong answers: every answer the client takes for its request (its
    transaction id) has the values the device holds at the addresses asked
    (slave 1: each register its own value; slave 2: every register equal);
  - every loss on the device's side is a retry or a timeout of the bus
    (rtugw_bus_retries_total + rtugw_bus_timeouts_total >= datagrams lost
    there), and duplicates and late answers are counted as stale, the forged
    ones as foreign, none delivered;
  - the front end: a malformed datagram is dropped and counted (bad_mbap),
    more than max_pending requests of one address in flight are answered
    0x06 and counted (refused_inflight), answers go to the source port with
    the request's transaction id.
"""
import asyncio
import heapq
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Daemon, check, free_port, procs, run_tests, sanitizer_env, wait_for  # noqa: E402

PY = "/usr/bin/python3"
try:
    from pymodbus.client import AsyncModbusUdpClient
except ImportError as e:
    print(f"missing {e.name}: install python3-pymodbus (scripts/bootstrap does)")
    sys.exit(1)

D = tempfile.mkdtemp(prefix="rtugw-udp-")
N_REG = 200
EQUAL = 4242


def unique(addr):
    return (addr * 7 + 1000) & 0xFFFF


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Relay(threading.Thread):
    """A UDP relay from listen_port to target, with faults. Each client
    address gets an upstream socket of its own, so answers find their way."""

    def __init__(self, target, seed, forge=False):
        super().__init__(daemon=True)
        self.rng = random.Random(seed)
        self.target = target
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.port = self.front.getsockname()[1]
        self.stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.forge = forge
        self.ups = {}          # client addr -> upstream socket
        self.back = {}         # upstream socket -> client addr
        self.heap = []         # (time, n, socket, data, addr)
        self.n = 0
        self.stop = False
        self.counts = {"up": 0, "down": 0, "dropped_up": 0, "dropped_down": 0, "duplicated": 0, "delayed": 0,
                       "forged": 0}

    def send_later(self, sock, data, addr, direction):
        self.counts[direction] += 1
        r = self.rng.random()
        if r < 0.01:
            self.counts["dropped_" + direction] += 1
            return
        copies = 2 if r < 0.02 else 1
        if copies == 2:
            self.counts["duplicated"] += 1
        for _ in range(copies):
            delay = 0.0
            if self.rng.random() < 0.03:
                delay = self.rng.uniform(0.005, 0.06)
                self.counts["delayed"] += 1
            self.n += 1
            heapq.heappush(self.heap, (time.monotonic() + delay, self.n, sock, data, addr))
        if direction == "down" and self.forge and self.rng.random() < 0.01 and len(data) > 9:
            # the same header (its transaction id), other values, from another port
            forged = data[:9] + bytes((b ^ 0x5A) for b in data[9:])
            self.counts["forged"] += 1
            self.n += 1
            heapq.heappush(self.heap, (time.monotonic(), self.n, self.stranger, forged, addr))

    def run(self):
        import select
        while not self.stop:
            now = time.monotonic()
            while self.heap and self.heap[0][0] <= now:
                _, _, sock, data, addr = heapq.heappop(self.heap)
                try:
                    sock.sendto(data, addr)
                except OSError:
                    pass
            wait = max(0.0, min(0.01, self.heap[0][0] - now)) if self.heap else 0.01
            ready, _, _ = select.select([self.front] + list(self.back), [], [], wait)
            for s in ready:
                data, addr = s.recvfrom(2048)
                if s is self.front:
                    up = self.ups.get(addr)
                    if up is None:
                        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        up.bind(("127.0.0.1", 0))
                        self.ups[addr], self.back[up] = up, addr
                    self.send_later(up, data, self.target, "up")
                else:
                    self.send_later(self.front, data, self.back[s], "down")


def start_device(port):
    script = os.path.join(D, "device.py")
    with open(script, "w") as f:
        f.write(f"""import logging
logging.basicConfig(level=logging.CRITICAL)
from pymodbus.server import StartUdpServer
from pymodbus.datastore import ModbusSequentialDataBlock as B, ModbusSlaveContext, ModbusServerContext
one = ModbusSlaveContext(hr=B(0, [({N_REG} and (a * 7 + 1000) & 0xFFFF) for a in range({N_REG})]), zero_mode=True)
two = ModbusSlaveContext(hr=B(0, [{EQUAL}] * {N_REG}), zero_mode=True)
StartUdpServer(context=ModbusServerContext(slaves={{1: one, 2: two}}, single=False), address=("127.0.0.1", {port}))
""")
    log = open(os.path.join(D, "device.log"), "w")
    p = subprocess.Popen([PY, script], stdout=log, stderr=log)
    procs.append(p)
    return p


class Gw(Daemon):
    def __init__(self, device_port, extra=""):
        self.http_port, self.udp_port = free_port(), free_udp_port()
        cfg = os.path.join(D, "rtugw.conf")
        with open(cfg, "w") as f:
            f.write(f"""[gateway]
log_level = info
[bus dev]
port = udp://localhost:{device_port}
response_timeout_ms = 80
retries = 3
queue_depth = 64
[device one]
bus = dev
slave = 1
dead_after = 0
[device two]
bus = dev
slave = 2
dead_after = 0
[udp]
listen = 127.0.0.1:{self.udp_port}
max_pending = 4
unit11 = dev:1
[tcp]
port = {free_port()}
[http]
port = {self.http_port}
{extra}""")
        self.log = open(os.path.join(D, "gw.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", cfg], stdout=self.log, stderr=self.log, env=sanitizer_env())
        procs.append(self.p)
        check(wait_for(lambda: "port open" in self.log_text(), 10), "the udp:// port opens (a host name, resolved)")

    def metric(self, name):
        return sum(v for k, v in self.metrics().items() if k == name or k.startswith(name + "{"))


def mbap(tid, unit, pdu):
    return struct.pack(">HHHB", tid, 0, len(pdu) + 1, unit) + pdu


async def client_run(port, seed, n, out):
    # pymodbus 3.0's synchronous UDP client reads a datagram in two recv()s
    # (8 bytes, then the rest), which UDP cannot do; its asyncio client
    # reads whole datagrams and pairs answers by transaction id.
    rng = random.Random(seed)
    c = AsyncModbusUdpClient("127.0.0.1", port=port, timeout=0.4, retries=0)
    await c.connect()
    for _ in range(n):
        unit = rng.choice((1, 2, 11))
        count = rng.randint(1, 12)
        addr = rng.randint(0, N_REG - count)
        try:
            rr = await asyncio.wait_for(c.read_holding_registers(addr, count, slave=unit), 0.5)
        except Exception as e:   # no answer within the timeout
            out["lost"] += 1
            if out["lost"] < 3:
                print("client:", repr(e))
            continue
        if rr is None or not hasattr(rr, "registers"):
            out["exceptions" if hasattr(rr, "exception_code") else "lost"] += 1
            continue
        want = [EQUAL] * count if unit == 2 else [unique(a) for a in range(addr, addr + count)]
        if rr.registers != want:
            out["wrong"] += 1
            print(f"WRONG unit {unit} addr {addr} count {count}: {rr.registers} != {want}")
        else:
            out["good"] += 1


def client_loop(port, seed, n, out):
    asyncio.run(client_run(port, seed, n, out))


def test_lossy_path():
    dev_port = free_udp_port()
    start_device(dev_port)
    time.sleep(0.8)
    relay_b = Relay(("127.0.0.1", dev_port), seed=2, forge=True)
    relay_b.start()
    gw = Gw(relay_b.port)
    relay_a = Relay(("127.0.0.1", gw.udp_port), seed=1)
    relay_a.start()
    outs = [dict(good=0, wrong=0, lost=0, exceptions=0) for _ in range(2)]
    threads = [threading.Thread(target=client_loop, args=(relay_a.port, 10 + i, 600, outs[i])) for i in range(2)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    time.sleep(0.5)   # late datagrams land
    relay_a.stop = relay_b.stop = True
    good, wrong = sum(o["good"] for o in outs), sum(o["wrong"] for o in outs)
    lost, exc = sum(o["lost"] for o in outs), sum(o["exceptions"] for o in outs)
    retries, timeouts = gw.metric("rtugw_bus_retries_total"), gw.metric("rtugw_bus_timeouts_total")
    stale, foreign = gw.metric("rtugw_bus_stale_answers_total"), gw.metric("rtugw_bus_foreign_datagrams_total")
    losses_b = relay_b.counts["dropped_up"] + relay_b.counts["dropped_down"]
    print(f"{good} good, {wrong} wrong, {lost} lost at the client, {exc} exceptions in {dt:.1f} s; "
          f"relay A {relay_a.counts}; relay B {relay_b.counts}; bus retries {retries:.0f} timeouts {timeouts:.0f} "
          f"stale {stale:.0f} foreign {foreign:.0f}; udp requests {gw.metric('rtugw_udp_requests_total'):.0f} "
          f"answers {gw.metric('rtugw_udp_answers_total'):.0f}")
    check(wrong == 0, "0 wrong answers through two lossy UDP legs (unique and equal values)")
    check(good >= 1100, f"most requests answered ({good} of 1200; the rest lost on the client's leg)")
    check(losses_b > 0 and retries + timeouts >= losses_b,
          f"every loss on the device's leg is a retry or a timeout ({retries:.0f} + {timeouts:.0f} >= {losses_b})")
    check(relay_b.counts["duplicated"] == 0 or stale > 0, "duplicated and late answers are counted as stale")
    check(relay_b.counts["forged"] > 0 and foreign >= relay_b.counts["forged"] * 0.9,
          f"forged answers from another port are counted as foreign ({foreign:.0f} of {relay_b.counts['forged']})")
    check(gw.stop() == 0, "rtugw stops cleanly")


def test_front_bounds():
    dev_port = free_udp_port()
    # no device behind: every request waits its timeouts, so they pile up in flight
    gw = Gw(dev_port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(b"\x00\x01\x00\x07\x00\x06\x01\x03\x00\x00\x00\x01", ("127.0.0.1", gw.udp_port))   # protocol 7
    s.sendto(b"\x00\x02\x00\x00\x00\x09\x01\x03\x00\x00\x00\x01", ("127.0.0.1", gw.udp_port))   # length lies
    s.sendto(b"hello", ("127.0.0.1", gw.udp_port))
    check(wait_for(lambda: gw.metric("rtugw_udp_bad_mbap_total") == 3, 3), "3 malformed datagrams counted")
    for tid in range(100, 110):
        s.sendto(mbap(tid, 1, b"\x03\x00\x00\x00\x01"), ("127.0.0.1", gw.udp_port))
    answers = {}
    for _ in range(10):
        data, addr = s.recvfrom(300)
        tid, proto, length, unit = struct.unpack(">HHHB", data[:7])
        answers[tid] = data[7:]
        check(addr[1] == gw.udp_port and unit == 1 and proto == 0, "an answer from the front end's port, unit 1",
              quiet=True)
    busy = [t for t, pdu in answers.items() if pdu == b"\x83\x06"]
    late = [t for t, pdu in answers.items() if pdu == b"\x83\x0b"]
    check(sorted(answers) == list(range(100, 110)), "every request answered once, with its own transaction id")
    check(len(busy) == 6 and len(late) == 4, f"4 in flight (max_pending), 6 refused 0x06 ({len(busy)}, {len(late)} 0x0B)")
    check(gw.metric("rtugw_udp_refused_inflight_total") == 6, "the refusals counted")
    check(gw.stop() == 0, "rtugw stops cleanly")


run_tests("test_modbus_udp", [test_front_bounds, test_lossy_path], cleanup=[D])
