#!/usr/bin/python3
"""What a fault costs a healthy slave afterwards, through a real gateway.

Two rows, each for every binary named (default: ./rtugw, and /work/base/rtugw
when it exists, so before and after come from one run on one machine):

  give-up: a slave drops both attempts of a read (retries = 1), the client
      gets 0x0B and at once reads again, the slave now answering normally:
      the time from the 0x0B to that answer (issue 31's target: within one
      timeout and two transactions' wire time);
  zero blocks: a new slave whose registers are all zero, read 10 registers at
      a time, block after block: the time of each read after the first.

The slave is this script's own (a pseudo-terminal, no code shared with
rtugw), answering FC 3 with zeros after 2 ms. Figures: median and p10-p90 in
ms over --trials trials.

    /usr/bin/python3 bench/give-up-recovery.py [--trials 50] [--timeout-ms 100] [BIN...]
"""
import argparse
import os
import select
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import tty

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
import rtugwtest  # noqa: E402
sys.path.insert(0, HERE)
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def crc16(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return struct.pack("<H", crc)


class ZeroSlave(threading.Thread):
    """Slave 1 on a pty: FC 3 answered with zeros; drop > 0 ignores that many requests."""

    def __init__(self, link):
        super().__init__(daemon=True)
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.slave_fd = slave
        os.symlink(os.ttyname(slave), link)
        self.drop = 0
        self.stop = False

    def run(self):
        buf = b""
        while not self.stop:
            r, _, _ = select.select([self.master], [], [], 0.004 if buf else 0.2)
            if r:
                buf += os.read(self.master, 512)
                continue
            if len(buf) >= 8 and buf[0] == 1 and crc16(buf[:-2]) == buf[-2:] and buf[1] == 3:
                if self.drop > 0:
                    self.drop -= 1
                else:
                    qty = buf[4] << 8 | buf[5]
                    time.sleep(0.002)
                    pdu = bytes([1, 3, 2 * qty]) + bytes(2 * qty)
                    os.write(self.master, pdu + crc16(pdu))
            buf = b""


def read(sock, tid, addr, qty):
    sock.sendall(rtugwtest.mbap(tid, 1, struct.pack(">BHH", 3, addr, qty)))
    got = rtugwtest.recv_frame(sock)
    return got[2]


def pct(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10)
    return (f"median {statistics.median(xs):7.1f} ms  p10-p90 {q[0]:6.1f}-{q[-1]:6.1f} ms  "
            f"max {xs[-1]:6.1f} ms  (n={len(xs)})")


def bench(binary, trials, timeout_ms):
    rtugwtest.BIN = binary
    d = tempfile.mkdtemp(prefix="rtugw-giveup-")
    link = os.path.join(d, "plc")
    slave = ZeroSlave(link)
    slave.start()
    g = rtugwtest.Gateway(bus=f"port = {link}\nbaud = 19200\n", timeout_ms=timeout_ms,
                          devices="[device plc]\nslave = 1\ndead_after = 0\n", log_level="warn")
    s = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=10)
    tid = 0
    # zero blocks first, on a new slave
    blocks = []
    for i in range(trials + 1):
        tid += 1
        t = time.monotonic()
        pdu = read(s, tid, 10 * i, 10)
        if i:
            blocks.append((time.monotonic() - t) * 1000)
        assert pdu == bytes([3, 20]) + bytes(20), pdu
    recover = []
    for i in range(trials):
        slave.drop = 2
        tid += 1
        pdu = read(s, tid, 500 + 2 * i, 2)
        assert pdu == b"\x83\x0b", pdu
        slave.drop = 0
        t = time.monotonic()
        tid += 1
        pdu = read(s, tid, 600 + 2 * i, 2)
        recover.append((time.monotonic() - t) * 1000)
        assert pdu == b"\x03\x04" + bytes(4), pdu
        time.sleep(0.05)
    s.close()
    g.stop()
    slave.stop = True
    return blocks, recover


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--timeout-ms", type=int, default=100)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: 3 trials of the first binary; checks the output, not the figures "
                         "(every answer is checked against the slave's zeros in any mode)")
    ap.add_argument("bins", nargs="*")
    a = ap.parse_args()
    bins = a.bins or ["./rtugw"] + (["/work/base/rtugw"] if os.path.exists("/work/base/rtugw") and not a.smoke else [])
    if a.smoke:
        a.trials, bins = 3, bins[:1]
    # 19200 baud: a read of 2 registers is 8 + 9 bytes on the wire, 11 bits each
    bound = a.timeout_ms + 2 * 17 * 11 * 1000 / 19200
    print(f"response_timeout_ms = {a.timeout_ms}, retries = 1; give-up target: {bound:.1f} ms")
    for b in bins:
        blocks, recover = bench(b, a.trials, a.timeout_ms)
        print(f"{b}\n  zero blocks (each read after the first): {pct(blocks)}\n"
              f"  give-up, next answer after the 0x0B:      {pct(recover)}", flush=True)
        if a.smoke:   # a wrong answer has already stopped the run (the asserts in bench())
            smoke.check("give-up-recovery.py", {"zero_block_ms": statistics.median(blocks),
                                                 "recovery_ms": statistics.median(recover), "trials": len(recover)},
                        ["zero_block_ms", "recovery_ms", "trials"], at_least={"trials": a.trials})


if __name__ == "__main__":
    main()
