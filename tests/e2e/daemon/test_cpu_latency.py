#!/usr/bin/python3
"""[gateway] cpu_latency_us (daemon/cpu_latency.c): the kernel's CPU latency
request, read back from /dev/cpu_dma_latency (reading it gives the smallest
request any process holds), follows the configuration: held at start,
replaced and dropped by a reload without a restart, gone with the process,
and shown as it is in /status (cpu_latency_us) and /metrics. A
daemon that may not write the device (run as nobody) says so, naming the
device and the reason, and serves all the same; a reload that cannot apply
the key says so and names it as waiting for a restart. Bad values are
refused with the file, line and value."""
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import (BIN, Daemon, Gateway, check, fetch_status, finish, free_port, procs, wait_for,  # noqa: E402
                       wait_listening)

DEVICE = "/dev/cpu_dma_latency"
# The request in force is the whole machine's: the tests and benches that hold
# one (test_bench_wire.sh, bench/wakeup.py's smoke) take this lock, so that
# under `make -j check` none of them reads another's request as its own.
LOCK = "/tmp/rtugw-cpu-latency.lock"


def in_force():
    with open(DEVICE, "rb") as f:
        return struct.unpack("i", f.read(4))[0]


if os.geteuid() != 0 or not os.path.exists(DEVICE):
    check(False, f"this test reads {DEVICE}, root's: run it as root on a kernel with PM QoS "
                 f"(uid {os.geteuid()}, device {'present' if os.path.exists(DEVICE) else 'absent'})")
    finish("cpu latency")
lock = open(LOCK, "w")
fcntl.flock(lock, fcntl.LOCK_EX)
base = in_force()
check(base > 100, f"no other process holds a request under 100 us ({base}): else ours could not be told apart")


def reload_to(g, value, n):
    """[gateway] cpu_latency_us = value, SIGHUP, until the n-th reload is logged."""
    line = "cpu_latency_us = " + g.text.split("cpu_latency_us = ")[1].split("\n")[0] + "\n"
    g.rewrite(g.text.replace(line, f"cpu_latency_us = {value}\n"))
    g.p.send_signal(signal.SIGHUP)
    return wait_for(lambda: g.log_text().count("SIGHUP: reloaded") >= n, 10)


def last_reload(log):
    """The log's line of its last reload's verdict, after "SIGHUP: reloaded"."""
    return log.split("SIGHUP: reloaded")[-1].split("\n")[0]


# Held at start, replaced and dropped by a reload, gone with the process.
g = Gateway(gateway_extra="cpu_latency_us = 7\n")
check(wait_for(lambda: in_force() == 7, 5), f"a request of 7 us in force at start ({in_force()})")
check("cpu latency: a request of 7 us held (/dev/cpu_dma_latency)" in g.log_text(), "the log says it is held")
check(g.status().get("cpu_latency_us") == 7 and g.metrics().get("rtugw_cpu_latency_request_us") == 7,
      "/status and /metrics show the request in force")
check(reload_to(g, "3", 1) and in_force() == 3, f"a reload to 3 us: in force without a restart ({in_force()})")
verdict = last_reload(g.log_text())
check("applied" in verdict and "cpu_latency_us" in verdict, f"the reload names it applied: {verdict!r}")
check(reload_to(g, "off", 2) and in_force() == base, f"a reload to off: no request left ({in_force()} vs {base})")
check("SIGHUP: cpu_latency_us = off: no request held" in g.log_text(), "the log says it was dropped")
check("cpu_latency_us" in g.status() and g.status()["cpu_latency_us"] is None and
      g.metrics().get("rtugw_cpu_latency_request_us") == -1, "/status shows null, /metrics -1")
check(reload_to(g, "9", 3) and in_force() == 9, f"on again: 9 us ({in_force()})")
c = g.client()
r = c.read_holding_registers(0, 3, slave=1)
check(not r.isError() and r.registers == [1000, 1001, 1002], f"serving meanwhile: {r}")
c.close()
rc, _ = g.stop()
check(rc == 0 and in_force() == base, f"clean stop, and the request went with the process ({in_force()})")

# Off by default: no request, nothing said.
g = Gateway()
check(in_force() == base and "cpu latency" not in g.log_text(), "no request unless configured")
g.stop()

# Bad values: the file, the line and the value.
d = tempfile.mkdtemp(prefix="rtugw-cpulat-")
for bad in ("fast", "1000001", "-1", "07x", ""):
    f = os.path.join(d, "bad.ini")
    with open(f, "w") as out:
        out.write(f"[gateway]\ncpu_latency_us = {bad}\n[bus a]\nport = sim\n")
    p = subprocess.run([BIN, "check", "-c", f], capture_output=True, text=True)
    check(p.returncode == 2 and f"{f}:2: [gateway] cpu_latency_us = '{bad}'" in p.stderr,
          f"cpu_latency_us = {bad!r} refused with file, line and value: {p.stderr.strip()!r}")

# A daemon that may not write the device (nobody): said, served all the same.
os.chmod(d, 0o755)
tcp, http = free_port(), free_port()
cfg = os.path.join(d, "nobody.ini")
text = (f"[gateway]\ncpu_latency_us = 0\n[bus a]\nport = sim\n[device d]\nslave = 1\n"
        f"[tcp]\nport = {tcp}\ndefault_bus = a\n[http]\nport = {http}\n")
with open(cfg, "w") as out:
    out.write(text)
os.chmod(cfg, 0o644)
nobody = Daemon()
nobody.log, nobody.http_port = open(os.path.join(d, "log"), "w+"), http
nobody.p = p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BIN, "run", "-c",
                                 cfg], stdout=nobody.log, stderr=nobody.log)
procs.append(p)
check(wait_listening(tcp, p) and wait_listening(http, p), "running as nobody")
time.sleep(0.2)
said = nobody.log_text()
check("[gateway] cpu_latency_us = 0 not applied: /dev/cpu_dma_latency: Permission denied" in said and
      "running without it" in said, f"the warning names the key, the device and the reason: {said[-400:]!r}")
check(in_force() == base, "no request in force")
st = fetch_status(http)
check(st.get("cpu_latency_us", "absent") is None, f"/status says none is held: {st.get('cpu_latency_us', 'absent')}")
from pymodbus.client import ModbusTcpClient  # noqa: E402
c = ModbusTcpClient("127.0.0.1", port=tcp, timeout=3)
r = c.read_holding_registers(0, 2, slave=1)
check(not r.isError() and r.registers == [1000, 1001], f"serves all the same: {r}")
c.close()
with open(cfg, "w") as out:
    out.write(text.replace("cpu_latency_us = 0", "cpu_latency_us = 4"))
p.send_signal(signal.SIGHUP)
check(wait_for(lambda: "SIGHUP: reloaded" in nobody.log_text(), 10), "the reload ran")
said = nobody.log_text()
check("SIGHUP: [gateway] cpu_latency_us = 4 not applied" in said and "the request in force stays" in said,
      f"a reload that cannot apply it says so: {said[-400:]!r}")
st = fetch_status(http)
check(st.get("cpu_latency_us", "absent") is None and "cpu_latency_us" in st["restart_needed"],
      f"/status: still none held, the key in restart_needed ({st.get('restart_needed')})")
verdict = last_reload(said)
check(verdict.count("cpu_latency_us") == 1 and "restart" in verdict,
      f"and names it as waiting for a restart: {verdict!r}")
nobody.stop()   # exit 0 on SIGTERM, no sanitizer report
shutil.rmtree(d)
finish("cpu latency")
