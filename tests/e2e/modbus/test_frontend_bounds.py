#!/usr/bin/python3
"""The front ends stay bounded and honest, tried as an adversarial client
would: raw sockets on 127.0.0.1 (and 127.0.0.2 for a second client
address), the built-in simulator on the serial side. Each case failed on
the main branch before this work:
  - read_only forwarded FC 8/1, 8/4, 8/10, FC 21, FC 65, FC 43/13;
  - HTTP had no connection cap, no request deadline, an unbounded header;
  - a Modbus TCP slowloris held every slot; a length-0 header was held;
  - SIGHUP kept serving a revoked address and ignored unit routes;
  - /status wrote configuration strings unescaped;
  - serve_cached_ms answered the value from before a write;
  - accept() out of descriptors spun and flooded the log.
Timing is asserted only where it is the behaviour under test, with margins
of several times the configured value."""
import json
import os
import random
import resource
import socket
import struct
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, status_kib, closed_by_peer, free_port, mbap, recv_frame, run_tests  # noqa: E402

UNDER_ASAN = b"__asan_init" in open(os.environ.get("RTUGW_BIN", "./rtugw"), "rb").read()


def connect(g, src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(3)
    s.connect(("127.0.0.1", g.tcp_port))
    return s


def call(s, tid, unit, pdu):
    s.sendall(mbap(tid, unit, pdu))
    f = recv_frame(s)
    return f[2] if f else None


def bus_requests(g):
    return g.metrics().get('rtugw_bus_requests_total{bus="line"}', 0)


def test_read_only_allow_list():
    g = Gateway(extra_tcp="read_only = true\n")
    s = connect(g)
    refused = [("FC 8/1 restart communications", bytes([8, 0, 1, 0, 0])),
               ("FC 8/4 force listen-only", bytes([8, 0, 4, 0, 0])),
               ("FC 8/10 clear counters", bytes([8, 0, 10, 0, 0])),
               ("FC 21 write file record", bytes([21, 9, 6, 0, 1, 0, 0, 0, 1, 0x12, 0x34])),
               ("FC 65 user-defined", bytes([65, 1, 2])),
               ("FC 43/13 (not MEI 14)", bytes([43, 13, 0, 0])),
               ("FC 6 write register", bytes([6, 0, 1, 0, 5])),
               ("FC 23 read/write", bytes([23, 0, 0, 0, 1, 0, 1, 0, 1, 2, 0, 7]))]
    before = bus_requests(g)
    for what, pdu in refused:
        body = call(s, 1, 1, pdu)
        check(body == bytes([pdu[0] | 0x80, 1]), f"read-only: {what} -> exception 01 ({body.hex() if body else None})")
    check(bus_requests(g) == before, f"read-only: none of them reached the line ({bus_requests(g) - before:.0f})")
    m = g.metrics()
    check(m.get("rtugw_tcp_read_only_refused_total") == len(refused), "read-only refusals counted")
    allowed = [("FC 3", bytes([3, 0, 0, 0, 2])), ("FC 8/0 return query data", bytes([8, 0, 0, 0x12, 0x34])),
               ("FC 43/14 device identification", bytes([43, 14, 1, 0]))]
    for what, pdu in allowed:
        n0 = bus_requests(g)
        call(s, 2, 1, pdu)
        check(bus_requests(g) == n0 + 1, f"read-only: {what} passes to the line")
    s.close()
    g.stop()


def nonblocking_connects(port, n):
    socks = []
    for _ in range(n):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        socks.append(c)
    return socks



def test_http_limits():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 10000), max(hard, 10000)))
    g = Gateway(extra="max_connections = 16\nrequest_timeout_ms = 1000\n", nofile=8192)
    # A client trickling its request line is cut after request_timeout_ms.
    t = socket.create_connection(("127.0.0.1", g.http_port))
    t.sendall(b"GET /sta")
    t0 = time.time()
    gone = False
    while time.time() - t0 < 4:
        try:
            t.sendall(b"t")
        except OSError:
            gone = True
            break
        t.settimeout(0.3)
        try:
            if t.recv(100) == b"":
                gone = True
                break
        except socket.timeout:
            pass
        except OSError:
            gone = True
            break
    dt = time.time() - t0
    check(gone and dt < 2.5, f"HTTP trickle closed after {dt:.2f} s (request_timeout_ms = 1000)")
    # A 300 MiB header and 4096 idle connections, while a Modbus client reads.
    big_sent = [0]

    def big_header():
        b = socket.create_connection(("127.0.0.1", g.http_port))
        b.sendall(b"GET /status HTTP/1.1\r\nX-Big: ")
        chunk = b"a" * 65536
        try:
            while big_sent[0] < 300 << 20:
                b.sendall(chunk)
                big_sent[0] += len(chunk)
        except OSError:
            pass
        b.close()
    th = threading.Thread(target=big_header)
    th.start()
    time.sleep(0.2)
    idle = nonblocking_connects(g.http_port, 4096)
    s = connect(g)
    lat = []
    for i in range(300):
        t1 = time.perf_counter()
        body = call(s, i & 0xFFFF, 1, bytes([3, 0, 0, 0, 2]))
        lat.append(time.perf_counter() - t1)
        if body != bytes([3, 4, 0x03, 0xE8, 0x03, 0xE9]):
            check(False, f"Modbus TCP read under HTTP load: {body.hex() if body else None}")
            break
    th.join(timeout=30)
    lat.sort()
    p99 = lat[int(len(lat) * 0.99) - 1] * 1000
    check(p99 < 25.0 or UNDER_ASAN, f"Modbus TCP p99 {p99:.2f} ms under 4096 idle HTTP connections and a big header"
          + (" (not asserted under AddressSanitizer)" if UNDER_ASAN else ""))
    kib = status_kib(g.p.pid, "VmRSS")
    if UNDER_ASAN:
        print(f"note: RSS {kib} KiB not asserted under AddressSanitizer (its shadow memory)")
    else:
        check(kib < 8 * 1024, f"RSS {kib} KiB < 8 MiB with 4096 connections and a header the daemon stopped reading "
              f"({big_sent[0] >> 20} MiB taken by the kernel's buffers before the client blocked)")
    fds = len(os.listdir(f"/proc/{g.p.pid}/fd"))
    check(fds < 64, f"HTTP connections capped at 16: the daemon holds {fds} descriptors with 4096 clients waiting")
    for c in idle:
        c.close()
    m, t0 = None, time.time()
    while m is None and time.time() - t0 < 5:   # asked once the cap has room again
        try:
            m = g.metrics()
        except OSError:
            time.sleep(0.2)
    check(m is not None, f"HTTP serves again once the idle connections are gone ({time.time() - t0:.1f} s)")
    m = m or {}
    check(0 < m.get("rtugw_http_active", -1) <= 16, f"/metrics shows the open connections ({m.get('rtugw_http_active', -1):.0f})")
    s.close()
    g.stop()


def test_tcp_slowloris():
    g = Gateway(extra_tcp="max_clients = 8\nadu_timeout_ms = 1000\nmax_per_address = 0\n")
    attackers = []
    for _ in range(8):
        a = connect(g, "127.0.0.2")
        a.sendall(struct.pack(">HHHB", 1, 0, 254, 1))   # announces a 253-byte PDU
        attackers.append(a)
    time.sleep(0.2)
    late = connect(g)
    check(closed_by_peer(late, 1.0), "slowloris: every slot taken, a ninth client is refused")
    t0 = time.time()
    for a in attackers:   # one byte a second keeps an idle timer happy, not the ADU deadline
        try:
            a.sendall(b"\x03")
        except OSError:
            pass
    closed = sum(closed_by_peer(a, 3.0) for a in attackers)
    dt = time.time() - t0
    check(closed == 8 and dt < 2.5, f"slowloris: {closed} of 8 closed within {dt:.2f} s (adu_timeout_ms = 1000)")
    s = connect(g)
    body = call(s, 7, 1, bytes([3, 0, 0, 0, 1]))
    check(body == bytes([3, 2, 0x03, 0xE8]), "a legitimate client is then answered")
    check(g.metrics().get("rtugw_tcp_adu_timeout_closed_total", 0) >= 8, "ADU deadline closes counted")
    z = connect(g)
    z.sendall(struct.pack(">HHH", 9, 0, 0))   # a 6-byte header with length 0
    t0 = time.time()
    check(closed_by_peer(z, 2.0) and time.time() - t0 < 0.5, "length 0 refused on the header, at once")
    s.close()
    g.stop()
    g = Gateway(extra_tcp="max_per_address = 2\n")
    a, b = connect(g, "127.0.0.2"), connect(g, "127.0.0.2")
    c = connect(g, "127.0.0.2")
    check(closed_by_peer(c, 1.0), "max_per_address = 2: a third connection from one address is refused")
    d = connect(g)
    check(call(d, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "another address is still served")
    check(g.metrics().get("rtugw_tcp_refused_address_total", 0) == 1, "per-address refusal counted")
    for x in (a, b, d):
        x.close()
    g.stop()


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def test_descriptor_exhaustion():
    g = Gateway(extra_tcp="max_clients = 1024\nmax_per_address = 0\n", extra="max_connections = 1024\n", nofile=48)
    socks = nonblocking_connects(g.tcp_port, 120)
    time.sleep(0.5)
    c0 = cpu_ticks(g.p.pid)
    time.sleep(2.0)
    busy = (cpu_ticks(g.p.pid) - c0) / os.sysconf("SC_CLK_TCK") / 2.0
    check(busy < 0.5, f"out of descriptors: the daemon does not spin ({busy * 100:.0f} % of a core)")
    log = g.log_text()
    n = log.count("accept")
    check(1 <= n <= 3, f"out of descriptors: logged, rate-limited ({n} lines)")
    for s in socks:
        s.close()
    time.sleep(1.0)
    m = g.metrics()   # HTTP needs a descriptor too: asked once they are free
    check(m.get("rtugw_tcp_accept_errors_total", 0) > 0, "accept errors counted")
    s = connect(g)
    check(call(s, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "served again once descriptors are free")
    s.close()
    g.stop()


def test_many_idle_clients():
    """max_clients beyond the old cap of 1,024: with RLIMIT_NOFILE's soft
    limit at 512 and the hard one at 4096, the daemon raises the soft limit
    (and says so) and holds 1,500 idle connections, each costing well under
    the 5.3 KiB it did (its reply ring now comes with its first request),
    while a client among them is answered. With a hard limit too low for
    max_clients the start says so. Before: max_clients over 1,024 refused."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), max(hard, 4096)))
    g = Gateway(extra_tcp="max_clients = 2000\nmax_per_address = 0\n", nofile=(512, 4096))
    check("descriptor limit (RLIMIT_NOFILE) raised from 512 to 4096" in g.log_text(),
          f"the soft limit raised, and said: {g.log_text()[-400:]!r}")
    time.sleep(0.3)
    rss0 = status_kib(g.p.pid, "VmRSS")
    socks = []
    for _ in range(15):   # in batches: a burst beyond the listen backlog is retried by TCP, in seconds
        socks += nonblocking_connects(g.tcp_port, 100)
        deadline = time.time() + 5
        while time.time() < deadline and g.metrics().get("rtugw_tcp_active", 0) < len(socks):
            time.sleep(0.05)
    active = g.metrics().get("rtugw_tcp_active", 0)
    per = (status_kib(g.p.pid, "VmRSS") - rss0) / 1500
    check(active == 1500, f"1,500 idle connections held ({active})")
    bound = 12.0 if UNDER_ASAN else 3.0   # ASan's redzones and quarantine
    check(per < bound, f"an idle connection costs {per:.2f} KiB of VmRSS (under {bound:.0f}; 5.3 before)")
    s = connect(g)
    check(call(s, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "a client among them is answered")
    s.close()
    for c in socks:
        c.close()
    g.stop()
    g = Gateway(extra_tcp="max_clients = 2000\n", nofile=(512, 512))
    check("max_clients = 2000 needs about 2256 descriptors but RLIMIT_NOFILE allows 512" in g.log_text(),
          f"a hard limit too low is said at start: {g.log_text()[-400:]!r}")
    g.stop()


def test_reload_applies_or_says_so():
    g = Gateway(extra_tcp="unit255 = line:1\n")
    far = connect(g, "127.0.0.2")
    check(call(far, 1, 255, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "unit 255 -> slave 1 before reload")
    text = g.text.replace("unit255 = line:1", "unit255 = line:2\nallow = 127.0.0.1").replace(
        "[gateway]\n", "[gateway]\nworkers = 3\n", 1).replace(f"port = {g.tcp_port}\n", f"port = {g.tcp_port}\nmax_pending = 4\n")
    g.rewrite(text)
    g.p.send_signal(1)
    check(closed_by_peer(far, 2.0), "reload: a connection from a revoked address is closed")
    near = connect(g)
    body = call(near, 2, 255, bytes([3, 0, 0, 0, 1]))
    check(body == bytes([3, 2, 0x07, 0xD0]), f"reload: unit 255 now routes to slave 2 ({body.hex() if body else None})")
    time.sleep(0.2)
    log = g.log_text()
    line = [ln for ln in log.splitlines() if "SIGHUP: reloaded" in ln]
    # max_pending applies live (the rings of connections accepted from now on)
    check(line and line[-1].endswith("not applied until a restart: workers"),
          f"reload: the log names what needs a restart ({line[-1] if line else None})")
    st = g.status()
    check(st.get("restart_needed") == "workers", f"/status names it too ({st.get('restart_needed')})")
    check(g.metrics().get("rtugw_tcp_revoked_closed_total") == 1, "revoked connection counted")
    near.close()
    g.stop()


def test_status_escapes_every_string():
    port = '/dev/tty"},{"x":"\\ \x01\t\udcff\udcc0\udcaf end'
    g = Gateway(bus=f"port = {port}\nbaud = 19200\n")
    raw = urllib.request.urlopen(f"http://127.0.0.1:{g.http_port}/status", timeout=3).read()
    try:
        doc = json.loads(raw.decode("utf-8", errors="strict"))
        ok = True
    except ValueError as e:
        ok, doc = False, {}
        print("bad document:", e, raw[:200])
    check(ok, "/status is strict JSON and strict UTF-8 with quotes, backslashes, control and non-UTF-8 bytes")
    got = doc.get("buses", [{}])[0].get("port") if ok else None
    want = '/dev/tty"},{"x":"\\ \x01\t\ufffd\ufffd\ufffd end'
    check(got == want, f"the port reads back as written, bad bytes as U+FFFD ({got!r})")
    check(ok and len(doc.get("buses", [])) == 1 and "x" not in doc, "nothing injected into the document")
    g.stop()


def test_cache_coherent_with_writes():
    poll = ("[poll p]\ndevice = d1\nfunction = 3\naddress = 0\ncount = 10\ninterval_ms = 50\n"
            "serve_cached_ms = 60000\n")
    g = Gateway(devices="[device d1]\nslave = 1\n" + poll)
    s = connect(g)
    time.sleep(0.3)
    stale = []
    for i in range(30):
        v = 100 + i
        w = call(s, 1, 1, bytes([6, 0, 3, 0, v]))
        check(w == bytes([6, 0, 3, 0, v]), f"write {i} echoed", quiet=True)
        r = call(s, 2, 1, bytes([3, 0, 0, 0, 10]))
        if not r or r[2 + 6:2 + 8] != bytes([0, v]):
            stale.append((i, r.hex() if r else None))
        if i % 2:   # and again once a poll has run since the write: from the cache
            time.sleep(0.15)
            r = call(s, 3, 1, bytes([3, 0, 0, 0, 10]))
            if not r or r[2 + 6:2 + 8] != bytes([0, v]):
                stale.append((i, "after a poll", r.hex() if r else None))
    check(not stale, f"a read after a write never returns the pre-write value ({stale[:2]})")
    hits = g.metrics().get("rtugw_tcp_cache_hits_total", 0)
    check(hits > 0, f"the cache still serves reads between writes ({hits:.0f} hits)")
    s.close()
    g.stop()


def echo_device():
    """A Modbus TCP device that answers every request with itself (FC 8's
    echo) and keeps the PDUs it was asked."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    seen = []

    def serve(c):
        while True:
            f = recv_frame(c)
            if f is None:
                return
            seen.append(f[2])
            c.sendall(mbap(f[0], f[1], f[2]))

    def accept():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return ls.getsockname()[1], seen


def rtu_crc(b):
    crc = 0xFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return bytes([crc & 0xFF, crc >> 8])


def test_rtu_tcp_not_cut():
    """[rtu_tcp]: a request without a length rule whose last byte is 0x00
    has a CRC-good prefix one byte short; it must be answered whole, never
    cut (issue 35, fault 2). Random FC 8 echoes, those of that shape and
    the issue's crafted requests, through the real listener to an echoing
    Modbus TCP device, on 8 connections."""
    dev_port, seen = echo_device()
    rtu_port = free_port()
    g = Gateway(devices="", extra=f"[bus echo]\nport = tcp://127.0.0.1:{dev_port}\nframing = tcp\n"
                      f"[rtu_tcp]\nenabled = true\nport = {rtu_port}\ndefault_bus = echo\n")
    time.sleep(0.3)
    rnd = random.Random(35)

    def request(zero_tail):
        while True:
            body = bytes([1 + rnd.randrange(247), 8, 0, 0]) + bytes(rnd.randrange(256) for _ in range(16))
            frame = body + rtu_crc(body)
            if not zero_tail or frame[-1] == 0:
                return frame
    frames = [request(i % 8 == 0) for i in range(2400)]
    crafted = [bytes([24, 8, 0, 0x0A, 0, 0]), bytes([1, 43, 14, 1, 0xB4])]
    crafted = [f + rtu_crc(f) for f in crafted]
    check(all(f[-1] == 0 for f in crafted), "the crafted requests end in 0x00")
    wrong = []

    def client(part):
        s = socket.create_connection(("127.0.0.1", rtu_port), timeout=0.5)
        for f in part:
            s.sendall(f)
            got = b""
            try:
                while len(got) < len(f):
                    chunk = s.recv(len(f) - len(got))
                    if not chunk:
                        break
                    got += chunk
            except OSError:
                pass
            if got != f:
                wrong.append((f.hex(), got.hex()))
                s.close()
                s = socket.create_connection(("127.0.0.1", rtu_port), timeout=0.5)
        s.close()
    threads = [threading.Thread(target=client, args=(frames[k::8],)) for k in range(8)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    dt = time.time() - t0
    check(not wrong, f"{len(frames)} random FC 8 echoes ({len(frames) // 8} ending in 0x00): "
                     f"{len(wrong)} answers not the request's own echo ({wrong[:1]}), {dt:.1f} s")
    s = socket.create_connection(("127.0.0.1", rtu_port), timeout=2)
    for f in crafted:
        seen.clear()
        s.sendall(f)
        s.settimeout(0.5)
        try:
            s.recv(300)
        except OSError:
            pass
        check(seen and seen[-1] == f[1:-2], f"crafted {f.hex()}: the device was asked the whole request ({seen[-1:]})")
    s.close()
    g.stop()


def test_pipelined_not_closed():
    """8 connections each pipelining 600 reads with duplicated transaction
    ids, max_pending = 16, against the simulator at 19200 baud: the gateway
    stops reading them for whole seconds (back-pressure), which is not the
    clients' delay; adu_timeout_ms = 200 must not close them (issue 35,
    fault 9). Every answer arrives, each its own."""
    g = Gateway(extra_tcp="max_pending = 16\nadu_timeout_ms = 200\n",
                bus="port = sim:1,2,3\nbaud = 19200\nqueue_depth = 256\n")
    n, failures = 600, []

    def client(k):
        s = connect(g)
        s.settimeout(10)
        stream = b"".join(mbap(i % 4, 1 + k % 3, bytes([3, 0, i % 100, 0, 1])) for i in range(n))

        def send():   # in pieces that cut ADUs, as a stream does
            for at in range(0, len(stream), 1000):
                s.sendall(stream[at:at + 1000])
                time.sleep(0.02)
        threading.Thread(target=send, daemon=True).start()
        for i in range(n):
            try:
                f = recv_frame(s)
            except OSError:
                f = None
            unit = 1 + k % 3
            want = (i % 4, unit, bytes([3, 2]) + struct.pack(">H", unit * 1000 + i % 100))
            if f != want:
                failures.append((k, i, f))
                break
        s.close()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    m = g.metrics()
    check(not failures, f"8 x {n} pipelined reads: every answer its own, in order ({failures[:2]})")
    check(m.get("rtugw_tcp_adu_timeout_closed_total", 0) == 0,
          f"no connection closed by adu_timeout_ms ({m.get('rtugw_tcp_adu_timeout_closed_total')})")
    g.stop()


def _loop_clients(g, clients, seconds, depth=1, unit=1):
    """Each (source address, depth[, unit]) client keeps depth reads in flight on
    its own connection for seconds; returns per client (answers, exceptions
    06, latencies in s). Every answer is checked to be its own (value of the
    address it asked)."""
    stop = time.time() + seconds
    results = [None] * len(clients)

    def run(k, src, depth, unit=unit):
        s = connect(g, src)
        s.settimeout(5)
        sent, answers, busy, lat, wrong = {}, 0, 0, [], 0
        tid = 0

        def send_one():
            nonlocal tid
            tid = (tid + 1) % 65536
            sent[tid] = time.time()
            s.sendall(mbap(tid, unit, bytes([3, 0, tid % 100, 0, 1])))
        try:
            for _ in range(depth):
                send_one()
            while sent:
                f = recv_frame(s)
                if f is None:
                    break
                t0 = sent.pop(f[0], None)
                if f[2][:1] == b"\x83":
                    busy += f[2][1:2] == b"\x06"
                elif t0 is None or f[2] != bytes([3, 2]) + struct.pack(">H", unit * 1000 + f[0] % 100):
                    wrong += 1
                else:
                    answers += 1
                    lat.append(time.time() - t0)
                if time.time() < stop:
                    send_one()
        except OSError:
            wrong += 1
        s.close()
        results[k] = (answers, busy, lat, wrong)
    threads = [threading.Thread(target=run, args=(k, *c)) for k, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 20)
    return results


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def test_backpressure_not_busy():
    """40 clients looping one read each against a bus whose queue holds 8:
    the gateway leaves what it cannot queue unread (back-pressure) instead
    of answering exception 06 that a looping client resends at once. No
    answer is a 06, none is another request's, every client is served
    (Jain's index of per-client answers well above what starving some
    would give), and the waits are counted. Before: a storm of 06."""
    g = Gateway(bus="port = sim:1,2,3\nbaud = 19200\nqueue_depth = 8\n")
    res = _loop_clients(g, [("127.0.0.1", 1)] * 40, 2.0)
    answers = [r[0] for r in res if r]
    busy = sum(r[1] for r in res if r)
    wrong = sum(r[3] for r in res if r)
    m = g.metrics()
    check(len(answers) == 40 and wrong == 0, f"40 clients, every answer its own ({wrong} wrong or cut)")
    check(busy == 0, f"no exception 06 under a full queue: back-pressure ({busy} of {sum(answers) + busy})")
    check(min(answers) > 0 and jain(answers) > 0.8,
          f"every client served, in turn (min {min(answers, default=0)}, Jain {jain(answers):.2f})")
    check(m.get("rtugw_tcp_waits_total", 0) > 0, f"waits counted ({m.get('rtugw_tcp_waits_total')})")
    full = m.get('rtugw_bus_queue_full_total{bus="line"}', 0)
    check(full == 0, f"the bus queue never overflowed ({full})")
    g.stop()


def test_fair_shares():
    """One client pipelining 16 reads and 8 clients looping one each, on one
    bus: requests are taken from the connections in turn, so the pipeliner
    gets about one turn in nine, not 16 places in 24 (it had 16 times each
    other client's answers before)."""
    g = Gateway()
    res = _loop_clients(g, [("127.0.0.1", 16)] + [("127.0.0.1", 1)] * 8, 2.5)
    check(all(res) and sum(r[3] for r in res) == 0, "every answer its own")
    big, others = res[0][0], sorted(r[0] for r in res[1:])
    median = others[len(others) // 2]
    check(median > 0 and big <= 3 * median,
          f"the pipeliner gets a fair share: {big} answers against a median of {median} per looping client")
    check(jain([r[0] for r in res]) > 0.8, f"Jain's index {jain([r[0] for r in res]):.2f}")
    g.stop()


def test_priority_master():
    """priority_clients = 127.0.0.2: a master there reading in a loop while
    16 others flood the same bus with 8 reads each in flight is served
    first (the wait of one transaction or two, not of the flood's queue:
    its class has a place beyond bus_share and goes first in the queue),
    never refused; so is a master reading unit 2 (priority_units) from the
    flood's own address. The classes' waits are in /metrics and /status. Before:
    it queued behind the flood or got exception 06."""
    g = Gateway(extra_tcp="priority_clients = 127.0.0.2/32\npriority_units = 2\n")
    res = _loop_clients(g, [("127.0.0.2", 1), ("127.0.0.1", 1, 2)] + [("127.0.0.1", 8)] * 16, 2.5)
    check(all(res) and sum(r[3] for r in res) == 0, "every answer its own")
    prio, unit2 = res[0] or (0, 0, [], 1), res[1] or (0, 0, [], 1)
    flood = [x for r in res[2:] if r for x in r[2]]
    p50 = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("inf")  # noqa: E731
    check(prio[1] == 0 and prio[0] > 20, f"the priority master: {prio[0]} answers, {prio[1]} exceptions 06")
    check(p50(prio[2]) * 4 < p50(flood),
          f"served first: p50 {p50(prio[2]) * 1000:.1f} ms against the flood's {p50(flood) * 1000:.1f} ms")
    check(unit2[1] == 0 and p50(unit2[2]) * 4 < p50(flood),
          f"priority_units = 2: a request for unit 2 too (p50 {p50(unit2[2]) * 1000:.1f} ms, {unit2[1]} exceptions 06)")
    m = g.metrics()
    check(m.get("rtugw_tcp_waits_total", 0) > 0 and "rtugw_tcp_priority_waits_total" in m,
          "waits per class in /metrics")
    classes = g.status().get("tcp", {}).get("classes", {})
    check(classes.get("normal", {}).get("waits", 0) > 0 and "waits" in classes.get("priority", {}),
          f"and in /status ({classes})")
    g.stop()


def test_busy_rate_limited():
    """The exceptions 06 that remain are rate-limited per client: with [tcp]
    and [rtu_tcp] each holding 4 places in a bus whose queue holds 5, the
    queue overflows; 8 RTU-over-TCP clients pipeline 4 reads each, 8 Modbus
    TCP clients loop one read each and resend at once on a 06. Each TCP
    client may be refused 4 times at once, then once per real answer and
    once a second; beyond that its next request waits unread (throttled),
    so a client's refusals never outnumber its answers by more than that.
    Refusals and throttles are counted. Before: each looping client got
    06s as fast as it could resend them, many times its answers."""
    rtu_port, seconds = free_port(), 3.0
    g = Gateway(bus="port = sim:1,2,3\nbaud = 19200\nqueue_depth = 5\n",
                extra=f"[rtu_tcp]\nenabled = true\nport = {rtu_port}\ndefault_bus = line\n")
    time.sleep(0.3)
    stop = time.time() + seconds + 0.5

    def rtu_flood():
        s = socket.create_connection(("127.0.0.1", rtu_port), timeout=5)
        body = bytes([2, 3, 0, 0, 0, 1])
        frame = body + rtu_crc(body)
        try:
            s.sendall(frame * 4)
            buf = b""
            while time.time() < stop:
                buf += s.recv(256)
                while len(buf) >= 5:
                    n = 5 if buf[1] & 0x80 else 5 + buf[2]
                    if len(buf) < n:
                        break
                    buf = buf[n:]
                    s.sendall(frame)
        except OSError:
            pass
        s.close()
    flood = [threading.Thread(target=rtu_flood) for _ in range(8)]
    for t in flood:
        t.start()
    time.sleep(0.3)
    res = _loop_clients(g, [("127.0.0.1", 1)] * 8, seconds)
    for t in flood:
        t.join(10)
    m = g.metrics()
    check(all(res) and sum(r[3] for r in res) == 0, "every TCP answer its own")
    # Which listener meets the full queue is a race (each holds its share
    # of 4, together 8 places wanted in 5): on a loaded box one of them can
    # win it for the whole run (CI: [tcp] refused 1-3 times and never
    # throttled, [rtu_tcp] 230 refusals, 20 throttles). The overflow and
    # the throttles are judged over both; the per-client bound below over
    # the Modbus TCP clients, whose counts the test has.
    refused = {k: m.get(f"rtugw_{k}_busy_refused_total", 0) for k in ("tcp", "rtu_tcp")}
    throttled = {k: m.get(f"rtugw_{k}_busy_throttled_total", 0) for k in ("tcp", "rtu_tcp")}
    check(sum(refused.values()) > 0, f"the bus queue overflowed: some 06 answered ({refused})")
    worst = max((r[1] - r[0] for r in res if r), default=0)
    check(worst <= 4 + seconds + 2,
          f"06s per client at most 4 + its answers + one a second: worst client "
          f"{max(res, key=lambda r: r[1] - r[0] if r else 0)[:2] if all(res) else res} (answers, 06s)")
    check(sum(throttled.values()) > 0, f"throttles counted ({throttled})")
    waited = {k: m.get(f"rtugw_{k}_wait_us_total", 0) for k in ("tcp", "rtu_tcp")}
    check(all(v < 100 * seconds * 1e6 for v in waited.values()),
          f"the waits' sum is a sum of waits, not a wrapped negative one ({waited} us)")
    g.stop()


def test_cached_reads_not_held():
    """A read the poll cache answers (serve_cached_ms) takes no place in the
    bus and so does not wait for one: while 40 clients loop reads of slave
    2 (each waiting its turn), a client reading slave 1's cached registers
    is answered at once, not after a turn, every answer the cached value."""
    poll = ("[poll p]\ndevice = d1\nfunction = 3\naddress = 0\ncount = 10\ninterval_ms = 50\n"
            "serve_cached_ms = 60000\n")
    g = Gateway(devices="[device d1]\nslave = 1\n[device d2]\nslave = 2\n" + poll)
    time.sleep(0.3)   # the first poll fills the cache
    flood = []
    t = threading.Thread(target=lambda: flood.extend(_loop_clients(g, [("127.0.0.1", 1)] * 40, 2.5, unit=2)))
    t.start()
    time.sleep(0.5)
    s = connect(g)
    lat, wrong = [], 0
    for k in range(100):
        t0 = time.time()
        got = call(s, k, 1, bytes([3, 0, k % 10, 0, 1]))
        lat.append(time.time() - t0)
        wrong += got != bytes([3, 2]) + struct.pack(">H", 1000 + k % 10)
    s.close()
    t.join(30)
    flood_lat = sorted(x for r in flood if r for x in r[2])
    p50 = sorted(lat)[len(lat) // 2]
    check(wrong == 0, f"every cached answer right ({wrong} wrong)")
    check(flood_lat and p50 * 4 < flood_lat[len(flood_lat) // 2],
          f"cached reads not held behind the flood: p50 {p50 * 1000:.1f} ms against "
          f"{flood_lat[len(flood_lat) // 2] * 1000 if flood_lat else 0:.1f} ms")
    check(g.metrics().get("rtugw_tcp_cache_hits_total", 0) >= 100, "all served from the cache")
    g.stop()

run_tests("frontend_bounds", [test_read_only_allow_list, test_tcp_slowloris, test_pipelined_not_closed,
                        test_backpressure_not_busy, test_fair_shares, test_priority_master, test_busy_rate_limited,
                        test_cached_reads_not_held,
                        test_rtu_tcp_not_cut, test_reload_applies_or_says_so, test_status_escapes_every_string,
                        test_cache_coherent_with_writes, test_descriptor_exhaustion, test_many_idle_clients, test_http_limits])
