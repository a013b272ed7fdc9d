#!/usr/bin/python3
"""Connection identity: 100,000 connect/close cycles, each leaving an answer
owed (a request sent, then the connection reset), then a new client must get
only its own answers: the right transaction ids and the values of the
addresses it asked for. Before the 48-bit generation, the 16-bit one wrapped
after 65,535 cycles and a new client was handed another client's answer.
RTUGW_CHURN overrides the cycle count (for a longer run)."""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, finish, mbap, procs, recv_frame  # noqa: E402

CYCLES = int(os.environ.get("RTUGW_CHURN", "100000"))
LINGER0 = struct.pack("ii", 1, 0)


def main():
    g = Gateway(extra_tcp="max_clients = 1024\nidle_timeout_s = 0\n", timeout_ms=100)
    t0 = time.time()
    # A connection reset while still in the listen backlog is dropped by the
    # kernel, never accepted; the backlog is SOMAXCONN, so a gateway slowed
    # down (a sanitizer build) accepts fewer of the cycles. What matters is
    # enough accepted to wrap a 16-bit generation: cycle on, in batches, until
    # there are (at most 4 x CYCLES).
    target = 65536 + 1000 if CYCLES >= 70000 else 0
    i = 0
    while True:
        for _ in range(10000):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
            s.connect(("127.0.0.1", g.tcp_port))
            addr = i % 900
            s.sendall(mbap(i & 0xFFFF, 1, bytes([3, addr >> 8, addr & 0xFF, 0, 1])))
            s.close()   # reset: its answer is owed to a connection that is gone
            i += 1
        if i >= CYCLES and (not target or i >= 4 * CYCLES or
                            g.metrics().get("rtugw_tcp_accepted_total", 0) > target):
            break
    dt = time.time() - t0
    print(f"{i} connect/send/reset cycles in {dt:.1f} s", flush=True)
    # The answers owed are not the subject here: let the gateway work off
    # the requests of the connections that left, then ask as a new client.
    t1 = time.time()
    while time.time() - t1 < 60:
        m = g.metrics()
        if m.get('rtugw_bus_queue_depth{bus="line"}', 1) == 0 and m.get("rtugw_tcp_active", 1) == 0:
            break
        time.sleep(0.2)
    c = socket.create_connection(("127.0.0.1", g.tcp_port))
    c.settimeout(5)
    wrong = []
    for k in range(200):
        tid, addr = 0x8000 + k, 100 + k
        c.sendall(mbap(tid, 1, bytes([3, addr >> 8, addr & 0xFF, 0, 1])))
        f = recv_frame(c)
        want = (tid, 1, bytes([3, 2]) + struct.pack(">H", 1000 + addr))
        if f != want:
            wrong.append((k, f))
    check(not wrong, f"after {i} cycles a new client gets only its own answers ({len(wrong)} of 200 wrong: {wrong[:2]})")
    m = g.metrics()
    accepted = m.get("rtugw_tcp_accepted_total", 0)
    # A connection reset before the gateway accepted it is dropped by the
    # kernel; what matters is enough of them to wrap a 16-bit generation.
    check(accepted > target,
          f"enough connections to wrap a 16-bit generation many times over ({accepted:.0f} of {i})")
    gone = m.get('rtugw_bus_gone_dropped_total{bus="line"}', 0)
    print(f"requests of gone connections dropped before the line: {gone:.0f}; "
          f"answers discarded: {m.get('rtugw_tcp_discarded_total', 0):.0f}")
    c.close()
    g.stop()


try:
    main()
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
finish("conn_identity")
