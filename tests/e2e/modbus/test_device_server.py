#!/usr/bin/python3
"""Issue 40, part 1: an RTU-over-TCP device server that misbehaves the way
real ones do, behind `[bus] port = tcp://...`, and no Modbus TCP client may
ever get a value that is not its own.

The device server (written here: a Moxa-style serial server has no Debian
package) has three slaves on its serial line, 1-3, with holding[a] =
1000*slave + a (unique values) or 1000*slave (every register of a slave
equal, the slaves apart). Like a real one it forwards its line's bytes to
whatever TCP connection is open at the moment they come, so an answer
owed when a connection closed reaches the next one. Per request, at
random: one of late (150 ms), doubled (again 5 ms later), split in two
segments 20 ms apart, silent, 3 noise bytes first, an unsolicited
CRC-good frame of another shape from the same slave first, truncated; and,
drawn apart, so that they meet the others too, another slave's address on
the answer just before the answer itself (slave N%3+1 carrying N's
registers), and the connection closed after half of what the answer puts
on the line. The rates are the issue's (30 % of answers with one of the
first seven faults), the last two times RTUGW_DEVSERVER_SCALE (3 by
default: 15 % and 3 %, so that the test fails in seconds on a core that
lets such a frame through, as the main of issue 40 did).

Four pymodbus clients read random addresses (1-4 registers, now and then
past the map's end, whose exception 02 answers any read) of slaves 1-3
through the gateway for RTUGW_DEVSERVER_SECONDS (5) per run, over 6 seeds
(RTUGW_DEVSERVER_SEEDS; `make check-long` runs the 10 seeds 2-11)
and both value modes; every answer is compared with the registers asked
for. Gateway exceptions (0x0A while the connection is down, 0x0B when an
answer is missing or doubtful) are counted, not wrong. On the main of
issue 40 (f647883) 2 of 10 runs of 5 seeds got another slave's registers.
"""
import heapq
import os
import random
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, burn_from_env, check, crc16, finish, procs  # noqa: E402

SECONDS = float(os.environ.get("RTUGW_DEVSERVER_SECONDS", "5"))
SCALE = float(os.environ.get("RTUGW_DEVSERVER_SCALE", "6"))
PROFILE = os.environ.get("RTUGW_DEVSERVER_PROFILE", "fast")
SEEDS = [int(s) for s in os.environ.get("RTUGW_DEVSERVER_SEEDS", "2,3,4,5,6,7").split(",")]
SLAVES = (1, 2, 3)
# The first seven faults, exclusive: the rates ("issue"), and a mix
# that spends less line time on timeouts, so that the two that matter
# (another slave's address, a close) meet more questions per second.
PROFILES = {
    "issue": [("late", 0.05), ("double", 0.05), ("split", 0.05), ("silent", 0.03), ("noise", 0.05),
              ("unsolicited", 0.05), ("truncated", 0.02)],
    "none": [],
    "fast": [("late", 0.15), ("silent", 0.05), ("double", 0.03), ("split", 0.02), ("noise", 0.02),
             ("unsolicited", 0.02)],
}
MAP_END = 1100


def adu(slave, pdu):
    body = bytes([slave]) + pdu
    return body + crc16(body)


def value(slave, addr, equal):
    return 1000 * slave + (0 if equal else addr)


class DeviceServer:
    """One TCP connection at a time (a new one replaces the old); the serial
    line's bytes go, at their time, to whatever connection is open."""

    def __init__(self, seed, equal, profile):
        self.rng = random.Random(seed)
        self.profile = profile
        self.equal = equal
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4)
        self.port = self.ls.getsockname()[1]
        self.lock = threading.Condition()
        self.conn = None
        self.heap = []
        self.seq = 0
        self.stopping = False
        self.faults = {}
        self.threads = [threading.Thread(target=self.accept_loop, daemon=True),
                        threading.Thread(target=self.line_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def count(self, what):
        self.faults[what] = self.faults.get(what, 0) + 1

    def accept_loop(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.conn:
                    self.conn.close()
                self.conn = c
            threading.Thread(target=self.read_loop, args=(c,), daemon=True).start()

    def read_loop(self, c):
        buf = b""
        while not self.stopping:
            try:
                chunk = c.recv(512)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 8:
                fc = buf[1]
                n = 9 + buf[6] if fc in (15, 16) and len(buf) >= 7 else 8
                if len(buf) < n:
                    break
                frame, rest = buf[:n], buf[n:]
                if crc16(frame[:-2]) != frame[-2:]:
                    buf = buf[1:]   # resync
                    continue
                buf = rest
                self.request(frame)

    def at(self, t, what, data=b""):
        with self.lock:
            self.seq += 1
            heapq.heappush(self.heap, (t, self.seq, what, data))
            self.lock.notify()

    def request(self, frame):
        slave, fc = frame[0], frame[1]
        if slave not in SLAVES:
            return
        addr, qty = struct.unpack(">HH", frame[2:6])
        if fc in (3, 4) and 1 <= qty <= 125 and addr + qty <= MAP_END:
            regs = b"".join(struct.pack(">H", value(slave, addr + i, self.equal)) for i in range(qty))
            pdu = bytes([fc, 2 * qty]) + regs
        elif fc in (3, 4):
            pdu = bytes([fc | 0x80, 2])
        else:
            pdu = bytes([fc | 0x80, 1])
        r = self.rng.random
        s = SCALE
        t = time.monotonic() + 0.002 + 0.004 * r()
        right = adu(slave, pdu)
        pieces = []                          # (delay after the previous piece, bytes)
        roll = r()
        cuts = PROFILES[self.profile]
        fault = None
        for name, p in cuts:
            if roll < p:
                fault = name
                break
            roll -= p
        foreign = r() < 0.05 * s
        close = r() < 0.01 * s
        if fault:
            self.count(fault)
        if fault == "silent":
            return
        if fault == "late":
            t += 0.150
        if fault == "noise":
            pieces.append((0, bytes(self.rng.randrange(256) for _ in range(3))))
        if fault == "unsolicited":   # the same slave, CRC good, another shape
            pieces.append((0, adu(slave, bytes([fc, 2 * qty + 2]) + bytes(2 * qty + 2))))
        if foreign:
            self.count("foreign")
            pieces.append((0.002, adu(slave % 3 + 1, pdu)))
        if fault == "split":
            k = len(right) // 2
            pieces += [(0.002, right[:k]), (0.020, right[k:])]
        elif fault == "truncated":
            pieces.append((0.002, right[:-2]))
        else:
            pieces.append((0.002, right))
        if fault == "double":
            pieces.append((0.005, right))
        total = sum(len(p) for _, p in pieces)
        half = total // 2 if close else None
        sent = 0
        for delay, data in pieces:
            t += delay
            if half is not None and sent <= half < sent + len(data):
                self.at(t, "send", data[:half - sent])
                self.at(t, "close")
                self.count("close")
                self.at(t, "send", data[half - sent:])   # no connection now: lost, as on a real server
                half = None
            else:
                self.at(t, "send", data)
            sent += len(data)

    def line_loop(self):
        while True:
            with self.lock:
                while not self.stopping and (not self.heap or self.heap[0][0] > time.monotonic()):
                    wait = self.heap[0][0] - time.monotonic() if self.heap else 0.5
                    self.lock.wait(max(wait, 0.0005))
                if self.stopping:
                    return
                _, _, what, data = heapq.heappop(self.heap)
                c = self.conn
                if what == "close":
                    if c:
                        c.close()
                    self.conn = None
                    continue
            if c and data:
                try:
                    c.sendall(data)
                except OSError:
                    pass

    def stop(self):
        with self.lock:
            self.stopping = True
            self.lock.notify()
        self.ls.close()
        if self.conn:
            self.conn.close()


def client_loop(gw, seed, equal, deadline, out):
    from pymodbus.client import ModbusTcpClient
    rng = random.Random(seed)
    c = ModbusTcpClient("127.0.0.1", port=gw.tcp_port, timeout=10)
    if not c.connect():
        out["errors"].append("connect")
        return
    while time.monotonic() < deadline:
        slave = rng.choice(SLAVES)
        qty = rng.randint(1, 4)
        addr = rng.randrange(0, MAP_END + 50)   # now and then past the map's end: exception 02
        t0 = time.monotonic()
        try:
            r = c.read_holding_registers(addr, qty, slave=slave)
            out["slowest"] = max(out["slowest"], time.monotonic() - t0)
        except Exception as e:   # noqa: BLE001 -- a client error is a failure, counted
            out["errors"].append(repr(e))
            break
        past_end = addr + qty > MAP_END
        if r.isError():
            code = getattr(r, "exception_code", None)
            out["exc"][code] = out["exc"].get(code, 0) + 1
            if code is None:   # pymodbus had no answer in its 10 s: no value, but a stall
                out["errors"].append(f"slave {slave} addr {addr} x{qty}: no answer in 10 s ({r})")
                continue
            if code not in (0x06, 0x0A, 0x0B) and (code == 2) != past_end:   # the gateway's own: not wrong
                out["wrong"].append(f"slave {slave} addr {addr} x{qty}: exception {code}, "
                                    f"{'past' if past_end else 'inside'} the map's end")
            continue
        if past_end:
            out["wrong"].append(f"slave {slave} addr {addr} x{qty}: got {list(r.registers)} past the map's end")
            continue
        want = [value(slave, addr + i, equal) for i in range(qty)]
        if list(r.registers) != want:
            out["wrong"].append(f"slave {slave} addr {addr} x{qty}: got {list(r.registers)} want {want}")
        else:
            out["data"] += 1
    c.close()


def one_run(seed, equal, profile):
    srv = DeviceServer(seed, equal, profile)
    devices = "".join(f"[device d{s}]\nslave = {s}\ndead_after = 0\n" for s in SLAVES)
    gw = Gateway(bus=f"port = tcp://127.0.0.1:{srv.port}\nbaud = 19200\n", devices=devices, timeout_ms=80,
                 log_level="warn")
    out = {"data": 0, "exc": {}, "wrong": [], "errors": [], "slowest": 0.0}
    deadline = time.monotonic() + SECONDS
    threads = [threading.Thread(target=client_loop, args=(gw, seed * 10 + k, equal, deadline, out))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS + 30)
    m = gw.metrics()
    holds = m.get('rtugw_bus_reconnect_holds_total{bus="line"}', "?")
    rc, _ = gw.stop()
    srv.stop()
    mode = "equal" if equal else "unique"
    print(f"seed {seed} {mode} ({profile}): {out['data']} data answers, gateway exceptions {out['exc']}, "
          f"faults {dict(sorted(srv.faults.items()))}, reconnect holds {holds}, slowest answer {out['slowest']:.2f} s, wrong {len(out['wrong'])}", flush=True)
    for w in out["wrong"][:5]:
        print("  WRONG:", w)
    check(not out["wrong"], f"seed {seed} ({mode} values): no client got another request's registers")
    check(not out["errors"], f"seed {seed} ({mode}): clients saw no error ({out['errors'][:3]})")
    check(out["data"] >= 10, f"seed {seed} ({mode}): data answers flowed ({out['data']})")
    check(srv.faults.get("foreign", 0) > 0, f"seed {seed} ({mode}): the server mixed addresses ({srv.faults})")
    check(rc == 0, f"seed {seed} ({mode}): the gateway stops cleanly (rc {rc})")
    return {"wrong": len(out["wrong"]), "data": out["data"], "exc": out["exc"], "faults": dict(srv.faults)}


def main():
    wrong = closes = 0
    burn_from_env()
    try:
        for seed in SEEDS:
            for equal in (False, True):
                r = one_run(seed, equal, PROFILE)
                wrong += r["wrong"]
                closes += r["faults"].get("close", 0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # The closes are drawn per answer, so a run with few answers may draw
    # none (CI saw seed 2's unique run at 0, its equal run at 1): judged
    # over all the runs, one per four runs at least (27 in 12 runs in CI).
    runs = 2 * len(SEEDS)
    check(closes >= max(1, runs // 4),
          f"the server closed connections in the middle of answers ({closes} in {runs} runs)")
    print(f"device server: {len(SEEDS)} seeds x 2 value modes, {SECONDS:g} s each: {wrong} wrong answers")
    finish("test_device_server")


if __name__ == "__main__":
    main()
