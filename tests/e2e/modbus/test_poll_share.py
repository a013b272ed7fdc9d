#!/usr/bin/python3
"""The polls' share of a busy bus ([bus] poll_share, line/queue.c), against a
real `rtugw run` on the built-in simulator's pseudo-terminal at 115200 (its
t3.5 quiet bounds the bus at a few hundred transactions a second) and
Modbus TCP clients on 127.0.0.1 that always have a request waiting:

  - with the default (20), a tag polled every 100 ms stays fresh while the
    clients keep the bus full: its age stays under a second, and
    rtugw_bus_poll_turns_total counts the polls that went ahead of them;
  - poll_share = 0, made live by SIGHUP (bus_keys, nothing restarted, the
    clients' connections kept): the strict tcp_first of before, under which
    the same tag goes stale (no poll while a client waits) and no turn is
    counted;
  - every client answer is checked: unique values (slave 1's holding
    0..7 = 1000..1007) on some connections, equal values (a block written
    with one value) on the others; none wrong, none lost, none an exception.
On the build before poll_share the first part fails: the tag's age grows
past a second under the clients (the storm's 160-180 MQTT values/s)."""
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config"))
from rtugwtest import Gateway, check, mbap, recv_frame, run_tests, wait_for  # noqa: E402
from tagscheck import tag_values  # noqa: E402
from test_live_change import hup  # noqa: E402

CLIENTS = 24
EQUAL = 77   # the value written to holding 100..107: equal registers


class Clients:
    """CLIENTS connections, each asking again as soon as it is answered;
    every answer checked against what its request must read."""

    def __init__(self, port):
        self.port, self.stop = port, threading.Event()
        self.answers = self.wrong = self.exceptions = self.lost = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(k,), daemon=True) for k in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def run(self, k):
        address, want = (0, list(range(1000, 1008))) if k % 2 == 0 else (100, [EQUAL] * 8)
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        tid = 0
        while not self.stop.is_set():
            tid = (tid + 1) & 0xFFFF
            try:
                s.sendall(mbap(tid, 1, struct.pack(">BHH", 3, address, 8)))
                got = recv_frame(s)
            except OSError:
                got = None
            with self.lock:
                if got is None:
                    self.lost += 1
                    return
                rtid, _, body = got
                if rtid != tid:
                    self.wrong += 1
                elif body[0] & 0x80:
                    self.exceptions += 1
                elif list(struct.unpack(">8H", body[2:18])) != want:
                    self.wrong += 1
                else:
                    self.answers += 1
        s.close()

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)


def turns(g):
    return g.metrics().get('rtugw_bus_poll_turns_total{bus="line"}', 0)


def worst_age(g, seconds):
    """The oldest t1 was seen over `seconds`, sampled every 100 ms."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        t = tag_values(g).get("t1", {})
        worst = max(worst, t.get("age_s") if t.get("age_s") is not None else 99.0)
        time.sleep(0.1)
    return worst


def test_polls_keep_their_share():
    devs = ("[device m1]\nslave = 1\n"
            "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 100\n")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=devs, timeout_ms=300)
    c = g.client()
    check(not c.write_registers(100, [EQUAL] * 8, slave=1).isError(), "holding 100..107 written with one value")
    c.close()
    check(wait_for(lambda: tag_values(g).get("t1", {}).get("value") == 1010, 5), "t1 polled: 1010")
    clients = Clients(g.tcp_port)
    try:
        check(wait_for(lambda: g.status()["buses"][0]["queue_depth"] > 0, 5), "the clients keep the bus's queue busy")
        t0, a0 = turns(g), clients.answers
        age = worst_age(g, 3.0)
        t1, a1 = turns(g), clients.answers
        print(f"poll_share = 20: t1's worst age {age:.3f} s, {t1 - t0:.0f} poll turns, "
              f"{(a1 - a0) / 3.0:.0f} client answers/s")
        check(age < 1.0, f"t1 stays fresh under the clients ({age:.3f} s)")
        check(t1 - t0 >= 10, f"polls went ahead of waiting clients ({t1 - t0:.0f} turns in 3 s)")
        check(a1 - a0 > 100, f"the clients are served ({a1 - a0} answers in 3 s)")

        hup(g, g.text.replace("baud = 115200\n", "baud = 115200\npoll_share = 0\n"))
        check(wait_for(lambda: (g.status()["last_reload"] or {}).get("applied") and
                       "bus_keys" in g.status()["last_reload"]["applied"], 5),
              f"poll_share = 0 applied live: {g.status()['last_reload']}")
        check(g.status()["restart_needed"] == "", "nothing waits for a restart")
        time.sleep(0.3)
        t2, a2 = turns(g), clients.answers
        age = worst_age(g, 3.0)
        t3, a3 = turns(g), clients.answers
        print(f"poll_share = 0: t1's worst age {age:.3f} s, {t3 - t2:.0f} poll turns, "
              f"{(a3 - a2) / 3.0:.0f} client answers/s")
        check(t3 == t2, f"no poll went ahead of a waiting client ({t3 - t2:.0f} turns)")
        check(age > 1.5, f"without the share the tag goes stale under the clients ({age:.3f} s)")
        check(a3 - a2 > 100, f"the clients still served on their connections ({a3 - a2} answers in 3 s)")
    finally:
        clients.close()
    print(f"clients: {clients.answers} answers right, {clients.wrong} wrong, {clients.exceptions} exceptions, "
          f"{clients.lost} lost")
    check(clients.wrong == 0 and clients.exceptions == 0 and clients.lost == 0,
          "every client answer right: none wrong, none an exception, none lost")
    g.stop()


if __name__ == "__main__":
    run_tests("test_poll_share", [test_polls_keep_their_share])
