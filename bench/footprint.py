#!/usr/bin/python3
"""What an idle rtugw costs a small box: resident memory by mapping, and CPU.

    bench/footprint.py [--arm LABEL=PATH[,VAR=VALUE...]]... [--config FILE]
                       [--rounds N] [--settle S] [--idle S]
                       [--requests N [--tcp-port P]] [--json]

Each arm is an rtugw binary (default: ./rtugw) started as an operator does:
`rtugw demo --quiet` on free ports, or `rtugw run -c FILE` with --config
(the file's own ports are used as written). Arms are interleaved, one start
of each per round, so a drift of the machine hits them alike. After --settle
seconds (default 2) the script reads /proc/PID/status, /proc/PID/smaps and
smaps_rollup; with --idle S it then samples utime+stime (/proc/PID/stat, in
10 ms ticks), the threads' run time (/proc/PID/task/*/schedstat, in ns) and
every thread's voluntary and nonvoluntary context switches
(/proc/PID/task/TID/status) at the start and the end of S seconds, and
reports the difference: CPU as a percentage of one core, and wake-ups per
second by thread name. With --requests N, one Modbus TCP client (this
script, TCP_NODELAY) then reads 8 holding registers of unit 1, back to back:
200 unmeasured, then N, each answer checked; reported per request are the
gateway's CPU time (the sum of /proc/PID/task/*/schedstat run times, in ns,
not the 10 ms ticks of /proc/PID/stat) and context switches, all threads and
the main (I/O) thread alone, and the request rate. --tcp-port is the port
of --config's [tcp]. Then SIGTERM, and the exit status must be 0.

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
import struct
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
        # The main thread is the I/O thread; the others carry their names
        # (rtugw-timers, rtugw-worker0.., rtugw-sim), numbered where unnamed.
        comm = fields.get("Name", "").strip()
        name = "main" if int(tid) == pid else comm if comm.startswith("rtugw-") else f"thread{k}"
        n = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
        out[tid] = (name, n)
    return out


def run_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def drive(pid, port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(i):
        s.sendall(struct.pack(">HHHBBHH", i & 0xFFFF, 0, 6, 1, 3, 0, 8))
        got = b""
        while len(got) < 25:
            chunk = s.recv(25 - len(got))
            if not chunk:
                raise SystemExit("the gateway closed the connection")
            got += chunk
        if got[:2] != struct.pack(">H", i & 0xFFFF) or got[7] != 3 or got[8] != 16:
            raise SystemExit(f"request {i}: unexpected answer {got.hex()}")

    for i in range(200):
        request(i)
    s0, c0, t0 = thread_switches(pid), run_ns(pid), time.monotonic()
    for i in range(n):
        request(i)
    s1, c1, t1 = thread_switches(pid), run_ns(pid), time.monotonic()
    s.close()
    sw = {t: s1[t][1] - s0.get(t, (None, 0))[1] for t in s1}
    return {"rps": n / (t1 - t0), "cpu_us_per_req": (c1 - c0) / 1000.0 / n,
            "ctxsw_per_req": sum(sw.values()) / n, "io_ctxsw_per_req": sw.get(str(pid), 0) / n}


def one_run(arm, args):
    env = dict(os.environ)
    env.update(arm["env"])
    if args.config:
        cmd = [arm["path"], "run", "-c", args.config]
        tcp_port = args.tcp_port
    else:
        tcp_port = free_port()
        cmd = [arm["path"], "demo", "--quiet", "--tcp-port", str(tcp_port),
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
            t0, c0, s0, r0 = time.monotonic(), cpu_ticks(proc.pid), thread_switches(proc.pid), run_ns(proc.pid)
            time.sleep(args.idle)
            t1, c1, s1, r1 = time.monotonic(), cpu_ticks(proc.pid), thread_switches(proc.pid), run_ns(proc.pid)
            secs = t1 - t0
            res["cpu_pct"] = 100.0 * (c1 - c0) / hz / secs
            res["run_pct"] = 100.0 * (r1 - r0) / 1e9 / secs   # schedstat ns: finer than the ticks
            wake = {}
            for tid, (name, n) in s1.items():
                before = s0.get(tid, (name, 0))[1]
                wake[name] = wake.get(name, 0) + (n - before) / secs
            res["wakeups_per_s"] = wake
            res["wakeups_total_per_s"] = sum(wake.values())
        if args.requests > 0:
            res["load"] = drive(proc.pid, tcp_port, args.requests)
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
    ap.add_argument("--requests", type=int, default=0, help="requests of one client after the idle time")
    ap.add_argument("--tcp-port", type=int, default=0, help="--config's [tcp] port, for --requests")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1 or args.settle < 0.2 or args.idle < 0 or args.requests < 0:
        raise SystemExit("--rounds >= 1, --settle >= 0.2, --idle >= 0, --requests >= 0")
    if args.requests and args.config and not args.tcp_port:
        raise SystemExit("--requests with --config needs --tcp-port (the file's [tcp] port)")
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
            arm["run_pct"] = spread([r["run_pct"] for r in rs])
            arm["wakeups_per_s"] = spread([r["wakeups_total_per_s"] for r in rs])
            threads = sorted({t for r in rs for t in r["wakeups_per_s"]})
            arm["thread_wakeups_per_s"] = {t: spread([r["wakeups_per_s"].get(t, 0) for r in rs])
                                           for t in threads}
        if args.requests > 0:
            arm["load"] = {k: spread([r["load"][k] for r in rs]) for k in rs[0]["load"]}
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
            print(f"- {arm['label']}: CPU {fmt(arm['cpu_pct'], 3)} % (10 ms ticks), run time "
                  f"{fmt(arm['run_pct'], 3)} % (schedstat), wake-ups/s {fmt(arm['wakeups_per_s'], 1)}; {th}")
    if args.requests > 0:
        print(f"\n# {args.requests} requests of one client (fc 3, 8 registers, unit 1) per round")
        print("| arm | requests/s | gateway CPU us/req | ctxsw/req (all threads) | ctxsw/req (I/O thread) |")
        print("|---|---|---|---|---|")
        for arm in report["arms"]:
            l = arm["load"]
            print(f"| {arm['label']} | {fmt(l['rps'])} | {fmt(l['cpu_us_per_req'], 1)} | "
                  f"{fmt(l['ctxsw_per_req'], 2)} | {fmt(l['io_ctxsw_per_req'], 2)} |")


if __name__ == "__main__":
    main()
