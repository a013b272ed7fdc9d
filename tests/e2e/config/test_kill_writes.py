#!/usr/bin/python3
"""A kill -9 at random instants during the configuration API's writes
(issue 41, "a file the daemon writes is checked before it lands").

Each round starts `rtugw run` on what is on disk, sends one of four writes
and kills the daemon with SIGKILL at a random instant inside that write's
measured duration (and sometimes just after it):

  csv-refused   PUT /api/templates/meter/csv with 9,999 rows, which the whole
                configuration's check refuses (7 devices on the template:
                69,993 tags, past the 65,536 limit)
  csv-good      PUT /api/templates/meter/csv with a few rows changed
  config-good   PUT /api/config with one [tag] more
  config-bad    PUT /api/config with an error (refused)

After each kill, what must hold, whatever the instant:
  - `rtugw check` passes the configuration on disk (a daemon can start);
  - the template file and the configuration are each the old bytes or the
    new ones (never a refused text, never a mix);
  - the next round's daemon starts on it (its HTTP port answers), and the
    temporary files a kill left behind are gone once it runs.

Fails on 150cdbd (the CSV was written first and checked after:
its refused 9,999 rows stood on disk for the check's duration).

RTUGW_KILL_INSTANTS=N rounds (default 60; `make check-kill` runs 200);
RTUGW_SEED=N for the random instants."""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish, free_port, sanitizer_env  # noqa: E402

TOKEN = "9f1c4e2ab37d58c6e0f4a1b2c3d4e5f6"   # 128 bits
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEVICES = 7


def rows(n, base="r"):
    return "name,table,address,type\n" + "".join(f"{base}{i},holding,{i % 100},uint16\n" for i in range(n))


def config_text(http_port, extra_tags=0):
    devs = "".join(f"[device m{i}]\nslave = {i}\ntemplate = meter\n" for i in range(1, DEVICES + 1))
    tags = "".join(f"[tag extra{i}]\ndevice = m1\ntable = holding\naddress = {200 + i}\ntype = uint16\n"
                   for i in range(extra_tags))
    return (f"[bus line]\nport = sim:1,2,3,4,5,6,7\nbaud = 115200\nresponse_timeout_ms = 100\n"
            f"[template meter]\ntags_file = meter.csv\n{devs}{tags}"
            f"[http]\nport = {http_port}\nwrite_token = {TOKEN}\nmax_body_bytes = 4194304\n")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def http(port, method, path, body=None, headers=None, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={**AUTH, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Round:
    """One daemon on the folder's files, up until it is killed."""

    def __init__(self, d, log):
        self.d, self.cfg = d, os.path.join(d, "rtugw.conf")
        self.port = int(read(self.cfg).decode().split("[http]\nport = ")[1].split("\n")[0])
        self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stdout=log, stderr=log, env=sanitizer_env())

    def ready(self, seconds=20):
        deadline = time.time() + seconds
        while time.time() < deadline and self.p.poll() is None:
            try:
                if http(self.port, "GET", "/api/config", timeout=2)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=10)


def write_op(r, op, state):
    """The request of op, as bytes to send: (method, path, body, headers, new file bytes or None)."""
    if op.startswith("csv"):
        etag = state["csv_rev"](r)
        body = rows(9999, "big").encode() if op == "csv-refused" else rows(10 + state["n"] % 5, f"v{state['n']}").encode()
        return "PUT", "/api/templates/meter/csv", body, {"If-Match": etag, "Content-Type": "text/csv"}
    text = json.loads(http(r.port, "GET", "/api/config")[1])
    rev, cur = text["revision"], text["text"]
    if op == "config-good":
        new = cur + f"[tag k{state['n']}]\ndevice = m2\ntable = holding\naddress = {300 + state['n'] % 50}\ntype = uint16\n"
    else:
        new = cur + "[device broken]\nslave = 999\n"
    return "PUT", "/api/config", new.encode(), {"If-Match": rev}


def csv_revision(r):
    req = urllib.request.Request(f"http://127.0.0.1:{r.port}/api/templates/meter/csv", headers=AUTH)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get("ETag", "").strip('"')


OPS = ["csv-refused", "csv-good", "config-good", "config-bad"]


def main():
    n_rounds = int(os.environ.get("RTUGW_KILL_INSTANTS", "60"))
    seed = int(os.environ.get("RTUGW_SEED", str(int(time.time()) % 100000)))
    rng = random.Random(seed)
    print(f"== {n_rounds} kill -9 instants, seed {seed} (RTUGW_SEED={seed} replays it)")
    d = tempfile.mkdtemp(prefix="rtugw-kill-")
    cfg, csv = os.path.join(d, "rtugw.conf"), os.path.join(d, "meter.csv")
    with open(cfg, "w") as f:
        f.write(config_text(free_port()))
    with open(csv, "w") as f:
        f.write(rows(10))
    log = open(os.path.join(d, "log"), "w")
    state = {"n": 0, "csv_rev": csv_revision}
    durations, statuses = {}, {}
    tally = {op: [0, 0] for op in OPS}   # rounds, rounds where the write answered before the kill
    bad = []
    for i in range(n_rounds + len(OPS)):
        calibrate = i < len(OPS)
        op = OPS[i] if calibrate else rng.choice(OPS)
        r = Round(d, log)
        if not r.ready():
            bad.append(f"round {i}: the daemon did not start on the files a kill left ({d})")
            r.p.kill()
            break
        leftovers = [f for f in os.listdir(d) if ".api-" in f]
        if leftovers:
            bad.append(f"round {i}: temporary files left while the daemon runs: {leftovers}")
        state["n"] = i
        old_cfg, old_csv = read(cfg), read(csv)
        method, path, body, headers = write_op(r, op, state)
        answer = {}

        def send():
            try:
                answer["status"] = http(r.port, method, path, body, headers, timeout=60)[0]
            except OSError as e:
                answer["error"] = str(e)
        t = threading.Thread(target=send)
        t0 = time.time()
        t.start()
        if calibrate:
            t.join()
            durations[op] = time.time() - t0
            statuses[op] = answer.get("status", answer.get("error"))
            r.kill()
        else:
            # an instant inside the write (its calibrated duration), a few just after it
            time.sleep(rng.uniform(0, durations[op] * 1.2))
            r.kill()
            t.join()
        tally[op][0] += 1
        tally[op][1] += "status" in answer
        if subprocess.run([BIN, "check", "-c", cfg], capture_output=True, env=sanitizer_env()).returncode != 0:
            out = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True).stderr[:300]
            bad.append(f"round {i} ({op}): rtugw check refuses what the kill left: {out}")
            break
        new_cfg, new_csv = read(cfg), read(csv)
        if op.startswith("csv"):
            if new_cfg != old_cfg:
                bad.append(f"round {i} ({op}): the configuration changed")
            if new_csv not in (old_csv, body if op == "csv-good" else old_csv):
                bad.append(f"round {i} ({op}): the tag file is neither the old nor the new bytes "
                           f"({len(new_csv)} bytes)")
        else:
            want = body
            if new_csv != old_csv:
                bad.append(f"round {i} ({op}): the tag file changed")
            if new_cfg not in (old_cfg, want if op == "config-good" else old_cfg):
                bad.append(f"round {i} ({op}): the configuration is neither the old nor the new bytes")
    log.close()
    print("calibrated write durations (s): " + ", ".join(f"{k} {v:.3f}" for k, v in durations.items()))
    want = {"csv-refused": 422, "csv-good": 200, "config-good": 200, "config-bad": 422}
    check(statuses == want, f"each write, let run, answered as it should: {statuses}")
    print("rounds (answered before the kill): " + ", ".join(f"{k} {v[0]} ({v[1]})" for k, v in tally.items()))
    check(not bad, "every kill -9 left files check passes and a daemon starts on: " + "; ".join(bad[:5]))
    check(sum(v[0] for v in tally.values()) >= n_rounds, f"{n_rounds} instants tried")
    if not bad:
        import shutil
        shutil.rmtree(d, ignore_errors=True)
    finish("kill -9 during API writes", f" (seed {seed})")


if __name__ == "__main__":
    main()
