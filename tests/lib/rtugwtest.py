"""Helpers shared by the Python end-to-end tests: the binary under test, a
check that counts failures instead of stopping at the first, and a free
port on 127.0.0.1, the daemon's /metrics as a dict, a gateway started on a
config of its own, raw MBAP framing, the checks made when a daemon stops.
Each test script ends with `finish(NAME)`."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = os.environ.get("RTUGW_BIN", "./rtugw")
# How much slower than this machine the daemon may run: 1 natively, more under
# emulation (scripts/cross-check-common sets it for qemu at idle priority).
# It widens the wall-clock bounds a test sets on the daemon, never the
# bounds of the behaviour (a count, a value, an order), which stay as they are.
SLOWDOWN = float(os.environ.get("RTUGW_TEST_SLOWDOWN", "1"))
_failures = [0]
_failed_checks = []   # repeated by finish(): CI shows a log's tail, and a failure may be far above it


def check(cond, what, quiet=False):
    if not cond:
        _failures[0] += 1
        _failed_checks.append(what)
        print("FAIL:", what, flush=True)
    elif not quiet:
        print("ok:", what, flush=True)


def failure_count():
    return _failures[0]


def crc16(data):
    """CRC-16/MODBUS of data, as the two bytes an RTU frame ends with (low first)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return bytes((crc & 0xFF, crc >> 8))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(cond, timeout, step=0.05):
    """Until cond() is true or timeout seconds have passed; cond()'s last answer.
    A socket error in cond() before the deadline (an HTTP fetch timed out on a
    slow machine: qemu-arm at idle priority in CI) counts as not yet; the last
    call's error is raised. The wait is widened by SLOWDOWN: a bound on the
    daemon, never a count."""
    deadline = time.time() + timeout * SLOWDOWN
    while time.time() < deadline:
        try:
            if cond():
                return True
        except OSError:
            pass
        time.sleep(step)
    return cond()


def fetch_metrics(http_port, timeout=3, headers=None):
    """The daemon's /metrics as {'name{labels}': value} (headers: a credential, where users are configured)."""
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}/metrics", headers=headers or {})
    text = urllib.request.urlopen(req, timeout=timeout).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def fetch_status(http_port, timeout=3):
    """The daemon's /status, parsed."""
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status", timeout=timeout).read())


procs = []   # every daemon started, killed by the scripts' own clean-up


def wait_listening(port, proc, seconds=10):
    """Until something accepts on 127.0.0.1:port, or proc has exited."""
    deadline = time.time() + seconds * SLOWDOWN
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            if proc.poll() is not None:
                return False
            time.sleep(0.05)
    return False


def sanitized():
    """A sanitizer build: ASan keeps freed memory in quarantine (hundreds of
    MiB by default), so a resident-memory bound that holds for the daemon
    does not hold for it; such bounds are given a sanitizer margin."""
    with open(BIN, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


# A peak-memory bound, in KiB: what the daemon may grow by while it refuses
# hostile payloads (8 MiB; 48 MiB under a sanitizer's quarantine, still far
# below the 37-94 MiB the unbounded decoders grew by).
def rss_growth_bound_kib():
    return 48 * 1024 if sanitized() else 8 * 1024


def status_kib(pid, field):
    """A /proc/PID/status figure in KiB: VmRSS, VmHWM (the peak); -1 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def sanitizer_env():
    """The environment for a daemon: under TSan, tests/lib/tsan.supp (libmosquitto's
    internal lock order, which one thread cannot deadlock; see the file)."""
    env = dict(os.environ)
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsan.supp")
    if "suppressions=" not in env.get("TSAN_OPTIONS", ""):
        env["TSAN_OPTIONS"] = (env.get("TSAN_OPTIONS", "") + f" suppressions={supp}").strip()
    return env


class Gateway:
    def __init__(self, extra_tcp="", bus="port = sim:1,2,3\nbaud = 19200\n", devices=None, extra="",
                 log_level="info", timeout_ms=150, nofile=None, gateway_extra="", dir=None):
        self.tcp_port, self.http_port = free_port(), free_port()
        # dir: the caller's folder, where its tag files are (files the
        # configuration names stay under the configuration's folder); the
        # caller removes it. Else a folder of its own, removed at stop().
        self.own_dir = dir is None
        self.dir = tempfile.mkdtemp(prefix="rtugw-test-") if dir is None else dir
        self.cfg = os.path.join(self.dir, "rtugw.conf")
        devices = devices if devices is not None else "".join(
            f"[device d{s}]\nslave = {s}\ndead_after = {0 if s == 8 else 2}\ndead_backoff_ms = 3000\n"
            for s in (1, 2, 3, 8, 9))
        # a key given twice is an error: the default only when the caller sets none
        tcp_defaults = "" if "max_clients" in extra_tcp else "max_clients = 64\n"
        # the tests' certificates, spools and state live in folders of their
        # own under the temporary folder: declared, as a package declares
        # /var/lib/rtugw (config/paths.c), unless the caller says otherwise
        if "data_dirs" not in gateway_extra:
            gateway_extra = f"data_dirs = {tempfile.gettempdir()}\n" + gateway_extra
        self.text = (f"[gateway]\nlog_level = {log_level}\n{gateway_extra}[bus line]\n{bus}response_timeout_ms = {timeout_ms}\nretries = 1\n"
                     f"{devices}[tcp]\nport = {self.tcp_port}\ndefault_bus = line\n{tcp_defaults}{extra_tcp}"
                     f"[http]\nport = {self.http_port}\n{extra}")
        with open(self.cfg, "w", errors="surrogateescape") as f:   # lone surrogates: raw bytes
            f.write(self.text)
        self.log = open(os.path.join(self.dir, "log"), "w+")

        def limits():
            if nofile:
                import resource
                # a number: soft and hard; (soft, hard): each
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile if isinstance(nofile, tuple) else (nofile, nofile))
        for attempt in range(3):
            self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stderr=self.log, stdout=self.log,
                                      preexec_fn=limits, env=sanitizer_env())
            procs.append(self.p)
            # the HTTP port too: the daemon opens it after Modbus TCP, and a
            # test's first /status or /metrics must not race it (under load
            # and the sanitizers, "connection refused")
            wait_listening(self.tcp_port, self.p) and wait_listening(self.http_port, self.p)
            time.sleep(0.2)  # the bus reports its port open
            if self.p.poll() is None or "cannot listen on" not in self.log_text() or attempt == 2:
                break
            # free_port's port was taken by another process before the daemon bound it:
            # the same configuration on two fresh ports, and a fresh log
            tcp, http = free_port(), free_port()
            self.text = self.text.replace(f"[tcp]\nport = {self.tcp_port}\n", f"[tcp]\nport = {tcp}\n").replace(
                f"[http]\nport = {self.http_port}\n", f"[http]\nport = {http}\n")
            self.tcp_port, self.http_port = tcp, http
            with open(self.cfg, "w", errors="surrogateescape") as f:
                f.write(self.text)
            self.log.seek(0)
            self.log.truncate()

    def client(self):
        from pymodbus.client import ModbusTcpClient
        c = ModbusTcpClient("127.0.0.1", port=self.tcp_port, timeout=3 * SLOWDOWN)
        assert c.connect()
        return c

    def metrics(self):
        return fetch_metrics(self.http_port, timeout=3 * SLOWDOWN)

    def status(self):
        return fetch_status(self.http_port, timeout=3 * SLOWDOWN)

    def log_text(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def rewrite(self, text):
        self.text = text
        with open(self.cfg, "w", errors="surrogateescape") as f:
            f.write(text)

    def stop(self):
        t0 = time.time()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=5 * SLOWDOWN)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = None
        dt = time.time() - t0
        log = self.log_text()
        # Under --enable-sanitizers a report in the daemon's own log is a failure.
        check("ERROR: AddressSanitizer" not in log and "runtime error:" not in log and
              "ThreadSanitizer" not in log, f"no sanitizer report from the daemon ({self.log.name})")
        if "ERROR:" not in log and "ThreadSanitizer" not in log and self.own_dir:   # a report keeps its log
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc, dt


def mbap(tid, unit, pdu):
    return struct.pack(">HHHB", tid, 0, len(pdu) + 1, unit) + pdu


def recv_frame(s):
    """One MBAP frame: (tid, unit, pdu), or None when the peer closed first."""
    head = b""
    while len(head) < 7:
        chunk = s.recv(7 - len(head))
        if not chunk:
            return None
        head += chunk
    tid, proto, length, unit = struct.unpack(">HHHB", head)
    body = b""
    while len(body) < length - 1:
        chunk = s.recv(length - 1 - len(body))
        if not chunk:
            return None
        body += chunk
    return tid, unit, body


def closed_by_peer(s, wait=2.0):
    s.settimeout(wait * SLOWDOWN)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class Daemon:
    """What every test does with an `rtugw run` it started: a subclass sets
    self.p (the process), self.log (its log file) and self.http_port."""

    def metrics(self):
        return fetch_metrics(self.http_port, timeout=5 * SLOWDOWN)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        """SIGTERM: it must exit 0 with no sanitizer report in its log."""
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=10 * SLOWDOWN)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = None
        log = self.log_text()
        check("ERROR: AddressSanitizer" not in log and "runtime error:" not in log and
              "ThreadSanitizer" not in log, f"no sanitizer report from the daemon ({self.log.name})")
        check(rc == 0, f"rtugw run exits 0 on SIGTERM (got {rc})")
        return rc


def finish(name, extra=""):
    for what in _failed_checks:
        print("FAILED:", what)
    print(f"{name}: {_failures[0]} failures{extra}")
    sys.exit(1 if _failures[0] else 0)


def burn_from_env():
    """RTUGW_BURN=N: N processes spinning on the CPU for the rest of the test
    (killed with the daemons), so the gateway is checked on a busy machine:
    its own load must not change what it sees on the wire. `make check-busy`
    runs the integrity, device-server and fault tests with 2 (both cores)."""
    n = int(os.environ.get("RTUGW_BURN", "0") or 0)
    burners = [subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"]) for _ in range(n)]
    procs.extend(burners)
    if n:
        print(f"   {n} CPU burners running (RTUGW_BURN)", flush=True)
    return burners


def run_tests(name, tests, cleanup=()):
    """Each test function in turn (or those named on the command line), then
    every process they started killed and the folders in cleanup removed,
    then finish(name)."""
    only = sys.argv[1:]
    burn_from_env()
    try:
        for t in tests:
            if only and t.__name__ not in only:
                continue
            print(f"== {t.__name__}", flush=True)
            t0 = time.time()
            t()
            print(f"-- {t.__name__}: {time.time() - t0:.1f} s", flush=True)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for d in cleanup:
            shutil.rmtree(d, ignore_errors=True)
    finish(name)


def chromium(extra_args=()):
    """A headless chromium through selenium (Debian's chromium, chromium-driver,
    python3-selenium; scripts/bootstrap installs them), its console logged;
    None (and a failure) when one is missing. Its profile folder goes at exit."""
    import atexit
    import shutil
    for p, pkg in (("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver")):
        if not os.access(p, os.X_OK):
            check(False, f"{p} is installed (Debian package {pkg}; scripts/bootstrap)")
            return None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        check(False, "python3-selenium is installed (scripts/bootstrap)")
        return None
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="rtugw-chromium-")
    atexit.register(shutil.rmtree, profile, True)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,900", "--user-data-dir=" + profile) + tuple(extra_args):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def wait_js(driver, script, what, timeout=10.0):
    """Polls script (JavaScript returning a value) in the browser until it is
    truthy; checks it, and returns its value."""
    end, v = time.time() + timeout, None
    while time.time() < end:
        v = driver.execute_script(script)
        if v:
            break
        time.sleep(0.2)
    check(bool(v), what)
    return v


def check_config_refused(cfg, text, where, why):
    """`rtugw check` of text (written to cfg) fails (exit 2) saying where (after cfg's path when it starts
    with ':') and why."""
    with open(cfg, "w") as f:
        f.write(text)
    r = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True)
    out = r.stdout + r.stderr
    check(r.returncode == 2 and ((cfg + where) if where.startswith(":") else where) in out and why in out,
          f"rtugw check refuses {text.strip().splitlines()[-1]!r}...: {out.strip()[:300]}")
