#!/usr/bin/python3
"""bench/tls.py -- MB-TCP-Security figures, TLS against plain Modbus/TCP in
the same run, on the same gateway binary (`rtugw run`, a `sim:1` bus with
gap_us = 1, as `rtugw bench gateway` uses, so the line is not what is timed):

  setup     connect to the first answer (one read of 1 holding register):
            plain TCP; TLS 1.3 full handshake; TLS 1.3 resumed (the session of
            the connection before); TLS 1.2 full and resumed. Also the
            handshake alone, as the client sees it (connect + handshake);
  latency   one read of 1 holding register, back to back on one open
            connection, plain and TLS 1.3, per request;
  rss       the gateway's resident memory per connection: N connections
            opened (each answered once, then idle), each arm on a fresh
            gateway: plain; TLS 1.3 with the default session cache; TLS 1.3
            with session_cache = 0; VmRSS and RssAnon deltas over N;
  footprint a fresh gateway's VmRSS and RssAnon with no client: this binary
            without [tls], the same with [tls] (the module and libssl
            loaded), and --baseline BIN without [tls] (e.g. the main
            branch's rtugw: an unconfigured [tls] must cost nothing).

Method: the arms alternate within every round (plain, TLS, ... in turn),
--warmup rounds are run first and dropped; reported: the median and p10-p90
over the samples of the measured rounds (each handshake or request is a
sample; rss and footprint: one sample per round), and for latency the
per-round paired ratio TLS / plain. Certificates: tests/lib/mbaps-certs.sh
(ECDSA P-256; the CA signs the server and the clients).

Usage: /usr/bin/python3 bench/tls.py [--bin ./rtugw] [--rounds 10] [--warmup 2]
       [--handshakes 40] [--requests 400] [--connections 64] [--baseline BIN] [--json]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from rtugwtest import free_port, mbap  # noqa: E402   the tests' helpers: a free port, MBAP framing

READ = mbap(1, 1, bytes([3, 0, 0, 0, 1]))   # read 1 holding register of unit 1


def quantile(sorted_xs, q):
    """Linear interpolation between closest ranks (bench/stats.c's)."""
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def spread(xs):
    s = sorted(xs)
    if not s:
        return {"median": 0, "p10": 0, "p90": 0, "n": 0}
    return {"median": quantile(s, 0.5), "p10": quantile(s, 0.1), "p90": quantile(s, 0.9), "n": len(s)}


def recv_answer(s):
    data = b""
    while len(data) < 7 or len(data) < 6 + struct.unpack(">H", data[4:6])[0]:
        chunk = s.recv(260)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


class Gw:
    def __init__(self, binary, pki, tls=True, tls_extra=""):
        self.dir = tempfile.mkdtemp(prefix="rtugw-bench-tls-")
        self.tcp_port, self.http_port, self.tls_port = free_port(), free_port(), free_port()
        # the certificates live in pki, outside the configuration's folder: a data folder
        text = (f"[gateway]\nlog_level = warn\ndata_dirs = {pki}\n[bus line]\nport = sim:1\nbaud = 115200\ngap_us = 1\n"
                f"[tcp]\nport = {self.tcp_port}\ndefault_bus = line\nmax_clients = 1024\nmax_pending = 16\n"
                f"idle_timeout_s = 0\n[http]\nport = {self.http_port}\n")
        if tls:
            text += (f"[tls]\nenabled = true\nport = {self.tls_port}\ncert_file = {pki}/server.pem\n"
                     f"key_file = {pki}/server.key\nca_file = {pki}/ca.pem\n{tls_extra}"
                     "[role admin]\nfunctions = all\nunits = all\n")
        with open(os.path.join(self.dir, "rtugw.conf"), "w") as f:
            f.write(text)
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.p = subprocess.Popen([binary, "run", "-c", os.path.join(self.dir, "rtugw.conf")], stdout=self.log,
                                  stderr=self.log)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                s = socket.create_connection(("127.0.0.1", self.tcp_port), timeout=1)
                s.sendall(READ)
                recv_answer(s)
                s.close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"the gateway did not answer within 10 s (log: {self.dir}/log)")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def client_context(pki, version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(f"{pki}/ca.pem")
    ctx.load_cert_chain(f"{pki}/admin.pem", f"{pki}/admin.key")
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


def plain_setup(g):
    t0 = time.perf_counter_ns()
    s = socket.create_connection(("127.0.0.1", g.tcp_port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t1 = time.perf_counter_ns()
    s.sendall(READ)
    recv_answer(s)
    t2 = time.perf_counter_ns()
    s.close()
    return t1 - t0, t2 - t0


def tls_setup(g, ctx, session):
    """(handshake ns, to the first answer ns, the session to resume, resumed?)"""
    t0 = time.perf_counter_ns()
    raw = socket.create_connection(("127.0.0.1", g.tls_port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
    t1 = time.perf_counter_ns()
    s.sendall(READ)
    recv_answer(s)
    t2 = time.perf_counter_ns()
    reused, next_session = s.session_reused, s.session   # TLS 1.3: the ticket came before the answer
    s.close()
    return t1 - t0, t2 - t0, next_session, reused


def bench_setup(g, pki, rounds, warmup, n):
    arms = ["plain", "tls13_full", "tls13_resumed", "tls12_full", "tls12_resumed"]
    first = {a: [] for a in arms}
    hand = {a: [] for a in arms}
    ctxs = {"tls13": client_context(pki, ssl.TLSVersion.TLSv1_3), "tls12": client_context(pki, ssl.TLSVersion.TLSv1_2)}
    not_resumed = 0
    for r in range(warmup + rounds):
        for _ in range(n):
            for arm in arms:
                if arm == "plain":
                    h, f = plain_setup(g)
                else:
                    version, kind = arm.split("_")
                    session = None
                    if kind == "resumed":   # a session from a full handshake just before
                        _, _, session, _ = tls_setup(g, ctxs[version], None)
                    h, f, _, reused = tls_setup(g, ctxs[version], session)
                    if kind == "resumed" and not reused:
                        not_resumed += 1
                if r >= warmup:
                    hand[arm].append(h / 1000.0)
                    first[arm].append(f / 1000.0)
    return {a: {"handshake_us": spread(hand[a]), "first_answer_us": spread(first[a])} for a in arms}, not_resumed


def bench_latency(g, pki, rounds, warmup, n):
    ctx = client_context(pki, ssl.TLSVersion.TLSv1_3)
    plain = socket.create_connection(("127.0.0.1", g.tcp_port))
    plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw = socket.create_connection(("127.0.0.1", g.tls_port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    secure = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    samples = {"plain": [], "tls": []}
    ratios = []
    for r in range(warmup + rounds):
        medians = {}
        for arm, s in (("plain", plain), ("tls", secure)) if r % 2 == 0 else (("tls", secure), ("plain", plain)):
            xs = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                s.sendall(READ)
                recv_answer(s)
                xs.append((time.perf_counter_ns() - t0) / 1000.0)
            medians[arm] = spread(xs)["median"]
            if r >= warmup:
                samples[arm] += xs
        if r >= warmup:
            ratios.append(medians["tls"] / medians["plain"])
    plain.close()
    secure.close()
    return {"plain_us": spread(samples["plain"]), "tls_us": spread(samples["tls"]), "ratio": spread(ratios)}


def rss_per_connection(binary, pki, n, use_tls, tls_extra=""):
    g = Gw(binary, pki, tls=True, tls_extra=tls_extra)
    ctx = client_context(pki, ssl.TLSVersion.TLSv1_3)

    def connect():
        raw = socket.create_connection(("127.0.0.1", g.tls_port if use_tls else g.tcp_port))
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if use_tls else raw
        s.sendall(READ)
        recv_answer(s)
        return s
    connect().close()   # warm: OpenSSL's lazily made tables, the first session
    time.sleep(0.1)
    before = status_kib(g.p.pid, "VmRSS"), status_kib(g.p.pid, "RssAnon")
    conns = [connect() for _ in range(n)]
    time.sleep(0.2)
    after = status_kib(g.p.pid, "VmRSS"), status_kib(g.p.pid, "RssAnon")
    for s in conns:
        s.close()
    g.stop()
    return (after[0] - before[0]) / n, (after[1] - before[1]) / n


def bench_rss(binary, pki, rounds, warmup, n):
    """tls: the default session_cache (each session it keeps holds the
    client's certificate); tls_no_cache: session_cache = 0."""
    arms = ("plain", "tls", "tls_no_cache")
    out = {arm: ([], []) for arm in arms}
    for r in range(warmup + rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            rss, anon = rss_per_connection(binary, pki, n, arm != "plain",
                                           "session_cache = 0\n" if arm == "tls_no_cache" else "")
            if r >= warmup:
                out[arm][0].append(rss)
                out[arm][1].append(anon)
    return {arm: {"vmrss_kib": spread(v[0]), "rssanon_kib": spread(v[1])} for arm, v in out.items()}


def footprint(binary, pki, tls):
    g = Gw(binary, pki, tls=tls)
    time.sleep(0.2)
    rss, anon = status_kib(g.p.pid, "VmRSS"), status_kib(g.p.pid, "RssAnon")
    g.stop()
    return rss, anon


def bench_footprint(binary, baseline, pki, rounds, warmup):
    arms = [("no_tls", binary, False), ("tls", binary, True)] + ([("baseline_no_tls", baseline, False)] if baseline else [])
    out = {a[0]: ([], []) for a in arms}
    for r in range(warmup + rounds):
        for name, b, tls in (arms if r % 2 == 0 else arms[::-1]):
            rss, anon = footprint(b, pki, tls)
            if r >= warmup:
                out[name][0].append(rss)
                out[name][1].append(anon)
    return {name: {"vmrss_kib": spread(v[0]), "rssanon_kib": spread(v[1])} for name, v in out.items()}


def fmt(s, unit=""):
    return f"{s['median']:.1f}{unit} ({s['p10']:.1f}-{s['p90']:.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("RTUGW_BIN", "./rtugw"))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--handshakes", type=int, default=40, help="per arm per round")
    ap.add_argument("--requests", type=int, default=400, help="per arm per round")
    ap.add_argument("--connections", type=int, default=64, help="for rss")
    ap.add_argument("--rss-rounds", type=int, default=5)
    ap.add_argument("--baseline", help="another rtugw binary for the footprint row (e.g. the main branch's)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    pki = tempfile.mkdtemp(prefix="rtugw-bench-pki-")
    try:
        subprocess.run(["sh", os.path.join(HERE, "..", "tests", "lib", "mbaps-certs.sh"), pki], check=True)
        g = Gw(a.bin, pki)
        try:
            setup, not_resumed = bench_setup(g, pki, a.rounds, a.warmup, a.handshakes)
            latency = bench_latency(g, pki, a.rounds, a.warmup, a.requests)
        finally:
            g.stop()
        rss = bench_rss(a.bin, pki, a.rss_rounds, 1, a.connections)
        foot = bench_footprint(a.bin, a.baseline, pki, a.rss_rounds, 1)
    finally:
        shutil.rmtree(pki, ignore_errors=True)
    result = {"rounds": a.rounds, "warmup": a.warmup, "handshakes": a.handshakes, "requests": a.requests,
              "connections": a.connections, "setup": setup, "not_resumed": not_resumed, "latency": latency,
              "rss_per_connection": rss, "footprint": foot}
    if a.json:
        print(json.dumps(result))
        return 0
    print(f"rtugw bench tls: {a.rounds} rounds (+{a.warmup} warm-up), median (p10-p90)")
    print(f"session setup, {a.handshakes} per arm per round (us): handshake / to the first answer")
    for arm, v in setup.items():
        print(f"  {arm:14s} {fmt(v['handshake_us']):>26s}  {fmt(v['first_answer_us']):>26s}")
    if not_resumed:
        print(f"  (resumed arms: {not_resumed} handshakes were not resumed)")
    print(f"per request, one read, {a.requests} per arm per round (us)")
    print(f"  plain {fmt(latency['plain_us'])}   tls {fmt(latency['tls_us'])}   "
          f"tls/plain per round {latency['ratio']['median']:.3f} ({latency['ratio']['p10']:.3f}-"
          f"{latency['ratio']['p90']:.3f})")
    print(f"resident memory per connection, {a.connections} connections, {a.rss_rounds} rounds (KiB)")
    for arm, v in rss.items():
        print(f"  {arm:12s} VmRSS {fmt(v['vmrss_kib'])}   RssAnon {fmt(v['rssanon_kib'])}")
    print(f"a fresh gateway, no client (KiB), {a.rss_rounds} rounds")
    for arm, v in foot.items():
        print(f"  {arm:16s} VmRSS {fmt(v['vmrss_kib'])}   RssAnon {fmt(v['rssanon_kib'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
