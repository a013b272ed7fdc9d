#!/usr/bin/python3
"""[http] keys that needed a restart, made live (issue 41), each changed by
SIGHUP and by the API (PUT /api/config) against a real `rtugw run`, and
checked from the outside (http.client, urllib over TLS, openssl s_client,
pymodbus), while one Modbus TCP client on one connection reads throughout
(0 answers lost or wrong):
  - the listener's address: the new port answers, the old one refuses, a
    keep-alive connection accepted on the old one is still served; a port
    in use keeps the old listener and is named (http.port, with the reason);
  - HTTPS turned on and off (tls_cert/tls_key): the port speaks TLS, then
    plain HTTP again;
  - users turned on and off: logins needed, then reads open again; the
    sessions end;
  - max_sessions: lowered under 3 sessions, 2 stay (the ones expiring last);
  - frame_ring: 0 -> 64 -> 16 -> 0, the frame numbers going on;
  - [tls] (Modbus/TCP Security) on, moved, its roles renamed and reordered,
    off: a TLS session open throughout keeps its role's rights (by name),
    one whose role is gone is closed, new sessions take the new listener.
Each reload: restart_needed empty."""
import http.client
import json
import re
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, closed_by_peer, free_port, mbap, recv_frame, run_tests, wait_for  # noqa: E402

TOKEN = "s3cret-0123456789abcdefXY"
if not shutil.which("openssl"):
    print("missing openssl: install the Debian package openssl (scripts/bootstrap does)")
    sys.exit(1)
NOVERIFY = ssl.create_default_context()
NOVERIFY.check_hostname = False
NOVERIFY.verify_mode = ssl.CERT_NONE


class Reader:
    """One pymodbus connection reading slave 1's holding 0..9 in turn (the
    simulator's 1000 * slave + a) for the whole test: wrong or lost answers counted."""
    def __init__(self, g):
        self.c, self.stop, self.ok, self.bad = g.client(), threading.Event(), 0, []
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        a = 0
        while not self.stop.is_set():
            try:
                r = self.c.read_holding_registers(a, 1, slave=1)
                if r.isError() or r.registers != [1000 + a]:
                    self.bad.append(str(r))
                else:
                    self.ok += 1
            except Exception as e:   # a lost answer or connection
                self.bad.append(repr(e))
            a = (a + 1) % 10
            time.sleep(0.005)

    def finish(self):
        wait_for(lambda: self.ok >= 20 or self.bad, 5)   # a short test still reads for a while
        self.stop.set()
        self.t.join(10)
        self.c.close()
        check(self.ok >= 20 and not self.bad, f"the Modbus TCP client's one connection: {self.ok} answers, "
                                             f"{len(self.bad)} lost or wrong {self.bad[:3]}")


def call(port, method, path, body=None, headers=None, tls=False, timeout=10):
    """(status, body bytes) of one request; (0, reason) when nothing answers."""
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}{path}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=NOVERIFY if tls else None) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()


class Live:
    """The gateway under change: where its HTTP answers now, and how."""
    def __init__(self, g):
        self.g, self.port, self.tls, self.auth = g, g.http_port, False, {"Authorization": f"Bearer {TOKEN}"}

    def get(self, path, auth=True):
        return call(self.port, "GET", path, headers=self.auth if auth else {}, tls=self.tls)

    def reloaded_since(self, before):
        """True once /status answers where it now should with a new last_reload
        (a SIGHUP is applied a moment later: until then the old port answers)."""
        st, body = self.get("/status")
        return st == 200 and (json.loads(body)["last_reload"] or {}).get("time_ms") != before

    def status(self):
        st, body = self.get("/status")
        check(st == 200, f"/status answers on port {self.port} ({'https' if self.tls else 'http'}): {st} {body[:200]!r}")
        return json.loads(body)

    def reload(self, via, text, port=None, tls=None):
        """text applied by SIGHUP or PUT /api/config; then HTTP is looked for at
        port (over TLS when tls), last_reload must be applied, nothing waiting."""
        before = (self.status()["last_reload"] or {}).get("time_ms")
        if via == "hup":
            self.g.rewrite(text)
            self.g.p.send_signal(signal.SIGHUP)
        else:
            st, body = self.get("/api/config")
            check(st == 200, f"GET /api/config: {st} {body[:200]!r}")
            rev = json.loads(body)["revision"]
            st, body = call(self.port, "PUT", "/api/config", text.encode(),
                            {**self.auth, "If-Match": rev}, tls=self.tls, timeout=20)
            check(st == 200, f"PUT /api/config answers 200 on the connection it came on: {st} {body[:300]!r}")
            check(json.loads(body).get("restart_needed") == "", f"the API says nothing waits: {body[:300]!r}")
            self.g.text = text
        self.port = port or self.port
        self.tls = self.tls if tls is None else tls
        check(wait_for(lambda: self.reloaded_since(before), 5), f"{via}: reloaded, /status answers at port {self.port}")
        s = self.status()
        check(s["restart_needed"] == "" and s["last_reload"]["result"] == "applied",
              f"{via}: applied, nothing waits: {s['restart_needed']!r} {s['last_reload']}")


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def test_address_live():
    """[http] port moved by SIGHUP, then by the API; a port in use keeps the old one."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n", extra=f"write_token = {TOKEN}\n")
    rd, live = Reader(g), Live(g)
    keep = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=5)   # keep-alive, accepted before the move
    keep.request("GET", "/status")
    check(keep.getresponse().read() and True, "a keep-alive connection on the first port")
    for via in ("hup", "api"):
        old, new = live.port, free_port()
        live.reload(via, live.g.text.replace(f"[http]\nport = {old}\n", f"[http]\nport = {new}\n"), port=new)
        check(wait_for(lambda: refused(old), 3), f"{via}: the old port {old} refuses connections now")
        check(live.get("/status")[0] == 200, f"{via}: the new port {new} answers")
        if via == "hup":
            keep.request("GET", "/status")
            r = keep.getresponse()
            check(r.status == 200 and json.loads(r.read())["restart_needed"] == "",
                  "the keep-alive connection accepted on the old port is still served")
            keep.close()
    time.sleep(1.2)   # the retired listeners are freed a second after the last move (http_move)
    check(refused(old) and live.get("/status")[0] == 200, "a second later: the old port still refuses, the new answers")
    # a port in use: bound first, so the old listener stays and the key is named with its reason
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    taken = busy.getsockname()[1]
    before = (live.status()["last_reload"] or {}).get("time_ms")
    g.rewrite(g.text.replace(f"[http]\nport = {live.port}\n", f"[http]\nport = {taken}\n"))
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: (live.status()["last_reload"] or {}).get("time_ms") != before, 5), "reloaded")
    s = live.status()
    check(s["restart_needed"] == "http.port" and f"{taken}" in s["last_reload"]["error"],
          f"a port in use is named, with why: {s['restart_needed']!r} {s['last_reload']['error']!r}")
    busy.close()
    rd.finish()
    g.stop()


def make_cert(d):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", os.path.join(d, "h.key"),
                    "-out", os.path.join(d, "h.pem"), "-days", "30", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    return f"tls_cert = {os.path.join(d, 'h.pem')}\ntls_key = {os.path.join(d, 'h.key')}\n"


def s_client_ok(port):
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-brief"], input=b"",
                       capture_output=True, timeout=10)
    return b"CONNECTION ESTABLISHED" in p.stderr + p.stdout or b"Protocol version" in p.stderr + p.stdout


def test_https_live():
    """HTTPS on by SIGHUP, off by the API (over HTTPS), on by the API, off by SIGHUP."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n", extra=f"write_token = {TOKEN}\n")
    rd, live, plain = Reader(g), Live(g), g.text
    tls_text = plain.replace(f"write_token = {TOKEN}\n", f"write_token = {TOKEN}\n" + make_cert(g.dir))
    for via, on in (("hup", True), ("api", False), ("api", True), ("hup", False)):
        live.reload(via, tls_text if on else plain, tls=on)
        if on:
            check(s_client_ok(live.port), f"{via}: openssl s_client handshakes on port {live.port}")
            check(live.status()["https"] is not None, "/status shows the HTTPS certificate")
            st, _ = call(live.port, "GET", "/status", tls=False)
            check(st != 200, f"{via}: plain HTTP is not served on the HTTPS port ({st})")
        else:
            check(live.status()["https"] is None, f"{via}: /status over plain HTTP, no HTTPS")
    rd.finish()
    g.stop()


def login(live, user, pw):
    st, body = call(live.port, "POST", "/login", json.dumps({"user": user, "password": pw}).encode(),
                    {"Content-Type": "application/json"}, tls=live.tls)
    return json.loads(body)["token"] if st == 200 else st


def hash_password(pw):
    p = subprocess.run([BIN, "hash-password", "--cost", "1"], input=pw + "\n", capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("$"), f"rtugw hash-password ({p.stderr.strip()})")
    return p.stdout.strip()


def test_users_and_sessions_live():
    """Users on (SIGHUP) and off (API), on (API) and off (SIGHUP); max_sessions lowered."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n",
                extra=f"write_token = {TOKEN}\nmax_sessions = 4\n")
    rd, live, plain = Reader(g), Live(g), g.text
    first = None
    users = plain + f"[user admin]\npassword_hash = {hash_password('pw-admin')}\nrole = admin\n"
    for via, on in (("hup", True), ("api", False), ("api", True), ("hup", False)):
        live.reload(via, users if on else plain)
        if on:
            check(live.get("/status", auth=False)[0] == 401, f"{via}: users on: /status needs a login")
            tok = login(live, "admin", "pw-admin")
            check(isinstance(tok, str), f"{via}: the admin logs in ({tok})")
            if first:   # users were off between: the session from before ended with them
                # as its cookie: a wrong bearer token is counted and slows its address down
                st, body = call(live.port, "GET", "/whoami", headers={"Cookie": f"rtugw_session={first}"})
                check(st == 200 and json.loads(body)["user"] is None, f"{via}: the session opened before users were turned off has ended ({st} {body[:100]!r})")
            st, body = call(live.port, "GET", "/whoami", headers={"Cookie": f"rtugw_session={tok}"})
            check(st == 200 and json.loads(body)["user"] == "admin", f"{via}: the new session, as a cookie, is the admin's")
            first = tok
            live.auth = {"Authorization": f"Bearer {tok}"}   # the API is an admin's now
        else:
            st, body = live.get("/whoami", auth=False)
            check(live.get("/status", auth=False)[0] == 200 and json.loads(body).get("login_required") is False,
                  f"{via}: users off: reads open again ({st} {body[:120]!r})")
            live.auth = {"Authorization": f"Bearer {TOKEN}"}
    # max_sessions 4 -> 2 under 3 sessions: the 2 that expire last stay
    live.reload("hup", users)
    toks = [login(live, "admin", "pw-admin") for _ in range(3)]
    check(all(isinstance(t, str) for t in toks), f"3 sessions open ({toks})")
    live.auth = {"Authorization": f"Bearer {toks[-1]}"}
    live.reload("api", users.replace("max_sessions = 4\n", "max_sessions = 2\n"))
    alive = [call(live.port, "GET", "/whoami", headers={"Authorization": f"Bearer {t}"})[0] == 200 and
             json.loads(call(live.port, "GET", "/whoami", headers={"Authorization": f"Bearer {t}"})[1]).get("user")
             == "admin" for t in toks]
    check(alive == [False, True, True], f"max_sessions = 2: the oldest session ended, the 2 newest live ({alive})")
    live.reload("hup", users.replace("max_sessions = 4\n", "max_sessions = 3\n"))
    more = login(live, "admin", "pw-admin")
    alive = [json.loads(call(live.port, "GET", "/whoami", headers={"Authorization": f"Bearer {t}"})[1]).get("user")
             == "admin" for t in toks[1:] + [more]]
    check(alive == [True, True, True], f"max_sessions = 3 by SIGHUP: a third session beside the two ({alive})")
    rd.finish()
    g.stop()


def frames(live):
    st, body = live.get("/frames?bus=line")
    check(st == 200, f"/frames: {st} {body[:200]!r}")
    return json.loads(body)


def test_frame_ring_live():
    """frame_ring 0 -> 64 (SIGHUP) -> 16 (API) -> 0 (SIGHUP), under traffic,
    the bus actor recording on a worker thread meanwhile."""
    # the bus actor on a worker thread: it records while the I/O thread resizes the rings
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n",
                extra=f"write_token = {TOKEN}\nframe_ring = 0\n", gateway_extra="buses_on_io_thread = false\n")
    rd, live = Reader(g), Live(g)
    check(frames(live)["enabled"] is False, "frame_ring = 0: no frames kept")
    last = 0
    for via, cap in (("hup", 64), ("api", 16), ("hup", 0)):
        live.reload(via, re.sub(r"frame_ring = \d+\n", f"frame_ring = {cap}\n", g.text))
        f = frames(live)
        check(f["capacity"] == cap and f["enabled"] == bool(cap), f"{via}: frame_ring = {cap} in force ({f['capacity']})")
        if cap:
            check(wait_for(lambda: frames(live)["last"] > last + 10, 3), f"{via}: frames recorded")
            f = frames(live)
            check(f["frames"] and f["frames"][-1]["seq"] == f["last"] and len(f["frames"]) <= cap and
                  all(b["seq"] == a["seq"] + 1 for a, b in zip(f["frames"], f["frames"][1:])) and f["last"] > last,
                  f"{via}: the newest frames, numbered on from before ({len(f['frames'])} up to {f['last']})")
            last = f["last"]
    rd.finish()
    g.stop()


SRCDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
ROLES = ("[role reader]\nfunctions = read\nunits = all\n"
         "[role operator]\nfunctions = read, write\nunits = all\n"
         "[role admin]\nfunctions = all\nunits = all\n")


def tls_section(pki, port, roles=ROLES, enabled="true"):
    pem = lambda n: os.path.join(pki, n)   # noqa: E731
    return (f"[tls]\nenabled = {enabled}\nport = {port}\ncert_file = {pem('server.pem')}\n"
            f"key_file = {pem('server.key')}\nca_file = {pem('ca.pem')}\n" + roles)


def tls_session(pki, port, who):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(pki, "ca.pem"))
    ctx.load_cert_chain(os.path.join(pki, f"{who}.pem"), os.path.join(pki, f"{who}.key"))
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=3), server_hostname="127.0.0.1")


def ask(s, tid, pdu):
    """The PDU of the answer to pdu (unit 1), or None when the session is gone."""
    try:
        s.sendall(mbap(tid, 1, pdu))
        f = recv_frame(s)
        return f[2] if f else None
    except OSError:
        return None


READ0 = bytes([3, 0, 0, 0, 1])          # holding 0 of slave 1: 1000
WRITE9 = bytes([6, 0, 9, 0x13, 0x88])   # holding 9 := 5000


def test_tls_live():
    """[tls] on (SIGHUP), moved (API), roles reordered and one removed
    (SIGHUP), off (API): each applied, nothing waits."""
    pki = os.path.join(tempfile.mkdtemp(prefix="rtugw-pki-"), "pki")
    subprocess.run(["sh", os.path.join(SRCDIR, "tests", "lib", "mbaps-certs.sh"), pki], check=True,
                   capture_output=True)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n",
                extra=f"write_token = {TOKEN}\n", gateway_extra=f"data_dirs = {tempfile.gettempdir()}\n")
    rd, live, plain = Reader(g), Live(g), g.text
    p1, p2 = free_port(), free_port()
    live.reload("hup", plain + tls_section(pki, p1))
    reader = tls_session(pki, p1, "reader")
    check(ask(reader, 1, READ0) == bytes([3, 2, 0x03, 0xE8]), "on: a reader's TLS session reads holding 0 (1000)")
    check(ask(reader, 2, WRITE9) == bytes([0x86, 1]), "on: ... and its write is refused (exception 01)")
    oper = tls_session(pki, p1, "operator")
    check(ask(oper, 3, READ0) == bytes([3, 2, 0x03, 0xE8]), "on: an operator's TLS session reads")
    live.reload("api", plain + tls_section(pki, p2))
    check(wait_for(lambda: refused(p1), 3), "moved: the old [tls] port refuses")
    s = tls_session(pki, p2, "admin")
    check(ask(s, 4, READ0) == bytes([3, 2, 0x03, 0xE8]), "moved: a new session on the new port reads")
    s.close()
    check(ask(reader, 5, READ0) == bytes([3, 2, 0x03, 0xE8]), "moved: the session open on the old port still reads")
    # admin first, operator gone: the reader's index moves 0 -> 1, the operator's session ends
    live.reload("hup", plain + tls_section(pki, p2, ROLES.split("[role operator]")[0].join(
        ["[role admin]\nfunctions = all\nunits = all\n", ""])))
    check(ask(reader, 6, READ0) == bytes([3, 2, 0x03, 0xE8]) and ask(reader, 7, WRITE9) == bytes([0x86, 1]),
          "roles reordered: the reader's session keeps a reader's rights (read yes, write no)")
    check(closed_by_peer(oper, 3), "roles: the operator's session is closed, its role gone")
    live.reload("api", plain + tls_section(pki, p2, enabled="false"))
    check(wait_for(lambda: refused(p2), 3), "off: the [tls] port refuses")
    check(ask(reader, 8, READ0) == bytes([3, 2, 0x03, 0xE8]), "off: the session still open reads on")
    check(live.status()["tls"] is None, "off: /status has no [tls]")
    live.reload("hup", plain + tls_section(pki, p1))
    s = tls_session(pki, p1, "reader")
    check(ask(s, 9, READ0) == bytes([3, 2, 0x03, 0xE8]), "on again: a new session reads")
    s.close()
    reader.close()
    rd.finish()
    g.stop()
    shutil.rmtree(os.path.dirname(pki), ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_live_http", [test_address_live, test_https_live, test_users_and_sessions_live,
                                 test_frame_ring_live, test_tls_live])
