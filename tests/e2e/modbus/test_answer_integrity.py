#!/usr/bin/python3
"""The gateway never hands a client a value that belongs to another request.

RTU answers carry no transaction id and a read's answer no address: when a
slave answers late, twice, in pieces or after noise, the only thing between
the client and someone else's registers is the bus actor's line discipline.
So every read here is the same shape (FC 3, 2 registers) at an address
distinct from its neighbours', and every register's value says whose it is
(slave s, address a holds s*1000 + a), so a wrong answer cannot pass.

Peers, each on its own pseudo-terminal and its own [bus] of one gateway,
several buses driven at once by pipelined raw Modbus/TCP clients (our own
MBAP framing):
  - `rtugw sim` with its faults: late, noise (ahead of the answer), truncate,
    CRC, double, split, --in-order; all at once at rates 0.01, 0.1 and 0.5,
    with response_timeout_ms shorter and longer than the late delay; each
    alone; and a slow slave with one noise burst before its first answer;
  - tests/lib/rtu_slave.py, an RTU slave written for these tests (no code shared
    with rtugw): noise before a slow answer (queueing), double answers,
    always late (queueing, and deaf while busy), double answers whose copy
    now and then comes later than the slave's hold (I4: on 888521b, before
    a repeating slave's equal answers were confirmed, 5 of 300 wrong), and one that now and then
    stalls past any guard, so answers come after their question was given up
    and the next one asked (I5: on main before it, 9 of 300 wrong);
  - pymodbus's RTU server (Debian 3.0.0) behind socat, always late: its
    response_manipulator sleeps, which holds its event loop, so it queues.
Asserted for each configuration: 0 wrong answers; every request answered
exactly once (data or exception, matching transaction id and unit); the
gateway's /metrics agree (TCP requests = answers = sent; per bus, requests =
sent and matching responses = answers that came from the slave).

Registers of equal values (phase equal): all zero, all equal, or two values
alternating by address, healthy (every read data, and no guard or
confirmation time in /metrics) and with late copies and stalls (0 wrong).

The buses on the I/O thread (phase oneloop, `[gateway] line_thread =
false`): the simulator's faults at once, the stalls, the late copies and a
healthy all-zero slave again, unique and equal values (0 wrong).

Also: a 125-register read against the paced simulator at 1200, 9600 and
19200 baud with a 100 ms timeout answers with data (the deadline must allow
for the answer's wire time); a client that sends 16 requests and shuts down
its sending side gets all 16 answers; broadcasts: unit 0 with FC 3 or FC 23
is refused with an exception, unit 0 with FC 22 is answered with the whole
7-byte PDU.

Counts are printed per configuration: sent, data, exceptions by code, wrong
(with how many of that slave's reads back the read was whose values came). Environment:
RTUGW_INTEGRITY_SCALE multiplies every configuration's read count (default
1: about 26,000 reads); RTUGW_KEEP keeps the logs. Arguments name phases to
run (matrix, peers, equal, oneloop, edges); none: all."""
import collections
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import tty

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib")   # tests/lib: the shared helpers
sys.path.insert(0, HERE)
from rtugwtest import burn_from_env, BIN, Daemon, check, finish, free_port  # noqa: E402
from rtu_slave import initial_value, with_crc  # noqa: E402  (the probe's CRC, the registers' values)

PY = "/usr/bin/python3"
SCALE = float(os.environ.get("RTUGW_INTEGRITY_SCALE", "1"))
GATEWAY_CODES = (0x06, 0x0A, 0x0B)   # exceptions the gateway itself answers
PAST_MAP = 1000             # rtu_slave's registers end here: a read there is refused 0x02
RUN = 8                              # reads of one slave in a row
procs = []

if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
    print(f"rtugw binary not found at {BIN} (set RTUGW_BIN, or run from the build directory)")
    sys.exit(1)
if not shutil.which("socat"):
    print("socat not found: install the Debian package socat (scripts/bootstrap does)")
    sys.exit(1)
try:
    import pymodbus  # noqa: F401
except ImportError:
    print("pymodbus not importable from /usr/bin/python3: install python3-pymodbus (scripts/bootstrap does)")
    sys.exit(1)


# ---- peers -------------------------------------------------------------------------------

def spawn(argv, log):
    out = open(log, "a+")
    p = subprocess.Popen(argv, stdout=out, stderr=out)
    procs.append(p)
    return p


def wait_link(link, p, what, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline and p.poll() is None:
        if os.path.islink(link) and os.path.exists(link):
            return
        time.sleep(0.02)
    print(f"FATAL: {what} did not make {link} (exit {p.poll()})", flush=True)
    sys.exit(1)


def probe(link, unit, seconds=15):
    """One read through the link ourselves, until a whole answer comes: the
    peer is serving, and nothing of ours is left in the line."""
    fd = os.open(link, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    tty.setraw(fd)
    req = with_crc(struct.pack(">BBHH", unit, 3, 0, 1))
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            os.write(fd, req)
            got = b""
            t_end = time.time() + 0.7
            while time.time() < t_end and len(got) < 7:
                sel = selectors.DefaultSelector()
                sel.register(fd, selectors.EVENT_READ)
                if sel.select(0.05):
                    got += os.read(fd, 256)
                sel.close()
            if len(got) >= 7:
                time.sleep(0.3)          # a late copy or queued answer drains into us, not the gateway
                try:
                    while os.read(fd, 256):
                        pass
                except BlockingIOError:
                    pass
                return True
    finally:
        os.close(fd)
    return False


class Peer:
    """A slave on its own pty at DIR/NAME: `rtugw sim`, rtu_slave.py or pymodbus."""

    def __init__(self, d, name, kind, args, units):
        self.link = os.path.join(d, name)
        self.log = self.link + ".log"
        self.units = units
        self.kind = kind
        self.extra = []
        slaves = ",".join(map(str, units))
        if kind == "sim":
            self.p = spawn([BIN, "sim", "--link", self.link, "--slaves", slaves] + args, self.log)
        elif kind == "slave":
            self.p = spawn([PY, os.path.join(HERE, "rtu_slave.py"), "--link", self.link,
                            "--slaves", slaves] + args, self.log)
        else:
            self.start_pymodbus(args, units)
        wait_link(self.link, self.p, f"{kind} {' '.join(args)}")
        # rtugw sim and rtu_slave serve once the link is there; pymodbus opens
        # its end later, and what reached that end before would be stale.
        if kind == "pymodbus" and not probe(self.link, units[0]):
            print(f"FATAL: {kind} {' '.join(args)} on {self.link} never answered a probe", flush=True)
            sys.exit(1)

    def start_pymodbus(self, args, units):
        """socat makes the pair; pymodbus serves one end, the gateway the other."""
        end = self.link + ".pymodbus"
        self.extra.append(spawn(["socat", f"pty,raw,echo=0,link={end}",
                                 f"pty,raw,echo=0,link={self.link}"], self.log))
        wait_link(end, self.extra[0], "socat")
        late_ms = float(args[0])
        # zero_mode=False: the block's address 1 is protocol address 0, so a
        # block starting at 1 puts s*1000 + a at protocol address a.
        code = f"""
import time
from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusRtuFramer
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusSlaveContext, ModbusServerContext
def store(s):
    return ModbusSlaveContext(hr=ModbusSequentialDataBlock(1, [(s * 1000 + a) & 0xFFFF for a in range(1000)]),
                              zero_mode=False)
def late(response):
    time.sleep({late_ms / 1000.0})
    return response, False
StartSerialServer(context=ModbusServerContext(slaves={{u: store(u) for u in {list(units)}}}, single=False),
                  framer=ModbusRtuFramer, port="{end}", baudrate=19200, response_manipulator=late)
"""
        self.p = spawn([PY, "-c", code], self.log)

    def stop(self):
        for p in [self.p] + self.extra:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def summary(self):
        with open(self.log) as f:
            lines = [ln.strip() for ln in f if "faults injected" in ln or "in order:" in ln
                     or ln.startswith("rtu_slave: ") and "on /dev" not in ln]
        return "; ".join(lines)


# ---- the gateway ------------------------------------------------------------------------------

class Bus:
    """One configuration: a peer, the [bus] it sits on, and the reads it gets."""

    def __init__(self, name, label, kind, args, timeout_ms, reads, baud=19200, values="unique", healthy=False,
                 past_every=0):
        self.name, self.label, self.kind, self.args = name, label, kind, args
        self.past_every = past_every      # every Nth read past the slave's map (rtu_slave: exception 02)
        self.values, self.healthy = values, healthy   # rtu_slave --values; healthy: no fault injected
        if values != "unique":
            self.args = args + ["--values", values]
        self.timeout_ms, self.baud = timeout_ms, baud
        self.reads = max(1, int(reads * SCALE))
        self.units = []
        self.peer = None
        self.conns = []
        self.k = 0                       # requests made so far on this bus
        self.per_unit = collections.Counter()   # unit -> its reads so far
        self.history = {}                # (unit, addr) -> that unit's index of its last read of addr
        self.sent = self.data = 0
        self.exc = collections.Counter()
        self.wrong = []
        self.lags = collections.Counter()
        self.unanswered = 0
        self.t_done = None               # seconds from the start until its last answer

    def next_request(self):
        """Runs of RUN reads of one slave, then the other: neighbours on the
        line mostly share slave, function and quantity, so an answer that
        lands on the wrong request shows in its values, not only its slave."""
        unit = self.units[(self.k // RUN) % len(self.units)]
        addr = (self.k * 37) % 998       # period 998: neighbours never share an address
        if self.past_every and self.k % self.past_every == self.past_every - 1:
            addr = PAST_MAP + self.k % 50
        n = self.per_unit[unit]
        self.per_unit[unit] += 1
        self.history[(unit, addr)] = n
        self.k += 1
        return unit, addr, n

    def judge(self, unit, addr, n, pdu):
        """Data of the read's own registers; or the gateway's refusal (0x06,
        0x0A, 0x0B); or, for a read past the slave's map, the slave's 0x02.
        A slave's refusal of a read in its map is another read's answer."""
        want = (struct.pack(">BB", 0x83, 2) if addr >= PAST_MAP else
                struct.pack(">BBHH", 3, 4, initial_value(self.values, unit, addr),
                            initial_value(self.values, unit, addr + 1)))
        if pdu == want and addr < PAST_MAP:
            self.data += 1
        elif pdu == want or (len(pdu) == 2 and pdu[0] == 0x83 and pdu[1] in GATEWAY_CODES):
            self.exc[pdu[1]] += 1
        else:
            self.wrong.append(f"unit {unit} addr {addr}: {pdu.hex()}")
            if len(pdu) == 6 and pdu[:2] == b"\x03\x04":
                # whose values? that slave's read of that address, how many of its reads back
                other = (struct.unpack(">H", pdu[2:4])[0] - unit * 1000) & 0xFFFF
                j = self.history.get((unit, other))
                self.lags[f"{n - j} back" if j is not None and j < n else "not a recent read"] += 1
            else:
                self.lags["not a read answer"] += 1

    def report(self):
        exc = ", ".join(f"0x{c:02X}: {n}" for c, n in sorted(self.exc.items())) or "none"
        lags = ", ".join(f"{n} {w}" for w, n in self.lags.most_common(4))
        print(f"   {self.label:<50} sent {self.sent:5d}  data {self.data:5d}  exceptions {exc:<22} "
              f"wrong {len(self.wrong)}{' (' + lags + ')' if lags else ''}"
              f"{f'  in {self.t_done:.1f} s' if self.t_done is not None else ''}"
              f"{f'  UNANSWERED {self.unanswered}' if self.unanswered else ''}", flush=True)


class Gateway(Daemon):
    def __init__(self, d, buses, tcp_extra="", gateway_extra=""):
        self.dir = d
        self.tcp_port, self.http_port = free_port(), free_port()
        text = f"[gateway]\nlog_level = {os.environ.get('RTUGW_INTEGRITY_LOG', 'warn')}\n{gateway_extra}"   # debug: every frame
        routes = ""
        for b in buses:
            text += (f"[bus {b.name}]\nport = {b.peer.link}\nbaud = {b.baud}\n"
                     f"response_timeout_ms = {b.timeout_ms}\nretries = 1\n")
            for u in b.units:
                text += f"[device d{u}]\nbus = {b.name}\nslave = {u}\ndead_after = 0\n"
                routes += f"unit{u} = {b.name}:{u}\n"
        text += (f"[tcp]\nport = {self.tcp_port}\ndefault_bus = {buses[0].name}\nmax_clients = 256\n"
                 f"{routes}{tcp_extra}[http]\nport = {self.http_port}\n")
        self.cfg = os.path.join(d, "rtugw.conf")
        with open(self.cfg, "w") as f:
            f.write(text)
        self.log = open(os.path.join(d, "rtugw.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stdout=self.log, stderr=self.log)
        procs.append(self.p)
        deadline = time.time() + 10
        up = {}
        while time.time() < deadline and self.p.poll() is None:
            try:
                up = self.metrics()
                if all(up.get(f'rtugw_bus_port_up{{bus="{b.name}"}}') == 1 for b in buses):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        print(f"FATAL: rtugw run did not start with every port up (exit {self.p.poll()}): "
              f"{self.log_text()}", flush=True)
        sys.exit(1)


# ---- load: pipelined raw Modbus/TCP -------------------------------------------------------------

class Conn:
    def __init__(self, port, bus, share):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.setblocking(False)
        self.bus, self.share = bus, share
        self.tid = 0
        self.pending = {}                # tid -> (unit, addr, k)
        self.rbuf = b""
        self.wbuf = b""
        self.sent = 0

    def fill(self, depth, sending):
        while sending and len(self.pending) < depth and self.sent < self.share:
            unit, addr, n = self.bus.next_request()
            self.tid = (self.tid + 1) & 0xFFFF
            self.pending[self.tid] = (unit, addr, n)
            self.wbuf += struct.pack(">HHHBBHH", self.tid, 0, 6, unit, 3, addr, 2)
            self.sent += 1
            self.bus.sent += 1
        if self.wbuf:
            try:
                n = self.s.send(self.wbuf)
                self.wbuf = self.wbuf[n:]
            except BlockingIOError:
                pass

    def on_readable(self):
        try:
            chunk = self.s.recv(65536)
        except BlockingIOError:
            return True
        except ConnectionError:
            chunk = b""
        if not chunk:
            return False
        self.rbuf += chunk
        while len(self.rbuf) >= 7:
            tid, proto, length, unit = struct.unpack(">HHHB", self.rbuf[:7])
            if len(self.rbuf) < 6 + length:
                break
            pdu, self.rbuf = self.rbuf[7:6 + length], self.rbuf[6 + length:]
            req = self.pending.pop(tid, None)
            if req is None or proto != 0 or unit != req[0]:
                self.bus.wrong.append(f"tid {tid} unit {unit} proto {proto}: {pdu.hex()} "
                                      f"({'no such request outstanding' if req is None else 'wrong unit'})")
                self.bus.lags["no such request" if req is None else "wrong unit"] += 1
                continue
            self.bus.judge(req[0], req[1], req[2], pdu)
        return True

    def note_done(self, t0):
        b = self.bus
        if self.done() and all(c.done() for c in b.conns) and b.t_done is None:
            b.t_done = time.time() - t0

    def done(self):
        return self.sent >= self.share and not self.pending


def drive(port, buses, conns_per_bus=2, depth=4, seconds=150):
    """Sends every bus its reads over conns_per_bus connections, depth
    pipelined each, until all are answered; stops sending at `seconds`
    and waits 30 s more for what is outstanding."""
    sel = selectors.DefaultSelector()
    conns = []
    for b in buses:
        for i in range(conns_per_bus):
            c = Conn(port, b, b.reads // conns_per_bus + (i < b.reads % conns_per_bus))
            conns.append(c)
            b.conns.append(c)
            sel.register(c.s, selectors.EVENT_READ, c)
    t0 = time.time()
    closed = set()
    while True:
        sending = time.time() - t0 < seconds
        for c in conns:
            if c not in closed:
                c.fill(depth, sending)
        if all(c.done() or c in closed for c in conns):
            break
        if time.time() - t0 > seconds + 30:
            break
        for key, _ in sel.select(0.05):
            c = key.data
            if c not in closed and not c.on_readable():
                closed.add(c)
                sel.unregister(c.s)
            c.note_done(t0)
    for c in conns:
        c.bus.unanswered += len(c.pending)
        if c in closed:
            c.bus.wrong.append(f"connection closed by the gateway with {len(c.pending)} outstanding")
        c.s.close()
    sel.close()
    return time.time() - t0


def run_configurations(label, buses, gateway_extra=""):
    d = tempfile.mkdtemp(prefix=f"rtugw-integrity-{label}-")
    next_unit = 1
    for b in buses:
        b.units = [next_unit, next_unit + 1]    # distinct slave ids across buses: values say whose
        next_unit += 2
        b.peer = Peer(d, b.name, b.kind, b.args, b.units)
    g = Gateway(d, buses, gateway_extra=gateway_extra)
    elapsed = drive(g.tcp_port, buses)
    m = g.metrics()
    print(f"   ({sum(b.sent for b in buses)} reads over {len(buses)} buses in {elapsed:.1f} s)", flush=True)
    for b in buses:
        b.report()
    total = sum(b.sent for b in buses)
    for b in buses:
        check(not b.wrong, f"{b.label}: no wrong answer ({len(b.wrong)} of {b.sent}: {b.wrong[:3]})")
        check(b.unanswered == 0 and b.sent == b.reads,
              f"{b.label}: every one of {b.reads} requests sent and answered exactly once "
              f"({b.sent} sent, {b.unanswered} unanswered)")
        # Every answer that came from the slave was a matching response first
        # (a bus may count more: one it held and then did not trust).
        slave_answers = b.data + len(b.wrong) + sum(n for c, n in b.exc.items() if c not in GATEWAY_CODES)
        req = m.get(f'rtugw_bus_requests_total{{bus="{b.name}"}}', -1)
        rsp = m.get(f'rtugw_bus_responses_total{{bus="{b.name}"}}', -1)
        check(req == b.sent and rsp >= slave_answers,
              f"{b.label}: /metrics agree (bus requests {req:.0f} = sent {b.sent}; "
              f"matching responses {rsp:.0f} >= answers from the slave {slave_answers})")
    for b in buses:
        if not b.healthy:
            continue
        # a slave without faults: every read answered with data, and none
        # cost a confirmation (equal answers are no fault); a guard only
        # where a loaded machine made an answer late (a few at most)
        cost = {c: m.get(f'rtugw_bus_request_seconds_total{{bus="{b.name}",cause="{c}"}}')
                for c in ("guard", "confirm")}
        check(b.data == b.sent and cost["confirm"] == 0 and cost["guard"] is not None and
              cost["guard"] <= 10 * b.timeout_ms / 1000,
              f"{b.label}: all {b.sent} reads answered with data ({b.data}), no confirmation time, "
              f"guard time at most 10 timeouts ({cost})")
    check(m["rtugw_tcp_requests_total"] == m["rtugw_tcp_answers_total"] == total,
          f"{label}: TCP requests {m['rtugw_tcp_requests_total']:.0f} = answers "
          f"{m['rtugw_tcp_answers_total']:.0f} = sent {total}")
    g.stop()
    for b in buses:
        b.peer.stop()
        s = b.peer.summary()
        if s:
            print(f"   {b.label}: {s}", flush=True)
    if not os.environ.get("RTUGW_KEEP") and not any(b.wrong or b.unanswered for b in buses):
        shutil.rmtree(d, ignore_errors=True)
    else:
        print(f"   logs kept in {d}", flush=True)
    return total


LATE = 40                   # ms: the late delay; timeouts 20 (shorter) and 80 (longer)
# rtu_slave's faults that each tested an invariant, run in several phases
# (each with its timeout): I5, answers that come after their question was
# given up and the next one asked (30 ms); I4, a copy later than a repeating
# slave's hold, where the next answer is expected (50 ms); I5 with copies, a
# stalled refusal (a read past the map given up, every 3rd read) and its copy
# 1.5 timeouts later, past the guard before I5's re-ask (the line explorer's
# seed 1796605979803999; 30 ms)
STALLS = ["--stall-every", "25", "--stall-ms", "400"]
LATE_COPIES = ["--double-gap-ms", "5", "--copy-stall-every", "10", "--copy-stall-ms", "25"]
STALLED_REFUSALS = ["--stall-every", "7", "--stall-ms", "200", "--double-gap-ms", "45", "--in-order"]


def all_faults(rate, in_order):
    r = str(rate)
    return (["--late-rate", r, "--late-ms", str(LATE), "--noise-rate", r, "--noise-lead-ms", "10",
             "--truncate-rate", r, "--crc-rate", r, "--double-rate", r, "--double-gap-ms", "5",
             "--split-rate", r, "--split-ms", "10", "--seed", str(int(rate * 1000) + in_order)]
            + (["--in-order"] if in_order else []))


def phase_matrix():
    """Every fault of the simulator at once, at three rates, timeouts on both
    sides of the late delay; in order, and with the default queueing."""
    reads = {0.01: 4000, 0.1: 1200, 0.5: 300}
    buses = []
    for rate in (0.01, 0.1, 0.5):
        for timeout in (LATE // 2, LATE * 2):
            buses.append(Bus(f"m{len(buses)}", f"sim all faults {rate} in order, timeout {timeout}",
                             "sim", all_faults(rate, True), timeout, reads[rate]))
        buses.append(Bus(f"m{len(buses)}", f"sim all faults {rate}, timeout {LATE // 2}",
                         "sim", all_faults(rate, False), LATE // 2, reads[rate]))
    buses.append(Bus(f"m{len(buses)}", "rtu_slave stalls 400 ms every 25th answer, deaf when busy", "slave",
                     STALLS, 30, 300))
    buses.append(Bus(f"m{len(buses)}", "rtu_slave stalls 400 ms every 25th answer, in order", "slave",
                     STALLS + ["--in-order"], 30, 300))
    buses.append(Bus(f"m{len(buses)}", "rtu_slave double, every 10th copy 25 ms later still", "slave",
                     LATE_COPIES, 50, 300))
    buses.append(Bus(f"m{len(buses)}", "rtu_slave stalls, copies 45 ms after, every 3rd read past the map",
                     "slave", STALLED_REFUSALS, 30, 300, past_every=3))
    return run_configurations("matrix", buses)


def phase_peers():
    """Each simulator fault alone, the slow slave with one noise burst, and
    the independent peers."""
    short = LATE // 2
    one = [("late", ["--late-rate", "0.1", "--late-ms", str(LATE)], short),
           ("late, in order", ["--late-rate", "0.1", "--late-ms", str(LATE), "--in-order"], short),
           ("late 60 ms", ["--late-rate", "0.5", "--late-ms", "60"], 40),
           ("late 60 ms, in order", ["--late-rate", "0.5", "--late-ms", "60", "--in-order"], 40),
           ("noise just before the answer", ["--noise-rate", "0.1"], 50),
           ("noise 10 ms ahead of the answer", ["--noise-rate", "0.1", "--noise-lead-ms", "10"], 50),
           ("truncate", ["--truncate-rate", "0.1"], 50),
           ("crc", ["--crc-rate", "0.1"], 50),
           ("double, copy 5 ms after", ["--double-rate", "0.1", "--double-gap-ms", "5"], 50),
           ("split 10 ms", ["--split-rate", "0.1", "--split-ms", "10"], 50)]
    buses = [Bus(f"p{i}", f"sim {what} {args[1]}, timeout {t}", "sim", args + ["--seed", str(20 + i)], t,
                 1000 if args[1] == "0.1" else 300)
             for i, (what, args, t) in enumerate(one)]
    buses.append(Bus("p10", "sim slow (30 ms), noise before 1st answer", "sim",
                     ["--turnaround-us", "30000", "--noise-first", "1", "--noise-lead-ms", "25"], 100, 300))
    buses.append(Bus("p11", "rtu_slave slow (20 ms), noise before, in order", "slave",
                     ["--turnaround-ms", "20", "--noise-bytes", "8", "--noise-lead-ms", "15", "--in-order"],
                     100, 300))
    buses.append(Bus("p12", "rtu_slave double, copy 5 ms after", "slave",
                     ["--double-gap-ms", "5"], 50, 600))
    buses.append(Bus("p13", f"rtu_slave always {LATE} ms late, in order", "slave",
                     ["--late-ms", str(LATE), "--in-order"], short, 200))
    buses.append(Bus("p14", f"rtu_slave always {LATE} ms late, deaf when busy", "slave",
                     ["--late-ms", str(LATE)], short, 200))
    buses.append(Bus("p15", f"pymodbus always {LATE} ms late", "pymodbus", [str(LATE)], short, 200))
    return run_configurations("peers", buses)


def phase_equal():
    """Registers of equal values (issue 31): all zero, all equal, two values
    alternating by address (so a neighbour's answer shows: the reads are 37
    apart, and 37 is odd). Healthy slaves, every read data and no guard or
    confirmation time; and the faults that made equal answers costly or
    wrong: copies later than a repeating slave's hold, and stalls past every
    guard (answers after their question was given up)."""
    buses = []
    for values in ("zero", "equal", "alternate"):
        buses.append(Bus(f"e{len(buses)}", f"rtu_slave {values}, healthy", "slave", [], 50, 300,
                         values=values, healthy=True))
    buses.append(Bus(f"e{len(buses)}", "rtu_slave alternate, double, every 10th copy 25 ms later still",
                     "slave", LATE_COPIES, 50, 300, values="alternate"))
    buses.append(Bus(f"e{len(buses)}", "rtu_slave alternate, stalls 400 ms every 25th answer, deaf when busy",
                     "slave", STALLS, 30, 300, values="alternate"))
    buses.append(Bus(f"e{len(buses)}", "rtu_slave zero, double, copy 5 ms after", "slave",
                     ["--double-gap-ms", "5"], 50, 300, values="zero"))
    return run_configurations("equal", buses)


def phase_oneloop():
    """The buses on the I/O thread (`line_thread = false`, which
    rtugw.conf(5) offers to a gateway that wants the wire's latency): the
    line discipline is the same code on another loop, so the faults that
    tested each invariant must still give no wrong answer there, with
    unique and with equal register values."""
    buses = [Bus("o0", "one loop: sim all faults 0.1 in order, timeout 80", "sim", all_faults(0.1, True), LATE * 2, 400),
             Bus("o1", "one loop: sim all faults 0.1, timeout 20", "sim", all_faults(0.1, False), LATE // 2, 400),
             Bus("o2", "one loop: rtu_slave stalls 400 ms every 25th answer, deaf when busy", "slave", STALLS, 30, 300),
             Bus("o3", "one loop: rtu_slave double, every 10th copy 25 ms later still", "slave", LATE_COPIES, 50, 300),
             Bus("o4", "one loop: rtu_slave stalls, copies 45 ms after, every 3rd read past the map", "slave",
                 STALLED_REFUSALS, 30, 120, past_every=3),
             Bus("o5", "one loop: rtu_slave alternate, stalls 400 ms every 25th answer", "slave", STALLS, 30, 300,
                 values="alternate"),
             Bus("o6", "one loop: rtu_slave zero, healthy", "slave", [], 50, 300, values="zero", healthy=True)]
    return run_configurations("oneloop", buses, gateway_extra="line_thread = false\n")


# ---- the edges: long answers at low baud, half-close, broadcasts -----------------------------------

def read_once(port, unit, pdu, timeout=20):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(struct.pack(">HHHB", 77, 0, len(pdu) + 1, unit) + pdu)
        return recv_adu(s)
    finally:
        s.close()


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed by the gateway after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def recv_adu(s):
    tid, proto, length, unit = struct.unpack(">HHHB", recv_exact(s, 7))
    return tid, unit, recv_exact(s, length - 1)


def phase_edges():
    d = tempfile.mkdtemp(prefix="rtugw-integrity-edges-")
    paced = [Bus(f"e{b}", f"paced {b} baud", "sim", ["--pace", "--baud", str(b)], 100, 2, baud=b)
             for b in (1200, 9600, 19200)]
    plain = Bus("eplain", "plain", "sim", [], 100, 1)
    buses = [plain] + paced
    for i, b in enumerate(buses):
        b.units = [1 + 2 * i, 2 + 2 * i]
        b.peer = Peer(d, b.name, b.kind, b.args, b.units)
    g = Gateway(d, buses, tcp_extra="unit0 = broadcast\n")

    for b in paced:
        u = b.units[0]
        want = struct.pack(">BB125H", 3, 250, *[(u * 1000 + a) & 0xFFFF for a in range(125)])
        crc_key = f'rtugw_bus_crc_errors_total{{bus="{b.name}"}}'
        for n in range(2):
            # A starved simulator (a loaded machine) can pause longer than
            # t3.5 inside its paced answer, which then arrives cut: a CRC
            # error the gateway counts. Such a read is tried again, at most
            # twice, and said so. A 0x0B with no cut frame is the deadline
            # bug itself and fails at once.
            for attempt in range(3):
                crc0 = g.metrics().get(crc_key, 0)
                t0 = time.time()
                try:
                    _, unit, body = read_once(g.tcp_port, u, struct.pack(">BHH", 3, 0, 125))
                except OSError as e:
                    body = f"{type(e).__name__}: {e}".encode()
                dt = time.time() - t0
                cut = g.metrics().get(crc_key, 0) > crc0
                if body == want or not cut:
                    break
                print(f"   note: read {n + 1} at {b.baud} baud: the simulator's answer arrived cut "
                      f"(a CRC error, the machine starved it); reading again", flush=True)
            check(body == want, f"125 registers at {b.baud} baud, 100 ms timeout, read {n + 1}: data "
                  f"in {dt:.2f} s (got {body[:4].hex()}... {len(body)} bytes)")

    # Half-close: 16 requests, then no more sending; all 16 answers must come.
    u = plain.units[0]
    s = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=10)
    s.sendall(b"".join(struct.pack(">HHHBBHH", 100 + i, 0, 6, u, 3, 10 * i, 2) for i in range(16)))
    s.shutdown(socket.SHUT_WR)
    got = {}
    try:
        while len(got) < 16:
            tid, unit, body = recv_adu(s)
            got[tid] = (unit, body)
    except (OSError, struct.error) as e:
        print(f"   half-close: {type(e).__name__}: {e}", flush=True)
    s.close()
    right = sum(1 for i in range(16) if got.get(100 + i) ==
                (u, struct.pack(">BBHH", 3, 4, u * 1000 + 10 * i, u * 1000 + 10 * i + 1)))
    check(right == 16, f"half-close after 16 requests: all 16 answered with their data ({right} of 16, "
          f"{len(got)} answers)")

    # Broadcasts: reads and read-write are refused, a mask write is echoed whole.
    for fc, pdu in ((3, struct.pack(">BHH", 3, 0, 2)),
                    (23, struct.pack(">BHHHHBH", 23, 0, 2, 5, 1, 2, 0x1234))):
        _, unit, body = read_once(g.tcp_port, 0, pdu)
        check(unit == 0 and len(body) == 2 and body[0] == fc | 0x80,
              f"broadcast FC {fc}: an exception ({body.hex()})")
    pdu = struct.pack(">BHHH", 22, 4, 0x00F2, 0x0025)
    _, unit, body = read_once(g.tcp_port, 0, pdu)
    check(unit == 0 and body == pdu, f"broadcast FC 22: the whole 7-byte PDU echoed ({body.hex()}, "
          f"want {pdu.hex()})")
    # ...and every slave did it: (value AND and) OR (or AND NOT and)
    want = ((u * 1000 + 4) & 0x00F2) | (0x0025 & ~0x00F2 & 0xFFFF)
    time.sleep(0.1)
    _, unit, body = read_once(g.tcp_port, u, struct.pack(">BHH", 3, 4, 1))
    check(body == struct.pack(">BBH", 3, 2, want), f"broadcast FC 22 executed by slave {u} ({body.hex()}, "
          f"want {want:04x})")
    m = g.metrics()
    check(m["rtugw_tcp_requests_total"] == m["rtugw_tcp_answers_total"],
          f"edges: TCP requests {m['rtugw_tcp_requests_total']:.0f} = answers {m['rtugw_tcp_answers_total']:.0f}")
    g.stop()
    for b in buses:
        b.peer.stop()
    if not os.environ.get("RTUGW_KEEP"):
        shutil.rmtree(d, ignore_errors=True)


def cli_rejects_bad_values():
    for flag, value in (("--double-rate", "1.5"), ("--split-rate", "-1"), ("--noise-first", "x"),
                        ("--split-ms", "1e3")):
        r = subprocess.run([BIN, "sim", flag, value], capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and f"bad value for {flag}" in r.stderr,
              f"rtugw sim {flag} {value}: usage error naming the flag (exit {r.returncode}: {r.stderr.strip()})")


def main():
    t_start = time.time()
    phases = {"matrix": phase_matrix, "peers": phase_peers, "equal": phase_equal, "oneloop": phase_oneloop,
              "edges": phase_edges}
    chosen = sys.argv[1:] or list(phases)
    procs.extend(burn_from_env())
    try:
        cli_rejects_bad_values()
        total = 0
        for name in chosen:
            t0 = time.time()
            print(f"== {name}", flush=True)
            try:
                total += phases[name]() or 0
            except Exception as e:   # a broken connection, a timeout: a failure, not a crash of the test
                check(False, f"{name} raised {type(e).__name__}: {e}")
            print(f"   ({time.time() - t0:.1f} s)", flush=True)
        if not sys.argv[1:]:
            check(total >= 20000 * min(SCALE, 1), f"at least {20000 * min(SCALE, 1):.0f} reads in all ({total})")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    finish("integrity", f" in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
