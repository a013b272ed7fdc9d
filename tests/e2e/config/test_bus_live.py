#!/usr/bin/python3
"""A [bus] changed live beyond its line keys (issue 41): queue_depth, copies,
its name, and its timeouts with them, by SIGHUP, on a real `rtugw run` with
two buses on the built-in simulator, each read by a pymodbus Modbus TCP client
on ONE connection throughout:
  - bus A (line, sim:1) untouched: unit 1, holding[10..11] = 1010, 1011; every
    answer right, none an exception, none lost, the same connection;
  - bus B (lineb, sim:1,2) restarted in place (gateway/bus_restart.c), or
    renamed (removed, and added as linec: config/slots.c): unit 2
    is its slave 1 (the same values as A's: equal on both buses) and unit 3 its
    slave 2 (2010, 2011: its own); never a wrong value, only 0x0A or 0x0B and
    only during its swap, and right again after each;
  - the tag polled on bus B good after each, at its right value;
  - bus C added at the end (answered on a new connection, in /status and
    /metrics), then removed (in neither), bus A's client undisturbed;
  - restart_needed empty after each change, /status naming the bus as the file
    does, the log saying it restarted.
Run it under load too: RTUGW_BURN=2."""
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import Gateway, check, crc16, free_port, run_tests, wait_for  # noqa: E402
from tagscheck import tag_values  # noqa: E402
from test_live_change import hup  # noqa: E402

BUS_B = "[bus lineb]\nport = sim:1,2\nbaud = 115200\nresponse_timeout_ms = 150\nretries = 1\n"
# a tag polled on bus B: the poller's group goes on with the new bus
TAG_B = "[device mb]\nbus = lineb\nslave = 2\n[tag tb]\ndevice = mb\ntable = holding\naddress = 20\ntype = uint16\ninterval_ms = 50\n"
ROUTES = "unit2 = lineb:1\nunit3 = lineb:2\n"
BUS_C = "[bus extra]\nport = sim:5\nbaud = 115200\nresponse_timeout_ms = 150\n"


class Reader(threading.Thread):
    """One connection, reading without pause: (unit, expected registers) in
    turn. Counts right answers, wrong values, exceptions by code (with the
    time of each) and requests that got nothing (pymodbus raises)."""
    def __init__(self, g, asks):
        super().__init__(daemon=True)
        self.c, self.asks = g.client(), asks
        self.right = self.wrong = self.lost = 0
        self.exceptions = []   # (time, code)
        self.wrongs = []
        self.stop = threading.Event()

    def run(self):
        n = 0
        while not self.stop.is_set():
            unit, want = self.asks[n % len(self.asks)]
            n += 1
            try:
                r = self.c.read_holding_registers(10, 2, slave=unit)
            except Exception as e:   # noqa: BLE001 -- any failure to answer is a lost request
                self.lost += 1
                self.wrongs.append(("lost", unit, repr(e)))
                continue
            if r.isError():
                self.exceptions.append((time.time(), getattr(r, "exception_code", None)))
            elif r.registers == want:
                self.right += 1
            else:
                self.wrong += 1
                self.wrongs.append((unit, r.registers))

    def finish(self):
        self.stop.set()
        self.join(5)
        self.c.close()


def tb_good(g):
    t = tag_values(g).get("tb", {})
    return t.get("quality") == "good" and t.get("value") == 2020


def metric_buses(g):
    """The buses /metrics names in its per-bus requests series."""
    return {k.split('bus="')[1].split('"')[0] for k in g.metrics() if k.startswith("rtugw_bus_requests_total{")}


def reloaded(g, rev):
    last = g.status()["last_reload"] or {}
    return last.get("revision") not in (None, rev)


def readers_a_b(g):
    """Bus A's reader (unit 1) and bus B's (units 2 and 3: equal values to
    A's on its slave 1, its own on slave 2), both answering, tb polled."""
    a = Reader(g, [(1, [1010, 1011])])
    b = Reader(g, [(2, [1010, 1011]), (3, [2010, 2011])])
    a.start()
    b.start()
    check(wait_for(lambda: a.right > 20 and b.right > 20 and tb_good(g), 5),
          f"both buses answer ({a.right}, {b.right}), tb is polled")
    return a, b


def test_bus_restarted_in_place():
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=BUS_B + TAG_B, extra_tcp=ROUTES)
    a, b = readers_a_b(g)
    swaps = []
    changes = [("queue_depth", "retries = 1\n[device mb]", "retries = 1\nqueue_depth = 8\n[device mb]", "lineb"),
               ("copies", "queue_depth = 8\n", "queue_depth = 8\ncopies = none\n", "lineb"),
               ("queue_depth and timeouts", "response_timeout_ms = 150\nretries = 1\nqueue_depth = 8\n",
                "response_timeout_ms = 300\nretries = 1\nqueue_depth = 16\n", "lineb"),
               ("name", "lineb", "linec", "linec")]
    for what, old, new, name in changes:
        text = g.text.replace(old, new)
        check(text != g.text, f"{what}: the file changes")
        rev = (g.status()["last_reload"] or {}).get("revision")
        right_b = b.right
        t0 = time.time()
        hup(g, text)
        check(wait_for(lambda: reloaded(g, rev), 5), f"{what}: reloaded ({g.status()['last_reload']})")
        st = g.status()
        check(st["restart_needed"] == "" and st["last_reload"]["result"] == "applied",
              f"{what}: applied, nothing waits ({st['last_reload']['result']}, {st['restart_needed']!r})")
        check(wait_for(lambda: [x["name"] for x in g.status()["buses"]] == ["line", name], 3),
              f"{what}: /status names the buses as the file does ({[x['name'] for x in g.status()['buses']]})")
        check(wait_for(lambda: b.right > right_b + 20, 5), f"{what}: bus B answers right again ({b.right - right_b})")
        reads = g.status()["buses"][1]["requests"]
        check(wait_for(lambda: tb_good(g) and g.status()["buses"][1]["requests"] > reads + 5, 3),
              f"{what}: tb polled on the new bus ({tag_values(g).get('tb')})")
        swaps.append((t0, time.time()))
        time.sleep(0.3)
    # bus C added at the end of the file, with a route to it: answered on a new connection
    rev = (g.status()["last_reload"] or {}).get("revision")
    hup(g, g.text.replace(ROUTES.replace("lineb", "linec"), ROUTES.replace("lineb", "linec") + "unit5 = extra:5\n")
        + BUS_C)
    check(wait_for(lambda: reloaded(g, rev), 5) and g.status()["restart_needed"] == "" and
          g.status()["last_reload"]["result"] == "applied",
          f"bus C added: applied, nothing waits ({g.status()['last_reload']})")
    check([x["name"] for x in g.status()["buses"]] == ["line", "linec", "extra"], "/status lists bus C")
    c = Reader(g, [(5, [5010, 5011])])
    c.start()
    check(wait_for(lambda: c.right > 20, 5), f"bus C answers on a new connection ({c.right} right)")
    c.finish()
    check(c.wrong == 0 and c.lost == 0 and not c.exceptions, f"bus C: all right ({c.exceptions[:3]} {c.wrongs[:3]})")
    check(metric_buses(g) == {"line", "linec", "extra"}, f"/metrics has bus C ({metric_buses(g)})")
    # and removed again: the file as it was
    rev = g.status()["last_reload"]["revision"]
    hup(g, g.text.replace(BUS_C, "").replace("unit5 = extra:5\n", ""))
    check(wait_for(lambda: reloaded(g, rev), 5) and g.status()["restart_needed"] == "" and
          g.status()["last_reload"]["result"] == "applied",
          f"bus C removed: applied, nothing waits ({g.status()['last_reload']})")
    check([x["name"] for x in g.status()["buses"]] == ["line", "linec"], "/status no longer lists bus C")
    check(metric_buses(g) == {"line", "linec"}, f"nor /metrics ({metric_buses(g)})")
    time.sleep(0.3)
    a.finish()
    b.finish()
    log = g.log_text()
    # a rename is a removal and an addition (config/slots.c: a bus is known by its name)
    check(log.count("restarting in place") == len(changes) - 1,
          f"the log says each restart ({log.count('restarting in place')})")
    check(log.count("restarted at its new settings") == len(changes) - 1, "and that each new bus took its place")
    check("bus lineb removed" in log and "bus linec added" in log, "and the rename as lineb removed, linec added")
    check(a.wrong == 0 and a.lost == 0 and not a.exceptions and a.right > 200,
          f"bus A: {a.right} right, 0 wrong ({a.wrong}), 0 lost ({a.lost}), 0 exceptions ({a.exceptions[:5]})")
    check(b.wrong == 0 and b.lost == 0, f"bus B: never a wrong value or a lost request ({b.wrongs[:5]})")
    codes = {c for _, c in b.exceptions}
    check(codes <= {0x0A, 0x0B}, f"bus B's exceptions are 0x0A or 0x0B only ({sorted(codes)})")
    outside = [t for t, _ in b.exceptions if not any(s <= t <= e for s, e in swaps)]
    check(not outside, f"bus B's exceptions ({len(b.exceptions)}) all came during a swap ({len(outside)} outside)")
    check(g.p.poll() is None, "the daemon runs")
    g.stop()


class Dtu(threading.Thread):
    """A DTU with slave 1 behind it (holding[a] = 1000 + a), dialling rtugw's
    listen:// port with its registration, and dialling again 50 ms after
    rtugw closes the connection (a DTU's habit). Counts its connections."""
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.connections, self.stop = port, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            except OSError:
                time.sleep(0.05)
                continue
            self.connections += 1
            s.sendall(b"SITE7")
            s.settimeout(0.2)
            buf = b""
            while not self.stop.is_set():
                try:
                    chunk = s.recv(256)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 8:
                    req, buf = buf[:8], buf[8:]
                    unit, fc, addr, n = struct.unpack(">BBHH", req[:6])
                    body = bytes([unit, fc, 2 * n]) + b"".join(struct.pack(">H", 1000 + addr + i) for i in range(n))
                    s.sendall(body + crc16(body))
            s.close()
            time.sleep(0.05)


def test_dialin_bus_restarted_in_place():
    """A listen:// bus (a DTU dialling in, with a registration) restarted in
    place by a queue_depth change: the old driver leaves the listening port's
    hub before the new one joins it with the same registration, the DTU's
    connection is closed and it dials again, and its unit answers right again;
    the other bus's client is undisturbed."""
    lp = free_port()
    dtu_bus = (f"[bus dtu]\nport = listen://127.0.0.1:{lp}\nregister = text:SITE7\nresponse_timeout_ms = 300\n"
               "retries = 1\n")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=dtu_bus, extra_tcp="unit7 = dtu:1\n")
    dtu = Dtu(lp)
    dtu.start()
    a = Reader(g, [(1, [1010, 1011])])
    d = Reader(g, [(7, [1010, 1011])])
    a.start()
    d.start()
    check(wait_for(lambda: a.right > 20 and d.right > 20, 10), f"both buses answer ({a.right}, {d.right})")
    for depth in (8, 16):
        rev = g.status()["last_reload"] and g.status()["last_reload"]["revision"]
        right, conns = d.right, dtu.connections
        t = g.text.replace("retries = 1\n[tcp]", f"retries = 1\nqueue_depth = {depth}\n[tcp]") if depth == 8 else \
            g.text.replace("queue_depth = 8\n", "queue_depth = 16\n")
        check(t != g.text, f"queue_depth {depth}: the file changes")
        hup(g, t)
        check(wait_for(lambda: reloaded(g, rev), 5) and g.status()["restart_needed"] == "" and
              g.status()["last_reload"]["result"] == "applied", f"queue_depth {depth}: applied ({g.status()['last_reload']})")
        check(wait_for(lambda: d.right > right + 20, 10) and dtu.connections > conns,
              f"queue_depth {depth}: the DTU dialled the new bus, its unit answers again ({d.right - right}, "
              f"{dtu.connections - conns} new connections)")
    a.finish()
    d.finish()
    dtu.stop.set()
    log = g.log_text()
    check("registrations one of which" not in log and "needs a registration" not in log and
          log.count("restarted at its new settings") == 2, "the new bus joined the hub each time")
    check(a.wrong == 0 and a.lost == 0 and not a.exceptions, f"bus A: {a.right} right, nothing else ({a.exceptions[:3]})")
    check(d.wrong == 0 and d.lost == 0 and {c for _, c in d.exceptions} <= {0x0A, 0x0B},
          f"the DTU's unit: never wrong or lost, exceptions 0x0A/0x0B only ({d.wrongs[:3]}, {len(d.exceptions)})")
    g.stop()


def test_device_bus_moves_threads():
    """A Modbus TCP device bus (framing = tcp) lives on the I/O thread, a
    line bus on the line thread (gateway/bus.c, bus_loop_for): restarted in
    place it goes where its new keys say. The device is a second rtugw
    serving its own sim:1 by Modbus TCP and RTU over TCP (holding[10..11] =
    1010, 1011: equal to bus A's), so the same unit answers alike whichever
    framing the bus speaks. queue_depth keeps it on the I/O thread; framing =
    rtu on the RTU-over-TCP port moves it to the line thread; framing = tcp
    moves it back. Unit 1 (bus A) never sees an exception; unit 7 (the
    device) only 0x0A/0x0B, right again after each."""
    rtu_port = free_port()
    dev = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="",
                  extra=f"[rtu_tcp]\nport = {rtu_port}\ndefault_bus = line\n")
    tcp_bus = f"[bus dev]\nport = tcp://127.0.0.1:{dev.tcp_port}\nframing = tcp\nresponse_timeout_ms = 300\n"
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=tcp_bus, extra_tcp="unit7 = dev:1\n")
    a = Reader(g, [(1, [1010, 1011])])
    d = Reader(g, [(7, [1010, 1011])])
    a.start()
    d.start()
    check(wait_for(lambda: a.right > 20 and d.right > 20, 5), f"both buses answer ({a.right}, {d.right})")
    rtu_bus = f"[bus dev]\nport = tcp://127.0.0.1:{rtu_port}\nframing = rtu\nresponse_timeout_ms = 300\n"
    for what, text in [("queue_depth", g.text.replace(tcp_bus, tcp_bus + "queue_depth = 8\n")),
                       ("framing rtu", g.text.replace(tcp_bus, rtu_bus)),
                       ("framing tcp", g.text.replace(rtu_bus, tcp_bus))]:
        check(text != g.text, f"{what}: the file changes")
        rev = (g.status()["last_reload"] or {}).get("revision")
        right = d.right
        hup(g, text)
        check(wait_for(lambda: reloaded(g, rev), 5) and g.status()["restart_needed"] == "" and
              g.status()["last_reload"]["result"] == "applied", f"{what}: applied ({g.status()['last_reload']})")
        check(wait_for(lambda: d.right > right + 20, 5), f"{what}: the device's unit answers right again "
              f"({d.right - right})")
    a.finish()
    d.finish()
    check(g.log_text().count("restarted at its new settings") == 3, "each change restarted the device bus")
    check(a.wrong == 0 and a.lost == 0 and not a.exceptions and a.right > 100,
          f"bus A: {a.right} right, nothing else ({a.wrong}, {a.lost}, {a.exceptions[:3]})")
    check(d.wrong == 0 and d.lost == 0 and {c for _, c in d.exceptions} <= {0x0A, 0x0B},
          f"the device's unit: never wrong or lost, exceptions 0x0A/0x0B only ({d.wrongs[:3]}, {len(d.exceptions)})")
    check(g.p.poll() is None and dev.p.poll() is None, "both daemons run")
    g.stop()
    dev.stop()


# A bus added live (issue 41): a paced simulator at 9600 baud with no slave
# list and a queue of 6 (the least above [tcp] bus_share), twelve tags on its
# device (slave 7), one read each (max_read_registers = 1), every 200 ms: all
# due at once would be twice its queue, so the poller's per-bus limit (half
# the queue: three reads at a time) is what keeps them out of its 0x06.
ADDED = ("[bus added]\nport = sim-paced\nbaud = 9600\nqueue_depth = 6\nresponse_timeout_ms = 200\n"
         "[device ma]\nbus = added\nslave = 7\nmax_read_registers = 1\n" +
         "".join(f"[tag ta{i}]\ndevice = ma\ntable = holding\naddress = {10 * i}\ntype = uint16\ninterval_ms = 200\n"
                 for i in range(12)))

ROUTES_ADDED = "unit7 = added:7\nunit11 = added:1\n"
ADMIN = "s3cret-0123456789abcdefXY"   # [http] write_token: the API's admin (POST /api/scan)


def added_series(g):
    """/metrics' series of bus `added` that a start has before any traffic
    to a slave (no slave or device label), and which of them are frames'."""
    return sorted(k for k in g.metrics() if 'bus="added"' in k and "slave=" not in k and "device=" not in k)


def api(g, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:300]


def scanned(g):
    """A scan of bus `added` (ids 1-8, its polling paused) through the API: the slaves found."""
    st, body = api(g, "POST", "/api/scan", {"bus": "added", "first_id": 1, "last_id": 8, "pause_polling": True})
    check(st == 202, f"POST /api/scan of the added bus: 202 ({st} {body})")
    check(wait_for(lambda: api(g, "GET", "/api/scan/added")[1].get("state") in ("done", "failed"), 15),
          f"the scan ends ({api(g, 'GET', '/api/scan/added')})")
    res = api(g, "GET", "/api/scan/added")[1]
    check(res["state"] == "done", f"the scan is done ({res})")
    return [f["slave"] for f in res["found"]]


def frames_of(g):
    st, body = api(g, "GET", "/frames?bus=added")
    check(st == 200, f"GET /frames?bus=added: 200 ({st} {body})")
    return body if st == 200 else {"enabled": False, "last": 0, "frames": []}


def test_bus_added_is_whole():
    """A bus added live is a bus as a fresh start has it: its tags polled
    within its per-bus limit (no 0x06 from its queue of 6), scanned through
    the API, its frames kept for /frames (frame_ring on), its simulator
    serving the device on it (slave 7, not 1,2,3), /status and /metrics
    naming it as a fresh start of the same file does."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="", extra=f"frame_ring = 64\nwrite_token = {ADMIN}\n")
    rev = (g.status()["last_reload"] or {}).get("revision")
    hup(g, g.text.replace("[tcp]", ADDED + "[tcp]").replace("[http]", ROUTES_ADDED + "[http]"))
    check(wait_for(lambda: reloaded(g, rev), 5) and g.status()["restart_needed"] == "" and
          g.status()["last_reload"]["result"] == "applied", f"bus added: applied ({g.status()['last_reload']})")
    names = [f"ta{i}" for i in range(12)]
    check(wait_for(lambda: all(tag_values(g).get(n, {}).get("quality") == "good" for n in names), 5),
          f"its tags are polled ({[tag_values(g).get(n) for n in names]})")
    time.sleep(2)
    full = g.metrics().get('rtugw_bus_queue_full_total{bus="added"}')
    check(full == 0, f"its polls kept within its per-bus limit: no 0x06 from its queue ({full})")
    tv = tag_values(g)
    check(all(tv.get(n, {}).get("quality") == "good" and tv[n].get("value") == 7000 + 10 * i
              for i, n in enumerate(names)), f"each tag at its value ({[tv.get(n) for n in names]})")
    f = frames_of(g)
    check(f["enabled"] and f["last"] > 10 and len(f["frames"]) > 10,
          f"/frames of the added bus has its frames ({f['last'] if isinstance(f, dict) else f})")
    c = g.client()
    r7, r1 = c.read_holding_registers(10, 2, slave=7), c.read_holding_registers(10, 2, slave=11)
    c.close()
    check(not r7.isError() and r7.registers == [7010, 7011], f"its simulator serves slave 7 ({r7})")
    check(r1.isError(), f"and not slave 1, which no device on it names ({r1})")
    found = scanned(g)
    check(found == [7], f"the scan finds slave 7 only, as the simulator of a fresh start serves ({found})")
    series, status = added_series(g), [b["name"] for b in g.status()["buses"]]
    check(any(k.startswith("rtugw_frames_recorded_total") for k in series), f"/metrics counts its frames ({series})")
    fresh = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=ADDED, extra=f"frame_ring = 64\nwrite_token = {ADMIN}\n",
                    extra_tcp=ROUTES_ADDED)
    try:
        check([b["name"] for b in fresh.status()["buses"]] == status, f"/status: the buses of a fresh start ({status})")
        # the soak's canonical dump (test_live_soak.py, tables): the same file gives the same tables
        tables = {w: api(g, "GET", f"/api/{w}")[1] for w in ("buses", "devices", "templates", "tags", "polls")}
        fresh_tables = {w: api(fresh, "GET", f"/api/{w}")[1] for w in tables}
        check(tables == fresh_tables, "the running tables are a fresh start's: " +
              str({k: (tables[k], fresh_tables[k]) for k in tables if tables[k] != fresh_tables[k]})[:600])
        shape = [sorted(b) for b in g.status()["buses"]]
        check(shape == [sorted(b) for b in fresh.status()["buses"]], f"/status: each bus's members as a fresh start's")
        check(added_series(fresh) == series, f"/metrics: a fresh start's series of the bus "
              f"({set(series) ^ set(added_series(fresh))})")
        check(scanned(fresh) == found, "a fresh start's scan finds the same")
        check(fresh.p.poll() is None, "the fresh start runs")
    finally:
        fresh.stop()
    check(g.p.poll() is None, "the daemon runs")
    g.stop()


# A bus in the middle of the file (issue 41): removed and added back there,
# between two buses that each have a client on one connection and a tag.
MID = "[bus mid]\nport = sim:4\nbaud = 115200\nresponse_timeout_ms = 150\n"
ROUTE_MID = "unit4 = mid:4\n"


def test_bus_in_the_middle():
    """A [bus] removed from the middle of the file, then added back there: the
    buses before and after it are not touched (config/slots.c: each keeps its
    slot, so nothing after it is renumbered or restarted). Bus A (line, unit
    1) and bus B (lineb, units 2 and 3, its tag tb polled) are read on one
    connection each throughout, with equal values on A and B's slave 1
    (1010, 1011) and B's own on its slave 2: every answer right, none an
    exception, none lost, no restart in the log. The removed bus's unit is
    answered 0x0A (no such bus) or 0x0B (while it stops), never a value; the
    bus added back answers right on a new connection. After each change
    /status and /metrics name the buses in the file's order, and the running
    tables are those of a fresh start on the same file. Before slots, the
    removal restarted bus B in place (its client saw 0x0A/0x0B)."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=MID + BUS_B + TAG_B, extra_tcp=ROUTES + ROUTE_MID,
                extra=f"write_token = {ADMIN}\n")
    a, b = readers_a_b(g)
    c = g.client()
    r = c.read_holding_registers(10, 2, slave=4)
    check(not r.isError() and r.registers == [4010, 4011], f"the middle bus answers ({r})")
    steps = [("removed", g.text.replace(MID, "").replace(ROUTE_MID, ""), ["line", "lineb"]),
             ("added back", None, ["line", "mid", "lineb"])]
    original = g.text
    for what, text, names in steps:
        text = text if text is not None else original
        rev = (g.status()["last_reload"] or {}).get("revision")
        right_a, right_b, polls = a.right, b.right, g.status()["buses"][-1]["requests"]
        hup(g, text)
        check(wait_for(lambda: reloaded(g, rev), 5), f"{what}: reloaded")
        st = g.status()
        check(st["restart_needed"] == "" and st["last_reload"]["result"] == "applied",
              f"{what}: applied, nothing waits ({st['last_reload']}, {st['restart_needed']!r})")
        check(wait_for(lambda: [x["name"] for x in g.status()["buses"]] == names, 3),
              f"{what}: /status lists the buses in the file's order ({[x['name'] for x in g.status()['buses']]})")
        check(metric_buses(g) == set(names), f"{what}: so does /metrics ({metric_buses(g)})")
        check(wait_for(lambda: a.right > right_a + 20 and b.right > right_b + 20, 5),
              f"{what}: A and B go on answering ({a.right - right_a}, {b.right - right_b})")
        lineb = [x for x in g.status()["buses"] if x["name"] == "lineb"][0]
        check(lineb["requests"] > polls, f"{what}: lineb's counters go on from before, not from a new bus's 0 "
              f"({lineb['requests']} after {polls})")
        r = c.read_holding_registers(10, 2, slave=4)
        if "mid" in names:
            check(wait_for(lambda: not c.read_holding_registers(10, 2, slave=4).isError(), 3),
                  f"{what}: the middle bus answers again")
            r = c.read_holding_registers(10, 2, slave=4)
            check(r.registers == [4010, 4011], f"{what}: at its values ({r.registers})")
        else:
            check(r.isError() and r.exception_code in (0x0A, 0x0B), f"{what}: its unit is refused, never a value ({r})")
        fresh = Gateway(bus="port = sim:1\nbaud = 115200\n",
                        devices=(MID if "mid" in names else "") + BUS_B + TAG_B,
                        extra_tcp=ROUTES + (ROUTE_MID if "mid" in names else ""), extra=f"write_token = {ADMIN}\n")
        try:
            tables = {w: api(g, "GET", f"/api/{w}")[1] for w in ("buses", "devices", "tags", "polls")}
            fresh_tables = {w: api(fresh, "GET", f"/api/{w}")[1] for w in tables}
            check(tables == fresh_tables, f"{what}: the running tables are a fresh start's: " +
                  str({k: (tables[k], fresh_tables[k]) for k in tables if tables[k] != fresh_tables[k]})[:600])
        finally:
            fresh.stop()
    c.close()
    time.sleep(0.3)
    a.finish()
    b.finish()
    log = g.log_text()
    check("restarting in place" not in log and "bus mid removed" in log and "bus mid added" in log,
          "the log: mid removed and added, nothing restarted")
    check(a.wrong == 0 and a.lost == 0 and not a.exceptions and a.right > 100,
          f"bus A: {a.right} right, 0 wrong ({a.wrong}), 0 lost ({a.lost}), 0 exceptions ({a.exceptions[:5]})")
    check(b.wrong == 0 and b.lost == 0 and not b.exceptions and b.right > 100,
          f"bus B: {b.right} right, 0 wrong ({b.wrong}), 0 lost ({b.lost}), 0 exceptions ({b.exceptions[:5]})")
    check(tb_good(g), f"tb still polled ({tag_values(g).get('tb')})")
    check(g.p.poll() is None, "the daemon runs")
    g.stop()


if __name__ == "__main__":
    run_tests("test_bus_live", [test_bus_restarted_in_place, test_dialin_bus_restarted_in_place,
                                test_device_bus_moves_threads, test_bus_added_is_whole,
                                test_bus_in_the_middle])
