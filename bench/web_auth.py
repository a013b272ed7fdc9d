#!/usr/bin/python3
"""bench/web_auth.py -- the web side's security figures, on one gateway
(`rtugw run`, a `sim:1` bus, [http] over HTTPS with users; the certificate
made here with openssl, ECDSA P-256):

  https     GET /whoami on a new connection each time: connect, TLS
            handshake, the answer (Python's ssl client, the CA verified);
  login     POST /login of a user whose hash has yescrypt cost --cost, a new
            connection each time, spaced so the hashing budget (8 a second)
            is never what answers;
  modbus    a Modbus TCP read (fc 3, 8 registers, unit 1) back to back,
            quiet, then while --flood clients send logins back to back (most
            are refused 503 by the hashing budget; what each answer was is
            counted): what a login flood costs the Modbus side.

Reported: median and p10-p90 (p99 for modbus) over all samples of --rounds
rounds (the arms in turn within each round).

Usage: /usr/bin/python3 bench/web_auth.py [--bin ./rtugw] [--rounds 3] [--cost 3]
       [--logins 40] [--reads 600] [--flood 3]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rtugwtest import free_port  # noqa: E402   the tests' helper: a free port on 127.0.0.1
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def pct(xs, p99=False):
    xs = sorted(xs)
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    out = f"{med * 1e3:.2f} ms ({xs[n // 10] * 1e3:.2f}-{xs[n * 9 // 10] * 1e3:.2f})"
    return out + (f", p99 {xs[min(n - 1, n * 99 // 100)] * 1e3:.2f}" if p99 else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="./rtugw")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cost", default="3")
    ap.add_argument("--logins", type=int, default=40)
    ap.add_argument("--reads", type=int, default=600)
    ap.add_argument("--flood", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: 1 round, 3 logins, 30 reads, 1 flooding client; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.logins, a.reads, a.flood = 1, 3, 30, 1
    wrong = [0]   # reads whose registers are not the simulator's (holding[a] = 1000 + a for slave 1)
    from pymodbus.client import ModbusTcpClient

    d = tempfile.mkdtemp(prefix="rtugw-bench-web-")
    try:
        subprocess.run(["sh", "-c", """set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 \
  -subj "/CN=bench CA" -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj /CN=localhost
printf 'basicConstraints=critical,CA:false\\nkeyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth\\nsubjectAltName=IP:127.0.0.1\\n' >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 -extfile ext.cnf -out server.pem
"""], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        h = subprocess.run([a.bin, "hash-password", "--cost", a.cost], input="bench-pw\n", capture_output=True,
                           text=True, check=True).stdout.strip()
        tcp, port = free_port(), free_port()
        cfg = os.path.join(d, "c.ini")
        with open(cfg, "w") as f:
            f.write(f"[bus line]\nport = sim:1\ngap_us = 1\n[device d1]\nslave = 1\n[tcp]\nport = {tcp}\n"
                    f"default_bus = line\n[http]\nport = {port}\ntls_cert = {d}/server.pem\ntls_key = {d}/server.key\n"
                    f"[user bench]\npassword_hash = {h}\nrole = admin\n")
        log = open(os.path.join(d, "log"), "w")
        p = subprocess.Popen([a.bin, "run", "-c", cfg], stdout=log, stderr=log)
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
        end = time.time() + 10
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                socket.create_connection(("127.0.0.1", tcp), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        body = json.dumps({"user": "bench", "password": "bench-pw"})

        def req(method, path, data=None):
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            t = time.perf_counter()
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            dt = time.perf_counter() - t
            c.close()
            return r.status, dt

        def reads():
            c = ModbusTcpClient("127.0.0.1", port=tcp, timeout=3)
            c.connect()
            xs = []
            for _ in range(a.reads):
                t = time.perf_counter()
                r = c.read_holding_registers(0, 8, slave=1)
                xs.append(time.perf_counter() - t)
                assert not r.isError(), r
                if list(r.registers) != [1000 + k for k in range(8)]:
                    wrong[0] += 1
            c.close()
            return xs

        res = {"https": [], "login": [], "quiet": [], "flood": []}
        answers = {}
        for _ in range(a.rounds):
            for _ in range(a.logins):
                res["https"].append(req("GET", "/whoami")[1])
                st, dt = req("POST", "/login", body)
                assert st == 200, st
                res["login"].append(dt)
                time.sleep(0.15)   # under the budget: the hash is what is timed
            res["quiet"] += reads()
            stop = [False]

            def flood():
                while not stop[0]:
                    st, _ = req("POST", "/login", body)
                    answers[st] = answers.get(st, 0) + 1
            ts = [threading.Thread(target=flood) for _ in range(a.flood)]
            for t in ts:
                t.start()
            res["flood"] += reads()
            stop[0] = True
            for t in ts:
                t.join()
            time.sleep(1.1)   # the flood spent this second's hashing budget
        p.terminate()
        p.wait(timeout=10)
        print(f"# bench/web_auth.py: {a.rounds} rounds; median (p10-p90)")
        print(f"HTTPS GET /whoami, new connection:      {pct(res['https'])}")
        print(f"HTTPS POST /login, yescrypt cost {a.cost}:     {pct(res['login'])}")
        print(f"Modbus TCP read, quiet:                 {pct(res['quiet'], True)}")
        print(f"Modbus TCP read, {a.flood} clients' logins:     {pct(res['flood'], True)}  (answers {answers})")
        if a.smoke:
            smoke.check("web_auth.py", {k + "_ms": 1e3 * sorted(v)[len(v) // 2] for k, v in res.items()},
                        [k + "_ms" for k in res], wrong=wrong[0])
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
