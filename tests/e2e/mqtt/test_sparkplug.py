#!/usr/bin/python3
"""[mqtt] format = sparkplug end to end: rtugw as a Sparkplug B edge node on
Debian's mosquitto (started here), the simulator on a pseudo-terminal of its
own, paho as the host side. Every payload is decoded by `protoc --decode_raw`,
which knows no schema: field numbers and values are compared with the
Sparkplug 3.0 payload definition (Payload: timestamp 1, metrics 2, seq 3;
Metric: name 1, alias 2, timestamp 3, datatype 4, is_historical 5, is_null 7,
properties 9, int_value 10, long_value 11, float_value 12, double_value 13,
boolean_value 14, string_value 15), not with the project's .proto. Commands
(NCMD, DCMD) are encoded here by hand from the same definition.

  - NBIRTH: seq 0, bdSeq (Int64) and Node Control/Rebirth; a DBIRTH per
    device with every metric's name, alias, datatype and value (Int16 -1
    sign-extended, 4294967295, which Eclipse Tahu's own decoder, npm
    sparkplug-payload installed into a cache folder, reads as -1; Int32 as
    its 32-bit two's complement, UInt64 to the last digit,
    Float's bits, Boolean, a scaled tag as Double); DDATA by alias only;
    seq +1 per message, wrapping past 255;
  - DCMD writes (by name and by alias) reach the simulator's registers;
    read-only and unknown metrics and a broken payload are ignored, counted;
    138 hostile commands later the daemon is up and publishing;
  - NCMD rebirth: NBIRTH (seq 0, same bdSeq) and the DBIRTHs again;
  - the port down: DDEATH; a silent slave gets no DBIRTH; back: DBIRTH;
    exceptions from a slave: its tags bad (Quality 0) and good (192, once);
  - a broker restart: a new session, bdSeq + 1, births, then what changed
    meanwhile as DDATA flagged is_historical;
  - kill -9: the will NDEATH carries the session's bdSeq; with spool_dir the
    restarted daemon goes on with bdSeq + 1; SIGTERM publishes NDEATH;
  - primary host: nothing before STATE online, births then; offline: silent,
    an older STATE is ignored, malformed ones are counted; online again:
    births and the kept data (historical);
  - figures: bytes per published value, Sparkplug against json, same tags."""
import base64
import json
import os
import struct
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, rss_growth_bound_kib, status_kib, procs, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402  (its brokers; its main() does not run on import)
from test_mqtt import Broker  # noqa: E402

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


def test_session():
    link = os.path.join(WORK, "plc")
    s = sim(link)
    b = Broker("sp", extra="queue_qos0_messages true\n")
    host = Host(b.port, "host1")
    spool = os.path.join(WORK, "spool")
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices_text(), timeout_ms=100,
                extra=sp_section(b.port, f"spool_dir = {spool}\n"))
    msgs = births_of(host, 0)
    check(msgs is not None, "NBIRTH, then a DBIRTH of d1 and of d2")
    nb = msgs[0][2]
    bd = {one(m, 1): m for m in metrics_of(nb)}
    check(one(nb, 3) == 0 and one(nb, 1) and "bdSeq" in bd and one(bd["bdSeq"], 4) == 4 and
          one(bd["bdSeq"], 11) is not None and "Node Control/Rebirth" in bd and
          one(bd["Node Control/Rebirth"], 4) == 11 and one(bd["Node Control/Rebirth"], 14) == 0,
          2 not in bd["Node Control/Rebirth"],
          f"NBIRTH: seq 0, timestamp, bdSeq Int64, Node Control/Rebirth Boolean false without an alias ({nb})")
    bdseq0 = one(bd["bdSeq"], 11)
    db = next(p for v, d, p, _, _ in msgs if v == "DBIRTH" and d == "d1")
    by_name = {one(m, 1): m for m in metrics_of(db)}
    aliases = [one(m, 2) for m in metrics_of(db)]
    check(sorted(by_name) == sorted(t[0] for t in TAGS) and len(set(aliases)) == len(aliases) and
          all(a is not None for a in aliases) and all(one(m, 3) for m in metrics_of(db)),
          f"DBIRTH d1: every tag by name, each with its own alias and a timestamp ({sorted(by_name)}, {aliases})")
    want_dt = {n: (10 if "scale" in e else DATATYPE[t]) for n, _, _, t, e in TAGS}
    got_dt = {n: one(m, 4) for n, m in by_name.items()}
    check(got_dt == want_dt, f"DBIRTH d1: datatypes from the tag types ({got_dt})")

    # every value arrives (the DBIRTH may hold some as is_null "not read yet"; DDATA follows)
    want = {"t_i16": 4294967295, "t_u16": 1234, "t_i32": (-100000) & 0xFFFFFFFF, "t_f32": 1.5,
            "t_u64": 2**64 - 2, "t_coil": 1, "t_ro": 7, "t_scaled": -10.0, "t_str": "ABCD"}

    def state():
        return fold(host.since(0), "d1")[0]
    wait_for(lambda: all(state().get(k) == v for k, v in want.items()), 5)
    st = state()
    check(all(st.get(k) == v for k, v in want.items()),
          f"values: Int16 -1 = 4294967295 (sign-extended), Int32 two's complement, UInt64 exact, Float, Boolean, scaled Double "
          f"({ {k: st.get(k) for k in want} })")
    tahu_reads(host)
    # a tag with no value (exception 02): is_null, and why in properties
    bad_alias = next(one(m, 2) for m in metrics_of(db) if one(m, 1) == "t_bad")

    def bad_metric():
        ms = [m for v, _, p, _, _ in host.since(0, None, "d1") if v in ("DBIRTH", "DDATA")
              for m in metrics_of(p) if one(m, 2) == bad_alias]
        return ms[-1] if ms else {}

    def reason(m):
        props = one(m, 9, {})
        return dict(zip(props.get(1, []), props.get(2, [])))
    wait_for(lambda: str(one(reason(bad_metric()).get("Reason", {}), 8, "")).startswith("exception"), 5)
    m = bad_metric()
    pv = reason(m)
    check(one(m, 7) == 1 and not any(f in m for f in range(10, 17)) and
          one(pv.get("Quality", {}), 1) == 3 and one(pv.get("Quality", {}), 3) == 0 and
          one(pv.get("Reason", {}), 1) == 12 and str(one(pv.get("Reason", {}), 8, "")).startswith("exception 02"),
          f"a tag with no value: is_null, no value, properties Quality (Int32 0) and Reason ({m})")
    dd = host.since(0, "DDATA", "d1")
    check(dd and all(1 not in m and 2 in m and 3 in m for _, _, p, _, _ in dd for m in metrics_of(p)),
          f"DDATA: metrics by alias only (no name), each with a timestamp ({len(dd)} messages)")

    # seq wraps: the live input register changes every 20 ms
    wait_for(lambda: len([1 for m in host.since(0) if m[0] != "NDEATH"]) > 300, 20)
    all_msgs = host.since(0)
    seqs = [one(p, 3) for v, _, p, _, _ in all_msgs if v not in ("NDEATH", "NCMD", "DCMD")]
    bad = seq_ok(all_msgs)
    check(len(seqs) > 300 and not bad and 255 in seqs and seqs.count(0) >= 2,
          f"seq +1 per message across {len(seqs)} messages, 255 then 0 (wrapped) ({bad[:3]})")

    # DCMD: by name and by alias; read-only and unknown ignored; a broken payload counted
    alias = {one(m, 1): one(m, 2) for m in metrics_of(db)}
    errors0, malformed0 = metric_count(g, "write_errors"), metric_count(g, "write_malformed")
    start = host.count()
    host.publish(f"spBv1.0/{GROUP}/DCMD/{EDGE}/d1", command(
        metric(name="t_i16", datatype=2, int_value=65534),
        metric(alias=alias["t_i32"], int_value=(-5) & 0xFFFFFFFF),
        metric(name="t_f32", datatype=9, float_value=2.25),
        metric(name="t_coil", datatype=11, boolean=False),
        metric(name="t_str", datatype=12, string="wxyz"),
        metric(name="t_fix", datatype=10, float_value=0.1),   # 0.100000001490116 as a float32
        metric(name="t_ro", datatype=6, int_value=9),
        metric(name="nosuch", int_value=1)))
    host.publish(f"spBv1.0/{GROUP}/DCMD/{EDGE}/d1", b"\xff\xff\xff")
    c = g.client()

    def regs():
        r = c.read_holding_registers(10, 24, slave=1).registers
        return r, c.read_coils(0, 1, slave=1).bits[0]
    wait_for(lambda: regs()[0][0] == 65534 and not regs()[1] and regs()[0][20] == 0x7778, 5)
    r, coil = regs()
    check(r[0] == 65534 and (r[2] << 16 | r[3]) == (-5) & 0xFFFFFFFF and
          struct.unpack(">f", struct.pack(">HH", r[4], r[5]))[0] == 2.25 and coil is False and r[10] == 7 and
          struct.pack(">HH", r[20], r[21]) == b"wxyz",
          f"DCMD: Int16 -2, Int32 -5 by alias, Float 2.25, a coil and a String reach the simulator; the read-only tag "
          f"stays 7 ({r}, coil {coil})")
    # A Float's text is the one number formatter's, in float32 digits: 0.1, as every output
    # prints it, so a 9-decimal fixed-point tag gets 0.100000000 (%.9g said 0.100000001).
    fixed = lambda: regs()[0][22] << 16 | regs()[0][23]
    wait_for(lambda: fixed() in (100000000, 100000001), 3)
    check(fixed() == 100000000, f"DCMD: a Float 0.1 reaches a ufixed32:9 tag as 0.100000000 ({fixed()})")
    wait_for(lambda: metric_count(g, "write_malformed") > malformed0, 3)
    check(metric_count(g, "write_errors") >= errors0 + 3 and metric_count(g, "write_malformed") == malformed0 + 1,
          f"read-only, unknown and an undecodable DCMD ignored and counted "
          f"(errors {errors0} -> {metric_count(g, 'write_errors')}, malformed {malformed0} -> "
          f"{metric_count(g, 'write_malformed')})")
    wait_for(lambda: fold(host.since(start), "d1")[0].get("t_i16") == 4294967294 or
             any(one(m, 2) == alias["t_i16"] and one(m, 10) == 4294967294
                 for _, _, p, _, _ in host.since(start, "DDATA", "d1") for m in metrics_of(p)), 3)
    check(any(one(m, 2) == alias["t_i16"] and one(m, 10) == 4294967294
              for _, _, p, _, _ in host.since(start, "DDATA", "d1") for m in metrics_of(p)),
          "the written value shows in the next DDATA (Int16 -2 sign-extended)")
    c.close()

    # hostile commands: random bytes, truncated and mutated valid payloads, deep nesting, huge
    # lengths, over max_write_bytes, wrong value kinds; the daemon takes them all and goes on
    import random
    rng = random.Random(17)
    good = command(metric(name="t_i16", datatype=2, int_value=65534), metric(alias=alias["t_f32"], float_value=1.0))
    nested = field(2, 2, field(9, 2, field(2, 2, field(9, 2, b"\x12\x00" * 3) * 2)))
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(60)]
    payloads += [good[:k] for k in range(1, len(good))]
    payloads += [bytes(x ^ (1 << rng.randrange(8)) if rng.random() < 0.1 else x for x in good) for _ in range(40)]
    payloads += [nested, field(2, 2, b"\x0a\xff\xff\xff\xff\x0f"), b"\x12" + varint(2**40), b"\x00" * 20000,
                 command(metric(name="t_coil", string="true")), command(metric(name="t_i16", boolean=True)),
                 command(metric(name="t_i16", string="1\x002")),
                 command(metric(name="t_i16", int_value=2**32 - 1)), command(metric(alias=2**63))]
    for i, pl in enumerate(payloads):
        topic = f"spBv1.0/{GROUP}/{'NCMD' if i % 3 == 0 else 'DCMD'}/{EDGE}" + ("" if i % 3 == 0 else "/d1")
        host.c.publish(topic, pl, qos=0)
    host.publish(f"spBv1.0/{GROUP}/DCMD/{EDGE}/nosuch", good)
    time.sleep(1.0)
    start = host.count()
    wait_for(lambda: host.since(start, "DDATA", "d1"), 3)
    check(g.p.poll() is None and host.since(start, "DDATA", "d1") and metric_count(g, "write_malformed") > malformed0 + 1,
          f"{len(payloads)} hostile commands: the daemon is up and publishing, malformed ones counted "
          f"({metric_count(g, 'write_malformed'):.0f})")

    # NCMD rebirth
    start = host.count()
    host.publish(f"spBv1.0/{GROUP}/NCMD/{EDGE}", command(metric(name="Node Control/Rebirth", datatype=11,
                                                                boolean=True)))
    re = births_of(host, start, 5)
    check(re is not None and one(re[0][2], 3) == 0 and
          {one(m, 1): one(m, 11) for m in metrics_of(re[0][2])}.get("bdSeq") == bdseq0,
          "NCMD Node Control/Rebirth: NBIRTH (seq 0, the same bdSeq) and both DBIRTHs again")

    # the port goes down, a slave stays silent, then returns
    start = host.count()
    s.kill()
    s.wait()
    wait_for(lambda: len(host.since(start, "DDEATH")) >= 2, 5)
    dd = host.since(start, "DDEATH")
    check({d for _, d, _, _, _ in dd} == {"d1", "d2"} and all(2 not in p and one(p, 3) is not None for _, _, p, _, _ in dd),
          f"simulator gone (port down): DDEATH of d1 and d2, no metrics, with seq ({[d for _, d, _, _, _ in dd]})")
    start = host.count()
    s = sim(link, ["--silent", "2", "--exception-rate", "0.3"])
    wait_for(lambda: host.since(start, "DBIRTH", "d1"), 10)
    time.sleep(1.5)
    check(host.since(start, "DBIRTH", "d1") and not host.since(start, "DBIRTH", "d2"),
          "back with slave 2 silent: DBIRTH of d1, none of d2")

    # slave 1 answers 30% of its reads with exception 04: its tags turn bad and good again
    def quality_flips():
        seen = {}
        for _, _, p, _, _ in host.since(start, "DDATA", "d1"):
            for m in metrics_of(p):
                props = one(m, 9, {})
                q = dict(zip(props.get(1, []), props.get(2, []))).get("Quality")
                if one(m, 7) == 1 and q and one(q, 3) == 0:
                    seen[one(m, 2)] = "bad"
                elif seen.get(one(m, 2)) == "bad" and one(m, 7) is None and q and one(q, 3) == 192:
                    return m
        return None
    wait_for(lambda: quality_flips() is not None, 5)
    m = quality_flips()
    check(m is not None and any(f in m for f in range(10, 17)),
          f"a tag bad (is_null, Quality 0) then good again: its value with Quality 192 ({m})")
    last, repeats = {}, []   # alias -> the Quality its previous good value carried
    for _, _, p, _, _ in host.since(start, "DDATA", "d1"):
        for x in metrics_of(p):
            props = one(x, 9, {})
            q = dict(zip(props.get(1, []), props.get(2, []))).get("Quality")
            if one(x, 7) == 1:
                last.pop(one(x, 2), None)
                continue
            if last.get(one(x, 2)) == 192 and q is not None and one(q, 3) == 192:
                repeats.append(x)
            last[one(x, 2)] = one(q, 3) if q else None
    check(not repeats, f"Quality 192 is said once: the good values after it carry no Quality ({repeats[:2]})")
    start = host.count()
    s.kill()
    s.wait()
    s = sim(link)
    wait_for(lambda: host.since(start, "DBIRTH", "d2"), 10)
    db2 = host.since(start, "DBIRTH", "d2")
    check(db2 and any(one(m, 1) == "s_b" and one(m, 10) == 42 for m in metrics_of(db2[-1][2])),
          "slave 2 answers again: DBIRTH of d2 with its value")
    bad = seq_ok(host.since(0))
    check(not bad, f"seq still +1 per message through deaths and births ({bad[:3]})")

    # broker restart: a new session, bdSeq + 1, births, then the kept changes as historical DDATA
    start = host.count()
    b.stop()
    time.sleep(1.0)   # t_live changes meanwhile
    b.start()
    msgs = births_of(host, start, 15)
    check(msgs is not None, "broker restarted: NBIRTH and DBIRTHs again")
    if msgs:
        bd1 = {one(m, 1): one(m, 11) for m in metrics_of(msgs[0][2])}.get("bdSeq")
        check(bd1 == (bdseq0 + 1) % 256, f"the new session's bdSeq is one more ({bdseq0} -> {bd1})")
        wait_for(lambda: any(one(m, 5) == 1 for _, _, p, _, _ in host.since(start, "DDATA") for m in metrics_of(p)), 3)
        hist = [p for _, _, p, _, _ in host.since(start, "DDATA") if any(one(m, 5) == 1 for m in metrics_of(p))]
        first_hist = next(i for i, m in enumerate(host.since(start)) if m[0] == "DDATA" and
                          any(one(x, 5) == 1 for x in metrics_of(m[2]))) if hist else -1
        last_birth = max(i for i, m in enumerate(host.since(start)) if m[0] in ("NBIRTH", "DBIRTH"))
        check(hist and first_hist > last_birth,
              f"what changed while the broker was away: {len(hist)} DDATA flagged is_historical, after the births")
        bdseq0 = bd1

    # kill -9: the will; restarted with the spool: bdSeq + 1
    start = host.count()
    g.p.kill()
    g.p.wait()
    wait_for(lambda: host.since(start, "NDEATH"), 15)
    nd = host.since(start, "NDEATH")
    check(nd and [one(m, 1) for m in metrics_of(nd[0][2])] == ["bdSeq"] and
          one(metrics_of(nd[0][2])[0], 11) == bdseq0 and one(metrics_of(nd[0][2])[0], 4) == 4 and 3 not in nd[0][2],
          f"kill -9: the will NDEATH carries only bdSeq = {bdseq0}, no seq ({nd[:1]})")
    start = host.count()
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices_text(), timeout_ms=100,
                extra=sp_section(b.port, f"spool_dir = {spool}\n"))
    msgs = births_of(host, start)
    bd2 = {one(m, 1): one(m, 11) for m in metrics_of(msgs[0][2])}.get("bdSeq") if msgs else None
    check(bd2 == (bdseq0 + 1) % 256, f"restarted with spool_dir: bdSeq goes on ({bdseq0} -> {bd2})")
    start = host.count()
    rc, _ = g.stop()
    wait_for(lambda: host.since(start, "NDEATH"), 5)
    nd = host.since(start, "NDEATH")
    check(rc == 0 and nd and one(metrics_of(nd[0][2])[0], 11) == bd2,
          f"SIGTERM: exit 0 and NDEATH with bdSeq {bd2} (the broker drops the will on DISCONNECT)")
    host.close()
    s.kill()
    b.stop()


# ---- primary host ---------------------------------------------------------------------------


def test_primary_host():
    link = os.path.join(WORK, "plc2")
    s = sim(link)
    b = Broker("sp-state", extra="queue_qos0_messages true\n")
    host = Host(b.port, "host2")
    state_topic = "spBv1.0/STATE/scada"
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices_text(), timeout_ms=100,
                extra=sp_section(b.port, "primary_host_id = scada\n"))
    time.sleep(1.5)
    check(not host.since(0), f"no STATE yet: the node publishes nothing ({len(host.since(0))})")
    t1 = int(time.time() * 1000)
    host.publish(state_topic, f'{{"online": true, "timestamp": {t1}}}'.encode(), retain=True)
    check(births_of(host, 0, 5) is not None, "STATE online: NBIRTH and the DBIRTHs")
    wait_for(lambda: host.since(0, "DDATA"), 3)
    host.publish(state_topic, f'{{"online": false, "timestamp": {t1}}}'.encode(), retain=True)
    time.sleep(0.3)
    start = host.count()
    malformed0 = metric_count(g, "write_malformed")
    host.publish(state_topic, b'{"online": "yes"}')
    host.publish(state_topic, f'{{"online": true, "timestamp": {t1 - 1000}}}'.encode())
    time.sleep(1.0)
    check(not host.since(start), f"STATE offline: nothing published; an older online STATE is ignored "
                                 f"({[m[0] for m in host.since(start)][:5]})")
    check(metric_count(g, "write_malformed") == malformed0 + 1, "a malformed STATE is counted")
    start = host.count()
    host.publish(state_topic, f'{{"online": true, "timestamp": {int(time.time() * 1000)}}}'.encode(), retain=True)
    msgs = births_of(host, start, 5)
    check(msgs is not None and one(msgs[0][2], 3) == 0, "STATE online again: births (seq 0)")
    wait_for(lambda: any(one(m, 5) == 1 for _, _, p, _, _ in host.since(start, "DDATA") for m in metrics_of(p)), 3)
    hist = [p for _, _, p, _, _ in host.since(start, "DDATA") if any(one(m, 5) == 1 for m in metrics_of(p))]
    check(len(hist) >= 5, f"the data kept while the host was away follows, is_historical ({len(hist)} messages)")
    g.stop()
    host.close()
    s.kill()
    b.stop()


# ---- commands at the edge of their bounds ----------------------------------------------------------



def test_command_bounds():
    """Names are compared with all their bytes; a command is refused by its
    metric count before it is unpacked; rebirths on demand are logged once
    per 10 s."""
    link = os.path.join(WORK, "plc4")
    s = sim(link)
    b = Broker("sp-bounds")
    host = Host(b.port, "host4")
    g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices_text(), timeout_ms=100,
                extra=sp_section(b.port, "max_write_bytes = 1048576\n"))
    check(births_of(host, 0) is not None, "births")
    c = g.client()
    dcmd = f"spBv1.0/{GROUP}/DCMD/{EDGE}/d1"
    ncmd = f"spBv1.0/{GROUP}/NCMD/{EDGE}"

    # a NUL in a name: not the tag whose name is the part before it
    errors0 = metric_count(g, "write_errors")
    host.publish(dcmd, command(metric(name="t_i16\0evil", datatype=2, int_value=4321)))
    host.publish(dcmd, command(metric(name="t_i32", datatype=3, int_value=77)))   # behind it: it was read
    wait_for(lambda: c.read_holding_registers(12, 2, slave=1).registers == [0, 77], 5)
    r = c.read_holding_registers(10, 4, slave=1).registers
    check(r[2:] == [0, 77] and r[0] != 4321 and metric_count(g, "write_errors") == errors0 + 1,
          f"DCMD metric 't_i16\\0evil': ignored and counted, t_i16 not written ({r}, errors "
          f"{errors0} -> {metric_count(g, 'write_errors')})")
    start = host.count()
    host.publish(ncmd, command(metric(name="Node Control/Rebirth\0x", datatype=11, boolean=True)))
    time.sleep(1.0)
    check(not host.since(start, "NBIRTH"), "NCMD 'Node Control/Rebirth\\0x': no rebirth")

    # rebirths on demand: one info line, not two per command
    start = host.count()
    for _ in range(20):
        host.publish(ncmd, command(metric(name="Node Control/Rebirth", datatype=11, boolean=True)))
    wait_for(lambda: len(host.since(start, "NBIRTH")) >= 20, 10)
    lines = [x for x in g.log_text().splitlines() if "rebirth" in x.lower()]
    check(len(host.since(start, "NBIRTH")) == 20 and 1 <= len(lines) <= 2,
          f"20 rebirths requested: 20 NBIRTHs, {len(lines)} info lines about them ({lines[:3]})")

    # 10 commands of max_write_bytes of empty metrics: refused by their count, unpacked never
    malformed0, peak0 = metric_count(g, "write_malformed"), status_kib(g.p.pid, "VmHWM")
    big = field(2, 2, b"") * (1048576 // 2)
    for _ in range(10):
        host.publish(dcmd, big)
    wait_for(lambda: metric_count(g, "write_malformed") >= malformed0 + 10, 20)
    grew = status_kib(g.p.pid, "VmHWM") - peak0
    check(metric_count(g, "write_malformed") == malformed0 + 10 and grew < rss_growth_bound_kib(),
          f"10 DCMDs of 1 MiB of empty metrics: refused (more than max_write_items metrics) and counted "
          f"({metric_count(g, 'write_malformed') - malformed0:.0f}), peak RSS +{grew} KiB (< {rss_growth_bound_kib()} KiB)")
    check(c.read_holding_registers(12, 2, slave=1).registers == [0, 77] and g.p.poll() is None,
          "the gateway answers Modbus TCP after them")
    c.close()
    g.stop()
    host.close()
    s.kill()
    b.stop()


# ---- figures: bytes per value -------------------------------------------------------------------


def test_bytes_per_value():
    """The same tags, the same simulator, json and then sparkplug, ~2 s each:
    bytes of payload (and of payload + topic) per value carried."""
    link = os.path.join(WORK, "plc3")
    s = sim(link)
    b = Broker("sp-size")
    raw = []
    lock = threading.Lock()
    c = mqtt.Client(client_id="size", clean_session=True)
    c.on_connect = lambda c, u, f, rc: c.subscribe("#", qos=0)

    def on_message(c, u, m):
        with lock:
            raw.append((m.topic, bytes(m.payload)))
    c.on_message = on_message
    c.connect("127.0.0.1", b.port)
    c.loop_start()
    time.sleep(0.3)
    results = {}
    for fmt in ("json", "sparkplug"):
        extra = (sp_section(b.port) if fmt == "sparkplug" else
                 f"[mqtt]\nhost = 127.0.0.1\nport = {b.port}\ngateway = {EDGE}\nclient_id = j-{EDGE}\n")
        g = Gateway(bus=f"port = {link}\nbaud = 19200\n", devices=devices_text(), timeout_ms=100, extra=extra)
        time.sleep(1.0)   # births and first values out of the way
        with lock:
            raw.clear()
        time.sleep(2.0)
        with lock:
            got = list(raw)
        g.stop()
        values = payload = topic = 0
        for t, p in got:
            if fmt == "json" and t.endswith("/data"):
                import json
                m = json.loads(p)
                values += len(m["values"]) + len(m["errors"])
            elif fmt == "sparkplug" and "/DDATA/" in t:
                values += len(metrics_of(decode_raw(p)))
            else:
                continue
            payload += len(p)
            topic += len(t)
        results[fmt] = (values, payload / max(values, 1), (payload + topic) / max(values, 1))
    c.loop_stop()
    c.disconnect()
    s.kill()
    b.stop()
    (jv, jp, jt), (sv, sp, st) = results["json"], results["sparkplug"]
    print(f"figures: bytes per value, json: {jp:.1f} payload, {jt:.1f} with topic ({jv} values); "
          f"sparkplug: {sp:.1f} payload, {st:.1f} with topic ({sv} values); "
          f"ratio {jp / max(sp, 1e-9):.2f}x payload, {jt / max(st, 1e-9):.2f}x with topic", flush=True)
    check(jv > 50 and sv > 50 and sp < jp, "Sparkplug carries a value in fewer bytes than json")


def test_template_metrics():
    """Devices from one [template]: each DBIRTH names its own metrics
    DEVICE.ROW, and each device's values are its own slave's words."""
    csv_path = os.path.join(WORK, "meter.csv")
    with open(csv_path, "w") as f:
        f.write("name,table,address,type\nvoltage,holding,0,uint16\ncurrent,holding,1,uint16\n")
    b = Broker("sptpl")
    host = Host(b.port, "host-tpl")
    # short device names: protoc --decode_raw reads some strings ("meter1.voltage") as
    # nested messages, which this decoder cannot tell apart
    devs = f"[template meter]\ntags_file = {csv_path}\ninterval_ms = 100\n" + "".join(
        f"[device m{k}]\nslave = {k}\ntemplate = meter\n" for k in (1, 2, 3))
    g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", devices=devs, extra=sp_section(b.port), dir=WORK)
    names = ("m1", "m2", "m3")
    msgs = births_of(host, 0, devices=names)
    check(msgs is not None, "an NBIRTH and a DBIRTH per templated device")

    def states():
        got = {d: fold(host.since(0), d)[0] for d in names}
        return got if all(len(v) == 2 and None not in v.values() for v in got.values()) else None
    check(wait_for(lambda: states() is not None, 10), "every metric of every device has a value")
    want = {f"m{k}": {f"m{k}.voltage": k * 1000, f"m{k}.current": k * 1000 + 1} for k in (1, 2, 3)}
    check(states() == want, f"metrics named DEVICE.ROW with their own slave's values: {states()}")
    # a row added to the template, live (SIGHUP): each device is born again
    # naming the new metric, which a host could not know by alias otherwise
    start = host.count()
    with open(csv_path, "a") as f:
        f.write("power,holding,2,uint16\n")
    g.p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: all(any(m[0] == "DBIRTH" and m[1] == d for m in host.since(start)) for d in names), 10),
          "SIGHUP with a row added: a new DBIRTH of each device")
    check(wait_for(lambda: fold(host.since(start), "m2")[0].get("m2.power") == 2002, 10),
          f"the new metric by its DBIRTH's alias: {fold(host.since(start), 'm2')[0]}")
    check(not any(m[0] in ("NDEATH", "NBIRTH") for m in host.since(start)), "the node was not born again")
    bad = seq_ok(host.since(0))
    check(not bad, f"seq +1 per message across the reload: {bad[:3]}")
    g.stop()
    host.close()
    b.stop()


def main():
    run_tests("test_sparkplug", [test_session, test_primary_host, test_command_bounds, test_bytes_per_value,
                                 test_template_metrics],
              cleanup=[WORK, test_mqtt.WORK])


if __name__ == "__main__":
    main()
