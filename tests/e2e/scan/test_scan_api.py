#!/usr/bin/python3
"""POST /api/scan (docs/api.md): a scan of a bus from the API, on the bus's
own line, against this test's scripted slaves on a pseudo-terminal
(tests/e2e/scan/test_scan.py's Line): slave 1 sends a turn-on glitch byte before each
answer, slave 2 answers FC 3 only, slave 12 answers everything and is
polled by the gateway (a [poll] group), ids 3-11 are silent.

What must hold:
  - a viewer's and an operator's POST are refused 403, nothing started;
  - a scan of the polled bus without pause_polling is refused 409, as is
    one of a bus whose port is down;
  - bad bodies are refused 400 naming the field (ids 0 and 248, an unknown
    field, a bus that does not exist, first_id after last_id, no bus where
    the configuration has two), 413 past
    1024 bytes;
  - with pause_polling: 202; a second POST while it runs 409; its progress
    (GET /api/scan/line) says running, with ids tried rising; slave 12's
    polls (rtugw_device_requests_total) stop while the scan asks ids 1-11,
    and rise again once it is done;
  - the result is exactly the slaves present: 1 (behind its glitch byte:
    FC 1-4, holding 0 = 1000), 2 (FC 3 only), 12 (FC 1-4);
  - /metrics counts the scans started and done and the refusals by reason."""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "security"))  # tests/e2e/security/test_web_matrix.py: login
from rtugwtest import BIN, Gateway, check, fetch_metrics, run_tests, wait_for  # noqa: E402
from test_scan import Line  # noqa: E402
from test_web_matrix import login  # noqa: E402

USERS = (("ada", "admin-pw", "admin"), ("otto", "operator-pw", "operator"), ("vera", "viewer-pw", "viewer"))


def hash_password(pw):
    p = subprocess.run([BIN, "hash-password", "--cost", "1"], input=pw + "\n", capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.strip(), f"rtugw hash-password ({p.stderr.strip()})")
    return p.stdout.strip()


def call(g, method, path, body=None, cookie=None):
    h = {"Content-Type": "application/json"}
    if cookie:
        h["Cookie"] = f"rtugw_session={cookie}"
        h["Origin"] = f"http://127.0.0.1:{g.http_port}"
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text.decode(errors="replace")


def metrics(g):
    return fetch_metrics(g.http_port, headers={"Cookie": f"rtugw_session={g.admin}"})


def polls_of(g, slave):
    return metrics(g).get(f'rtugw_device_requests_total{{bus="line",device="d{slave}",slave="{slave}"}}', 0)


def test_scan_api():
    line = Line([1, 2, 12], glitch={1}, only={2: {3}})
    users = "".join(f"[user {n}]\npassword_hash = {hash_password(pw)}\nrole = {r}\n" for n, pw, r in USERS)
    devices = ("[bus gone]\nport = /dev/rtugw-test-no-such-port\nbaud = 19200\n[device d12]\nbus = line\nslave = 12\n"
               "[poll p12]\ndevice = d12\nfunction = 3\naddress = 0\ncount = 1\ninterval_ms = 100\n")
    g = Gateway(bus=f"port = {line.path}\nbaud = 19200\n", devices=devices, extra=users, timeout_ms=150)
    try:
        ada, otto, vera = (login(g.http_port, u, pw) for u, pw, _ in USERS)
        check(ada and otto and vera, "the three users log in")
        g.admin, g.viewer = ada, vera   # progress and results are a viewer's to read
        check(wait_for(lambda: polls_of(g, 12) >= 3, 5), f"slave 12 is polled ({polls_of(g, 12)})")
        want = {"bus": "line", "first_id": 1, "last_id": 12}

        for who, cookie in (("viewer", vera), ("operator", otto)):
            st, body = call(g, "POST", "/api/scan", want, cookie)
            check(st == 403, f"{who}: POST /api/scan refused 403 ({st} {body})")
        st, body = call(g, "POST", "/api/scan", want, ada)
        check(st == 409 and "pause_polling" in str(body), f"a polled bus without pause_polling: 409 ({st} {body})")
        for bad, field in (({"first_id": 0}, "first_id"), ({"last_id": 248}, "last_id"), ({"ids": "1-5"}, "ids"),
                           ({"bus": "nope"}, "bus"), ({"first_id": 9, "last_id": 3}, "first_id"),
                           ({"pause_polling": "yes"}, "pause_polling"), ([1, 2], "JSON object")):
            if isinstance(bad, dict) and "bus" not in bad:
                bad = dict(bad, bus="line")
            st, body = call(g, "POST", "/api/scan", bad, ada)
            check(st == 400 and field in str(body), f"{bad}: 400 naming {field} ({st} {body})")
        st, body = call(g, "POST", "/api/scan", b"{" + b" " * 2000 + b"}", ada)
        check(st == 413, f"a 2 KB body: 413 ({st} {body})")
        st, body = call(g, "POST", "/api/scan", {"bus": "gone"}, ada)
        check(st == 409 and "down" in str(body), f"a bus whose port is down: 409 ({st} {body})")
        st, body = call(g, "POST", "/api/scan", {"first_id": 1}, ada)
        check(st == 400 and "bus: required" in str(body), f"no bus where there are two: 400 ({st} {body})")
        st, body = call(g, "GET", "/api/scan/line", cookie=g.viewer)
        check(st == 200 and body.get("state") == "none", f"nothing started by the refusals ({st} {body})")

        t0 = time.time()
        st, body = call(g, "POST", "/api/scan", dict(want, pause_polling=True), ada)
        check(st == 202 and body.get("state") == "running", f"admin, pause_polling: 202 running ({st} {body})")
        st2, body2 = call(g, "POST", "/api/scan", dict(want, pause_polling=True), ada)
        check(st2 == 409 and "one at a time" in str(body2), f"a second scan of the bus: 409 ({st2} {body2})")
        # slave 12's polls stand still while the scan asks ids 1-11 (its own
        # questions to 12 come last)
        time.sleep(0.4)
        a = polls_of(g, 12)
        st, mid = call(g, "GET", "/api/scan/line", cookie=g.viewer)
        time.sleep(0.8)
        b = polls_of(g, 12)
        st, mid2 = call(g, "GET", "/api/scan/line", cookie=g.viewer)
        print(f"   progress: {mid.get('tried')} then {mid2.get('tried')} ids tried; slave 12 polls {a} -> {b}")
        check(mid2.get("state") == "running" and mid2.get("current_id", 99) < 12 and mid2.get("polling_paused"),
              f"still running on ids 1-11 with polling paused ({mid2})")
        check(a == b, f"slave 12 not polled while the scan runs ({a} -> {b})")
        check(mid2["tried"] > mid["tried"] and mid2["elapsed_s"] > mid["elapsed_s"] and mid["ids"] == 12,
              f"progress rises ({mid} then {mid2})")
        check(wait_for(lambda: call(g, "GET", "/api/scan/line", cookie=g.viewer)[1].get("state") != "running", 30),
              "the scan ends")
        took = time.time() - t0
        st, res = call(g, "GET", "/api/scan/line", cookie=g.viewer)
        print(f"   scan of ids 1-12 took {took:.2f} s (elapsed_s {res.get('elapsed_s')}): {json.dumps(res['found'])}")
        found = {f["slave"]: f for f in res["found"]}
        check(res["state"] == "done" and res["tried"] == 12 and sorted(found) == [1, 2, 12],
              f"found exactly slaves 1, 2 and 12 ({res})")
        # FC 4 is not asserted behind the glitch: the line core's framer
        # holds FF 01 04 (slave 255, FC 1, 4 bytes: 9 in all) by its length
        # past the 8 bytes that came, so the daemon's own FC 4 poll of such a
        # slave fails too (docs/api.md, "Scan": a limit of the line core).
        check({1, 2, 3} <= set(found[1]["functions"]) and found[1]["registers"]["holding"] == {"0": 1000},
              f"slave 1 behind its glitch byte: FC 1-3 at least, holding 0 = 1000 ({found[1]})")
        check(found[2]["functions"] == [3] and found[2]["registers"] == {"holding": {"0": 2000}},
              f"slave 2: FC 3 only ({found[2]})")
        check(found[12]["functions"] == [1, 2, 3, 4] and found[12]["registers"]["input"] == {"0": 12000},
              f"slave 12: FC 1-4 ({found[12]})")
        after = polls_of(g, 12)
        check(wait_for(lambda: polls_of(g, 12) >= after + 3, 5),
              f"slave 12 polled again after the scan ({after} -> {polls_of(g, 12)})")
        st, all_ = call(g, "GET", "/api/scan", cookie=g.viewer)
        check(st == 200 and [s["bus"] for s in all_["scans"]] == ["line"], f"GET /api/scan lists it ({all_})")
        st, body = call(g, "GET", "/api/scan/nope", cookie=g.viewer)
        check(st == 404, f"GET /api/scan/nope: 404 ({st})")
        m = metrics(g)
        counts = {k: m.get(k) for k in ('rtugw_scans_total{result="started"}', 'rtugw_scans_total{result="done"}',
                                        'rtugw_scans_refused_total{reason="polled"}',
                                        'rtugw_scans_refused_total{reason="busy"}',
                                        'rtugw_scans_refused_total{reason="invalid"}',
                                        'rtugw_scans_refused_total{reason="port_down"}')}
        check(list(counts.values()) == [1, 1, 1, 1, 9, 1], f"/metrics counts scans and refusals ({counts})")
        log = g.log_text()
        check("scan: bus line refused: polled" in log and "scan: bus line, ids 1-12: done, 3 slaves found" in log,
              "the refusal and the result are logged")
    finally:
        g.stop()
        line.close()


run_tests("test_scan_api", (test_scan_api,))
