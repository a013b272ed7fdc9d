#!/usr/bin/python3
"""Gateway CPU per GET /tags of 10,000 tags (docs/tags.md, "Polling /tags
cheaply"), three ways side by side in one run, their order rotated every round:

  full   GET /tags, every tag formatted (what every GET cost before 304/since)
  304    GET /tags with If-None-Match: the current ETag, nothing changed
  since  GET /tags?since=SEQ after 10 registers were written (through Modbus
         TCP to the simulator, and polled): the 10 changed tags only
  one    GET /tags/c0, one tag: the floor, what any request costs here

CPU: the daemon's threads' run time (/proc/PID/task/*/schedstat, ns) from
just before the request to just after its answer arrived, so anything else
the daemon did meanwhile counts too (the 10 fast tags' polls, 10 a second,
and the rest every 4 s: a few microseconds a millisecond). Every answer is
checked: 10,000 tags for full, 304 with the ETag, exactly the 10 written
values for since (a round where more changed is counted, not timed).
Every request follows the same 0.35 s pause (the since one waits for the
polls of its writes), as a page's requests do, so each finds caches alike.
One HTTP connection, kept alive. Run from the build tree:
  /usr/bin/python3 bench/tags_poll.py [--rounds N] [--bin ./rtugw]"""
import argparse
import glob
import http.client
import json
import os
import random
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import rtugwtest  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=60)
ap.add_argument("--tags", type=int, default=10000)
ap.add_argument("--bin", default=os.environ.get("RTUGW_BIN", "./rtugw"))
ap.add_argument("--smoke", action="store_true", help="a short run for make check (1,000 tags, 4 rounds): "
                "its figures' shape and no wrong answer, judged by bench/smoke.py")
opt = ap.parse_args()
if opt.smoke:
    opt.rounds, opt.tags = 4, 1000
rtugwtest.BIN = opt.bin
FAST = 10            # tags written every round, read every 100 ms
FAST_AT = 990        # their registers, on slave 1
SLAVES = 10          # the simulator's slaves hold 1,000 registers each

d = tempfile.mkdtemp(prefix="rtugw-tags-poll-")
per = opt.tags // SLAVES
for s in range(1, SLAVES + 1):
    with open(os.path.join(d, f"d{s}.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\n")
        for a in range(per - (FAST if s == 1 else 0)):
            f.write(f"t{s}_{a},holding,{a},uint16,4000\n")
        for k in range(FAST if s == 1 else 0):
            f.write(f"c{k},holding,{FAST_AT + k},uint16,100\n")
g = rtugwtest.Gateway(bus="port = sim:" + ",".join(str(s) for s in range(1, SLAVES + 1)) + "\nbaud = 115200\n",
                      dir=d, timeout_ms=300,
                      devices="".join(f"[device d{s}]\nslave = {s}\ntags_file = {d}/d{s}.csv\n"
                                      for s in range(1, SLAVES + 1)))
conn = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=10)


def cpu_ns():
    total = 0
    for p in glob.glob(f"/proc/{g.p.pid}/task/*/schedstat"):
        try:
            with open(p) as f:
                ns = int(f.read().split()[0])
            total += ns
            if os.environ.get("TAGS_POLL_THREADS"):
                with open(p.replace("schedstat", "comm")) as f:
                    per_thread[f.read().strip() + p.split("/")[4]] = ns
        except OSError:
            pass
    return total


per_thread = {}


def get(path, etag=None):
    """status, ETag, body, gateway CPU ns."""
    headers = {"If-None-Match": etag} if etag else {}
    c0 = cpu_ns()
    before = dict(per_thread)
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    c1 = cpu_ns()
    if before:
        print(path[:20], etag, {k: (v - before.get(k, 0)) // 1000 for k, v in per_thread.items() if v != before.get(k, 0)})
    return r.status, r.getheader("ETag"), json.loads(body) if body else None, c1 - c0


def all_good():
    st, _, b, _ = get("/tags")
    return st == 200 and len(b["tags"]) == opt.tags and all(t["quality"] == "good" for t in b["tags"])


if not rtugwtest.wait_for(all_good, 60, step=0.5):
    sys.exit(f"FATAL: the {opt.tags} tags did not all come good")
sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=5)
rng = random.Random(1)
times = {"full": [], "304": [], "since": [], "one": []}
wrong, extra = 0, 0
st, etag, body, _ = get("/tags")
seq = body["seq"]
above = {"full": [], "304": [], "since": []}   # minus the same round's floor
for r in range(opt.rounds):
    this_round = {}
    order = ["full", "304", "since", "one"]
    order = order[r % 4:] + order[:r % 4]
    for mode in order:
        if mode != "since":
            time.sleep(0.35)   # every request after the same pause: a page asks once a second
        if mode == "one":
            st, etag, body, ns = get("/tags/c0")
            ok = st == 200 and body["name"] == "c0"
        elif mode == "full":
            st, etag, body, ns = get("/tags")
            ok = st == 200 and len(body["tags"]) == opt.tags and body["full"] is True
            seq = body["seq"] if ok else seq
        elif mode == "304":
            st, etag, body, ns = get("/tags", f'"{seq}"')
            ok = st == 304 and etag == f'"{seq}"'
            if st == 200:   # something changed (a slow poll, stale): counted, not timed
                extra += 1
                seq = body["seq"]
                continue
        else:
            values = [rng.randrange(65536) for _ in range(FAST)]
            sock.sendall(struct.pack(">HHHBBHHB", r, 0, 7 + 2 * FAST, 1, 16, FAST_AT, FAST, 2 * FAST) +
                         struct.pack(f">{FAST}H", *values))
            ok = len(sock.recv(64)) == 12
            time.sleep(0.35)   # 3 polls of the fast tags
            st, etag, body, ns = get(f"/tags?since={seq}")
            got = {t["name"]: t["value"] for t in body["tags"]} if st == 200 else {}
            ok = ok and st == 200 and body["full"] is False and all(got.get(f"c{k}") == values[k] for k in range(FAST))
            if ok and len(got) != FAST:
                extra += 1
                seq = body["seq"]
                continue
            seq = body["seq"] if ok else seq
        if not ok:
            wrong += 1
            continue
        times[mode].append(ns / 1000.0)
        this_round[mode] = ns / 1000.0
    if "one" in this_round:
        for mode in ("full", "304", "since"):
            if mode in this_round:
                above[mode].append(this_round[mode] - this_round["one"])
# back to back: each answer asked BURST times in a row (the same since, the
# same ETag), the daemon's CPU over the burst divided by BURST: per request,
# with the pauses' cold caches and schedstat's granularity amortized
BURST = {"full": 10, "304": 200, "since": 200, "one": 200}
hot = {m: [] for m in BURST}
for r in range(max(4, opt.rounds // 4)):
    values = [rng.randrange(65536) for _ in range(FAST)]
    sock.sendall(struct.pack(">HHHBBHHB", r, 0, 7 + 2 * FAST, 1, 16, FAST_AT, FAST, 2 * FAST) +
                 struct.pack(f">{FAST}H", *values))
    sock.recv(64)
    st, etag, body, _ = get("/tags")
    seq_before = body["seq"]
    time.sleep(0.35)
    for mode in ("304", "since", "one", "full"):
        path, tag = {"full": ("/tags", None), "304": ("/tags", f'"{seq_before}"'),
                     "since": (f"/tags?since={seq_before}", None), "one": ("/tags/c0", None)}[mode]
        if mode == "304":   # the ETag of now, after the writes' polls
            st, etag, body, _ = get("/tags")
            tag = etag
        c0, good = cpu_ns(), 0
        for _ in range(BURST[mode]):
            conn.request("GET", path, headers={"If-None-Match": tag} if tag else {})
            resp = conn.getresponse()
            data = resp.read()
            if mode == "304":
                good += resp.status == 304
            elif mode == "since":
                got = {t["name"]: t["value"] for t in json.loads(data)["tags"]}
                good += resp.status == 200 and all(got.get(f"c{k}") == values[k] for k in range(FAST))
            else:
                good += resp.status == 200
        ns = cpu_ns() - c0
        if good == BURST[mode]:
            hot[mode].append(ns / 1000.0 / BURST[mode])
        else:
            wrong += mode != "304"   # a 200 in a 304 burst: a value changed meanwhile (a slow poll)
g.stop()
conn.close()
print(f"GET /tags of {opt.tags} tags, gateway CPU per request in us ({opt.rounds} rounds, order rotated; "
      f"binary {opt.bin}):")
print(f"{'answer':<34}{'median':>9}{'p10':>9}{'p90':>9}{'n':>5}   minus the round's floor: median p10 p90")
names = {"full": "full (200, every tag)", "304": "If-None-Match, unchanged (304)",
         "since": f"?since= with {FAST} changed (200)", "one": "floor: GET /tags/c0 (one tag)"}
for mode in ("full", "304", "since", "one"):
    v = times[mode]
    if len(v) >= 2:
        q = statistics.quantiles(v, n=10)
        a = above.get(mode, [])
        qa = statistics.quantiles(a, n=10) if len(a) >= 2 else None
        print(f"{names[mode]:<34}{statistics.median(v):>9.1f}{q[0]:>9.1f}{q[-1]:>9.1f}{len(v):>5}" +
              (f"   {statistics.median(a):>9.1f}{qa[0]:>9.1f}{qa[-1]:>9.1f}" if qa else ""))
    else:
        print(f"{names[mode]:<34}{'-':>9}{'-':>9}{'-':>9}{len(v):>5}")
print("back to back (each answer asked BURST times in a row), gateway CPU per request in us:")
for mode in ("full", "304", "since", "one"):
    v = hot[mode]
    if len(v) >= 2:
        q = statistics.quantiles(v, n=10)
        print(f"{names[mode]:<34}{statistics.median(v):>9.1f}{q[0]:>9.1f}{q[-1]:>9.1f}{len(v):>5} bursts of {BURST[mode]}")
print(f"wrong answers: {wrong}; rounds where more than asked had changed (not timed): {extra}")
if opt.smoke:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import smoke
    med = {m: statistics.median(times[m]) for m in times if times[m]}
    smoke.check("tags_poll.py", {"full_us": med.get("full"), "not_modified_us": med.get("304"),
                                 "since_us": med.get("since")}, ["full_us", "not_modified_us", "since_us"],
                wrong=wrong)
sys.exit(1 if wrong else 0)
