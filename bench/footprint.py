#!/usr/bin/python3
"""What an idle rtugw costs a small box: resident memory by mapping, and CPU.

    bench/footprint.py [--arm LABEL=PATH[,VAR=VALUE...]]... [--config FILE]
                       [--rounds N] [--settle S] [--idle S] [--json]

Each arm is an rtugw binary (default: ./rtugw) started as an operator does:
`rtugw demo --quiet` on free ports, or `rtugw run -c FILE` with --config
(the file's own ports are used as written). Arms are interleaved, one start
of each per round, so a drift of the machine hits them alike. After --settle
seconds (default 2) the script reads /proc/PID/status, /proc/PID/smaps and
smaps_rollup; with --idle S it then samples utime+stime (/proc/PID/stat) and
every thread's voluntary and nonvoluntary context switches
(/proc/PID/task/TID/status) at the start and the end of S seconds, and
reports the difference: CPU as a percentage of one core, and wake-ups per
second by thread name. Then SIGTERM, and the exit status must be 0.

Reported per arm: median (p10-p90) over the rounds of VmRSS, RssAnon,
RssFile, Pss, VmSize, the number of mappings, idle CPU and wake-ups, and the
median Rss (and its anonymous part) of each mapped file and of [heap],
[stack] and the anonymous mappings. Nothing here depends on gateway/: it only
reads /proc.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pctl(values, q):
    v = sorted(values)
    if not v:
        return 0
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def spread(values):
    return (statistics.median(values), pctl(values, 0.1), pctl(values, 0.9))


def status_fields(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmSize", "VmHWM", "RssAnon", "RssFile", "Threads"):
                out[key] = int(rest.split()[0])
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1])
    return out


def mapping_class(name, exe):
    if not name:
        return "[anon]"
    if name == exe:
        return "rtugw"
    if name.startswith("["):
        return name
    base = os.path.basename(name)
    return base.split(".so")[0] + ".so" if ".so" in base else base


def smaps_by_mapping(pid, exe):
    rss, anon = {}, {}
    count = 0
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 5)
            if "-" in first[0] and len(first) >= 5 and not first[0].endswith(":"):
                count += 1
                name = first[5].strip() if len(first) > 5 else ""
                cur = mapping_class(name, exe)
                rss.setdefault(cur, 0)
                anon.setdefault(cur, 0)
            elif first[0] == "Rss:":
                rss[cur] += int(first[1])
            elif first[0] == "Anonymous:":
                anon[cur] += int(first[1])
    return rss, anon, count


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])   # utime, stime (fields 14, 15)


def thread_switches(pid):
    out = {}
    for k, tid in enumerate(sorted(os.listdir(f"/proc/{pid}/task"), key=int)):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                text = f.read()
        except OSError:
            continue
        fields = dict(l.split(":", 1) for l in text.splitlines() if ":" in l)
        # Threads are unnamed (they all carry the program's name): the main
        # thread is the I/O thread; the others are numbered in creation order.
        name = "main" if int(tid) == pid else f"thread{k}"
        n = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
        out[tid] = (name, n)
    return out


def one_run(arm, args):
    env = dict(os.environ)
    env.update(arm["env"])
    if args.config:
        cmd = [arm["path"], "run", "-c", args.config]
    else:
        cmd = [arm["path"], "demo", "--quiet", "--tcp-port", str(free_port()),
               "--http-port", str(free_port())]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(args.settle)
        if proc.poll() is not None:
            raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}: "
                             f"{proc.stderr.read().decode(errors='replace')}")
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        st = status_fields(proc.pid)
        rss, anon, count = smaps_by_mapping(proc.pid, exe)
        st["mappings"] = count
        res = {"status": st, "rss": rss, "anon": anon}
        if args.idle > 0:
            hz = os.sysconf("SC_CLK_TCK")
            t0, c0, s0 = time.monotonic(), cpu_ticks(proc.pid), thread_switches(proc.pid)
            time.sleep(args.idle)
            t1, c1, s1 = time.monotonic(), cpu_ticks(proc.pid), thread_switches(proc.pid)
            secs = t1 - t0
            res["cpu_pct"] = 100.0 * (c1 - c0) / hz / secs
            wake = {}
            for tid, (name, n) in s1.items():
                before = s0.get(tid, (name, 0))[1]
                wake[name] = wake.get(name, 0) + (n - before) / secs
            res["wakeups_per_s"] = wake
            res["wakeups_total_per_s"] = sum(wake.values())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {rc} after SIGTERM: "
                         f"{proc.stderr.read().decode(errors='replace')}")
    return res


def parse_arm(text):
    label, _, rest = text.partition("=")
    if not rest:
        raise SystemExit(f"--arm {text}: expected LABEL=PATH[,VAR=VALUE...]")
    parts = rest.split(",")
    env = {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        env[k] = v
    path = os.path.abspath(parts[0])
    if not os.access(path, os.X_OK):
        raise SystemExit(f"--arm {text}: {path} is not an executable")
    return {"label": label, "path": path, "env": env}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", default=[], help="LABEL=PATH[,VAR=VALUE...]")
    ap.add_argument("--config", help="rtugw run -c FILE instead of rtugw demo")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--idle", type=float, default=0.0, help="seconds of CPU and wake-up sampling")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1 or args.settle < 0.2 or args.idle < 0:
        raise SystemExit("--rounds >= 1, --settle >= 0.2, --idle >= 0")
    arms = [parse_arm(a) for a in args.arm] or [parse_arm("rtugw=./rtugw")]
    runs = {a["label"]: [] for a in arms}
    for _ in range(args.rounds):
        for a in arms:
            runs[a["label"]].append(one_run(a, args))

    report = {"rounds": args.rounds, "settle_s": args.settle, "idle_s": args.idle,
              "config": args.config or "<demo>", "arms": []}
    for a in arms:
        rs = runs[a["label"]]
        arm = {"label": a["label"], "path": a["path"], "env": a["env"], "status": {}, "mappings_kib": {}}
        for key in ("VmRSS", "RssAnon", "RssFile", "Pss", "VmSize", "Threads", "mappings"):
            arm["status"][key] = spread([r["status"][key] for r in rs])
        names = sorted({n for r in rs for n in r["rss"]})
        for n in names:
            arm["mappings_kib"][n] = {"rss": statistics.median(r["rss"].get(n, 0) for r in rs),
                                      "anon": statistics.median(r["anon"].get(n, 0) for r in rs)}
        if args.idle > 0:
            arm["cpu_pct"] = spread([r["cpu_pct"] for r in rs])
            arm["wakeups_per_s"] = spread([r["wakeups_total_per_s"] for r in rs])
            threads = sorted({t for r in rs for t in r["wakeups_per_s"]})
            arm["thread_wakeups_per_s"] = {t: spread([r["wakeups_per_s"].get(t, 0) for r in rs])
                                           for t in threads}
        report["arms"].append(arm)

    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return
    fmt = lambda s, d=0: f"{s[0]:.{d}f} ({s[1]:.{d}f}-{s[2]:.{d}f})"
    print(f"# {report['config']}, {args.rounds} rounds, read {args.settle} s after start; KiB, median (p10-p90)")
    print("| arm | VmRSS | RssAnon | RssFile | Pss | VmSize | threads | mappings |")
    print("|---|---|---|---|---|---|---|---|")
    for arm in report["arms"]:
        s = arm["status"]
        print(f"| {arm['label']} | " + " | ".join(fmt(s[k]) for k in
              ("VmRSS", "RssAnon", "RssFile", "Pss", "VmSize", "Threads", "mappings")) + " |")
    print("\n# Rss by mapping, KiB (median; anonymous part in brackets)")
    names = sorted({n for arm in report["arms"] for n in arm["mappings_kib"]},
                   key=lambda n: -max(arm["mappings_kib"].get(n, {"rss": 0})["rss"] for arm in report["arms"]))
    print("| mapping | " + " | ".join(arm["label"] for arm in report["arms"]) + " |")
    print("|---|" + "---|" * len(report["arms"]))
    for n in names:
        cells = []
        for arm in report["arms"]:
            m = arm["mappings_kib"].get(n)
            cells.append(f"{m['rss']:.0f} [{m['anon']:.0f}]" if m else "-")
        if any(c not in ("-", "0 [0]") for c in cells):
            print(f"| {n} | " + " | ".join(cells) + " |")
    if args.idle > 0:
        print(f"\n# idle {args.idle} s: CPU % of one core, wake-ups/s (context switches of all threads)")
        for arm in report["arms"]:
            th = ", ".join(f"{t} {fmt(v, 1)}" for t, v in arm["thread_wakeups_per_s"].items())
            print(f"- {arm['label']}: CPU {fmt(arm['cpu_pct'], 3)} %, wake-ups/s {fmt(arm['wakeups_per_s'], 1)}; {th}")


if __name__ == "__main__":
    main()
