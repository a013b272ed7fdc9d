#!/usr/bin/python3
"""rtugw run end to end, with peers nobody here wrote: pymodbus's TCP client,
libmodbus's TCP client (through ctypes, for functions 22 and 23, which
pymodbus 3.0.0rc1 decodes wrongly), mbpoll, and a pymodbus RTU server on a
pseudo-terminal pair made by socat. The serial side is rtugw's built-in
simulator unless a test says otherwise.

Timing is asserted only where it is the behaviour under test (an exception
arrives before the timeout; a backed-off slave is answered at once), with
margins of several times the expected value."""
import ctypes
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import SLOWDOWN, Gateway, check, closed_by_peer, mbap, procs, recv_frame, run_tests, wait_for  # noqa: E402



def require(module_or_path, package):
    print(f"missing {module_or_path}: install the Debian package {package} (scripts/bootstrap does)")
    sys.exit(1)


try:
    from pymodbus.client import ModbusTcpClient
except ImportError as e:  # pymodbus itself, or serial_asyncio, which it imports
    require(e.name or "pymodbus",
            "python3-serial-asyncio" if e.name == "serial_asyncio" else "python3-pymodbus")
for tool, pkg in (("mbpoll", "mbpoll"), ("socat", "socat")):
    if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
        require(tool, pkg)
try:
    libmodbus = ctypes.CDLL("libmodbus.so.5")
except OSError:
    require("libmodbus.so.5", "libmodbus5")
libmodbus.modbus_new_tcp.restype = ctypes.c_void_p
libmodbus.modbus_new_tcp.argtypes = [ctypes.c_char_p, ctypes.c_int]
for fn in ("modbus_connect", "modbus_close", "modbus_free", "modbus_set_slave"):
    getattr(libmodbus, fn).argtypes = [ctypes.c_void_p] + ([ctypes.c_int] if fn == "modbus_set_slave" else [])
libmodbus.modbus_mask_write_register.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint16, ctypes.c_uint16]
libmodbus.modbus_write_and_read_registers.argtypes = [
    ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_uint16),
    ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_uint16)]
libmodbus.modbus_read_registers.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_uint16)]




def test_passthrough():
    # a 1 s timeout: "before half the timeout" keeps a margin of several times
    # the exception's wire time under the sanitizers on a loaded machine
    g = Gateway(timeout_ms=1000)
    c = g.client()
    # 6 and 3
    check(not c.write_register(10, 4321, slave=1).isError(), "fc6 write register")
    r = c.read_holding_registers(10, 1, slave=1)
    check(not r.isError() and r.registers == [4321], f"fc3 reads back fc6: {r}")
    # 16 and 3
    check(not c.write_registers(20, [1, 2, 3, 65535], slave=2).isError(), "fc16 write registers")
    r = c.read_holding_registers(20, 4, slave=2)
    check(not r.isError() and r.registers == [1, 2, 3, 65535], f"fc3 reads back fc16: {r}")
    # 5, 15 and 1
    check(not c.write_coil(5, True, slave=3).isError(), "fc5 write coil")
    check(not c.write_coils(8, [True, False, True, True], slave=3).isError(), "fc15 write coils")
    r = c.read_coils(5, 7, slave=3)
    bits = [] if r.isError() else r.bits[:7]
    check(len(bits) == 7 and bits[0] and bits[3:7] == [True, False, True, True], f"fc1 reads back fc5 and fc15: {bits}")
    # 2 and 4: live tables, check shape
    r = c.read_discrete_inputs(0, 19, slave=1)
    check(not r.isError() and len(r.bits) >= 19, "fc2 read discrete inputs")
    r = c.read_input_registers(0, 125, slave=1)
    check(not r.isError() and len(r.registers) == 125, "fc4 read 125 input registers")
    c.close()
    # 22 and 23 through libmodbus's own TCP client
    ctx = libmodbus.modbus_new_tcp(b"127.0.0.1", g.tcp_port)
    check(ctx and libmodbus.modbus_connect(ctx) == 0, "libmodbus tcp connect")
    libmodbus.modbus_set_slave(ctx, 1)
    check(libmodbus.modbus_mask_write_register(ctx, 10, 0x00F2, 0x0025) == 1, "fc22 mask write")
    regs = (ctypes.c_uint16 * 4)()
    check(libmodbus.modbus_read_registers(ctx, 10, 1, regs) == 1 and regs[0] == ((4321 & 0xF2) | (0x25 & ~0xF2 & 0xFFFF)),
          f"fc22 result {regs[0]:#x}")
    src = (ctypes.c_uint16 * 2)(77, 88)
    n = libmodbus.modbus_write_and_read_registers(ctx, 30, 2, src, 30, 3, regs)
    check(n == 3 and list(regs[:2]) == [77, 88], f"fc23 write-and-read: n={n} {list(regs[:3])}")
    libmodbus.modbus_close(ctx)
    libmodbus.modbus_free(ctx)
    # mbpoll, a third peer
    p = subprocess.run(["mbpoll", "-m", "tcp", "-p", str(g.tcp_port), "-a", "2", "-r", "21", "-c", "3", "-1",
                        "127.0.0.1"], capture_output=True, text=True, timeout=20)
    check(p.returncode == 0 and "[21]: \t1" in p.stdout and "[23]: \t3" in p.stdout, f"mbpoll read: {p.stdout[-200:]}")
    # exception from the slave, in wire time (timeout is 1000 ms)
    c = g.client()
    t0 = time.time()
    r = c.read_holding_registers(5000, 2, slave=1)
    dt = time.time() - t0
    check(r.isError() and getattr(r, "exception_code", None) == 2, f"out of range -> exception 02: {r}")
    check(dt < 0.5 * SLOWDOWN, f"exception back before half the timeout ({dt * 1000:.1f} ms)")
    # pipelining: 20 requests sent at once, answers in order with their tids
    s = socket.create_connection(("127.0.0.1", g.tcp_port))
    s.sendall(b"".join(mbap(100 + i, 1 + i % 3, bytes([3, 0, i, 0, 1])) for i in range(20)))
    tids = [recv_frame(s)[0] for _ in range(20)]
    check(tids == [100 + i for i in range(20)], f"pipelined answers in order: {tids}")
    # unit 255 has no route unless mapped: 0x0A
    s.sendall(mbap(7, 255, bytes([3, 0, 0, 0, 1])))
    f = recv_frame(s)
    check(f[2] == bytes([0x83, 0x0A]), f"unit 255 unrouted -> 0x0A: {f}")
    s.close()
    m = g.metrics()
    check(m.get('rtugw_bus_exceptions_total{bus="line"}', 0) >= 1, "metrics count the slave exception")
    check(m.get('rtugw_tcp_requests_total') == m.get('rtugw_tcp_answers_total'), "every TCP request answered")
    check(m.get('rtugw_router_info{policy="epsilon-greedy"}') == 1, "metrics name the default policy")
    st = g.status()
    check(st["buses"][0]["up"] and st["buses"][0]["devices"][0]["up"], "status: bus and device up")
    rc, dt = g.stop()
    check(rc == 0 and dt < 2.5 * SLOWDOWN, f"SIGTERM: exit {rc} in {dt:.2f} s")


def test_silent_slave_and_backoff():
    # a 400 ms timeout: a backed-off answer (at once) and a timed-out one
    # (800 ms) stay far apart under the sanitizers on a loaded machine
    g = Gateway(timeout_ms=400)
    c = g.client()
    t0 = time.time()
    r = c.read_holding_registers(0, 1, slave=9)
    dt = time.time() - t0
    check(r.isError() and getattr(r, "exception_code", None) == 0x0B, f"silent slave -> 0x0B: {r}")
    check(dt >= 0.79, f"0x0B after timeout x (retries + 1) = 800 ms ({dt * 1000:.0f} ms)")
    r = c.read_holding_registers(0, 1, slave=9)     # second timeout: backed off now
    check(r.isError() and getattr(r, "exception_code", None) == 0x0B, f"second timeout -> 0x0B: {r}")
    # The proof that a backed-off slave costs the wire nothing is in the
    # counters: one more fast answer and not one more timeout. The clock
    # (under the timeout) is checked as well, widened only under emulation.
    m0 = g.metrics()
    t0 = time.time()
    r = c.read_holding_registers(0, 1, slave=9)
    dt = time.time() - t0
    m1 = g.metrics()
    fast = m1.get('rtugw_bus_dead_fast_total{bus="line"}', 0) - m0.get('rtugw_bus_dead_fast_total{bus="line"}', 0)
    waits = m1.get('rtugw_bus_timeouts_total{bus="line"}', 0) - m0.get('rtugw_bus_timeouts_total{bus="line"}', 0)
    check(r.isError() and getattr(r, "exception_code", None) == 0x0B and fast == 1 and waits == 0,
          f"backed-off slave answered from the backoff: {r}, {fast} fast answer(s), {waits} timeout(s)")
    check(dt < 0.4 * SLOWDOWN, f"backed-off slave answered at once ({dt * 1000:.1f} ms)")
    r = c.read_holding_registers(0, 2, slave=1)
    check(not r.isError(), "other slaves still served")
    m = g.metrics()
    check(m.get('rtugw_bus_dead_fast_total{bus="line"}', 0) >= 1, "dead-slave fast answers counted")
    check(m.get('rtugw_device_backed_off{bus="line",device="d9",slave="9"}') == 1, "device d9 shown backed off")
    # A client that leaves with a transaction in flight: no crash, answer discarded.
    # Slave 8 is silent and never backed off: its attempt times out after
    # 400 ms, and the retry, due after the slave's guard, is dropped
    # because its client has gone; either way the answer is discarded.
    # It resets the connection (SO_LINGER 0): a plain close is a half-close,
    # whose answers are still written (test_half_close).
    # The reset comes once the gateway has read the request (its counter
    # says so), not after a fixed sleep: a reset that arrives first takes the
    # unread request with it, and under emulation 50 ms is not enough.
    asked = g.metrics().get("rtugw_tcp_requests_total", 0)
    s = socket.create_connection(("127.0.0.1", g.tcp_port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(mbap(1, 8, bytes([3, 0, 0, 0, 1])))
    check(wait_for(lambda: g.metrics().get("rtugw_tcp_requests_total", 0) > asked, 5), "the request read")
    s.close()
    wait_for(lambda: g.metrics().get("rtugw_tcp_discarded_total", 0) >= 1, 5)
    r = c.read_holding_registers(0, 1, slave=2)
    check(not r.isError() and g.p.poll() is None, "gateway alive after a client left mid-transaction")
    check(g.metrics().get("rtugw_tcp_discarded_total", 0) >= 1, "answer to the departed client discarded and counted")
    c.close()
    g.stop()


def test_policy_limits_and_reload():
    g = Gateway(extra_tcp="read_only = true\nmax_clients = 4\n")
    c = g.client()
    r = c.write_register(1, 5, slave=1)
    check(r.isError() and r.exception_code == 1, f"read-only: write -> exception 01: {r}")
    check(not c.read_holding_registers(1, 1, slave=1).isError(), "read-only: reads pass")
    extra = [socket.create_connection(("127.0.0.1", g.tcp_port)) for _ in range(3)]   # 4 with c
    time.sleep(0.1)
    fifth = socket.create_connection(("127.0.0.1", g.tcp_port))
    check(closed_by_peer(fifth), "max_clients: fifth connection closed")
    check(not c.read_holding_registers(1, 1, slave=1).isError(), "existing client still served")
    check(g.metrics().get("rtugw_tcp_refused_full_total", 0) >= 1, "refusal counted")
    # garbage MBAP closes that connection only
    extra[0].sendall(struct.pack(">HHHB", 1, 5, 6, 1) + b"\x03\x00\x00\x00\x01")
    check(closed_by_peer(extra[0]), "non-Modbus protocol id: connection closed")
    extra[1].sendall(struct.pack(">HHHB", 1, 0, 300, 1))
    check(closed_by_peer(extra[1]), "oversized MBAP length: connection closed")
    check(not c.read_holding_registers(1, 1, slave=1).isError(), "others unaffected by garbage")
    # SIGHUP with a broken file keeps the running configuration
    with open(g.cfg, "w") as f:
        f.write(g.text.replace("retries = 1", "retries = many"))
    g.p.send_signal(signal.SIGHUP)
    wait_for(lambda: "is not valid; keeping the running configuration" in g.log_text(), 5)
    check(g.p.poll() is None and "is not valid; keeping the running configuration" in g.log_text(),
          "SIGHUP with a broken config: still running, error logged")
    check("retries = 'many'" in g.log_text(), "reload error names the key and value")
    r = c.write_register(1, 5, slave=1)
    check(r.isError() and r.exception_code == 1, "old policy (read-only) still in force")
    # SIGHUP with a fixed file applies the new policy
    with open(g.cfg, "w") as f:
        f.write(g.text.replace("read_only = true", "read_only = false"))
    g.p.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: reloaded" in g.log_text(), 5)
    r = c.write_register(1, 5, slave=1)
    check(not r.isError(), f"SIGHUP with a valid config: writes allowed now: {r}")
    for s in extra[2:]:
        s.close()
    c.close()
    rc, _ = g.stop()
    check(rc == 0, "clean stop")
    # allow-list: 127.0.0.1 is not in 10.0.0.0/8
    g = Gateway(extra_tcp="allow = 10.0.0.0/8\n")
    s = socket.create_connection(("127.0.0.1", g.tcp_port))
    check(closed_by_peer(s), "allow-list: connection from outside closed")
    check(g.metrics().get("rtugw_tcp_refused_allow_total", 0) >= 1, "allow-list refusal counted")
    g.stop()


def test_poll_merge():
    polls = "".join(f"[poll {n}]\ndevice = d1\nfunction = 3\naddress = {a}\ncount = {c}\ninterval_ms = 200\n"
                    for n, a, c in (("a", 0, 10), ("b", 10, 10), ("c", 5, 3), ("far", 500, 5)))
    # ... under the other router policy, which the polls' answers go through
    g = Gateway(extra=polls + "[router]\npolicy = thompson\n")
    wait_for(lambda: sum(v for k, v in g.metrics().items() if k.startswith("rtugw_router_pulls_total")) >= 2
             and all(p["ok"] for p in g.status()["polls"]), 5, step=0.1)
    m = g.metrics()
    check(m.get('rtugw_router_info{policy="thompson"}') == 1, "metrics name the configured policy")
    check(sum(v for k, v in m.items() if k.startswith("rtugw_router_pulls_total")) >= 2,
          "the router decoded the polls' answers")
    st = {p["name"]: p for p in g.status()["polls"]}
    check(st["a"]["read"] == st["b"]["read"] == st["c"]["read"] != st["far"]["read"],
          f"adjacent and overlapping groups share one read, the far one has its own: "
          f"{[(n, p['read']) for n, p in st.items()]}")
    c = g.client()
    r = c.read_holding_registers(0, 20, slave=1)
    c.close()
    check(st["a"]["ok"] and st["a"]["values"] == r.registers[0:10] and st["b"]["values"] == r.registers[10:20]
          and st["c"]["values"] == r.registers[5:8], "each group's values cut from the merged answer")
    check("4 poll groups in 2 reads" in g.log_text(), "the merge is logged")
    g.stop()
    # serve_cached_ms: reads inside the group come from the last poll, others go to the bus
    g = Gateway(extra="[poll cached]\ndevice = d2\nfunction = 3\naddress = 40\ncount = 20\n"
                      "interval_ms = 100\nserve_cached_ms = 5000\n", log_level="debug")
    wait_for(lambda: all(p["ok"] for p in g.status()["polls"]), 5, step=0.1)
    c = g.client()
    before = g.metrics()
    r1 = c.read_holding_registers(45, 5, slave=2)
    r2 = c.read_holding_registers(30, 5, slave=2)    # outside the group: to the bus
    after = g.metrics()
    check(not r1.isError() and r1.registers == [2045, 2046, 2047, 2048, 2049], f"cached read values {r1}")
    check(after["rtugw_tcp_cache_hits_total"] - before["rtugw_tcp_cache_hits_total"] == 1,
          "one read answered from the cache, the other not")
    check(not r2.isError() and r2.registers == [2030, 2031, 2032, 2033, 2034], f"uncached read {r2}")
    check("bus line tx 02 03 00 1e 00 05" in g.log_text(), "debug log dumps the frame sent, in hex")
    c.close()
    g.stop()


def test_systemd_notify():
    """READY=1 once serving, RELOADING=1/READY=1 around SIGHUP and STATUS= its verdict, STOPPING=1 on
    SIGTERM, on a real NOTIFY_SOCKET datagram socket as systemd provides."""
    path = os.path.join(tempfile.mkdtemp(prefix="rtugw-notify-"), "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10 * SLOWDOWN)   # a reload under qemu at idle priority takes seconds
    os.environ["NOTIFY_SOCKET"] = path
    try:
        g = Gateway()
    finally:
        del os.environ["NOTIFY_SOCKET"]
    got = [sock.recv(256).decode()]
    check("READY=1" in got[0], f"READY=1 after start: {got}")
    g.p.send_signal(signal.SIGHUP)
    got += [sock.recv(256).decode(), sock.recv(256).decode(), sock.recv(256).decode()]
    check("RELOADING=1" in got[1] and "READY=1" in got[2], f"RELOADING=1 then READY=1 on SIGHUP: {got}")
    check(got[3].startswith("STATUS=last reload: applied"), f"then STATUS= with the reload's verdict: {got}")
    g.p.send_signal(signal.SIGTERM)
    got.append(sock.recv(256).decode())
    check("STOPPING=1" in got[4], f"STOPPING=1 on SIGTERM: {got}")
    g.p.wait(timeout=5 * SLOWDOWN)
    sock.close()


def test_concurrent_clients():
    g = Gateway()
    errors = []
    per_client = 40

    def worker(k):
        c = ModbusTcpClient("127.0.0.1", port=g.tcp_port, timeout=10 * SLOWDOWN)
        if not c.connect():
            errors.append(f"client {k}: connect")
            return
        slave = 1 + k % 3
        for i in range(per_client):
            addr = 100 + k * 10 + i % 10      # each client owns ten registers
            if c.write_register(addr, (k * 1000 + i) & 0xFFFF, slave=slave).isError():
                errors.append(f"client {k}: write {i}")
                continue
            r = c.read_holding_registers(addr, 1, slave=slave)
            if r.isError() or r.registers != [(k * 1000 + i) & 0xFFFF]:
                errors.append(f"client {k}: read {i}: {r}")
        c.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(not errors, f"32 clients x {per_client} write+read pairs, every answer right ({errors[:3]})")
    m = g.metrics()
    check(m["rtugw_tcp_requests_total"] == m["rtugw_tcp_answers_total"] == 32 * per_client * 2,
          f"exactly one answer per request: {m['rtugw_tcp_requests_total']} / {m['rtugw_tcp_answers_total']}")
    g.stop()


def test_pymodbus_rtu_server():
    d = tempfile.mkdtemp(prefix="rtugw-pty-")
    a, b = os.path.join(d, "gw"), os.path.join(d, "plc")
    socat = subprocess.Popen(["socat", f"pty,raw,echo=0,link={a}", f"pty,raw,echo=0,link={b}"])
    procs.append(socat)
    for _ in range(100):
        if os.path.exists(a) and os.path.exists(b):
            break
        time.sleep(0.05)
    server_log = os.path.join(d, "server.log")
    server = subprocess.Popen(["/usr/bin/python3", "-c", f"""
import logging
logging.basicConfig(filename="{server_log}", level=logging.DEBUG)
from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusRtuFramer
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusSlaveContext, ModbusServerContext
store = ModbusSlaveContext(hr=ModbusSequentialDataBlock(0, list(range(500, 600))), zero_mode=True)
StartSerialServer(context=ModbusServerContext(slaves={{5: store}}, single=False),
                  framer=ModbusRtuFramer, port="{b}", baudrate=19200)
"""])
    procs.append(server)
    deadline = time.time() + 20   # importing pymodbus takes seconds on a busy machine
    while time.time() < deadline:
        if os.path.exists(server_log) and "Serial connection established" in open(server_log).read():
            break
        time.sleep(0.1)
    else:
        check(False, "pymodbus RTU server started")
    # pymodbus answers from Python: on a loaded machine (or under a sanitizer) its first
    # answer can take far longer than the simulator's, so this line gets a 2 s timeout.
    g = Gateway(bus=f"port = {a}\nbaud = 19200\nparity = none\n",
                devices="[device plc]\nslave = 5\n", timeout_ms=2000)
    c = g.client()
    r = c.read_holding_registers(3, 5, slave=5)
    check(not r.isError() and r.registers == [503, 504, 505, 506, 507], f"pymodbus RTU server through rtugw: {r}")
    check(not c.write_register(4, 9, slave=5).isError(), "write to the pymodbus server")
    r = c.read_holding_registers(4, 1, slave=5)
    check(not r.isError() and r.registers == [9], "read back from the pymodbus server")
    # The serial peer vanishes: gateway exceptions meanwhile, recovery without restart.
    server.kill()
    server.wait()
    socat.kill()
    socat.wait()
    for link in (a, b):   # gone is gone: a reopen must not find a /dev/pts/N since given to another process
        try:
            os.unlink(link)
        except FileNotFoundError:
            pass
    time.sleep(0.3)
    r = c.read_holding_registers(3, 1, slave=5)
    check(r.isError() and r.exception_code in (0x0A, 0x0B), f"peer gone: gateway exception {r}")
    check(g.p.poll() is None, "gateway survives the peer vanishing")
    c.close()
    rc, _ = g.stop()
    check(rc == 0, "clean stop after the peer vanished")


run_tests("gateway_foreign_peers", (test_passthrough, test_silent_slave_and_backoff, test_policy_limits_and_reload,
                      test_poll_merge, test_systemd_notify, test_concurrent_clients, test_pymodbus_rtu_server))
