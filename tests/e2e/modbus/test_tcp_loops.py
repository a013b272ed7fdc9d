#!/usr/bin/python3
"""[tcp] loops: a listener's connections spread over several event loops
(front/tcp_loops.c), on a real `rtugw run` with real sockets.

  - spread: with loops = 2 a thread rtugw-tcp1 runs, 64 connections land on
    both loops (/status tcp.loops), and every pipelined answer reaches the
    connection that asked, with its own transaction id: values unique per
    address, and equal ones (every client reading the same register), where
    only the id tells two answers apart;
  - one admission for all loops: max_clients and max_per_address count the
    connections of every loop (the clients beyond are closed, counted);
  - reload: a new port is bound for every loop (the old connections still
    answered), an allow-list that drops the clients closes them on both
    loops, and loops itself is named as needing a restart;
  - stop: SIGTERM with connections open on both loops and requests in
    flight exits 0, promptly;
  - one per CPU: loops = 0 runs as many loops as the CPUs the gateway may
    run on (its affinity), at most bus_share;
  - refused: more loops than bus_share (each loop holds at least one place
    of a bus), or out of 1..16, names its line.
"""
import contextlib
import os
import signal
import shutil
import socket
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import (Gateway, check, check_config_refused, closed_by_peer, free_port, mbap,  # noqa: E402
                       recv_frame, run_tests, wait_for)


def threads(pid):
    names = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


def connect(port, source="127.0.0.1"):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(5)
    return s


def answered(s, tid, addr):
    """One read of holding register addr (unit 1, value 1000 + addr): true
    when its answer came back with its id and value."""
    try:
        s.sendall(mbap(tid, 1, bytes([3, addr >> 8, addr & 0xFF, 0, 1])))
        return recv_frame(s) == (tid, 1, bytes([3, 2]) + struct.pack(">H", 1000 + addr))
    except OSError:
        return False


def loops_of(g):
    return g.status()["tcp"].get("loops", [])


def pipelined_round(conns, equal, base_tid):
    """Each connection sends 4 requests at once, then reads the 4 answers:
    the wrong ones (id or value), as (connection, what came)."""
    wrong = []
    for i, s in enumerate(conns):
        frames = b""
        for k in range(4):
            addr = 7 if equal else (i * 4 + k) % 900
            frames += mbap((base_tid + i * 4 + k) & 0xFFFF, 1, bytes([3, addr >> 8, addr & 0xFF, 0, 1]))
        s.sendall(frames)
    for i, s in enumerate(conns):
        for k in range(4):
            addr = 7 if equal else (i * 4 + k) % 900
            want = ((base_tid + i * 4 + k) & 0xFFFF, 1, bytes([3, 2]) + struct.pack(">H", 1000 + addr))
            got = recv_frame(s)
            if got != want:
                wrong.append((i, k, got, want))
    return wrong


@contextlib.contextmanager
def loops_gateway(extra_tcp, **kw):
    """A gateway with these [tcp] keys, stopped (exit 0 checked) however the test ends."""
    g = Gateway(extra_tcp=extra_tcp, **kw)
    try:
        yield g
    finally:
        rc, _ = g.stop()
        check(rc == 0, f"stopped cleanly ({rc})")


def test_spread():
    with loops_gateway("loops = 2\nmax_clients = 200\nidle_timeout_s = 0\n", timeout_ms=300) as g:
        names = threads(g.p.pid)
        check("rtugw-tcp1" in names, f"a thread of its own for the second loop ({sorted(set(names))})")
        conns = [connect(g.tcp_port) for _ in range(64)]
        check(wait_for(lambda: sum(loops_of(g)) == 64, 5), f"64 connections counted ({loops_of(g)})")
        per_loop = loops_of(g)
        check(len(per_loop) == 2 and min(per_loop) > 0,
              f"the kernel spread them over both loops ({per_loop})")
        wrong = []
        for r in range(6):
            wrong += pipelined_round(conns, equal=r % 2 == 1, base_tid=r * 1000)
        check(not wrong, f"every answer to its own connection and id, unique and equal values ({wrong[:3]})")
        m = g.metrics()
        check(m.get("rtugw_tcp_discarded_total", 0) == 0, "no answer discarded")
        for s in conns:
            s.close()
        check(wait_for(lambda: sum(loops_of(g)) == 0, 5), f"every close counted on its loop ({loops_of(g)})")


def test_one_admission():
    with loops_gateway("loops = 2\nmax_clients = 10\nmax_per_address = 6\nidle_timeout_s = 0\n") as g:
        ones = [connect(g.tcp_port, "127.0.0.1") for _ in range(8)]
        served = [s for s in ones if answered(s, 1, 5)]
        check(len(served) == 6, f"max_per_address over both loops: 6 of 8 from 127.0.0.1 ({len(served)})")
        twos = [connect(g.tcp_port, "127.0.0.2") for _ in range(8)]
        served2 = [s for s in twos if answered(s, 2, 6)]
        check(len(served2) == 4, f"max_clients over both loops: 4 more of 8 from 127.0.0.2 ({len(served2)})")
        refused = [s for s in ones + twos if s not in served and s not in served2]
        check(all(closed_by_peer(s, 1) for s in refused), "the refused ones closed by the gateway")
        m = g.metrics()
        check(m.get("rtugw_tcp_refused_address_total") == 2 and m.get("rtugw_tcp_refused_full_total") == 4,
              f"each refusal counted ({m.get('rtugw_tcp_refused_address_total')}, "
              f"{m.get('rtugw_tcp_refused_full_total')})")
        served2[0].close()
        check(wait_for(lambda: g.metrics().get("rtugw_tcp_active") == 9, 3), "a close frees a place")
        again = connect(g.tcp_port, "127.0.0.2")
        check(answered(again, 3, 7), "the freed place is taken, whichever loop it lands on")
        for s in ones + twos + [again]:
            s.close()


def test_reload():
    with loops_gateway("loops = 2\nmax_clients = 100\nidle_timeout_s = 0\n") as g:
        old = [connect(g.tcp_port) for _ in range(16)]
        check(wait_for(lambda: min(loops_of(g) or [0]) > 0, 5), f"old connections on both loops ({loops_of(g)})")
        new_port = free_port()
        rev = (g.status().get("last_reload") or {}).get("revision")
        g.rewrite(g.text.replace(f"[tcp]\nport = {g.tcp_port}\n", f"[tcp]\nport = {new_port}\n")
                  .replace("loops = 2\n", "loops = 3\n"))
        g.p.send_signal(signal.SIGHUP)
        check(wait_for(lambda: (g.status().get("last_reload") or {}).get("revision") != rev, 5), "reloaded")
        check("tcp.loops" in g.status().get("restart_needed", ""),
              f"loops named as needing a restart ({g.status().get('restart_needed')})")
        check(len(loops_of(g)) == 2, f"two loops go on ({loops_of(g)})")
        fresh = [connect(new_port) for _ in range(32)]
        check(all(answered(s, 10 + i, i) for i, s in enumerate(fresh)), "the new port answers")
        check(wait_for(lambda: sum(loops_of(g)) == 48, 5) and min(loops_of(g)) >= 8,
              f"the new port's connections on both loops too ({loops_of(g)})")
        check(all(answered(s, 100 + i, i) for i, s in enumerate(old)), "the old connections still answered")
        try:
            socket.create_connection(("127.0.0.1", g.tcp_port), timeout=1).close()
            check(False, "the old port is closed")
        except OSError:
            check(True, "the old port is closed")
        before = g.metrics().get("rtugw_tcp_revoked_closed_total", 0)
        g.rewrite(g.text.replace("[tcp]\n", "[tcp]\nallow = 10.0.0.0/8\n", 1))
        g.p.send_signal(signal.SIGHUP)
        check(wait_for(lambda: g.metrics().get("rtugw_tcp_active") == 0, 5),
              f"an allow-list without them closes the clients of both loops ({loops_of(g)})")
        check(g.metrics().get("rtugw_tcp_revoked_closed_total", 0) - before == 48, "each one counted")
        check(all(closed_by_peer(s, 1) for s in old + fresh), "every client sees its connection closed")


def test_stop_with_requests_in_flight():
    g = Gateway(extra_tcp="loops = 2\nmax_clients = 100\nidle_timeout_s = 0\n", timeout_ms=300)
    conns = [connect(g.tcp_port) for _ in range(24)]
    check(wait_for(lambda: min(loops_of(g) or [0]) > 0, 5), f"connections on both loops ({loops_of(g)})")
    for i, s in enumerate(conns):   # owed answers on both loops when the stop comes
        s.sendall(b"".join(mbap(i * 8 + k, 1, bytes([3, 0, k, 0, 1])) for k in range(8)))
    rc, dt = g.stop()
    check(rc == 0 and dt < 4, f"SIGTERM with connections and requests on both loops: exit 0 in {dt:.2f} s ({rc})")
    for s in conns:
        s.close()


def test_one_per_cpu():
    """loops = 0: one loop per CPU the gateway may run on, within bus_share:
    on every CPU this test has, on one CPU (the affinity the gateway
    inherits, as taskset sets it), and capped by bus_share = 1."""
    cpus = os.sched_getaffinity(0)
    want = min(len(cpus), 4, 16)
    with loops_gateway("loops = 0\n") as g:
        per_loop = loops_of(g)
        names = threads(g.p.pid)
        check(len(per_loop) == want, f"{len(cpus)} CPUs, bus_share 4: {want} loops ({per_loop})")
        check(all(f"rtugw-tcp{k}" in names for k in range(1, want)) and f"rtugw-tcp{want}" not in names,
              f"a thread for each loop past the first ({sorted(set(names))})")
        s = connect(g.tcp_port)
        check(answered(s, 1, 5), "a read answered")
        s.close()
        # a reload of a file that says 0 again finds the same number: nothing to restart
        rev = (g.status().get("last_reload") or {}).get("revision")
        g.rewrite(g.text.replace("loops = 0\n", "loops = 0\nidle_timeout_s = 60\n"))
        g.p.send_signal(signal.SIGHUP)
        check(wait_for(lambda: (g.status().get("last_reload") or {}).get("revision") != rev, 5), "reloaded")
        check("tcp.loops" not in (g.status().get("restart_needed") or ""),
              f"loops = 0 again: no restart named ({g.status().get('restart_needed')})")
    os.sched_setaffinity(0, {min(cpus)})
    try:
        g = Gateway(extra_tcp="loops = 0\n")
    finally:
        os.sched_setaffinity(0, cpus)
    try:
        check(len(loops_of(g)) == 1, f"held to one CPU: one loop ({loops_of(g)})")
    finally:
        rc, _ = g.stop()
        check(rc == 0, f"stopped cleanly ({rc})")
    with loops_gateway("loops = 0\nbus_share = 1\n") as g:
        check(len(loops_of(g)) == 1, f"bus_share = 1: one loop ({loops_of(g)})")


def test_refused():
    """More loops than bus_share places, or out of range: refused, naming the line."""
    d = tempfile.mkdtemp(prefix="rtugw-loops-")
    try:
        cfg = os.path.join(d, "rtugw.conf")
        base = "[bus line]\nport = sim:1\n[tcp]\nport = 1502\n"
        check_config_refused(cfg, base + "loops = 5\n", ":5:", "loops = '5': above bus_share = 4 (default)")
        check_config_refused(cfg, base + "bus_share = 2\nloops = 3\n", ":6:",
                             "loops = '3': above bus_share = 2 (line 5)")
        check_config_refused(cfg, base + "loops = 17\nbus_share = 20\n", ":5:", "loops")
        check_config_refused(cfg, base.replace("[tcp]\nport = 1502", "[rtu_tcp]\nport = 1503") + "loops = -1\n", ":5:", "loops")
    finally:
        shutil.rmtree(d, ignore_errors=True)


run_tests("test_tcp_loops", [test_spread, test_one_admission, test_reload, test_stop_with_requests_in_flight,
                             test_one_per_cpu, test_refused])
