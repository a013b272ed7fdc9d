#!/usr/bin/python3
"""bench/overload.py -- overload without collapse (issue 30): more Modbus TCP
masters than the serial lines can serve.

One gateway per run, 4 simulated buses (sim:1,2,3 at 19200 baud, the default
queue_depth 64), units 1..4 routed to slave 1 of bus 0..3. In the same run:

  phase 10     10 looping clients (each: read, wait for the answer, read again)
  phase 1000   1,000 looping clients (a client answered exception 06 asks again
               at once, as a looping script does)
  solo         a priority master (from 127.0.0.2) alone, reading bus 0
  flood        the same master while 1,000 looping clients read bus 0

Per phase: real answers/s, exceptions 06 as a share of answers, the
gateway's CPU (utime + stime of its process) per real answer, Jain's
fairness index of per-client answers on each bus (min over buses), clients
that got no answer (stalls); for the master its rate and p99 latency.
--runs N repeats the whole run and prints median and p10-p90 of each figure.

The machine is shared: the figures are for comparing builds side by side
in the same conditions (--bin), never for tests.

  /usr/bin/python3 bench/overload.py --bin ./rtugw --bin /work/base/rtugw --runs 3
"""
import argparse
import asyncio
import multiprocessing
import os
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict

BUSES = 4


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1


def knows_priority(binary):
    """A build without [tcp] priority_clients (main before issue 30) refuses the key."""
    return b"priority_clients" in open(binary, "rb").read()


def start(binary):
    tcp, http = free_port(), free_port()
    d = tempfile.mkdtemp(prefix="rtugw-overload-")
    buses = "".join(f"[bus b{b}]\nport = sim:1,2,3\nbaud = 19200\nresponse_timeout_ms = 200\n" for b in range(BUSES))
    routes = "".join(f"unit{b + 1} = b{b}:1\n" for b in range(BUSES))
    prio = "priority_clients = 127.0.0.2/32\n" if knows_priority(binary) else ""
    cfg = os.path.join(d, "rtugw.conf")
    with open(cfg, "w") as f:
        f.write(f"[gateway]\nlog_level = warn\n{buses}[tcp]\nport = {tcp}\nmax_clients = 1024\n"
                f"idle_timeout_s = 0\ndefault_bus = b0\n{routes}{prio}[http]\nport = {http}\n")
    log = open(os.path.join(d, "log"), "w")
    p = subprocess.Popen([binary, "run", "-c", cfg], stdout=log, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", tcp), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    time.sleep(0.3)
    return p, tcp


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def looping_client(port, unit, stop_at, out, src="127.0.0.1", lat=None):
    try:
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind((src, 0))
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        r, w = await asyncio.open_connection(sock=sock)
    except OSError:
        out["refused"] += 1
        return
    tid, answers, busy, wrong = 0, 0, 0, 0
    try:
        while time.time() < stop_at:
            tid = (tid + 1) & 0xFFFF
            addr = tid % 100
            t0 = time.time()
            w.write(struct.pack(">HHHBB", tid, 0, 6, unit, 3) + struct.pack(">HH", addr, 1))
            head = await asyncio.wait_for(r.readexactly(7), 30)
            body = await r.readexactly(struct.unpack(">H", head[4:6])[0] - 1)
            if body[0] == 0x83:
                busy += body[1] == 6
            elif struct.unpack(">H", head[:2])[0] != tid or body != bytes([3, 2]) + struct.pack(">H", 1000 + addr):
                wrong += 1
            else:
                answers += 1
                if lat is not None:
                    lat.append(time.time() - t0)
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
        out["broken"] += 1
    w.close()
    out["answers"].append((unit, answers))
    out["busy"] += busy
    out["wrong"] += wrong


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else 0.0


def master_process(port, seconds, q):
    """The priority master in a process of its own: in the flood's event loop
    its turnaround would wait for 1,000 other coroutines, which measures the
    bench, not the gateway."""
    mout = {"answers": [], "busy": 0, "wrong": 0, "broken": 0, "refused": 0}
    lat = []
    t0 = time.time()
    asyncio.run(looping_client(port, 1, t0 + seconds, mout, "127.0.0.2", lat))
    q.put((mout, lat, time.time() - t0))


async def phase(port, pid, clients, seconds, units, master=False):
    """clients looping clients spread over units; master: a priority master on unit 1 too."""
    out = {"answers": [], "busy": 0, "wrong": 0, "broken": 0, "refused": 0}
    mout = {"answers": [], "busy": 0, "wrong": 0, "broken": 0, "refused": 0}
    lat, mdt = [], 0.0
    stop_at = time.time() + seconds
    c0, t0 = cpu_s(pid), time.time()
    tasks = [looping_client(port, units[k % len(units)], stop_at, out) for k in range(clients)]
    if master:
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=master_process, args=(port, seconds, q))
        proc.start()
    await asyncio.gather(*tasks)
    if master:
        mout, lat, mdt = await asyncio.get_running_loop().run_in_executor(None, q.get)
        proc.join()
    dt, cpu = time.time() - t0, cpu_s(pid) - c0
    total = sum(a for _, a in out["answers"]) + sum(a for _, a in mout["answers"])
    per_bus = [[a for u, a in out["answers"] if u == b + 1] for b in range(BUSES)]
    res = {"answers_s": total / dt, "ex06_pct": 100.0 * out["busy"] / max(total, 1),
           "cpu_ms_per_answer": 1000.0 * cpu / max(total, 1),
           "jain_min": min(jain(x) for x in per_bus if x) if any(per_bus) else 0.0,
           "stalled": sum(1 for _, a in out["answers"] if a == 0) + out["refused"],
           "wrong": out["wrong"] + mout["wrong"]}
    if master:
        lat.sort()
        # over the master's own time: its process starts later than the
        # flood (a spawned interpreter), and the phase's dt includes that
        res["master_rate_s"] = len(lat) / mdt if mdt else 0.0
        res["master_p99_ms"] = 1000.0 * lat[int(0.99 * (len(lat) - 1))] if lat else float("inf")
        res["master_06"] = mout["busy"]
    return res


async def one_run(binary, seconds, flood=1000):
    p, port = start(binary)
    try:
        all_units = list(range(1, BUSES + 1))
        r = {"10": await phase(port, p.pid, 10, seconds, all_units),
             "1000": await phase(port, p.pid, flood, seconds, all_units)}
        await asyncio.sleep(1.0)   # the 1,000's last requests drain
        r["solo"] = await phase(port, p.pid, 0, seconds, [1], master=True)
        r["flood"] = await phase(port, p.pid, flood, seconds, [1], master=True)
        return r
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def spread(xs):
    xs = sorted(xs)
    q = lambda f: xs[min(len(xs) - 1, int(round(f * (len(xs) - 1))))]  # noqa: E731
    return f"{statistics.median(xs):10.3f} [{q(0.1):.3f}-{q(0.9):.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", help="rtugw binary (repeatable, side by side)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one run of 1 s phases, 100 clients for the 1,000; checks the output, not the figures")
    a = ap.parse_args()
    flood = 1000
    if a.smoke:
        a.runs, a.seconds, flood = 1, 1.0, 100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    for binary in a.bin or ["./rtugw"]:
        runs = [asyncio.run(one_run(binary, a.seconds, flood)) for _ in range(a.runs)]
        print(f"== {binary}: {a.runs} runs of {a.seconds:.0f} s per phase; median [p10-p90]")
        for ph in runs[0]:
            for k in runs[0][ph]:
                print(f"  {ph:>6} {k:<20}{spread([r[ph][k] for r in runs])}")
        sys.stdout.flush()
        if a.smoke:
            r = runs[0]
            figures = {f"{ph}.{k}": v for ph in r for k, v in r[ph].items() if k != "wrong"}
            smoke.check("overload.py", figures, sorted(figures), wrong=sum(r[ph]["wrong"] for ph in r),
                        at_least={"10.answers_s": 1, "1000.answers_s": 1, "solo.master_rate_s": 1})


if __name__ == "__main__":
    main()
