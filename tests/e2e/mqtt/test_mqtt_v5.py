#!/usr/bin/python3
"""[mqtt] protocol: MQTT v5 (the default) and 3.1.1, against Debian's
mosquitto, with the v5 properties checked on the wire by a paho v5 client.

  - protocol unset: mosquitto's log says the gateway connected as p5; a v5
    subscriber sees on each json-per-tag message the message expiry
    (message_expiry_s, at most what was set) and the user properties
    "revision" (after a reload: the file's FNV-1a revision) and "unit";
  - protocol = 3.1.1: p2 (mosquitto's number for 3.1.1) in the broker's log, no properties;
  - a broker that refuses v5 (mosquitto behind a filter that answers a v5
    CONNECT as a 3.1.1 broker does: CONNACK return code 1, and passes 3.1.1
    through): the gateway logs the refusal with its reason and connects in
    3.1.1 at once; its values arrive;
  - session expiry: clean_session = false, session_expiry_s = 60: a write
    published while the gateway is killed is answered after it comes back
    (the broker kept the session and its queue); with session_expiry_s = 0
    it is not (the session ended with the connection)."""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, free_port, procs, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
from test_mqtt import Broker, mqtt_section  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402
from paho.mqtt.packettypes import PacketTypes  # noqa: E402
from paho.mqtt.properties import Properties  # noqa: E402

WORK = test_mqtt.WORK
TAGS = ("[device d1]\nslave = 1\n"
        "[tag volts]\ndevice = d1\ntable = holding\naddress = 0\ntype = uint16\nunit = V\ninterval_ms = 100\n"
        "[tag sp]\ndevice = d1\ntable = holding\naddress = 1\ntype = uint16\nwritable = true\ninterval_ms = 100\n")


class V5Sub:
    """paho as an MQTT v5 client: each message with its properties."""

    def __init__(self, port, topic, client_id):
        self.msgs, self.lock = [], threading.Lock()
        self.c = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
        ready = threading.Event()

        def on_connect(c, userdata, flags, rc, properties=None):
            c.subscribe(topic, qos=1)
            ready.set()

        def on_message(c, userdata, m):
            props = getattr(m, "properties", None)
            user = dict(props.UserProperty) if props and hasattr(props, "UserProperty") else {}
            expiry = props.MessageExpiryInterval if props and hasattr(props, "MessageExpiryInterval") else None
            with self.lock:
                self.msgs.append((m.topic, m.payload, user, expiry))

        self.c.on_connect, self.c.on_message = on_connect, on_message
        self.c.connect("127.0.0.1", port, keepalive=10)
        self.c.loop_start()
        ready.wait(5)
        time.sleep(0.3)

    def messages(self):
        with self.lock:
            return list(self.msgs)

    def publish(self, topic, payload):
        self.c.publish(topic, payload, qos=1).wait_for_publish()

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def broker_log(b):
    with open(os.path.join(b.dir, "log"), errors="replace") as f:
        return f.read()


def connected_as(b, client_id):
    """The protocol mosquitto logged for client_id's last connection: 'p5', 'p4' or None."""
    lines = [ln for ln in broker_log(b).splitlines() if f" as {client_id} (" in ln]
    if not lines:
        return None
    return lines[-1].split(f" as {client_id} (")[1].split(",")[0]


def setup(name, gw, keys, protocol, what):
    """A broker, a v5 subscriber on gw's tags and gw with keys; checks the
    protocol mosquitto logged for it ('p5' v5, 'p2' 3.1.1)."""
    b = Broker(name)
    sub = V5Sub(b.port, f"rtugw/{gw}/d1/+", f"sub-{name}")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=TAGS,
                extra=mqtt_section(b.port, gw, "format = json-per-tag\npublish = poll\n" + keys))
    check(wait_for(lambda: connected_as(b, f"test-{gw}") == protocol, 10),
          f"{what} ({connected_as(b, f'test-{gw}')})")
    return b, sub, g


def test_v5_properties():
    b, sub, g = setup("v5", "g5", "message_expiry_s = 60\n", "p5", "protocol unset: the gateway connected with MQTT v5")
    check(wait_for(lambda: any(t.endswith("/volts") for t, *_ in sub.messages()), 10), "values arrive")
    volts = [m for m in sub.messages() if m[0] == "rtugw/g5/d1/volts"]
    check(volts and all(m[2].get("unit") == "V" for m in volts),
          f"user property unit = V on each volts message: {[m[2] for m in volts[:2]]}")
    check(volts and all(m[3] is not None and 0 < m[3] <= 60 for m in volts),
          f"message expiry interval set, at most 60 s: {[m[3] for m in volts[:3]]}")
    sp = [m for m in sub.messages() if m[0] == "rtugw/g5/d1/sp"]
    check(sp and all("unit" not in m[2] for m in sp), f"no unit property for a tag without a unit: {sp[:1]}")
    # a reload: the file's revision as a user property
    with open(g.cfg, "a") as f:
        f.write("# a comment: a new revision\n")
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: (g.status().get("last_reload") or {}).get("revision"), 5), "the reload has a revision")
    rev = g.status()["last_reload"]["revision"]
    start = len(sub.messages())
    check(wait_for(lambda: any(m[2].get("revision") == rev for m in sub.messages()[start:]), 10),
          f"after the reload, messages carry the user property revision = {rev}")
    g.stop()
    sub.close()
    b.stop()


def test_v311():
    b, sub, g = setup("v311", "g3", "protocol = 3.1.1\n", "p2", "protocol = 3.1.1: the gateway connected with 3.1.1")
    check(wait_for(lambda: len(sub.messages()) > 3, 10), "values arrive")
    check(all(not m[2] and m[3] is None for m in sub.messages()), "3.1.1: no properties")
    g.stop()
    sub.close()
    b.stop()


class V311Only:
    """A 3.1.1-only broker made of mosquitto and a filter in front of it: a
    CONNECT of protocol level 5 is answered as a 3.1.1 broker answers it
    (CONNACK, return code 1: unacceptable protocol version) and closed;
    anything else is passed both ways to mosquitto untouched."""

    def __init__(self, upstream):
        self.upstream, self.port = upstream, free_port()
        self.refused = 0
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", self.port))
        self.s.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        first = b""
        while len(first) < 9:
            more = c.recv(9 - len(first))
            if not more:
                c.close()
                return
            first += more
        # fixed header (1 byte + remaining length, 1 byte for a small CONNECT), "\0\4MQTT", level
        if first[0] == 0x10 and first[2:8] == b"\x00\x04MQTT" and first[8] == 5:
            self.refused += 1
            # the whole CONNECT read first, as a broker does: closing with
            # its rest unread would send a reset that can reach the client
            # before the CONNACK does (seen under ASan)
            rest = 2 + first[1] - len(first) if first[1] < 128 else 0
            c.settimeout(2)
            try:
                while rest > 0:
                    more = c.recv(rest)
                    if not more:
                        break
                    rest -= len(more)
                c.sendall(b"\x20\x02\x00\x01")
                c.shutdown(socket.SHUT_WR)
                while c.recv(4096):   # until the client closes
                    pass
            except OSError:
                pass
            c.close()
            return
        u = socket.create_connection(("127.0.0.1", self.upstream))
        u.sendall(first)

        def pipe(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
        pipe(c, u)


def test_fallback():
    b = Broker("v5refused")
    old = V311Only(b.port)
    sub = V5Sub(b.port, "rtugw/gf/d1/+", "sub-fallback")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=TAGS,
                extra=mqtt_section(old.port, "gf", "format = json-per-tag\npublish = poll\n"))
    check(wait_for(lambda: connected_as(b, "test-gf") == "p2", 10),
          f"a broker refusing v5: the gateway connected in 3.1.1 ({connected_as(b, 'test-gf')})")
    check(old.refused >= 1, f"the v5 CONNECT was refused first ({old.refused})")
    lines = [ln for ln in g.log_text().splitlines() if "mqtt:" in ln]
    check(any("refused MQTT v5" in ln and "unsupported protocol version" in ln.lower() for ln in lines),
          f"the log names the refusal and its reason code: {lines[:4]}")
    check(wait_for(lambda: len(sub.messages()) > 3, 10), "values arrive through the 3.1.1 session")
    g.stop()
    sub.close()
    b.stop()


def test_session_expiry():
    b = Broker("v5session")
    for expiry, kept in ((60, True), (0, False)):
        gw = f"gs{expiry}"
        sub = V5Sub(b.port, f"rtugw/{gw}/write/response", f"sub-{gw}")
        extra = mqtt_section(b.port, gw, f"clean_session = false\nsession_expiry_s = {expiry}\n")
        g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=TAGS, extra=extra)
        check(wait_for(lambda: connected_as(b, f"test-{gw}") == "p5", 10), "connected with v5")
        time.sleep(0.5)
        g.p.send_signal(signal.SIGKILL)
        g.p.wait()
        time.sleep(0.5)
        sub.publish(f"rtugw/{gw}/write", json.dumps({"uuid": f"w{expiry}", "device": "d1", "tag": "sp",
                                                       "value": 7}))
        g2 = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=TAGS, extra=extra)
        got = wait_for(lambda: any(json.loads(m[1]).get("uuid") == f"w{expiry}" for m in sub.messages()),
                       6 if kept else 3)
        check(bool(got) == kept, f"session_expiry_s = {expiry}: a write sent while the gateway was away is "
                                 f"{'answered after it came back' if kept else 'gone with the session'} ({got})")
        g2.stop()
        sub.close()
    b.stop()


def main():
    run_tests("test_mqtt_v5", [test_v5_properties, test_v311, test_fallback, test_session_expiry], cleanup=[WORK])


if __name__ == "__main__":
    main()
