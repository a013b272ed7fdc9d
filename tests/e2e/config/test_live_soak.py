#!/usr/bin/python3
"""A live-change soak (issue 41): random configuration changes, through
SIGHUP and through the API, while a Modbus TCP client per bus reads on one
connection each.

The changes are drawn from what applies live (the man page's list): a tag
added or removed ([tag] sections through /api/tags, rows of a template's CSV
through /api/templates/NAME/csv), a device added from the template or
removed, a poll group added or removed, a device's interval_ms, a template
no device uses added or removed, the log level, [tcp] max_pending, allow and
the listener's port (by SIGHUP), a third [bus] added, changed beyond its
line keys, renamed or removed (by SIGHUP), a device's line keys (timeout_ms,
dead_after, dead_backoff_ms), a device moved to another slave id, and bus
a's response_timeout_ms and retries (by SIGHUP), a [user] added, removed
or given another role (by SIGHUP; the API is driven by an admin's session,
which lives through every change), and [mqtt]'s keepalive_s (by SIGHUP: the
session is swapped, its queue carried). A QoS 1 subscriber (paho, on
Debian's mosquitto) reads the data throughout. After each change:
  - the daemon's verdict (/status last_reload) is "applied" and nothing is
    named for a restart; a new user logs in with its role (/whoami), a
    removed one cannot;
and every CHECK_EVERY changes (RTUGW_SOAK_CHECK_EVERY: make check 10,
`make check-live-soak` 1, after each), and after the last:
  - the running tables (GET /api/buses, devices, templates, tags, polls)
    equal those of a fresh `rtugw run` of the same file (its ports moved):
    a live change leaves the daemon as a start would;
and at the end:
  - the QoS 1 subscriber saw every data sequence number, in order: no gap
    across any change, MQTT's own included;
  - each client, connected before the first change, kept its connection and
    got every answer right: 0 wrong, 0 lost (the buses changed only in their live keys);
  - the daemon stops cleanly;
and, by a Sparkplug host (SparkplugMirror below), every CHECK_EVERY changes
and after the last: a second daemon runs the same file with [mqtt] as a
Sparkplug edge node (its keepalive_s following the file's), reloaded by
SIGHUP with the changes since its last reload; on spBv1.0/# each DBIRTH
names exactly its device's running tags and poll groups' items (POLLNAME.N;
no ghost metric), and the births are exactly those the changes imply: a
device whose set changed dies (DDEATH, if it was born) and is born again
with its new set; one left with no metric dies and is not born; an
unchanged one neither; no NBIRTH unless [mqtt] changed (then an NBIRTH and
every device with metrics born).

RTUGW_SOAK_CHANGES=N (default 150; `make check-live-soak` runs 1,000),
RTUGW_SEED=N replays a run."""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mqtt"))  # tests/e2e/mqtt/: test_mqtt's brokers and subscribers
from rtugwtest import BIN, Daemon, check, failure_count, finish, free_port, procs, sanitizer_env, wait_for, wait_listening  # noqa: E402
from test_mqtt import Broker, Subscriber, seq_check  # noqa: E402

TOKEN = "0d4c8a1f9b2e7d6c5a4b3c2d1e0f9a8b"
CHECK_EVERY = int(os.environ.get("RTUGW_SOAK_CHECK_EVERY", "10"))
ADMIN_PW = "soak-admin-pw"


def hash_password(pw):
    p = subprocess.run([BIN, "hash-password", "--cost", "1"], input=pw + "\n", capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("$"), f"rtugw hash-password ({p.stderr.strip()})")
    return p.stdout.strip()


def login(port, user, pw):
    """POST /login: the session's token, or the HTTP status when refused."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/login", method="POST",
                                 data=json.dumps({"user": user, "password": pw}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return json.loads(r.read())["token"]
    except urllib.error.HTTPError as e:
        return e.code


def meter_csv(rows):
    return "name,table,address,type\n" + "".join(f"{n},holding,{a},uint16\n" for n, a in rows)


class Soak(Daemon):
    """The daemon under soak; Daemon's stop(): exit 0 on SIGTERM, no sanitizer report."""
    def __init__(self, d, broker):
        self.d = d
        self.cfg = os.path.join(d, "rtugw.conf")
        self.tcp, self.http = free_port(), free_port()
        self.http_port = self.http
        self.csv_rows = [("v", 0), ("i", 1)]
        self.hashes = {}   # the users' password hashes, made once (crypt's cost is the slow part)
        with open(os.path.join(d, "meter.csv"), "w") as f:
            f.write(meter_csv(self.csv_rows))
        with open(self.cfg, "w") as f:
            f.write("[gateway]\nlog_level = info\n"
                    "[bus a]\nport = sim:1,2,5,6\nbaud = 115200\nresponse_timeout_ms = 1000\nretries = 1\n"
                    "[bus b]\nport = sim:3,7,8\nbaud = 115200\nresponse_timeout_ms = 1000\nretries = 1\n"
                    "[template meter]\ntags_file = meter.csv\n"
                    "[device d1]\nbus = a\nslave = 1\n[device d2]\nbus = a\nslave = 2\ntemplate = meter\n"
                    "[device d3]\nbus = b\nslave = 3\n"
                    "[tag t1]\ndevice = d1\ntable = holding\naddress = 10\ntype = uint16\n"
                    f"[tcp]\nport = {self.tcp}\nmax_clients = 64\nunit3 = b:3\n"
                    f"[http]\nport = {self.http}\nwrite_token = {TOKEN}\nmax_body_bytes = 1048576\n"
                    f"[user admin]\npassword_hash = {self.hash_of(ADMIN_PW)}\nrole = admin\n"
                    f"[mqtt]\nhost = 127.0.0.1\nport = {broker.port}\ngateway = soak\nclient_id = soak-gw\n"
                    "keepalive_s = 5\npublish = poll\nqos = 1\n")
        self.log = open(os.path.join(d, "log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stdout=self.log, stderr=self.log, env=sanitizer_env())
        procs.append(self.p)
        check(wait_listening(self.tcp, self.p) and wait_listening(self.http, self.p), "the daemon listens (Modbus TCP, HTTP)")
        # with users the configuration API is an admin's: one session, kept across every change
        self.token = login(self.http, "admin", ADMIN_PW)
        check(isinstance(self.token, str), f"the admin logs in ({self.token})")
        self.n = 0

    def hash_of(self, pw):
        if pw not in self.hashes:
            self.hashes[pw] = hash_password(pw)
        return self.hashes[pw]

    def http_call(self, method, path, body=None, headers=None, port=None, token=None):
        req = urllib.request.Request(f"http://127.0.0.1:{port or self.http}{path}", data=body, method=method,
                                     headers={"Authorization": f"Bearer {token or self.token}", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def text(self):
        with open(self.cfg) as f:
            return f.read()

    def rev(self):
        return json.loads(self.http_call("GET", "/api/config")[1])["revision"]

    def last_reload(self):
        return json.loads(self.http_call("GET", "/status")[1]).get("last_reload") or {}

    def api(self, method, path, obj=None, raw=None, etag=None):
        body = raw if raw is not None else json.dumps(obj).encode() if obj is not None else None
        st, out, _ = self.http_call(method, path, body, {"If-Match": etag or self.rev()})
        return st, out

    def hup(self, new_text):
        before = self.last_reload().get("time_ms")
        with open(self.cfg, "w") as f:
            f.write(new_text)
        self.p.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and self.last_reload().get("time_ms") == before:
            time.sleep(0.02)

    # ---- the changes: each returns a short description -----------------------------
    def change(self, rng):
        self.n += 1
        n, text = self.n, self.text()
        kind = rng.choice(["tag+", "tag-", "csv", "device+", "device-", "poll+", "poll-", "interval", "spare",
                           "log", "tcp", "port", "devkeys", "move", "buskeys", "user", "mqtt", "http", "bus"])
        if kind == "bus":       # a third bus added, restarted in place, renamed or removed (no reader on it)
            return self.bus_change(rng, text)
        if kind == "mqtt":      # the session swapped at new settings (same broker and prefix: its queue carried)
            keep = text.split("keepalive_s = ")[1].split("\n")[0]
            self.hup(text.replace(f"keepalive_s = {keep}\n", f"keepalive_s = {rng.choice([5, 6, 7, 8])}\n"))
            return kind, (200, b"")
        if kind == "http":      # [http]'s port, frame_ring, max_sessions, by SIGHUP or the API
            return kind, self.http_change(rng, text)
        if kind == "user":      # a user added, removed or given another role, by SIGHUP
            return self.user_change(rng, n, text)
        if kind == "devkeys":   # the line's keys for slave 1 (line_keys_t), by the API
            return kind, self.api("PUT", "/api/devices/d1", {"bus": "a", "slave": 1,
                                                             "timeout_ms": rng.choice([0, 700, 1200]),
                                                             "dead_after": rng.choice([0, 3, 5]),
                                                             "dead_backoff_ms": rng.choice([2000, 10000])})
        if kind == "move":      # a template's device to the other free slave of bus a
            devs = json.loads(self.http_call("GET", "/api/devices")[1])["devices"]
            movable = [d for d in devs if d["name"].startswith("m")]
            taken = {d["slave"] for d in devs if d["bus"] == "a"}
            free = [x for x in (5, 6) if x not in taken]
            if not movable or not free:
                return kind, (0, b"nothing to move")
            return kind, self.api("PUT", f"/api/devices/{movable[0]['name']}", {"bus": "a", "slave": free[0],
                                                                                "template": "meter"})
        if kind == "buskeys":   # bus a's timeout and retries, by SIGHUP (its readers read on)
            a = text.split("[bus a]\n")[1].split("[bus b]")[0]
            self.hup(text.replace(a, f"port = sim:1,2,5,6\nbaud = 115200\nresponse_timeout_ms = "
                                     f"{rng.choice([800, 1000, 1500])}\nretries = {rng.choice([1, 2])}\n"))
            return kind, (200, b"")
        if kind == "tag+":
            return kind, self.api("PUT", f"/api/tags/k{n}", {"device": rng.choice(["d1", "d3"]), "table": "holding",
                                                             "address": 100 + n % 200, "type": "uint16"})
        if kind == "tag-":
            names = [ln[5:-1] for ln in text.splitlines() if ln.startswith("[tag k")]
            return kind, self.api("DELETE", f"/api/tags/{rng.choice(names)}") if names else (0, b"nothing to do")
        if kind == "csv":
            self.csv_rows = [("v", 0)] + [(f"r{n}_{i}", 2 + i) for i in range(rng.randint(0, 5))]
            st, _, h = self.http_call("GET", "/api/templates/meter/csv")
            return kind, self.api("PUT", "/api/templates/meter/csv", raw=meter_csv(self.csv_rows).encode(),
                                  etag=h.get("ETag", "").strip('"'))
        if kind == "device+":
            devs = json.loads(self.http_call("GET", "/api/devices")[1])["devices"]
            free = [x for x in (5, 6) if not any(d["bus"] == "a" and d["slave"] == x for d in devs)]
            if not free:
                return kind, (0, b"no free slave")
            return kind, self.api("PUT", f"/api/devices/m{n}", {"bus": "a", "slave": rng.choice(free),
                                                                 "template": "meter"})
        if kind == "device-":
            names = [ln[8:-1] for ln in text.splitlines() if ln.startswith("[device m")]
            return kind, self.api("DELETE", f"/api/devices/{rng.choice(names)}") if names else (0, b"nothing to do")
        if kind == "poll+":
            return kind, self.api("PUT", f"/api/polls/p{n}", {"device": "d3", "function": 3, "address": n % 50,
                                                              "count": 4, "interval_ms": 200})
        if kind == "poll-":
            names = [ln[6:-1] for ln in text.splitlines() if ln.startswith("[poll p")]
            return kind, self.api("DELETE", f"/api/polls/{rng.choice(names)}") if names else (0, b"nothing to do")
        if kind == "interval":
            return kind, self.api("PUT", "/api/devices/d1", {"bus": "a", "slave": 1,
                                                             "interval_ms": rng.choice([200, 500, 1000])})
        if kind == "spare":
            if "[template spare]" in text:
                return kind, self.api("DELETE", "/api/templates/spare")
            return kind, self.api("PUT", "/api/templates/spare", {"tags_file": "meter.csv"})
        if kind == "log":
            level = rng.choice(["info", "warn", "debug"])
            self.hup(text.replace(text.split("log_level = ")[1].split("\n")[0], level, 1))
            return kind, (200, b"")
        if kind == "tcp":
            tcp = text.split("[tcp]\n")[1].split("[http]")[0]
            new = f"port = {self.tcp}\nmax_clients = 64\nunit3 = b:3\nmax_pending = {rng.choice([4, 16, 64])}\n" + \
                rng.choice(["", "allow = 127.0.0.0/8\n"])
            self.hup(text.replace(tcp, new))
            return kind, (200, b"")
        # port: the listener moves; the clients stay on their connections
        old = self.tcp
        self.tcp = free_port()
        self.hup(text.replace(f"[tcp]\nport = {old}\n", f"[tcp]\nport = {self.tcp}\n"))
        return kind, (200, b"")

    def http_change(self, rng, text):
        """[http] keys made live (tests/e2e/config/test_live_http.py has each in
        detail): its port moved, frame_ring and max_sessions set, by SIGHUP or
        PUT /api/config (answered on the connection it came on); the admin's
        session lives through each, and /status answers at the new port."""
        http = text.split("[http]\n")[1].split("[")[0]
        old, port = self.http, free_port() if rng.random() < 0.4 else self.http
        new = (f"port = {port}\nwrite_token = {TOKEN}\nmax_body_bytes = 1048576\n"
               f"frame_ring = {rng.choice([0, 16, 64])}\nmax_sessions = {rng.choice([32, 64, 128])}\n")
        new_text = text.replace(f"[http]\n{http}", f"[http]\n{new}")
        before = self.last_reload().get("time_ms")
        if rng.random() < 0.5:
            with open(self.cfg, "w") as f:
                f.write(new_text)
            self.p.send_signal(signal.SIGHUP)
            st, out = 200, b""
        else:
            st, out = self.api("PUT", "/api/config", raw=new_text.encode())
        self.http = self.http_port = port

        def moved():
            try:
                return self.last_reload().get("time_ms") != before
            except (OSError, ValueError):
                return False   # the new port an instant before the reload opens it
        if st == 200 and not wait_for(moved, 10):
            st, out = 500, f"/status does not answer at port {port} after the move from {old}".encode()
        return st, out

    def bus_change(self, rng, text):
        """A [bus] which no reader uses, at the end of the file or between
        buses a and b (so that b's place in the file moves: config/slots.c):
        added, then changed beyond its line keys (queue_depth, copies:
        restarted in place), renamed, or removed, by SIGHUP; buses a and b and
        their readers are untouched (issue 41: buslive)."""
        name = next((n for n in ("c", "c2") if f"[bus {n}]\n" in text), None)
        if name is None:
            section = f"[bus c]\nport = sim:9\nbaud = 115200\nqueue_depth = {rng.choice([8, 16])}\n"
            if rng.random() < 0.5:
                self.hup(text.replace("[bus b]\n", section + "[bus b]\n", 1))
                return "bus+mid", (200, b"")
            self.hup(text + section)
            return "bus+", (200, b"")
        block = text.split(f"[bus {name}]\n")[1].split("[")[0]
        how = rng.choice(["-", "~", "~", "name"])
        if how == "-":
            self.hup(text.replace(f"[bus {name}]\n{block}", ""))
        elif how == "~":
            self.hup(text.replace(f"[bus {name}]\n{block}", f"[bus {name}]\nport = sim:9\nbaud = 115200\nqueue_depth = "
                                  f"{rng.choice([8, 16, 32])}\n" + rng.choice(["", "copies = none\n"])))
        else:
            self.hup(text.replace(f"[bus {name}]\n", "[bus %s]\n" % ("c2" if name == "c" else "c")))
        return "bus" + how, (200, b"")

    def user_change(self, rng, n, text):
        """[user uN] sections come and go and change role; the admin's session
        lives through each, a new user logs in with its role, a removed one
        cannot, and a changed role is the one /whoami shows."""
        names = [line[6:-1] for line in text.split("\n") if line.startswith("[user u")]
        if names and rng.random() < 0.4:
            name = rng.choice(names)
            block = text.split(f"[user {name}]\n")[1].split("[")[0]
            self.hup(text.replace(f"[user {name}]\n{block}", ""))
            got = login(self.http, name, f"pw-{name}")
            return "user-", (200, b"") if got == 401 else (500, f"removed user {name} logs in: {got}".encode())
        name = rng.choice(names) if names and rng.random() < 0.5 else f"u{n}"
        role = rng.choice(["viewer", "operator", "admin"])
        section = f"[user {name}]\npassword_hash = {self.hash_of(f'pw-{name}')}\nrole = {role}\n"
        if name in names:
            block = text.split(f"[user {name}]\n")[1].split("[")[0]
            self.hup(text.replace(f"[user {name}]\n{block}", section))
        else:
            self.hup(text + section)
        tok = login(self.http, name, f"pw-{name}")
        kind = "user~" if name in names else "user+"
        if not isinstance(tok, str):
            return kind, (500, f"user {name} cannot log in: {tok}".encode())
        st, body, _ = self.http_call("GET", "/whoami", token=tok)
        who = json.loads(body) if st == 200 else {}
        return kind, (200, b"") if who.get("role") == role else (500, f"/whoami of {name}: {st} {body[:200]!r}".encode())

    def tables(self, port, token=None):
        out = {}
        for what in ("buses", "devices", "templates", "tags", "polls"):
            st, body, _ = self.http_call("GET", f"/api/{what}", port=port, token=token)
            out[what] = json.loads(body) if st == 200 else st
        return out

    def fresh_tables(self):
        """The tables of a fresh `rtugw run` of the same file, its ports moved."""
        text = self.text()
        tcp, http = free_port(), free_port()
        text = text.replace(f"[tcp]\nport = {self.tcp}\n", f"[tcp]\nport = {tcp}\n").replace(
            f"[http]\nport = {self.http}\n", f"[http]\nport = {http}\n")
        cfg = os.path.join(self.d, "fresh.conf")
        with open(cfg, "w") as f:
            f.write(text)
        log = open(os.path.join(self.d, "fresh.log"), "w")
        p = subprocess.Popen([BIN, "run", "-c", cfg], stdout=log, stderr=log, env=sanitizer_env())
        procs.append(p)
        try:
            if not wait_listening(http, p):
                return None
            return self.tables(http, login(http, "admin", ADMIN_PW))
        finally:
            p.terminate()
            p.wait(timeout=10)
            log.close()


# ---- the Sparkplug host's view: a second daemon on the same file, edge node ----------------

import sparkplugtest as sp  # noqa: E402  (the Sparkplug tests' decoder and host; FATAL without protoc)


def pb_fields(buf):
    """(field, wire type, value) of one protobuf message: varints as ints,
    length-delimited fields as bytes (a name stays a name: protoc
    --decode_raw takes some strings for messages)."""
    i, out = 0, []

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = varint()
        f, w = key >> 3, key & 7
        if w == 0:
            out.append((f, w, varint()))
        elif w == 2:
            n = varint()
            out.append((f, w, buf[i:i + n]))
            i += n
        else:
            i += 8 if w == 1 else 4
    return out


def birth_names(payload):
    """The metric names of a DBIRTH: Payload.metrics (2), each Metric.name (1)."""
    return {v2.decode() for f, w, v in pb_fields(payload) if f == 2 and w == 2
            for f2, w2, v2 in pb_fields(v) if f2 == 1 and w2 == 2}


class SparkplugMirror(Daemon):
    """rtugw run of the soak's file, its ports moved and [mqtt] a Sparkplug edge
    node on the same broker (keepalive_s as the file says), beside the soak's
    daemon in its folder (the same tag files); sync() brings it to the file by
    SIGHUP and checks what a Sparkplug host saw."""

    def __init__(self, soak, broker):
        self.soak, self.broker = soak, broker
        self.cfg = os.path.join(soak.d, "sparkplug.conf")
        self.tcp, self.http_port = free_port(), free_port()
        self.host = sp.Host(broker.port, "soak-sp-host")
        self.keepalive = None
        self.write()
        self.log = open(os.path.join(soak.d, "sparkplug.log"), "w+")
        self.p = subprocess.Popen([BIN, "run", "-c", self.cfg], stdout=self.log, stderr=self.log, env=sanitizer_env())
        procs.append(self.p)
        check(wait_listening(self.http_port, self.p), "the Sparkplug mirror listens")
        self.token = login(self.http_port, "admin", ADMIN_PW)
        self.sets = {}
        check(wait_for(lambda: self.births_match(0, self.running_sets(), self.running_sets())[0], 15),
              "Sparkplug: NBIRTH, then a DBIRTH of each device with metrics, naming exactly its tags and poll items")
        self.sets = self.running_sets()

    def write(self):
        """The soak's file as the mirror runs it; True when its [mqtt] changed."""
        text, soak = self.soak.text(), self.soak
        keep = text.split("keepalive_s = ")[1].split("\n")[0]
        text = text.replace(f"[tcp]\nport = {soak.tcp}\n", f"[tcp]\nport = {self.tcp}\n").replace(
            f"[http]\nport = {soak.http}\n", f"[http]\nport = {self.http_port}\n")
        mqtt = text.index("[mqtt]\n")
        end = text.find("\n[", mqtt + 1)
        text = text[:mqtt] + sp.sp_section(self.broker.port).replace("keepalive_s = 5", f"keepalive_s = {keep}") + \
            (text[end + 1:] if end >= 0 else "")
        with open(self.cfg, "w") as f:
            f.write(text)
        changed, self.keepalive = self.keepalive not in (None, keep), keep
        return changed

    def get(self, path):
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}",
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=20) as r:
            return json.loads(r.read())

    def last_reload_ms(self):
        return (self.get("/status").get("last_reload") or {}).get("time_ms")

    def running_sets(self):
        """{device: its metric names}, as the mirror runs them: its tags (GET /tags) and
        its poll groups' items, POLLNAME.N (GET /status polls)."""
        body = self.get("/tags")
        out = {}
        for t in body["tags"] if isinstance(body, dict) else body:
            out.setdefault(t["device"], set()).add(t["name"])
        for g in self.get("/status").get("polls", []):
            out.setdefault(g["device"], set()).update(f"{g['name']}.{i}" for i in range(g["count"]))
        return out

    def messages(self, start):
        """(verb, device, payload) of the edge node's messages from index start."""
        with self.host.lock:
            msgs = self.host.msgs[start:]
        out = []
        for topic, payload, _ in msgs:
            t = topic.split("/")
            if len(t) >= 4 and t[1] == sp.GROUP and t[3] == sp.EDGE:
                out.append((t[2], t[4] if len(t) > 4 else None, payload))
        return out

    def births_match(self, start, want, sets):
        """(ok, why): from message start, every device of want with metrics has a
        last DBIRTH naming exactly its running tags and poll items (no ghost);
        any other device's DBIRTH too (sets: every device's); none is empty."""
        last = {}
        for verb, dev, payload in self.messages(start):
            if verb == "DBIRTH":
                last[dev] = birth_names(payload)
        for dev, got in last.items():
            if got != sets.get(dev, set()) or not got:
                return False, f"{dev}: DBIRTH names {sorted(got)}, it runs {sorted(sets.get(dev, []))}"
        missing = [d for d, names in want.items() if names and d not in last]
        return not missing, f"no DBIRTH of {missing}, whose metrics changed"

    def sync(self, what):
        """The mirror reloaded with the file now; the births it sends are those
        the difference implies, and the DBIRTHs name the running tags."""
        start, was = self.host.count(), self.last_reload_ms()
        mqtt = self.write()
        self.p.send_signal(signal.SIGHUP)
        wait_for(lambda: self.last_reload_ms() != was, 10)
        before, after = self.sets, self.running_sets()
        changed = {d for d in set(before) | set(after) if before.get(d, set()) != after.get(d, set())}
        want = after if mqtt else {d: after.get(d, set()) for d in changed}
        wait_for(lambda: self.births_match(start, want, after)[0], 10)   # a DBIRTH comes with its device's next values
        time.sleep(1.0)   # what else the reload sent arrives: nothing may
        verbs = [(v, d) for v, d, _ in self.messages(start) if v in ("NBIRTH", "NDEATH", "DBIRTH", "DDEATH")]
        ok, why = self.births_match(start, want, after)
        bad = [] if ok else [why]
        for dev in set(before) | set(after):
            # an NDEATH is every device's death (Sparkplug 3.0: the host marks
            # the node's devices offline), so a device left with no metric
            # while [mqtt] changed needs no DDEATH of its own (seed 98039)
            born = ("DBIRTH", dev) in verbs
            died = ("DDEATH", dev) in verbs or ("NDEATH", None) in verbs
            if not mqtt and dev not in changed and (born or died):
                bad.append(f"{dev}: its tags and poll groups did not change, yet {verbs}")
            if dev in changed and not after.get(dev) and (born or (before.get(dev) and not died)):
                bad.append(f"{dev}: left with no metric, it must die and not be born: {verbs}")
            if dev in changed and after.get(dev) and before.get(dev) and not mqtt and not died:
                bad.append(f"{dev}: its set changed, so DDEATH before its DBIRTH: {verbs}")
        if ("NBIRTH", None) in verbs and not mqtt:
            bad.append(f"an NBIRTH, yet [mqtt] did not change: {verbs}")
        if mqtt and ("NBIRTH", None) not in verbs:
            bad.append(f"[mqtt] changed, yet no NBIRTH: {verbs}")
        self.sets = after
        return [f"Sparkplug after {what}: {b}" for b in bad]


def reader(port, slave, stop, tally):
    """One connection, reads of slave's registers 0..9 in turn: the simulator's 1000*slave+a."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    tid = 0
    while not stop.is_set():
        tid = (tid + 1) & 0xFFFF
        a = tid % 10
        try:
            s.sendall(struct.pack(">HHHBBHH", tid, 0, 6, slave, 3, a, 2))
            head = b""
            while len(head) < 7:
                chunk = s.recv(7 - len(head))
                if not chunk:
                    raise ConnectionError("closed")
                head += chunk
            rtid, _, length, unit = struct.unpack(">HHHB", head)
            body = b""
            while len(body) < length - 1:
                chunk = s.recv(length - 1 - len(body))
                if not chunk:
                    raise ConnectionError("closed")
                body += chunk
        except (OSError, ConnectionError) as e:
            tally["lost"].append(f"slave {slave}: {e}")
            return
        want = bytes([3, 4]) + struct.pack(">HH", 1000 * slave + a, 1000 * slave + a + 1)
        if rtid != tid or unit != slave:
            tally["wrong"].append((slave, tid, rtid, unit, body.hex()))
        elif body[:1] == b"\x83":
            tally["lost"].append(f"slave {slave} at {a}: exception {body[1]:#04x}")
        elif body != want:
            tally["wrong"].append((slave, a, body.hex()))
        else:
            tally["ok"] += 1
            tally["per"][slave] += 1
    s.close()


def main():
    n_changes = int(os.environ.get("RTUGW_SOAK_CHANGES", "150"))
    seed = int(os.environ.get("RTUGW_SEED", str(int(time.time()) % 100000)))
    rng = random.Random(seed)
    print(f"== {n_changes} live changes, seed {seed} (RTUGW_SEED={seed} replays it)", flush=True)
    d = tempfile.mkdtemp(prefix="rtugw-soak-")
    broker = Broker("soak")
    sub = Subscriber(broker.port, "rtugw/soak/+/data", "soak-sub")
    s = Soak(d, broker)
    mirror = SparkplugMirror(s, broker)   # the Sparkplug host's view, synced with the compares below
    check(wait_for(lambda: len(sub.messages("/data")) >= 3, 10), "the QoS 1 subscriber gets data before the first change")
    stop = threading.Event()
    tally = {"ok": 0, "wrong": [], "lost": [], "per": {1: 0, 3: 0}}
    readers = [threading.Thread(target=reader, args=(s.tcp, slave, stop, tally), daemon=True) for slave in (1, 3)]
    for t in readers:
        t.start()
    bad, kinds, compared = [], {}, 0
    for i in range(n_changes):
        kind, (st, out) = s.change(rng)
        if st == 0:
            continue   # nothing of that kind to remove
        kinds[kind] = kinds.get(kind, 0) + 1
        lr = s.last_reload()
        if st != 200:
            bad.append(f"change {i} ({kind}): {st} {out[:200]!r}")
        elif lr.get("result") != "applied" or lr.get("waits"):
            bad.append(f"change {i} ({kind}): {lr}")
        if (i + 1) % CHECK_EVERY == 0 or i == n_changes - 1:
            fresh, running = s.fresh_tables(), s.tables(s.http)
            compared += 1
            bad += mirror.sync(f"change {i}")
            if fresh != running:
                diff = {k: (running[k], fresh and fresh.get(k)) for k in running if not fresh or running[k] != fresh[k]}
                bad.append(f"after change {i}: the running tables differ from a fresh start's: {str(diff)[:600]}")
        if len(bad) > 5 or s.p.poll() is not None:
            break
    time.sleep(0.5)
    stop.set()
    time.sleep(1.0)   # the last data messages reach the subscriber
    seqs = [p["seq"] for _, p, _ in sub.messages("/data") if isinstance(p, dict) and "seq" in p]
    seq_check(seqs, "MQTT: the QoS 1 subscriber saw every data message, in order, across every change")
    for t in readers:
        t.join(timeout=15)
    print("changes: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())), flush=True)
    print(f"reads: {tally['ok']} right ({tally['per']}), {len(tally['wrong'])} wrong, {len(tally['lost'])} lost; "
          f"{compared} comparisons with a fresh start", flush=True)
    check(not bad, "every change applied live, and the running tables are a fresh start's: " + "; ".join(bad[:5]))
    check(not tally["wrong"], f"no wrong answer ({tally['wrong'][:5]})")
    check(not tally["lost"], f"no lost answer, each client on its one connection ({tally['lost'][:5]})")
    check(tally["ok"] > 50, f"the clients were served throughout ({tally['ok']} answers)")
    s.stop()
    mirror.stop()
    mirror.host.close()
    sub.close()
    broker.stop()
    if failure_count() == 0:
        shutil.rmtree(d, ignore_errors=True)
    else:
        print(f"kept {d} (the daemon's log)")
    finish("live-change soak", f" (seed {seed})")


if __name__ == "__main__":
    main()
