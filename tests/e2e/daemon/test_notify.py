#!/usr/bin/python3
"""The systemd notification protocol as rtugw speaks it without libsystemd
(gateway/notify.c): on a datagram socket bound here, as systemd binds one,
`rtugw demo` sends READY=1, then WATCHDOG=1 every half of $WATCHDOG_USEC,
then STOPPING=1 on SIGTERM; the same over an abstract ("@name") socket; no
keep-alive when $WATCHDOG_PID names another process. And libsystemd is
mapped neither by the loader (ldd) nor in the running process (/proc/PID/maps)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish, free_port  # noqa: E402

WATCHDOG_USEC = 200000          # keep-alive expected every 100 ms


def start_demo(notify_socket, **env_extra):
    env = dict(os.environ, NOTIFY_SOCKET=notify_socket, WATCHDOG_USEC=str(WATCHDOG_USEC), **env_extra)
    return subprocess.Popen([BIN, "demo", "--quiet", "--tcp-port", str(free_port()),
                             "--http-port", str(free_port())],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def receive_for(sock, seconds, until=None):
    """(arrival time, datagram) for each datagram within SECONDS, or up to the
    datagram UNTIL."""
    got, end = [], time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            got.append((time.monotonic(), sock.recv(4096).decode()))
        except socket.timeout:
            break
        if got[-1][1] == until:
            break
    return got


def bound_socket(address):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    return sock


def stop(proc, sock, what):
    """SIGTERM, then STOPPING=1 must come (possibly after a last WATCHDOG=1)."""
    proc.send_signal(signal.SIGTERM)
    after = receive_for(sock, 3, until="STOPPING=1")
    check(any("STOPPING=1" in d for _, d in after), f"{what}: STOPPING=1 after SIGTERM ({[d for _, d in after]})")
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    check(rc == 0, f"{what}: clean exit after SIGTERM (exit {rc})" + (f": {proc.stderr.read()[-400:]}" if rc else ""))


def first_ready(sock, proc, what):
    """Waits for READY=1 (15 s: a loaded machine starts slowly); True when it came
    before anything else."""
    sock.settimeout(15)
    try:
        d = sock.recv(4096).decode()
    except socket.timeout:
        d = None
    check(d == "READY=1", f"{what}: READY=1 is the first datagram (got {d!r}, exit {proc.poll()})")
    return d == "READY=1"


def test_path_socket():
    path = os.path.join(tempfile.mkdtemp(prefix="rtugw-notify-"), "notify")
    sock = bound_socket(path)
    proc = start_demo(path)
    if not first_ready(sock, proc, "path socket"):
        proc.kill()
        return
    # libsystemd is not in the running process's address space.
    maps = open(f"/proc/{proc.pid}/maps").read()
    check("libsystemd" not in maps, "libsystemd not mapped in the running daemon (/proc/PID/maps)")
    check("libgcrypt" not in maps, "nor libgcrypt, which libsystemd pulled in")
    ticks = [t for t, d in receive_for(sock, 1.0) if d == "WATCHDOG=1"]
    check(len(ticks) >= 5, f"path socket: >= 5 WATCHDOG=1 in ~1 s at a 100 ms period (got {len(ticks)})")
    gaps = sorted(b - a for a, b in zip(ticks, ticks[1:]))
    median = gaps[len(gaps) // 2] if gaps else float("inf")
    # Half of WATCHDOG_USEC, not the whole: the gaps sit near 100 ms, well below 200.
    check(median < 0.15, f"path socket: median keep-alive gap {median:.3f} s < 0.15 s")
    stop(proc, sock, "path socket")
    sock.close()
    os.unlink(path)


def test_abstract_socket():
    name = f"rtugw-notify-test-{os.getpid()}"
    sock = bound_socket("\0" + name)
    proc = start_demo("@" + name)
    if not first_ready(sock, proc, "abstract socket"):
        proc.kill()
        return
    ticks = [d for _, d in receive_for(sock, 0.6) if d == "WATCHDOG=1"]
    check(len(ticks) >= 2, f"abstract socket: READY=1 then WATCHDOG=1 ({len(ticks)} keep-alives in 0.6 s)")
    stop(proc, sock, "abstract socket")
    sock.close()


def test_watchdog_for_another_pid():
    """$WATCHDOG_PID of another process: the watchdog is not ours to feed."""
    path = os.path.join(tempfile.mkdtemp(prefix="rtugw-notify-"), "notify")
    sock = bound_socket(path)
    proc = start_demo(path, WATCHDOG_PID="1")
    if not first_ready(sock, proc, "foreign WATCHDOG_PID"):
        proc.kill()
        return
    msgs = [d for _, d in receive_for(sock, 0.6)]
    check("WATCHDOG=1" not in msgs, f"WATCHDOG_PID=1: no keep-alive ({msgs})")
    stop(proc, sock, "foreign WATCHDOG_PID")
    sock.close()
    os.unlink(path)


ldd = subprocess.run(["ldd", BIN], capture_output=True, text=True)
check(ldd.returncode == 0 and "libc.so" in ldd.stdout, f"ldd {BIN} runs ({ldd.stderr.strip()})")
check("libsystemd" not in ldd.stdout, "rtugw does not link libsystemd (ldd)")
test_path_socket()
test_abstract_socket()
test_watchdog_for_another_pid()
finish("test_notify")
