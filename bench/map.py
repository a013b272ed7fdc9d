#!/usr/bin/python3
"""[map NAME] against cached [tcp] reads of the same size, side by side in one
run (docs/tags.md, "Maps"); then the memory of a 10,000-register map.

Throughput: one daemon, one simulated slave whose holding 0..63 are a poll
group with serve_cached_ms (answered from the cache) and 32 float32 tags,
served by a map at unit 100 as 32 float32 entries in CDAB (each answer
encodes 32 values). Each round runs both kinds, in alternating order, for
ROUND_S seconds each: CLIENTS connections, each pipelining DEPTH reads of 64
registers. Figures per kind: answers/s and the daemon's CPU time per answer
(utime + stime from /proc, what the answers cost the gateway whatever the
clients' speed), median and p10-p90 over the rounds.

Memory: two daemons with the same 10,000 tags (a tags_file), one without a
map and one with a map serving all 10,000 as uint16 (10,000 registers): the
difference of their VmRSS once started, and of their heap (VmData).

Run from the build tree: RTUGW_BIN=./rtugw /usr/bin/python3 bench/map.py"""
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
import multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import Gateway, wait_for  # noqa: E402

ROUNDS, ROUND_S, CLIENTS, DEPTH, N = 9, 1.5, 3, 16, 64


def client(port, unit, seconds, out):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = b"".join(struct.pack(">HHHBBHH", t, 0, 6, unit, 3, 0, N) for t in range(DEPTH))
    answer = 9 + 2 * N
    done, t_end = 0, time.monotonic() + seconds
    try:
        done = pipeline(s, unit, req, answer, t_end)
    finally:
        out.put(done)


def pipeline(s, unit, req, answer, t_end):
    done = 0
    while time.monotonic() < t_end:
        s.sendall(req)
        want, got = answer * DEPTH, 0
        while got < want:
            b = s.recv(want - got)
            if not b:
                raise SystemExit("closed")
            if got == 0 and b[7] & 0x80:
                raise SystemExit(f"exception {b[8]:#x} for unit {unit}")
            got += len(b)
        done += DEPTH
    return done


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run(g, unit):
    q = mp.Queue()
    ps = [mp.Process(target=client, args=(g.tcp_port, unit, ROUND_S, q)) for _ in range(CLIENTS)]
    c0, t0 = cpu_s(g.p.pid), time.monotonic()
    for p in ps:
        p.start()
    n = sum(q.get(timeout=ROUND_S + 20) for _ in ps)
    for p in ps:
        p.join()
    dt, dc = time.monotonic() - t0, cpu_s(g.p.pid) - c0
    return n / dt, dc / n * 1e6


def pct(xs):
    q = statistics.quantiles(xs, n=10)
    return f"median {statistics.median(xs):9.1f}  p10 {q[0]:9.1f}  p90 {q[-1]:9.1f}"


def throughput():
    d = tempfile.mkdtemp(prefix="rtugw-map-bench-")
    tags = "".join(f"[tag t{k}]\ndevice = d1\ntable = holding\naddress = {2 * k}\ntype = float32\n"
                   f"interval_ms = 200\n" for k in range(N // 2))
    with open(f"{d}/map.csv", "w") as f:
        f.write("name,table,address,type,order\n" + "".join(f"t{k},holding,{2 * k},float32,CDAB\n"
                                                          for k in range(N // 2)))
    devices = (f"[device d1]\nslave = 1\n[poll cached]\ndevice = d1\nfunction = 3\naddress = 0\ncount = {N}\n"
               f"interval_ms = 200\nserve_cached_ms = 600000\n" + tags)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=devices, dir=d, timeout_ms=300, log_level="warn",
                extra="[map bench]\nunit = 100\nregisters = map.csv\nstale = last\n")
    import json, urllib.request
    assert wait_for(lambda: all(t["quality"] == "good" for t in json.loads(urllib.request.urlopen(
        f"http://127.0.0.1:{g.http_port}/tags").read())["tags"]), 10), "tags good"
    rate, cost = {1: [], 100: []}, {1: [], 100: []}
    for r in range(ROUNDS):
        for unit in ((1, 100) if r % 2 == 0 else (100, 1)):
            a, c = run(g, unit)
            rate[unit].append(a)
            cost[unit].append(c)
    g.stop()
    print(f"reads of {N} registers, {CLIENTS} clients x {DEPTH} pipelined, {ROUNDS} rounds of {ROUND_S} s each kind:")
    for unit, name in ((1, "cached [tcp] (unit 1)"), (100, "map (unit 100)       ")):
        print(f"  {name} answers/s {pct(rate[unit])}   daemon CPU us/answer {pct(cost[unit])}")
    ratios = [m / c for m, c in zip(rate[100], rate[1])]
    cratios = [c / m for m, c in zip(cost[100], cost[1])]
    print(f"  map / cached, per round: answers/s {pct(ratios)}; cost (cached/map) {pct(cratios)}")
    return {"map_rps": statistics.median(rate[100]), "cached_rps": statistics.median(rate[1]),
            "map_per_cached": statistics.median(ratios)}


def status_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def memory():
    out = {}
    for with_map in (False, True):
        d = tempfile.mkdtemp(prefix="rtugw-map-mem-")
        with open(f"{d}/tags.csv", "w") as f:
            f.write("name,table,address,type,interval_ms\n" +
                    "".join(f"r{a},holding,{a},uint16,86400000\n" for a in range(10000)))
        with open(f"{d}/map.csv", "w") as f:
            f.write("name,table,address,type\n" + "".join(f"r{a},holding,{a},uint16\n" for a in range(10000)))
        extra = "[map big]\nunit = 100\nregisters = map.csv\n" if with_map else ""
        g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device d1]\nslave = 1\ntags_file = tags.csv\n",
                    dir=d, timeout_ms=300, log_level="warn", extra=extra)
        time.sleep(2)
        out[with_map] = (status_kib(g.p.pid, "VmRSS"), status_kib(g.p.pid, "VmData"))
        if with_map:
            s = socket.create_connection(("127.0.0.1", g.tcp_port))
            s.sendall(struct.pack(">HHHBBHH", 1, 0, 6, 100, 3, 9990, 10))
            ok = s.recv(64)
            assert len(ok) == 9 + 20 or ok[7] & 0x80, ok   # served (0B: not read yet)
        g.stop()
    print(f"10,000 tags (uint16), without and with a map of all 10,000 registers: VmRSS {out[False][0]} -> "
          f"{out[True][0]} KiB (+{out[True][0] - out[False][0]} KiB), VmData {out[False][1]} -> {out[True][1]} KiB "
          f"(+{out[True][1] - out[False][1]} KiB)")


if __name__ == "__main__":
    if "--smoke" in sys.argv[1:]:   # make check (tests/bench/test_bench_smoke.sh): two short rounds, the shape
        ROUNDS, ROUND_S = 2, 0.3
        figures = throughput()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import smoke
        smoke.check("map.py", figures, ["map_rps", "cached_rps", "map_per_cached"],
                    at_least={"map_rps": 1, "cached_rps": 1})
    else:
        throughput()
        memory()
