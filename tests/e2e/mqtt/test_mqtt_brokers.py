#!/usr/bin/python3
"""[mqtt] brokers = a, b: a broker list tried in order, against two
mosquitto brokers on 127.0.0.1.

  - json: the gateway on the first broker; the first is killed (SIGKILL):
    the gateway is on the second within its back-off bound (a lost broker:
    the next within 0.5 s, plus the connect; 3 s allowed on a loaded box),
    and a subscriber on the second sees every sequence number once, in
    order, carrying on from the last one a subscriber on the first saw (no
    gap, repeats only of QoS 1's kind);
  - Sparkplug with primary_host_id: the host's STATE online on both; births
    on the first; the host goes offline there: NDEATH on the first, and on
    the second an NBIRTH with the next bdSeq once the host is online there
    (Sparkplug 3.0: move to the next server); Eclipse Tahu's decoder reads
    the values there; the host online again on the first and offline on
    the second: back to the first, births, bdSeq + 1 again."""
import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
from test_mqtt import Broker, Subscriber, poll, seq_check  # noqa: E402
import sparkplugtest as sp  # noqa: E402  (the Sparkplug tests' decoder, host and tag set)

WORK = test_mqtt.WORK


def on_broker(b, client_id):
    """How many times client_id connected to b (its log)."""
    with open(os.path.join(b.dir, "log"), errors="replace") as f:
        return sum(1 for ln in f if f" as {client_id} (" in ln and "New client connected" in ln)


def test_failover():
    a, b = Broker("list-a"), Broker("list-b")
    sub_a = Subscriber(a.port, "rtugw/gb/+/data", "sub-a")
    sub_b = Subscriber(b.port, "rtugw/gb/+/data", "sub-b")
    spool = os.path.join(WORK, "spool-gb")
    g = Gateway(extra=poll("hr", "d1", 3, 0, 2, interval_ms=50) +
                f"[mqtt]\nbrokers = 127.0.0.1:{a.port}, 127.0.0.1:{b.port}\ngateway = gb\nclient_id = test-gb\n"
                f"publish = poll\nspool_dir = {spool}\n")
    check(wait_for(lambda: len(sub_a.messages()) > 20, 10), "the gateway publishes on the first broker")
    check(on_broker(b, "test-gb") == 0, "and not on the second")
    time.sleep(5.2 - 1.0)   # a session that lasted 5 s: the back-off starts over
    a.p.kill()
    a.p.wait()
    t0 = time.time()
    check(wait_for(lambda: on_broker(b, "test-gb") >= 1, 10), "the gateway moved to the second broker")
    moved = time.time() - t0
    check(moved < 3.0, f"within its back-off bound: {moved:.2f} s (0.5 s + connect; 3 s allowed)")
    check(wait_for(lambda: len(sub_b.messages()) > 20, 10), "values on the second broker")
    time.sleep(1)
    g.stop()
    time.sleep(0.5)
    seq_a = [p["seq"] for _, p, _ in sub_a.messages()]
    seq_b = [p["seq"] for _, p, _ in sub_b.messages()]
    firsts = seq_check(seq_b, "the second broker's subscriber")
    check(firsts and seq_a and firsts[0] <= max(seq_a) + 1,
          f"no gap across the move: the first broker's subscriber saw up to {max(seq_a) if seq_a else None}, "
          f"the second's starts at {firsts[:1]}")
    print(f"figure: moved to the second broker in {moved:.2f} s; {len(firsts)} sequence numbers on it, "
          f"{len(seq_b) - len(firsts)} repeats", flush=True)
    sub_a.close()
    sub_b.close()
    b.stop()


def state(online, ts):
    return json.dumps({"online": online, "timestamp": ts})


def tahu_agrees(host):
    """Eclipse Tahu's decoder (test_sparkplug's, npm sparkplug-payload) reads
    d1's DBIRTH and DDATA on this server as protoc's fold does."""
    mod = sp.tahu_module()
    if not mod:
        return
    with host.lock:
        raw = [p for t, p, _ in host.msgs if t.endswith(f"/{sp.EDGE}/d1") and t.split("/")[2] in ("DBIRTH", "DDATA")]
    p = subprocess.run(["node", "-e", sp.TAHU_JS, mod], capture_output=True, timeout=60,
                       input=json.dumps([base64.b64encode(x).decode() for x in raw]).encode())
    check(p.returncode == 0, f"Tahu's decoder takes every payload of the second server: {p.stderr[-300:]}")
    tahu = json.loads(p.stdout) if p.returncode == 0 else {}
    mine = sp.fold(host.since(0), "d1")[0]
    keys = ("t_u16", "t_i32", "t_coil")
    check(all(k in tahu for k in keys) and all(tahu[k] == mine.get(k) for k in keys),
          f"Tahu's decoder and protoc agree on the second server's values: {[(k, tahu.get(k), mine.get(k)) for k in keys]}")


def test_sparkplug_servers():
    a, b = Broker("sp-a"), Broker("sp-b")
    host_a, host_b = sp.Host(a.port, "host-a"), sp.Host(b.port, "host-b")
    now = int(time.time() * 1000)
    host_a.publish("spBv1.0/STATE/scada", state(True, now), retain=True)
    host_b.publish("spBv1.0/STATE/scada", state(True, now), retain=True)
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=sp.devices_text(),
                extra=(f"[mqtt]\nbrokers = 127.0.0.1:{a.port}, 127.0.0.1:{b.port}\ngateway = {sp.EDGE}\n"
                       f"client_id = sp-{sp.EDGE}\nformat = sparkplug\ngroup_id = {sp.GROUP}\nkeepalive_s = 5\n"
                       "primary_host_id = scada\n"), dir=sp.WORK)
    first = sp.births_of(host_a, 0)
    check(first is not None, "births on the first server")
    bd_a = sp.one(dict((sp.one(m, 1), m) for m in sp.metrics_of(first[0][2]))["bdSeq"], 11)
    check(not host_b.since(0, "NBIRTH"), "none on the second")
    # the host goes offline on the first server (its will there)
    start_b = host_b.count()
    host_a.publish("spBv1.0/STATE/scada", state(False, now + 1), retain=True)
    check(wait_for(lambda: host_a.since(0, "NDEATH"), 5), "NDEATH on the first server when the host left it")
    check(wait_for(lambda: sp.births_of(host_b, start_b, timeout=1) is not None, 10),
          "births on the second server, where the host is online")
    nb = host_b.since(start_b, "NBIRTH")[0]
    bd_b = sp.one(dict((sp.one(m, 1), m) for m in sp.metrics_of(nb[2]))["bdSeq"], 11)
    ndeath = host_a.since(0, "NDEATH")[-1]
    bd_death = sp.one(dict((sp.one(m, 1), m) for m in sp.metrics_of(ndeath[2]))["bdSeq"], 11)
    check(bd_death == bd_a and bd_b == (bd_a + 1) % 256,
          f"bdSeq: NBIRTH on the first {bd_a}, its NDEATH {bd_death}, NBIRTH on the second {bd_b}")
    check(not sp.seq_ok(host_b.since(start_b)), f"seq on the second server: {sp.seq_ok(host_b.since(start_b))[:3]}")
    tahu_agrees(host_b)
    # the host back online on the first, then offline on the second: back to the first
    start_a = host_a.count()
    host_a.publish("spBv1.0/STATE/scada", state(True, now + 2), retain=True)
    host_b.publish("spBv1.0/STATE/scada", state(False, now + 3), retain=True)
    check(wait_for(lambda: host_b.since(start_b, "NDEATH"), 5), "NDEATH on the second when the host left it")
    check(wait_for(lambda: sp.births_of(host_a, start_a, timeout=1) is not None, 10),
          "births on the first server again, where the host is back online")
    nb = host_a.since(start_a, "NBIRTH")[0]
    bd_c = sp.one(dict((sp.one(m, 1), m) for m in sp.metrics_of(nb[2]))["bdSeq"], 11)
    check(bd_c == (bd_b + 1) % 256, f"bdSeq goes on across servers: {bd_a}, {bd_b}, {bd_c}")
    g.stop()
    host_a.close()
    host_b.close()
    a.stop()
    b.stop()


def test_config_keys():
    """brokers, protocol, expiry keys: what check takes and what it refuses, with file:line."""
    base = "[bus b]\nport = sim:1\n[device d1]\nbus = b\nslave = 1\n[mqtt]\n"
    cases = [
        ("brokers = 127.0.0.1:1883, [::1]:1884, mqtt.example\n", None),
        ("brokers = a:1883\nprotocol = 3.1.1\n", None),
        ("brokers = a:1883\nclean_session = false\nsession_expiry_s = 60\nmessage_expiry_s = 10\n", None),
        ("brokers = a:0\n", "brokers"),
        ("brokers = a:1883,\n", "brokers"),
        ("brokers = ::1:1883\n", "brokers"),
        ("brokers = " + ", ".join(f"h{k}:1883" for k in range(9)) + "\n", "brokers"),
        ("host = a\nbrokers = b:1883\n", "host and brokers are both set"),
        ("brokers = b:1883\nport = 1883\n", "port and brokers are both set"),
        ("host = a\nprotocol = 4\n", "protocol"),
        ("host = a\nprotocol = 3.1.1\nmessage_expiry_s = 5\n", "need protocol = 5"),
        ("host = a\nha_discovery = on\n", "ha_discovery needs format = json-per-tag"),
        ("host = a\nremote_config = on\n[device config]\nbus = b\nslave = 2\n", "reserved"),
    ]
    path = os.path.join(WORK, "keys.conf")
    for keys, refused in cases:
        with open(path, "w") as f:
            f.write(base + keys)
        p = subprocess.run([BIN, "check", "-c", path], capture_output=True, text=True)
        if refused is None:
            check(p.returncode == 0, f"taken: {keys.strip()!r} ({p.stderr.strip()[:200]})")
        else:
            check(p.returncode != 0 and refused in p.stderr and "keys.conf:" in p.stderr,
                  f"refused with file:line: {keys.strip()!r} ({p.stderr.strip()[:200]})")


def main():
    run_tests("test_mqtt_brokers", [test_config_keys, test_failover, test_sparkplug_servers], cleanup=[WORK, sp.WORK])


if __name__ == "__main__":
    main()
