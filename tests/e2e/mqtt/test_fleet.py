#!/usr/bin/python3
"""A fleet configured through the broker ([mqtt] remote_config, docs/fleet.md):
N gateway processes (`rtugw run`, each on its own simulated bus) on one
mosquitto, and a central script that only speaks MQTT.

  - each gateway reports itself at start on rtugw/GW/config/result
    (retained): op "start", its file's revision;
  - a change pushed to all (config/set with if_match the revision each
    reported): N results, ok, with the revision of the new text, each
    gateway's file is the new text and its /status last_reload names that
    revision; the time to convergence is printed;
  - a change with an error (a slave out of range): refused by every gateway
    (status 422, check's error named), each keeping its file and revision;
  - a stale if_match: 409, nothing written;
  - config/get: the text and revision;
  - the gateways list two brokers (brokers = a, b): the first is killed;
    every gateway is on the second within its back-off bound, and a
    subscriber on the second sees every sequence number of every gateway
    once, in order.
N is RTUGW_FLEET_N (5 in make check; `make check-fleet` runs 50)."""
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
from test_mqtt import Broker  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402

WORK = test_mqtt.WORK
N = int(os.environ.get("RTUGW_FLEET_N", "5"))


def revision(text):
    h = 1469598103934665603
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def client(port, cid, clean, topic, on_message):
    """paho subscribed to topic at QoS 1, running; returns once subscribed."""
    c = mqtt.Client(client_id=cid, clean_session=clean)
    ready = threading.Event()

    def on_connect(c, u, f, rc):
        c.subscribe(topic, qos=1)
        ready.set()
    c.on_connect, c.on_message = on_connect, on_message
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    ready.wait(5)
    return c


class Centre:
    """The central script: results of every gateway, with their arrival time."""

    def __init__(self, port):
        self.results, self.lock = [], threading.Lock()

        def on_message(c, u, m):
            try:
                p = json.loads(m.payload)
            except ValueError:
                p = None
            with self.lock:
                self.results.append((time.time(), m.topic.split("/")[1], p))
        self.c = client(port, "centre", True, "rtugw/+/config/result", on_message)

    def latest(self, op=None, id=None):
        """gateway -> (time, result) of its latest result matching op/id."""
        out = {}
        with self.lock:
            for t, gw, p in self.results:
                if p and (op is None or p.get("op") == op) and (id is None or p.get("id") == id):
                    out[gw] = (t, p)
        return out

    def send(self, gw, op, payload):
        self.c.publish(f"rtugw/{gw}/config/{op}", json.dumps(payload), qos=1)

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def test_fleet_config():
    b, spare = Broker("fleet"), Broker("fleet-spare")
    centre = Centre(b.port)
    gws = {}
    t_start = time.time()
    for k in range(N):
        name = f"f{k}"
        gws[name] = Gateway(bus="port = sim:1\nbaud = 115200\n",
                            devices="[device d1]\nslave = 1\n[poll hr]\ndevice = d1\nfunction = 3\naddress = 0\n"
                                    "count = 2\ninterval_ms = 200\n",
                            extra=f"[mqtt]\nbrokers = 127.0.0.1:{b.port}, 127.0.0.1:{spare.port}\n"
                                  f"gateway = {name}\nclient_id = fleet-{name}\nremote_config = on\n"
                                  "publish = poll\n")
    print(f"figure: {N} gateways started in {time.time() - t_start:.1f} s", flush=True)
    revs = {name: revision(g.text) for name, g in gws.items()}
    check(wait_for(lambda: len(centre.latest("start")) == N, 30),
          f"every gateway reports itself at start ({len(centre.latest('start'))} of {N})")
    started = centre.latest("start")
    bad = [gw for gw, (_, p) in started.items() if p["revision"] != revs[gw]]
    check(not bad, f"each start report names its file's revision ({bad[:3]})")

    # the change, pushed to all
    new = {name: g.text + "[device d2]\nslave = 2\n" for name, g in gws.items()}
    t0 = time.time()
    for name in gws:
        centre.send(name, "set", {"id": "c1", "if_match": revs[name], "text": new[name]})
    check(wait_for(lambda: len(centre.latest("set", "c1")) == N, 60),
          f"N results for the change ({len(centre.latest('set', 'c1'))} of {N})")
    got = centre.latest("set", "c1")
    wrong = [(gw, p["status"], p["revision"]) for gw, (_, p) in got.items()
             if not p["ok"] or p["revision"] != revision(new[gw])]
    check(not wrong, f"every gateway applied it, with the new text's revision ({wrong[:3]})")
    times = sorted(t - t0 for t, _ in got.values())
    if times:
        print(f"figure: {N} gateways converged in {times[-1]:.2f} s (per gateway median {statistics.median(times):.2f} s, "
              f"p10 {times[len(times) // 10]:.2f} s, p90 {times[min(len(times) - 1, len(times) * 9 // 10)]:.2f} s)",
              flush=True)
    on_disk = [name for name, g in gws.items() if open(g.cfg).read() != new[name]]
    check(not on_disk, f"each file is the new text ({on_disk[:3]})")
    status = [name for name, g in list(gws.items())[:5] if g.status()["last_reload"]["revision"] != revision(new[name])]
    check(not status, f"/status last_reload names the new revision ({status})")

    # a change with an error: refused by all, nothing changes
    for name in gws:
        centre.send(name, "set", {"id": "c2", "if_match": revision(new[name]),
                                  "text": new[name] + "[device d3]\nslave = 999\n"})
    check(wait_for(lambda: len(centre.latest("set", "c2")) == N, 60), "N results for the broken change")
    got = centre.latest("set", "c2")
    accepted = [gw for gw, (_, p) in got.items() if p["ok"] or p["status"] != 422 or
                p["revision"] != revision(new[gw]) or "slave" not in json.dumps(p["answer"])]
    check(not accepted, f"every gateway refused it (422, check's error), keeping its revision ({accepted[:3]})")
    changed = [name for name, g in gws.items() if open(g.cfg).read() != new[name]]
    check(not changed, f"no file changed ({changed[:3]})")
    alive = [name for name, g in list(gws.items())[:5] if g.p.poll() is not None]
    check(not alive, "the gateways run on")

    # a stale revision
    one = next(iter(gws))
    centre.send(one, "set", {"id": "c3", "if_match": revs[one], "text": new[one] + "# stale\n"})
    check(wait_for(lambda: one in centre.latest("set", "c3"), 10), "an answer to the stale change")
    p = centre.latest("set", "c3")[one][1]
    check(p["status"] == 409 and not p["ok"] and open(gws[one].cfg).read() == new[one],
          f"a stale if_match: 409, nothing written ({p['status']})")
    # get
    centre.send(one, "get", {"id": "g1"})
    check(wait_for(lambda: one in centre.latest("get", "g1"), 10), "config/get answers")
    p = centre.latest("get", "g1")[one][1]
    check(p.get("text") == new[one] and p["revision"] == revision(new[one]), "config/get: the text and its revision")

    # the first broker dies: every gateway moves to the second
    watch = Watch(spare.port)
    time.sleep(5.5 - min(5.0, time.time() - t0))   # sessions that lasted 5 s: the back-off starts over
    b.p.kill()
    b.p.wait()
    t_kill = time.time()
    check(wait_for(lambda: watch.gateways() == set(gws), 60),
          f"every gateway publishes on the second broker ({len(watch.gateways())} of {N})")
    moved = max(watch.first[gw] for gw in gws) - t_kill if watch.gateways() == set(gws) else float("inf")
    check(moved < 3.0 + N * 0.05, f"all moved within the back-off bound (0.5 s + connect; {3.0 + N * 0.05:.1f} s "
                                  f"allowed on a loaded box): {moved:.2f} s")
    print(f"figure: {N} gateways on the second broker {moved:.2f} s after the first was killed", flush=True)
    time.sleep(1.5)
    for g in gws.values():
        g.stop()
    time.sleep(0.5)
    bad = []
    for gw in gws:
        seqs = watch.seqs(gw)
        firsts = list(dict.fromkeys(seqs))
        if not firsts or firsts != list(range(firsts[0], firsts[0] + len(firsts))):
            bad.append((gw, firsts[:3], len(firsts)))
    check(not bad, f"the second broker's subscriber: every gateway's sequence numbers once, in order "
                   f"(repeats of QoS 1 only) {bad[:3]}")
    watch.close()
    centre.close()
    spare.stop()


class Watch:
    """A persistent QoS 1 subscriber to every gateway's data on one broker."""

    def __init__(self, port):
        self.msgs, self.first, self.lock = [], {}, threading.Lock()

        def on_message(c, u, m):
            p = json.loads(m.payload)
            with self.lock:
                self.msgs.append((p["gateway"], p["seq"]))
                self.first.setdefault(p["gateway"], time.time())
        self.c = client(port, "watch", False, "rtugw/+/+/data", on_message)

    def gateways(self):
        with self.lock:
            return set(self.first)

    def seqs(self, gw):
        with self.lock:
            return [s for g, s in self.msgs if g == gw]

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def main():
    run_tests("test_fleet", [test_fleet_config], cleanup=[WORK])


if __name__ == "__main__":
    main()
