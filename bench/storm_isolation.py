#!/usr/bin/python3
"""A paced bus beside a front-end storm: CRC errors and timeouts, loaded vs unloaded.

    bench/storm_isolation.py [--arm LABEL=PATH]... [--rounds N] [--seconds S]
                             [--clients N] [--http N]

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
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1


def b0(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/status" % http, timeout=10) as r:
        b = json.load(r)["buses"][0]
    return b["requests"], b["crc_errors"], b["timeouts"]


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
            await r.readexactly(struct.unpack(">H", hdr[4:6])[0] - 1)
            count[0] += 1
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        w.close()


async def http_loop(port, stop):
    while not stop.is_set():
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET /metrics HTTP/1.0\r\n\r\n")
            await w.drain()
            await r.read()
            w.close()
        except OSError:
            await asyncio.sleep(0.01)


async def storm(tcp, http, clients, https, seconds):
    stop, count = asyncio.Event(), [0]
    tasks = [asyncio.create_task(client(tcp, stop, count)) for _ in range(clients)]
    tasks += [asyncio.create_task(http_loop(http, stop)) for _ in range(https)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait(tasks, timeout=10)
    return count[0] / seconds


def one_round(path, a):
    sim = subprocess.Popen([path, "sim", "--pace", "--baud", "9600", "--format", "8E1", "--slaves",
                            ",".join(str(s) for s in range(1, 11))],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pty = sim.stdout.readline().strip()
    tcp, http = free_port(), free_port()
    text = "[gateway]\nlog_level = warn\n[bus b0]\nport = %s\nbaud = 9600\nparity = even\n" % pty
    text += "[bus b1]\nport = sim\nbaud = 115200\n"
    for s in range(1, 11):
        text += ("[device p%d]\nbus = b0\nslave = %d\ndead_after = 0\n[poll g%d]\ndevice = p%d\nfunction = 3\n"
                 "address = 0\ncount = 10\ninterval_ms = 1000\n" % (s, s, s, s))
    text += "[device u1]\nbus = b1\nslave = 1\n"
    text += ("[tcp]\nbind = 127.0.0.1\nport = %d\ndefault_bus = b1\nmax_clients = 1024\nmax_per_address = 0\n"
             "[http]\nbind = 127.0.0.1\nport = %d\nmax_connections = 64\n" % (tcp, http))
    fd, cpath = tempfile.mkstemp(suffix=".ini")
    os.write(fd, text.encode())
    os.close(fd)
    gw = subprocess.Popen([path, "run", "-c", cpath], stderr=subprocess.DEVNULL)
    out = {}
    try:
        time.sleep(2.5)
        q0 = b0(http)
        time.sleep(a.seconds)
        q1 = b0(http)
        rate = asyncio.run(storm(tcp, http, a.clients, a.http, a.seconds))
        q2 = b0(http)
        out["unloaded"] = [q1[i] - q0[i] for i in range(3)] + [0.0]
        out["storm"] = [q2[i] - q1[i] for i in range(3)] + [rate]
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=20)
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)
        os.unlink(cpath)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--http", type=int, default=4)
    a = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * a.clients + 256)), hard))
    arms = [x.split("=", 1) for x in (a.arm or ["rtugw=./rtugw"])]
    tot = {label: {"unloaded": [0, 0, 0, 0.0], "storm": [0, 0, 0, 0.0]} for label, _ in arms}
    for _ in range(a.rounds):
        for label, path in arms:
            r = one_round(path, a)
            for ph in r:
                tot[label][ph] = [x + y for x, y in zip(tot[label][ph], r[ph])]
    print("arm       phase     b0 requests  CRC errors  timeouts  storm answers/s")
    for label, phases in tot.items():
        for ph, v in phases.items():
            print("%-9s %-9s %11d %11d %9d %16.0f" % (label, ph, v[0], v[1], v[2], v[3] / a.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
