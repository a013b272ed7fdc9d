#!/usr/bin/python3
"""Fault injection: rtugw run against `rtugw sim` started as a separate process
on its own pseudo-terminal (--link DIR/plc, which the gateway's [bus] port
names), with the simulator's faults switched on: noise, CRC errors, late
answers, truncated answers, a silent slave, the simulator killed and started
again on the same link; and a flood of TCP connections beyond max_clients.

Clients are raw Modbus/TCP sockets, so every byte of every answer is checked:
transaction id, unit, function, byte count and the register values, which
the simulator defines (holding[a] = slave * 1000 + a) or this test wrote.
What is asserted is behaviour, never speed: the one ratio (throughput with a
backed-off silent slave against without) is the behaviour under test, and
each deadline is many times what the gateway needs."""
import re
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Daemon, burn_from_env, check, fetch_status, finish, free_port, wait_listening  # noqa: E402
procs = []



if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
    print(f"rtugw binary not found at {BIN} (set RTUGW_BIN, or run from the build directory)")
    sys.exit(1)
if not os.path.isdir("/proc/self/fd"):
    print("/proc is not mounted: the fd-leak check needs /proc/PID/fd (Debian package procps brings the tools)")
    sys.exit(1)




class Sim:
    """`rtugw sim --link DIR/plc ...` as a subprocess; fails loudly if it does not start."""

    def __init__(self, link, args):
        self.link = link
        self.out = open(link + ".sim.log", "a+")
        self.p = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1,2,3"] + args,
                                  stdout=self.out, stderr=self.out)
        procs.append(self.p)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.p.poll() is not None:
                break
            if os.path.islink(link) and os.path.exists(link):
                with open(self.out.name) as f:
                    if "rtugw sim:" in f.read():
                        return
            time.sleep(0.02)
        self.out.flush()
        with open(self.out.name) as f:
            log = f.read()
        print(f"FATAL: rtugw sim {' '.join(args)} did not start (exit {self.p.poll()}): {log}", flush=True)
        sys.exit(1)

    def kill(self):
        self.p.kill()
        self.p.wait()


class Gateway(Daemon):
    def __init__(self, d, bus_extra="", devices=None, tcp_extra="", timeout_ms=100, baud=19200):
        self.dir = d
        self.tcp_port, self.http_port = free_port(), free_port()
        self.cfg = os.path.join(d, "rtugw.conf")
        if devices is None:
            devices = "".join(f"[device d{s}]\nslave = {s}\ndead_after = 0\n" for s in (1, 2, 3))
        # a key given twice is an error: the default only when the caller sets none
        tcp_defaults = "" if "max_clients" in tcp_extra else "max_clients = 64\n"
        self.text = (f"[gateway]\nlog_level = info\n"
                     f"[bus line]\nport = {os.path.join(d, 'plc')}\nbaud = {baud}\n"
                     f"response_timeout_ms = {timeout_ms}\nretries = 1\n{bus_extra}"
                     f"{devices}"
                     f"[tcp]\nport = {self.tcp_port}\ndefault_bus = line\n{tcp_defaults}{tcp_extra}"
                     f"[http]\nport = {self.http_port}\n")
        with open(self.cfg, "w") as f:
            f.write(self.text)
        self.log = open(os.path.join(d, "rtugw.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stdout=self.log, stderr=self.log)
        procs.append(self.p)
        wait_listening(self.tcp_port, self.p) and wait_listening(self.http_port, self.p)   # /metrics next
        if self.p.poll() is not None:
            print(f"FATAL: rtugw run exited {self.p.returncode}: {self.log_text()}", flush=True)
            sys.exit(1)
        # the bus reports its port open
        deadline = time.time() + 5
        while time.time() < deadline and self.metrics().get('rtugw_bus_port_up{bus="line"}') != 1:
            time.sleep(0.05)
        if self.metrics().get('rtugw_bus_port_up{bus="line"}') != 1:
            print(f"FATAL: rtugw run did not open {os.path.join(d, 'plc')}: {self.log_text()}", flush=True)
            sys.exit(1)

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.p.pid}/fd"))


class Client:
    """A raw Modbus/TCP connection: each request's answer is matched to it by tid."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.tid = 0

    def send(self, unit, pdu):
        self.tid = (self.tid + 1) & 0xFFFF
        self.s.sendall(struct.pack(">HHHB", self.tid, 0, len(pdu) + 1, unit) + pdu)
        return self.tid

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the gateway")
            buf += chunk
        return buf

    def recv(self):
        tid, proto, length, unit = struct.unpack(">HHHB", self._recv_exact(7))
        return tid, unit, self._recv_exact(length - 1)

    def call(self, unit, pdu):
        tid = self.send(unit, pdu)
        rtid, runit, body = self.recv()
        if rtid != tid or runit != unit:
            raise AssertionError(f"answer for tid {rtid} unit {runit} to request tid {tid} unit {unit}")
        return body

    def close(self):
        self.s.close()


def read_pdu(addr, count):
    return struct.pack(">BHH", 3, addr, count)


def parse_read(body, count):
    """('ok', [values]) | ('exc', code) | ('bad', why): anything else is wrong data."""
    if len(body) == 2 and body[0] == 0x83:
        return "exc", body[1]
    if body[0] != 3 or len(body) < 2 or body[1] != 2 * count or len(body) != 2 + 2 * count:
        return "bad", body.hex()
    return "ok", list(struct.unpack(f">{count}H", body[2:]))


GATEWAY_EXCEPTIONS = (0x0A, 0x0B)


def setup(prefix):
    d = tempfile.mkdtemp(prefix=f"rtugw-faults-{prefix}-")
    return d, os.path.join(d, "plc")


def cleanup(d, g):
    if "ERROR:" not in g.log_text() and not os.environ.get("RTUGW_KEEP"):
        shutil.rmtree(d, ignore_errors=True)


def check_answered_once(m, n):
    """The gateway's own count: n requests in, n answers out."""
    check(m["rtugw_tcp_requests_total"] == m["rtugw_tcp_answers_total"] == n,
          f"every request answered exactly once ({m['rtugw_tcp_requests_total']:.0f} / "
          f"{m['rtugw_tcp_answers_total']:.0f})")


def no_wrong_data(c, rounds, label):
    """Write a unique value, read it back. A write answered with a gateway
    exception may or may not have reached the slave: either value is then
    right. Returns (good reads, gateway exceptions, wrong answers)."""
    good = exc = 0
    wrong = []
    known = {}                        # address -> set of values it may hold
    for i in range(rounds):
        slave = 1 + i % 3
        addr = 300 + (i * 7) % 40
        key = (slave, addr)
        old = known.get(key, {slave * 1000 + addr})
        value = (0x4000 + i * 37) & 0xFFFF
        body = c.call(slave, struct.pack(">BHH", 6, addr, value))
        if body == struct.pack(">BHH", 6, addr, value):
            known[key] = {value}
        elif len(body) == 2 and body[0] == 0x86 and body[1] in GATEWAY_EXCEPTIONS:
            known[key] = old | {value}
            exc += 1
        else:
            wrong.append(f"write {slave}:{addr}={value}: {body.hex()}")
            continue
        count = 1 + i % 3             # differently shaped reads, each checked
        body = c.call(slave, read_pdu(addr, count))
        kind, v = parse_read(body, count)
        if kind == "ok":
            expect_rest = [slave * 1000 + addr + k for k in range(1, count)]
            # neighbours may have been written by this loop too: check those we know
            ok = v[0] in known[key]
            for k in range(1, count):
                ok = ok and v[k] in known.get((slave, addr + k), {expect_rest[k - 1]})
            if ok:
                good += 1
                known[key] = {v[0]}
            else:
                wrong.append(f"read {slave}:{addr}x{count} = {v}, expected {known[key]}")
        elif kind == "exc" and v in GATEWAY_EXCEPTIONS:
            exc += 1
        else:
            wrong.append(f"read {slave}:{addr}x{count}: {kind} {v}")
    print(f"   {label}: {good} good reads, {exc} gateway exceptions, {len(wrong)} wrong", flush=True)
    return good, exc, wrong


def test_noise_and_crc():
    d, link = setup("noise")
    sim = Sim(link, ["--noise-rate", "0.3", "--crc-rate", "0.2", "--seed", "11"])
    g = Gateway(d)
    c = Client(g.tcp_port)
    good, exc, wrong = no_wrong_data(c, 150, "noise 0.3 + crc 0.2")
    check(not wrong, f"noise and CRC errors: never wrong data ({wrong[:3]})")
    check(good >= 75, f"noise and CRC errors: most reads still answered correctly ({good} of 150)")
    m = g.metrics()
    check(m.get('rtugw_bus_retries_total{bus="line"}', 0) > 0, "retries counted")
    check(m.get('rtugw_bus_crc_errors_total{bus="line"}', 0) > 0, "CRC errors counted")
    check(m.get('rtugw_bus_noise_bytes_total{bus="line"}', 0) > 0, "noise bytes counted")
    check_answered_once(m, 300)
    c.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_truncated():
    d, link = setup("trunc")
    sim = Sim(link, ["--truncate-rate", "0.3", "--seed", "5"])
    g = Gateway(d)
    c = Client(g.tcp_port)
    good, exc, wrong = no_wrong_data(c, 100, "truncate 0.3")
    check(not wrong, f"truncated answers: never wrong data ({wrong[:3]})")
    check(good >= 50, f"truncated answers: most reads still answered correctly ({good} of 100)")
    m = g.metrics()
    damaged = (m.get('rtugw_bus_crc_errors_total{bus="line"}', 0) +
               m.get('rtugw_bus_noise_bytes_total{bus="line"}', 0) +
               m.get('rtugw_bus_timeouts_total{bus="line"}', 0))
    check(damaged > 0 and m.get('rtugw_bus_retries_total{bus="line"}', 0) > 0,
          f"truncated answers counted (crc_errors + noise + timeouts = {damaged:.0f}) and retried")
    check_answered_once(m, 200)
    c.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_late_answers():
    """Late answers (150 ms against a 100 ms timeout). Requests alternate two
    shapes: slave 1, 2 registers at 100 and slave 2, 3 registers at 200, so an
    answer given to the wrong request shows in its unit, byte count or values."""
    d, link = setup("late")
    sim = Sim(link, ["--late-rate", "0.5", "--late-ms", "150", "--seed", "7"])
    g = Gateway(d)
    c = Client(g.tcp_port)
    shapes = [(1, 100, 2), (2, 200, 3)]
    good = exc = 0
    wrong = []
    for i in range(80):
        slave, addr, count = shapes[i % 2]
        body = c.call(slave, read_pdu(addr, count))
        kind, v = parse_read(body, count)
        if kind == "ok" and v == [slave * 1000 + addr + k for k in range(count)]:
            good += 1
        elif kind == "exc" and v in GATEWAY_EXCEPTIONS:
            exc += 1
        else:
            wrong.append(f"#{i} slave {slave} {addr}x{count}: {kind} {v}")
    print(f"   late 0.5: {good} right, {exc} gateway exceptions, {len(wrong)} wrong", flush=True)
    check(not wrong, f"a late answer is never delivered to another request ({wrong[:3]})")
    check(good >= 40, f"late answers: most requests answered correctly ({good} of 80)")
    m = g.metrics()
    # A late answer is taken for its own parked question (late_answers) or,
    # after a give-up, dropped in its slave's guard or as foreign: counted either way.
    late = sum(m.get(f'rtugw_bus_{k}_total{{bus="line"}}', 0)
               for k in ("foreign_frames", "late_bytes_guarded", "late_answers"))
    check(late > 0, f"late answers counted: taken for their own question, or dropped ({late:.0f})")
    check(m.get('rtugw_bus_timeouts_total{bus="line"}', 0) > 0, "timeouts counted")
    check_answered_once(m, 80)
    # The per-slave summary says which timeout is in force and where it comes from.
    summaries = re.findall(r"bus line slave (\d+): .*; response timeout for slave (\d+) now (\d+) ms \(([^)]*)\)",
                           g.log_text())
    explained = all(s == s2 and (why == "as configured" if int(ms) == 100 else
                                 why == "adapted from the configured 100 ms: 1.5x the latency of a late answer, "
                                        "at most 4x")
                    for s, s2, ms, why in summaries)
    check(summaries and explained, f"the summary explains the response timeout ({summaries[:3]})")
    c.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_late_answer_to_a_later_request():
    """Regression test for a bug fixed in this session.
    As test_late_answers, but four shapes: slave 1, 2 registers at 100 and at
    500; slave 2, 3 registers at 200 and at 600. Requests two apart have the
    same slave, function and quantity but different addresses; the answer
    carries no address, so when the slave (answering in order, late, each
    retry too) falls two requests behind, the answer to request n is accepted
    for request n + 2: wrong data. Before the fix (19 wrong of 120), nothing
    stopped gateway/bus.c from sending the next request while answers to
    timed-out attempts were still owed, and frame_matches() cannot tell such
    answers apart. Now, after a transaction with a timed-out attempt, the line
    must be silent for one response timeout first; what arrives meanwhile is
    dropped and counted (rtugw_bus_late_bytes_guarded_total, or
    rtugw_bus_foreign_frames_total for a frame in the chunk that ended the
    transaction)."""
    d, link = setup("late4")
    sim = Sim(link, ["--late-rate", "0.5", "--late-ms", "150", "--seed", "9"])
    g = Gateway(d)
    c = Client(g.tcp_port)
    shapes = [(1, 100, 2), (2, 200, 3), (1, 500, 2), (2, 600, 3)]
    wrong = []
    for i in range(120):
        slave, addr, count = shapes[i % 4]
        kind, v = parse_read(c.call(slave, read_pdu(addr, count)), count)
        if not ((kind == "ok" and v == [slave * 1000 + addr + k for k in range(count)]) or
                (kind == "exc" and v in GATEWAY_EXCEPTIONS)):
            wrong.append(f"#{i} slave {slave} {addr}x{count}: {kind} {v}")
    check(not wrong, f"late answers: no wrong data for a later request of the same shape "
          f"({len(wrong)} of 120 wrong: {wrong[:3]})")
    m = g.metrics()
    guarded = m.get('rtugw_bus_late_bytes_guarded_total{bus="line"}', 0)
    foreign = m.get('rtugw_bus_foreign_frames_total{bus="line"}', 0) + \
        m.get('rtugw_bus_late_answers_total{bus="line"}', 0)
    check(guarded + foreign > 0, f"late answers taken for their own question or dropped, and counted (foreign or late {foreign:.0f}, "
          f"chunks in the guard silence {guarded:.0f})")
    c.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def throughput(port, units, seconds, depth=4):
    """Requests answered correctly per second for each unit, each unit on its
    own connection with `depth` requests pipelined so the bus never idles."""
    counts = {u: 0 for u in units}
    errors = []
    stop_at = time.time() + seconds

    def worker(unit):
        c = Client(port)
        want = [unit * 1000 + 10, unit * 1000 + 11]
        pending = 0
        try:
            while True:
                while pending < depth and time.time() < stop_at:
                    c.send(unit, read_pdu(10, 2))
                    pending += 1
                if pending == 0:
                    break
                _, runit, body = c.recv()
                pending -= 1
                kind, v = parse_read(body, 2)
                if runit == unit and kind == "ok" and v == want:
                    counts[unit] += 1
                else:
                    errors.append(f"unit {unit}: {runit} {kind} {v}")
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(u,)) for u in units]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 30)
    return counts, errors


def test_silent_slave_throughput():
    """Slave 3 is silent (dead_after = 2, back-off 60 s: no probe falls in the
    measurement). The simulator waits 10 ms before each answer (a slow PLC), so
    the bus, not this machine's CPU, bounds the rate. Phase A: slaves 1 and 2
    alone. Phase B: the same, while a client keeps asking slave 3 (backed off).
    The phases alternate (A B A B A B) so that load from elsewhere on the machine
    falls on both. Slaves 1 and 2 must keep at least 90 % of their phase A
    throughput (the issue's stated behaviour and threshold)."""
    d, link = setup("silent")
    sim = Sim(link, ["--silent", "3", "--turnaround-us", "10000", "--seed", "3"])
    devices = ("[device d1]\nslave = 1\n[device d2]\nslave = 2\n"
               "[device d3]\nslave = 3\ndead_after = 2\ndead_backoff_ms = 60000\n")
    g = Gateway(d, devices=devices)
    c3 = Client(g.tcp_port)
    # Slave 3 goes silent: two timed-out requests (each 100 ms x 2 attempts) back it off.
    for _ in range(2):
        body = c3.call(3, read_pdu(0, 1))
        check(body == bytes([0x83, 0x0B]), f"silent slave answered 0x0B after its retries ({body.hex()})")
    check(g.metrics().get('rtugw_device_backed_off{bus="line",device="d3",slave="3"}') == 1,
          "silent slave 3 backed off")
    fast = [0, 0]
    other3 = []

    def hammer_slave3(stop):
        while not stop.is_set():
            body = c3.call(3, read_pdu(0, 1))
            fast[0] += 1
            fast[1] += body == bytes([0x83, 0x0B])
            if body != bytes([0x83, 0x0B]):
                other3.append(body.hex())
            time.sleep(0.01)

    per_slice = {"A": [], "B": []}
    errors = {"A": [], "B": []}
    slice_s = 0.75
    slices = []
    for phase in "ABABABAB":
        stop = threading.Event()
        t3 = threading.Thread(target=hammer_slave3, args=(stop,))
        if phase == "B":
            t3.start()
        counts, errs = throughput(g.tcp_port, (1, 2), slice_s)
        stop.set()
        if phase == "B":
            t3.join(timeout=10)
        per_slice[phase].append(counts[1] + counts[2])
        slices.append(f"{phase}{counts[1] + counts[2]}")
        errors[phase] += errs
    # The median slice of each phase: a retry or a scheduling hiccup of this
    # busy machine in one slice, which can fall in either phase, does not decide.
    med = {k: sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1] for k, v in per_slice.items()}
    rate_a, rate_b = (sum(med["A"]) / 2 / slice_s, sum(med["B"]) / 2 / slice_s)
    done = {k: sum(v) for k, v in per_slice.items()}
    print(f"   phase A {done['A']} answers, median {rate_a:.0f}/s; phase B {done['B']}, median {rate_b:.0f}/s "
          f"(ratio {rate_b / max(rate_a, 1):.3f}; slices {' '.join(slices)}); slave 3 asked {fast[0]} times",
          flush=True)
    check(not errors["A"], f"phase A: slaves 1 and 2: every answer right ({len(errors['A'])} wrong: {errors['A'][:3]})")
    check(not errors["B"], f"phase B: slaves 1 and 2: every answer right ({len(errors['B'])} wrong: {errors['B'][:3]})")
    check(done["A"] > 150, f"phase A: many requests ({done['A']})")
    check(rate_b >= 0.9 * rate_a, f"silent slave backed off: slaves 1 and 2 keep >= 90 % throughput "
          f"({rate_b:.0f}/s against {rate_a:.0f}/s)")
    check(fast[0] > 50 and fast[1] == fast[0], f"backed-off slave 3 answered 0x0B every time ({fast}, {other3[:5]})")
    m = g.metrics()
    check(m.get('rtugw_bus_dead_fast_total{bus="line"}', 0) >= fast[0], "fast 0x0B answers counted")
    check(m.get('rtugw_bus_reopen_attempts_total{bus="line"}', 0) == 0, "the line never went down")
    c3.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_paced_line_no_spurious_hangup():
    """Regression test for a bug fixed in this session.
    The simulator sends its answers byte by byte at 115200 baud (--pace), as a
    real line does. The gateway must never think the line hung up: the port
    stays up, no 0x0A. Before the fix, drivers/serial.c serial_read() took a
    read() of 0 (what a VMIN = 0, VTIME = 0 tty returns when no byte is
    waiting, O_NONBLOCK or not) followed by poll() showing POLLIN (a byte that
    arrived in between) for end of file, and returned DRIVER_HANGUP. The race
    is timing-dependent: on this 2-core machine one 5 s round showed it in
    about half the runs (1 to 7 reopens); three rounds make a miss rare."""
    d, link = setup("paced")
    sim = Sim(link, ["--pace", "--baud", "115200", "--seed", "3"])
    g = Gateway(d, baud=115200)  # --pace: a master at another speed is not heard
    # Four busy processes preempt the daemon's I/O thread between its read()
    # and poll(), which widens the window (the machine's own load does too).
    burners = [subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"]) for _ in range(4)]
    procs.extend(burners)
    counts, errs = {1: 0, 2: 0}, []
    try:
        # The race needs a byte to land in a window of microseconds: up to
        # three rounds of 4 s, stopping at the first hang-up seen.
        for _ in range(3):
            c, e = throughput(g.tcp_port, (1, 2), 4.0)
            counts = {k: counts[k] + c[k] for k in counts}
            errs += e
            if g.metrics().get('rtugw_bus_reopen_attempts_total{bus="line"}', 0):
                break
    finally:
        for b in burners:
            b.kill()
            b.wait()
    m = g.metrics()
    down = m.get('rtugw_bus_reopen_attempts_total{bus="line"}', 0)
    unavailable = m.get('rtugw_bus_unavailable_total{bus="line"}', 0)
    print(f"   answered {counts}, {len(errs)} errors (0x0B allowed here), port reopened {down:.0f} times, "
          f"{unavailable:.0f} answered 0x0A", flush=True)
    check(down == 0 and unavailable == 0 and
          "line hung up" not in g.log_text(),
          f"paced answers: the line is never taken for hung up ({down:.0f} reopen attempts)")
    # 0x0B can happen here without a bug: a starved simulator pauses longer than
    # t3.5 inside a frame. Only a wrong answer or 0x0A is a failure.
    wrong = [e for e in errs if not e.endswith("exc 11")]
    check(not wrong, f"paced answers: no wrong data, no 0x0A ({len(wrong)}: {wrong[:3]})")
    g.stop()
    sim.kill()
    cleanup(d, g)


def thread_switches(pid, name=None):
    """Voluntary context switches of every thread of pid (or of those named
    name): each is a sleep, so a wake-up."""
    n = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if name and f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{task}/status") as f:
                n += sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
        except OSError:
            pass
    return n


def test_paced_poll_wakeups():
    """A paced 9600 8E1 line (`rtugw sim --pace`, a pty that hands over a few
    bytes at a time) polled for 10 registers every 100 ms: the gateway wakes
    per answer, not per chunk (gateway/port.c, paced reads), and every answer
    is one frame (no CRC error, no timeout). A count, not a time: wake-ups
    per poll were ~33 before paced reads and are ~4 now; the bound, 12,
    leaves room for a loaded machine's scheduling and still fails the old
    way of reading. The reads happen on the thread `rtugw-line`
    ([gateway] line_thread), not on the I/O thread of the front ends."""
    d, link = setup("wakeups")
    sim = Sim(link, ["--pace", "--baud", "9600", "--format", "8E1"])
    poll = ("[device d1]\nslave = 1\ndead_after = 0\n"
            "[poll p1]\ndevice = d1\nfunction = 3\naddress = 0\ncount = 10\ninterval_ms = 100\n")
    g = Gateway(d, devices=poll, timeout_ms=500, baud=9600)
    time.sleep(1.0)

    def bus():
        b = fetch_status(g.http_port)["buses"][0]
        return b["responses"], b["crc_errors"], b["timeouts"]
    r0, c0, t0 = bus()
    w0, l0 = thread_switches(g.p.pid), thread_switches(g.p.pid, "rtugw-line")
    time.sleep(3.0)
    w1, l1 = thread_switches(g.p.pid), thread_switches(g.p.pid, "rtugw-line")
    r1, c1, t1 = bus()
    polls = r1 - r0
    per_poll, line_per_poll = (w1 - w0) / max(polls, 1), (l1 - l0) / max(polls, 1)
    print(f"   {polls} polls, {per_poll:.1f} wake-ups per poll ({line_per_poll:.1f} of the line thread), "
          f"{c1 - c0} CRC errors, {t1 - t0} timeouts", flush=True)
    check(polls >= 15, f"the poll ran ({polls} answers in 3 s, 30 due)")
    check(per_poll <= 12, f"at most 12 wake-ups per paced poll (got {per_poll:.1f})")
    # [gateway] line_thread (the default): the port is read on a thread of its own.
    check(line_per_poll >= 2, f"the port is read on the line thread ({line_per_poll:.1f} wake-ups per poll)")
    check(c1 - c0 == 0 and t1 - t0 == 0, f"no CRC error and no timeout ({c1 - c0}, {t1 - t0})")
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_peer_vanishes_and_returns():
    d, link = setup("vanish")
    sim = Sim(link, ["--seed", "1"])
    g = Gateway(d)
    c = Client(g.tcp_port)
    kind, v = parse_read(c.call(1, read_pdu(5, 2)), 2)
    check(kind == "ok" and v == [1005, 1006], f"served before the peer vanishes ({kind} {v})")
    sim.kill()                                     # SIGKILL: the pty master just goes away
    # Its link would still name /dev/pts/N, which another process on this
    # machine may be handed next: the gateway would then reopen a stranger's
    # pseudo-terminal. Gone is gone: the link goes with the peer.
    try:
        os.unlink(link)
    except FileNotFoundError:
        pass
    results = []
    t_end = time.time() + 1.5
    while time.time() < t_end:
        results.append(parse_read(c.call(1, read_pdu(5, 2)), 2))
        time.sleep(0.05)
    bad = [r for r in results if not (r[0] == "exc" and r[1] in GATEWAY_EXCEPTIONS)]
    check(not bad and results, f"peer gone: every answer a gateway exception 0x0A/0x0B ({len(results)} "
          f"answers, unexpected {bad[:3]})")
    check(any(r == ("exc", 0x0A) for r in results), "peer gone: port reported down (0x0A)")
    check(g.p.poll() is None, "daemon still running with the peer gone")
    m = g.metrics()
    check(m.get('rtugw_bus_port_up{bus="line"}') == 0 and m.get('rtugw_bus_reopen_attempts_total{bus="line"}', 0) >= 1,
          "port shown down, reopen attempted")
    sim = Sim(link, ["--seed", "2"])              # same link, a new pseudo-terminal
    t0 = time.time()
    recovered = None
    unexpected = []
    while time.time() - t0 < 20:                  # back-off is at most 5 s
        kind, v = parse_read(c.call(1, read_pdu(5, 2)), 2)
        if kind == "ok":
            recovered = v
            break
        if not (kind == "exc" and v in GATEWAY_EXCEPTIONS):
            unexpected.append((kind, v))
        time.sleep(0.1)
    dt = time.time() - t0
    print(f"   recovered after {dt:.2f} s", flush=True)
    check(not unexpected, f"while reopening: only gateway exceptions ({unexpected[:3]})")
    check(recovered == [1005, 1006], f"peer back: requests succeed again without a restart ({recovered})")
    check(dt < 15, f"recovered within the back-off (<= 5 s) plus a wide margin ({dt:.1f} s)")
    # and keeps working, the same process
    kind, v = parse_read(c.call(2, read_pdu(7, 3)), 3)
    check(kind == "ok" and v == [2007, 2008, 2009], "other slaves served after recovery")
    check(g.metrics().get('rtugw_bus_port_up{bus="line"}') == 1, "port shown up again")
    c.close()
    g.stop()
    sim.kill()
    cleanup(d, g)


def test_connection_flood():
    d, link = setup("flood")
    sim = Sim(link, ["--seed", "1"])
    g = Gateway(d, tcp_extra="max_clients = 8\n")
    clients = [Client(g.tcp_port) for _ in range(8)]
    first = [parse_read(c.call(1 + k % 3, read_pdu(k, 1)), 1) for k, c in enumerate(clients)]
    check(first == [("ok", [(1 + k % 3) * 1000 + k]) for k in range(8)], f"8 clients (max_clients) served ({first})")
    time.sleep(0.2)
    baseline = g.fd_count()
    refused = served = 0
    wrong = []
    total = 1000
    batch = 200
    for start in range(0, total, batch):
        socks = []
        for _ in range(batch):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", g.tcp_port))
            except OSError:
                refused += 1           # a full backlog refuses at connect: also clean
                s.close()
                continue
            socks.append(s)
        # existing clients are still served while the flood holds its sockets
        for k, c in enumerate(clients):
            kind, v = parse_read(c.call(1 + k % 3, read_pdu(20 + k, 1)), 1)
            if kind == "ok" and v == [(1 + k % 3) * 1000 + 20 + k]:
                served += 1
            else:
                wrong.append((k, kind, v))
        for s in socks:
            try:
                r = s.recv(1)
                if r == b"":
                    refused += 1
            except ConnectionResetError:
                refused += 1
            except socket.timeout:
                pass
            s.close()
    check(refused == total, f"flood: all {total} connections beyond max_clients closed ({refused})")
    check(served == 8 * (total // batch) and not wrong,
          f"existing clients served throughout the flood ({served}, {wrong[:3]})")
    check(g.metrics().get("rtugw_tcp_refused_full_total", 0) >= total - 50,
          f"refusals counted ({g.metrics().get('rtugw_tcp_refused_full_total', 0):.0f})")
    deadline = time.time() + 10
    while time.time() < deadline and g.fd_count() != baseline:
        time.sleep(0.1)
    check(g.fd_count() == baseline, f"daemon fd count back to its baseline ({g.fd_count()} vs {baseline})")
    # after the flood, a freed slot is usable again
    clients[0].close()
    time.sleep(0.2)
    n = Client(g.tcp_port)
    kind, v = parse_read(n.call(1, read_pdu(3, 1)), 1)
    check(kind == "ok" and v == [1003], "a new client is served once a slot is free")
    n.close()
    for c in clients[1:]:
        c.close()
    check(g.p.poll() is None, "daemon alive after the flood")
    g.stop()
    sim.kill()
    cleanup(d, g)


t_start = time.time()
procs.extend(burn_from_env())
try:
    tests = (test_noise_and_crc, test_late_answers, test_late_answer_to_a_later_request, test_truncated,
             test_silent_slave_throughput, test_peer_vanishes_and_returns, test_paced_line_no_spurious_hangup,
             test_connection_flood, test_paced_poll_wakeups)
    chosen = sys.argv[1:]    # names of tests to run; none: all
    for t in tests:
        if chosen and t.__name__ not in chosen:
            continue
        t0 = time.time()
        print(f"== {t.__name__}", flush=True)
        try:
            t()
        except Exception as e:   # a broken connection, a timeout: a failure, not a crash of the test
            check(False, f"{t.__name__} raised {type(e).__name__}: {e}")
        print(f"   ({time.time() - t0:.1f} s)", flush=True)
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
finish("faults", f" in {time.time() - t_start:.0f} s")
