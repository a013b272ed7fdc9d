#!/usr/bin/python3
"""An independent Modbus RTU slave for the integrity tests, written for them
and sharing no code with rtugw (its own CRC, framing and timing), so that a
bug in rtugw's simulator cannot hide the same bug in the gateway.

It serves the master side of a fresh pseudo-terminal pair (os.openpty), keeps
the slave side open so the line never hangs up between clients, and makes
LINK a symlink to the slave side's /dev/pts/N: the gateway's [bus] port.

Holding (FC 3) and input (FC 4) register a of slave s holds s*1000 + a
(mod 65536) for a in 0..999 (--values unique, the default), or the same
equal values for every slave: --values zero (all 0), equal (all 0x2A2A),
alternate (0xFF00 at even addresses, 0x00FF at odd); FC 6 and FC 16 write holding registers. Other
functions answer exception 01, addresses outside 0..999 exception 02; other
slave ids and broadcasts are not answered.

One request at a time. What it does with requests that arrive while it is
busy (waiting to answer or answering) is its mode:
  default     deaf while busy: they are dropped unread, as by a slave that
              clears its receive buffer when it has answered;
  --in-order  they wait in its queue and are answered one after the other,
              in arrival order, each after the one before (a slow PLC).
Faults, each on every answer unless said otherwise:
  --turnaround-ms N  wait N ms before answering (a slow slave);
  --late-ms N        wait N ms more (always late);
  --noise-bytes N    N random bytes before the answer, --noise-lead-ms before
                     it (default: half the wait), for the first --noise-count
                     answers only (0: every answer);
  --double-gap-ms N  send every answer twice, the copy N ms after the first;
  --copy-stall-every N --copy-stall-ms M  every Nth copy M ms later still
                     (the slave stalled between its answer and the copy);
  --stall-every N --stall-ms M  every Nth answer M ms later still (a PLC
                     busy with its own program now and then).
On SIGTERM it prints its counters on standard error and exits 0.

    /usr/bin/python3 tests/lib/rtu_slave.py --link DIR/plc --slaves 1,2 --late-ms 40 --in-order
"""
import argparse
import collections
import os
import random
import select
import signal
import struct
import sys
import threading
import time
import tty

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import crc16  # noqa: E402  (CRC-16/MODBUS, bit by bit)

REGISTERS = 1000


def with_crc(body):
    return body + crc16(body)


def request_length(buf):
    """The whole request's length from its first bytes, or None (need more),
    or 0 (no rule: not a function this slave frames)."""
    if len(buf) < 2:
        return None
    fc = buf[1]
    if 1 <= fc <= 6:
        return 8
    if fc in (15, 16):
        return 9 + buf[6] if len(buf) >= 7 else None
    if fc == 22:
        return 10
    if fc == 23:
        return 13 + buf[10] if len(buf) >= 11 else None
    return 0


class Slave:
    def __init__(self, args):
        self.args = args
        self.units = set(int(s) for s in args.slaves.split(","))
        self.regs = {}
        self.rng = random.Random(args.seed)
        self.counts = collections.Counter()
        self.buf = b""
        self.last_byte = 0.0
        self.master, self.hold = os.openpty()
        tty.setraw(self.master)
        tty.setraw(self.hold)
        self.path = os.ttyname(self.hold)
        self.queue = collections.deque()
        self.cv = threading.Condition()
        self.stopping = False

    # ---- the register model -------------------------------------------------------------

    def value(self, unit, addr):
        return self.regs.get((unit, addr), initial_value(self.args.values, unit, addr))

    def answer(self, req):
        """The answer frame to a CRC-good request, or None."""
        unit, fc = req[0], req[1]
        if unit not in self.units:
            self.counts["other slaves"] += 1
            return None
        self.counts["requests"] += 1
        exc = lambda code: with_crc(bytes([unit, fc | 0x80, code]))  # noqa: E731
        if fc in (3, 4):
            addr, qty = struct.unpack(">HH", req[2:6])
            if not 1 <= qty <= 125:
                return exc(3)
            if addr + qty > REGISTERS:
                return exc(2)
            words = [self.value(unit, addr + k) if fc == 3 else initial_value(self.args.values, unit, addr + k)
                     for k in range(qty)]
            return with_crc(bytes([unit, fc, 2 * qty]) + struct.pack(f">{qty}H", *words))
        if fc == 6:
            addr, value = struct.unpack(">HH", req[2:6])
            if addr >= REGISTERS:
                return exc(2)
            self.regs[(unit, addr)] = value
            return req
        if fc == 16:
            addr, qty = struct.unpack(">HH", req[2:6])
            if not 1 <= qty <= 123 or req[6] != 2 * qty:
                return exc(3)
            if addr + qty > REGISTERS:
                return exc(2)
            for k in range(qty):
                self.regs[(unit, addr + k)] = struct.unpack(">H", req[7 + 2 * k:9 + 2 * k])[0]
            return with_crc(req[:6])
        return exc(1)

    # ---- the line --------------------------------------------------------------------------

    def write(self, data):
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.master, view)
                view = view[n:]
            except BlockingIOError:
                select.select([], [self.master], [], 1.0)

    def send_answer(self, frame, t_req):
        a = self.args
        wait = (a.turnaround_ms + a.late_ms) / 1000.0
        if a.stall_every and (self.counts["answers"] + 1) % a.stall_every == 0:
            wait += a.stall_ms / 1000.0
            self.counts["stalls"] += 1
        noisy = a.noise_bytes and (a.noise_count == 0 or self.counts["answers"] < a.noise_count)
        if noisy:
            lead = (a.noise_lead_ms if a.noise_lead_ms is not None else wait * 500) / 1000.0
            sleep_until(t_req + max(0.0, wait - lead))
            self.write(bytes(self.rng.randrange(256) for _ in range(a.noise_bytes)))
            self.counts["noise bursts"] += 1
            sleep_until(time.monotonic() + lead)
        else:
            sleep_until(t_req + wait)
        self.write(frame)
        self.counts["answers"] += 1
        if a.double_gap_ms:
            gap = a.double_gap_ms
            if a.copy_stall_every and (self.counts["copies"] + 1) % a.copy_stall_every == 0:
                gap += a.copy_stall_ms
                self.counts["copies stalled"] += 1
            time.sleep(gap / 1000.0)
            self.write(frame)
            self.counts["copies"] += 1

    def frames(self):
        """CRC-good requests taken from the buffer; resynchronises byte by byte."""
        out = []
        while len(self.buf) >= 2:
            n = request_length(self.buf)
            if n is None or (n and len(self.buf) < n):
                break
            if n and crc16(self.buf[:n]) == b"\0\0":
                out.append(self.buf[:n])
                self.buf = self.buf[n:]
                continue
            self.counts["bytes skipped"] += 1
            self.buf = self.buf[1:]
        return out

    def read_some(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            # silence: a partial request older than 3.5 characters (2 ms on a pty) is noise
            if self.buf and time.monotonic() - self.last_byte > 0.002:
                self.counts["bytes skipped"] += len(self.buf)
                self.buf = b""
            return []
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return []
        self.last_byte = time.monotonic()
        self.buf += data
        return [(f, self.last_byte) for f in self.frames()]

    def serve_deaf(self):
        """Default: one at a time; what arrives while busy is dropped."""
        while not self.stopping:
            for req, t in self.read_some(0.2)[:1]:
                frame = self.answer(req) if req[0] else None
                if frame:
                    self.send_answer(frame, t)
                self.drop_input()
                break

    def drop_input(self):
        dropped = len(self.buf)
        self.buf = b""
        while select.select([self.master], [], [], 0)[0]:
            try:
                dropped += len(os.read(self.master, 4096))
            except OSError:
                break
        if dropped:
            self.counts["bytes dropped while busy"] += dropped

    def serve_in_order(self):
        """--in-order: a reader thread queues requests; this one answers them."""
        def reader():
            while not self.stopping:
                got = self.read_some(0.2)
                with self.cv:
                    if got and (self.queue or self.busy):
                        self.counts["queued"] += len(got)
                    self.queue.extend(got)
                    self.cv.notify()
        self.busy = False
        threading.Thread(target=reader, daemon=True).start()
        while not self.stopping:
            with self.cv:
                while not self.queue and not self.stopping:
                    self.cv.wait(0.2)
                if self.stopping:
                    break
                req, _ = self.queue.popleft()
                self.busy = True
            frame = self.answer(req) if req[0] else None
            if frame:
                # a queued request is served from when the slave gets to it
                self.send_answer(frame, time.monotonic())
            with self.cv:
                self.busy = False


def initial_value(values, unit, addr):
    """A register's value before any write (--values)."""
    if values == "zero":
        return 0
    if values == "equal":
        return 0x2A2A
    if values == "alternate":
        return 0x00FF if addr & 1 else 0xFF00
    return (unit * 1000 + addr) & 0xFFFF


def sleep_until(t):
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        time.sleep(left)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--link", required=True)
    p.add_argument("--slaves", default="1,2,3")
    p.add_argument("--in-order", action="store_true")
    p.add_argument("--turnaround-ms", type=float, default=0.0)
    p.add_argument("--late-ms", type=float, default=0.0)
    p.add_argument("--noise-bytes", type=int, default=0)
    p.add_argument("--noise-lead-ms", type=float, default=None)
    p.add_argument("--noise-count", type=int, default=0)
    p.add_argument("--double-gap-ms", type=float, default=0.0)
    p.add_argument("--copy-stall-every", type=int, default=0)
    p.add_argument("--copy-stall-ms", type=float, default=0.0)
    p.add_argument("--stall-every", type=int, default=0)
    p.add_argument("--stall-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--values", choices=("unique", "zero", "equal", "alternate"), default="unique")
    args = p.parse_args()
    slave = Slave(args)
    if os.path.islink(args.link):
        os.unlink(args.link)
    os.symlink(slave.path, args.link)

    def stop(signo, frame):
        slave.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(slave.path, flush=True)
    print(f"rtu_slave: slaves {args.slaves} on {slave.path} via {args.link}"
          f"{', in order' if args.in_order else ''}", file=sys.stderr, flush=True)
    try:
        if args.in_order:
            slave.serve_in_order()
        else:
            slave.serve_deaf()
    finally:
        os.unlink(args.link)
        print("rtu_slave: " + ", ".join(f"{v} {k}" for k, v in sorted(slave.counts.items())),
              file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
