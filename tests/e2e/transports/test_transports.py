#!/usr/bin/python3
"""The transports end to end, with real peers: rtugw run with one bus per
transport and both new front ends, in front of

  - socat as a transparent serial device server (`socat PTY,link=L,raw,echo=0
    TCP-LISTEN:P,reuseaddr`: the pty first, so the device behind it can open
    it before rtugw connects) in front of `rtugw sim --port L`, and in front
    of a pymodbus RTU server;
  - pymodbus's TCP server with its RTU framer (RTU over TCP, an independent
    implementation);
  - a pymodbus TCP server as a Modbus TCP device (framing = tcp), shared by
    8 masters, restarted mid-run;
  - a pymodbus ASCII server on a socat pty pair, and a tiny raw writer that
    answers with a bad LRC first;
and, in front of rtugw, mbpoll and a raw RTU master on a pty ([serial_slave]),
pymodbus's TCP client with its RTU framer and a raw socket ([rtu_tcp]).
The function-code matrix of tests/peers/test_gateway_foreign_peers.py's passthrough test (6, 3,
16, 5, 15, 1, 2, 4, 22, 23 and an exception) runs over each new path.
Timing is asserted only where it is the behaviour under test."""
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tty

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, failure_count, free_port, mbap, procs, recv_frame, run_tests  # noqa: E402
from rtugwtest import crc16  # noqa: E402
from rtu_slave import with_crc  # noqa: E402  (the tests' own RTU code, none of rtugw's)

PY = "/usr/bin/python3"
try:
    from pymodbus.client import ModbusTcpClient
    from pymodbus.transaction import ModbusRtuFramer
except ImportError as e:
    print(f"missing {e.name}: install python3-pymodbus and python3-serial-asyncio (scripts/bootstrap does)")
    sys.exit(1)
for tool in ("mbpoll", "socat"):
    if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
        print(f"missing {tool}: install the Debian package {tool} (scripts/bootstrap does)")
        sys.exit(1)

D = tempfile.mkdtemp(prefix="rtugw-transports-")


# ---- RTU frames ------------------------------------------------------------------

def rtu(unit, pdu):
    return with_crc(bytes([unit]) + pdu)


def answer_len(buf):
    """The length of an RTU answer from its first bytes, or None if more are needed."""
    if len(buf) < 2:
        return None
    fc = buf[1]
    if fc & 0x80:
        return 5
    if fc in (1, 2, 3, 4, 23):
        return 5 + buf[2] if len(buf) >= 3 else None
    if fc in (5, 6, 15, 16):
        return 8
    if fc == 22:
        return 10
    return None


def read_rtu_answer(recv, timeout=3.0):
    """Reads one RTU answer with recv(n) -> bytes; returns (unit, pdu) or None on timeout or bad CRC."""
    buf = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        want = answer_len(buf)
        if want is not None and len(buf) >= want:
            frame = buf[:want]
            if crc16(frame[:-2]) != frame[-2:]:
                return None
            return frame[0], frame[1:-2]
        chunk = recv(max(1, (want or 3) - len(buf)), deadline - time.time())
        if chunk is None:
            return None
        buf += chunk
    return None


# ---- the three ways of asking ---------------------------------------------------------

class MbapMaster:
    """A raw Modbus TCP client of rtugw's [tcp] front end."""
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.tid = 0

    def xfer(self, unit, pdu):
        self.tid = (self.tid + 1) & 0xFFFF
        self.s.sendall(mbap(self.tid, unit, pdu))
        f = recv_frame(self.s)
        if f is None or f[0] != self.tid or f[1] != unit:
            return None
        return f[2]

    def close(self):
        self.s.close()


class RtuTcpMaster:
    """A raw RTU over TCP client of rtugw's [rtu_tcp] front end."""
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)

    def recv(self, n, left):
        self.s.settimeout(max(left, 0.01))
        try:
            b = self.s.recv(n)
        except socket.timeout:
            return None
        return b or None

    def xfer(self, unit, pdu, timeout=3.0):
        self.s.sendall(rtu(unit, pdu))
        a = read_rtu_answer(self.recv, timeout)
        return a[1] if a and a[0] == unit else None

    def close(self):
        self.s.close()


class SerialMaster:
    """A raw RTU master on a pseudo-terminal, in front of a [serial_slave]."""
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)

    def recv(self, n, left):
        r, _, _ = select.select([self.fd], [], [], max(left, 0.01))
        return os.read(self.fd, n) if r else None

    def xfer(self, unit, pdu, timeout=3.0):
        os.write(self.fd, rtu(unit, pdu))
        a = read_rtu_answer(self.recv, timeout)
        time.sleep(0.005)   # t3.5 and more before the next request
        return a[1] if a and a[0] == unit else None

    def close(self):
        os.close(self.fd)


def matrix(label, xfer, unit, exception_addr=5000):
    """test_gateway_foreign_peers.py's passthrough matrix, on raw PDUs: every answer checked
    against what the writes before it imply."""
    ok = []

    def expect(what, got, want):
        ok.append(got == want)
        if got != want:
            check(False, f"{label}: {what}: {got.hex() if got else got} != {want.hex()}")

    w16 = lambda v: struct.pack(">H", v)  # noqa: E731
    expect("fc6 write", xfer(unit, b"\x06" + w16(10) + w16(4321)), b"\x06" + w16(10) + w16(4321))
    expect("fc3 reads back fc6", xfer(unit, b"\x03" + w16(10) + w16(1)), b"\x03\x02" + w16(4321))
    regs = [1, 2, 3, 65535]
    expect("fc16 write", xfer(unit, b"\x10" + w16(20) + w16(4) + b"\x08" + b"".join(map(w16, regs))),
           b"\x10" + w16(20) + w16(4))
    expect("fc3 reads back fc16", xfer(unit, b"\x03" + w16(20) + w16(4)), b"\x03\x08" + b"".join(map(w16, regs)))
    expect("fc5 write coil", xfer(unit, b"\x05" + w16(5) + w16(0xFF00)), b"\x05" + w16(5) + w16(0xFF00))
    expect("fc15 write coils", xfer(unit, b"\x0f" + w16(8) + w16(4) + b"\x01\x0d"), b"\x0f" + w16(8) + w16(4))
    got = xfer(unit, b"\x01" + w16(5) + w16(7))
    bits = [(got[2] >> i) & 1 for i in range(7)] if got and len(got) == 3 and got[:2] == b"\x01\x01" else None
    ok.append(bits is not None and bits[0] == 1 and bits[3:7] == [1, 0, 1, 1])
    if not ok[-1]:
        check(False, f"{label}: fc1 reads back fc5 and fc15: {got}")
    got = xfer(unit, b"\x02" + w16(0) + w16(19))
    ok.append(got is not None and got[:2] == b"\x02\x03" and len(got) == 5)
    if not ok[-1]:
        check(False, f"{label}: fc2 19 discrete inputs: {got}")
    got = xfer(unit, b"\x04" + w16(0) + w16(125))
    ok.append(got is not None and got[0] == 4 and got[1] == 250 and len(got) == 252)
    if not ok[-1]:
        check(False, f"{label}: fc4 125 input registers: {got[:4] if got else got}")
    expect("fc22 mask write", xfer(unit, b"\x16" + w16(10) + w16(0x00F2) + w16(0x0025)),
           b"\x16" + w16(10) + w16(0x00F2) + w16(0x0025))
    expect("fc3 reads back fc22", xfer(unit, b"\x03" + w16(10) + w16(1)),
           b"\x03\x02" + w16((4321 & 0xF2) | (0x25 & ~0xF2 & 0xFFFF)))
    got = xfer(unit, b"\x17" + w16(30) + w16(3) + w16(30) + w16(2) + b"\x04" + w16(77) + w16(88))
    ok.append(got is not None and got[:2] == b"\x17\x06" and got[2:6] == w16(77) + w16(88))
    if not ok[-1]:
        check(False, f"{label}: fc23 write and read: {got}")
    expect("exception 02 out of range", xfer(unit, b"\x03" + w16(exception_addr) + w16(2)), b"\x83\x02")
    check(all(ok) and len(ok) == 13, f"{label}: the function-code matrix, {sum(ok)} of 13 answers right")


# ---- peers ---------------------------------------------------------------------------------

def spawn(args, log):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    check(False, f"in time: {what}")
    return False


def pty_pair(name):
    a, b = os.path.join(D, name + "-a"), os.path.join(D, name + "-b")
    spawn(["socat", f"pty,raw,echo=0,link={a}", f"pty,raw,echo=0,link={b}"], os.path.join(D, name + ".socat"))
    wait_for(lambda: os.path.exists(a) and os.path.exists(b), 5, f"pty pair {name}")
    return a, b


def device_server(name):
    """socat as a serial device server: the pty L for the device, TCP port P for rtugw.
    A socat that exits (free_port's port taken meanwhile: CI's ASan stage saw the
    link never appear) is started again on a fresh port, up to three times."""
    link = os.path.join(D, name)
    for _ in range(3):
        port = free_port()
        p = spawn(["socat", f"PTY,link={link},raw,echo=0", f"TCP-LISTEN:{port},reuseaddr"],
                  os.path.join(D, name + ".socat"))
        deadline = time.time() + 5
        while time.time() < deadline and p.poll() is None and not os.path.exists(link):
            time.sleep(0.05)
        if p.poll() is None and os.path.exists(link):
            return link, port
        if p.poll() is None:
            p.kill()
    check(False, f"in time: device server {name}")
    return link, port


STORE = """from pymodbus.datastore import ModbusSequentialDataBlock as B, ModbusSlaveContext, ModbusServerContext
def store():
    return ModbusSlaveContext(di=B(0, [i % 2 for i in range(1000)]), co=B(0, [0] * 1000),
                              hr=B(0, list(range(1000, 2000))), ir=B(0, list(range(3000, 4000))), zero_mode=True)
"""


def pymodbus(name, body):
    script = os.path.join(D, name + ".py")
    log = os.path.join(D, name + ".log")
    with open(script, "w") as f:
        f.write(f"import logging\nlogging.basicConfig(filename={log!r}, level=logging.DEBUG)\n{STORE}{body}\n")
    return spawn([PY, script], os.path.join(D, name + ".out")), log


def tcp_ready(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def serial_ready(log):
    return os.path.exists(log) and "Serial connection established" in open(log, errors="replace").read()


def tcp_device(port):
    # allow_reuse_address: a restarted server binds again while the old connections are in TIME_WAIT
    # (without it pymodbus 3.0.0 swallows the bind error and never listens).
    return pymodbus(f"tcpdev-{port}", f"""from pymodbus.server import StartTcpServer
StartTcpServer(context=ModbusServerContext(slaves=store(), single=True), address=("127.0.0.1", {port}),
               allow_reuse_address=True)""")


class LrcWriter(threading.Thread):
    """The device end of an ASCII line that answers each fc 3 request twice
    over: first with a bad LRC, then (the retry) with a good one."""
    def __init__(self, path):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        self.requests = 0
        self.stop = False

    def run(self):
        buf = b""
        while not self.stop:
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if not r:
                continue
            buf += os.read(self.fd, 512)
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                raw = bytes.fromhex(line[line.index(b":") + 1:].decode())
                unit, qty = raw[0], raw[4] << 8 | raw[5]
                body = bytes([unit, 3, 2 * qty]) + b"\x12\x34" * qty
                lrc = (-sum(body)) & 0xFF
                if self.requests % 2 == 0:
                    lrc ^= 0x5A   # a bad LRC, the data intact
                self.requests += 1
                os.write(self.fd, b":" + (body + bytes([lrc])).hex().upper().encode() + b"\r\n")


# ---- the tests -------------------------------------------------------------------------------

def test_rtu_over_tcp_buses(g, units):
    m = MbapMaster(g.tcp_port)
    matrix("RTU over TCP (socat + rtugw sim)", m.xfer, units["nport"])
    # pymodbus's RTU server behind the same kind of device server
    got = m.xfer(units["nport_py"], bytes([3, 0, 3, 0, 5]))
    check(got == b"\x03\x0a" + b"".join(struct.pack(">H", 1003 + i) for i in range(5)),
          f"RTU over TCP to a pymodbus RTU server behind socat: {got}")
    check(m.xfer(units["nport_py"], bytes([6, 0, 4, 0, 9])) == bytes([6, 0, 4, 0, 9]), "write through it")
    check(m.xfer(units["nport_py"], bytes([3, 0, 4, 0, 1])) == b"\x03\x02\x00\x09", "and read it back")
    # fc 8 (diagnostics, return query data) has no length rule: its answer
    # ends after frame_silence_ms (50 ms) of quiet on the stream.
    t0 = time.time()
    got = m.xfer(units["nport_py"], bytes([8, 0, 0, 0xA5, 0x37]))
    dt = time.time() - t0
    check(got == bytes([8, 0, 0, 0xA5, 0x37]), f"fc 8 echo through RTU over TCP: {got}")
    check(dt >= 0.045, f"an answer without a length rule ends at the stream's silence ({dt * 1000:.0f} ms >= 50)")
    # pymodbus's own TCP server with its RTU framer: a second, independent peer
    matrix("RTU over TCP (pymodbus TCP server, RTU framer)", m.xfer, units["rtutcp"])
    m.close()


def test_tcp_device_shared(g, units, dev_port):
    unit = units["dev"]
    m = MbapMaster(g.tcp_port)
    matrix("Modbus TCP device (pymodbus)", m.xfer, unit)
    # equal answers to different questions are real on a TCP device (I4 settled by
    # the transaction id): delivered at once, not asked again after a guard
    for addr in (600, 601):
        m.xfer(unit, bytes([6]) + struct.pack(">HH", addr, 5))
    retries = g.metrics().get('rtugw_bus_retries_total{bus="dev"}', 0)
    t0 = time.time()
    same = [m.xfer(unit, bytes([3]) + struct.pack(">HH", addr, 1)) for addr in (600, 601, 600, 601)]
    dt = time.time() - t0
    check(same == [b"\x03\x02\x00\x05"] * 4 and dt < 0.5 and
          g.metrics().get('rtugw_bus_retries_total{bus="dev"}', 0) == retries,
          f"equal answers to other questions delivered at once, none asked again ({dt * 1000:.0f} ms)")
    # the master's transaction id comes back, whatever rtugw used on the device
    m.s.sendall(mbap(0xBEEF, unit, bytes([3, 0, 100, 0, 2])))
    f = recv_frame(m.s)
    check(f == (0xBEEF, unit, b"\x03\x04" + struct.pack(">HH", 1100, 1101)), f"master's tid mapped back: {f}")
    m.close()

    errors, counts = [], [0] * 8

    def writer(k):
        c = MbapMaster(g.tcp_port)
        for i in range(15):
            addr, v = 200 + 10 * k + i % 10, (k * 1000 + i) & 0xFFFF
            if c.xfer(unit, bytes([6]) + struct.pack(">HH", addr, v)) != bytes([6]) + struct.pack(">HH", addr, v):
                errors.append(f"master {k}: write {i}")
            got = c.xfer(unit, bytes([3]) + struct.pack(">HH", addr, 1))
            if got != b"\x03\x02" + struct.pack(">H", v):
                errors.append(f"master {k}: read {i}: {got}")
            counts[k] += 2
        c.close()

    before = g.metrics()
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors and sum(counts) == 240, f"8 masters at once on one device, each answer its own ({errors[:3]})")
    after = g.metrics()
    d = lambda k: after.get(k, 0) - before.get(k, 0)  # noqa: E731
    check(d('rtugw_bus_responses_total{bus="dev"}') == 240 and d("rtugw_tcp_answers_total") == 240,
          "240 requests, 240 device answers, 240 answers to the masters")
    return unit


def test_tcp_device_restart(g, unit, dev_port, dev_proc):
    """8 masters read their own ranges (each a different shape) while the
    device is killed and started again: no answer ever reaches the wrong
    master, 0x0A while it is down, answers again after."""
    stop = threading.Event()
    wrong, exc, ok_after = [], [set() for _ in range(8)], [0] * 8
    restarted = threading.Event()

    def reader(k):
        c = MbapMaster(g.tcp_port)
        addr, qty = 500 + 10 * k, k + 1
        want = b"\x03" + bytes([2 * qty]) + b"".join(struct.pack(">H", 1000 + addr + i) for i in range(qty))
        while not stop.is_set():
            got = c.xfer(unit, bytes([3]) + struct.pack(">HH", addr, qty))
            if got == want:
                if restarted.is_set():
                    ok_after[k] += 1
            elif got and len(got) == 2 and got[0] == 0x83:
                exc[k].add(got[1])
                time.sleep(0.02)
            else:
                wrong.append((k, got))
        c.close()

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    dev_proc.kill()
    dev_proc.wait()
    wait_for(lambda: any(0x0A in e for e in exc), 5, "0x0A while the device is down")
    down = g.metrics().get('rtugw_bus_port_up{bus="dev"}', 1)
    proc, _ = tcp_device(dev_port)
    wait_for(lambda: tcp_ready(dev_port), 20, "the device listening again")
    restarted.set()
    recovered = wait_for(lambda: all(n > 0 for n in ok_after), 15, "every master answered after the restart")
    stop.set()
    for t in threads:
        t.join(10)
    check(not wrong, f"no answer to the wrong master across the restart ({wrong[:3]})")
    check(down == 0 and any(0x0A in e for e in exc), f"0x0A while down, the port shown down ({exc})")
    check(recovered, f"recovery after the restart, without restarting rtugw ({ok_after})")
    m = g.metrics()
    check(m.get('rtugw_bus_reopen_attempts_total{bus="dev"}', 0) >= 1 and m.get('rtugw_bus_port_up{bus="dev"}') == 1,
          "reconnected with back-off, port up again")
    return proc


def test_ascii(g, units, lrc):
    m = MbapMaster(g.tcp_port)
    matrix("Modbus ASCII (pymodbus ASCII server)", m.xfer, units["asc"])
    key = 'rtugw_bus_crc_errors_total{bus="lrc"}'
    before = g.metrics().get(key, 0)
    got = m.xfer(units["lrc"], bytes([3, 0, 0, 0, 2]))
    check(got == b"\x03\x04\x12\x34\x12\x34", f"a bad LRC is never delivered; the retry's good answer is: {got}")
    after = g.metrics()
    check(after.get(key, 0) == before + 1 and lrc.requests == 2,
          f"the bad LRC counted as a bad frame ({after.get(key)}), asked twice ({lrc.requests})")
    check(after.get('rtugw_bus_retries_total{bus="lrc"}', 0) >= 1, "and retried")
    check(after.get('rtugw_bus_frame_errors_total{bus="lrc"}') == 1 and
          after.get('rtugw_bus_frame_errors_total{bus="asc"}') == 0,
          "the ASCII layer's own count: one bad frame on the bad-LRC line, none on the good one")
    m.close()


def test_serial_slave(g, master_path):
    # mbpoll as the RTU master: a simulator slave, then the Modbus TCP device.
    def mb(addr, *args):
        return subprocess.run(["mbpoll", "-m", "rtu", "-b", "19200", "-P", "none", "-a", str(addr), "-1", "-o", "1",
                               *args, master_path], capture_output=True, text=True, timeout=20)
    p = mb(1, "-r", "1", "-c", "3")
    check(p.returncode == 0 and "[1]: \t1000" in p.stdout and "[3]: \t1002" in p.stdout,
          f"mbpoll on a pty -> serial slave -> simulator bus: {p.stdout[-60:]!r}")
    p = mb(17, "-r", "101", "-c", "2")
    check(p.returncode == 0 and "[101]: \t1100" in p.stdout and "[102]: \t1101" in p.stdout,
          f"mbpoll -> serial slave -> Modbus TCP device: {p.stdout[-60:]!r}{p.stderr[-60:]!r}")
    p = mb(18, "-r", "1", "-c", "1")
    check(p.returncode != 0, "a slave id no route names: no answer (mbpoll times out)")
    t0 = time.time()
    p = mb(9, "-r", "1", "-c", "1")
    dt = time.time() - t0
    check(p.returncode != 0 and "failed to respond" in (p.stdout + p.stderr).lower(),
          f"a silent target: exception 0x0B within answer_timeout_ms: {(p.stdout + p.stderr)[-60:]!r}")
    check(0.2 <= dt < 0.9, f"0x0B at answer_timeout_ms (250), before the bus gave up and the master's timeout "
                           f"({dt * 1000:.0f} ms)")
    # the matrix through a raw RTU master on the same pty
    s = SerialMaster(master_path)
    matrix("serial slave front end", s.xfer, 2)
    s.close()
    time.sleep(0.6)   # the bus's own late answer to slave 9 arrives and is dropped
    m = g.metrics()
    name = '{name="front"}'
    check(m.get(f"rtugw_serial_slave_ignored_total{name}", 0) >= 1, "unrouted slave id counted as ignored")
    check(m.get(f"rtugw_serial_slave_timeouts_total{name}", 0) >= 1 and
          m.get(f"rtugw_serial_slave_late_dropped_total{name}", 0) >= 1,
          "the deadline's 0x0B counted, the bus's late answer dropped")
    check(m.get(f"rtugw_serial_slave_port_up{name}") == 1, "serial slave port up")


def test_rtu_tcp_listener(g):
    c = ModbusTcpClient("127.0.0.1", port=g.rtu_port, framer=ModbusRtuFramer, timeout=3)
    check(c.connect(), "pymodbus RTU-framer client connects to [rtu_tcp]")
    r = c.read_holding_registers(7, 3, slave=3)
    check(not r.isError() and r.registers == [3007, 3008, 3009], f"pymodbus RTU over TCP client -> simulator: {r}")
    check(not c.write_register(7, 555, slave=3).isError(), "write through [rtu_tcp]")
    r = c.read_holding_registers(7, 1, slave=3)
    check(not r.isError() and r.registers == [555], "read back through [rtu_tcp]")
    r = c.read_holding_registers(100, 2, slave=17)
    check(not r.isError() and r.registers == [1100, 1101], f"[rtu_tcp] unit 17 -> Modbus TCP device: {r}")
    c.close()
    m = RtuTcpMaster(g.rtu_port)
    matrix("RTU over TCP front end", m.xfer, 1)
    check(m.xfer(250, bytes([3, 0, 0, 0, 1])) == b"\x83\x0a", "an unrouted slave id: exception 0x0A")
    # a broadcast write is executed and never answered
    check(m.xfer(0, bytes([6, 0, 40, 0x12, 0x34]), timeout=0.4) is None, "a broadcast gets no answer")
    check(m.xfer(2, bytes([3, 0, 40, 0, 1])) == b"\x03\x02\x12\x34", "the broadcast reached slave 2")
    # a request whose CRC is bad closes the stream (it cannot be framed after it)
    m.s.sendall(b"\x01\x03\x00\x00\x00\x01\x00\x00")
    m.s.settimeout(2)
    try:
        closed = m.s.recv(1) == b""
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    check(closed, "bad CRC on the RTU stream: connection closed")
    m.close()
    met = g.metrics()
    check(met.get("rtugw_rtu_tcp_bad_mbap_total") == 1, "counted (rtugw_rtu_tcp_bad_mbap_total)")
    check(met.get("rtugw_rtu_tcp_requests_total") == met.get("rtugw_rtu_tcp_answers_total") + 1,
          "every [rtu_tcp] request answered but the broadcast")


def test_check_open():
    """`rtugw check --open` connects a tcp:// bus as the daemon would, and names a refusal."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    closed = free_port()
    cfg = os.path.join(D, "check.conf")
    with open(cfg, "w") as f:
        f.write(f"[bus up]\nport = tcp://127.0.0.1:{ls.getsockname()[1]}\nframing = tcp\n"
                f"[bus down]\nport = tcp://127.0.0.1:{closed}\nconnect_timeout_ms = 500\n[tcp]\ndefault_bus = up\n"
                f"[bus named]\nport = tcp://localhost:{ls.getsockname()[1]}\nframing = tcp\n"
                f"[bus nowhere]\nport = tcp://no-such-host.invalid:502\nconnect_timeout_ms = 2000\n")
    p = subprocess.run([BIN, "check", "--open", "-c", cfg], capture_output=True, text=True, timeout=20)
    ls.close()
    check(p.returncode == 1 and "[bus up] port = 'tcp://127.0.0.1:" in p.stdout and "connected" in p.stdout,
          f"check --open: the reachable device connected: {p.stdout!r}")
    check(f"check.conf:5: [bus down] port = 'tcp://127.0.0.1:{closed}': connect: Connection refused" in p.stderr,
          f"check --open: the unreachable one named with file, line and the system's reason: {p.stderr!r}")
    # issue 44: a host name, resolved without blocking (drivers/tcp.c)
    named = [ln for ln in p.stdout.splitlines() if ln.startswith("[bus named] port = 'tcp://localhost:")]
    check(named and named[0].endswith("connected"), f"check --open: tcp://localhost:PORT connected: {p.stdout!r}")
    check("[bus nowhere] port = 'tcp://no-such-host.invalid:502'" in p.stderr and "resolve" in p.stderr,
          f"check --open: a name that does not resolve says so: {p.stderr!r}")


def main():
    test_check_open()
    # Peers first (pymodbus takes seconds to import: they start together).
    nport_link, nport_port = device_server("nport")
    nport_py_link, nport_py_port = device_server("nport-py")
    dev_port, rtutcp_port = free_port(), free_port()
    dev_proc, _ = tcp_device(dev_port)
    pymodbus("rtutcp", f"""from pymodbus.server import StartTcpServer
from pymodbus.transaction import ModbusRtuFramer
StartTcpServer(context=ModbusServerContext(slaves=store(), single=True), framer=ModbusRtuFramer,
               address=("127.0.0.1", {rtutcp_port}))""")
    _, rtu_log = pymodbus("nport-rtu", f"""from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusRtuFramer
StartSerialServer(context=ModbusServerContext(slaves={{5: store()}}, single=False), framer=ModbusRtuFramer,
                  port={nport_py_link!r}, baudrate=19200)""")
    asc_gw, asc_dev = pty_pair("ascii")
    _, asc_log = pymodbus("ascii", f"""from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusAsciiFramer
StartSerialServer(context=ModbusServerContext(slaves={{4: store()}}, single=False), framer=ModbusAsciiFramer,
                  port={asc_dev!r}, baudrate=19200)""")
    spawn([BIN, "sim", "--port", nport_link, "--slaves", "1,2,3"], os.path.join(D, "sim.log"))
    lrc_gw, lrc_dev = pty_pair("lrc")
    front_gw, front_master = pty_pair("front")
    lrc = LrcWriter(lrc_dev)
    lrc.start()
    for what, ready in (("pymodbus TCP device", lambda: tcp_ready(dev_port)),
                        ("pymodbus RTU-framer TCP server", lambda: tcp_ready(rtutcp_port)),
                        ("pymodbus RTU server", lambda: serial_ready(rtu_log)),
                        ("pymodbus ASCII server", lambda: serial_ready(asc_log))):
        wait_for(ready, 30, what)

    units = {"nport": 11, "nport_py": 21, "rtutcp": 31, "dev": 41, "asc": 51, "lrc": 61}
    rtu_port = free_port()
    slow = "response_timeout_ms = 1500\nretries = 1\n"
    g = Gateway(devices="", extra_tcp="".join(f"unit{u} = {b}:{s}\n" for b, u, s in (
                    ("nport", 11, 1), ("nport_py", 21, 5), ("rtutcp", 31, 1), ("dev", 41, 1), ("asc", 51, 4),
                    ("lrc", 61, 1))),
                extra=(f"[bus nport]\nport = tcp://127.0.0.1:{nport_port}\n{slow}"
                       f"[bus nport_py]\nport = tcp://127.0.0.1:{nport_py_port}\n{slow}"
                       f"[bus rtutcp]\nport = tcp://127.0.0.1:{rtutcp_port}\n{slow}"
                       # a host name (issue 44): resolved on each (re)connect, never blocking the loop;
                       # test_tcp_device_restart reconnects through it
                       f"[bus dev]\nport = tcp://localhost:{dev_port}\nframing = tcp\n{slow}"
                       f"[bus asc]\nport = {asc_gw}\nframing = ascii\nparity = none\n{slow}"
                       f"[bus lrc]\nport = {lrc_gw}\nframing = ascii\nparity = none\nresponse_timeout_ms = 200\n"
                       f"retries = 1\n"
                       f"[rtu_tcp]\nenabled = true\nport = {rtu_port}\ndefault_bus = line\nunit17 = dev:1\n"
                       f"[serial_slave front]\nport = {front_gw}\nparity = none\nanswer_timeout_ms = 250\n"
                       f"unit1 = line:1\nunit2 = line:2\nunit9 = line:9\nunit17 = dev:1\n"))
    g.rtu_port = rtu_port
    buses = ("line", "nport", "nport_py", "rtutcp", "dev", "asc", "lrc")
    wait_for(lambda: all(g.metrics().get(f'rtugw_bus_port_up{{bus="{b}"}}') == 1 for b in buses), 10,
             "every bus's port up")
    for t, args in ((test_rtu_over_tcp_buses, (g, units)), (test_ascii, (g, units, lrc)),
                    (test_rtu_tcp_listener, (g,)), (test_serial_slave, (g, front_master))):
        print(f"== {t.__name__}", flush=True)
        t(*args)
    print("== test_tcp_device_shared", flush=True)
    unit = test_tcp_device_shared(g, units, dev_port)
    print("== test_tcp_device_restart", flush=True)
    procs.append(test_tcp_device_restart(g, unit, dev_port, dev_proc))
    lrc.stop = True
    rc, _ = g.stop()
    check(rc == 0, "clean stop")


def remove_workdir():
    """The peers' scripts, logs and pty links, kept only when something failed."""
    if not failure_count():
        shutil.rmtree(D, ignore_errors=True)


run_tests("transports", [main, remove_workdir])
