#!/usr/bin/python3
"""bench/idle_conns.py -- many idle Modbus TCP connections (issue 30): what
each costs the daemon, and whether one active client still gets its answers
at once.

One gateway per run, one simulated bus (sim:1,2,3 at 115200 baud, so the
wire is not what is measured), max_clients = N + 64. In the same run:

  VmRSS per idle connection   N idle connections opened in 4 steps (in
                              batches of 100, each waited for in /metrics);
                              /proc/PID/status VmRSS at 0 and after each
                              step; the least-squares slope, KiB per
                              connection
  p50/p99 alone               one client reading 1 register, read after read
  p50/p99 with N idle         the same with the N idle connections open

--runs R repeats the whole run and prints median and p10-p90 of each
figure. A build that refuses max_clients above 1,024 (main before issue 30)
is measured with 1,000 idle connections instead, and says so.

The machine is shared: the figures are for comparing builds side by side in
the same conditions (--bin), never for tests.

  nice -n 15 /usr/bin/python3 bench/idle_conns.py --bin ./rtugw --bin /work/base/rtugw --runs 3
"""
import argparse
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def accepts(binary, clients):
    """Does this build take max_clients = clients? (rtugw check)"""
    d = tempfile.mkdtemp(prefix="rtugw-idle-")
    path = os.path.join(d, "c.ini")
    with open(path, "w") as f:
        f.write(f"[bus a]\nport = sim\n[tcp]\nmax_clients = {clients}\n")
    return subprocess.run([binary, "check", "-c", path], capture_output=True).returncode == 0


def start(binary, clients):
    tcp, http = free_port(), free_port()
    d = tempfile.mkdtemp(prefix="rtugw-idle-")
    path = os.path.join(d, "rtugw.conf")
    with open(path, "w") as f:
        f.write(f"[gateway]\nlog_level = warn\n[bus a]\nport = sim:1,2,3\nbaud = 115200\nresponse_timeout_ms = 200\n"
                f"[tcp]\nport = {tcp}\ndefault_bus = a\nmax_clients = {clients}\nmax_per_address = 0\n"
                f"idle_timeout_s = 0\n[http]\nport = {http}\n")
    log = open(os.path.join(d, "log"), "w")
    p = subprocess.Popen([binary, "run", "-c", path], stdout=log, stderr=log)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", tcp), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    time.sleep(0.3)
    return p, tcp, http


def active(http):
    text = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("rtugw_tcp_active "):
            return int(float(line.split()[1]))
    return -1


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def open_idle(port, http, socks, n):
    """n more idle connections, in batches the listen backlog takes."""
    target = len(socks) + n
    while len(socks) < target:
        for _ in range(min(100, target - len(socks))):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
        deadline = time.time() + 10
        while time.time() < deadline and active(http) < len(socks):
            time.sleep(0.02)


WRONG = [0]   # answers not of the read asked (its transaction id, function 3, 2 bytes)


def latencies(port, reads):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lat = []
    for k in range(reads):
        tid = k % 65536
        t0 = time.perf_counter()
        s.sendall(struct.pack(">HHHB", tid, 0, 6, 1) + bytes([3, 0, 0, 0, 1]))
        got = b""
        while len(got) < 11:
            chunk = s.recv(64)
            if not chunk:
                raise OSError("closed")
            got += chunk
        lat.append(time.perf_counter() - t0)
        if got[:2] != struct.pack(">H", tid) or got[7:9] != bytes([3, 2]):
            WRONG[0] += 1
    s.close()
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


def slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def one_run(binary, n, reads):
    p, port, http = start(binary, min(n + 64, 1024) if n <= 1000 else n + 64)
    try:
        alone = latencies(port, reads)
        socks, xs, ys = [], [0], [rss_kib(p.pid)]
        for _ in range(4):
            open_idle(port, http, socks, n // 4)
            time.sleep(0.2)
            xs.append(active(http))
            ys.append(rss_kib(p.pid))
        held = active(http)
        loaded = latencies(port, reads)
        for s in socks:
            s.close()
        return {"KiB per idle connection": slope(xs, ys), "idle connections held": held,
                "p50 ms alone": alone[0], "p99 ms alone": alone[1],
                f"p50 ms with {n} idle": loaded[0], f"p99 ms with {n} idle": loaded[1]}
    finally:
        p.terminate()
        p.wait(10)


def spread(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0]] * 9
    return f"{statistics.median(xs):.2f} [{q[0]:.2f}-{q[-1]:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", help="rtugw binary (repeatable, side by side)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one run, 200 idle connections, 50 reads; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.conns, a.reads = 1, 200, 50
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # the clients' side; the daemon inherits it
    for binary in a.bin or ["./rtugw"]:
        n = a.conns if accepts(binary, a.conns + 64) else 1000
        note = "" if n == a.conns else " (refuses max_clients over 1,024: 1,000 idle)"
        runs = [one_run(binary, n, a.reads) for _ in range(a.runs)]
        print(f"{binary}{note}: median [p10-p90] of {a.runs} runs")
        for key in runs[0]:
            print(f"  {key:32} {spread([r[key] for r in runs])}")
        if a.smoke:
            smoke.check("idle_conns.py", runs[0], list(runs[0]), wrong=WRONG[0],
                        at_least={"idle connections held": n})


if __name__ == "__main__":
    main()
