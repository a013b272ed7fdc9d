#!/usr/bin/python3
"""Tags (tags.csv) over MQTT, against a real mosquitto and the simulator on a
pseudo-terminal of its own (words seeded with --load):

  - every type in every order, unscaled and scaled, strings, raw words and
    the bits of a register arrive in the json format equal to what Python's
    struct reads from the same words (tests/lib/tagsref.py), 64-bit integers to
    the last digit; json-per-tag carries each tag's unit and quality;
  - a silent slave's tags turn bad (timeout) and its device offline;
  - writes through PREFIX/GATEWAY/write to tags of every writable type give
    struct's words on the device (read back over Modbus TCP), a bool in a
    register changes only its bit, and out-of-range, read-only-tag and
    list-to-a-tag writes are refused with their error and change nothing;
  - max_write_bytes at its maximum: payloads of 1 MiB of list items are
    refused by their count before json-c parses them, the peak RSS flat.
Seeded: replay with RTUGW_SEED=..."""
from http.client import HTTPException
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
from rtugwtest import BIN, Gateway, check, rss_growth_bound_kib, status_kib, procs, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402  (its brokers and subscribers; its main() does not run on import)
from test_mqtt import Broker, Subscriber, mqtt_section, poll  # noqa: E402
from tagscheck import all_good, http, registers, tag_values, value_for  # noqa: E402
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
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices, timeout_ms=300, dir=d,
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
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices, timeout_ms=300, dir=d,
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
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", dir=d,
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
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", dir=d, devices=f"[device plc]\nslave = 1\ntags_file = {d}/tags.csv\n",
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
    token = "overlap-token-0123456789"
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", dir=d,
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


def test_template_15_devices():
    """[template meter]: one register list used by 15 devices gives 15 x 4
    tags named meterK.ROW in /tags, each decoded from its own slave's words
    with the device's defaults over the template's (order, interval_ms), and
    one MQTT topic per device carrying its own scoped names only."""
    d = tempfile.mkdtemp(prefix="rtugw-template-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,scale,unit\nvoltage,holding,0,uint16,0.1,V\ncurrent,holding,1,uint16,,A\n"
                "energy,holding,2,uint32,,Wh\nstatus,input,5,uint16,,\n")
    b = Broker("template")
    sub = Subscriber(b.port, "rtugw/#", "sub-template", clean=True)
    n = 15
    devices = (f"[template meter]\ntags_file = {d}/meter.csv\norder = CDAB\ninterval_ms = 500\n" +
               "".join(f"[device meter{k}]\nslave = {k}\ntemplate = meter\n"
                       + ("interval_ms = 1500\n" if k == 3 else "order = ABCD\n" if k == 15 else "")
                       for k in range(1, n + 1)))
    g = Gateway(bus="port = sim:" + ",".join(str(k) for k in range(1, n + 1)) + "\nbaud = 115200\n",
                devices=devices, timeout_ms=300, extra=mqtt_section(b.port, "gtpl"), dir=d)

    def tags():
        st, out = http(g, "GET", "/tags")
        return {t["name"]: t for t in json.loads(out)["tags"]} if st == 200 else {}
    check(wait_for(lambda: len(tags()) == 4 * n and all(t["quality"] == "good" for t in tags().values()), 20),
          f"15 x 4 tags, all good ({len(tags())})")
    v, bad = tags(), []
    for k in range(1, n + 1):
        w = [k * 1000 + a for a in range(4)]
        energy = (w[2] << 16 | w[3]) if k == 15 else (w[3] << 16 | w[2])
        want = {"voltage": w[0] * 0.1, "current": w[1], "energy": energy, "status": 0x8000 + k * 1000 + 5}
        for row, val in want.items():
            t = v.get(f"meter{k}.{row}", {})
            if t.get("device") != f"meter{k}" or abs(t.get("value", -1) - val) > 1e-6:
                bad.append((f"meter{k}.{row}", val, t))
    check(not bad and "voltage" not in v, f"scoped names, each device's own words: {bad[:3]}")
    full = {k: json.loads(http(g, "GET", f"/tags/meter{k}.energy")[1]) for k in (1, 3, 15)}
    check([full[k]["interval_ms"] for k in (1, 3, 15)] == [500, 1500, 500] and
          [full[k]["order"] for k in (1, 3, 15)] == ["CDAB", "CDAB", "ABCD"],
          f"the device's interval_ms and order over the template's: "
          f"{[(full[k]['interval_ms'], full[k]['order']) for k in (1, 3, 15)]}")

    def topics():
        got = {}
        for t, m, _ in sub.messages():
            if t.startswith("rtugw/gtpl/meter") and t.endswith("/data"):
                got.setdefault(t, set()).update(m["values"])
        return got
    check(wait_for(lambda: len(topics()) == n and all(len(x) == 4 for x in topics().values()), 10),
          f"one topic per device ({len(topics())})")
    wrong = {t: names for t, names in topics().items()
             if names != {f"{t.split('/')[2]}.{r}" for r in ("voltage", "current", "energy", "status")}}
    check(not wrong, f"each topic carries its own device's scoped names: {list(wrong.items())[:2]}")
    g.stop()
    sub.close()
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


def mbap_read(sock, tid, address, count=1):
    """Holding registers of unit 1 on an open Modbus TCP socket (no reconnect, unlike pymodbus)."""
    sock.sendall(struct.pack(">HHHBBHH", tid, 0, 6, 1, 3, address, count))
    want, got = 9 + 2 * count, b""
    while len(got) < want:
        part = sock.recv(want - len(got))
        if not part:
            return None
        got += part
    return list(struct.unpack(f">{count}H", got[9:])) if got[7] == 3 else None


def test_reload_tags_live():
    """A row added to a tags_file and SIGHUP: the new tag's value is in /tags
    within a poll or so, the unchanged tag keeps its good value, and the rest
    keeps running: a Modbus TCP connection opened before answers on the same
    socket after, the MQTT session stays up (QoS 1 subscriber: no sequence
    gap, no reconnection). A file that fails check changes nothing."""
    d = tempfile.mkdtemp(prefix="rtugw-reload-tags-")
    csv_path = os.path.join(d, "tags.csv")
    with open(csv_path, "w") as f:
        f.write("name,table,address,type,interval_ms\nv0,holding,0,uint16,200\n")
    b = Broker("reload")
    sub = Subscriber(b.port, "rtugw/#", "sub-reload", clean=True)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", dir=d, devices=f"[device d]\nslave = 1\ntags_file = {csv_path}\n",
                extra=mqtt_section(b.port, "glive", "publish = poll\n"))
    check(wait_for(lambda: all_good(g), 5), "v0 good before the reload")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(mbap_read(sock, 1, 5) == [1005], "Modbus TCP answers before the reload")
    with open(csv_path, "a") as f:
        f.write("v9,holding,9,uint16,200\n")
    t0 = time.monotonic()
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: tag_values(g).get("v9", {}).get("quality") == "good", 5),
          "the added tag is good in /tags after SIGHUP")
    took = time.monotonic() - t0
    v = tag_values(g)
    check(v["v9"]["value"] == 1009 and v["v0"]["value"] == 1000 and v["v0"]["quality"] == "good",
          f"its value, and the unchanged tag's ({took:.2f} s after the signal; reads every 0.2 s)")
    check(took < 3, f"within a few polls: {took:.2f} s")
    check(mbap_read(sock, 2, 5) == [1005], "the Modbus TCP connection opened before answers on the same socket")
    log = g.log_text()
    check("tags applied: 2 tags, 1 of them unchanged" in log and "not applied until a restart" not in log,
          "the log says the tags were applied, and nothing waits for a restart")
    check(g.status().get("restart_needed") == "", "/status: restart_needed is empty")
    check(wait_for(lambda: any("v9" in p["values"] for t, p, _ in sub.messages("/data")), 5),
          "MQTT publishes the added tag")
    # a file that check refuses: nothing changes
    with open(csv_path, "a") as f:
        f.write("v10,holding,10,uint17,200\n")
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: "keeping the running configuration" in g.log_text(), 5), "a bad file is refused")
    check(sorted(tag_values(g)) == ["v0", "v9"], "and the tags are those running before")
    # a valid row, and a bus changed beyond its line keys in the same reload:
    # both apply (the bus restarts in place, gateway/bus_restart.c)
    with open(csv_path) as f:
        rows = f.read().replace("uint17", "uint16")
    with open(csv_path, "w") as f:
        f.write(rows)
    g.rewrite(g.text.replace("baud = 115200", "baud = 115200\nqueue_depth = 32"))
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: sorted(tag_values(g)) == ["v0", "v10", "v9"], 5) and g.status().get("restart_needed") == "",
          f"a bus changed too: both apply ({sorted(tag_values(g))}, {g.status().get('restart_needed')!r})")
    time.sleep(0.5)
    check(mbap_read(sock, 3, 9) == [1009], "Modbus TCP still answers on the same socket")
    sock.close()
    check(wait_for(lambda: sum("v9" in p["values"] for _, p, _ in sub.messages("/data")) >= 4, 5),
          "MQTT keeps publishing after the reloads")
    seqs = [p["seq"] for _, p, _ in sub.messages("/data")]
    test_mqtt.seq_check(seqs, "QoS 1 subscriber across every reload")
    check(g.metrics().get("rtugw_mqtt_reconnects_total", 0) == 0, "the MQTT session was never dropped")
    g.stop()
    sub.close()
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_reload_polls_live():
    """Poll groups added, changed and removed by SIGHUP apply live: /status
    lists the new set, a kept group keeps its counters, the new group is polled
    and published over MQTT as GROUP.N, and a Modbus TCP connection opened
    before keeps answering on the same socket; the MQTT sequence has no gap."""
    b = Broker("reload-polls")
    sub = Subscriber(b.port, "rtugw/#", "sub-reload-polls", clean=True)
    keep = poll("keep", "d", 3, 0, 2, 200)
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device d]\nslave = 1\n",
                extra=keep + poll("gone", "d", 3, 10, 2, 200) + mqtt_section(b.port, "gpolls"))

    def groups():
        return {p["name"]: p for p in g.status()["polls"]}
    check(wait_for(lambda: groups().get("keep", {}).get("polls", 0) >= 3, 5), "keep is polled before the reload")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(mbap_read(sock, 1, 3) == [1003], "Modbus TCP answers before the reload")
    before = groups()["keep"]["polls"]
    n_before = len(sub.messages("/data"))
    g.rewrite(g.text.replace(poll("gone", "d", 3, 10, 2, 200), poll("fresh", "d", 3, 20, 3, 200)))
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: groups().get("fresh", {}).get("values") == [1020, 1021, 1022], 5),
          f"the added group is polled: {groups().get('fresh')}")
    gs = groups()
    check(sorted(gs) == ["fresh", "keep"] and gs["keep"]["polls"] >= before,
          f"the removed group is gone, the kept one kept its counters ({before} -> {gs['keep']['polls']})")
    check(g.status().get("restart_needed") == "" and "poll groups applied: 2 groups" in g.log_text(),
          "applied, and nothing waits for a restart")
    check(wait_for(lambda: any("fresh.2" in p["values"] for t, p, _ in sub.messages("/data")), 5),
          "MQTT publishes the added group's values")
    time.sleep(0.5)
    late = [p for _, p, _ in sub.messages("/data")][n_before:]
    check(late and not any("gone.0" in p["values"] for p in late),
          f"and none of the removed group's after the reload ({[sorted(p['values']) for p in late]})")
    check(mbap_read(sock, 2, 21) == [1021], "the Modbus TCP connection opened before answers on the same socket")
    sock.close()
    test_mqtt.seq_check([p["seq"] for _, p, _ in sub.messages("/data")], "QoS 1 subscriber across the reload")
    check(g.metrics().get("rtugw_mqtt_reconnects_total", 0) == 0, "the MQTT session was never dropped")
    g.stop()
    sub.close()
    b.stop()


def test_reload_devices_live():
    """A device added from a template by SIGHUP: its scoped tags are good in
    /tags and published on its own MQTT topic, the TCP connection and the
    MQTT session stay up; a change of a key the bus's line holds (timeout_ms)
    applies live too (the line takes it; nothing waits)."""
    d = tempfile.mkdtemp(prefix="rtugw-reload-devices-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\ncurrent,holding,1,uint16,200\n")
    b = Broker("reload-devices")
    sub = Subscriber(b.port, "rtugw/#", "sub-reload-devices", clean=True)
    tpl = f"[template meter]\ntags_file = {d}/meter.csv\n[device meter1]\nslave = 1\ntemplate = meter\n"
    g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", devices=tpl, extra=mqtt_section(b.port, "gdev"), dir=d)
    check(wait_for(lambda: all_good(g) and len(tag_values(g)) == 2, 5), "meter1's two tags good before the reload")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(mbap_read(sock, 1, 3) == [1003], "Modbus TCP answers before the reload")
    g.rewrite(g.text.replace(tpl, tpl + "[device meter2]\nslave = 2\ntemplate = meter\n"))
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: tag_values(g).get("meter2.current", {}).get("value") == 2001, 5),
          "the added device's tags are read: meter2.current = 2001")
    check(g.status().get("restart_needed") == "", f"nothing waits for a restart ({g.status().get('restart_needed')})")
    check(wait_for(lambda: any(t == "rtugw/gdev/meter2/data" for t, _, _ in sub.messages()), 5),
          "meter2 has its own MQTT topic")
    check(mbap_read(sock, 2, 3) == [1003], "the Modbus TCP connection opened before answers on the same socket")
    g.rewrite(g.text.replace("[device meter2]\nslave = 2\n", "[device meter2]\nslave = 2\ntimeout_ms = 900\n"))
    g.p.send_signal(signal.SIGHUP)
    tmo = 'rtugw_device_timeout_ms{bus="line",device="meter2",slave="2"}'
    check(wait_for(lambda: g.metrics().get(tmo) == 900, 5),
          f"a line key (timeout_ms) applied live: {g.metrics().get(tmo)} ms for slave 2")
    check(g.status().get("restart_needed") == "", f"nothing waits ({g.status().get('restart_needed')})")
    check(mbap_read(sock, 3, 3) == [1003], "and the connection still answers")
    sock.close()
    test_mqtt.seq_check([p["seq"] for _, p, _ in sub.messages("/data")], "QoS 1 subscriber across the reloads")
    check(g.metrics().get("rtugw_mqtt_reconnects_total", 0) == 0, "the MQTT session was never dropped")
    g.stop()
    sub.close()
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_api_config():
    """/api/: lists of the running configuration; GET /api/config (token) with
    its revision; POST /api/config/validate is check's verdict and changes
    nothing; PUT /api/config needs If-Match (428), refuses a stale revision
    (409) and a text check refuses (422, the file untouched), and otherwise
    writes the file (which then passes `rtugw check`) and applies it live: a
    device added from a template reads while a Modbus TCP connection opened
    before keeps answering on the same socket."""
    d = tempfile.mkdtemp(prefix="rtugw-api-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\n")
    tpl = f"[template meter]\ntags_file = {d}/meter.csv\n[device meter1]\nslave = 1\ntemplate = meter\n"
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=tpl, extra="write_token = s3cret-0123456789abcdefXY\n", dir=d)
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}

    def call(method, path, body=None, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
    st, devs = call("GET", "/api/devices")
    check(st == 200 and [(x["name"], x["template"], x["tags"]) for x in devs["devices"]] == [("meter1", "meter", 1)],
          f"GET /api/devices: {devs}")
    st, tps = call("GET", "/api/templates")
    check(st == 200 and tps["templates"][0]["name"] == "meter" and tps["templates"][0]["devices"] == 1,
          f"GET /api/templates: {tps}")
    check(call("GET", "/api/tags")[1]["tags"][0]["name"] == "meter1.voltage", "GET /api/tags: scoped names")
    check(call("GET", "/api/buses")[1]["buses"][0]["name"] == "line", "GET /api/buses")
    st, spec = call("GET", "/api/openapi.json")
    want = {"/api/buses", "/api/devices", "/api/templates", "/api/tags", "/api/maps", "/api/config", "/api/config/validate",
            "/api/devices/{name}", "/api/tags/{name}", "/api/templates/{name}", "/api/polls/{name}", "/api/buses/{name}",
            "/api/templates/{name}/csv", "/api/devices/{name}/csv", "/api/scan", "/api/scan/{name}"}
    check(st == 200 and spec["openapi"].startswith("3.") and set(spec["paths"]) == want and
          set(spec["paths"]["/api/config"]) == {"get", "put"}, f"GET /api/openapi.json describes every call: {sorted(spec.get('paths', {}))}")
    check(call("GET", "/api/config")[0] == 403, "GET /api/config without the token: 403 (the file holds it)")
    st, cur = call("GET", "/api/config", headers=auth)
    with open(g.cfg) as f:
        on_disk = f.read()
    check(st == 200 and cur["text"] == on_disk and len(cur["revision"]) == 16, "GET /api/config: the file and a revision")
    bad = on_disk + "[device meter2]\nslave = 2\ntemplate = nope\n"
    st, v = call("POST", "/api/config/validate", bad.encode(), auth)
    check(st == 422 and not v["valid"] and any("template = 'nope': no such [template nope]" in e for e in v["errors"]),
          f"validate: check's messages ({v})")
    good = on_disk + "[device meter2]\nslave = 2\ntemplate = meter\n"
    st, v = call("POST", "/api/config/validate", good.encode(), auth)
    check(st == 200 and v["valid"] and "2 devices" in v["summary"], f"validate: a good text ({v})")
    check(call("GET", "/api/config", headers=auth)[1]["revision"] == cur["revision"] and "meter2" not in str(tag_values(g)),
          "a dry run writes and applies nothing")
    check(call("POST", "/api/config/validate", b"[bus a]\nport = sim\x00\n", auth)[0] == 400, "a NUL byte: 400")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(mbap_read(sock, 1, 3) == [1003], "Modbus TCP answers before the change")
    check(call("PUT", "/api/config", good.encode(), auth)[0] == 428, "PUT without If-Match: 428")
    check(call("PUT", "/api/config", good.encode(), {**auth, "If-Match": "0123456789abcdef"})[0] == 409,
          "PUT with a stale revision: 409")
    st, r = call("PUT", "/api/config", bad.encode(), {**auth, "If-Match": cur["revision"]})
    with open(g.cfg) as f:
        check(st == 422 and f.read() == on_disk, "PUT of a text check refuses: 422, the file untouched")
    st, r = call("PUT", "/api/config", good.encode(), {**auth, "If-Match": f'"{cur["revision"]}"'})
    check(st == 200 and r["restart_needed"] == "" and r["revision"] != cur["revision"], f"PUT applied: {r}")
    with open(g.cfg) as f:
        check(f.read() == good, "the file on disk is the new text")
    p = subprocess.run([BIN, "check", "-c", g.cfg], capture_output=True, text=True)
    check(p.returncode == 0, f"and passes rtugw check: {p.stderr}")
    check(not [n for n in os.listdir(os.path.dirname(g.cfg)) if ".api-" in n], "no temporary file left")
    check(wait_for(lambda: tag_values(g).get("meter2.voltage", {}).get("value") == 2000, 5),
          "the added device's tag reads, live")
    check(mbap_read(sock, 2, 3) == [1003], "the Modbus TCP connection opened before answers on the same socket")
    check(call("PUT", "/api/config", good.encode(), {**auth, "If-Match": cur["revision"]})[0] == 409,
          "the old revision is stale now: 409")
    sock.close()
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_api_sections():
    """PUT /api/devices/NAME and /api/tags/NAME with a JSON object of keys:
    the section is added at the end or replaced in place, the file's other
    lines (comments too) untouched, and applied live; DELETE removes it;
    hostile bodies (not JSON, nested, a bad key, a value with a line break or a
    comment, a value check refuses) change nothing."""
    d = tempfile.mkdtemp(prefix="rtugw-api-sections-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\n")
    tpl = (f"# the meters of hall 2\n[template meter]\ntags_file = {d}/meter.csv\n"
           f"[device meter1]\nslave = 1\ntemplate = meter\n")
    g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", devices=tpl, extra="write_token = s3cret-0123456789abcdefXY\n", dir=d)
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}

    def rev():
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/config", headers=auth)
        return json.loads(urllib.request.urlopen(req, timeout=5).read())["revision"]

    def call(method, path, obj=None, raw=None):
        body = raw if raw is not None else json.dumps(obj).encode() if obj is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method=method,
                                     headers={**auth, "If-Match": rev()})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def text():
        with open(g.cfg) as f:
            return f.read()
    st, r = call("PUT", "/api/devices/meter2", {"slave": 2, "template": "meter"})
    check(st == 200 and r["restart_needed"] == "" and text().endswith("[device meter2]\nslave = 2\ntemplate = meter\n"),
          f"PUT a new device: appended ({st} {r})")
    check(wait_for(lambda: tag_values(g).get("meter2.voltage", {}).get("value") == 2000, 5), "and read, live")
    before = text()
    st, r = call("PUT", "/api/devices/meter2", {"slave": 2, "template": "meter", "max_gap": 4})
    after = text()
    check(st == 200 and after.count("[device meter2]") == 1 and "max_gap = 4" in after and
          after.startswith(before[:before.index("[device meter2]")]), f"PUT again: replaced in place ({st} {r})")
    check("# the meters of hall 2\n" in after, "the file's comments stay")
    st, r = call("PUT", "/api/tags/extra", {"device": "meter1", "table": "holding", "address": 5, "type": "uint16"})
    check(st == 200 and wait_for(lambda: tag_values(g).get("extra", {}).get("value") == 1005, 5),
          f"PUT /api/tags/extra: a [tag] section, read live ({st} {r})")
    st, r = call("DELETE", "/api/tags/extra")
    check(st == 200 and "[tag extra]" not in text() and wait_for(lambda: "extra" not in tag_values(g), 5),
          "DELETE /api/tags/extra: gone from the file and from /tags")
    check(call("DELETE", "/api/tags/extra")[0] == 404, "DELETE of a section not there: 404")
    same = text()
    hostile = [(None, b"{not json", 400), (None, b'{"slave": {"deep": 1}}', 400), ({"sla ve": 2}, None, 400),
               ({"description": "two\nlines"}, None, 400), ({"slave": "2 ; comment"}, None, 400),
               (None, b'{"slave": 2}\x00', 400), ({"slave": 999, "template": "meter"}, None, 422)]
    got = [call("PUT", "/api/devices/meter3", obj, raw)[0] for obj, raw, _ in hostile]
    check(got == [c for _, _, c in hostile] and text() == same, f"hostile bodies refused, the file untouched: {got}")
    st, r = call("DELETE", "/api/devices/meter2")
    check(st == 200 and r["restart_needed"] == "" and "[device meter2]" not in text(),
          f"DELETE of a device: written and applied live ({r})")
    p = subprocess.run([BIN, "check", "-c", g.cfg], capture_output=True, text=True)
    check(p.returncode == 0, f"the file after every change passes rtugw check: {p.stderr}")
    m = g.metrics()
    check(m.get("rtugw_http_api_changes_total") == 5 and m.get("rtugw_http_api_refused_total") == 8,
          f"counted: {m.get('rtugw_http_api_changes_total')} changes, {m.get('rtugw_http_api_refused_total')} refused")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_api_kill9_atomic():
    """kill -9 at a random moment while PUT /api/config checks and writes the
    file (a 4 MB text; the moments are drawn over the time one such PUT takes):
    the file is then exactly the old text or exactly the new one, never a mix.
    Seeded (RTUGW_SEED)."""
    filler = "".join(f"# filler line {i} {'x' * 60}\n" for i in range(56000))   # ~4 MB

    def put(g, text):
        auth = {"Authorization": "Bearer k-0123456789abcdefghijkl"}
        rev = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{g.http_port}/api/config", headers=auth), timeout=5).read())["revision"]
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/config", data=text.encode(),
                                     method="PUT", headers={**auth, "If-Match": rev})
        try:
            urllib.request.urlopen(req, timeout=20).read()
        except (OSError, HTTPException):
            pass   # killed under it
    g = Gateway(extra="write_token = k-0123456789abcdefghijkl\nmax_body_bytes = 8388608\n")
    with open(g.cfg) as f:
        base = f.read()
    t0 = time.monotonic()
    put(g, base + filler)
    took = time.monotonic() - t0
    g.stop()
    outcomes = {}
    for k in range(8):
        g = Gateway(extra="write_token = k-0123456789abcdefghijkl\nmax_body_bytes = 8388608\n")
        with open(g.cfg) as f:
            old = f.read()
        new = old + filler + f"# change {k}\n"
        t = threading.Thread(target=put, args=(g, new), daemon=True)
        t.start()
        time.sleep(rng.uniform(0, took))
        g.p.kill()
        g.p.wait()
        t.join(20)
        with open(g.cfg) as f:
            now = f.read()
        what = "old" if now == old else "new" if now == new else "mixed"
        outcomes[what] = outcomes.get(what, 0) + 1
    check("mixed" not in outcomes, f"after kill -9 during a PUT ({took:.2f} s each) the file is the old or the "
                                   f"new text: {outcomes}")

if __name__ == "__main__":
    run_tests("test_mqtt_tags", [test_values_and_writes, test_one_formatter, test_change_one_message_per_poll,
                                 test_write_bounds, test_http_and_mqtt_share_the_overlap_rule,
                                 test_template_15_devices, test_reload_tags_live, test_reload_polls_live,
                                 test_reload_devices_live, test_api_config, test_api_sections,
                                 test_api_kill9_atomic], cleanup=[test_mqtt.WORK])
