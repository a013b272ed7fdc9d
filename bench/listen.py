#!/usr/bin/python3
"""Listen-only decoding cost: `rtugw sniff` on a pseudo-terminal fed a master's polls and a
slave's answers, (a) at 115200 baud with the line saturated (frames back to back, t3.5
between them, paced at wire speed), and (b) as fast as the pty takes them (capacity).
Per arm: the router (auto) and each forced decoder (native, fallback). Reported per run:
frames decoded, frames/s, CPU (user+sys of the sniff process, from wait4) per frame;
over RUNS runs the median and p10-p90.

  bench/listen.py [RUNS] [SECONDS]        (defaults 5 runs, 3 s each)
  bench/listen.py --smoke                 (make check: 1 run of 0.5 s per arm, the output
                                           checked, not the figures)

Frames: reads of 2, 10, 60 and 125 registers in turn (answers of 9, 25, 125 and 255
bytes), so every router bucket sees traffic. The parse and pairing cost is CPU per frame;
the line's own rate at 115200 is what (a) reaches (frames/s is the line's, not ours)."""
import os
import pty
import statistics
import subprocess
import sys
import threading
import time
import tty

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict

BIN = os.environ.get("RTUGW_BIN", "./rtugw")
SMOKE = sys.argv[1:] == ["--smoke"]
RUNS = 1 if SMOKE else int(sys.argv[1]) if len(sys.argv) > 1 else 5
SECONDS = 0.5 if SMOKE else float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
NOISE = [0]   # noise bytes in the paced runs: every frame fed is whole and CRC-good
BAUD = 115200
CHAR_S = 11 / BAUD
T35_S = 0.00175


def crc16(b):
    crc = 0xFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return bytes(b) + bytes([crc & 0xFF, crc >> 8])


def frames():
    out = []
    for qty in (2, 10, 60, 125):
        req = crc16([1, 3, 0, 0, 0, qty])
        ans = crc16([1, 3, 2 * qty] + [(i * 7) & 0xFF for i in range(2 * qty)])
        out += [req, ans]
    return out


def feed(fd, paced, stop):
    fr = frames()
    i = 0
    next_t = time.perf_counter()
    while not stop.is_set():
        f = fr[i % len(fr)]
        i += 1
        try:
            os.write(fd, f)
        except OSError:
            return
        if paced:
            next_t += len(f) * CHAR_S + T35_S
            d = next_t - time.perf_counter()
            if d > 0:
                time.sleep(d)


def one_run(path_arm, paced):
    m, s = pty.openpty()
    tty.setraw(s)
    name = os.ttyname(s)
    p = subprocess.Popen([BIN, "sniff", "--port", name, "--baud", str(BAUD), "--json", "--summary",
                          "--duration", str(SECONDS), "--path", path_arm],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    stop = threading.Event()
    th = threading.Thread(target=feed, args=(m, paced, stop), daemon=True)
    th.start()
    _, status, ru = os.wait4(p.pid, 0)
    stop.set()
    err = p.stderr.read()
    th.join(2)
    os.close(m)
    os.close(s)
    n = 0
    for line in err.splitlines():
        if line.startswith("bytes:"):
            n = int(line.split("frames: ")[1].split(",")[0])
            if paced:
                NOISE[0] += int(line.split("noise bytes: ")[1].split(",")[0])
    cpu = ru.ru_utime + ru.ru_stime
    return n, n / SECONDS, (cpu / n * 1e6) if n else float("nan")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main():
    print(f"rtugw sniff, {RUNS} runs x {SECONDS:.1f} s, frames of 8/9/25/125/255 bytes")
    figures = {}
    for paced in (True, False):
        for arm in ("auto", "native", "fallback"):
            rs = [one_run(arm, paced) for _ in range(RUNS)]
            figures[f"{'paced' if paced else 'unpaced'}.{arm}.frames_s"] = statistics.median(r[1] for r in rs)
            fps = [r[1] for r in rs]
            us = [r[2] for r in rs]
            print(f"{'115200 saturated' if paced else 'capacity (unpaced)':20s} {arm:8s} "
                  f"frames/s median {statistics.median(fps):9.0f} (p10-p90 {pct(fps, .1):.0f}-{pct(fps, .9):.0f})  "
                  f"CPU/frame median {statistics.median(us):6.2f} us (p10-p90 {pct(us, .1):.2f}-{pct(us, .9):.2f})",
                  flush=True)
    if SMOKE:
        smoke.check("listen.py", figures, sorted(figures), wrong=NOISE[0], at_least={k: 1 for k in figures})


main()
