#!/usr/bin/python3
"""100 configuration changes in a row through the API (docs/api.md) under a
steady load (issue 32): devices added from a template, changed, deleted;
[tag] sections added and deleted; all with the revision of the change before
(If-Match), while a Modbus TCP client reads in a loop on one socket and a
QoS 1 MQTT subscriber (paho, against a mosquitto this test starts) takes
what the gateway publishes.

What must hold:
  - every change answered 200, and after each the file on disk passes
    `rtugw check`; no temporary file left;
  - added devices and tags are read live (in /tags), and a device deleted
    in the last cycle is gone live too, its tags with it (nothing waits for
    a restart);
  - the Modbus TCP client: every request answered with its register's
    value, on the socket it opened first (0 sessions dropped, 0 requests
    unanswered);
  - MQTT: the gateway's session never dropped (rtugw_mqtt_reconnects_total 0)
    and the subscriber's sequence has no gap;
  - /metrics counts the 100 changes."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mqtt"))  # tests/e2e/mqtt/: test_mqtt's brokers and subscribers, test_mqtt_tags' mbap_read
from rtugwtest import BIN, Gateway, check, run_tests, wait_for  # noqa: E402
from tagscheck import tag_values  # noqa: E402
import test_mqtt  # noqa: E402
from test_mqtt import Broker, Subscriber, mqtt_section  # noqa: E402
from test_mqtt_tags import mbap_read  # noqa: E402

CHANGES = 100


class TcpLoad(threading.Thread):
    """Reads holding register 3 of unit 1 in a loop on one socket until told to stop."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.stop_at = None
        self.answered, self.wrong, self.lost = 0, 0, 0

    def run(self):
        tid = 0
        while self.stop_at is None:
            tid = (tid + 1) & 0xFFFF
            try:
                got = mbap_read(self.sock, tid, 3)
            except OSError:
                self.lost += 1
                return
            if got is None:
                self.lost += 1
                return
            if got == [1003]:
                self.answered += 1
            else:
                self.wrong += 1

    def finish(self):
        self.stop_at = time.time()
        self.join(10)
        self.sock.close()


def test_hundred_changes_under_load():
    d = tempfile.mkdtemp(prefix="rtugw-api-churn-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\ncurrent,holding,1,uint16,200\n")
    b = Broker("churn")
    sub = Subscriber(b.port, "rtugw/#", "sub-churn", clean=True)
    tpl = f"[template meter]\ntags_file = {d}/meter.csv\n[device meter1]\nslave = 1\ntemplate = meter\n"
    ids = ",".join(str(n) for n in range(1, 23))   # meter1 and the 20 devices added: a slave each
    g = Gateway(bus=f"port = sim:{ids}\nbaud = 115200\n", devices=tpl, dir=d,
                extra="write_token = s3cret-0123456789abcdefXY\n" + mqtt_section(b.port, "gchurn", "publish = poll\n"))
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}
    check(wait_for(lambda: tag_values(g).get("meter1.voltage", {}).get("value") == 1000, 5), "meter1 reads before")
    check(wait_for(lambda: len(sub.messages("/data")) > 0, 5), "MQTT publishes before")
    load = TcpLoad(g.tcp_port)
    load.start()

    def call(method, path, obj, revision):
        body = json.dumps(obj).encode() if obj is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method=method,
                                     headers={**auth, "If-Match": revision})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/config", headers=auth)
    revision = json.loads(urllib.request.urlopen(req, timeout=5).read())["revision"]
    # 100 changes in cycles of ten: two devices added, one changed; three tags
    # added, two deleted, one changed; and, in the last cycle only, a device
    # and a tag deleted.
    refused, check_failed, live_missing, ops = [], [], [], []
    devices, tags = [], []
    t0 = time.monotonic()
    for i in range(CHANGES):
        k = i % 10
        last_cycle = i >= CHANGES - 10
        if k in (0, 5):
            name = f"m{i}"
            op = ("PUT", f"/api/devices/{name}", {"slave": 2 + i // 5, "template": "meter"})
            devices.append(name)
        elif k == 1 and not last_cycle:
            op = ("PUT", f"/api/devices/{devices[-1]}", {"slave": 2 + i // 5, "template": "meter", "max_gap": 4})
        elif k in (2, 3, 6):
            name = f"t{i}"
            op = ("PUT", f"/api/tags/{name}", {"device": "meter1", "table": "holding", "address": 10 + i % 40,
                                               "type": "uint16"})
            tags.append(name)
        elif k == 4:
            op = ("PUT", f"/api/tags/{tags[-1]}", {"device": "meter1", "table": "holding", "address": 60 + i % 20,
                                                   "type": "uint16"})
        elif k in (7, 8) and len(tags) > 1:
            op = ("DELETE", f"/api/tags/{tags.pop(0)}", None)
        elif k == 9 and last_cycle:
            op = ("DELETE", f"/api/devices/{devices.pop(0)}", None)
        else:
            op = ("PUT", f"/api/devices/{devices[-1]}", {"slave": 2 + i // 5, "template": "meter"})
        st, r = call(*op, revision)
        ops.append(op[0] + " " + op[1])
        if st != 200:
            refused.append((i, op[1], st, r))
            continue
        revision = r["revision"]
        p = subprocess.run([BIN, "check", "-c", g.cfg], capture_output=True, text=True)
        if p.returncode != 0:
            check_failed.append((i, p.stderr.strip()[:200]))
        if k == 9 and not last_cycle:
            # the cycle's additions are read live, the deleted tags gone
            want = [f"{dv}.voltage" for dv in devices[-2:]] + tags[-1:]
            if not wait_for(lambda: all(tag_values(g).get(n, {}).get("quality") == "good" for n in want), 5):
                live_missing.append((i, [n for n in want if tag_values(g).get(n, {}).get("quality") != "good"]))
    took = time.monotonic() - t0
    check(not refused, f"{CHANGES} changes, each answered 200 in {took:.1f} s: refused {refused[:3]}")
    check(not check_failed, f"after each change the file passes rtugw check: {check_failed[:3]}")
    check(not live_missing, f"each cycle's devices and tags read live: {live_missing[:3]}")
    check(not [n for n in os.listdir(os.path.dirname(g.cfg)) if ".api-" in n], "no temporary file left")
    check(g.status().get("restart_needed") == "",
          f"the deleted device applied live, nothing waits ({g.status().get('restart_needed')})")
    gone = [n for n in ops if n.startswith("DELETE /api/devices/")]
    names = {n.split("/")[-1] for n in gone}
    check(gone and wait_for(lambda: not [t for t in tag_values(g) if t.split(".")[0] in names], 5),
          f"and its tags are gone from /tags ({names})")
    time.sleep(0.5)
    load.finish()
    check(load.lost == 0 and load.wrong == 0 and load.answered > 100,
          f"Modbus TCP on one socket: {load.answered} answered, {load.wrong} wrong, {load.lost} lost")
    check(mbap_read(socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3), 1, 3) == [1003],
          "and a new connection answers")
    m = g.metrics()
    check(m.get("rtugw_http_api_changes_total") == CHANGES,
          f"/metrics counts {m.get('rtugw_http_api_changes_total')} changes")
    check(m.get("rtugw_mqtt_reconnects_total", 0) == 0, "the MQTT session was never dropped")
    test_mqtt.seq_check([p["seq"] for _, p, _ in sub.messages("/data")], "QoS 1 subscriber across 100 changes")
    g.stop()
    sub.close()
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_api_churn", [test_hundred_changes_under_load], cleanup=[test_mqtt.WORK])
