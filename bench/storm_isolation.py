#!/usr/bin/python3
"""A paced bus beside a front-end storm: CRC errors and timeouts, loaded vs unloaded.

    bench/storm_isolation.py [--arm LABEL=PATH]... [--rounds N] [--seconds S]
                             [--clients N] [--http N] [--full] [--cached]

The storm of issue 29, in the part this machine can drive: one gateway
(each arm's rtugw), bus b0 = `rtugw sim --pace --baud 9600 --format 8E1
--slaves 1..10` on a pseudo-terminal, its 10 slaves each polled for 10
holding registers every 1 s; bus b1 = the built-in simulator, unpaced
(`port = sim`), the target of --clients Modbus TCP clients, each reading
in a loop (asyncio, one connection each), plus --http loops of GET
/metrics. Per round and arm (interleaved): --seconds unloaded, then
--seconds with the storm. Reported per arm and phase, summed over the
rounds: b0's requests, CRC errors and timeouts (/status), and the storm's
answers per second. A gateway that judges the wire by when it reads the
port shows CRC errors and timeouts on b0 under the storm although the
simulator sends only good frames.

--full adds the rest of issue 29's storm, all at once with the clients:
10,000 tags on b1 (a tags_file, read every second) published as MQTT
json-per-tag (publish = poll: 10,000 values/s) to a mosquitto the bench
starts on a free port; GET /tags of those 10,000, 40 a second
(--tags-rate; 0: back to back, which takes all the I/O thread it is
given, as the runs before this option did); and 50 TLS
handshakes a second on the [tls] listener (Modbus/TCP Security, client
certificate from tests/lib/mbaps-certs.sh, no resumption: each a full
handshake; from a process of its own). Reported beside: handshakes/s, GET /tags/s, MQTT
values published/s, and b0's latency p50/p99 per phase against its wire
time (8 + 25 characters of 11 bits at 9600 baud: 37.8 ms). The handshakes
and GET /tags each run in a process of their own, so that the clients'
busy asyncio loop does not pace them.

b1 is a serial line at 115200: the line rests t3.5 (1.75 ms) between
frames, so its clients get a few hundred answers a second however fast
the gateway is, and the 10,000 polled tags keep their place by [bus]
poll_share. --cached polls the clients' 8 registers every 100 ms with
serve_cached_ms, so their reads are answered from the cache: their rate
is then the front end's, which is what the gateway's cores bound.
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import pwd
import shutil
import ssl
import signal
import socket
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

STORM_ANSWER = bytes([3, 16]) + smoke.holding_expected(1, 0, 8)   # the storm's read: unit 1, 8 registers at 0
WRONG = [0]


def b0(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/status" % http, timeout=10) as r:
        b = json.load(r)["buses"][0]
    return b["requests"], b["crc_errors"], b["timeouts"]


def b0_latency(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/status" % http, timeout=10) as r:
        b = json.load(r)["buses"][0]
    return b["latency_p50_ms"] or 0.0, b["latency_p99_ms"] or 0.0


def published(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http, timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("rtugw_mqtt_published_total"):
                return float(line.split()[-1])
    return 0.0


def tls_process(port, certs, seconds, rate, q):
    """rate full handshakes a second (no resumption: a fresh session each),
    in a process of its own so that the storm's event loop does not pace
    them; each closes after its handshake. Puts the count done."""
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.load_cert_chain(os.path.join(certs, "reader.pem"), os.path.join(certs, "reader.key"))
    n, t0 = 0, time.monotonic()
    t = t0
    while time.monotonic() < t0 + seconds:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                    n += 1
        except (OSError, ssl.SSLError):
            pass
        t += 1.0 / rate
        time.sleep(max(0.0, t - time.monotonic()))
    q.put(n)


async def client(port, stop, count):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    tid = 0
    try:
        while not stop.is_set():
            tid = (tid + 1) & 0xFFFF
            w.write(struct.pack(">HHHBBHH", tid, 0, 6, 1, 3, 0, 8))
            await w.drain()
            hdr = await r.readexactly(7)
            body = await r.readexactly(struct.unpack(">H", hdr[4:6])[0] - 1)
            if not stop.is_set():   # answers/s is over --seconds: not those drained after it
                count[0] += 1
            # a refusal (an exception) is not wrong; data of another read is
            if hdr[:2] != struct.pack(">H", tid) or (body[:1] == b"\x03" and body != STORM_ANSWER):
                WRONG[0] += 1
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        w.close()


async def http_loop(port, stop, path="/metrics", count=None, rate=0.0):
    """GET path in a loop, one connection each (count[0]: how many came back);
    with rate, one started every 1/rate s (at once when the last took longer)."""
    t = time.monotonic()
    while not stop.is_set():
        if rate:
            t += 1.0 / rate
            await asyncio.sleep(max(0.0, t - time.monotonic()))
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET %s HTTP/1.0\r\n\r\n" % path.encode())
            await w.drain()
            await r.read()
            w.close()
            if count is not None:
                count[0] += 1
        except OSError:
            await asyncio.sleep(0.01)


def tags_process(http, seconds, rate, q):
    """GET /tags at rate a second for seconds, in a process of its own (as
    the handshakes): in the clients' process, whose asyncio loop is busy
    with their answers, a 1 MB body was read at the pace that loop left it,
    and /tags/s measured the bench, not the gateway. Puts the count done."""
    async def run():
        stop, n = asyncio.Event(), [0]
        task = asyncio.create_task(http_loop(http, stop, "/tags", n, rate))
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.wait([task], timeout=10)
        return n[0]
    q.put(asyncio.run(run()))


async def storm(tcp, http, clients, https, seconds, full=None):
    stop, count, tls_n, tags_n = asyncio.Event(), [0], [0], [0]
    tasks = [asyncio.create_task(client(tcp, stop, count)) for _ in range(clients)]
    tasks += [asyncio.create_task(http_loop(http, stop)) for _ in range(https)]
    if full:
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=tls_process, args=(full["tls_port"], full["certs"], seconds, 50, q))
        proc.start()
        tq = ctx.Queue()
        tproc = ctx.Process(target=tags_process, args=(http, seconds, full["tags_rate"], tq))
        tproc.start()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait(tasks, timeout=10)
    if full:
        tls_n[0] = await asyncio.get_running_loop().run_in_executor(None, q.get)
        tags_n[0] = await asyncio.get_running_loop().run_in_executor(None, tq.get)
        proc.join()
        tproc.join()
    return count[0] / seconds, tls_n[0] / seconds, tags_n[0] / seconds


def full_setup(d):
    """The certificates, the 10,000-tag file and a mosquitto for --full."""
    certs = os.path.join(d, "certs")
    subprocess.run(["sh", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib", "mbaps-certs.sh"),
                    certs], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tags = os.path.join(d, "tags.csv")
    with open(tags, "w") as f:   # the simulator's map: 1,000 holding registers a slave
        f.write("name,device,table,address,type,interval_ms\n")
        for i in range(10000):
            f.write("t%d,u%d,holding,%d,uint16,1000\n" % (i, 1 + i // 1000, i % 1000))
    mport = free_port()
    conf = os.path.join(d, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write("user %s\nallow_anonymous true\nlistener %d 127.0.0.1\nmax_queued_messages 1000000\n"
                % (pwd.getpwuid(os.getuid()).pw_name, mport))
    broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"certs": certs, "tags": tags, "mqtt_port": mport, "broker": broker, "tls_port": free_port()}


def one_round(path, a):
    d = tempfile.mkdtemp(prefix="rtugw-storm-")
    full = full_setup(d) if a.full else None
    if full:
        full["tags_rate"] = a.tags_rate
    sim = subprocess.Popen([path, "sim", "--pace", "--baud", "9600", "--format", "8E1", "--slaves",
                            ",".join(str(s) for s in range(1, 11))],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pty = sim.stdout.readline().strip()
    tcp, http = free_port(), free_port()
    text = "[gateway]\nlog_level = warn\n[bus b0]\nport = %s\nbaud = 9600\nparity = even\n" % pty
    text += "[bus b1]\nport = %s\nbaud = 115200\n" % ("sim:" + ",".join(str(u) for u in range(1, 11)) if a.full else "sim")
    for s in range(1, 11):
        text += ("[device p%d]\nbus = b0\nslave = %d\ndead_after = 0\n[poll g%d]\ndevice = p%d\nfunction = 3\n"
                 "address = 0\ncount = 10\ninterval_ms = 1000\n" % (s, s, s, s))
    text += "[device u1]\nbus = b1\nslave = 1\n"
    if full:   # ten devices of 1,000 tags, one file
        text += "tags_file = %s\n" % full["tags"]
        text += "".join("[device u%d]\nbus = b1\nslave = %d\ntags_file = %s\n" % (u, u, full["tags"])
                        for u in range(2, 11))
        text += ("[tls]\nbind = 127.0.0.1\nport = %d\ncert_file = {c}/server.pem\nkey_file = {c}/server.key\n"
                 "ca_file = {c}/ca.pem\nsession_cache = 0\nmax_handshakes = 64\n"
                 "max_handshakes_per_address = 0\n[role reader]\nfunctions = read\nunits = all\n"
                 % full["tls_port"]).format(c=full["certs"])
        text += ("[mqtt]\nhost = 127.0.0.1\nport = %d\nclient_id = storm\ngateway = storm\nformat = json-per-tag\n"
                 "publish = poll\nqos = 0\n" % full["mqtt_port"])
    if a.cached:   # the clients' 8 registers polled every 100 ms and served from the cache
        text += ("[poll c1]\ndevice = u1\nfunction = 3\naddress = 0\ncount = 8\ninterval_ms = 100\n"
                 "serve_cached_ms = 1000\n")
    text += ("[tcp]\nbind = 127.0.0.1\nport = %d\ndefault_bus = b1\nmax_clients = 1024\nmax_per_address = 0\n"
             "[http]\nbind = 127.0.0.1\nport = %d\nmax_connections = 64\n" % (tcp, http))
    # in the tag file's folder: files the configuration names stay under its folder
    fd, cpath = tempfile.mkstemp(suffix=".ini", dir=d)
    os.write(fd, text.encode())
    os.close(fd)
    log = open(os.path.join(d, "gateway.log"), "w+")
    gw = subprocess.Popen([path, "run", "-c", cpath], stderr=log)
    out = {}
    try:
        time.sleep(2.5 if not full else 6.0)   # 10,000 tags: the first reads, and MQTT connected
        if gw.poll() is not None:
            log.seek(0)
            raise SystemExit("%s run -c %s exited %d:\n%s" % (path, cpath, gw.returncode, log.read()[-2000:]))
        q0 = b0(http)
        m0 = published(http) if full else 0.0
        t0 = time.monotonic()
        time.sleep(a.seconds)
        q1 = b0(http)
        l1 = b0_latency(http)
        m1 = published(http) if full else 0.0
        t1 = time.monotonic()
        rate, tls_rate, tags_rate = asyncio.run(storm(tcp, http, a.clients, a.http, a.seconds, full))
        q2 = b0(http)
        l2 = b0_latency(http)
        m2 = published(http) if full else 0.0
        # per second of the time between the counter's reads: the storm phase
        # runs longer than --seconds (its processes' start and the clients' ends)
        t2 = time.monotonic()
        out["unloaded"] = [q1[i] - q0[i] for i in range(3)] + [0.0, 0.0, 0.0, (m1 - m0) / (t1 - t0)] + list(l1)
        out["storm"] = [q2[i] - q1[i] for i in range(3)] + [rate, tls_rate, tags_rate, (m2 - m1) / (t2 - t1)] + list(l2)
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=20)
        log.close()
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)
        os.unlink(cpath)
        if full:
            full["broker"].terminate()
            full["broker"].wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--http", type=int, default=4)
    ap.add_argument("--full", action="store_true", help="also TLS handshakes, GET /tags of 10,000 and MQTT")
    ap.add_argument("--cached", action="store_true",
                    help="the clients' 8 registers polled every 100 ms and answered from the cache (serve_cached_ms): "
                         "their rate is then the front end's, not b1's line (115200 with t3.5 between frames)")
    ap.add_argument("--tags-rate", type=float, default=40.0,
                    help="--full: GET /tags started per second (issue 45's 40; 0: back to back, as before)")
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one round of 2 s phases, 50 clients, 1 GET loop; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.arm, a.rounds, a.seconds, a.clients, a.http = a.arm[:1], 1, 2.0, 50, 1
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * a.clients + 256)), hard))
    arms = [x.split("=", 1) for x in (a.arm or ["rtugw=./rtugw"])]
    tot = {label: {"unloaded": [0] * 9, "storm": [0] * 9} for label, _ in arms}
    per_round = {label: [] for label, _ in arms}
    for _ in range(a.rounds):
        for label, path in arms:
            r = one_round(path, a)
            per_round[label].append(r["storm"])
            for ph in r:
                t = tot[label][ph]
                tot[label][ph] = [x + y for x, y in zip(t[:7], r[ph][:7])] + [max(t[7], r[ph][7]), max(t[8], r[ph][8])]
    print("arm       phase     b0 requests  CRC errors  timeouts  storm answers/s  TLS hs/s  GET /tags/s  "
          "MQTT values/s  b0 latency p50/p99 ms (cumulative, worst round)")
    for label, phases in tot.items():
        for ph, v in phases.items():
            print("%-9s %-9s %11d %11d %9d %16.0f %9.1f %12.2f %14.0f  %6.1f / %6.1f"
                  % (label, ph, v[0], v[1], v[2], v[3] / a.rounds, v[4] / a.rounds, v[5] / a.rounds,
                     v[6] / a.rounds, v[7], v[8]))
    print("per round, storm phase (answers/s, TLS hs/s, GET /tags/s, MQTT values/s):")
    for label, rounds in per_round.items():
        print("  %-9s %s" % (label, "; ".join("%.0f, %.1f, %.2f, %.0f" % (r[3], r[4], r[5], r[6]) for r in rounds)))
    print("storm answers checked: %d wrong (a reply to another request, or a read's data not its registers')"
          % WRONG[0])
    if a.smoke:
        v = next(iter(tot.values()))
        names = ("b0_requests", "crc_errors", "timeouts", "storm_answers_s", "tls_hs_s", "tags_s", "mqtt_values_s",
                 "p50_ms", "p99_ms")
        figures = {"%s.%s" % (ph, k): v[ph][i] for ph in v for i, k in enumerate(names)}
        smoke.check("storm_isolation.py", figures, sorted(figures), wrong=WRONG[0],
                    at_least={"unloaded.b0_requests": 1, "storm.b0_requests": 1, "storm.storm_answers_s": 1})
    return 0


if __name__ == "__main__":
    sys.exit(main())
