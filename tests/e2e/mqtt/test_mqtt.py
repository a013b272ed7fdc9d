#!/usr/bin/python3
"""The MQTT client end to end, against real brokers: Debian's mosquitto,
started here on free ports with configurations of its own (persistence,
TLS with a CA made here by openssl, a site broker bridged to a central
one), subscribers in paho-mqtt and mosquitto_sub, the built-in simulator
on the serial side, pymodbus to read back what a write did.

  - values arrive on the right topics with the right payloads and one
    sequence number per message (json and json-per-tag);
  - a broker away for 10 s while polling at 10 Hz: a QoS 1 subscriber
    with a persistent session gets every sequence number, in order; the
    same with the disk spool and the gateway killed and restarted while
    the broker is away;
  - the spool on a tmpfs that fills: it writes again once the broker has
    acknowledged what is on it, and keeps 1,000 more across kill -9; a
    damaged record and an absurd acked mark are logged and counted, the
    records after the damage kept, and no sequence number reused;
  - the will: kill -9 the gateway and the retained status says offline;
  - writes round-trip to the simulator, bad ones are answered with errors;
  - TLS: the right CA connects, a wrong one fails with one clear log line
    and backs off; so does a broker name that does not resolve;
  - three gateways on a site broker bridged to a central one: every value
    of every gateway arrives centrally, none crossed, across a restart of
    the bridge.
QoS 1 is at least once: a message may arrive twice after a reconnect (it
was in flight), so sequence checks ask that the first arrivals are
contiguous and increasing, and that nothing else arrives out of order."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, free_port, procs, run_tests, wait_for, wait_listening  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402

WORK = tempfile.mkdtemp(prefix="rtugw-mqtt-")


class Broker:
    """mosquitto on 127.0.0.1:port with its own config and persistence."""

    def __init__(self, name, extra="", port=None, listener_extra=""):
        self.name, self.port = name, port or free_port()
        self.dir = os.path.join(WORK, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "mosquitto.conf")
        with open(self.conf, "w") as f:
            # user: as root, mosquitto would switch to its own user, who can
            # read neither the test's keys nor its persistence directory
            f.write(f"user {pwd.getpwuid(os.getuid()).pw_name}\n"
                    f"per_listener_settings false\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {self.dir}/\nlog_dest file {self.dir}/log\nlog_type all\n"
                    f"max_queued_messages 100000\nlistener {self.port} 127.0.0.1\n{listener_extra}{extra}")
        self.start()

    def start(self):
        self.p = subprocess.Popen(["mosquitto", "-c", self.conf], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        procs.append(self.p)
        check(wait_listening(self.port, self.p), f"broker {self.name} listens on {self.port}", quiet=True)

    def stop(self):
        """SIGTERM: mosquitto saves its sessions and queues, as a restart would."""
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=10)


class Subscriber:
    """paho, QoS 1, a persistent session (clean_session False) unless told."""

    def __init__(self, port, topic, client_id, clean=False, tls=None):
        self.msgs, self.lock = [], threading.Lock()
        self.connected = threading.Event()
        self.c = mqtt.Client(client_id=client_id, clean_session=clean)
        self.c.reconnect_delay_set(min_delay=0.2, max_delay=1)
        self.topic = topic

        def on_connect(c, userdata, flags, rc):
            c.subscribe(topic, qos=1)
            self.connected.set()

        def on_message(c, userdata, m):
            try:
                payload = json.loads(m.payload)
            except ValueError:
                payload = None
            with self.lock:
                self.msgs.append((m.topic, payload, m.retain))

        self.c.on_connect, self.c.on_message = on_connect, on_message
        self.c.connect("127.0.0.1", port, keepalive=10)
        self.c.loop_start()
        self.connected.wait(5)
        time.sleep(0.2)   # the SUBACK

    def messages(self, suffix=None):
        with self.lock:
            return [m for m in self.msgs if suffix is None or m[0].endswith(suffix)]

    def publish(self, topic, payload):
        self.c.publish(topic, payload, qos=1).wait_for_publish()

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def mqtt_section(port, gateway, extra=""):
    return f"[mqtt]\nhost = 127.0.0.1\nport = {port}\ngateway = {gateway}\nclient_id = test-{gateway}\n{extra}"


def poll(name, device, function, address, count, interval_ms=200):
    return (f"[poll {name}]\ndevice = {device}\nfunction = {function}\naddress = {address}\ncount = {count}\n"
            f"interval_ms = {interval_ms}\n")


def seq_check(seqs, what):
    """First arrivals contiguous and increasing; repeats only of ones seen (at least once)."""
    firsts, seen, order_ok = [], set(), True
    for s in seqs:
        if s in seen:
            continue
        if firsts and s != firsts[-1] + 1:
            order_ok = False
        firsts.append(s)
        seen.add(s)
    gaps = sorted(set(range(firsts[0], firsts[-1] + 1)) - seen) if firsts else []
    check(bool(firsts) and order_ok and not gaps,
          f"{what}: {len(firsts)} sequence numbers {firsts[:1]}..{firsts[-1:]} in order, none missing "
          f"(missing {gaps[:5]}, {len(seqs) - len(firsts)} repeats)")
    return firsts


def metric(g, name):
    return g.metrics().get(f"rtugw_mqtt_{name}", -1)


# ---- payloads and topics --------------------------------------------------------------

def test_payloads():
    b = Broker("payloads")
    sub = Subscriber(b.port, "rtugw/#", "sub-payloads", clean=True)
    polls = poll("hr", "d1", 3, 0, 3) + poll("co", "d2", 1, 0, 4) + poll("gone", "d8", 3, 0, 2)
    g = Gateway(extra=polls + mqtt_section(b.port, "gj", "publish = poll\n"))
    wait_for(lambda: len(sub.messages("/data")) >= 12 and len(sub.messages("/d8/data")) >= 1, 8)
    g.stop()
    data = sub.messages("/data")
    by_dev = {}
    for topic, p, _ in data:
        by_dev.setdefault(topic, []).append(p)
    d1, d2, d8 = by_dev.get("rtugw/gj/d1/data", []), by_dev.get("rtugw/gj/d2/data", []), by_dev.get("rtugw/gj/d8/data", [])
    check(d1 and all(p["gateway"] == "gj" and p["device"] == "d1" and
                     p["values"] == {"hr.0": 1000, "hr.1": 1001, "hr.2": 1002} and p["errors"] == {} for p in d1),
          f"json: rtugw/gj/d1/data carries slave 1's holding registers by name ({d1[:1]})")
    check(d2 and all(p["values"] == {"co.0": False, "co.1": True, "co.2": False, "co.3": False} for p in d2),
          f"json: coils of slave 2 as true/false ({d2[:1]})")
    check(d8 and all(p["values"] == {} and p["errors"] == {"gone.0": "timeout", "gone.1": "timeout"} for p in d8),
          f"json: a silent slave's tags are errors 'timeout' ({d8[:1]})")
    check(all(isinstance(p["timestamp"], int) and abs(p["timestamp"] / 1000 - time.time()) < 60 for _, p, _ in data),
          "json: timestamps are wall-clock milliseconds")
    seq_check([p["seq"] for _, p, _ in data], "json: one gateway-wide sequence over every device")
    st = [p for t, p, _ in sub.messages("/d8/status")]
    check(st and st[-1]["online"] is False and st[-1]["reason"] == "timeout", f"device d8 offline: timeout ({st[-1:]})")
    st = [p for t, p, _ in sub.messages("/d1/status")]
    check(st and st[0]["online"] is True, "device d1 online")
    gws = [p for t, p, _ in sub.messages("rtugw/gj/status")]
    check(len(gws) >= 2 and gws[0]["online"] is True and gws[0]["version"] and gws[-1]["online"] is False and
          gws[-1]["reason"] == "stopped", f"gateway status online, then offline 'stopped' at a clean stop ({gws})")
    # The retained status, as a late subscriber sees it (mosquitto_sub).
    out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(b.port), "-t", "rtugw/gj/status", "-C", "1",
                          "-W", "3"], capture_output=True, text=True).stdout
    check('"online":false' in out, f"mosquitto_sub: the retained status is offline ({out.strip()})")

    # json-per-tag
    sub.msgs.clear()
    g = Gateway(extra=poll("hr", "d1", 3, 0, 2) + poll("gone", "d8", 3, 0, 1) +
                mqtt_section(b.port, "gt", "publish = poll\nformat = json-per-tag\n"))
    wait_for(lambda: len(sub.messages("/hr.1")) >= 3 and len(sub.messages("/gone.0")) >= 1, 8)
    m = metric(g, "published_total")
    g.stop()
    tags = [(t, p) for t, p, _ in sub.messages() if t.startswith("rtugw/gt/") and not t.endswith("status")]
    hr1 = [p for t, p in tags if t == "rtugw/gt/d1/hr.1"]
    check(hr1 and all(p["value"] == 1001 and p["unit"] is None and p["quality"] == "good" for p in hr1) and
          set(hr1[0]) == {"value", "unit", "quality", "timestamp", "seq"},
          f"json-per-tag: rtugw/gt/d1/hr.1 = {{value, unit, quality, timestamp, seq}} ({hr1[:1]})")
    bad = [p for t, p in tags if t == "rtugw/gt/d8/gone.0"]
    check(bad and bad[0]["value"] is None and bad[0]["quality"] == "bad" and bad[0]["error"] == "timeout",
          f"json-per-tag: a silent slave's tag has quality bad, error timeout ({bad[:1]})")
    seq_check([p["seq"] for _, p in tags], "json-per-tag: one sequence number per message")
    check(m >= len(tags), f"rtugw_mqtt_published_total counts them ({m:.0f} >= {len(tags)})")
    sub.close()
    b.stop()


def test_publish_modes():
    """change: a value that does not move goes out once; interval: the latest
    values every interval_ms, however often they are polled."""
    b = Broker("modes")
    sub = Subscriber(b.port, "rtugw/#", "sub-modes", clean=True)
    gc = Gateway(extra=poll("hr", "d1", 3, 0, 2, interval_ms=100) + mqtt_section(b.port, "gc"))
    gi = Gateway(extra=poll("hr", "d1", 3, 0, 2, interval_ms=100) +
                 mqtt_section(b.port, "gi", "publish = interval\ninterval_ms = 500\n"))
    time.sleep(2.6)
    polls = gc.metrics().get('rtugw_mqtt_values_total', 0) / 2
    gc.stop()
    gi.stop()
    ch = [p for t, p, _ in sub.messages("rtugw/gc/d1/data")]
    iv = [p for t, p, _ in sub.messages("rtugw/gi/d1/data")]
    check(polls >= 15 and len(ch) == 1 and ch[0]["values"] == {"hr.0": 1000, "hr.1": 1001},
          f"change: {polls:.0f} polls of unchanging registers, {len(ch)} message")
    check(3 <= len(iv) <= 6 and all(p["values"] == {"hr.0": 1000, "hr.1": 1001} for p in iv),
          f"interval 500 ms over ~2.5 s of 10 Hz polls: {len(iv)} messages")
    # per device: [device NAME] mqtt_publish over [mqtt] publish = change
    devices = ("[device d1]\nslave = 1\n[device d2]\nslave = 2\nmqtt_publish = poll\n"
               "[device d3]\nslave = 3\nmqtt_publish = interval\nmqtt_interval_ms = 500\n")
    gd = Gateway(devices=devices, extra=poll("a", "d1", 3, 0, 2, 100) + poll("b", "d2", 3, 0, 2, 100) +
                 poll("c", "d3", 3, 0, 2, 100) + mqtt_section(b.port, "gd"))
    time.sleep(2.6)
    gd.stop()
    n = {d: len(sub.messages(f"rtugw/gd/{d}/data")) for d in ("d1", "d2", "d3")}
    check(n["d1"] == 1 and n["d2"] >= 15 and 3 <= n["d3"] <= 6,
          f"per device: d1 change (1 message), d2 mqtt_publish = poll (every 100 ms poll), "
          f"d3 interval 500 ms over ~2.5 s: {n}")
    sub.close()
    b.stop()


def test_module_only_with_mqtt():
    """libmosquitto (and its libssl) is a module loaded for [mqtt] only."""
    def maps(g):
        with open(f"/proc/{g.p.pid}/maps") as f:
            return f.read()
    plain = Gateway()
    m = maps(plain)
    check("libmosquitto" not in m and "rtugw-mqtt.so" not in m, "without [mqtt] the daemon maps no libmosquitto")
    plain.stop()
    g = Gateway(extra=mqtt_section(free_port(), "gmod"))
    check("rtugw-mqtt.so" in maps(g) and "libmosquitto" in maps(g), "with [mqtt] it loads rtugw-mqtt.so")
    g.stop()


# ---- nothing lost -------------------------------------------------------------------------

def test_outage():
    b = Broker("outage")
    sub = Subscriber(b.port, "rtugw/go/#", "sub-outage")
    g = Gateway(extra=poll("hr", "d1", 3, 0, 2, interval_ms=100) + mqtt_section(b.port, "go", "publish = poll\n"))
    time.sleep(2)
    b.stop()
    t_down = time.time()
    time.sleep(1)
    buffered = metric(g, "buffered")
    check(metric(g, "connected") == 0 and buffered > 0, f"broker away: not connected, {buffered:.0f} buffered")
    time.sleep(9)
    b.start()
    ok = wait_for(lambda: metric(g, "buffered") == 0 and metric(g, "connected") == 1, 30)
    check(ok, f"reconnected {time.time() - t_down:.1f} s after the broker went away; the buffer drained")
    time.sleep(1.5)
    m = g.metrics()
    log = g.log_text()
    g.stop()
    time.sleep(0.5)
    seqs = [p["seq"] for _, p, _ in sub.messages("/data")]
    firsts = seq_check(seqs, "10 s outage at 10 Hz: the persistent QoS 1 subscriber")
    check(len(firsts) >= 100, f"polls of the outage were kept ({len(firsts)} messages >= 100)")
    check(m["rtugw_mqtt_dropped_total"] == 0 and m["rtugw_mqtt_reconnects_total"] >= 1,
          f"nothing dropped, {m['rtugw_mqtt_reconnects_total']:.0f} reconnection attempts, "
          f"acknowledged {m['rtugw_mqtt_acknowledged_total']:.0f}")
    check(log.count("cannot connect to") == 1, "the outage's refused connections are logged once")
    sub.close()
    b.stop()


def test_spool_restart():
    b = Broker("spool")
    spool = os.path.join(WORK, "spool")
    sub = Subscriber(b.port, "rtugw/gs/#", "sub-spool")
    section = poll("hr", "d1", 3, 0, 2, interval_ms=100) + mqtt_section(
        b.port, "gs", f"publish = poll\nspool_dir = {spool}\nbuffer_messages = 16\n")
    g = Gateway(extra=section + "spool_fsync_ms = 0\n")   # each message synced; the restart syncs by the second
    time.sleep(1.5)
    b.stop()
    time.sleep(2)
    spooled = metric(g, "spooled")
    buffered = metric(g, "buffered")
    check(spooled > buffered and buffered <= 16, f"broker away: {spooled:.0f} spooled, {buffered:.0f} in memory (<= 16)")
    g.p.kill()   # no goodbye: what is spooled must survive
    g.p.wait()
    # A torn last record, as a power cut mid-write leaves it: cut off at start.
    segs = sorted(f for f in os.listdir(spool) if f.endswith(".seg"))
    with open(os.path.join(spool, segs[-1]), "ab") as f:
        f.write(b"MQT1\x40\x00\x00\x00torn")
    g2 = Gateway(extra=section)
    time.sleep(2)
    check(metric(g2, "spooled") >= spooled, f"after kill -9 and a restart the spool still holds {metric(g2, 'spooled'):.0f}")
    b.start()
    ok = wait_for(lambda: metric(g2, "spooled") == 0 and metric(g2, "buffered") == 0, 30)
    check(ok, "after the broker's return the spool drained")
    time.sleep(1)
    g2.stop()
    time.sleep(0.5)
    seqs = [p["seq"] for _, p, _ in sub.messages("/data")]
    firsts = seq_check(seqs, "spool across kill -9, a torn record and a restart during the outage")
    check(len(firsts) >= 40, f"{len(firsts)} messages over the run (>= 40)")
    sub.close()
    b.stop()


def test_spool_disk_full():
    """spool_dir on a 256 KiB tmpfs, 1,000 publications a second: the broker
    away until the disk is full, back until the spool has drained, away
    again for 1,000 more, then kill -9. The spool must come back from the
    full disk (its acked mark rewritten in place, the acknowledged segment
    deleted), so every one of the 1,000 is on disk and delivered after the
    restart, in order, and no sequence number is used twice. A tmpfs needs
    root: where it cannot be mounted the test fails, it does not skip."""
    b = Broker("full")
    mnt = os.path.join(WORK, "spool-full")
    os.makedirs(mnt, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt], capture_output=True, text=True)
    check(mounted.returncode == 0, f"a 256 KiB tmpfs for the spool ({mounted.stderr.strip() or 'mounted'})")
    if mounted.returncode != 0:
        return
    try:
        sub = Subscriber(b.port, "rtugw/gf/#", "sub-full")
        section = poll("hr", "d1", 3, 0, 10, interval_ms=10) + mqtt_section(
            b.port, "gf", f"publish = poll\nformat = json-per-tag\nspool_dir = {mnt}/spool\nbuffer_messages = 100\n")
        g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", extra=section)
        wait_for(lambda: metric(g, "connected") == 1, 5)
        b.stop()   # connected first: the reconnection's back-off starts from its shortest
        check(wait_for(lambda: metric(g, "dropped_total") > 100, 15),
              f"broker away: the disk filled ({metric(g, 'spool_bytes'):.0f} bytes spooled, "
              f"{metric(g, 'dropped_total'):.0f} publications dropped)")
        b.start()
        check(wait_for(lambda: metric(g, "connected") == 1 and metric(g, "spooled") < 100, 20),
              "broker back: the backlog drained")
        time.sleep(0.5)
        failures = metric(g, "spool_write_failures_total")
        check(failures > 100, f"{failures:.0f} publications the full spool could not take, counted")
        b.stop()
        first = metric(g, "seq") + 1
        check(wait_for(lambda: metric(g, "seq") >= first + 1000, 10), "broker away again: 1,000 more publications")
        last = metric(g, "seq")
        m = g.metrics()
        killed_ms = time.time() * 1000
        g.p.kill()
        g.p.wait()
        log = g.log_text()
        more = m["rtugw_mqtt_spool_write_failures_total"] - failures if failures >= 0 else "unknown"
        check(more == 0 and m["rtugw_mqtt_spooled"] >= last - first,
              f"after the drain the full disk took them all: {m['rtugw_mqtt_spooled']:.0f} spooled, "
              f"{more} more failures")
        warnings = [x for x in log.splitlines() if "mqtt: spool:" in x]
        check(1 <= len(warnings) <= 4 and "writing again" in log,
              f"the full disk is logged when it starts and when it ends, not per message ({len(warnings)} lines)")
        b.start()
        g2 = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", extra=section)
        want = set(range(int(first), int(last) + 1))

        def data_seqs():
            return [p["seq"] for _, p, _ in sub.messages() if p and "seq" in p]

        def delivered():   # by the gateway that was killed: a number reused after the restart does not count
            return want <= {p["seq"] for _, p, _ in sub.messages() if p and "seq" in p and p["timestamp"] <= killed_ms}
        ok = wait_for(lambda: delivered() and metric(g2, "seq") > last + 100, 20)
        g2.stop()
        seqs = data_seqs()
        firsts = list(dict.fromkeys(seqs))
        got = want & {p["seq"] for _, p, _ in sub.messages() if p and "seq" in p and p["timestamp"] <= killed_ms}
        check(ok, f"after kill -9 and a restart every one of seqs {first:.0f}..{last:.0f} arrived "
                  f"({len(got)} of {len(want)})")
        # A repeat is a resend (at least once) when topic and payload are the
        # same; a number handed out twice carries another message.
        first_seen, reused = {}, set()
        for t, p, _ in sub.messages():
            if p and "seq" in p and first_seen.setdefault(p["seq"], (t, p)) != (t, p):
                reused.add(p["seq"])
        check(firsts == sorted(firsts) and not reused,
              f"first arrivals in order, none reused ({len(firsts)} distinct, {len(seqs) - len(firsts)} resends, "
              f"out of order at {[(a, c) for a, c in zip(firsts, firsts[1:]) if c < a][:3]}, "
              f"reused {sorted(reused)[:3]})")
        sub.close()
    finally:
        subprocess.run(["umount", "-l", mnt])
    b.stop()


def test_spool_damage():
    """A spool damaged while the gateway was down: one flipped byte in a
    middle record, and an acked mark no run can have written (2^64 - 1).
    Both are logged and counted; the records after the damaged one are
    delivered; the lost one is a gap no later message fills (its sequence
    number is never handed out again), and the mark is refused, not obeyed."""
    b = Broker("damage")
    spool = os.path.join(WORK, "spool-damage")
    sub = Subscriber(b.port, "rtugw/gd/#", "sub-damage")

    def section(port):
        return poll("hr", "d1", 3, 0, 2, interval_ms=50) + mqtt_section(
            port, "gd", f"publish = poll\nspool_dir = {spool}\nbuffer_messages = 8\n")
    g = Gateway(extra=section(free_port()))   # no broker there: everything stays in the spool
    check(wait_for(lambda: metric(g, "spooled") >= 40, 15), f"{metric(g, 'spooled'):.0f} publications spooled")
    g.p.kill()
    g.p.wait()
    segs = sorted(f for f in os.listdir(spool) if f.endswith(".seg"))
    path = os.path.join(spool, segs[0])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    starts = [i for i in range(len(data)) if data.startswith(b"MQT1", i)]
    k = next(i for i in range(len(starts) // 3, len(starts) - 2) if b"/data" in data[starts[i]:starts[i + 1]])
    data[starts[k + 1] - 3] ^= 0x08   # a digit of the payload's last value: only the checksum can tell
    with open(path, "wb") as f:
        f.write(data)
    with open(os.path.join(spool, "acked"), "w") as f:
        f.write("acked 18446744073709551615 next_seq 18446744073709551615\n")
    g2 = Gateway(extra=section(b.port))
    ok = wait_for(lambda: metric(g2, "spooled") == 0 and metric(g2, "buffered") == 0 and metric(g2, "seq") > len(starts) + 5, 20)
    check(ok, "after the restart the damaged spool drained, and new publications followed")
    time.sleep(0.5)
    m = g2.metrics()
    log = g2.log_text()
    g2.stop()
    seqs = [p["seq"] for _, p, _ in sub.messages("/data")]
    firsts = list(dict.fromkeys(seqs))
    top = max(firsts, default=0)
    missing = sorted(set(range(1, top + 1)) - set(firsts)) if top < 10 ** 6 else ["all but a few"]
    check(firsts == sorted(firsts) and len(missing) == 1 and max(firsts) > len(starts) and max(firsts) < 2 ** 53,
          f"delivered in order {firsts[:1]}..{firsts[-1:]}: one sequence number lost to the damage, "
          f"never reused (missing {missing[:5]}, {len(firsts)} delivered, {len(starts)} records on disk)")
    check("damaged record at byte" in log and "1 publications lost" in log,
          f"the damage is logged ({[x for x in log.splitlines() if 'damaged' in x][:1]})")
    check(f"{spool}/acked: refused" in log and "18446744073709551615" in log,
          f"the absurd mark is refused by name ({[x for x in log.splitlines() if 'refused' in x][:1]})")
    check(m.get("rtugw_mqtt_spool_damaged_total") == 2 and m["rtugw_mqtt_dropped_total"] == 1,
          f"counted: spool_damaged_total {m.get('rtugw_mqtt_spool_damaged_total')} (2), "
          f"dropped_total {m['rtugw_mqtt_dropped_total']:.0f} (1)")
    sub.close()
    b.stop()


def test_will():
    b = Broker("will")
    g = Gateway(extra=mqtt_section(b.port, "gw", "keepalive_s = 5\n"))
    wait_for(lambda: metric(g, "connected") == 1, 5)

    def retained():
        out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(b.port), "-t", "rtugw/gw/status",
                              "-C", "1", "-W", "3"], capture_output=True, text=True).stdout
        return json.loads(out) if out.strip() else None
    s = retained()
    check(s and s["online"] is True, f"retained status online while it runs ({s})")
    g.p.kill()
    g.p.wait()
    time.sleep(0.5)
    s = retained()
    check(s and s["online"] is False and s["reason"] == "connection lost",
          f"kill -9: the will sets the retained status offline ({s})")
    b.stop()


# ---- writes -----------------------------------------------------------------------------------

def test_writes():
    b = Broker("writes")
    sub = Subscriber(b.port, "rtugw/gw1/write/response", "sub-writes", clean=True)
    polls = (poll("hr", "d1", 3, 10, 4) + poll("co", "d1", 1, 0, 8) + poll("ir", "d1", 4, 0, 2) +
             poll("gone", "d8", 3, 0, 1))
    g = Gateway(extra=polls + mqtt_section(b.port, "gw1"))
    wait_for(lambda: metric(g, "connected") == 1, 5)
    c = g.client()

    def write(payload, n=1, timeout=5):
        before = len(sub.messages())
        sub.publish("rtugw/gw1/write", payload)
        wait_for(lambda: len(sub.messages()) >= before + n, timeout)
        return [p for _, p, _ in sub.messages()[before:]]

    r = write(json.dumps({"uuid": "w1", "device": "d1", "tag": "hr.1", "value": 4242}))
    check(r == [{"uuid": "w1", "error": 0, "message": "ok"}], f"FC 6: answered ok ({r})")
    hr = c.read_holding_registers(10, 4, slave=1).registers
    check(hr[1] == 4242, f"the simulator holds it ({hr})")
    r = write(json.dumps([{"uuid": "w2", "device": "d1", "tag": "hr.0", "value": [7, 8, -1]},
                          {"uuid": "w3", "device": "d1", "tag": "co.5", "value": True}]), n=2)
    check(sorted((x["uuid"], x["error"]) for x in r) == [("w2", 0), ("w3", 0)], f"a list: FC 16 and FC 5 ok ({r})")
    hr = c.read_holding_registers(10, 4, slave=1).registers
    co = c.read_coils(0, 8, slave=1).bits[:8]
    check(hr[:3] == [7, 8, 65535] and co[5] is True, f"registers {hr[:3]}, coil 5 {co[5]}")

    bad = [("{nope", 1001, None), ("[]", 1008, None), (json.dumps({"device": "d1", "tag": "hr.0", "value": 1}), 1002, None),
           (json.dumps({"uuid": "b1", "tag": "hr.0", "value": 1}), 1002, "b1"),
           (json.dumps({"uuid": "b2", "device": "nosuch", "tag": "hr.0", "value": 1}), 1003, "b2"),
           (json.dumps({"uuid": "b2b", "device": "nosuch", "tag": "setpoint", "value": 1}), 1003, "b2b"),
           (json.dumps({"uuid": "b3", "device": "d1", "tag": "hr.9", "value": 1}), 1004, "b3"),
           (json.dumps({"uuid": "b4", "device": "d1", "tag": "hr.0", "value": 70000}), 1005, "b4"),
           (json.dumps({"uuid": "b5", "device": "d1", "tag": "hr.0", "value": "x"}), 1005, "b5"),
           (json.dumps({"uuid": "b6", "device": "d1", "tag": "ir.0", "value": 1}), 1009, "b6"),
           (json.dumps({"uuid": "b7", "device": "d1", "tag": "hr.3", "value": [1, 2]}), 1005, "b7"),
           (json.dumps({"uuid": "b8", "device": "d8", "tag": "gone.0", "value": 1}), 11, "b8"),
           (json.dumps({"uuid": "b9", "device": "d1", "tag": "hr.0", "value": 1, "pad": "x" * 20000}), 1008, None)]
    for payload, code, uuid in bad:
        r = write(payload)
        check(len(r) == 1 and r[0]["error"] == code and r[0]["uuid"] == uuid and r[0]["message"],
              f"bad write {payload[:50]!r} -> error {code} ({r})")
    for payload in ("null", "1", "true"):
        r = write(payload)
        check(len(r) == 1 and r[0]["error"] == 1001 and "not an object" in r[0]["message"],
              f"bare JSON {payload}: answered that a write is an object ({r})")
    hr2 = c.read_holding_registers(10, 4, slave=1).registers
    check(hr2 == hr, f"the bad writes changed nothing ({hr2})")
    m = g.metrics()
    check(m["rtugw_mqtt_write_malformed_total"] == 5 + 3 and m["rtugw_mqtt_write_ok_total"] == 3 and
          m["rtugw_mqtt_write_requests_total"] == 3 + len(bad) + 3,
          f"counted: {m['rtugw_mqtt_write_requests_total']:.0f} requests, {m['rtugw_mqtt_write_ok_total']:.0f} ok, "
          f"{m['rtugw_mqtt_write_malformed_total']:.0f} malformed")
    c.close()
    g.stop()

    g = Gateway(extra_tcp="read_only = true\n", extra=polls + mqtt_section(b.port, "gw1"))
    wait_for(lambda: metric(g, "connected") == 1, 5)
    r = write(json.dumps({"uuid": "ro", "device": "d1", "tag": "hr.0", "value": 5}))
    check(r and r[0]["error"] == 1006 and r[0]["message"].startswith("read_only"), f"read_only: refused by name ({r})")
    g.stop()
    sub.close()
    b.stop()


def test_confirmed_write():
    """confirm_write (default on): a slave that clamps a write (rtugw sim
    --clamp 100=100 echoes 108 and holds 100) is read back, the HTTP and MQTT
    answers carry the value it holds, and the tag's data message with it
    follows at once, though the tag is polled only every 20 s."""
    d = tempfile.mkdtemp(prefix="rtugw-confirm-", dir=WORK)
    link = os.path.join(d, "plc")
    sim = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1", "--clamp", "100=100"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs.append(sim)
    sim.stdout.readline()
    b = Broker("confirm")
    sub = Subscriber(b.port, "rtugw/gc/#", "sub-confirm", clean=True)
    tags = ("[tag sp]\ndevice = d1\ntable = holding\naddress = 100\ntype = uint16\nwritable = true\n"
            "interval_ms = 20000\n[tag temp]\ndevice = d1\ntable = holding\naddress = 200\ntype = int16\n"
            "scale = 0.5\nwritable = true\ninterval_ms = 20000\n"
            "[tag cmd]\ndevice = d1\ntable = holding\naddress = 300\ntype = uint16\nwritable = true\n"
            "confirm_write = false\ninterval_ms = 20000\n")
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices="[device d1]\nslave = 1\n",
                extra="write_token = tok-0123456789abcdefghijk\n" + tags + mqtt_section(b.port, "gc", "publish = change\n"))
    wait_for(lambda: any(p and p["values"].get("sp") == 1100 for _, p, _ in sub.messages("/d1/data")), 8)

    def sp_data(value):
        return [p for _, p, _ in sub.messages("/d1/data") if p and p["values"].get("sp") == value]

    def mqtt_write(uuid, tag, value):
        sub.publish("rtugw/gc/write", json.dumps({"uuid": uuid, "device": "d1", "tag": tag, "value": value}))
        wait_for(lambda: any(p and p.get("uuid") == uuid for _, p, _ in sub.messages("/write/response")), 5)
        return [p for _, p, _ in sub.messages("/write/response") if p and p.get("uuid") == uuid]

    t0 = time.time()
    r = mqtt_write("c1", "sp", 108)
    check(r == [{"uuid": "c1", "error": 0, "message": "ok", "value": 100}],
          f"MQTT: a write of 108 clamped to 100 is answered with the value read back, 100 ({r})")
    wait_for(lambda: sp_data(100), 5)
    check(sp_data(100) and time.time() - t0 < 5,
          f"MQTT: the data message with 100 follows at once ({time.time() - t0:.1f} s; the tag's poll is 20 s)")
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/tags/sp", data=b'{"value": 50}', method="PUT")
    req.add_header("Authorization", "Bearer tok-0123456789abcdefghijk")
    with urllib.request.urlopen(req, timeout=10) as resp:
        a = json.loads(resp.read())
    check(a.get("ok") is True and a.get("confirmed") is True and a.get("value") == 50 and a.get("words") == [50],
          f"HTTP: an unclamped write reads back as written ({a})")
    wait_for(lambda: sp_data(50), 5)
    check(sp_data(50), "the data message with 50 follows")
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/tags/sp", data=b'{"value": 108}', method="PUT")
    req.add_header("Authorization", "Bearer tok-0123456789abcdefghijk")
    with urllib.request.urlopen(req, timeout=10) as resp:
        a = json.loads(resp.read())
    check(a.get("confirmed") is True and a.get("value") == 100 and a.get("words") == [108] and
          a.get("read_words") == [100], f"HTTP: 108 written, the slave holds 100: the answer says 100 ({a})")
    r = mqtt_write("c2", "temp", 21.5)
    check(r == [{"uuid": "c2", "error": 0, "message": "ok", "value": 21.5}],
          f"MQTT: a scaled tag's value read back, scaled ({r})")
    # a tag's own confirm_write = false, on a device that confirms: written, not read back
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/tags/cmd", data=b'{"value": 7}', method="PUT")
    req.add_header("Authorization", "Bearer tok-0123456789abcdefghijk")
    with urllib.request.urlopen(req, timeout=10) as resp:
        a = json.loads(resp.read())
    check(a.get("ok") is True and a.get("words") == [7] and a.get("confirmed") is not True and "read_words" not in a,
          f"HTTP: a tag with confirm_write = false is written and not read back ({a})")
    m = g.metrics()
    got = [m.get(f'rtugw_tag_write_readbacks_total{{result="{k}"}}') for k in ("same", "differs", "failed")]
    check(got == [2, 2, 0], f"/metrics: read-backs 2 same, 2 differing (the clamped 108s), 0 failed, none for "
          f"the tag that opts out ({got})")
    g.stop()
    sub.close()
    b.stop()
    sim.kill()
    sim.wait()


# ---- TLS ---------------------------------------------------------------------------------------

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    os.makedirs(d, exist_ok=True)
    for ca in ("ca", "wrong"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                "-subj", f"/CN=rtugw test {ca}", "-days", "2", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=d)


def test_tls():
    pki = os.path.join(WORK, "pki")
    make_pki(pki)
    b = Broker("tls", listener_extra=f"cafile {pki}/ca.crt\ncertfile {pki}/server.crt\nkeyfile {pki}/server.key\n")
    good = Gateway(extra=mqtt_section(b.port, "gtls", f"host = localhost\nca_file = {pki}/ca.crt\n").replace(
        "host = 127.0.0.1\n", ""))
    check(wait_for(lambda: metric(good, "connected") == 1, 8), "TLS with the broker's CA: connected, name verified")
    wrong = Gateway(extra=mqtt_section(b.port, "gbad", f"host = localhost\nca_file = {pki}/wrong.crt\n").replace(
        "host = 127.0.0.1\n", ""))
    lax = Gateway(extra=mqtt_section(b.port, "glax", f"host = localhost\nca_file = {pki}/wrong.crt\nverify = false\n").replace(
        "host = 127.0.0.1\n", ""))
    time.sleep(4.5)
    check(metric(lax, "connected") == 1, "the same wrong CA with verify = false: connected (encrypted, not verified)")
    lax.stop()
    fails = metric(wrong, "connect_failures_total")
    check(metric(wrong, "connected") == 0 and 2 <= fails <= 6,
          f"a wrong CA: not connected, {fails:.0f} attempts in 4.5 s (back-off, not a tight loop)")
    log = wrong.log_text()
    good.stop()
    wrong.stop()
    lines = [l for l in log.splitlines() if "cannot connect" in l]
    check(len(lines) == 1 and "certificate verify failed" in lines[0],
          f"one clear log line for the failure ({lines})")
    b.stop()


def test_dns():
    """A name that does not resolve: one log line with the reason, back-off,
    and the daemon's loop never blocked (HTTP answers throughout)."""
    g = Gateway(extra=mqtt_section(free_port(), "gdns").replace("host = 127.0.0.1", "host = no-such-host.invalid"))
    lines = lambda: [l for l in g.log_text().splitlines() if "cannot connect" in l]
    check(wait_for(lambda: len(lines()) >= 1, 12), "a DNS failure is reported")
    t0 = time.time()
    m = g.metrics()
    check(time.time() - t0 < 1, "HTTP answers while DNS fails (the loop does not block)")
    time.sleep(2)
    ls = lines()
    check(len(ls) == 1 and "DNS: cannot resolve no-such-host.invalid" in ls[0], f"logged once, with the reason ({ls})")
    check(m["rtugw_mqtt_connected"] == 0 and metric(g, "connect_failures_total") >= 2, "retried, with back-off")
    g.stop()


def test_refused_and_credentials():
    """A broker that wants a password: without one, the refused CONNACK is
    logged once with its reason; with username and password_file, it connects."""
    d = os.path.join(WORK, "auth")
    os.makedirs(d, exist_ok=True)
    subprocess.run(["mosquitto_passwd", "-b", "-c", f"{d}/passwd", "gwuser", "s3cret"], check=True,
                   capture_output=True)
    with open(f"{d}/gwpass", "w") as f:
        f.write("s3cret\n")
    b = Broker("auth", extra=f"allow_anonymous false\npassword_file {d}/passwd\n")
    anon = Gateway(extra=mqtt_section(b.port, "ganon"))
    auth = Gateway(extra=mqtt_section(b.port, "gauth", f"username = gwuser\npassword_file = {d}/gwpass\n"))
    check(wait_for(lambda: metric(auth, "connected") == 1, 8), "username and password_file: connected")
    time.sleep(3)
    lines = [l for l in anon.log_text().splitlines() if "cannot connect" in l]
    check(len(lines) == 1 and "refused" in lines[0] and "not authori" in lines[0].lower(),   # v5: "Not authorized"
          f"no credentials: the refused CONNACK is logged once, with its reason ({lines})")
    fails = metric(anon, "connect_failures_total")
    check(2 <= fails <= 6, f"and retried with back-off ({fails:.0f} attempts in ~4 s)")
    anon.stop()
    auth.stop()
    b.stop()


def test_buffer_bound():
    """Without a spool the buffer is bounded: the oldest are dropped and
    counted, and what is kept goes out in order after the reconnect."""
    b = Broker("bound")
    sub = Subscriber(b.port, "rtugw/gb/#", "sub-bound")
    g = Gateway(extra=poll("hr", "d1", 3, 0, 2, interval_ms=100) +
                mqtt_section(b.port, "gb", "publish = poll\nbuffer_messages = 8\n"))
    time.sleep(1)
    b.stop()
    time.sleep(3)
    check(metric(g, "buffered") <= 8 and metric(g, "dropped_total") >= 15,
          f"broker away 3 s at 10 Hz: {metric(g, 'buffered'):.0f} kept (<= 8), "
          f"{metric(g, 'dropped_total'):.0f} dropped and counted")
    b.start()
    check(wait_for(lambda: metric(g, "buffered") == 0 and metric(g, "connected") == 1, 20), "reconnected, drained")
    time.sleep(0.5)
    g.stop()
    seqs = [p["seq"] for _, p, _ in sub.messages("/data")]
    firsts = []
    for q in seqs:
        if q not in firsts:
            firsts.append(q)
    gaps = [(a, c) for a, c in zip(firsts, firsts[1:]) if c != a + 1]
    check(firsts == sorted(firsts) and len(gaps) == 1,
          f"one gap where the oldest were dropped, the rest in order ({gaps})")
    sub.close()
    b.stop()


# ---- a fleet: site broker bridged to a central one ------------------------------------------

def test_fleet():
    central = Broker("central")
    bridge = (f"connection central\naddress 127.0.0.1:{central.port}\ntopic rtugw/# out 1\ncleansession false\n"
              f"remote_clientid site1-bridge\nrestart_timeout 1\nnotifications false\n")
    site = Broker("site", extra=bridge)
    sub = Subscriber(central.port, "rtugw/+/+/data", "sub-central")
    gws = []
    for k in (1, 2, 3):
        gws.append(Gateway(extra=poll("hr", f"d{k}", 3, 0, 2, interval_ms=100) +
                           mqtt_section(site.port, f"g{k}", "publish = poll\n")))
    time.sleep(2)
    site.stop()            # the bridge goes with it
    time.sleep(2)
    site.start()
    ok = wait_for(lambda: all(metric(g, "buffered") == 0 and metric(g, "connected") == 1 for g in gws), 30)
    check(ok, "the three gateways reconnected to the site broker and drained")
    time.sleep(2)
    for g in gws:
        g.stop()
    time.sleep(1)
    msgs = sub.messages()
    crossed = [(t, p) for t, p, _ in msgs
               if t != f"rtugw/{p['gateway']}/{p['device']}/data" or p["gateway"] != f"g{p['device'][1:]}" or
               p["values"] != {"hr.0": 1000 * int(p["device"][1:]), "hr.1": 1000 * int(p["device"][1:]) + 1}]
    check(not crossed, f"no value crossed between gateways or devices ({crossed[:2]})")
    for k in (1, 2, 3):
        seqs = [p["seq"] for t, p, _ in msgs if t == f"rtugw/g{k}/d{k}/data"]
        firsts = seq_check(seqs, f"central subscriber, gateway g{k}, across the bridge's restart")
        check(len(firsts) >= 40, f"g{k}: {len(firsts)} values arrived centrally (>= 40)")
    sub.close()
    site.stop()
    central.stop()


def main():
    run_tests("test_mqtt", [test_module_only_with_mqtt, test_payloads, test_publish_modes, test_writes,
                            test_confirmed_write, test_will,
                            test_tls, test_dns, test_refused_and_credentials, test_buffer_bound, test_outage,
                            test_spool_restart, test_spool_disk_full, test_spool_damage, test_fleet], cleanup=[WORK])


if __name__ == "__main__":
    main()
