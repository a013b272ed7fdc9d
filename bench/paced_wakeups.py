#!/usr/bin/python3
"""Wake-ups and CPU per poll of a paced serial line, arms side by side.

    bench/paced_wakeups.py [--arm LABEL=PATH]... [--rounds N] [--seconds S]
                           [--baud B] [--count N] [--interval-ms MS] [--unpaced]

Each arm is an rtugw binary. Per round and arm (interleaved, so a drift of
the machine hits them alike): `rtugw sim --pace --baud B --format 8E1
--slaves 1` on a pseudo-terminal (the arms' own sim, so its pacing is the
arm's), then `rtugw run` on that pty with one device polled for --count
holding registers every --interval-ms. After 1.5 s of settling, for
--seconds: the gateway process's context switches (voluntary +
involuntary, summed over /proc/PID/task/*/status: every time one of its
threads went to sleep or was preempted, i.e. its wake-ups) and its CPU
(/proc/PID/task/*/schedstat), divided by the polls answered in the window
(/status: the bus's responses). The bus's CRC errors and timeouts over
the window are reported beside: a cheaper poll that loses answers is no
gain. Reported per arm: median (p10-p90) over the rounds.
"""
import argparse
import glob
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def proc_counts(pid):
    switches = cpu_ns = 0
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            with open(task + "/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        switches += int(line.split()[1])
            with open(task + "/schedstat") as f:
                cpu_ns += int(f.read().split()[0])
        except OSError:
            pass
    return switches, cpu_ns


def bus_status(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/status" % http, timeout=5) as r:
        b = json.load(r)["buses"][0]
    return b["responses"], b["crc_errors"], b["timeouts"]


def one_round(path, a):
    pace = [] if a.unpaced else ["--pace"]
    sim = subprocess.Popen([path, "sim"] + pace + ["--baud", str(a.baud), "--format", "8E1", "--slaves", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pty = sim.stdout.readline().strip()
    tcp, http = free_port(), free_port()
    cfg = ("[gateway]\nlog_level = warn\n[bus b0]\nport = %s\nbaud = %d\nparity = even\n"
           "[device d1]\nbus = b0\nslave = 1\n[poll p1]\ndevice = d1\nfunction = 3\naddress = 0\n"
           "count = %d\ninterval_ms = %d\n[tcp]\nbind = 127.0.0.1\nport = %d\n"
           "[http]\nbind = 127.0.0.1\nport = %d\n" % (pty, a.baud, a.count, a.interval_ms, tcp, http))
    cpath = "/tmp/paced_wakeups_%d.ini" % os.getpid()
    with open(cpath, "w") as f:
        f.write(cfg)
    gw = subprocess.Popen([path, "run", "-c", cpath], stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        r0, c0, t0 = bus_status(http)
        s0, n0 = proc_counts(gw.pid)
        time.sleep(a.seconds)
        s1, n1 = proc_counts(gw.pid)
        r1, c1, t1 = bus_status(http)
        wrong = smoke.wrong_reads(tcp, 1, 1, a.count) if a.smoke else 0
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=10)
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)
        os.unlink(cpath)
    polls = max(r1 - r0, 1)
    return {"wakeups_per_poll": (s1 - s0) / polls, "cpu_us_per_poll": (n1 - n0) / 1000.0 / polls,
            "polls": r1 - r0, "crc_errors": c1 - c0, "timeouts": t1 - t0, "wrong": wrong}


def spread(v):
    v = sorted(v)
    q = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]
    return "%.1f (%.1f-%.1f)" % (statistics.median(v), q(0.1), q(0.9))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--baud", type=int, default=9600)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--unpaced", action="store_true",
                    help="the simulator answers at once, not at the wire's pace (issue 29's CPU per unpaced poll)")
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one round of 2 s; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.arm, a.rounds, a.seconds = a.arm[:1], 1, 2.0
    arms = [x.split("=", 1) for x in (a.arm or ["rtugw=./rtugw"])]
    res = {label: [] for label, _ in arms}
    for _ in range(a.rounds):
        for label, path in arms:
            res[label].append(one_round(path, a))
    for label, rs in res.items():
        print("%-8s wake-ups/poll %s  CPU us/poll %s  polls %d  CRC errors %d  timeouts %d" % (
            label, spread([r["wakeups_per_poll"] for r in rs]), spread([r["cpu_us_per_poll"] for r in rs]),
            sum(r["polls"] for r in rs), sum(r["crc_errors"] for r in rs), sum(r["timeouts"] for r in rs)))
    if a.smoke:
        r = next(iter(res.values()))[0]
        smoke.check("paced_wakeups.py", r, ["wakeups_per_poll", "cpu_us_per_poll", "polls", "crc_errors", "timeouts"],
                    wrong=r["wrong"], at_least={"polls": 1})
    return 0


if __name__ == "__main__":
    sys.exit(main())
