#!/usr/bin/python3
"""Keys made live one by one (issue 41), each against a real `rtugw run`, by
SIGHUP or the API, checked by what the daemon does afterwards:
  - a device's line keys (timeout_ms, dead_after, dead_backoff_ms) and a
    bus's (response_timeout_ms, retries, gap_us, ...), applied between two
    events of the line;
  - a device moved to another slave id or bus: its tags and poll groups
    start afresh, no value read at the old address shown as the new one's;
  - a bus's port and serial settings (`rtugw sim --pace` on two ptys);
  - [udp]: routes, allow, a new address bound before the old one stops;
  - log_target: the reload's own line goes to syslog (a socket on /dev/log);
  - [serial_slave] sections added, re-routed, changed and removed while
    pymodbus' serial master on an unchanged one reads on.
Each: restart_needed empty, what did not change undisturbed."""
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, Gateway, check, procs, run_tests, wait_for  # noqa: E402
from tagscheck import tag_values  # noqa: E402
from test_live_change import POLL_AND_TAG, SIM1, TOKEN, api, hup, requests_in, tag_good  # noqa: E402


def test_line_keys_live():
    """A device's timeout_ms, dead_after and dead_backoff_ms and the bus's
    response_timeout_ms and retries apply live (each was restart_needed,
    "devices"/"buses"): the line's timeout for the slave is the new one
    (rtugw_device_timeout_ms), polling goes on, and the Modbus TCP client's
    connection keeps answering. queue_depth applies too: the bus restarts in
    place (tests/e2e/config/test_bus_live.py has the rest)."""
    devs = ("[device m1]\nslave = 1\ntimeout_ms = 300\n[device m3]\nslave = 3\n"
            "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 50\n")
    g = Gateway(bus=SIM1.replace("sim:1", "sim:1,3"), devices=devs, timeout_ms=250)

    def tmo(dev, slave):
        return g.metrics().get(f'rtugw_device_timeout_ms{{bus="line",device="{dev}",slave="{slave}"}}')
    check(wait_for(lambda: tag_good(g, "t1"), 5) and tmo("m1", 1) == 300 and tmo("m3", 3) == 250,
          f"t1 polled; the line's timeouts are the file's: m1 {tmo('m1', 1)}, m3 {tmo('m3', 3)}")
    c = g.client()
    check(not c.read_holding_registers(5, 2, slave=3).isError(), "a Modbus TCP client reads slave 3")
    for n, (old, new) in enumerate([("timeout_ms = 300\n", "timeout_ms = 700\ndead_after = 5\ndead_backoff_ms = 2000\n"),
                                    ("response_timeout_ms = 250\nretries = 1\n", "response_timeout_ms = 600\nretries = 2\n")]):
        hup(g, g.text.replace(old, new))
        check(wait_for(lambda: g.status()["last_reload"] and "bus_keys" in g.status()["last_reload"]["applied"]
                       if n else g.status()["last_reload"] and "devices" in g.status()["last_reload"]["applied"], 3),
              f"change {n + 1} applied: {g.status()['last_reload']}")
        check(g.status()["restart_needed"] == "", f"nothing waits: {g.status()['restart_needed']!r}")
    check(wait_for(lambda: tmo("m1", 1) == 700 and tmo("m3", 3) == 600, 3),
          f"the line took them: m1 {tmo('m1', 1)} (700), m3 {tmo('m3', 3)} (the bus's, 600)")
    r = c.read_holding_registers(5, 2, slave=3)
    check(not r.isError() and r.registers == [3005, 3006], f"the same TCP connection still answers: {r}")
    polls = requests_in(g, 0.5)
    check(polls > 3, f"t1 still polled ({polls} requests in 0.5 s)")
    hup(g, g.text.replace("baud = 115200", "baud = 115200\nqueue_depth = 32"))
    check(wait_for(lambda: "restarted at its new settings" in g.log_text(), 3) and g.status()["restart_needed"] == "",
          f"queue_depth applies: the bus restarted in place ({g.status()['restart_needed']!r})")
    c.close()
    g.stop()


def test_device_moved_to_another_slave_live():
    """A device moved to another slave id by SIGHUP and by the API (each was
    restart_needed "devices"): its tags and its poll group read the new slave
    from then on, and no value read at the old slave is shown as the new
    one's: every good value of t1 after the reload is the new slave's
    (holding[10] = 1000 * slave + 10), sampled throughout, and the group's
    cached read over Modbus TCP is the new slave's too."""
    devs = ("[device m1]\nslave = 1\n[poll p1]\ndevice = m1\nfunction = 3\naddress = 0\ncount = 4\ninterval_ms = 50\n"
            "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 20\n")
    g = Gateway(bus=SIM1.replace("sim:1", "sim:1,2,3"), devices=devs, extra=f"write_token = {TOKEN}\n")
    check(wait_for(lambda: tag_values(g).get("t1", {}).get("value") == 1010, 5), "t1 reads slave 1's 1010")
    for n, slave in enumerate((2, 3)):
        rev = (g.status()["last_reload"] or {}).get("revision")
        if n == 0:
            hup(g, g.text.replace("[device m1]\nslave = 1\n", "[device m1]\nslave = 2\n"))
        else:
            st, r = api(g, "PUT", "/api/devices/m1", {"slave": 3})
            check(st == 200 and r.get("restart_needed") == "", f"PUT /api/devices/m1 slave 3: live ({st} {r})")
        check(wait_for(lambda: (g.status()["last_reload"] or {}).get("revision") not in (None, rev), 3), "reloaded")
        check(g.status()["restart_needed"] == "", f"nothing waits: {g.status()['restart_needed']!r}")
        seen, wrong, end = set(), [], time.time() + 1.5
        while time.time() < end:
            t = tag_values(g).get("t1", {})
            if t.get("quality") == "good":
                seen.add(t["value"])
                if t["value"] != 1000 * slave + 10:
                    wrong.append(t["value"])
            time.sleep(0.01)
        check(not wrong and seen == {1000 * slave + 10},
              f"move {n + 1}: every good t1 after the reload is slave {slave}'s ({sorted(seen)}, wrong {wrong[:5]})")
        p1 = g.status()["polls"][0]
        check(p1["ok"] and p1["values"] == [1000 * slave + a for a in range(4)], f"p1 polled at slave {slave}: {p1}")
    g.stop()


class PacedSim:
    """`rtugw sim --pace` on a pseudo-terminal of its own (a link to it): it
    hears only a master set to its own baud and format (docs/drivers.md)."""
    def __init__(self, d, name, slaves, baud, fmt):
        self.link = os.path.join(d, name)
        self.log = open(os.path.join(d, name + ".log"), "w")
        self.p = subprocess.Popen([BIN, "sim", "--link", self.link, "--slaves", slaves, "--baud", str(baud),
                                   "--format", fmt, "--pace"], stdout=subprocess.DEVNULL, stderr=self.log)
        procs.append(self.p)
        check(wait_for(lambda: os.path.exists(self.link), 5), f"rtugw sim serves {self.link}")


def test_bus_port_live():
    """A bus's baud and parity, then its port, changed by SIGHUP and by the
    API apply live (each was restart_needed "buses"): on real
    pseudo-terminals, `rtugw sim --pace` hears only a master at its own baud
    and format, so the tag is good only once the line reopened at the new
    settings; slave 1 holds the same registers on both ports (equal values)
    and slave 2 only on the second. A client of the other bus, on one
    connection, gets every answer right throughout, and nothing waits for a
    restart."""
    d = tempfile.mkdtemp(prefix="rtugw-port-live-")
    a = PacedSim(d, "ttyA", "1", 9600, "8E1")
    b = PacedSim(d, "ttyB", "1,2", 19200, "8N1")
    devs = ("[device m1]\nbus = line\nslave = 1\n"
            "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 50\n"
            "[bus other]\nport = sim:3\nbaud = 115200\n[device m3]\nbus = other\nslave = 3\n")
    g = Gateway(bus=f"port = {a.link}\nbaud = 19200\nparity = even\n", devices=devs, timeout_ms=100,
                extra_tcp="unit3 = other:3\n", extra=f"write_token = {TOKEN}\n", dir=d)
    stop, tally = threading.Event(), {"right": 0, "wrong": []}

    def other_bus():
        c = g.client()
        while not stop.is_set():
            r = c.read_holding_registers(40, 3, slave=3)
            if r.isError() or r.registers != [3040, 3041, 3042]:
                tally["wrong"].append(str(r))
            else:
                tally["right"] += 1
        c.close()
    th = threading.Thread(target=other_bus, daemon=True)
    th.start()
    time.sleep(1.0)
    check(not tag_good(g, "t1") and g.status()["buses"][0]["timeouts"] > 0,
          f"at 19200 baud the 9600-baud slave does not hear the line: t1 {tag_values(g).get('t1')}")
    hup(g, g.text.replace("baud = 19200\nparity = even\n", "baud = 9600\nparity = even\n"))
    check(wait_for(lambda: tag_values(g).get("t1", {}).get("value") == 1010 and tag_good(g, "t1"), 5),
          f"SIGHUP baud = 9600: the line reopened at it and t1 reads 1010 ({tag_values(g).get('t1')})")
    check(g.status()["restart_needed"] == "" and "bus_ports" in g.status()["last_reload"]["applied"],
          f"nothing waits: {g.status()['last_reload']}")
    # the port and its format by the API (the section editor's PUT of the whole [bus])
    st, r = api(g, "PUT", "/api/buses/line", {"port": b.link, "baud": 19200, "parity": "none",
                                               "response_timeout_ms": 100, "retries": 1})
    check(st == 200 and r.get("restart_needed") == "", f"PUT /api/buses/line to ttyB at 8N1: live ({st} {r})")
    st, r = api(g, "PUT", "/api/devices/m2", {"bus": "line", "slave": 2})
    st2, r2 = api(g, "PUT", "/api/tags/t2", {"device": "m2", "table": "holding", "address": 20, "type": "uint16",
                                             "interval_ms": 50})
    check(st == 200 and st2 == 200, f"slave 2, only on ttyB, added ({st} {r}; {st2} {r2})")
    check(wait_for(lambda: tag_values(g).get("t2", {}).get("value") == 2020 and tag_good(g, "t2"), 5),
          f"t2 reads ttyB's slave 2: {tag_values(g).get('t2')}")
    # within a few polls: a poll may time out at 100 ms on a loaded machine
    check(wait_for(lambda: tag_values(g).get("t1", {}).get("value") == 1010 and tag_good(g, "t1"), 5),
          f"and t1 its slave 1 (equal values): {tag_values(g).get('t1')}")
    check(g.status()["buses"][0]["port"] == b.link, f"/status names the new port: {g.status()['buses'][0]['port']}")
    stop.set()
    th.join(10)
    check(tally["right"] > 20 and not tally["wrong"],
          f"the other bus's client, one connection: {tally['right']} right, wrong {tally['wrong'][:3]}")
    check(g.status()["restart_needed"] == "", f"nothing waits: {g.status()['restart_needed']!r}")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


def udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def udp_ask(port, tid, unit, pdu, sock=None, timeout=2.0):
    """One Modbus UDP request to 127.0.0.1:port: (the answer's PDU, the port it came from), or (None, None)."""
    s = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    s.sendto(struct.pack(">HHHB", tid, 0, len(pdu) + 1, unit) + pdu, ("127.0.0.1", port))
    try:
        data, addr = s.recvfrom(300)
        return (data[7:] if struct.unpack(">H", data[:2])[0] == tid else None), addr[1]
    except (socket.timeout, ConnectionRefusedError):
        return None, None
    finally:
        if sock is None:
            s.close()


def test_udp_live():
    """[udp] by SIGHUP (was restart_needed "udp"): a new port binds first and
    the old socket answers what it took before it closes (a request to a
    silent slave in flight across the move gets its 0x0B from the port it
    was sent to); read_only applies from the next datagram; the section
    removed stops it and put back brings it back; nothing waits for a restart."""
    p1, p2 = udp_port(), udp_port()
    g = Gateway(extra=f"write_token = {TOKEN}\n[udp]\nlisten = 127.0.0.1:{p1}\ndefault_bus = line\n")
    pdu, port = udp_ask(p1, 1, 1, bytes([3, 0, 5, 0, 1]))
    check(pdu == bytes([3, 2]) + (1005).to_bytes(2, "big") and port == p1, f"[udp] answers on {p1}: {pdu}")
    slow = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    slow.sendto(struct.pack(">HHHB", 77, 0, 6, 9) + bytes([3, 0, 0, 0, 1]), ("127.0.0.1", p1))   # slave 9: silent
    time.sleep(0.05)
    hup(g, g.text.replace(f"listen = 127.0.0.1:{p1}\n", f"listen = 127.0.0.1:{p2}\n"))
    check(wait_for(lambda: "[udp] on 127.0.0.1:" + str(p2) in g.log_text(), 3), "the reload moved [udp]")
    slow.settimeout(3)
    try:
        data, addr = slow.recvfrom(300)
    except socket.timeout:
        data, addr = b"", (None, None)
    check(data[:2] == bytes([0, 77]) and data[7:] == bytes([0x83, 0x0B]) and addr[1] == p1,
          f"the request in flight across the move answered 0x0B from the port it went to ({data.hex()} from {addr[1]})")
    slow.close()
    pdu, port = udp_ask(p2, 2, 2, bytes([3, 0, 7, 0, 1]))
    check(pdu == bytes([3, 2]) + (2007).to_bytes(2, "big") and port == p2, f"answered on the new port {p2}: {pdu}")
    check(udp_ask(p1, 3, 1, bytes([3, 0, 5, 0, 1]), timeout=0.5)[0] is None, "and no more on the old one")
    hup(g, g.text.replace("default_bus = line\n", "default_bus = line\nread_only = true\n"))
    check(wait_for(lambda: (udp_ask(p2, 4, 1, bytes([6, 0, 1, 0, 9]))[0] or b"\0")[0] == 0x86, 3),
          "read_only = true: a write refused with an exception from the next datagram")
    with_udp = g.text
    hup(g, with_udp[:with_udp.index("[udp]\n")])
    check(wait_for(lambda: udp_ask(p2, 5, 1, bytes([3, 0, 5, 0, 1]), timeout=0.3)[0] is None, 3),
          "[udp] removed: silent")
    hup(g, with_udp)
    check(wait_for(lambda: udp_ask(p2, 6, 1, bytes([3, 0, 5, 0, 1]), timeout=0.3)[0] is not None, 3),
          "[udp] back: answered")
    check(g.status()["restart_needed"] == "", f"nothing waits: {g.status()['restart_needed']!r}")
    g.stop()

# ---- log_target, live ----------------------------------------------------------------------

def syslog_peer(d):
    """A datagram socket where syslog(3) writes (/dev/log, its one path).
    Where a system logger already has /dev/log, ours is bound over it in a
    mount namespace of this test process's own (the daemons it starts share
    it); where none has, ours is made there and removed after. Needs root,
    as the package tests do: said loudly otherwise."""
    import ctypes
    check(os.geteuid() == 0, "root, to put a socket on /dev/log (syslog(3) writes nowhere else)")
    path = os.path.join(d, "log.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    if not os.path.exists("/dev/log"):
        os.symlink(path, "/dev/log")
        return s, lambda: os.unlink("/dev/log")
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 4096, 16384, 1 << 18
    ok = libc.unshare(CLONE_NEWNS) == 0 and libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0 and \
        libc.mount(path.encode(), b"/dev/log", None, MS_BIND, None) == 0
    check(ok, f"our socket bound over /dev/log in a mount namespace of our own (errno {ctypes.get_errno()})")
    return s, lambda: None


def test_log_target_live():
    """log_target = syslog by SIGHUP: the next lines go to syslog (the
    daemon facility, identity rtugw), none to stderr; back to stderr: lines
    there again. Applied, nothing waits; a restart was needed before."""
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG)
    peer, undo = syslog_peer(g.dir)

    def reloads_on_stderr():
        g.log.flush()
        with open(os.path.join(g.dir, "log")) as f:
            return f.read().count("SIGHUP: reloaded")
    try:
        hup(g, g.text.replace("[gateway]\n", "[gateway]\nlog_target = syslog\n"))
        check(wait_for(lambda: (g.status().get("last_reload") or {}).get("result") == "applied", 5),
              f"log_target = syslog: applied ({g.status().get('last_reload')})")
        lr = g.status()["last_reload"]
        check("log_target" in lr["applied"].split() and lr["waits"] == "" and g.status()["restart_needed"] == "",
              f"named applied, nothing waits: {lr}")
        got = []
        deadline = time.time() + 5
        while time.time() < deadline and not any(b"SIGHUP: reloaded" in m for m in got):
            try:
                got.append(peer.recv(4096))
            except socket.timeout:
                pass
        line = next((m for m in got if b"SIGHUP: reloaded" in m), b"")
        # <30>: facility daemon (3 << 3) | LOG_INFO (6)
        check(line.startswith(b"<30>") and b"rtugw[" in line and b" log_target" in line,
              f"the reload's own line went to syslog: {line[:160]!r}")
        check(reloads_on_stderr() == 0, "and not to stderr")
        hup(g, g.text.replace("log_target = syslog\n", ""))
        check(wait_for(lambda: reloads_on_stderr() == 1, 5), "back to stderr: the next reload's line is there")
        check(g.status()["restart_needed"] == "", "nothing waits")
    finally:
        undo()
        peer.close()
    g.stop()


# ---- serial slaves, live ---------------------------------------------------------------------

class PtyPair:
    """socat's two linked pseudo-terminals: the gateway's end and a master's."""
    def __init__(self, d, name):
        self.gw, self.master = os.path.join(d, f"{name}-gw"), os.path.join(d, f"{name}-m")
        self.p = subprocess.Popen(["socat", f"pty,raw,echo=0,link={self.gw}", f"pty,raw,echo=0,link={self.master}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(self.p)
        check(wait_for(lambda: os.path.exists(self.gw) and os.path.exists(self.master), 5), f"socat made {name}'s ptys")

    def stop(self):
        self.p.terminate()
        self.p.wait(5)


def serial_master(path):
    from pymodbus.client import ModbusSerialClient
    c = ModbusSerialClient(port=path, baudrate=19200, parity="N", timeout=1.0, retries=0)
    check(c.connect(), f"pymodbus' serial master opens {path}")
    return c


def serial_read(c, unit, a):
    """Registers a, a+1 of unit: the list, or the error as text."""
    try:
        r = c.read_holding_registers(a, 2, slave=unit)
    except Exception as e:  # noqa: BLE001 (pymodbus raises several kinds on a silent line)
        return f"{type(e).__name__}: {e}"
    return r.registers if not r.isError() else str(r)


def test_serial_slaves_live():
    """[serial_slave] sections added, re-routed, changed and removed by
    SIGHUP, each applied at once (restart_needed empty), while pymodbus'
    serial master on an unchanged serial slave reads on: every one of its
    answers right, none lost. Two serial slaves route to the same slave
    (equal values): each master reads its own registers (0-4 on one, 5-9 on
    the other), so an answer given to the wrong master shows."""
    d = tempfile.mkdtemp(prefix="rtugw-ss-live-")
    a, b = PtyPair(d, "a"), PtyPair(d, "b")
    s1 = f"[serial_slave s1]\nport = {a.gw}\nparity = none\nanswer_timeout_ms = 800\nunit1 = line:1\n"
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices="", extra=s1)
    ma, mb = serial_master(a.master), serial_master(b.master)
    stop, tally = threading.Event(), {"right": 0, "bad": []}

    def read_a():   # the unchanged serial slave's master: registers 0-4 of slave 1
        n = 0
        while not stop.is_set():
            r = n % 5
            got = serial_read(ma, 1, r)
            if got == [1000 + r, 1001 + r]:
                tally["right"] += 1
            else:
                tally["bad"].append((r, got))
            n += 1
    th = threading.Thread(target=read_a)
    th.start()

    def applied(what):
        st = g.status()
        lr = st.get("last_reload") or {}
        check(lr.get("result") == "applied" and "serial_slaves" in lr.get("applied", "").split()
              and st["restart_needed"] == "", f"{what}: applied live ({lr}, restart_needed {st['restart_needed']!r})")

    def reload(text, what):
        before = (g.status().get("last_reload") or {}).get("time_ms")
        hup(g, text)
        check(wait_for(lambda: (g.status().get("last_reload") or {}).get("time_ms") != before, 5), f"{what}: reloaded")
        applied(what)

    def b_reads(unit, base):
        """b's master, registers 5-9 of its unit: within a second of the reload, then every one."""
        wait_for(lambda: serial_read(mb, unit, 5) == [base + 5, base + 6], 3)
        return [serial_read(mb, unit, r) for r in range(5, 10)] == [[base + r, base + r + 1] for r in range(5, 10)]

    check(b_reads(5, 1000) is False, "no serial slave on b yet: b's master gets no answer")
    s2 = f"[serial_slave s2]\nport = {b.gw}\nparity = none\nanswer_timeout_ms = 800\nunit5 = line:1\n"
    reload(g.text + s2, "s2 added")
    check(b_reads(5, 1000), "s2 answers b's master as slave 1 (equal values to s1's)")
    reload(g.text.replace("unit5 = line:1", "unit5 = line:2"), "s2 re-routed to slave 2")
    check(b_reads(5, 2000), "s2's unit 5 is now slave 2")
    m = g.metrics()
    check(m.get('rtugw_serial_slave_port_up{name="s2"}') == 1 and m.get('rtugw_serial_slave_port_up{name="s1"}') == 1,
          "both serial slaves in /metrics")
    reload(g.text.replace(s2.replace("line:1", "line:2"), ""), "s2 removed")
    check(serial_read(mb, 5, 5) != [2005, 2006], "s2 removed: b's master gets no answer")
    check('rtugw_serial_slave_port_up{name="s2"}' not in g.metrics(), "and s2 left /metrics")
    stop.set()
    th.join(20)
    check(tally["right"] > 20 and not tally["bad"],
          f"s1, unchanged, answered its master throughout: {tally['right']} right, bad {tally['bad'][:3]}")
    # s1 itself changed (its answer timeout): a new serial slave on the same port, which opens once the old closes
    reload(g.text.replace("answer_timeout_ms = 800", "answer_timeout_ms = 700"), "s1's answer_timeout_ms changed")
    check(wait_for(lambda: serial_read(ma, 1, 3) == [1003, 1004], 5), "s1, remade on its port, answers again")
    ma.close()
    mb.close()
    g.stop()
    a.stop()
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


# ---- [http]'s bounds, live ----------------------------------------------------------------

def post(g, path, body):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_http_bounds_live():
    """[http] max_body_bytes and tag_metrics by SIGHUP: applied, nothing
    waits; the next request over the new bound gets 413, one under it is
    read; /metrics gains the per-tag gauges. The keep-alive connection a
    client held across the reload still answers. Fails before: [http]
    was named in restart_needed and nothing changed."""
    import http.client
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG, extra=f"write_token = {TOKEN}\n")
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 polled")
    held = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=5)
    held.request("GET", "/status")
    check(held.getresponse().read() and True, "a keep-alive connection before the reload")
    big = b"[bus line]\n" + b"; a comment to make the body long\n" * 40
    check(post(g, "/api/config/validate", big) != 413, "before: a 1.4 KB body is read")
    check(not any(k.startswith("rtugw_tag_") and "t1" in k and "write" not in k for k in g.metrics()),
          "before: no per-tag gauge")
    before = (g.status().get("last_reload") or {}).get("time_ms")
    hup(g, g.text + "max_body_bytes = 1024\ntag_metrics = true\n")
    check(wait_for(lambda: (g.status().get("last_reload") or {}).get("time_ms") != before, 5), "reloaded")
    st = g.status()
    check(st["last_reload"]["result"] == "applied" and st["restart_needed"] == "",
          f"applied, nothing waits: {st['last_reload']} {st['restart_needed']!r}")
    check(post(g, "/api/config/validate", big) == 413, "after: the same body is over the new bound: 413")
    check(post(g, "/api/config/validate", b"[bus line]\nport = sim:1\n") != 413, "and a short one is read")
    check(any(k.startswith("rtugw_tag_") and '"t1"' in k for k in g.metrics()), "after: t1's gauges in /metrics")
    held.request("GET", "/status")
    r = held.getresponse()
    check(r.status == 200 and r.read(), "the connection held across the reload still answers")
    held.close()
    g.stop()


def test_thread_keys():
    """[gateway] line_thread_priority by SIGHUP: applied (the line thread
    sets it on itself and the log says which policy it got; as root
    SCHED_FIFO, else the warning), then 0 again: the normal policy. The
    keys that say where the buses run, line_thread and buses_on_io_thread,
    are named in restart_needed rather than reported applied while nothing
    changed (before, a reload said "applied" and ignored them)."""
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG, gateway_extra="line_thread_priority = 0\n")
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 polled")

    def reload_with(old, new):
        before = (g.status().get("last_reload") or {}).get("time_ms")
        hup(g, g.text.replace(old, new))
        check(wait_for(lambda: (g.status().get("last_reload") or {}).get("time_ms") != before, 5), f"{new!r}: reloaded")
        return g.status()

    st = reload_with("line_thread_priority = 0\n", "line_thread_priority = 7\n")
    check(st["last_reload"]["result"] == "applied" and st["restart_needed"] == "" and
          "line_thread_priority" in st["last_reload"]["applied"], f"priority 7: applied ({st['last_reload']})")
    said = lambda: ("rtugw-line: SCHED_FIFO priority 7" in g.log_text() or  # noqa: E731
                    "line_thread_priority = 7 not applied" in g.log_text())
    check(wait_for(said, 3), "the line thread says which policy it got")
    if os.geteuid() == 0:
        check("rtugw-line: SCHED_FIFO priority 7" in g.log_text(), "as root: SCHED_FIFO 7")
    st = reload_with("line_thread_priority = 7\n", "line_thread_priority = 0\n")
    check(st["restart_needed"] == "" and "line_thread_priority" in st["last_reload"]["applied"], "priority 0: applied")
    if os.geteuid() == 0:
        check(wait_for(lambda: "rtugw-line: normal priority" in g.log_text(), 3), "as root: the normal policy again")
    for key in ("line_thread", "buses_on_io_thread"):
        st = reload_with("line_thread_priority = 0\n", f"line_thread_priority = 0\n{key} = false\n")
        check(st["last_reload"]["result"] == "restart_needed" and st["restart_needed"] == key,
              f"{key} = false: named as waiting for a restart ({st['last_reload']['result']}, {st['restart_needed']!r})")
        st = reload_with(f"{key} = false\n", "")
        check(st["restart_needed"] == "", f"{key} back as it runs: nothing waits")
    # data_dirs by SIGHUP: the running copy takes it (before, "applied" and the old one kept)
    other = tempfile.mkdtemp(prefix="rtugw-dirs-")
    st = reload_with(f"data_dirs = {tempfile.gettempdir()}\n", f"data_dirs = {tempfile.gettempdir()} {other}\n")
    check(st["restart_needed"] == "" and "data_dirs" in st["last_reload"]["applied"], f"data_dirs: applied ({st['last_reload']})")
    os.rmdir(other)
    check(tag_good(g, "t1") and g.p.poll() is None, "t1 still polled, the daemon runs")
    g.stop()


TESTS = [test_line_keys_live, test_device_moved_to_another_slave_live, test_bus_port_live, test_udp_live,
         test_log_target_live, test_serial_slaves_live, test_http_bounds_live, test_thread_keys]

if __name__ == "__main__":
    run_tests("test_live_keys", TESTS)
