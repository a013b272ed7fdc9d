#!/usr/bin/python3
"""The files the configuration names besides tag files stay under its
folder or a [gateway] data_dirs folder (issue 42; config/paths.c), against
`rtugw check` and the real daemon's API.

What must hold:
  - check: [http] tls_cert, [tls] ca_file, [router] state_file, [mqtt]
    spool_dir and password_file outside (absolute elsewhere, a '..' out, a
    symbolic link out) are refused with FILE:LINE, the key and the value;
    the same paths pass once their folder is in data_dirs; a relative
    path is the configuration folder's; data_dirs must be absolute;
  - api: PUT /api/config naming a certificate or a state file outside is
    refused 422 with that error and the file is unchanged; a PUT that
    changes data_dirs is refused 422 (only a hand edit changes it);
  - https: a daemon with its certificate and key in a data folder serves
    HTTPS (the files opened relative to that folder)."""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, run_tests, wait_listening  # noqa: E402

WORK = tempfile.mkdtemp(prefix="rtugw-confine-")


def rtugw_check(conf, text):
    with open(conf, "w") as f:
        f.write(text)
    r = subprocess.run([BIN, "check", "-c", conf], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_check():
    d = os.path.join(WORK, "etc")
    data = os.path.join(WORK, "data")
    outside = os.path.join(WORK, "outside")
    for x in (d, data, outside):
        os.makedirs(x)
    with open(os.path.join(outside, "secret"), "w") as f:
        f.write("x\n")
    os.symlink(outside, os.path.join(d, "link"))
    conf = os.path.join(d, "rtugw.conf")
    base = "[bus a]\nport = sim:1\n"
    cases = [
        ("[http]\ntls_cert = {v}\ntls_key = k.pem\n", "http", "tls_cert", 4),
        ("[router]\nstate_file = {v}\n", "router", "state_file", 4),
        ("[mqtt]\nhost = h\nspool_dir = {v}\n", "mqtt", "spool_dir", 5),
        ("[mqtt]\nhost = h\nusername = u\npassword_file = {v}\n", "mqtt", "password_file", 6),
    ]
    for tpl, section, key, line in cases:
        for v, how in ((os.path.join(outside, "secret"), "outside"), ("../outside/secret", "'..'"),
                       ("link/secret", "a symbolic link")):
            rc, out = rtugw_check(conf, base + tpl.format(v=v))
            check(rc == 2 and f"{conf}:{line}: [{section}] {key} = '{v}'" in out and
                  ("configuration's folder" in out),
                  f"check refuses {key} = {v} ({how}) with FILE:LINE ({out.strip()[:220]})")
    rc, out = rtugw_check(conf, base + f"[router]\nstate_file = {data}/router.state\n")
    check(rc == 2, "a state_file in an undeclared folder is refused")
    rc, out = rtugw_check(conf, f"[gateway]\ndata_dirs = {data}, /var/lib/rtugw\n" + base +
                          f"[router]\nstate_file = {data}/router.state\n[mqtt]\nhost = h\nspool_dir = {data}/spool\n")
    check(rc == 0, f"with data_dirs the state file and spool pass ({out.strip()[-200:]})")
    rc, out = rtugw_check(conf, f"[gateway]\ndata_dirs = {data}\n" + base +
                          f"[router]\nstate_file = {data}/../outside/secret\n")
    check(rc == 2 and "state_file" in out, f"a '..' out of a data folder is refused ({out.strip()[-160:]})")
    rc, out = rtugw_check(conf, base + "[router]\nstate_file = router.state\n")
    check(rc == 0, f"a relative path is the configuration folder's ({out.strip()[-160:]})")
    rc, out = rtugw_check(conf, "[gateway]\ndata_dirs = relative/dir\n" + base)
    check(rc == 2 and "expected an absolute folder" in out, f"data_dirs must be absolute ({out.strip()})")


def put_config(g, token, text):
    c = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=10)
    c.request("GET", "/api/config", headers={"Authorization": f"Bearer {token}"})
    rev = json.loads(c.getresponse().read())["revision"]
    c.request("PUT", "/api/config", body=text.encode(),
              headers={"Authorization": f"Bearer {token}", "If-Match": f'"{rev}"'})
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    c.close()
    return r.status, body


def test_api():
    token = subprocess.run([BIN, "hash-password", "--token"], capture_output=True, text=True).stdout.strip()
    d = tempfile.mkdtemp(prefix="cfg-", dir=WORK)
    g = Gateway(dir=d, extra=f"write_token = {token}\n", gateway_extra=f"data_dirs = {d}/data\n")
    try:
        wait_listening(g.http_port, g.p)
        with open(g.cfg) as f:
            before = f.read()
        for extra, key in (("[router]\nstate_file = /etc/passwd\n", "state_file"),
                           ("[mqtt]\nhost = h\nca_file = /etc/ssl/private/key.pem\n", "ca_file")):
            st, body = put_config(g, token, before + extra)
            check(st == 422 and f"{key} = '" in body and "configuration's folder" in body,
                  f"PUT /api/config with {key} outside: 422 ({st}, {body.strip()[:200]})")
        st, body = put_config(g, token, before.replace(f"data_dirs = {d}/data\n", "data_dirs = /\n"))
        check(st == 422 and "not changed through the API" in body,
              f"PUT /api/config widening data_dirs: 422 ({st}, {body.strip()[:200]})")
        with open(g.cfg) as f:
            check(f.read() == before, "the file is unchanged")
    finally:
        g.stop()
        shutil.rmtree(d, ignore_errors=True)


def test_https_in_data_dir():
    d = tempfile.mkdtemp(prefix="cfg-", dir=WORK)
    pki = tempfile.mkdtemp(prefix="pki-", dir=WORK)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-days", "2", "-keyout", f"{pki}/k.pem", "-out", f"{pki}/c.pem"],
                   check=True, capture_output=True)
    g = Gateway(dir=d, extra=f"tls_cert = {pki}/c.pem\ntls_key = {pki}/k.pem\n", gateway_extra=f"data_dirs = {pki}\n")
    try:
        ok = wait_listening(g.http_port, g.p)
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{g.http_port}", "-brief"],
                           input="", capture_output=True, text=True, timeout=10)
        check(ok and "CONNECTION ESTABLISHED" in r.stderr + r.stdout,
              f"HTTPS with the certificate in a data folder ({(r.stderr + r.stdout).strip()[:160]})")
    finally:
        g.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_web_confine", [test_check, test_api, test_https_in_data_dir], cleanup=[WORK])
