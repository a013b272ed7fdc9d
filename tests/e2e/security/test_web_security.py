#!/usr/bin/python3
"""The web side as an attacker sees it (issue 42), against the real daemon
over real sockets (http.client, raw sockets, openssl s_client, sslscan).

What must hold:
  - files_outside_config: a tags_file outside the configuration's folder
    (absolute elsewhere, a '..' out, a symbolic link out) is refused by
    `rtugw check` (FILE:LINE and the value) and by PUT /api/config (422),
    so GET /api/templates/NAME/csv never serves, nor PUT replaces, a file
    elsewhere; a link swapped in after check is refused at the request
    (403); a template no device uses is read and checked; with users, the
    CSV calls need an admin;
  - audit_forging: control characters and quotes in a refused request's
    path are escaped in the log (no CR, no ESC), a failed login with an
    unknown user name never logs that name, and a flood of refusals does
    not push what was done out of GET /audit (counted in one entry);
  - host_header: a Host outside [http] server_names gets 421 (DNS
    rebinding), HTTP/1.1 without Host 400, two Content-Lengths that differ
    400; the defaults serve localhost and 127.0.0.1 with any port; `rtugw
    check` refuses a bad server_names;
  - tls_policy: HTTPS and Modbus/TCP Security refuse AES128-SHA and
    AES128-SHA256 (TLS 1.2, no forward secrecy, CBC) and accept
    ECDHE-RSA-AES128-GCM-SHA256; tls_ciphers / ciphers and
    tls_min_version tighten it; sslscan (when installed) finds no CBC or
    static-RSA suite;
  - tls_counters: 5 answered HTTPS GETs and an idle keep-alive the server
    cuts count as established, never as failed; plain HTTP on the port
    still counts as failed;
  - stale_temporaries: a NAME.api-XXXXXX left by a kill -9 is removed at
    start (and logged); the API's temporaries are never readable by group
    or others, even while a large PUT /api/config is being written;
  - login_records: failures with made-up names from 260 addresses push
    out neither a real user's failed-login record nor a penalized
    address's (separate tables; penalized records give way last);
  - sessions_bounded: a viewer's logins never end an admin's session;
    max_sessions_per_user ends the user's own oldest."""
import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, run_tests, wait_for, wait_listening  # noqa: E402

SRCDIR = os.environ.get("srcdir", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
if not shutil.which("openssl"):
    print("missing openssl: install the Debian package openssl (scripts/bootstrap does)")
    sys.exit(1)

WORK = tempfile.mkdtemp(prefix="rtugw-websec-")
CSV = "name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\n"
SECRET = "name,table,address,type\nsecret,holding,1,uint16\n# the-secret-bytes\n"


def call(g, method, path, body=None, headers=None, host=None):
    c = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=10)
    h = dict(headers or {})
    if host:
        h["Host"] = host
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data.decode(errors="replace"), r


def raw(port, data, wait=3.0):
    """Send bytes, read the answer until the server closes (or wait passes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    s.sendall(data)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out


def status_of(answer):
    try:
        return int(answer.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def rtugw_check(path):
    r = subprocess.run([BIN, "check", "-c", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def hash_password(pw):
    r = subprocess.run([BIN, "hash-password", "--cost", "1"], input=pw + "\n", capture_output=True, text=True)
    return r.stdout.strip()


# ---- 1. files outside the configuration ------------------------------------------------

def test_files_outside_config():
    d = tempfile.mkdtemp(prefix="cfg-", dir=WORK)
    outside = tempfile.mkdtemp(prefix="outside-", dir=WORK)
    secret = os.path.join(outside, "secret.csv")
    with open(secret, "w") as f:
        f.write(SECRET)
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write(CSV)
    os.symlink(secret, os.path.join(d, "link.csv"))
    rel_out = os.path.relpath(secret, d)   # ../outside-xxx/secret.csv

    # rtugw check: each way out refused with FILE:LINE and the value
    for value in (secret, rel_out, "link.csv"):
        conf = os.path.join(d, "check.conf")
        with open(conf, "w") as f:
            f.write(f"[bus a]\nport = sim:1\n[template leak]\ntags_file = {value}\n")
        rc, out = rtugw_check(conf)
        check(rc == 2 and f"{conf}:4: [template leak] tags_file = '{value}'" in out and
              "configuration's folder" in out, f"rtugw check refuses tags_file = {value} ({rc}: {out.strip()})")
    # an unused template is read and checked all the same
    with open(os.path.join(d, "broken.csv"), "w") as f:
        f.write("name,table,address,type\nx,holding,1,uint17\n")
    conf = os.path.join(d, "check.conf")
    with open(conf, "w") as f:
        f.write("[bus a]\nport = sim:1\n[template unused]\ntags_file = broken.csv\n")
    rc, out = rtugw_check(conf)
    check(rc == 2 and "uint17" in out, f"rtugw check reads a template no device uses ({rc}: {out.strip()})")
    os.unlink(conf)

    tpl = "[template meter]\ntags_file = meter.csv\n[device meter1]\nslave = 1\ntemplate = meter\n"
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=tpl, dir=d, extra="write_token = s3cret-0123456789abcdefXY\n")
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}
    try:
        wait_listening(g.http_port, g.p)
        for value in (secret, rel_out, "link.csv"):
            st, body, r = call(g, "GET", "/api/config", headers=auth)
            cfg = json.loads(body)
            text = cfg["text"] + f"[template leak]\ntags_file = {value}\n"
            line = text.count("\n")
            st, body, _ = call(g, "PUT", "/api/config", text.encode(),
                               {**auth, "If-Match": f'"{cfg["revision"]}"', "Content-Type": "text/plain"})
            check(st == 422 and f"rtugw.conf:{line}: [template leak] tags_file = '{value}'" in body,
                  f"PUT /api/config with tags_file = {value}: 422 naming the line ({st} {body[:300]})")
            st, body, _ = call(g, "GET", "/api/templates/leak/csv", headers=auth)
            check("the-secret-bytes" not in body, f"... and the file is never served ({st})")
            st, body, _ = call(g, "PUT", "/api/templates/leak/csv", b"name,table,address,type\n", auth)
            with open(secret) as f:
                check(f.read() == SECRET, f"... nor replaced ({st})")
        # a link swapped in after check: refused at the request
        st, body, r = call(g, "GET", "/api/templates/meter/csv", headers=auth)
        check(st == 200 and body == CSV, f"GET of a file inside: 200 ({st})")
        etag = r.getheader("ETag")
        os.rename(os.path.join(d, "meter.csv"), os.path.join(d, "meter.csv.keep"))
        os.symlink(secret, os.path.join(d, "meter.csv"))
        st, body, _ = call(g, "GET", "/api/templates/meter/csv", headers=auth)
        check(st == 403 and "the-secret-bytes" not in body and "symbolic link" in body,
              f"a link out swapped in since check: GET 403 ({st} {body[:200]})")
        st, body, _ = call(g, "PUT", "/api/templates/meter/csv", CSV.encode(), {**auth, "If-Match": etag})
        with open(secret) as f:
            check(st == 403 and f.read() == SECRET, f"... and PUT 403, the file outside unchanged ({st})")
        os.unlink(os.path.join(d, "meter.csv"))
        os.rename(os.path.join(d, "meter.csv.keep"), os.path.join(d, "meter.csv"))
    finally:
        g.stop()

    # with users: the CSV calls are an admin's
    users = (f"[user ada]\npassword_hash = {hash_password('admin-pw')}\nrole = admin\n"
             f"[user vera]\npassword_hash = {hash_password('viewer-pw')}\nrole = viewer\n")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=tpl, dir=d, extra=users)
    try:
        wait_listening(g.http_port, g.p)
        tokens = {}
        for user, pw in (("ada", "admin-pw"), ("vera", "viewer-pw")):
            st, body, _ = call(g, "POST", "/login", json.dumps({"user": user, "password": pw}),
                               {"Content-Type": "application/json"})
            tokens[user] = json.loads(body).get("token") if st == 200 else None
        st, body, _ = call(g, "GET", "/api/templates/meter/csv", headers={"Authorization": f"Bearer {tokens['vera']}"})
        check(st == 403 and "admin" in body, f"a viewer may not read a tag file ({st} {body[:120]})")
        st, body, _ = call(g, "GET", "/api/templates/meter/csv", headers={"Authorization": f"Bearer {tokens['ada']}"})
        check(st == 200 and body == CSV, f"an admin may ({st})")
    finally:
        g.stop()
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)


# ---- 2. audit forging --------------------------------------------------------------------

def test_audit_forging():
    users = (f"[user ada]\npassword_hash = {hash_password('admin-pw')}\nrole = admin\n"
             f"[user vera]\npassword_hash = {hash_password('viewer-pw')}\nrole = viewer\n")
    g = Gateway(extra=users)
    try:
        wait_listening(g.http_port, g.p)
        st, body, _ = call(g, "POST", "/login", json.dumps({"user": "vera", "password": "viewer-pw"}),
                           {"Content-Type": "application/json"})
        vera = json.loads(body)["token"]
        st, body, _ = call(g, "POST", "/login", json.dumps({"user": "ada", "password": "admin-pw"}),
                           {"Content-Type": "application/json"})
        ada = json.loads(body)["token"]
        # a refused write whose path carries CR, ESC and a quote
        forged = b"/api/tags/\r\x1b[2Kaudit: \"ada\" (admin) granted everything"
        answer = raw(g.http_port, b"PUT " + forged + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                     vera.encode() + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        st = status_of(answer)
        time.sleep(0.3)
        log = g.log_text()
        lines = [ln for ln in log.split("\n") if "audit:" in ln or "granted everything" in ln]
        check(st in (400, 403, 404) and "\r" not in log and "\x1b" not in log,
              f"a refused path's CR and ESC never reach the log raw ({st}, {lines[-2:]!r})")
        check(any("\\u000d\\u001b[2Kaudit: \\\"ada\\\" (admin) granted everything" in ln for ln in lines),
              f"... it is logged escaped, in quotes ({lines[-2:]!r})")
        # a failed login with a password typed as the user name
        call(g, "POST", "/login", json.dumps({"user": "hunter2-password", "password": "x"}),
             {"Content-Type": "application/json"})
        time.sleep(0.2)
        log = g.log_text()
        check("hunter2-password" not in log and "unknown user" in log,
              "a failed login's unknown user name is not logged ('unknown user' is)")
        # a flood of refusals cannot push what was done out of /audit
        call(g, "POST", "/logout", headers={"Authorization": f"Bearer {ada}"})   # audited: done
        st, body, _ = call(g, "POST", "/login", json.dumps({"user": "ada", "password": "admin-pw"}),
                           {"Content-Type": "application/json"})
        ada = json.loads(body)["token"]
        for _ in range(200):
            call(g, "PUT", "/api/tags/x", b"{}", {"Authorization": f"Bearer {vera}"})
        st, body, _ = call(g, "GET", "/audit", headers={"Authorization": f"Bearer {ada}"})
        entries = json.loads(body)["entries"]
        check(any(e["what"].startswith("logout of ada") for e in entries),
              f"after 200 refusals the logout before them is still in /audit ({len(entries)} entries)")
        check(any(e.get("repeated", 0) >= 200 for e in entries),
              f"the refusals in a row are one counted entry ({[e.get('repeated') for e in entries][-3:]})")
    finally:
        g.stop()


# ---- 3. Host -------------------------------------------------------------------------------

def test_host_header():
    g = Gateway()
    try:
        wait_listening(g.http_port, g.p)
        p = g.http_port
        for host in ("127.0.0.1", f"127.0.0.1:{p}", f"localhost:{p}", "localhost", "[::1]", f"[::1]:{p}",
                     socket.gethostname()):
            check(call(g, "GET", "/status", host=host)[0] == 200, f"Host {host}: served")
        for host in ("evil.example", f"evil.example:{p}", "127.0.0.1.evil.example", "localhost.evil.example:80"):
            st, body, _ = call(g, "GET", "/status", host=host)
            check(st == 421 and "server_names" in body, f"Host {host}: 421 ({st} {body[:80]})")
        a = raw(p, b"GET /status HTTP/1.1\r\nConnection: close\r\n\r\n")
        check(status_of(a) == 400, f"HTTP/1.1 without Host: 400 ({a[:40]!r})")
        a = raw(p, b"GET /status HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        check(status_of(a) == 400, f"two Host headers: 400 ({a[:40]!r})")
        a = raw(p, b"GET /status HTTP/1.0\r\n\r\n")
        check(status_of(a) == 200, f"HTTP/1.0 without Host: served ({a[:40]!r})")
        a = raw(p, b"POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 40\r\n"
                   b"\r\nhelloGET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        check(status_of(a) == 400 and a.count(b"HTTP/1.1 ") == 1,
              f"Content-Length twice, differing: 400 and the connection closed ({a[:60]!r})")
        a = raw(p, b"POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
                   b"\r\n0\r\n\r\nGET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        check(status_of(a) == 400 and a.count(b"HTTP/1.1 ") == 1,
              f"Transfer-Encoding with Content-Length: 400 and the connection closed ({a[:60]!r})")
        m = g.metrics()
        check(m.get("rtugw_http_misdirected_total", 0) >= 4, f"counted ({m.get('rtugw_http_misdirected_total')})")
    finally:
        g.stop()
    g = Gateway(extra="server_names = gw.example, 10.9.8.7\n")
    try:
        wait_listening(g.http_port, g.p)
        check(call(g, "GET", "/status", host="gw.example:8443")[0] == 200, "server_names: a listed name is served")
        check(call(g, "GET", "/status", host="GW.EXAMPLE")[0] == 200, "... in any case")
        check(call(g, "GET", "/status", host="10.9.8.7")[0] == 200, "... and a listed address")
        check(call(g, "GET", "/status", host="localhost")[0] == 421, "... and nothing else (localhost: 421)")
    finally:
        g.stop()
    conf = os.path.join(WORK, "names.conf")
    with open(conf, "w") as f:
        f.write("[bus a]\nport = sim:1\n[http]\nserver_names = good.example, bad/name\n")
    rc, out = rtugw_check(conf)
    check(rc == 2 and f"{conf}:4: [http] server_names = 'good.example, bad/name': 'bad/name'" in out, f"rtugw check: a bad name ({out.strip()})")


# ---- 4. TLS policy and counters ------------------------------------------------------------

PKI = os.path.join(WORK, "pki")


def make_pki():
    """The MB-TCP-Security test PKI (tests/lib/mbaps-certs.sh) and an RSA server
    certificate from its CA, so that RSA key exchange could be negotiated
    at all (with an ECDSA key, AES128-SHA is refused whatever the policy)."""
    if os.path.exists(os.path.join(PKI, "rsa.pem")):
        return
    subprocess.run(["sh", os.path.join(SRCDIR, "tests", "lib", "mbaps-certs.sh"), PKI], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["sh", "-c", """set -e
openssl req -new -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.csr -subj /CN=localhost 2>/dev/null
printf 'basicConstraints=critical,CA:false\\nkeyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth\\nsubjectAltName=IP:127.0.0.1,DNS:localhost\\n' >rsa.ext
openssl x509 -req -in rsa.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 -extfile rsa.ext -out rsa.pem 2>/dev/null
"""], cwd=PKI, check=True)


def s_client(port, args, client=None):
    """(negotiated cipher or None, output) of one openssl s_client handshake."""
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", os.path.join(PKI, "ca.pem"), *args]
    if client:
        cmd += ["-cert", os.path.join(PKI, f"{client}.pem"), "-key", os.path.join(PKI, f"{client}.key")]
    r = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=15)
    out = r.stdout + r.stderr
    for line in out.splitlines():
        if "Cipher is " in line:
            c = line.split("Cipher is ", 1)[1].strip()
            return (None if c == "(NONE)" else c), out
    return None, out


def tls_gateway(http_extra="", tls_extra=""):
    from rtugwtest import free_port
    tls_port = free_port()
    pem = lambda n: os.path.join(PKI, n)  # noqa: E731
    extra = (f"tls_cert = {pem('rsa.pem')}\ntls_key = {pem('rsa.key')}\n{http_extra}"
             f"[tls]\nenabled = true\nport = {tls_port}\ncert_file = {pem('rsa.pem')}\nkey_file = {pem('rsa.key')}\n"
             f"ca_file = {pem('ca.pem')}\n{tls_extra}[role reader]\nfunctions = read\nunits = all\n")
    g = Gateway(extra=extra)
    g.tls_port = tls_port
    wait_listening(g.http_port, g.p)
    wait_listening(tls_port, g.p)
    return g


def test_tls_policy():
    make_pki()
    g = tls_gateway()
    try:
        for name, port, client in (("HTTPS", g.http_port, None), ("MB-TCP-Security", g.tls_port, "reader")):
            for weak in ("AES128-SHA", "AES128-SHA256", "ECDHE-RSA-AES128-SHA"):
                c, out = s_client(port, ["-tls1_2", "-cipher", weak], client)
                check(c is None, f"{name}: TLS 1.2 {weak} refused (got {c})")
            c, out = s_client(port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"], client)
            check(c == "ECDHE-RSA-AES128-GCM-SHA256", f"{name}: ECDHE-RSA-AES128-GCM-SHA256 accepted ({c})")
            c, out = s_client(port, ["-tls1_3"], client)
            check(c and c.startswith("TLS_"), f"{name}: TLS 1.3 accepted ({c})")
            c, out = s_client(port, ["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"], client)
            check(c is None, f"{name}: TLS 1.1 refused ({c})")
        if shutil.which("sslscan"):
            for name, port in (("HTTPS", g.http_port), ("MB-TCP-Security", g.tls_port)):
                r = subprocess.run(["sslscan", "--no-colour", "--no-heartbleed", "--no-renegotiation",
                                    "--no-compression", "--no-fallback", "--no-check-certificate", "--no-groups",
                                    f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
                accepted = [ln.split()[4] for ln in r.stdout.splitlines()
                            if ln.startswith(("Preferred", "Accepted")) and len(ln.split()) > 4]
                bad = [c for c in accepted if "GCM" not in c and "CHACHA20" not in c]
                check(accepted and not bad, f"sslscan {name}: only AEAD suites ({accepted})")
                check(not any("TLSv1.0" in ln or "TLSv1.1" in ln for ln in r.stdout.splitlines()
                              if ln.startswith(("Preferred", "Accepted"))), f"sslscan {name}: no TLS 1.0/1.1")
        else:
            print("sslscan not installed: its part skipped (scripts/bootstrap installs it)")
    finally:
        g.stop()
    # tightened: one suite for TLS 1.2 on HTTPS; TLS 1.3 only on both
    g = tls_gateway("tls_ciphers = ECDHE-RSA-AES256-GCM-SHA384\n")
    try:
        c, _ = s_client(g.http_port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"])
        check(c is None, f"tls_ciphers: another suite refused ({c})")
        c, _ = s_client(g.http_port, ["-tls1_2"])
        check(c == "ECDHE-RSA-AES256-GCM-SHA384", f"tls_ciphers: the named one accepted ({c})")
    finally:
        g.stop()
    g = tls_gateway("tls_min_version = 1.3\n", "min_version = 1.3\n")
    try:
        for name, port, client in (("HTTPS", g.http_port, None), ("MB-TCP-Security", g.tls_port, "reader")):
            c, _ = s_client(port, ["-tls1_2"], client)
            check(c is None, f"{name} with 1.3 at least: TLS 1.2 refused ({c})")
            c, _ = s_client(port, ["-tls1_3"], client)
            check(c and c.startswith("TLS_"), f"{name} with 1.3 at least: TLS 1.3 accepted ({c})")
    finally:
        g.stop()
    conf = os.path.join(WORK, "ciphers.conf")
    with open(conf, "w") as f:
        f.write("[bus a]\nport = sim:1\n[http]\ntls_ciphers = ECDHE;rm -rf\ntls_min_version = 1.1\n")
    rc, out = rtugw_check(conf)
    check(rc == 2 and "tls_ciphers" in out and "tls_min_version" in out, f"rtugw check: bad values ({out.strip()})")


def test_tls_counters():
    import ssl
    make_pki()
    g = tls_gateway("idle_timeout_s = 1\n")
    try:
        ctx = ssl.create_default_context(cafile=os.path.join(PKI, "ca.pem"))

        def count(name):
            c = http.client.HTTPSConnection("127.0.0.1", g.http_port, context=ctx, timeout=5)
            c.request("GET", "/metrics", headers={"Connection": "close"})
            text = c.getresponse().read().decode()
            c.close()
            for line in text.splitlines():
                if line.startswith(name + " "):
                    return int(float(line.split()[1]))
            return -1
        # wait_listening's plain connect was one failed handshake: from here on
        time.sleep(0.6)
        failed0 = count("rtugw_http_tls_failed_total")
        est0 = count("rtugw_http_tls_established_total")
        # keep-alive GETs the client closes once answered (before: each counted failed)
        for _ in range(5):
            c = http.client.HTTPSConnection("127.0.0.1", g.http_port, context=ctx, timeout=5)
            c.request("GET", "/status")
            r = c.getresponse()
            r.read()
            check(r.status == 200, "an HTTPS GET answered")
            c.close()
        # an idle keep-alive the server cuts
        c = http.client.HTTPSConnection("127.0.0.1", g.http_port, context=ctx, timeout=5)
        c.request("GET", "/status")
        r = c.getresponse()
        r.read()
        time.sleep(2.5)
        c.close()

        wait_for(lambda: count("rtugw_http_tls_established_total") - est0 >= 7, 3)
        est = count("rtugw_http_tls_established_total") - est0
        failed = count("rtugw_http_tls_failed_total") - failed0
        check(est >= 6 and failed == 0,
              f"5 answered GETs and a cut keep-alive: established +{est}, failed +{failed} (want +0)")
        raw(g.http_port, b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n", wait=2)
        check(wait_for(lambda: count("rtugw_http_tls_failed_total") - failed0 == 1, 3),
              f"plain HTTP on the HTTPS port: a failed handshake (+{count('rtugw_http_tls_failed_total') - failed0})")
    finally:
        g.stop()


# ---- 5. temporaries ------------------------------------------------------------------------

def test_stale_temporaries():
    d = tempfile.mkdtemp(prefix="tmp-", dir=WORK)
    stale = os.path.join(d, "rtugw.conf.api-Ab3dE9")
    with open(stale, "w") as f:
        f.write("[http]\nwrite_token = a-secret-left-behind-0123456789\n" + "x" * 4096)
    os.chmod(stale, 0o644)
    keep = os.path.join(d, "rtugw.conf.api-notours")   # not mkstemp's form: kept
    with open(keep, "w") as f:
        f.write("mine")
    target = os.path.join(d, "elsewhere")
    with open(target, "w") as f:
        f.write("a link's target")
    link = os.path.join(d, "rtugw.conf.api-Zz9Zz9")   # a link: never followed, never removed
    os.symlink(target, link)
    g = Gateway(dir=d, extra="write_token = k-0123456789abcdefghijkl\nmax_body_bytes = 8388608\n")
    os.chmod(g.cfg, 0o640)
    try:
        wait_listening(g.http_port, g.p)
        check(not os.path.exists(stale), "a stale NAME.api-XXXXXX is removed at start")
        check("rtugw.conf.api-Ab3dE9" in g.log_text() and "removed" in g.log_text(), "... and the log says so")
        check(os.path.exists(keep) and os.path.islink(link) and os.path.exists(target),
              "other names, and links, are left alone")
        # the API's own temporaries while a large PUT is written: never 0644
        seen, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                try:
                    for e in os.scandir(d):
                        if ".api-" in e.name and e.name not in ("rtugw.conf.api-notours", "rtugw.conf.api-Zz9Zz9"):
                            try:
                                seen.append(stat.S_IMODE(os.lstat(e.path).st_mode))
                            except FileNotFoundError:
                                pass
                except FileNotFoundError:
                    pass
        t = threading.Thread(target=watch)
        t.start()
        try:
            for i in range(8):
                st, body, _ = call(g, "GET", "/api/config", headers={"Authorization": "Bearer k-0123456789abcdefghijkl"})
                cfg = json.loads(body)
                text = g.text + "".join(f"; padding {i} {n} " + "p" * 100 + "\n" for n in range(18000))
                st, body, _ = call(g, "PUT", "/api/config", text.encode(),
                                   {"Authorization": "Bearer k-0123456789abcdefghijkl", "If-Match": f'"{cfg["revision"]}"'})
                check(st == 200, f"a 2 MiB PUT /api/config is written ({st} {body[:100]})")
                if seen:
                    break
        finally:
            stop.set()
            t.join()
        print(f"   temporaries seen while written: {len(seen)}, modes {sorted(set(oct(m) for m in seen))}")
        check(all(m & 0o077 == 0 for m in seen), f"the temporary is 0600 while written ({sorted(set(map(oct, seen)))})")
        mode = stat.S_IMODE(os.stat(g.cfg).st_mode)
        check(mode == 0o640, f"the configuration keeps its mode once written ({oct(mode)})")
    finally:
        g.stop()
        shutil.rmtree(d, ignore_errors=True)


# ---- 6. the login slowdown and sessions, bounded without giving way to an attacker -----------

def login_from(g, user, pw, source="127.0.0.1"):
    """POST /login from a source address of 127/8; a 503 (the hashing budget
    of the second) is tried again. (status, token or None)."""
    for _ in range(50):
        c = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=10, source_address=(source, 0))
        c.request("POST", "/login", json.dumps({"user": user, "password": pw}), {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        c.close()
        if r.status != 503:
            return r.status, (json.loads(body).get("token") if r.status == 200 else None)
        time.sleep(0.15)
    return 503, None


def whoami(g, token):
    st, body, _ = call(g, "GET", "/whoami", headers={"Authorization": f"Bearer {token}"})
    return json.loads(body).get("user") if st == 200 and body.startswith("{") else None


def test_login_records():
    users = (f"[user ada]\npassword_hash = {hash_password('admin-pw')}\nrole = admin\n"
             f"[user vera]\npassword_hash = {hash_password('viewer-pw')}\nrole = viewer\n")
    g = Gateway(extra="metrics_open = true\n" + users)
    try:
        wait_listening(g.http_port, g.p)
        # an attacker guesses ada's password from 127.0.0.2: 5 failures, slowed from there
        for _ in range(5):
            login_from(g, "ada", "guess", "127.0.0.2")
        # ... then fails from 260 other addresses with made-up names, to push
        # both records out of the tables (one table of 256 before)
        t0 = time.time()
        for i in range(260):
            login_from(g, f"nobody{i}", "x", f"127.0.{1 + i // 250}.{1 + i % 250}")
        print(f"   260 failed logins from 260 addresses in {time.time() - t0:.1f} s")
        # one more wrong guess for ada (a fresh address): her 6th failure, slowed 2 s
        st, _ = login_from(g, "ada", "guess", "127.0.3.1")
        st2, _ = login_from(g, "ada", "admin-pw", "127.0.3.2")
        check(st == 401 and st2 == 429,
              f"ada's failures survive the flood: the next try waits, even with her password ({st}, {st2})")
        # one more from the guessing address: its 6th failure, slowed too
        st, _ = login_from(g, "nobody-else", "x", "127.0.0.2")
        st2, _ = login_from(g, "vera", "viewer-pw", "127.0.0.2")
        check(st == 401 and st2 == 429, f"the guessing address's record survives the flood ({st}, {st2})")
        m = g.metrics()
        check(m.get('rtugw_http_login_records_evicted_total{table="address",penalized="false"}', 0) >= 1 and
              m.get('rtugw_http_login_records_evicted_total{table="address",penalized="true"}', -1) == 0,
              "records pushed out are counted, none of them penalized")
    finally:
        g.stop()


def test_sessions_bounded():
    users = (f"[user ada]\npassword_hash = {hash_password('admin-pw')}\nrole = admin\n"
             f"[user vera]\npassword_hash = {hash_password('viewer-pw')}\nrole = viewer\n")
    g = Gateway(extra="max_sessions = 4\n" + users)
    try:
        wait_listening(g.http_port, g.p)
        st, ada = login_from(g, "ada", "admin-pw")
        check(st == 200 and whoami(g, ada) == "ada", f"ada logs in ({st})")
        vera = [login_from(g, "vera", "viewer-pw")[1] for _ in range(10)]
        check(all(vera), "vera logs in 10 times")
        check(whoami(g, ada) == "ada", "10 logins of a viewer on 4 sessions: the admin's session goes on")
        check(whoami(g, vera[-1]) == "vera" and whoami(g, vera[0]) is None,
              "... the viewer's own oldest gave way")
    finally:
        g.stop()
    g = Gateway(extra="max_sessions_per_user = 2\n" + users)
    try:
        wait_listening(g.http_port, g.p)
        vera = [login_from(g, "vera", "viewer-pw")[1] for _ in range(3)]
        check([whoami(g, t) for t in vera] == [None, "vera", "vera"],
              "max_sessions_per_user = 2: a third login ends the first")
    finally:
        g.stop()


if __name__ == "__main__":
    run_tests("test_web_security", [test_files_outside_config, test_audit_forging, test_host_header,
                                    test_tls_policy, test_tls_counters, test_stale_temporaries, test_login_records,
                                    test_sessions_bounded], cleanup=[WORK])
