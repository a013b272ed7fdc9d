#!/usr/bin/python3
"""What waking a sleeping thread costs on this machine: the floor under each of
the gateway's thread hops (docs/bench-wire.md).

    bench/wakeup.py [--gap-us US] [--count N] [--rounds N] [--cpu-latency US] [--json] [--smoke]

Two processes, each held to one CPU (sched_setaffinity): the sender sleeps
--gap-us (default 2000 us, a paced read's wait at 115200 baud, so that the
receiver has slept long enough for its CPU to go idle, as the gateway's I/O
thread does while a line answers), then writes its CLOCK_MONOTONIC time into a
pipe; the receiver, blocked in read(), takes the time it woke and the
difference is one wake-up (the pipe's write, the scheduler, and on a virtual
machine the idle CPU's own wake). Three arms, alternating in rounds: both
processes on one CPU; on two (the receiver's CPU idle until woken, as when
the line thread posts an answer to the I/O thread on the other core); and on
two with a SCHED_IDLE spinner on the receiver's CPU, which keeps that CPU
from idling and yields to the receiver at once: the idle CPU's share of the
second arm is what this one saves. With --cpu-latency US a fourth arm: on two
CPUs with a CPU latency request of US held (/dev/cpu_dma_latency, root's:
what rtugw's [gateway] cpu_latency_us holds) for that arm's wake-ups only.
Reported per arm: the wake-up's median and p10-p90 over every wake, in us.
"""
import argparse
import json
import os
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def spinner(cpu):
    """A process spinning on cpu at SCHED_IDLE: the CPU never idles, and any other thread there preempts it."""
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        while True:
            pass
    return pid


def hold_cpu_latency(us):
    """A CPU latency request of us held while the descriptor returned is open."""
    fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    os.write(fd, struct.pack("i", us))
    return fd


def one_arm(cpu_send, cpu_recv, count, gap_s, awake, hold=None):
    """count wake-ups of a receiver on cpu_recv by a sender on cpu_send (awake:
    a SCHED_IDLE spinner keeps the receiver's CPU from idling; hold: a CPU
    latency request of that many us held meanwhile): their latencies in ns."""
    spin = spinner(cpu_recv) if awake else None
    held = hold_cpu_latency(hold) if hold is not None else None
    data_r, data_w = os.pipe()
    back_r, back_w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the receiver
        os.close(data_w)
        os.close(back_r)
        os.sched_setaffinity(0, {cpu_recv})
        out = []
        os.write(back_w, b"r")   # held to its CPU: the sender may begin
        for _ in range(count):
            sent = struct.unpack("q", os.read(data_r, 8))[0]
            out.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC) - sent)
        os.write(back_w, struct.pack("%dq" % count, *out))
        os._exit(0)
    os.close(data_r)
    os.close(back_w)
    os.sched_setaffinity(0, {cpu_send})
    os.read(back_r, 1)
    for _ in range(count):
        time.sleep(gap_s)
        os.write(data_w, struct.pack("q", time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
    want, got = 8 * count, b""
    while len(got) < want:
        chunk = os.read(back_r, want - len(got))
        if not chunk:
            break
        got += chunk
    os.waitpid(pid, 0)
    if spin:
        os.kill(spin, 9)
        os.waitpid(spin, 0)
    if held is not None:
        os.close(held)
    os.close(data_w)
    os.close(back_r)
    if len(got) != want:
        sys.exit("wakeup: the receiver returned %d of %d bytes" % (len(got), want))
    return list(struct.unpack("%dq" % count, got))


def spread(ns):
    us = sorted(v / 1000.0 for v in ns)
    q = statistics.quantiles(us, n=10)
    return {"median": statistics.median(us), "p10": q[0], "p90": q[-1], "wakes": len(us)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gap-us", type=int, default=2000, help="the sender's sleep before each wake-up (us)")
    ap.add_argument("--count", type=int, default=500, help="wake-ups per arm and round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--cpu-latency", type=int, metavar="US", help="a fourth arm: a CPU latency request of US held")
    ap.add_argument("--json", action="store_true", help="one JSON object, not a table")
    ap.add_argument("--smoke", action="store_true", help="one short round, checked (tests/bench/test_bench_smoke.sh)")
    a = ap.parse_args()
    if a.smoke:
        a.count, a.rounds = 50, 1
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("wakeup: needs two CPUs in its affinity, has %d" % len(cpus))
    arms = {"same CPU": (cpus[0], cpus[0], False, None), "other CPU": (cpus[0], cpus[1], False, None),
            "other CPU, kept awake": (cpus[0], cpus[1], True, None)}
    if a.cpu_latency is not None:
        if not 0 <= a.cpu_latency <= 1000000:
            sys.exit("wakeup: --cpu-latency: 0..1000000 us")
        try:
            os.close(hold_cpu_latency(a.cpu_latency))
        except OSError as e:
            sys.exit("wakeup: --cpu-latency: /dev/cpu_dma_latency: %s (root's)" % e.strerror)
        arms["other CPU, %d us held" % a.cpu_latency] = (cpus[0], cpus[1], False, a.cpu_latency)
    got = {k: [] for k in arms}
    for _ in range(a.rounds):
        for k, (s, r, awake, hold) in arms.items():
            got[k] += one_arm(s, r, a.count, a.gap_us / 1e6, awake, hold)
    res = {k: spread(v) for k, v in got.items()}
    if a.smoke:
        figures = {"%s.%s" % (k.replace(" ", "_").replace(",", ""), f): v[f] for k, v in res.items() for f in ("median", "p10", "p90")}
        smoke.check("wakeup.py", figures, sorted(figures),
                    wrong=sum(v["wakes"] != a.count * a.rounds or v["p10"] <= 0 for v in res.values()))
        return
    if a.json:
        print(json.dumps({"gap_us": a.gap_us, "arms": res}))
        return
    print("Wake-ups of a process blocked in read() for %d us, %d per arm (us, median p10-p90)\n"
          % (a.gap_us, a.count * a.rounds))
    print("| receiver | wake-up us |\n|---|---:|")
    for k, v in res.items():
        print("| %s | %.1f (%.1f-%.1f) |" % (k, v["median"], v["p10"], v["p90"]))


if __name__ == "__main__":
    main()
