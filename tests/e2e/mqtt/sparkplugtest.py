#!/usr/bin/python3
"""What the Sparkplug B tests share (test_sparkplug.py, test_sparkplug_reload.py,
test_mqtt_brokers.py): an independent payload decoder (protoc --decode_raw's
text, parsed), commands encoded by hand from the Sparkplug 3.0 definition, a
paho host that records what the edge node publishes, the simulator and the
tag set the tests configure, and Eclipse Tahu's own decoder for a cross-check.
Not a test: make check runs the three scripts that import it."""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, procs, wait_for  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402

if not subprocess.run(["sh", "-c", "command -v protoc"], capture_output=True).stdout:
    print("FATAL: protoc not found: apt-get install protobuf-compiler (scripts/bootstrap)", flush=True)
    sys.exit(1)

WORK = tempfile.mkdtemp(prefix="rtugw-sparkplug-")
GROUP, EDGE = "plant", "edge1"

# ---- an independent decoder: protoc --decode_raw's text, parsed ------------------------------


_decoded = {}   # payload -> decode_raw's answer: the host's since() decodes its messages again on every call


def decode_raw(payload):
    """{field: [values]}: ints, ('f32'|'f64', bits), strings, nested dicts."""
    if payload not in _decoded:
        _decoded[payload] = _decode_raw(payload)
    return _decoded[payload]


def _decode_raw(payload):
    out = subprocess.run(["protoc", "--decode_raw"], input=payload, capture_output=True)
    if out.returncode != 0:
        print(f"protoc --decode_raw failed on {payload.hex()}: {out.stderr.decode(errors='replace').strip()}",
              flush=True)
        return None
    lines = out.stdout.decode("utf-8", "replace").splitlines()

    def parse(i):
        msg = {}
        while i < len(lines):
            line = lines[i].strip()
            i += 1
            if line == "}":
                return msg, i
            if line.endswith("{"):
                sub, i = parse(i)
                msg.setdefault(int(line[:-1].strip()), []).append(sub)
                continue
            num, _, val = line.partition(": ")
            if val.startswith('"'):
                v = val[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
            elif val.startswith("0x"):
                v = ("f32" if len(val) <= 10 else "f64", int(val, 16))
            else:
                v = int(val)
            msg.setdefault(int(num), []).append(v)
        return msg, i
    return parse(0)[0]


def one(msg, field, default=None):
    v = msg.get(field)
    return v[0] if v else default


def f32(v):
    return struct.unpack("<f", struct.pack("<I", v[1]))[0]


def f64(v):
    return struct.unpack("<d", struct.pack("<Q", v[1]))[0]


# ---- an independent encoder for commands ----------------------------------------------------


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def field(num, wire, body):
    if wire == 0:
        return varint(num << 3) + varint(body)
    if wire == 2:
        return varint(num << 3 | 2) + varint(len(body)) + body
    if wire == 5:
        return varint(num << 3 | 5) + body
    return varint(num << 3 | 1) + body


def metric(name=None, alias=None, datatype=None, int_value=None, long_value=None, float_value=None,
           boolean=None, string=None):
    m = b""
    if name is not None:
        m += field(1, 2, name.encode())
    if alias is not None:
        m += field(2, 0, alias)
    if datatype is not None:
        m += field(4, 0, datatype)
    if int_value is not None:
        m += field(10, 0, int_value)
    if long_value is not None:
        m += field(11, 0, long_value)
    if float_value is not None:
        m += field(12, 5, struct.pack("<f", float_value))
    if boolean is not None:
        m += field(14, 0, 1 if boolean else 0)
    if string is not None:
        m += field(15, 2, string.encode())
    return field(2, 2, m)


def command(*metrics):
    return field(1, 0, int(time.time() * 1000)) + b"".join(metrics)


# ---- the host side ------------------------------------------------------------------------


class Host:
    """paho on spBv1.0/#, QoS 1, persistent session: every message, raw, decoded."""

    def __init__(self, port, client_id):
        self.msgs, self.lock = [], threading.Lock()
        self.connected = threading.Event()
        self.c = mqtt.Client(client_id=client_id, clean_session=False)
        self.c.reconnect_delay_set(min_delay=0.1, max_delay=0.5)

        def on_connect(c, userdata, flags, rc):
            c.subscribe("spBv1.0/#", qos=1)
            self.connected.set()

        def on_message(c, userdata, m):
            with self.lock:
                self.msgs.append((m.topic, bytes(m.payload), m.retain))

        self.c.on_connect, self.c.on_message = on_connect, on_message
        self.c.connect("127.0.0.1", port, keepalive=10)
        self.c.loop_start()
        self.connected.wait(5)
        time.sleep(0.2)

    def count(self):
        with self.lock:
            return len(self.msgs)

    def since(self, start=0, verb=None, device=None):
        """(verb, device, decoded) of messages from index start."""
        with self.lock:
            msgs = self.msgs[start:]
        out = []
        for topic, payload, _ in msgs:
            parts = topic.split("/")
            if len(parts) < 4 or parts[1] != GROUP or parts[3] != EDGE:
                continue
            v, d = parts[2], parts[4] if len(parts) > 4 else None
            if (verb is None or v == verb) and (device is None or d == device):
                # the host's own commands are not decoded (one is garbage on purpose)
                out.append((v, d, decode_raw(payload) if v not in ("NCMD", "DCMD") else {}, len(payload), topic))
        return out

    def publish(self, topic, payload, retain=False):
        self.c.publish(topic, payload, qos=1, retain=retain).wait_for_publish()

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def sim(link, extra=()):
    """rtugw sim on a pty linked at link, slaves 1 and 2, words seeded, input registers live."""
    load = os.path.join(WORK, "load.txt")
    with open(load, "w") as f:
        f.write("1 holding 10 65535\n1 holding 11 1234\n1 holding 12 65534 31072\n1 holding 14 16320 0\n"
                "1 holding 16 65535 65535 65535 65534\n1 coils 0 1\n1 holding 20 7\n1 holding 21 65436\n"
                "1 holding 30 16706 17220\n2 holding 0 42\n")
    p = subprocess.Popen([BIN, "sim", "--link", link, "--slaves", "1,2", "--load", load, "--live",
                          "--live-period-ms", "20", *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    procs.append(p)
    if not p.stdout.readline().startswith("/dev/"):
        print(f"FATAL: rtugw sim did not start (exit {p.poll()})", flush=True)
        sys.exit(1)
    wait_for(lambda: os.path.exists(link), 5)
    return p


TAGS = [  # name, table, address, type, extra keys
    ("t_i16", "holding", 10, "int16", "writable = true\n"),
    ("t_u16", "holding", 11, "uint16", ""),
    ("t_i32", "holding", 12, "int32", "writable = true\n"),
    ("t_f32", "holding", 14, "float32", "writable = true\n"),
    ("t_u64", "holding", 16, "uint64", ""),
    ("t_coil", "coil", 0, "bool", "writable = true\n"),
    ("t_ro", "holding", 20, "uint16", ""),
    ("t_scaled", "holding", 21, "int16", "scale = 0.1\n"),
    ("t_live", "input", 0, "uint16", "interval_ms = 20\n"),
    ("t_bad", "holding", 5000, "uint16", ""),   # past the simulator's registers: exception 02
    ("t_str", "holding", 30, "string:2", "writable = true\n"),
    ("t_fix", "holding", 32, "ufixed32:9", "writable = true\n"),
]
DATATYPE = {"int16": 2, "uint16": 6, "int32": 3, "float32": 9, "uint64": 8, "bool": 11, "string:2": 12,
            "ufixed32:9": 10}


def devices_text():
    out = "[device d1]\nslave = 1\ndead_after = 1\n[device d2]\nslave = 2\ndead_after = 1\ndead_backoff_ms = 500\n"
    for name, table, address, typ, extra in TAGS:
        out += (f"[tag {name}]\ndevice = d1\ntable = {table}\naddress = {address}\ntype = {typ}\n"
                f"{extra}" + ("" if "interval_ms" in extra else "interval_ms = 100\n"))
    out += "[tag s_b]\ndevice = d2\ntable = holding\naddress = 0\ntype = uint16\ninterval_ms = 100\n"
    return out


def sp_section(port, extra=""):
    return (f"[mqtt]\nhost = 127.0.0.1\nport = {port}\ngateway = {EDGE}\nclient_id = sp-{EDGE}\n"
            f"format = sparkplug\ngroup_id = {GROUP}\nkeepalive_s = 5\n{extra}")


def births_of(host, start, timeout=10, devices=("d1", "d2")):
    """Waits for an NBIRTH from start and a DBIRTH of each device after it."""
    def got():
        msgs = host.since(start)
        nb = [i for i, m in enumerate(msgs) if m[0] == "NBIRTH"]
        if not nb:
            return None
        after = msgs[nb[-1]:]
        if all(any(m[0] == "DBIRTH" and m[1] == d for m in after) for d in devices):
            return after
        return None
    wait_for(lambda: got() is not None, timeout)
    return got()


def metrics_of(msg):
    return msg.get(2, [])


def value_of(m, datatype):
    if one(m, 7) == 1:
        return None
    if datatype in (2, 3, 6, 7):
        return one(m, 10)
    if datatype in (4, 8):
        return one(m, 11)
    if datatype == 9:
        return f32(one(m, 12))
    if datatype == 10:
        return f64(one(m, 13))
    if datatype == 11:
        return one(m, 14)
    return one(m, 15)


def fold(msgs, device):
    """The latest value of each metric name of device: DBIRTH names it, DDATA by alias."""
    names, types, state = {}, {}, {}
    for verb, d, p, _, _ in msgs:
        if d != device or verb not in ("DBIRTH", "DDATA"):
            continue
        for m in metrics_of(p):
            if verb == "DBIRTH":
                names[one(m, 2)] = one(m, 1)
                types[one(m, 2)] = one(m, 4)
            name = names.get(one(m, 2))
            if name is not None:
                state[name] = value_of(m, types[one(m, 2)])
    return state, names


def seq_ok(msgs):
    """seq +1 per message (mod 256) from each NBIRTH (seq 0); NDEATH has none."""
    last, bad = None, []
    for verb, d, p, _, topic in msgs:
        if verb in ("NDEATH", "NCMD", "DCMD"):   # NDEATH has no seq; commands are the host's
            continue
        if p is None:
            bad.append((topic, "protoc --decode_raw cannot decode it"))
            continue
        s = one(p, 3)
        if verb == "NBIRTH":
            if s != 0:
                bad.append((verb, s))
        elif last is not None and s != (last + 1) % 256:
            bad.append((verb, d, last, s))
        last = s
    return bad


def metric_count(g, name):
    return g.metrics().get(f"rtugw_mqtt_{name}_total", -1)


# ---- the session --------------------------------------------------------------------------


# ---- Eclipse Tahu's own decoder (npm sparkplug-payload) ------------------------------------
NPM_CACHE = os.environ.get("RTUGW_NPM_CACHE",
                           os.path.join(os.path.expanduser("~"), ".cache", "rtugw-tests", "npm"))
# A DDATA metric carries its alias and value, not its datatype (the DBIRTH
# said it once), and Tahu's decodePayload gives null for a metric without
# one; so, payload by payload in order, the datatype from the DBIRTH is put
# back with Tahu's own protobuf code, and then Tahu's decodePayload reads the
# value by its own rules (getValue: Int8/16/32 through new Int32Array). One
# node process for every payload (stdin: a JSON list of base64 payloads).
TAHU_JS = ("const mod=process.argv[1],types={},names={};"
           "const sp=require(mod).get('spBv1.0');"
           "const P=require(mod+'/lib/sparkplugPayloadProto').org.eclipse.tahu.protobuf.Payload;"
           "const c=[];process.stdin.on('data',d=>c.push(d));process.stdin.on('end',()=>{const out={};"
           "for(const b of JSON.parse(Buffer.concat(c).toString())){"
           "const msg=P.decode(new Uint8Array(Buffer.from(b,'base64')));"
           "for(const m of msg.metrics){const a=m.alias==null?null:String(m.alias);"
           "if(m.name&&a!==null){names[a]=m.name;types[a]=m.datatype;}"
           "else if(!m.datatype&&a!==null&&types[a])m.datatype=types[a];}"
           "for(const m of sp.decodePayload(P.encode(msg).finish()).metrics){"
           "const n=m.name!=null?m.name:names[String(m.alias)];"
           "if(m.value!=null)out[n]=typeof m.value==='object'?String(m.value):m.value;}}"
           "console.log(JSON.stringify(out));});")


def tahu_module():
    """sparkplug-payload 1.0.3 (Eclipse Tahu's JS payload codec), installed once
    into a cache folder by npm; a failed check, not a skip, when npm cannot."""
    mod = os.path.join(NPM_CACHE, "node_modules", "sparkplug-payload")
    if not os.path.isdir(mod):
        p = subprocess.run(["npm", "install", "--prefix", NPM_CACHE, "--no-audit", "--no-fund",
                            "sparkplug-payload@1.0.3"], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0 and os.path.isdir(mod),
              f"npm installs sparkplug-payload into {NPM_CACHE} (RTUGW_NPM_CACHE): {p.stderr[-400:]}")
    return mod if os.path.isdir(mod) else None


def tahu_reads(host):
    """Tahu's decoder reads the d1 DBIRTH's names and aliases, then every d1
    value it can: Int16 -1 must come out -1 (the 16-bit form would be 65535),
    Int32 -100000 as -100000."""
    mod = tahu_module()
    if not mod:
        return
    with host.lock:
        raw = [(t, p) for t, p, _ in host.msgs if t.endswith(f"/{EDGE}/d1") and
               t.split("/")[2] in ("DBIRTH", "DDATA")]
    p = subprocess.run(["node", "-e", TAHU_JS, mod], capture_output=True, timeout=60,
                       input=json.dumps([base64.b64encode(payload).decode() for _, payload in raw]).encode())
    if p.returncode != 0:
        check(False, f"Tahu's decoder refused a payload: {p.stderr.decode()[-300:]}")
        return
    values = json.loads(p.stdout)
    got = {k: values.get(k) for k in ("t_i16", "t_i32", "t_u16")}
    check(got == {"t_i16": -1, "t_i32": -100000, "t_u16": 1234},
          f"Eclipse Tahu's decoder (sparkplug-payload) reads Int16 -1 as -1, Int32 -100000, UInt16 1234: {got}")
