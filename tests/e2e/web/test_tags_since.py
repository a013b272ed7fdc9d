#!/usr/bin/python3
"""GET /tags when little changed (web/http_tags.c, tags/changes.c): ETag and
304, ?since=SEQ, across a live reload, against the simulator's registers
(`port = sim:1`) changed by writes through Modbus TCP:

- the answer's ETag is its "seq"; If-None-Match with it is 304 while nothing
  changed, and a 200 only with a newer seq;
- ?since= of the current seq lists nothing; one older than the table (0), one
  from the future, lists everything with "full": true; since that is no
  number is 400, counted;
- a client that keeps a view only from ?since= answers (304 kept, "full"
  replaced, the rest merged by name), while random registers are written at
  random times: each time a full GET has the client's seq, the view equals it
  tag for tag (value, quality, reason); a SIGHUP that adds a tag in the middle
  gives the client "full" once and the new tag; at the end the view holds
  every value written, as Modbus TCP reads them back from the simulator;
- 3,000 tags: a whole list built in slices is whole and in order; clients
  that close before their answer leave the gateway serving;
- /status: 304 while only the clock moved, a 200 with a new ETag once a
  Modbus TCP request moved its counters.
Seeded: replay with RTUGW_SEED=..."""
import json
import os
import random
import signal
import socket
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, mbap, recv_frame, run_tests, wait_for  # noqa: E402

SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_tags_since: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)
N_TAGS = 60
ROUNDS = 160
DIRS = []


def get(g, path, etag=None):
    """status, headers, JSON body (None for 304 or no JSON)."""
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}")
    if etag:
        req.add_header("If-None-Match", etag)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, e.headers, json.loads(body) if body else None
        except ValueError:
            return e.code, e.headers, None


def shown(t):
    return (t["value"], t["quality"], t.get("reason"))


class Client:
    """What the page does: a view of every tag, kept up from ?since= answers."""

    def __init__(self, g):
        self.g, self.seq, self.view, self.fulls = g, None, {}, 0

    def poll(self, conditional):
        path = "/tags" if self.seq is None else f"/tags?since={self.seq}"
        st, hdr, body = get(self.g, path, f'"{self.seq}"' if conditional and self.seq is not None else None)
        if st == 304:
            check(hdr.get("ETag") == f'"{self.seq}"', f"a 304 names the client's seq ({hdr.get('ETag')})",
                  quiet=True)
            return
        check(st == 200 and body is not None, f"GET {path}: 200 ({st})", quiet=True)
        check(hdr.get("ETag") == f'"{body["seq"]}"', "the ETag is the answer's seq", quiet=True)
        if self.seq is not None:
            check(body["seq"] >= self.seq, f"seq never goes back ({self.seq} -> {body['seq']})", quiet=True)
        if self.seq is None or body["full"]:
            self.view = {t["name"]: shown(t) for t in body["tags"]}
            self.fulls += self.seq is not None
        else:
            check(body["full"] is False, "an answer of changes says full: false", quiet=True)
            for t in body["tags"]:
                check(t["name"] in self.view, f"a changed tag the client knows ({t['name']})", quiet=True)
                self.view[t["name"]] = shown(t)
        self.seq = body["seq"]


def write_register(sock, tid, address, value):
    sock.sendall(mbap(tid, 1, struct.pack(">BHH", 6, address, value)))
    f = recv_frame(sock)
    return f is not None and f[2] == struct.pack(">BHH", 6, address, value)


def read_registers(sock, tid, address, count):
    sock.sendall(mbap(tid, 1, struct.pack(">BHH", 3, address, count)))
    f = recv_frame(sock)
    if not f or f[2][0] != 3:
        return None
    return list(struct.unpack(f">{count}H", f[2][2:]))


def write_csv(path, n):
    with open(path, "w") as f:
        f.write("name,table,address,type,interval_ms\n")
        for a in range(n):
            f.write(f"v{a},holding,{a},uint16,100\n")


def tagged_gateway():
    """A gateway on the simulator with N_TAGS tags read every 100 ms, all good."""
    d = tempfile.mkdtemp(prefix="rtugw-since-")
    DIRS.append(d)
    csv_path = os.path.join(d, "tags.csv")
    write_csv(csv_path, N_TAGS)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", dir=d, devices=f"[device d]\nslave = 1\ntags_file = {csv_path}\n")
    check(wait_for(lambda: all(t["quality"] == "good" for t in get(g, "/tags")[2]["tags"]), 10),
          "every tag good")
    return g, csv_path


def test_protocol():
    """ETag, 304, since of now, too old, from the future, not a number."""
    g, csv_path = tagged_gateway()
    st, hdr, body = get(g, "/tags")
    check(st == 200 and body["full"] is True and len(body["tags"]) == N_TAGS and
          hdr.get("ETag") == f'"{body["seq"]}"', f"GET /tags: every tag, full, ETag its seq ({hdr.get('ETag')})")
    seq, not_modified, newer = body["seq"], 0, True
    for _ in range(20):
        st, hdr, b2 = get(g, "/tags", f'"{seq}"')
        if st == 304:
            not_modified += 1
        else:
            newer = newer and st == 200 and b2["seq"] > seq
            seq = b2["seq"]
    check(not_modified >= 5 and newer, f"If-None-Match: 304 while nothing changed ({not_modified} of 20), "
          "else a newer seq")
    st, hdr, b3 = get(g, f"/tags?since={seq}")
    check(st == 200 and b3["full"] is False and all(t["name"].startswith("v") for t in b3["tags"]) and
          len(b3["tags"]) < N_TAGS, f"since of now: changes only ({len(b3['tags'])} tags)")
    for since in ("0", str(seq + 10**9)):
        st, hdr, b4 = get(g, f"/tags?since={since}")
        check(st == 200 and b4["full"] is True and len(b4["tags"]) == N_TAGS,
              f"since={since} (not this table's): every tag, full")
    for bad in ("abc", "-1", "1" * 21, "", "18446744073709551616"):
        st, hdr, b5 = get(g, f"/tags?since={bad}")
        check(st == 400, f"since={bad!r}: 400 ({st})")
    m = g.metrics()
    check(m.get("rtugw_http_tags_not_modified_total") == not_modified and m.get("rtugw_http_tags_refused_total") == 5
          and m.get("rtugw_http_tags_full_total", 0) >= 3 and m.get("rtugw_http_tags_since_total", 0) >= 1,
          "304s, refusals, full and since answers are counted in /metrics")
    g.stop()


def test_status():
    """/status: 304 while nothing but the clock moved; a Modbus TCP request
    (its counters move) gives a 200 with a new ETag; a tag going stale too."""
    d = tempfile.mkdtemp(prefix="rtugw-since-")
    DIRS.append(d)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", dir=d, devices="[device d]\nslave = 1\n")
    st, hdr, body = get(g, "/status")
    e1 = hdr.get("ETag")
    check(st == 200 and e1 and body["uptime_s"] >= 0, f"/status: 200 with an ETag ({e1})")
    codes = [get(g, "/status", e1)[0] for _ in range(5)]
    check(codes == [304] * 5, f"If-None-Match: 304 while the gateway is idle ({codes})")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=5)
    check(read_registers(sock, 1, 0, 2) == [1000, 1001], "a Modbus TCP read through the gateway")
    st, hdr, body2 = get(g, "/status", e1)
    e2 = hdr.get("ETag")
    check(st == 200 and e2 != e1 and body2["tcp"]["requests"] == body["tcp"]["requests"] + 1,
          f"after it: 200, a new ETag ({e2}), the request counted")
    check(get(g, "/status", e2)[0] == 304, "and 304 again with the new ETag")
    check(g.metrics().get("rtugw_http_status_not_modified_total") == 6, "the 304s are counted")
    sock.close()
    g.stop()


def test_sliced():
    """3,000 tags: a whole list is built in slices, whole and in order; clients
    that go before their answer leave the gateway serving."""
    d = tempfile.mkdtemp(prefix="rtugw-since-")
    DIRS.append(d)
    devices = ""
    for s in (1, 2, 3):
        with open(os.path.join(d, f"d{s}.csv"), "w") as f:
            f.write("name,table,address,type,interval_ms\n")
            f.writelines(f"s{s}_{a},holding,{a},uint16,1000\n" for a in range(1000))
        devices += f"[device d{s}]\nslave = {s}\ntags_file = {d}/d{s}.csv\n"
    g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", dir=d, devices=devices)
    want = [f"s{s}_{a}" for s in (1, 2, 3) for a in range(1000)]
    check(wait_for(lambda: all(t["quality"] == "good" for t in get(g, "/tags")[2]["tags"]), 20), "3,000 tags good")
    st, hdr, body = get(g, "/tags")
    check(st == 200 and [t["name"] for t in body["tags"]] == want and hdr.get("ETag") == f'"{body["seq"]}"',
          "a whole list of 3,000 tags, in order, its ETag its seq")
    check(all(t["value"] == 1000 * int(t["name"][1]) + int(t["name"].split("_")[1]) for t in body["tags"]),
          "every value the simulator's register")
    for _ in range(20):   # gone before the answer: the sweep hands the connection back
        c = socket.create_connection(("127.0.0.1", g.http_port), timeout=5)
        c.sendall(b"GET /tags HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        c.close()
    time.sleep(0.6)
    st, hdr, b2 = get(g, "/tags")
    check(st == 200 and len(b2["tags"]) == 3000, "after 20 clients that went: a whole list again")
    m = g.metrics()
    check(m.get("rtugw_http_tags_slices_total", 0) >= 3 * 2, f"built in slices ({m.get('rtugw_http_tags_slices_total')})")
    rc, _ = g.stop()
    check(rc == 0, f"exits 0 ({rc})")


def test_never_missed():
    """Random writes while a client follows ?since=; a reload in the middle."""
    g, csv_path = tagged_gateway()
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=5)
    expected, tid, compared, full_views = {}, 1, 0, 0
    c = Client(g)
    c.poll(False)
    reload_at = ROUNDS // 2
    for r in range(ROUNDS):
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            a, v = rng.randrange(N_TAGS), rng.randrange(65536)
            tid += 1
            check(write_register(sock, tid, a, v), f"write v{a} = {v} through Modbus TCP", quiet=True)
            expected[a] = v
        if r == reload_at:
            with open(csv_path, "a") as f:
                f.write(f"v{N_TAGS},holding,{N_TAGS},uint16,100\n")
            fulls = c.fulls
            g.p.send_signal(signal.SIGHUP)
            check(wait_for(lambda: "tags applied" in g.log_text(), 5), "the reload applied the tags")
        time.sleep(rng.random() * 0.15)
        c.poll(rng.random() < 0.5)
        st, hdr, full = get(g, "/tags")
        full_views += 1
        if full["seq"] == c.seq:
            compared += 1
            mine = {t["name"]: shown(t) for t in full["tags"]}
            check(c.view == mine, f"round {r}: the client's view equals a full GET at the same seq {c.seq}"
                  + ("" if c.view == mine else
                     f": differs at {sorted(k for k in set(mine) | set(c.view) if mine.get(k) != c.view.get(k))[:5]}"),
                  quiet=c.view == mine)
        if r > reload_at and f"v{N_TAGS}" in c.view and c.fulls > fulls:
            reload_at = ROUNDS   # seen
    check(reload_at == ROUNDS, "after the reload the client got full: true once and the new tag")
    check(compared >= ROUNDS // 8, f"the view compared with a full GET at the same seq {compared} of {full_views} times")
    # quiet: every written value reaches the view through ?since= alone
    want = {f"v{a}": v for a, v in expected.items()}
    check(wait_for(lambda: (c.poll(True), all(c.view[k][0] == v for k, v in want.items()))[1], 5),
          f"the view holds all {len(want)} registers written, from ?since= answers only")
    tid += 1
    sim = read_registers(sock, tid, 0, N_TAGS)
    check(sim is not None and all(sim[a] == v for a, v in expected.items()),
          "and Modbus TCP reads the same values back from the simulator")
    check(all(c.view[f"v{a}"][0] == sim[a] for a in range(N_TAGS)), "every tag of the view equals its register")
    sock.close()
    g.stop()


run_tests("test_tags_since", [test_protocol, test_status, test_sliced, test_never_missed], cleanup=DIRS)
