#!/usr/bin/python3
"""Four paced buses while other processes keep every core busy (issue 29).

    bench/machine_load.py [--arm LABEL=PATH]... [--rounds N] [--seconds S] [--hogs N]

One gateway per arm and round: four buses, each `rtugw sim --pace --baud
9600 --format 8E1 --slaves 1..10` on a pseudo-terminal, its 10 slaves each
polled for 10 holding registers every 1 s. Per round and arm (interleaved):
--seconds with the machine otherwise idle, then --seconds with --hogs busy
loops (default: one per core; processes of their own at normal priority,
as `stress-ng --cpu N` runs them). Reported per arm and phase, summed over
the rounds and the four buses: polls sent, CRC errors and timeouts
(/status), and the poll latency p50/p99 of the buses (the worst bus), so
that what the load cost shows even where no frame was lost. The
simulators send only good frames at the paced wire speed: any CRC error or
timeout is the gateway misjudging the wire under the load.
"""
import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict

BUSES = 4


def status(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/status" % http, timeout=10) as r:
        return json.load(r)["buses"]


def totals(http):
    bs = status(http)
    return [sum(b["requests"] for b in bs), sum(b["crc_errors"] for b in bs), sum(b["timeouts"] for b in bs)]


def hog(stop_at):
    x = 0
    while time.time() < stop_at:
        for _ in range(100000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def one_round(path, a):
    sims, text = [], "[gateway]\nlog_level = warn\n"
    for b in range(BUSES):
        sim = subprocess.Popen([path, "sim", "--pace", "--baud", "9600", "--format", "8E1", "--slaves",
                                ",".join(str(s) for s in range(1, 11))],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sims.append(sim)
        text += "[bus b%d]\nport = %s\nbaud = 9600\nparity = even\n" % (b, sim.stdout.readline().strip())
        for s in range(1, 11):
            text += ("[device p%d_%d]\nbus = b%d\nslave = %d\ndead_after = 0\n[poll g%d_%d]\ndevice = p%d_%d\n"
                     "function = 3\naddress = 0\ncount = 10\ninterval_ms = 1000\n" % (b, s, b, s, b, s, b, s))
    tcp, http = free_port(), free_port()
    text += "[tcp]\nbind = 127.0.0.1\nport = %d\ndefault_bus = b0\n[http]\nbind = 127.0.0.1\nport = %d\n" % (tcp, http)
    fd, cpath = tempfile.mkstemp(suffix=".ini")
    os.write(fd, text.encode())
    os.close(fd)
    gw = subprocess.Popen([path, "run", "-c", cpath], stderr=subprocess.DEVNULL)
    out = {}
    try:
        time.sleep(2.5)
        q0 = totals(http)
        time.sleep(a.seconds)
        q1 = totals(http)
        lat_idle = max((b["latency_p50_ms"] or 0, b["latency_p99_ms"] or 0) for b in status(http))
        stop_at = time.time() + a.seconds
        hogs = [multiprocessing.Process(target=hog, args=(stop_at,)) for _ in range(a.hogs)]
        for h in hogs:
            h.start()
        for h in hogs:
            h.join()
        q2 = totals(http)
        lat_load = max((b["latency_p50_ms"] or 0, b["latency_p99_ms"] or 0) for b in status(http))
        out["idle"] = [q1[i] - q0[i] for i in range(3)] + list(lat_idle)
        out["hogs"] = [q2[i] - q1[i] for i in range(3)] + list(lat_load)
        if a.smoke:   # answers through the gateway, checked against the simulator's values
            out["wrong"] = smoke.wrong_reads(tcp, 1, 1)
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=20)
        for sim in sims:
            sim.send_signal(signal.SIGTERM)
            sim.wait(timeout=10)
        os.unlink(cpath)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one round of 2 s phases, one busy loop; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.arm, a.rounds, a.seconds, a.hogs = a.arm[:1], 1, 2.0, 1
    wrong = 0
    arms = [x.split("=", 1) for x in (a.arm or ["rtugw=./rtugw"])]
    tot = {label: {"idle": [0, 0, 0, 0.0, 0.0], "hogs": [0, 0, 0, 0.0, 0.0]} for label, _ in arms}
    for _ in range(a.rounds):
        for label, path in arms:
            r = one_round(path, a)
            wrong += r.pop("wrong", 0)
            for ph in r:
                t = tot[label][ph]
                tot[label][ph] = [t[0] + r[ph][0], t[1] + r[ph][1], t[2] + r[ph][2],
                                  max(t[3], r[ph][3]), max(t[4], r[ph][4])]
    print("%d paced buses (9600 8E1, 10 slaves polled every 1 s each), %d round(s) of %.0f s per phase, "
          "%d busy loops" % (BUSES, a.rounds, a.seconds, a.hogs))
    print("arm       phase   polls  CRC errors  timeouts  latency p50 / p99 ms (worst bus, cumulative)")
    for label, phases in tot.items():
        for ph, v in phases.items():
            print("%-9s %-6s %6d %11d %9d  %6.1f / %6.1f" % (label, ph, v[0], v[1], v[2], v[3], v[4]))
    if a.smoke:
        v = next(iter(tot.values()))
        figures = {"%s.%s" % (ph, k): v[ph][i] for ph in v
                   for i, k in enumerate(("polls", "crc_errors", "timeouts", "p50_ms", "p99_ms"))}
        smoke.check("machine_load.py", figures, sorted(figures), wrong=wrong,
                    at_least={"idle.polls": 1, "hogs.polls": 1})
    return 0


if __name__ == "__main__":
    sys.exit(main())
