#!/usr/bin/python3
"""MB-TCP-Security (Modbus/TCP over TLS) end to end, with real TLS peers:
pymodbus's TLS client (with its socket framer, so MBAP is kept inside TLS,
as the spec has it), Python's ssl module sending raw MBAP frames, and
`openssl s_client` for the refusals. The certificates come from
tests/lib/mbaps-certs.sh (the openssl commands docs/security.md shows): a CA, a
server, clients with and without the role extension, an expired one, a
revoked one (in a CRL) and one from another CA.

What must hold:
  - a read role reads and is refused a write with exception 01 (the write
    never reaches the line); a write role writes; rights are per unit/bus;
  - no certificate, another CA, expired, revoked, no role (without
    default_role), an unknown role and TLS 1.1 are refused in the handshake:
    nothing is ever read from them, each refusal is counted by its reason
    and logged with the reason and the peer's address;
  - SIGHUP picks up a new server certificate for new sessions without
    dropping the plain listener or a session already open; a bad file keeps
    the old certificate;
  - every function code answers through TLS exactly as through plain TCP;
  - a daemon without [tls] never maps libssl."""
import asyncio
import atexit
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, free_port, mbap, procs, recv_frame, run_tests, wait_listening  # noqa: E402

SRCDIR = os.environ.get("RTUGW_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
if not shutil.which("openssl"):
    print("missing openssl: install the Debian package openssl (scripts/bootstrap does)")
    sys.exit(1)
try:
    from pymodbus.client import AsyncModbusTlsClient, ModbusTcpClient
    from pymodbus.framer.socket_framer import ModbusSocketFramer
except ImportError as e:
    print(f"missing {e.name}: install the Debian packages python3-pymodbus python3-serial-asyncio")
    sys.exit(1)

# TLS 1.1 is what the test offers on purpose, to see it refused.
warnings.filterwarnings("ignore", "ssl.TLSVersion.TLSv1_1 is deprecated", DeprecationWarning)
PKI = tempfile.mkdtemp(prefix="rtugw-pki-")
atexit.register(shutil.rmtree, PKI, True)
subprocess.run(["sh", os.path.join(SRCDIR, "tests", "lib", "mbaps-certs.sh"), PKI], check=True)

ROLES = ("[role reader]\nfunctions = read\nunits = all\n"
         "[role operator]\nfunctions = read, write\nbuses = line\n"
         "[role admin]\nfunctions = all\nunits = all\n"
         "[role unit1]\nfunctions = read\nunits = 1\n")


def pem(name):
    return os.path.join(PKI, name)


def tls_section(port, extra="", roles=ROLES):
    return (f"[tls]\nenabled = true\nport = {port}\ncert_file = {pem('server.pem')}\nkey_file = {pem('server.key')}\n"
            f"ca_file = {pem('ca.pem')}\ncrl_file = {pem('crl.pem')}\nhandshake_timeout_ms = 600\n{extra}" + roles)


class TlsGateway(Gateway):
    """A gateway with both listeners: [tcp] on tcp_port, [tls] on tls_port."""
    def __init__(self, tls_extra="", roles=ROLES, **kw):
        self.tls_port = free_port()
        super().__init__(extra=tls_section(self.tls_port, tls_extra, roles), **kw)

    def bus_requests(self):
        return self.metrics().get('rtugw_bus_requests_total{bus="line"}', 0)


def client_context(who=None, max_version=None, min_version=None, ciphers=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pem("ca.pem"))   # the server is checked too: CA and IP:127.0.0.1
    if who:
        ctx.load_cert_chain(pem(f"{who}.pem"), pem(f"{who}.key"))
    if ciphers:
        ctx.set_ciphers(ciphers)
    if min_version:
        ctx.minimum_version = min_version
    if max_version:
        ctx.maximum_version = max_version
    return ctx


def tls_connect(g, who, **kw):
    s = socket.create_connection(("127.0.0.1", g.tls_port), timeout=3)
    port = s.getsockname()[1]
    return client_context(who, **kw).wrap_socket(s, server_hostname="127.0.0.1"), port


def call(s, tid, unit, pdu):
    s.sendall(mbap(tid, unit, pdu))
    f = recv_frame(s)
    return f[2] if f else None


def pymodbus_tls(g, who, ops):
    """Runs the coroutine function ops(client) on pymodbus's TLS client with
    its socket framer (MBAP inside TLS). The asyncio client, not the sync
    one: pymodbus 3.0.0's ModbusTlsClient inherits the TCP client's recv,
    which waits in select() on the descriptor and so never sees the rest of
    an answer already decrypted into the SSL object (it reads the 8-byte
    header first), and which does not expect SSLWantReadError from the
    session tickets TLS 1.3 sends after the handshake."""
    async def run():
        c = AsyncModbusTlsClient("127.0.0.1", port=g.tls_port, sslctx=client_context(who),
                                 framer=ModbusSocketFramer, timeout=3)
        await c.connect()
        check(c.connected, f"pymodbus TLS client connects as {who}")
        try:
            return await ops(c)
        finally:
            await c.close()
    return asyncio.run(run())


def test_roles():
    g = TlsGateway()
    plain = ModbusTcpClient("127.0.0.1", port=g.tcp_port, timeout=3)
    check(plain.connect(), "plain listener up beside the TLS one")
    check(not plain.write_register(10, 1111, slave=1).isError(), "plain TCP writes register 10")

    async def as_reader(c):
        r = await c.read_holding_registers(10, 1, slave=1)
        check(not r.isError() and r.registers == [1111], f"reader (pymodbus TLS, MBAP framing) reads register 10: {r}")
        r = await c.read_coils(0, 8, slave=2)
        check(not r.isError() and len(r.bits) >= 8, f"reader reads coils: {r}")
        before = g.bus_requests()
        r = await c.write_register(10, 2222, slave=1)
        check(r.isError() and getattr(r, "exception_code", None) == 1, f"reader's write -> exception 01: {r}")
        r = await c.write_coils(8, [True, True], slave=1)
        check(r.isError() and getattr(r, "exception_code", None) == 1, f"reader's coil write -> exception 01: {r}")
        check(g.bus_requests() == before, "the refused writes never reached the line")
    pymodbus_tls(g, "reader", as_reader)
    r = plain.read_holding_registers(10, 1, slave=1)
    check(not r.isError() and r.registers == [1111], f"register 10 unchanged: {r}")

    async def as_operator(c):
        r = await c.write_register(10, 3333, slave=1)
        check(not r.isError(), f"operator writes (pymodbus TLS): {r}")
        r = await c.write_coils(8, [True, False, True], slave=3)
        check(not r.isError(), f"operator writes coils: {r}")
    pymodbus_tls(g, "operator", as_operator)
    r = plain.read_holding_registers(10, 1, slave=1)
    check(not r.isError() and r.registers == [3333], f"the operator's write is on the slave: {r}")

    # Raw MBAP inside TLS: pipelined requests answered in order, each with its tid;
    # rights per unit (unit1 may read unit 1 only) and per function class
    # (operator has no diagnostics).
    s, _ = tls_connect(g, "unit1")
    s.sendall(b"".join(mbap(100 + i, 1, bytes([3, 0, i, 0, 1])) for i in range(20)))
    tids = [recv_frame(s)[0] for _ in range(20)]
    check(tids == [100 + i for i in range(20)], f"pipelined TLS answers in order: {tids}")
    body = call(s, 7, 2, bytes([3, 0, 0, 0, 1]))
    check(body == bytes([0x83, 0x01]), f"unit1 reading unit 2 -> exception 01 ({body.hex() if body else None})")
    s.close()
    s, _ = tls_connect(g, "operator")
    body = call(s, 8, 1, bytes([8, 0, 0, 0x12, 0x34]))
    check(body == bytes([0x88, 0x01]), f"operator's diagnostics -> exception 01 ({body.hex() if body else None})")
    body = call(s, 9, 1, bytes([23, 0, 0, 0, 1, 0, 30, 0, 1, 2, 0, 7]))
    check(body and body[0] == 23, f"operator may read/write (23): needs both classes ({body.hex() if body else None})")
    session, ctx = s.session, s.context
    s.close()
    # The session resumes from the server's cache: no certificate exchange, same role.
    t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=3),
                                               server_hostname="127.0.0.1", session=session)
    check(t.session_reused, "a second connection resumes the cached session")
    body = call(t, 10, 1, bytes([6, 0, 10, 0, 9]))
    check(body == bytes([6, 0, 10, 0, 9]), f"... and is still the operator: writes ({body.hex() if body else None})")
    t.close()

    m = g.metrics()
    check(m.get('rtugw_tls_role_refused_total{role="reader"}') == 2, "refusals counted for role reader")
    check(m.get('rtugw_tls_role_refused_total{role="unit1"}') == 1, "refusal counted for role unit1")
    check(m.get('rtugw_tls_role_refused_total{role="operator"}') == 1, "refusal counted for role operator")
    check(m.get('rtugw_tls_role_requests_total{role="operator"}') == 5, "requests counted for role operator")
    check(m.get('rtugw_tls_role_requests_total{role="unit1"}') == 21, "requests counted per role")
    check(m.get("rtugw_tls_handshakes_total") == 5, f"5 handshakes ({m.get('rtugw_tls_handshakes_total')})")
    check(m.get("rtugw_tls_resumed_total") == 1, f"1 of them resumed ({m.get('rtugw_tls_resumed_total')})")
    check(m.get("rtugw_tcp_requests_total") == m.get("rtugw_tcp_answers_total"),
          "every request, plain or TLS, answered exactly once")
    log = g.log_text()
    check("is role reader (/CN=reader, TLSv1.3" in log, "the log names the role, subject and version")
    plain.close()
    g.stop()


REFUSED = [  # who, reason, what
    (None, "no_certificate", "no client certificate"),
    ("foreign", "untrusted", "a certificate of another CA"),
    ("expired", "expired", "an expired certificate"),
    ("revoked", "revoked", "a certificate revoked by the CRL"),
    ("norole", "no_role", "a certificate without a role (no default_role)"),
    ("stranger", "unknown_role", "a role no [role] section names"),
]


def refused_tls12(g, who):
    """A TLS 1.2 handshake, where the client learns of the refusal in the handshake itself."""
    s = socket.create_connection(("127.0.0.1", g.tls_port), timeout=3)
    port = s.getsockname()[1]
    try:
        t = client_context(who, max_version=ssl.TLSVersion.TLSv1_2).wrap_socket(s, server_hostname="127.0.0.1")
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        s.close()
        return True, port, str(e)
    t.close()
    return False, port, "handshake completed"


def refused_tls13(g, who):
    """TLS 1.3: the client's side of the handshake ends before the server has
    judged its certificate, so the refusal (an alert) meets its first request."""
    t, port = tls_connect(g, who)
    try:
        t.sendall(mbap(1, 1, bytes([3, 0, 0, 0, 1])))
        data = t.recv(64)
        return data == b"", port, "connection closed"
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        return True, port, str(e)
    finally:
        t.close()


def s_client(g, *args):
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{g.tls_port}", "-CAfile", pem("ca.pem"),
                        "-verify_return_error", *args], input=b"", capture_output=True, timeout=10)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


def test_refused_in_handshake():
    g = TlsGateway()
    before = g.bus_requests()
    counts = {}
    for who, reason, what in REFUSED:
        for attempt in (refused_tls12, refused_tls13):
            refused, port, how = attempt(g, who)
            check(refused, f"{what}: refused over TLS 1.{2 if attempt is refused_tls12 else 3} ({how})")
            counts[reason] = counts.get(reason, 0) + 1
            time.sleep(0.15)   # under the log's 10 refusals a second
            log = g.log_text()
            check(f"tls: refused 127.0.0.1:{port}: {reason} (" in log, f"{what}: logged with the peer and the reason")
    # openssl s_client, a third TLS client, for the same refusals over TLS 1.2.
    for who, reason, what in REFUSED:
        rc, out = s_client(g, "-tls1_2", *(["-cert", pem(f"{who}.pem"), "-key", pem(f"{who}.key")] if who else []))
        check(rc != 0 and "alert" in out, f"s_client, {what}: handshake fails with an alert (rc {rc})")
        counts[reason] += 1
    # TLS 1.1: a client that offers nothing newer (it must lower its own
    # security level even to try) is refused for the version.
    time.sleep(1.1)   # the s_client burst spent this second's log budget
    try:
        with_11 = client_context("reader", min_version=ssl.TLSVersion.TLSv1_1, max_version=ssl.TLSVersion.TLSv1_1,
                                 ciphers="DEFAULT:@SECLEVEL=0")
        s = socket.create_connection(("127.0.0.1", g.tls_port), timeout=3)
        port = s.getsockname()[1]
        try:
            with_11.wrap_socket(s, server_hostname="127.0.0.1").close()
            ok = False
        except ssl.SSLError as e:
            ok = "PROTOCOL_VERSION" in str(e).upper() or "VERSION" in str(e).upper()
        check(ok, "TLS 1.1 refused (protocol version alert)")
        time.sleep(0.15)
        check(f"tls: refused 127.0.0.1:{port}: version (" in g.log_text(), "TLS 1.1 logged as version")
        counts["version"] = 1
    except ValueError as e:   # this Python cannot even build a TLS 1.1 context
        check(False, f"python cannot offer TLS 1.1 here: {e}")
    rc, out = s_client(g, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0", "-cert", pem("reader.pem"), "-key",
                       pem("reader.key"))
    check(rc != 0 and ("alert protocol version" in out or "unsupported protocol" in out),
          f"s_client -tls1_1 refused (rc {rc})")
    counts["version"] += 1
    # A client that opens a connection and never speaks: cut at handshake_timeout_ms.
    idle = socket.create_connection(("127.0.0.1", g.tls_port), timeout=3)
    t0 = time.time()
    idle.settimeout(3)
    try:
        gone = idle.recv(1) == b""
    except ConnectionResetError:
        gone = True
    except socket.timeout:
        gone = False
    dt = time.time() - t0
    check(gone and 0.5 < dt < 2.0, f"a silent client is cut after handshake_timeout_ms (600 ms): {dt * 1000:.0f} ms")
    counts["timeout"] = 1
    idle.close()

    # A burst: the log keeps to 10 refusals a second and says how many it left
    # out; the counters count every one.
    time.sleep(1.1)
    for _ in range(30):
        refused_tls12(g, "expired")
    time.sleep(1.1)
    refused_tls12(g, "expired")
    counts["expired"] += 31
    time.sleep(0.1)
    log = g.log_text()
    check("more refused handshakes not logged (at most 10 a second" in log, "a burst of refusals is summed up in the log")

    m = g.metrics()
    for reason, n in counts.items():
        got = m.get(f'rtugw_tls_refused_total{{reason="{reason}"}}')
        check(got == n, f"refusals counted by reason: {reason} {got} == {n}")
    check(m.get("rtugw_tls_handshakes_total") == 0, "no refused client ever completed a handshake")
    check(g.bus_requests() == before, "nothing a refused client sent reached the line")
    check(m.get("rtugw_tcp_requests_total", 0) == 0, "nothing a refused client sent was even read as a request")
    check(m.get("rtugw_tls_active") == 0, "every refused connection closed")
    g.stop()


def test_default_role():
    g = TlsGateway(tls_extra="default_role = reader\nsession_cache = 0\n")
    async def as_norole(c):
        r = await c.read_holding_registers(0, 2, slave=1)
        check(not r.isError(), f"no role extension + default_role = reader: reads ({r})")
        r = await c.write_register(0, 5, slave=1)
        check(r.isError() and r.exception_code == 1, f"... and as a reader, is refused a write ({r})")
    pymodbus_tls(g, "norole", as_norole)
    check(g.metrics().get('rtugw_tls_role_refused_total{role="reader"}') == 1, "counted as the reader's refusal")
    s, _ = tls_connect(g, "stranger")   # a role that names no [role]: still refused
    try:
        s.sendall(mbap(1, 1, bytes([3, 0, 0, 0, 1])))
        refused = s.recv(16) == b""
    except (ssl.SSLError, ConnectionResetError):
        refused = True
    check(refused, "an unknown role is refused even with a default_role")
    s.close()
    check(g.metrics().get('rtugw_tls_refused_total{reason="unknown_role"}') == 1, "counted as unknown_role")
    g.stop()


def peer_cn(g):
    t, _ = tls_connect(g, "reader")
    subject = dict(x[0] for x in t.getpeercert()["subject"])
    t.close()
    return subject.get("commonName")


def test_reload():
    work = tempfile.mkdtemp(prefix="rtugw-reload-")
    cert, key, crl = (os.path.join(work, f) for f in ("server.pem", "server.key", "crl.pem"))
    shutil.copy(pem("server.pem"), cert)
    shutil.copy(pem("server.key"), key)
    shutil.copy(pem("crl.pem"), crl)
    g = TlsGateway()
    g.rewrite(g.text.replace(pem("server.pem"), cert).replace(pem("server.key"), key).replace(pem("crl.pem"), crl))
    g.p.send_signal(1)
    time.sleep(0.3)
    check(peer_cn(g) == "server", "serving the first server certificate")
    st = g.status()
    check(st["tls"]["certificate"]["subject"] == "/CN=server" and st["tls"]["warning"] is None,
          f"/status: subject and no warning ({st['tls']})")
    plain = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(call(plain, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "plain connection before reload")
    old, _ = tls_connect(g, "admin")
    check(call(old, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "TLS session before reload")
    doomed, _ = tls_connect(g, "unit1")
    check(call(doomed, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "unit1's session before reload")

    # The new server certificate, and a new CRL that revokes unit1 (issued by
    # the CA with the commands of tests/lib/mbaps-certs.sh).
    shutil.copy(pem("server-next.pem"), cert)
    shutil.copy(pem("server-next.key"), key)
    env = dict(os.environ, RTUGW_ROLE="none")
    for cmd in (["-revoke", "unit1.pem"], ["-gencrl", "-out", crl]):
        subprocess.run(["openssl", "ca", "-config", "ca.cnf", *cmd], cwd=PKI, env=env, check=True, capture_output=True)
    g.p.send_signal(1)
    time.sleep(0.3)
    try:
        doomed.settimeout(2)
        closed = doomed.recv(1) == b""
    except (ssl.SSLError, ConnectionResetError):
        closed = True
    check(closed, "SIGHUP with a CRL that revokes it: unit1's open session is closed")
    doomed.close()
    check("its certificate no longer verifies" in g.log_text(), "... and the log says why")
    check(g.metrics().get("rtugw_tcp_revoked_closed_total") == 1, "... counted as revoked_closed")
    refused, port, how = refused_tls12(g, "unit1")
    check(refused, f"unit1 cannot come back: refused in the handshake ({how})")
    check(peer_cn(g) == "server-next", "SIGHUP: new sessions get the new server certificate")
    check(call(plain, 2, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]),
          "the plain connection from before the reload still answers")
    fresh = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(call(fresh, 3, 2, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x07, 0xD0]), "the plain listener still accepts")
    fresh.close()
    check(call(old, 2, 2, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x07, 0xD0]),
          "the TLS session from before the reload still answers")
    st = g.status()
    check(st["tls"]["certificate"]["subject"] == "/CN=server-next", f"/status names the new certificate ({st['tls']})")
    warning = st["tls"]["warning"] or ""
    check("expires in" in warning and 18 <= st["tls"]["certificate"]["days_left"] <= 20,
          f"/status warns: it expires within 30 days ({warning}, {st['tls']['certificate']['days_left']})")
    check("the server certificate /CN=server-next expires in" in g.log_text(), "... and so does the log")

    with open(cert, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    g.p.send_signal(1)
    time.sleep(0.3)
    check(peer_cn(g) == "server-next", "a bad new certificate file: the old certificate stays")
    log = g.log_text()
    check(f"[tls] cert_file = '{cert}'" in log and "keeping [tls]" in log, "... and the log says which file and why")
    m = g.metrics()
    check(m.get("rtugw_tls_reloads_total") == 2 and m.get("rtugw_tls_reload_failures_total") == 1,
          f"reloads counted: {m.get('rtugw_tls_reloads_total')} ok, {m.get('rtugw_tls_reload_failures_total')} failed")
    check(call(plain, 4, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "plain connection after all that")
    plain.close()
    old.close()
    g.stop()
    shutil.rmtree(work, ignore_errors=True)


# Every function code, as raw PDUs to unit 1: what the plain listener answers,
# the TLS one must answer byte for byte (role admin: every class, every unit).
FUNCTIONS = [
    ("1 read coils", bytes([1, 0, 0, 0, 10])),
    ("2 read discrete inputs", bytes([2, 0, 0, 0, 10])),
    ("3 read holding registers", bytes([3, 0, 0, 0, 4])),
    ("4 read input registers", bytes([4, 0, 0, 0, 4])),
    ("5 write coil", bytes([5, 0, 3, 0xFF, 0])),
    ("6 write register", bytes([6, 0, 40, 0x12, 0x34])),
    ("7 read exception status", bytes([7])),
    ("8/0 return query data", bytes([8, 0, 0, 0xAB, 0xCD])),
    ("11 get comm event counter", bytes([11])),
    ("12 get comm event log", bytes([12])),
    ("15 write coils", bytes([15, 0, 8, 0, 3, 1, 5])),
    ("16 write registers", bytes([16, 0, 41, 0, 2, 4, 0, 1, 0, 2])),
    ("17 report server id", bytes([17])),
    ("20 read file record", bytes([20, 7, 6, 0, 1, 0, 0, 0, 1])),
    ("21 write file record", bytes([21, 9, 6, 0, 1, 0, 0, 0, 1, 0x12, 0x34])),
    ("22 mask write register", bytes([22, 0, 40, 0, 0xF2, 0, 0x25])),
    ("23 read/write registers", bytes([23, 0, 40, 0, 2, 0, 42, 0, 1, 2, 0, 7])),
    ("24 read FIFO queue", bytes([24, 0, 0])),
    ("43/14 read device identification", bytes([43, 14, 1, 0])),
    ("65 user-defined", bytes([65, 1, 2, 3])),
    ("9 (unassigned)", bytes([9, 0])),
    ("3 with a short PDU", bytes([3, 0, 0])),
    ("3 for 126 registers", bytes([3, 0, 0, 0, 126])),
]


def test_every_function_as_plain():
    g = TlsGateway()
    plain = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    secure, _ = tls_connect(g, "admin")
    for what, pdu in FUNCTIONS:
        a = call(plain, 1, 1, pdu)
        b = call(secure, 1, 1, pdu)
        check(a is not None and a == b, f"FC {what}: TLS answers as plain TCP ({a.hex() if a else None} / "
              f"{b.hex() if b else None})")
    for what, pdu in FUNCTIONS[:6]:
        check(call(secure, 2, 2, pdu)[0] == pdu[0], f"FC {what} through TLS is a normal answer")
    # The bounds are the plain ones too: an impossible MBAP length closes the session.
    secure.sendall(bytes([0, 1, 0, 0, 0xFF, 0xFF, 1]))
    try:
        closed = secure.recv(1) == b""
    except (ssl.SSLError, ConnectionResetError):
        closed = True
    check(closed, "an impossible MBAP length closes the TLS session, as it does a plain one")
    m = g.metrics()
    check(m.get("rtugw_tcp_bad_mbap_total") == 1, "counted as bad_mbap, the plain counter")
    check(m.get("rtugw_tcp_requests_total") == m.get("rtugw_tcp_answers_total"), "every request answered once")
    plain.close()
    secure.close()
    g.stop()


def mapped_libssl(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libssl" in f.read()


def test_footprint():
    plain_only = Gateway()
    check(not mapped_libssl(plain_only.p.pid), "without [tls] the daemon does not map libssl")
    plain_only.stop()
    g = TlsGateway(extra_tcp="")
    check(mapped_libssl(g.p.pid), "with [tls] it does (the module, loaded at start)")
    g.stop()


def test_plain_listener_off():
    tls_port = free_port()
    g = types.SimpleNamespace(tls_port=tls_port)   # what tls_connect() needs
    # [tcp] enabled = false: only the TLS listener. Gateway() waits for the
    # plain port, so this one is started and waited for here.
    d = tempfile.mkdtemp(prefix="rtugw-test-")
    http_port, tcp_port = free_port(), free_port()
    cfg = os.path.join(d, "rtugw.conf")
    with open(cfg, "w") as f:
        f.write(f"[gateway]\ndata_dirs = {PKI}\n[bus line]\nport = sim:1,2,3\n[tcp]\nenabled = false\nport = {tcp_port}\ndefault_bus = line\n"
                f"[http]\nport = {http_port}\n" + tls_section(tls_port))
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen([os.environ.get("RTUGW_BIN", "./rtugw"), "run", "-c", cfg], stdout=log, stderr=log)
    procs.append(p)
    check(wait_listening(tls_port, p), "[tcp] off: the TLS listener comes up")
    time.sleep(0.2)
    s, _ = tls_connect(g, "reader")
    check(call(s, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "[tcp] off: TLS alone serves")
    s.close()
    try:
        socket.create_connection(("127.0.0.1", tcp_port), timeout=1).close()
        off = False
    except OSError:
        off = True
    check(off, "[tcp] enabled = false: no plain listener")
    p.terminate()
    check(p.wait(timeout=5) == 0, "stops cleanly")
    shutil.rmtree(d, ignore_errors=True)


def test_handshake_flood():
    """40 sockets held open on the TLS port from one address, sending nothing
    or half a ClientHello and reopened as they close: plain Modbus TCP goes
    on accepting and answering (p99 <= 10 ms), the handshakes are capped
    apart from max_clients, and /metrics counts what was refused."""
    g = TlsGateway(extra_tcp="max_clients = 32\n", bus="port = sim:1,2,3\nbaud = 115200\n")
    half_hello = bytes.fromhex("16030100c8010000c40303") + os.urandom(32)   # a ClientHello cut short
    stop = [False]

    def attacker(k):
        while not stop[0]:
            try:
                a = socket.create_connection(("127.0.0.1", g.tls_port), timeout=2)
                if k % 2:
                    a.sendall(half_hello)
                a.settimeout(1.5)
                a.recv(1)   # held until the gateway closes it (refused, or handshake_timeout_ms)
            except OSError:
                time.sleep(0.01)
            finally:
                try:
                    a.close()
                except Exception:
                    pass
            time.sleep(0.05)   # reopened 50 ms after it closes: the test's own client keeps the CPU
    threads = [threading.Thread(target=attacker, args=(k,), daemon=True) for k in range(40)]
    for t in threads:
        t.start()
    time.sleep(1.0)   # the flood in place (longer than handshake_timeout_ms: reopened once)
    times, refused = [], 0
    for i in range(100):
        t0 = time.perf_counter()
        try:
            s = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=2)
            body = call(s, i + 1, 1, bytes([3, 0, 0, 0, 1]))
            s.close()
        except OSError:
            body = None
        if body != bytes([3, 2, 0x03, 0xE8]):
            refused += 1
        else:
            times.append(time.perf_counter() - t0)
    m = g.metrics()
    stop[0] = True
    for t in threads:
        t.join(3)
    times.sort()
    p99 = times[int(len(times) * 0.99) - 1] * 1000 if times else float("inf")
    check(refused == 0, f"handshake flood: plain Modbus TCP still accepts and answers ({refused} of 100 failed)")
    # Latency is a benchmark's figure, not a test's (the machine is shared): here
    # only a stall fails, far above the 2-3 ms p99 measured (docs/security.md).
    check(times and times[-1] * 1000 <= 1000,
          f"handshake flood: no plain connect + read + close stalls (p99 {p99:.1f} ms, max "
          f"{(times[-1] * 1000 if times else float('inf')):.1f} ms, <= 1000)")
    check(m.get("rtugw_tls_handshaking", 99) <= 4,
          f"one address holds at most max_handshakes_per_address (4) handshakes ({m.get('rtugw_tls_handshaking')})")
    check(m.get("rtugw_tls_handshakes_refused_address_total", 0) > 0, "the flood's excess counted")
    check(m.get('rtugw_tls_refused_total{reason="timeout"}', 0) > 0, "handshakes that never finish time out, counted")
    s, _ = tls_connect(g, "reader")
    check(call(s, 1, 1, bytes([3, 0, 0, 0, 1])) == bytes([3, 2, 0x03, 0xE8]), "after the flood, TLS serves again")
    s.close()
    g.stop()


def test_priority_role():
    """[role admin] priority = true: an admin session reading in a loop while
    16 plain clients flood the same bus with 8 reads each in flight is
    served first (front/backpressure.c), never refused; an operator session
    (no priority) waits with the flood. Before: the key was unknown."""
    g = TlsGateway(roles=ROLES.replace("[role admin]\n", "[role admin]\npriority = true\n"))
    stop = time.time() + 2.5
    lat = {"admin": [], "operator": [], "flood": []}
    busy = []

    def loop(kind, sock, depth):
        sent, tid = {}, 0
        try:
            while time.time() < stop or sent:
                while len(sent) < depth and time.time() < stop:
                    tid += 1
                    sent[tid & 0xFFFF] = time.time()
                    sock.sendall(mbap(tid & 0xFFFF, 1, bytes([3, 0, tid % 100, 0, 1])))
                f = recv_frame(sock)
                if f is None:
                    break
                t0 = sent.pop(f[0])
                if f[2][0] & 0x80:
                    busy.append((kind, f[2]))
                else:
                    lat[kind].append(time.time() - t0)
        except (OSError, KeyError) as e:
            busy.append((kind, repr(e)))
        sock.close()
    socks = [(k, tls_connect(g, k)[0], 1) for k in ("admin", "operator")]
    for _ in range(16):
        s = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=5)
        socks.append(("flood", s, 8))
    threads = [threading.Thread(target=loop, args=a) for a in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    p50 = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("inf")  # noqa: E731
    check(not busy, f"no exception, no lost answer ({busy[:3]})")
    check(len(lat["admin"]) > 20 and p50(lat["admin"]) * 4 < p50(lat["flood"]),
          f"the priority role is served first: p50 {p50(lat['admin']) * 1000:.1f} ms "
          f"against the flood's {p50(lat['flood']) * 1000:.1f} ms ({len(lat['admin'])} answers)")
    check(p50(lat["operator"]) > 4 * p50(lat["admin"]),
          f"a role without priority waits with the flood (p50 {p50(lat['operator']) * 1000:.1f} ms)")
    g.stop()


def test_map_roles():
    """A [map NAME] on the TLS listener (issue 46): a read needs a role granted
    its unit with the read class, a write the write class; a role granted
    only buses has no right to a map's unit (it is on no bus)."""
    d = tempfile.mkdtemp(prefix="rtugw-mbaps-map-")
    with open(os.path.join(d, "map.csv"), "w") as f:
        f.write("name,table,address,type\nv,holding,0,uint16\n")
    g = TlsGateway(dir=d, devices="[device d1]\nslave = 1\n[tag v]\ndevice = d1\ntable = holding\naddress = 10\n"
                   "type = uint16\nwritable = true\ninterval_ms = 100\n",
                   roles=ROLES + "[map m]\nunit = 100\nregisters = map.csv\n")
    plain = ModbusTcpClient("127.0.0.1", port=g.tcp_port, timeout=3)
    check(plain.connect() and not plain.write_register(10, 4321, slave=1).isError(), "plain TCP writes d1 10")
    ok = False
    for _ in range(40):
        r = plain.read_holding_registers(0, 1, slave=100)
        ok = not r.isError() and r.registers == [4321]
        if ok:
            break
        time.sleep(0.05)
    check(ok, "the map serves the tag on the plain listener")
    read, write = bytes([3, 0, 0, 0, 1]), bytes([6, 0, 0, 0x11, 0x22])
    for who, want_read, want_write in (("reader", True, False), ("admin", True, True), ("operator", False, False),
                                       ("unit1", False, False)):
        s, _ = tls_connect(g, who)
        body = call(s, 1, 100, read)
        check((body == bytes([3, 2]) + bytes(body[2:4]) and len(body) == 4) if want_read else body == bytes([0x83, 1]),
              f"{who} reading the map: {'answered' if want_read else 'exception 01'} ({body.hex() if body else None})")
        body = call(s, 2, 100, write)
        check(body == write if want_write else body == bytes([0x86, 1]),
              f"{who} writing the map: {'confirmed echo' if want_write else 'exception 01'} ({body.hex() if body else None})")
        s.close()
    r = plain.read_holding_registers(10, 1, slave=1)
    check(not r.isError() and r.registers == [0x1122], f"the admin's map write is on d1 10 ({r})")
    plain.close()
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


run_tests("test_mbaps", [test_map_roles, test_priority_role, test_handshake_flood, test_roles, test_refused_in_handshake, test_default_role, test_reload,
                        test_every_function_as_plain, test_footprint, test_plain_listener_off])
