#!/usr/bin/python3
"""[mqtt] live (issue 41): a reload that changes [mqtt] stops the session
and starts one at the new settings, without a restart; one that leaves
[mqtt] as it is leaves the session alone. Against Debian's mosquitto (two
of them), paho subscribers with persistent QoS 1 sessions, the built-in
simulator on the serial side, Sparkplug payloads decoded by protoc.

  - an unrelated reload (a tag added, by SIGHUP): no new connection, no
    offline status, and a QoS 1 subscriber sees every data sequence number;
  - topic_prefix by SIGHUP, format and publish/interval_ms by PUT
    /api/config: the subscriber sees the new topics, the new format and the
    new rhythm; restart_needed is empty and last_reload.applied says mqtt;
    the data seq never goes back across the swaps;
  - the broker away, messages held in memory, a reload that changes
    keepalive_s (same broker, same prefix): once the broker is back, the
    QoS 1 subscriber has every sequence number from before the stop to
    after the swap (the queue went to the new session);
  - [mqtt] removed: the retained status says offline, no data comes and
    /metrics has no rtugw_mqtt_ series; added back: online, data again;
  - host and port of another broker: the new one gets the data, the old one
    the offline status and nothing after it;
  - config/set over MQTT (remote_config) changing topic_prefix: the result
    comes back on the session that took the message, then the data goes out
    on the new prefix (the swap waited for north's own hook to return);
  - Sparkplug: group_id and edge_node_id changed: NDEATH of the old node
    with bdSeq k, then NBIRTH of the new one with bdSeq k+1 and a DBIRTH of
    its device, seq 0 from that NBIRTH."""
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
import sparkplugtest as sp  # noqa: E402  (the Sparkplug tests' decoder, host and tag set)
from test_mqtt import Broker, Subscriber, seq_check  # noqa: E402

TOKEN = "s3cret-0123456789abcdefXY"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SIM1 = "port = sim:1\nbaud = 115200\n"
DEVICES = ("[device m1]\nslave = 1\n"
           "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 100\n")
TAG_T2 = "[tag t2]\ndevice = m1\ntable = holding\naddress = 11\ntype = uint16\ninterval_ms = 100\n"


def mqtt(port, extra="", gw="gl"):
    return (f"[mqtt]\nhost = 127.0.0.1\nport = {port}\ngateway = {gw}\nclient_id = test-{gw}\nkeepalive_s = 5\n"
            f"publish = poll\n{extra}")


def started(name, topic, extra="", gw="gl", http=""):
    """A broker, a QoS 1 subscriber of topic on it, a gateway publishing to it (its data seen)."""
    b = Broker(name)
    sub = Subscriber(b.port, topic, f"sub-{name}")
    g = Gateway(bus=SIM1, devices=DEVICES, extra=http + mqtt(b.port, extra, gw))
    check(wait_for(lambda: len(sub.messages(f"rtugw/{gw}/m1/data")) >= 3, 8), f"data on rtugw/{gw}/m1/data")
    return b, sub, g


def finish_all(g, subs, brokers):
    g.stop()
    for s in subs:
        s.close()
    for b in brokers:
        b.stop()


def hup(g, text):
    g.rewrite(text)
    g.p.send_signal(signal.SIGHUP)


def api_put_config(g, text):
    """PUT /api/config with the file's revision now: (status, answer)."""
    rev = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{g.http_port}/api/config", headers=AUTH), timeout=5).read())["revision"]
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/config", data=text.encode(), method="PUT",
                                 headers={**AUTH, "If-Match": rev, "Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            g.text = text
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def reloaded(g, before):
    """Waits for a reload newer than `before` (a last_reload's wall time); its report."""
    def now():
        lr = g.status().get("last_reload") or {}
        return lr if lr.get("time", lr.get("wall_ms")) != before else None
    wait_for(lambda: now() is not None, 5)
    return now() or {}


def last_time(g):
    lr = g.status().get("last_reload") or {}
    return lr.get("time", lr.get("wall_ms"))


def applied_mqtt(g, lr, what):
    check("mqtt" in lr.get("applied", "").split() and lr.get("result") == "applied" and
          g.status()["restart_needed"] == "", f"{what}: applied live, restart_needed empty: {lr}")


def connects(g):
    return g.metrics().get("rtugw_mqtt_connects_total", -1)


def data_seqs(sub, suffix):
    return [p["seq"] for _, p, _ in sub.messages(suffix) if isinstance(p, dict) and "seq" in p]


def test_json_live():
    b, sub, g = started("live1", "#", http=f"write_token = {TOKEN}\n")
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_connected") == 1, 5), "connected")

    # an unrelated reload: the session is not touched, no sequence number is missed
    c0, n0, t0 = connects(g), len(sub.messages()), last_time(g)
    hup(g, g.text.replace("[tcp]", TAG_T2 + "[tcp]"))
    lr = reloaded(g, t0)
    check("tags" in lr.get("applied", "") and "mqtt" not in lr.get("applied", "").split(),
          f"the tag reload applied, [mqtt] not named: {lr}")
    time.sleep(1.5)
    after = sub.msgs[n0:]
    check(connects(g) == c0, f"no new MQTT connection across an unrelated reload ({c0} -> {connects(g)})")
    check(not [m for m in after if m[0] == "rtugw/gl/status" and not (m[1] or {}).get("online", True)],
          "no offline status across an unrelated reload")
    seq_check(data_seqs(sub, "rtugw/gl/m1/data"), "QoS 1 across an unrelated reload")

    # topic_prefix by SIGHUP
    last_old = max(data_seqs(sub, "rtugw/gl/m1/data"))
    t0 = last_time(g)
    hup(g, g.text.replace("gateway = gl\n", "gateway = gl\ntopic_prefix = plant\n"))
    applied_mqtt(g, reloaded(g, t0), "topic_prefix by SIGHUP")
    check(wait_for(lambda: len(sub.messages("plant/gl/m1/data")) >= 5, 8),
          f"data on the new prefix plant/gl/m1/data ({len(sub.messages('plant/gl/m1/data'))})")
    new = data_seqs(sub, "plant/gl/m1/data")
    check(new and min(new) > last_old, f"the data seq goes on across the swap: old last {last_old}, new {new[:3]}")
    seq_check(new, "QoS 1 on the new prefix")
    n_old = len(sub.messages("rtugw/gl/m1/data"))
    time.sleep(0.5)
    check(len(sub.messages("rtugw/gl/m1/data")) == n_old, "nothing more on the old prefix")
    check(g.metrics().get("rtugw_mqtt_connected") == 1, "connected after the swap")

    # format by PUT /api/config
    t0 = last_time(g)
    status, answer = api_put_config(g, g.text.replace("publish = poll\n", "publish = poll\nformat = json-per-tag\n"))
    check(status == 200 and answer.get("restart_needed") == "", f"PUT /api/config format: 200, nothing waits: "
          f"{status} {answer}")
    applied_mqtt(g, reloaded(g, t0), "format by the API")
    check(wait_for(lambda: len(sub.messages("plant/gl/m1/t1")) >= 5, 8), "json-per-tag: plant/gl/m1/t1")
    one = sub.messages("plant/gl/m1/t1")[-1][1]
    check(isinstance(one, dict) and "value" in one and "seq" in one, f"a per-tag payload: {one}")

    # publish = interval, interval_ms by the API: the rhythm follows
    t0 = last_time(g)
    status, answer = api_put_config(g, g.text.replace("publish = poll\n", "publish = interval\ninterval_ms = 1000\n"))
    check(status == 200 and answer.get("restart_needed") == "", f"PUT interval_ms: {status} {answer}")
    applied_mqtt(g, reloaded(g, t0), "interval by the API")
    time.sleep(1.2)
    k = len(sub.messages("plant/gl/m1/t1"))
    time.sleep(3)
    per = len(sub.messages("plant/gl/m1/t1")) - k
    check(2 <= per <= 5, f"publish = interval, 1000 ms: {per} messages of t1 in 3 s (polled every 100 ms)")

    # [mqtt] removed, then added back
    section = g.text[g.text.index("[mqtt]"):]
    t0 = last_time(g)
    hup(g, g.text.replace(section, ""))
    lr = reloaded(g, t0)
    check("mqtt" in lr.get("applied", "").split() and g.status()["restart_needed"] == "", f"[mqtt] removed: {lr}")
    check(wait_for(lambda: any(m[0] == "plant/gl/status" and m[1] and m[1].get("online") is False
                               for m in sub.messages("plant/gl/status")), 5), "removed: the status says offline")
    check(not any(k.startswith("rtugw_mqtt_") for k in g.metrics()), "removed: no rtugw_mqtt_ series in /metrics")
    n = len(sub.messages("plant/gl/m1/t1"))
    time.sleep(1.5)
    check(len(sub.messages("plant/gl/m1/t1")) == n, "removed: no data")
    t0 = last_time(g)
    hup(g, g.text + section.replace("publish = interval\ninterval_ms = 1000\n", "publish = poll\n"))
    applied_mqtt(g, reloaded(g, t0), "[mqtt] added")
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_connected") == 1, 5), "added: connected")
    check(wait_for(lambda: len(sub.messages("plant/gl/m1/t1")) >= n + 5, 5), "added: data again")

    # another broker
    b2 = Broker("live2")
    sub2 = Subscriber(b2.port, "#", "sub-live2")
    t0 = last_time(g)
    hup(g, g.text.replace(f"port = {b.port}\n", f"port = {b2.port}\n"))
    applied_mqtt(g, reloaded(g, t0), "the broker's port")
    check(wait_for(lambda: len(sub2.messages("plant/gl/m1/t1")) >= 5, 8), "the new broker gets the data")
    check(wait_for(lambda: any(m[1] and m[1].get("online") is False for m in sub.messages("plant/gl/status")[-1:]), 3),
          "the old broker's last status says offline")
    n = len(sub.messages("plant/gl/m1/t1"))
    time.sleep(1)
    check(len(sub.messages("plant/gl/m1/t1")) == n, "the old broker gets nothing more")
    finish_all(g, [sub, sub2], [b, b2])


def test_queue_carried():
    b, sub, g = started("livequeue", "rtugw/gq/#", gw="gq")
    b.stop()
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_buffered", 0) >= 5, 5),
          f"the broker away: messages held ({g.metrics().get('rtugw_mqtt_buffered')})")
    held = g.metrics().get("rtugw_mqtt_buffered", 0)
    t0 = last_time(g)
    hup(g, g.text.replace("keepalive_s = 5\n", "keepalive_s = 6\n"))
    applied_mqtt(g, reloaded(g, t0), "keepalive_s with the broker away")
    check(g.metrics().get("rtugw_mqtt_buffered", 0) >= held,
          f"the new session holds what the old one held ({held} -> {g.metrics().get('rtugw_mqtt_buffered')})")
    time.sleep(0.5)
    b.start()
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_buffered", 99) < 3 and
                   g.metrics().get("rtugw_mqtt_connected") == 1, 10), "the broker back: the queue drains")
    time.sleep(1)
    seq_check(data_seqs(sub, "rtugw/gq/m1/data"), "QoS 1 across a broker away and a swap")
    check(g.metrics().get("rtugw_mqtt_dropped_total", -1) == 0, "nothing dropped")
    finish_all(g, [sub], [b])


def test_config_set_over_mqtt():
    b, sub, g = started("liveset", "#", "remote_config = on\n")
    text = g.text.replace("gateway = gl\n", "gateway = gl\ntopic_prefix = fleet2\n")
    # the file's revision, as the gateway's start report names it
    check(wait_for(lambda: any(p and p.get("op") == "start" for _, p, _ in sub.messages("rtugw/gl/config/result")), 5),
          "the start report on rtugw/gl/config/result")
    rev = [p for _, p, _ in sub.messages("rtugw/gl/config/result") if p and p.get("op") == "start"][-1]["revision"]
    sub.publish("rtugw/gl/config/set", json.dumps({"id": "m1", "if_match": rev, "text": text}))
    check(wait_for(lambda: any(p and p.get("id") == "m1" for _, p, _ in sub.messages("/config/result")), 8),
          "config/set answered")
    res = [p for _, p, _ in sub.messages("/config/result") if p and p.get("id") == "m1"][-1]
    check(res.get("ok") and res.get("status") == 200, f"config/set applied: {res}")
    check(wait_for(lambda: len(sub.messages("fleet2/gl/m1/data")) >= 3, 8), "then data on fleet2/gl/m1/data")
    check(g.p.poll() is None and g.status()["restart_needed"] == "", f"the daemon runs on, nothing waits "
          f"({g.status()['restart_needed']!r})")
    finish_all(g, [sub], [b])


def bdseq(msg):
    for m in sp.metrics_of(msg):
        if sp.one(m, 1) == "bdSeq":
            return sp.one(m, 11)
    return None


class RawHost(sp.Host):
    """Every spBv1.0 message, whatever its group and node: (topic, decoded)."""

    def raw(self, start=0):
        with self.lock:
            msgs = self.msgs[start:]
        return [(t, sp.decode_raw(p)) for t, p, _ in msgs if "/STATE/" not in t]


def test_sparkplug_node_change():
    b = Broker("livesp")
    host = RawHost(b.port, "host-live")
    g = Gateway(bus=SIM1, devices=DEVICES, dir=sp.WORK,
                extra=sp.sp_section(b.port).replace("keepalive_s = 5\n", "keepalive_s = 5\nedge_node_id = e1\n"))
    pre = "spBv1.0/plant"
    check(wait_for(lambda: any(t == f"{pre}/DBIRTH/e1/m1" for t, _ in host.raw()), 10), "NBIRTH and DBIRTH of e1")
    nb = [p for t, p in host.raw() if t == f"{pre}/NBIRTH/e1"][-1]
    k = bdseq(nb)
    start = host.count()
    t0 = last_time(g)
    hup(g, g.text.replace("group_id = plant\n", "group_id = plant2\n").replace("edge_node_id = e1\n",
                                                                             "edge_node_id = e2\n"))
    applied_mqtt(g, reloaded(g, t0), "group_id and edge_node_id")
    new = "spBv1.0/plant2"
    check(wait_for(lambda: any(t == f"{new}/DBIRTH/e2/m1" for t, _ in host.raw(start)), 10),
          "the new node's NBIRTH and its device's DBIRTH")
    after = host.raw(start)
    topics = [t for t, _ in after]
    check(f"{pre}/NDEATH/e1" in topics and topics.index(f"{pre}/NDEATH/e1") < topics.index(f"{new}/NBIRTH/e2"),
          f"NDEATH of the old node before the new NBIRTH: {topics[:6]}")
    death = next(p for t, p in after if t == f"{pre}/NDEATH/e1")
    birth = next(p for t, p in after if t == f"{new}/NBIRTH/e2")
    check(bdseq(death) == k and bdseq(birth) == (k + 1) % 256,
          f"NDEATH bdSeq {bdseq(death)} (the old NBIRTH's {k}), the new NBIRTH's {bdseq(birth)} (the next)")
    check(sp.one(birth, 3) == 0, f"the new NBIRTH has seq 0: {sp.one(birth, 3)}")
    i = topics.index(f"{new}/NBIRTH/e2")
    late = [t for t in topics[i:] if t.startswith(f"{pre}/")]
    check(not late, f"nothing from the old node after the new NBIRTH: {late[:3]}")
    g.stop()
    host.close()
    b.stop()


def main():
    run_tests("test_mqtt_live", [test_json_live, test_queue_carried, test_config_set_over_mqtt, test_sparkplug_node_change], cleanup=[sp.WORK, test_mqtt.WORK])


if __name__ == "__main__":
    main()
