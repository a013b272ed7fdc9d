#!/usr/bin/env python3
"""What each added bus costs in memory (issue 45: "Footprint does not pay for it").

For each arm (an rtugw binary) and each bus count N (1, 16, 32, 64 by default),
one `rtugw run` with N buses is started, and after --settle seconds its Pss
and RssAnon are read from /proc/PID/smaps_rollup and /proc/PID/status. Two
modes:

  idle    every bus on `port = tcp://127.0.0.1:9` (nothing listens: the bus
          reconnects now and then and never talks);
  loaded  every bus on `port = tcp://127.0.0.1:P`, `framing = tcp`, where P is
          ONE external `rtugw run` acting as a Modbus TCP device server (its bus
          the built-in simulator, slave 1), with a poll group per bus (function
          3, bus i reads 4 registers at address 2*i every 250 ms; the server's
          simulator at 921600 baud takes 64 buses' polls with room). After the
          reading, /status is fetched and every group must have a good poll
          and hold the simulator's values (slave*1000 + address, fixed
          for holding registers: drivers/sim.c driver_sim_pattern); any wrong or
          missing value fails the run (exit 1). Failed polls (a timeout on a
          loaded machine) are counted and reported, not a wrong value.

Per round, the slope (KiB per bus) is the least-squares fit of the figure
against N; the report gives, per arm and mode, the median and p10-p90 over the
rounds of the slope, of the intercept (the base at 0 buses) and of the figure
at each N. Arms are interleaved one start at a time, so a machine whose load
moves treats them alike.

  bench/bus_footprint.py --arm before=/path/rtugw --arm after=./rtugw --rounds 5
  bench/bus_footprint.py --smoke           # 1 and 4 buses, 1 round (make check)
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from footprint import free_port, spread as spread3  # noqa: E402 (bench/footprint.py, its neighbour)


def kib(path, key):
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in {path}")


def wait_port(port, proc, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"rtugw exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def server_config(port):
    return ("[gateway]\nlog_level = warn\n[bus sim]\nport = sim:1\nbaud = 921600\ngap_us = 1\n"
            f"[tcp]\nbind = 127.0.0.1\nport = {port}\ndefault_bus = sim\nmax_clients = 256\n"
            "[http]\nenabled = false\n")


def gateway_config(n, mode, server_port, tcp, http):
    out = ["[gateway]\nlog_level = warn\n"]
    for i in range(n):
        if mode == "idle":
            out.append(f"[bus b{i}]\nport = tcp://127.0.0.1:9\n")
        else:
            out.append(f"[bus b{i}]\nport = tcp://127.0.0.1:{server_port}\nframing = tcp\n"
                       f"[device d{i}]\nbus = b{i}\nslave = 1\n"
                       f"[poll p{i}]\ndevice = d{i}\nfunction = 3\naddress = {2 * i}\ncount = 4\n"
                       "interval_ms = 250\n")
    out.append(f"[tcp]\nbind = 127.0.0.1\nport = {tcp}\n[http]\nbind = 127.0.0.1\nport = {http}\n")
    return "".join(out)


def check_polls(http, n):
    """Every group polled, each holding the simulator's values; failed polls counted."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/status", timeout=5) as r:
        st = json.load(r)
    polls = {p["name"]: p for p in st["polls"]}
    bad = []
    for i in range(n):
        p = polls.get(f"p{i}")
        want = [1000 + 2 * i + k for k in range(4)]
        if not p or not p["ok"] or p["polls"] < 1 or p["values"] != want:
            bad.append((f"p{i}", p and {k: p[k] for k in ("ok", "polls", "failures", "values")}, want))
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} poll groups wrong: {bad[:3]}")
    return (sum(polls[f"p{i}"]["polls"] for i in range(n)), sum(polls[f"p{i}"]["failures"] for i in range(n)))


def measure(binary, n, mode, server_port, settle, workdir):
    tcp, http = free_port(), free_port()
    cfg = os.path.join(workdir, f"gw-{mode}-{n}.ini")
    with open(cfg, "w") as f:
        f.write(gateway_config(n, mode, server_port, tcp, http))
    p = subprocess.Popen([binary, "run", "-c", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(http, p)
        time.sleep(settle)
        if p.poll() is not None:
            raise RuntimeError(f"rtugw exited with {p.returncode}")
        pss = kib(f"/proc/{p.pid}/smaps_rollup", "Pss")
        anon = kib(f"/proc/{p.pid}/status", "RssAnon")
        rss = kib(f"/proc/{p.pid}/status", "VmRSS")
        polls, failures = check_polls(http, n) if mode == "loaded" else (0, 0)
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    if p.returncode not in (0, -15):
        raise RuntimeError(f"rtugw ended with {p.returncode}: {err.decode(errors='replace')[-500:]}")
    return {"pss": pss, "anon": anon, "rss": rss, "polls": polls, "failures": failures}


def fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def spread(v):
    med, p10, p90 = spread3(v)
    return {"median": med, "p10": p10, "p90": p90}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", action="append", default=[], help="LABEL=PATH of an rtugw binary (default: ./rtugw)")
    ap.add_argument("--server", help="rtugw binary for the Modbus TCP device server (default: the first arm's)")
    ap.add_argument("--buses", default="1,16,32,64", help="bus counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settle", type=float, default=1.5, help="seconds between start and reading")
    ap.add_argument("--modes", default="idle,loaded")
    ap.add_argument("--smoke", action="store_true", help="1 and 4 buses, 1 round, settle 1 s")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.buses, a.rounds, a.settle = "1,4", 1, 1.0
    arms = [tuple(x.split("=", 1)) for x in a.arm] or [("rtugw", "./rtugw")]
    counts = [int(x) for x in a.buses.split(",")]
    modes = a.modes.split(",")
    if len(set(counts)) < 2 or any(m not in ("idle", "loaded") for m in modes):
        ap.error("at least two bus counts; modes idle and/or loaded")
    server_bin = a.server or arms[0][1]

    raw = {(lab, m): [] for lab, _ in arms for m in modes}   # per round: {n: figures}
    with tempfile.TemporaryDirectory() as wd:
        srv = None
        sport = free_port()
        if "loaded" in modes:
            # A copy of the binary: its file pages are then no arm's, and
            # no arm's Pss is halved by sharing them with the server.
            shutil.copy(server_bin, os.path.join(wd, "rtugw-server"))
            server_bin = os.path.join(wd, "rtugw-server")
            with open(os.path.join(wd, "server.ini"), "w") as f:
                f.write(server_config(sport))
            srv = subprocess.Popen([server_bin, "run", "-c", os.path.join(wd, "server.ini")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_port(sport, srv)
        try:
            for rnd in range(a.rounds):
                for m in modes:
                    for lab, binary in arms:
                        row = {n: measure(binary, n, m, sport, a.settle, wd) for n in counts}
                        raw[(lab, m)].append(row)
                        if not a.json:
                            print(f"round {rnd + 1} {lab} {m}: " +
                                  ", ".join(f"{n}: Pss {r['pss']} anon {r['anon']}" for n, r in row.items()),
                                  file=sys.stderr, flush=True)
        finally:
            if srv:
                srv.terminate()
                srv.wait(timeout=10)

    report = {"buses": counts, "rounds": a.rounds, "settle_s": a.settle, "results": []}
    for lab, _ in arms:
        for m in modes:
            rows = raw[(lab, m)]
            res = {"arm": lab, "mode": m, "polls": sum(r[n]["polls"] for r in rows for n in counts),
                   "failed_polls": sum(r[n]["failures"] for r in rows for n in counts)}
            for key in ("pss", "anon"):
                fits = [fit(counts, [r[n][key] for n in counts]) for r in rows]
                res[key] = {"slope_kib_per_bus": spread([f[0] for f in fits]),
                            "base_kib": spread([f[1] for f in fits]),
                            "at": {str(n): spread([r[n][key] for r in rows]) for n in counts}}
            res["rss_at"] = {str(n): spread([r[n]["rss"] for r in rows]) for n in counts}
            report["results"].append(res)
    if a.json:
        print(json.dumps(report, indent=1))
        return
    f = lambda s: f"{s['median']:.1f} ({s['p10']:.1f}-{s['p90']:.1f})"
    print(f"buses {counts}, {a.rounds} rounds, read {a.settle} s after start; KiB, median (p10-p90)")
    print("| arm | mode | polls (failed) | Pss KiB/bus | RssAnon KiB/bus | Pss base | " +
          " | ".join(f"Pss at {n}" for n in counts) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(counts))
    for r in report["results"]:
        print(f"| {r['arm']} | {r['mode']} | {r['polls']} ({r['failed_polls']}) | {f(r['pss']['slope_kib_per_bus'])} | "
              f"{f(r['anon']['slope_kib_per_bus'])} | {f(r['pss']['base_kib'])} | " +
              " | ".join(f"{r['pss']['at'][str(n)]['median']:.0f}" for n in counts) + " |")


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print(f"bus_footprint: {e}", file=sys.stderr)
        sys.exit(1)
