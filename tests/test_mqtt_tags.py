#!/usr/bin/python3
"""Tags (tags.csv) over MQTT, against a real mosquitto and the simulator on a
pseudo-terminal of its own (words seeded with --load):

  - every type in every order, unscaled and scaled, strings, raw words and
    the bits of a register arrive in the json format equal to what Python's
    struct reads from the same words (tests/tagsref.py), 64-bit integers to
    the last digit; json-per-tag carries each tag's unit and quality;
  - a silent slave's tags turn bad (timeout) and its device offline;
  - writes through PREFIX/GATEWAY/write to tags of every writable type give
    struct's words on the device (read back over Modbus TCP), a bool in a
    register changes only its bit, and out-of-range, read-only-tag and
    list-to-a-tag writes are refused with their error and change nothing;
  - max_write_bytes at its maximum: payloads of 1 MiB of list items are
    refused by their count before json-c parses them, the peak RSS flat.
Seeded: replay with RTUGW_SEED=..."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import BIN, Gateway, check, rss_growth_bound_kib, status_kib, procs, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402  (its brokers and subscribers; its main() does not run on import)
from test_mqtt import Broker, Subscriber, mqtt_section, poll  # noqa: E402
from tagscheck import registers, value_for  # noqa: E402
from tagsref import csv_text, load_lines, make_tagset, same_value  # noqa: E402

SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_mqtt_tags: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)


def sim(d, load):
    link = os.path.join(d, "plc")
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write(load)
    p = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1", "--load", os.path.join(d, "load.txt")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs.append(p)
    if not p.stdout.readline().startswith("/dev/"):
        print(f"FATAL: rtugw sim did not start (exit {p.poll()})", flush=True)
        sys.exit(1)
    wait_for(lambda: os.path.exists(link), 5)
    return p, link


def latest(sub, topic):
    msgs = [p for t, p, _ in sub.messages() if t == topic]
    return msgs[-1] if msgs else None


def test_values_and_writes():
    d = tempfile.mkdtemp(prefix="rtugw-mqtt-tags-")
    tags = make_tagset(rng, base=100, default_order="CDAB")
    with open(os.path.join(d, "tags.csv"), "w", newline="") as f:
        f.write(csv_text(tags, ""))
    p, link = sim(d, load_lines(tags, 1))
    b = Broker("tags")
    sub = Subscriber(b.port, "rtugw/#", "sub-tags", clean=True)
    devices = (f"[device plc]\nslave = 1\norder = CDAB\ntags_file = {d}/tags.csv\n"
               f"[device gone]\nslave = 9\ndead_after = 0\n[tag silent]\ndevice = gone\ntable = holding\n"
               f"address = 0\ntype = uint16\ninterval_ms = 200\n")
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices, timeout_ms=300,
                extra=mqtt_section(b.port, "gtags", "publish = poll\n"))
    topic = "rtugw/gtags/plc/data"
    # a tag's interval is 200 ms and the planner spreads reads: every tag shows up after a few rounds
    def seen():
        vals = {}
        for t, m, _ in sub.messages():
            if t == topic:
                vals.update(m["values"])
        return vals
    check(wait_for(lambda: len(seen()) >= len(tags), 10), f"json: every tag of plc published ({len(seen())} of {len(tags)})")
    vals = seen()
    bad = [(t["name"], t["want"], vals.get(t["name"])) for t in tags if not same_value(vals.get(t["name"]), t["want"])]
    check(not bad, f"json: {len(tags)} tags of every type and order equal struct's reading of their words "
                   f"({len(bad)} differ: {bad[:4]})")
    big = [t for t in tags if t["type"] in ("uint64", "int64") and t["scale"] == 1.0]
    check(big and all(type(vals[t["name"]]) is int and vals[t["name"]] == t["want"] for t in big),
          f"json: 64-bit integers exact ({[(t['name'], vals.get(t['name'])) for t in big[:2]]})")
    msgs = [m for t, m, _ in sub.messages() if t == topic]
    check(all(m["errors"] == {} or set(m["errors"].values()) <= {"not read yet"} for m in msgs),
          "json: no errors on a good slave")
    wait_for(lambda: latest(sub, "rtugw/gtags/gone/data") and latest(sub, "rtugw/gtags/gone/status"), 5)
    gone = latest(sub, "rtugw/gtags/gone/data")
    check(gone and gone["errors"] == {"silent": "timeout"} and gone["values"] == {},
          f"json: a silent slave's tag is an error 'timeout' ({gone})")
    st = latest(sub, "rtugw/gtags/gone/status")
    check(st and st["online"] is False, f"the silent slave's device is offline ({st})")

    # writes of every writable register type, then the bits of a register
    c = g.client()
    resp = []

    def write(item):
        before = len([1 for t, _, _ in sub.messages() if t.endswith("/write/response")])
        sub.publish("rtugw/gtags/write", json.dumps(item))
        wait_for(lambda: len([1 for t, _, _ in sub.messages() if t.endswith("/write/response")]) > before, 5)
        r = [m for t, m, _ in sub.messages() if t.endswith("/write/response")]
        return r[-1] if len(r) > before else None

    bad = []
    for i, t in enumerate(tags):
        if not t["writable"] or t["type"] == "bool":
            continue
        text, want = value_for(rng, t)
        r = write({"uuid": f"w{i}", "device": "plc", "tag": t["name"], "value": json.loads(text)})
        back = registers(g, t["address"], len(want))
        if not r or r["error"] != 0 or r["uuid"] != f"w{i}" or back != want:
            bad.append((t["name"], text, r, want, back))
    check(not bad, f"writes: every writable type gives struct's words on the device ({len(bad)} wrong: {bad[:3]})")
    bits = [t for t in tags if t["type"] == "bool"]
    ok = True
    for t in rng.sample(bits, 6):
        before = registers(g, t["address"], 1)[0]
        value = rng.choice([True, False])
        r = write({"uuid": "bit", "device": "plc", "tag": t["name"], "value": value})
        after = registers(g, t["address"], 1)[0]
        want = (before | (1 << t["bit"])) if value else (before & ~(1 << t["bit"]))
        if not r or r["error"] != 0 or after != want:
            ok = False
            print(f"  bit {t['bit']} := {value}: {before:04x} -> {after:04x}, want {want:04x}: {r}")
    check(ok, "writes: a bool in a register changes only its bit (FC 3, then FC 6)")
    words = registers(g, 100, 60)
    refused = [("int16_AB_u", 40000, 1005), ("uint16_AB_u", -1, 1005), ("int16_AB_u", [1, 2], 1005),
               ("in_i32", 1, 1009), ("nonesuch", 1, 1004), ("text_AB", "seven chars", 1005)]
    got = [(n, v, (write({"uuid": "r", "device": "plc", "tag": n, "value": v}) or {}).get("error")) for n, v, _ in refused]
    check([x[2] for x in got] == [x[2] for x in refused], f"writes: refused with their error ({got})")
    check(registers(g, 100, 60) == words, "writes: the refused ones changed nothing")
    c.close()
    g.stop()

    # json-per-tag: unit and quality
    sub.msgs.clear()
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices, timeout_ms=300,
                extra=mqtt_section(b.port, "gpt", "publish = poll\nformat = json-per-tag\n"))
    wait_for(lambda: latest(sub, "rtugw/gpt/plc/float32_ABCD_s") and latest(sub, "rtugw/gpt/gone/silent"), 8)
    one, silent = latest(sub, "rtugw/gpt/plc/float32_ABCD_s"), latest(sub, "rtugw/gpt/gone/silent")
    check(one and one["unit"] == "u" and one["quality"] == "good" and
          type(one["value"]) in (int, float),
          f"json-per-tag: a scaled float with its unit, quality good ({one})")
    check(silent and silent["quality"] == "bad" and silent["error"] == "timeout" and silent["value"] is None,
          f"json-per-tag: the silent tag bad, timeout ({silent})")
    g.stop()
    sub.close()
    b.stop()
    p.kill()
    shutil.rmtree(d, ignore_errors=True)



def literals(raw):
    """A JSON text with every number kept as the characters it was written in."""
    return json.loads(raw, parse_float=lambda t: ("num", t), parse_int=lambda t: ("num", t))


def test_one_formatter():
    """One number formatter (tags_format) for every output: the same tag
    prints the same characters as /tags's value, /tags's "text" (what the
    page shows) and the MQTT json data message (a real mosquitto, paho):
    a float32 in float32 digits (3.14159, not 3.141590118408203), a scaled
    int16 as its decimal (14503 x 0.1 = 1450.3, not 1450.3000000000002), and
    a tag's decimals, from a CSV column and a [tag] key, applied in both."""
    import paho.mqtt.client as mqtt
    import urllib.request
    d = tempfile.mkdtemp(prefix="rtugw-mqtt-format-")
    with open(os.path.join(d, "tags.csv"), "w") as f:
        f.write("name,table,address,type,scale,decimals\n"
                "pi,holding,10,float32,,\n"
                "pi2,holding,10,float32,,2\n"
                "temp,holding,12,int16,0.1,\n"
                "big,holding,13,float32,,\n")
    p, link = sim(d, "1 holding 10 16457 4048 14503 18804 9216\n")   # 3.14159f, 14503, 1e6f
    b = Broker("format")
    raw, lock = [], threading.Lock()
    c = mqtt.Client(client_id="sub-format", clean_session=True)
    c.on_connect = lambda c, u, f, rc: c.subscribe("rtugw/gfmt/plc/data", qos=1)
    c.on_message = lambda c, u, m: (lock.acquire(), raw.append(m.payload.decode()), lock.release())
    c.connect("127.0.0.1", b.port, keepalive=10)
    c.loop_start()
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n",
                devices=f"[device plc]\nslave = 1\ntags_file = {d}/tags.csv\n"
                        "[tag temp3]\ndevice = plc\ntable = holding\naddress = 12\ntype = int16\n"
                        "scale = 0.1\ndecimals = 3\ninterval_ms = 200\n",
                timeout_ms=300, extra=mqtt_section(b.port, "gfmt", "publish = poll\n"))
    want = {"pi": "3.14159", "pi2": "3.14", "temp": "1450.3", "temp3": "1450.300", "big": "1000000"}

    def mqtt_values():
        out = {}
        with lock:
            for r in raw:
                out.update(literals(r)["values"])
        return out

    wait_for(lambda: set(want) <= set(mqtt_values()), 10)
    with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port}/tags", timeout=10) as r:
        tags = {t["name"]: t for t in literals(r.read().decode())["tags"]}
    m = mqtt_values()
    got = {n: (tags.get(n, {}).get("value"), tags.get(n, {}).get("text"), m.get(n)) for n in want}
    check(all(got[n] == (("num", w), w, ("num", w)) for n, w in want.items()),
          f"the same characters on /tags (value), /tags (text, the page's) and MQTT json: {got}")
    g.stop()
    c.loop_stop()
    c.disconnect()
    b.stop()
    p.kill()
    shutil.rmtree(d, ignore_errors=True)


def test_change_one_message_per_poll():
    """publish = change: a device whose tags take three reads (input 0, 50
    and 100: farther apart than max_gap) and all change every poll (rtugw sim
    --live) sends one data message per poll carrying all three, not one per
    read; a tag that does not change (holding 0) is in none after the first."""
    d = tempfile.mkdtemp(prefix="rtugw-mqtt-change-")
    with open(os.path.join(d, "tags.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nin0,input,0,uint16,300\nin50,input,50,uint16,300\n"
                "in100,input,100,uint16,300\nsteady,holding,0,uint16,300\n")
    link = os.path.join(d, "plc")
    p = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1", "--live", "--live-period-ms", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs.append(p)
    check(p.stdout.readline().startswith("/dev/"), "simulator started")
    wait_for(lambda: os.path.exists(link), 5)
    b = Broker("change")
    sub = Subscriber(b.port, "rtugw/gch/plc/data", "sub-change", clean=True)
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=f"[device plc]\nslave = 1\ntags_file = {d}/tags.csv\n",
                timeout_ms=300, extra=mqtt_section(b.port, "gch", "publish = change\n"))
    wait_for(lambda: len(sub.messages()) >= 8, 10)
    time.sleep(0.5)
    msgs = [m["values"] for _, m, _ in sub.messages() if m and m.get("values")]
    later = msgs[2:]   # the first polls: tags not read yet go out as they come
    check(len(later) >= 5 and all(set(v) == {"in0", "in50", "in100"} for v in later),
          f"publish = change: one message per poll with all three changed tags of three reads, the steady "
          f"one in none ({len(msgs)} messages: {[sorted(v) for v in msgs[:8]]})")
    g.stop()
    sub.close()
    b.stop()
    p.kill()
    shutil.rmtree(d, ignore_errors=True)


def test_write_bounds():
    """max_write_bytes at its maximum: 10 payloads of 1 MiB of list items are
    refused by their count of values before json-c parses them (the peak RSS
    does not move), counted; a NUL in a tag name is refused, not cut."""
    b = Broker("write-bounds")
    sub = Subscriber(b.port, "rtugw/gwb/write/response", "sub-bounds", clean=True)
    g = Gateway(extra=poll("hr", "d1", 3, 10, 4) + mqtt_section(b.port, "gwb", "max_write_bytes = 1048576\n"))
    wait_for(lambda: g.metrics().get("rtugw_mqtt_connected") == 1, 5)

    def write(payload, n=1):
        before = len(sub.messages())
        sub.publish("rtugw/gwb/write", payload)
        wait_for(lambda: len(sub.messages()) >= before + n, 10)
        return [p for _, p, _ in sub.messages()[before:]]

    peak0 = status_kib(g.p.pid, "VmHWM")
    big = ("[" + ",".join(["0"] * (1048576 // 2 - 1)) + "]").encode()
    answers = [a for _ in range(10) for a in write(big)]
    grew = status_kib(g.p.pid, "VmHWM") - peak0
    m = g.metrics()
    check(len(answers) == 10 and all(a["error"] == 1001 and "more than" in a["message"] for a in answers) and
          m["rtugw_mqtt_write_malformed_total"] == 10 and grew < rss_growth_bound_kib(),
          f"10 payloads of 1 MiB, a list of 524287 values: refused by their count before parsing (1001), "
          f"counted ({m['rtugw_mqtt_write_malformed_total']:.0f}), peak RSS +{grew} KiB (< {rss_growth_bound_kib()} KiB) ({answers[:1]})")
    r = write(json.dumps({"uuid": "n1", "device": "d1", "tag": "hr.1\u0000x", "value": 5}))
    check(len(r) == 1 and r[0]["error"] == 1002 and r[0]["uuid"] == "n1", f"a NUL in the tag name: refused ({r})")
    r = write(json.dumps({"uuid": "ok1", "device": "d1", "tag": "hr.1", "value": 4242}))
    c = g.client()
    check(r == [{"uuid": "ok1", "error": 0, "message": "ok"}] and
          c.read_holding_registers(10, 4, slave=1).registers[1] == 4242, f"a good write after them: done ({r})")
    c.close()
    g.stop()
    sub.close()
    b.stop()


def test_http_and_mqtt_share_the_overlap_rule():
    """One tag-write module for HTTP, MQTT and Sparkplug (gateway/tag_write.c,
    issue 28): while a read-modify-write of register 7 (a bool in it) is in
    flight, from either side, a write of register 7 from the other side is
    refused (HTTP 409, MQTT 1007), and one of register 8 is not."""
    import signal
    import threading
    import urllib.error
    import urllib.request
    d = tempfile.mkdtemp(prefix="rtugw-mqtt-overlap-")
    with open(os.path.join(d, "tags.csv"), "w") as f:
        f.write("name,device,table,address,type,writable\r\nb0,,holding,7.0,bool,true\r\n"
                "r7,,holding,7,uint16,true\r\nr8,,holding,8,uint16,true\r\n")
    p, link = sim(d, "")
    b = Broker("overlap")
    sub = Subscriber(b.port, "rtugw/gov/write/response", "sub-overlap", clean=True)
    token = "overlap-token"
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n",
                devices=f"[device plc]\nslave = 1\ndead_after = 0\ntags_file = {d}/tags.csv\n", timeout_ms=1500,
                extra=f"write_token = {token}\n" + mqtt_section(b.port, "gov"))
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_connected") == 1, 5), "MQTT up")

    def put(name, value):
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/tags/{name}", method="PUT",
                                     data=json.dumps({"value": value}).encode())
        req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def mqtt_write(uuid, tag, value):
        sub.publish("rtugw/gov/write", json.dumps({"uuid": uuid, "device": "plc", "tag": tag, "value": value}))
        wait_for(lambda: any(m.get("uuid") == uuid for _, m, _ in sub.messages()), 15)
        r = [m for _, m, _ in sub.messages() if m.get("uuid") == uuid]
        return r[-1]["error"] if r else None

    os.kill(p.pid, signal.SIGSTOP)   # silent: a write stays in flight for its timeouts
    t = threading.Thread(target=lambda: put("b0", True))
    t.start()
    time.sleep(0.3)
    e7, e8 = mqtt_write("m7", "r7", 5), None
    s7 = put("r7", 5)
    check(e7 == 1007 and s7 == 409, f"HTTP's read-modify-write in flight: MQTT r7 refused 1007 ({e7}), "
                                    f"HTTP r7 refused 409 ({s7})")
    t.join()
    sub.msgs.clear()
    sub.publish("rtugw/gov/write", json.dumps({"uuid": "mb0", "device": "plc", "tag": "b0", "value": True}))
    time.sleep(0.3)
    s7 = put("r7", 6)
    e7 = mqtt_write("m7b", "r7", 6)
    check(s7 == 409 and e7 == 1007, f"MQTT's read-modify-write in flight: HTTP r7 refused 409 ({s7}), "
                                    f"MQTT r7 refused 1007 ({e7})")
    e8 = mqtt_write("m8", "r8", 8)
    check(e8 not in (1007, None), f"a write of register 8 is not refused by the rule ({e8}: the silent slave's)")
    os.kill(p.pid, signal.SIGCONT)
    check(wait_for(lambda: put("r7", 7) == 200, 30), "once the slave answers, register 7 is written")
    g.stop()
    sub.close()
    b.stop()
    p.kill()
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_mqtt_tags", [test_values_and_writes, test_one_formatter, test_change_one_message_per_poll,
                                 test_write_bounds, test_http_and_mqtt_share_the_overlap_rule], cleanup=[test_mqtt.WORK])
