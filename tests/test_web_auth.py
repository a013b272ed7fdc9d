#!/usr/bin/python3
"""The web side's security end to end, with real peers (curl, Python's ssl
and http.client, raw sockets): [http] over TLS, users with roles, logins
and sessions, the authorisation of every route, the audit log.

What must hold:
  - with [http] tls_cert/tls_key the port speaks HTTPS only: `curl --cacert`
    verifies the certificate and gets /status; plain HTTP on that port gets
    no answer (the connection is closed, counted); a daemon without tls_cert
    never maps libssl."""
import atexit
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, Gateway, check, run_tests, wait_for  # noqa: E402

if not shutil.which("openssl") or not shutil.which("curl"):
    print("missing openssl or curl: install the Debian packages openssl and curl (scripts/bootstrap does)")
    sys.exit(1)

# A CA and a server certificate for 127.0.0.1 and localhost, with the
# openssl commands docs/security.md shows for HTTPS.
PKI = tempfile.mkdtemp(prefix="rtugw-web-pki-")
atexit.register(shutil.rmtree, PKI, True)
subprocess.run(["sh", "-c", """set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 \
  -subj "/CN=rtugw web test CA" -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj /CN=localhost
printf 'basicConstraints=critical,CA:false\\nkeyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth\\nsubjectAltName=IP:127.0.0.1,DNS:localhost\\n' >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 -extfile ext.cnf -out server.pem
"""], cwd=PKI, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
CA = os.path.join(PKI, "ca.pem")
TLS = f"tls_cert = {PKI}/server.pem\ntls_key = {PKI}/server.key\n"


def curl(*args):
    """curl's exit status, HTTP status and body (-w puts the status last)."""
    r = subprocess.run(["curl", "-sS", "-m", "5", "-w", "\n%{http_code}", *args], capture_output=True, text=True)
    body, _, code = r.stdout.rpartition("\n")
    return r.returncode, int(code or 0), body, r.stderr


def https_metrics(g):
    rc, code, body, _ = curl("--cacert", CA, f"https://127.0.0.1:{g.http_port}/metrics")
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def mapped_libssl(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libssl" in f.read()


def test_https():
    g = Gateway(extra=TLS)
    try:
        rc, code, body, err = curl("--cacert", CA, f"https://127.0.0.1:{g.http_port}/status")
        check(rc == 0 and code == 200 and "uptime_s" in json.loads(body),
              f"curl --cacert verifies the certificate and gets /status over HTTPS (rc {rc}, {code}, {err})")
        status = json.loads(body)
        check(status.get("https", {}).get("certificate", {}).get("subject") == "/CN=localhost",
              f"/status shows the HTTPS certificate ({status.get('https')})")
        rc, code, body, err = curl(f"https://localhost:{g.http_port}/status")
        check(rc == 60 and code == 0, f"without the CA, curl refuses the certificate (rc {rc}, {err.strip()})")
        rc, code, body, err = curl(f"http://127.0.0.1:{g.http_port}/status")
        check(rc != 0 and code == 0 and body == "",
              f"plain HTTP on the HTTPS port gets no answer (rc {rc}, {code}, {body!r})")
        # raw: a plain request is never answered in clear
        s = socket.create_connection(("127.0.0.1", g.http_port), timeout=3)
        s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        try:
            while (chunk := s.recv(4096)):
                got += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
        check(b"HTTP/1." not in got and b"uptime" not in got, f"nothing in clear on the HTTPS port ({got[:60]!r})")
        check(wait_for(lambda: https_metrics(g).get("rtugw_http_tls_failed_total", 0) >= 2, 3),
              "the refused plain connections are counted (rtugw_http_tls_failed_total)")
        check(https_metrics(g).get("rtugw_http_tls_established_total", 0) >= 1, "HTTPS connections are counted")
        check(mapped_libssl(g.p.pid), "with tls_cert the daemon maps libssl (the HTTPS module)")
        check("https 127.0.0.1:" in g.log_text(), "the log says https")
    finally:
        g.stop()
    plain = Gateway()
    try:
        check(not mapped_libssl(plain.p.pid), "without tls_cert the daemon does not map libssl")
    finally:
        plain.stop()


def test_https_config_errors():
    d = tempfile.mkdtemp(prefix="rtugw-web-cfg-")
    try:
        def rtugw_check(http):
            p = os.path.join(d, "c.ini")
            with open(p, "w") as f:
                f.write(f"[bus a]\nport = sim:1\n[tcp]\nport = 15020\n[http]\nport = 18080\n{http}")
            r = subprocess.run([BIN, "check", "-c", p], capture_output=True, text=True)
            return r.returncode, r.stdout + r.stderr
        rc, out = rtugw_check(f"tls_cert = {PKI}/server.pem\n")
        check(rc != 0 and "tls_cert" in out and "needs tls_key" in out, f"tls_cert without tls_key is refused ({out})")
        rc, out = rtugw_check(f"tls_key = {PKI}/server.key\n")
        check(rc != 0 and "needs tls_cert" in out, f"tls_key without tls_cert is refused ({out})")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # a file that does not load: the daemon does not start, and says which
    g_dir = tempfile.mkdtemp(prefix="rtugw-web-bad-")
    try:
        p = os.path.join(g_dir, "c.ini")
        with open(p, "w") as f:
            f.write(f"[bus a]\nport = sim:1\n[tcp]\nport = 15021\n[http]\nport = 18081\n"
                    f"tls_cert = {PKI}/ca.key\ntls_key = {PKI}/server.key\n")
        r = subprocess.run([BIN, "run", "-c", p], capture_output=True, text=True, timeout=10)
        check(r.returncode != 0 and f"[http] tls_cert = '{PKI}/ca.key'" in r.stderr,
              f"a certificate file that does not load stops the start, naming it ({r.stderr.strip()[-200:]})")
        with open(p, "w") as f:
            f.write(f"[bus a]\nport = sim:1\n[tcp]\nport = 15021\n[http]\nport = 18081\n"
                    f"tls_cert = {PKI}/server.pem\ntls_key = {PKI}/ca.key\n")
        r = subprocess.run([BIN, "run", "-c", p], capture_output=True, text=True, timeout=10)
        check(r.returncode != 0 and f"[http] tls_key = '{PKI}/ca.key'" in r.stderr and "mismatch" in r.stderr,
              f"a key that is not the certificate's is refused ({r.stderr.strip()[-200:]})")
    finally:
        shutil.rmtree(g_dir, ignore_errors=True)


run_tests("test_web_auth", [test_https, test_https_config_errors])
