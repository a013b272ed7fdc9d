#!/usr/bin/python3
"""Tags in the daemon, end to end, against rtugw's simulator on a pseudo-
terminal of its own (words seeded with --load) and the HTTP API:

- every type in every order (and the device's default order), unscaled and
  scaled, strings, raw words and bits, from a tags_file and from [tag NAME]
  sections, read through /tags equal what Python's struct computes from the
  same words (tests/lib/tagsref.py);
- writes: PUT /tags/NAME for every writable type gives the words struct.pack
  gives, read back through Modbus TCP and through /tags; a bool in a register
  keeps the other bits; out-of-range values, a missing or wrong token, a tag
  that is not writable, bad JSON or text after it, a name with %00 in it,
  read-only mode: refused, the device untouched;
- quality: a slave made silent turns its tags stale, then bad (timeout); its
  port gone, bad (port down); exceptions give bad with the code; a read across
  a hole that gets exception 02 is split and its tags come good;
- the generated 2,000-tag file over 10 devices loads, plans and polls, every
  value equal to the simulator's pattern decoded by the reference;
- rtugw check names the file, line and column of bad CSV rows and [tag] keys.
Seeded: replay with RTUGW_SEED=..."""
import csv
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, procs, run_tests  # noqa: E402
from tagscheck import (TOKEN, all_good, check_values, http, nonfinite, put, registers, tag_values,  # noqa: E402
                       wait_for, write_every_type)
from tagsref import TYPES, as_json_text, csv_text, decode, load_lines, make_tagset, same_value, section_text  # noqa: E402

SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_tags_gw: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)
DEMO_TOOL = os.path.join(os.path.dirname(os.path.abspath(BIN)), "tests", "lib", "tags_demo_tool")


class PtySim:
    """`rtugw sim --link DIR/plc`: serving once it has printed its pseudo-terminal."""

    def __init__(self, d, slaves="1", args=()):
        self.link = os.path.join(d, "plc")
        if os.path.lexists(self.link):   # left by a simulator killed before
            os.unlink(self.link)
        self.p = subprocess.Popen([BIN, "sim", "--link", self.link, "--slaves", slaves, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(self.p)
        path = self.p.stdout.readline().strip()
        if not path.startswith("/dev/"):
            print(f"FATAL: rtugw sim {' '.join(args)} did not start (exit {self.p.poll()})", flush=True)
            sys.exit(1)
        while not os.path.exists(self.link):
            time.sleep(0.01)

    def signal(self, sig):
        self.p.send_signal(sig)

    def kill(self):
        self.p.kill()
        self.p.wait()


def gateway(d, sim, devices, extra="", timeout_ms=300, tcp_extra=""):
    return Gateway(bus=f"port = {sim.link}\nbaud = 19200\n", devices=devices, timeout_ms=timeout_ms,
                   extra=extra, extra_tcp=tcp_extra, dir=d)


def span(tags):
    return max(t["address"] + len(t["words"]) for t in tags if t["table"] == "holding") - 100


# ---- every type in every order ------------------------------------------------------

def test_types_and_writes():
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    tags = make_tagset(rng, base=100, default_order="CDAB")
    from_file, from_sections = tags[0::2], tags[1::2]
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write(load_lines(tags, 1))
    with open(os.path.join(d, "tags.csv"), "w", newline="") as f:
        f.write(csv_text(from_file, ""))
    sim = PtySim(d, "1", ["--load", os.path.join(d, "load.txt")])
    devices = f"[device plc]\nslave = 1\norder = CDAB\ntags_file = {d}/tags.csv\n" + section_text(from_sections, "plc")
    g = gateway(d, sim, devices, extra=f"write_token = {TOKEN}\nmax_body_bytes = 512\n")
    check(wait_for(lambda: all_good(g), 10), "every tag good after the first polls")
    got = check_values(g, tags, "simulator")
    check(len(got) == len(tags), f"/tags lists every tag ({len(got)} of {len(tags)})")
    one = got["float32_CDAB_s"]
    now_ms = time.time() * 1000
    check(one["unit"] == "u" and one["device"] == "plc" and abs(one["timestamp"] - now_ms) < 5000 and
          0 <= one["age_s"] < 5, f"value, unit, device, wall-clock timestamp and age: {one}")
    status, full = http(g, "GET", "/tags/int64_dflt_u")
    full = json.loads(full)
    check(status == 200 and full["order"] == "GHEFCDAB" and full["type"] == "int64" and full["registers"] == 4,
          f"/tags/NAME: the device's CDAB applied to int64 by meaning: {full}")
    check(http(g, "GET", "/tags/nonesuch")[0] == 404, "/tags/NAME of an unknown tag: 404")
    st = g.status()
    dev = st["buses"][0]["devices"][0]
    k = len(nonfinite(tags))
    check(dev["tags"] == {"count": len(tags), "good": len(tags) - k, "stale": 0, "bad": k},
          f"/status counts the device's tags by quality (bad: the {k} NaN or infinite floats): {dev['tags']}")
    m = g.metrics()
    check(m.get("rtugw_tags") == len(tags) and not any(k.startswith("rtugw_tag_value") for k in m),
          "metrics: the tag count; no gauge per tag unless [http] tag_metrics")
    write_every_type(g, rng, tags, "simulator")
    refusals(g, tags)
    g.stop()
    sim.kill()


def refusals(g, tags):
    by = {t["name"]: t for t in tags}
    before = g.metrics().get("rtugw_http_tag_writes_refused_total", 0)
    words_before = registers(g, 100, span(tags))
    cases = [
        ("int16_AB_u", "40000", None, 422, "outside int16"),
        ("uint16_AB_u", "-1", None, 422, "outside"),
        ("int32_ABCD_u", "2147483648", None, 422, "outside"),
        ("uint64_ABCDEFGH_u", "18446744073709551616", None, 422, "beyond 64 bits"),
        ("int64_ABCDEFGH_u", "-9223372036854775809", None, 422, "beyond 64 bits"),
        ("int16_AB_s", "1e9", None, 422, "outside"),
        ("float32_ABCD_u", "1e39", None, 422, ""),
        ("uint16_AB_u", "12.7e-1", None, 200, ""),   # rounds to 1: allowed
        ("text_AB", '"seven chars"', None, 422, ""),
        ("diag", '"0001"', None, 422, ""),
        ("int16_AB_u", "true", None, 422, ""),
        ("int16_AB_u", None, "{nonsense", 400, "JSON object"),
        ("int16_AB_u", None, '{"value": null}', 400, "number, a boolean or a string"),
        ("int16_AB_u", None, '{"value": 1, "force": true}', 400, "JSON object"),
        ("int16_AB_u", None, '[1]', 400, "JSON object"),
        ("int16_AB_u", None, '{"value": 12345} junk', 400, "text after the value"),   # as MQTT refuses it
        ("int16_AB_u%00xyz", "12345", None, 400, "NUL"),   # not int16_AB_u: the name is cut nowhere
        ("int16_AB_u%00", "12345", None, 400, "NUL"),
        ("in_i32", "1", None, 403, "not writable"),
        ("nonesuch", "1", None, 404, "no such tag"),
    ]
    ok, refused = True, 0
    for name, text, body, code, why in cases:
        status, ans = put(g, name, text, body=body)
        refused += code != 200
        if status != code or (why and why not in ans.get("error", "")):
            ok = False
            print(f"  PUT {name} {text or body}: {status} {ans}, want {code} '{why}'")
    check(ok, f"{len(cases)} bad writes refused with their status and reason")
    status, ans = put(g, "int16_AB_u", "5", token=None)
    ok = status == 403 and "token" in ans["error"]
    status, ans = put(g, "int16_AB_u", "5", token=TOKEN + "x")
    ok = ok and status == 403 and "token" in ans["error"]
    check(ok, f"no token, or a wrong one: 403 ({ans})")
    check(http(g, "PUT", "/status", b'{"value": 1}', TOKEN)[0] == 405 and
          http(g, "PUT", "/tags", b'{"value": 1}', TOKEN)[0] == 405, "PUT anywhere but /tags/NAME: 405")
    check(http(g, "PUT", "/tags/int16_AB_u", b'{"value": %s}' % (b" " * 2000 + b"1"), TOKEN)[0] == 413,
          "a body past [http] max_body_bytes: 413")
    after = registers(g, 100, span(tags))
    changed = [100 + i for i in range(span(tags))
               if words_before[i] != after[i] and 100 + i != by["uint16_AB_u"]["address"]]
    check(not changed, f"refused writes left the device's registers as they were ({changed})")
    m = g.metrics()
    check(m.get("rtugw_http_tag_writes_refused_total", 0) - before == refused + 2,
          f"refusals counted: {m.get('rtugw_http_tag_writes_refused_total', 0) - before} of {refused + 2}")


# ---- the vendors' types: BCD, float16, bytes, fixed-point, word-swapped strings ------

NEW_TYPES = [   # name, type, order, words at 300.., the value /tags shows
    ("bcd", "bcd16", "AB", [0x1234], 1234),
    ("lbcd", "lbcd", "CDAB", [0x5678, 0x1234], 12345678),
    ("notbcd", "bcd16", "", [0x12A4], None),
    ("half", "float16", "BA", [0x4842], 3.14),   # 3.140625: 3.14 is the same float16
    ("hi", "int8h", "", [0xFF05], -1),
    ("lo", "uint8l", "", [0xFF05], 5),   # the same register as hi: one byte each
    ("temp", "fixed16:1", "", [14503], 1450.3),
    ("flow", "ufixed32:3", "CDAB", [0x0001, 0x0002], 131.073),
    ("label", "string:3", "CDAB", [0x4344, 0x4142, 0x4546], "ABCDEF"),
]


def test_new_types():
    """The new types through the gateway: read from a tags_file and [tag]
    sections equal what the reference says; a write in range puts the
    reference's words on the slave (a byte keeps its neighbour); writes out
    of range are refused (422) with every register untouched."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    addr, rows, sections, load = 300, ["name,table,address,type,order,writable"], "", []
    where = {}
    for k, (name, typ, order, words, _) in enumerate(NEW_TYPES):
        if name == "lo":
            addr -= 1   # hi's register
        where[name] = addr
        load.append(f"1 holding {addr} " + " ".join(str(w) for w in words))
        if k % 2:
            sections += (f"[tag {name}]\ndevice = plc\ntable = holding\naddress = {addr}\ntype = {typ}\n" +
                         (f"order = {order}\n" if order else "") + "writable = true\ninterval_ms = 200\n")
        else:
            rows.append(f"{name},holding,{addr},{typ},{order},true")
        addr += len(words)
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write("\n".join(load) + "\n")
    with open(os.path.join(d, "tags.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    sim = PtySim(d, "1", ["--load", os.path.join(d, "load.txt")])
    g = gateway(d, sim, f"[device plc]\nslave = 1\ntags_file = {d}/tags.csv\n" + sections,
                extra=f"write_token = {TOKEN}\n")
    check(wait_for(lambda: all_good(g, [n for n, *_ in NEW_TYPES if n != "notbcd"]), 10),
          "the new types' tags good after the first polls")
    got = tag_values(g)
    bad = [(n, want, got.get(n, {}).get("value")) for n, _, _, _, want in NEW_TYPES
           if n != "notbcd" and got.get(n, {}).get("value") != want]
    check(not bad, f"/tags: bcd16, lbcd, float16, int8h/uint8l, fixed16:1, ufixed32:3, CDAB string ({bad})")
    nb = got.get("notbcd", {})
    check(nb.get("quality") == "bad" and nb.get("reason") == "bad_data" and nb.get("value") is None,
          f"a register that is no BCD (0x12A4): bad, reason bad_data, no value ({nb})")
    status, full = http(g, "GET", "/tags/flow")
    full = json.loads(full)
    check(full.get("type") == "ufixed32" and full.get("point") == 3 and full.get("order") == "CDAB",
          f"/tags/NAME says a fixed-point tag's type and digits: {full}")

    span_words = addr - 300
    before = registers(g, 300, span_words)
    refused = [("bcd", "10000"), ("bcd", "-1"), ("lbcd", "100000000"), ("hi", "-129"), ("hi", "128"),
               ("lo", "256"), ("half", "65520"), ("half", "1e6"), ("temp", "3276.8"), ("temp", "-3276.9"),
               ("flow", "-0.001"), ("flow", "4294967.296"), ("label", '"ABCDEFG"')]
    answers = [(n, v, *put(g, n, v)) for n, v in refused]
    wrong = [(n, v, st, a) for n, v, st, a in answers if st != 422]
    check(not wrong, f"{len(refused)} writes out of range refused with 422 ({wrong[:3]})")
    time.sleep(0.5)
    check(registers(g, 300, span_words) == before,
          f"the refused writes left every register untouched ({before} -> {registers(g, 300, span_words)})")

    writes = [("bcd", "9999", [0x9999]), ("lbcd", "87654321", [0x4321, 0x8765]), ("half", "-2.5", [0x00C1]),
              ("hi", "-128", [0x8005]), ("lo", "170", [0x80AA]), ("temp", "-12.35", [0xFF84]), 
              ("flow", "65.535", [0xFFFF, 0x0000]), ("flow", "4.0005", [0x0FA1, 0x0000]), ("label", '"xyz"', [0x7A00, 0x7879, 0x0000])]
    bad = []
    for name, value, words in writes:
        status, ans = put(g, name, value)
        now = registers(g, where[name], len(words))
        if status != 200 or now != words:
            bad.append((name, value, status, ans, [f"{w:04x}" for w in now or []]))
    check(not bad, f"writes in range: the reference's words on the slave; int8h then uint8l keep each "
          f"other's byte; fixed-point rounds the JSON number's digits half away: -12.35 to -124, 4.0005 to 4001 (not "
          f"4000 as 4.0005 * 1000 in double) ({bad})")
    g.stop()
    sim.kill()


def test_nonfinite_floats():
    """Issue 44: a float16 (or float32) that is an infinity or NaN shows in
    /tags as null with quality bad, reason bad_data and its text, never as
    null with quality good; /status counts it bad."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write("1 holding 500 31744 64512 32256 15360 32704 0 32640 0\n")
    sim = PtySim(d, "1", ["--load", os.path.join(d, "load.txt")])
    kinds = [("hinf", "float16", 500), ("hninf", "float16", 501), ("hnan", "float16", 502), ("hone", "float16", 503),
             ("fnan", "float32", 504), ("finf", "float32", 506)]
    sections = "".join(f"[tag {n}]\ndevice = plc\ntable = holding\naddress = {a}\ntype = {t}\ninterval_ms = 200\n"
                       for n, t, a in kinds)
    g = gateway(d, sim, "[device plc]\nslave = 1\n" + sections)
    check(wait_for(lambda: all_good(g, ["hone"]), 10), "the float tags were read")
    got = tag_values(g)
    want = {"hinf": "inf", "hninf": "-inf", "hnan": "nan", "fnan": "nan", "finf": "inf"}
    wrong = [(n, got.get(n)) for n, text in want.items()
             if not (got.get(n, {}).get("value", 0) is None and got[n].get("quality") == "bad"
                     and got[n].get("reason") == "bad_data" and got[n].get("text") == text)]
    check(not wrong and got["hone"].get("value") == 1 and got["hone"].get("quality") == "good",
          f"/tags: NaN and infinities null, quality bad, reason bad_data, their text; 1.0 good ({wrong})")
    status, out = http(g, "GET", "/status")
    dev = [x for b in json.loads(out).get("buses", []) for x in b.get("devices", []) if x.get("name") == "plc"] \
        if status == 200 else []
    check(dev and dev[0].get("tags", {}).get("bad") == 5 and dev[0]["tags"].get("good") == 1,
          f"/status counts them bad ({dev[0].get('tags') if dev else out[:200]})")
    g.stop()
    sim.kill()


def test_modicon_addressing():
    """addressing = modicon: address = 40101 reads holding register 100 (a
    [tag] section without a table), 400103 holding 102 and 30005 input 4 (a
    CSV), a write to 40101 lands in register 100; [gateway] addressing is
    every device's default, and a device's own addressing = protocol reads
    100 as register 100."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write("1 holding 100 1111 2222 3333\n1 input 4 4444\n2 holding 100 5555\n")
    with open(os.path.join(d, "m.csv"), "w") as f:
        f.write("name,table,address,type,writable\nsix,,400103,uint16,false\nin4,input,30005,uint16,false\n")
    sim = PtySim(d, "1,2", ["--load", os.path.join(d, "load.txt")])
    devices = (f"[device plc]\nslave = 1\ntags_file = {d}/m.csv\n"
               "[device raw]\nslave = 2\naddressing = protocol\n"
               "[tag hr]\ndevice = plc\naddress = 40101\ntype = uint16\nwritable = true\ninterval_ms = 200\n"
               "[tag plain]\ndevice = raw\ntable = holding\naddress = 100\ntype = uint16\ninterval_ms = 200\n")
    g = Gateway(bus=f"port = {sim.link}\nbaud = 19200\n", devices=devices, timeout_ms=300, dir=d,
                extra=f"write_token = {TOKEN}\n", gateway_extra="addressing = modicon\n")
    check(wait_for(lambda: all_good(g), 10), "Modicon-addressed tags good")
    v = tag_values(g)
    got = {n: v.get(n, {}).get("value") for n in ("hr", "six", "in4", "plain")}
    check(got == {"hr": 1111, "six": 3333, "in4": 4444, "plain": 5555},
          f"40101 is holding 100, 400103 holding 102, 30005 input 4; a protocol device's 100 is 100: {got}")
    status, full = http(g, "GET", "/tags/hr")
    full = json.loads(full)
    check(full.get("table") == "holding" and full.get("address") == 100,
          f"/tags/hr says the protocol address it reads: {full}")
    status, ans = put(g, "hr", "4321")
    check(status == 200 and ans.get("address") == 100 and registers(g, 100, 1) == [4321],
          f"a write to 40101 goes to holding 100 ({status} {ans})")
    g.stop()
    sim.kill()


def test_read_only_and_no_token():
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    sim = PtySim(d, "1")
    devices = "[device plc]\nslave = 1\n[tag w]\ntable = holding\naddress = 7\ntype = uint16\nwritable = true\n"
    g = gateway(d, sim, devices, extra=f"write_token = {TOKEN}\n", tcp_extra="read_only = true\n")
    status, ans = put(g, "w", "42")
    check(status == 403 and "read-only" in ans["error"] and registers(g, 7, 1) == [1007],
          f"read-only mode: 403, the register unchanged ({status} {ans})")
    g.stop()
    g = gateway(d, sim, devices)
    status, ans = put(g, "w", "42")
    check(status == 403 and "write_token" in ans["error"] and registers(g, 7, 1) == [1007],
          f"no [http] write_token: writes are off ({status} {ans})")
    g.stop()
    sim.kill()


# ---- quality ------------------------------------------------------------------------------

def qualities(g, name, seconds, until):
    """The (quality, reason) sequence of one tag, sampled until `until` holds."""
    seen, deadline = [], time.time() + seconds
    while time.time() < deadline:
        status, out = http(g, "GET", f"/tags/{name}")
        t = json.loads(out)
        q = (t["quality"], t.get("reason"), t.get("exception"))
        if not seen or seen[-1] != q:
            seen.append(q)
        if until(t):
            break
        time.sleep(0.03)
    return seen


def silenced(interval_ms, timeout_ms, extra=""):
    """A writable uint16 tag t (holding 3) on slave 1, never backed off, good;
    then the slave is stopped: the port stays open, nothing answers."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    sim = PtySim(d, "1")
    devices = ("[device plc]\nslave = 1\ndead_after = 0\n"
               f"[tag t]\ntable = holding\naddress = 3\ntype = uint16\ninterval_ms = {interval_ms}\nwritable = true\n")
    g = gateway(d, sim, devices, extra=f"write_token = {TOKEN}\n{extra}", timeout_ms=timeout_ms)
    check(wait_for(lambda: all_good(g), 5), "good while the slave answers")
    sim.signal(signal.SIGSTOP)
    return d, sim, g, devices


def test_quality():
    d, sim, g, devices = silenced(200, 1500)
    seq = qualities(g, "t", 12, lambda t: t.get("reason") == "timeout")
    if seq and seq[0] == ("good", None, None):
        seq = seq[1:]
    check(seq[:2] == [("stale", None, None), ("bad", "timeout", None)],
          f"a silent slave: good, then stale (older than twice its interval while the read waits), "
          f"then bad with reason timeout: {seq}")
    # a client that gives up on its write: the answer comes later to a request whose connection is gone
    body = b'{"value": 6}'
    s = socket.create_connection(("127.0.0.1", g.http_port))
    s.sendall(b"PUT /tags/t HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
              % (TOKEN.encode(), len(body), body))
    time.sleep(0.2)
    s.close()
    status, ans = put(g, "t", "5")
    check(status == 504 and ans.get("exception") == 11, f"a write to the silent slave: 504, exception 0x0B ({ans})")
    check(wait_for(lambda: g.metrics().get("rtugw_http_tag_write_failures_total") == 2, 10) and g.p.poll() is None,
          "the abandoned write was answered too, to no one, and the daemon lives on")
    sim.signal(signal.SIGCONT)
    check(wait_for(lambda: all_good(g), 10), "good again once the slave answers")
    sim.kill()                   # the port goes: its master side closes
    seq = qualities(g, "t", 10, lambda t: t.get("reason") == "port_down")
    check(seq[-1] == ("bad", "port_down", None), f"the port gone: bad with reason port_down: {seq}")
    g.stop()
    # exceptions: bad with the slave's code
    sim = PtySim(d, "1", ["--exception-rate", "1", "--exception-code", "4"])
    g = gateway(d, sim, devices)
    seq = qualities(g, "t", 5, lambda t: t["quality"] == "bad" and t.get("reason") != "not_read")
    check(seq[-1] == ("bad", "exception", 4), f"exception 04 from the slave: bad, exception 4: {seq}")
    g.stop()
    sim.kill()


def test_abandoned_writes():
    """Issue 35, fault 8: writes to a silent slave whose clients close at once
    (60 of them, more than [http] max_connections) must not hold the HTTP
    connections: /status answers at once, the connection count falls back,
    each abandoned write is answered once (to no one), and a write goes
    through once the slave answers again."""
    d, sim, g, _ = silenced(5000, 1000, "max_connections = 8\n")
    body = b'{"value": 6}'
    for _ in range(60):
        try:
            s = socket.create_connection(("127.0.0.1", g.http_port), timeout=2)
            s.sendall(b"PUT /tags/t HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (TOKEN.encode(), len(body), body))
            time.sleep(0.01)
            s.close()
        except OSError:
            pass
    t0 = time.time()
    try:
        status, _ = http(g, "GET", "/status", timeout=10)
    except OSError as e:
        status = e
    dt = time.time() - t0
    check(status == 200 and dt < 1.5, f"/status answered beside 60 abandoned writes: {status} in {dt:.2f} s")
    check(wait_for(lambda: g.metrics().get("rtugw_http_active") is not None and
                   g.metrics().get("rtugw_http_active") <= 1, 3),
          f"the abandoned writes hold no HTTP connection: {g.metrics().get('rtugw_http_active')}")
    m = g.metrics()
    check(m.get("rtugw_http_tag_writes_abandoned_total", 0) >= 1,
          f"abandoned writes counted: {m.get('rtugw_http_tag_writes_abandoned_total')}")
    abandoned = m.get("rtugw_http_tag_writes_abandoned_total", 0)
    check(wait_for(lambda: g.metrics().get("rtugw_http_tag_write_failures_total", 0) >= abandoned, 15),
          "each abandoned write is answered once (0x0B: on the line, or dropped before it), to no one")
    sim.signal(signal.SIGCONT)
    check(wait_for(lambda: put(g, "t", "7")[0] == 200, 60), "a write goes through once the slave answers again")
    check(registers(g, 3, 1) == [7], "and its value is on the device")
    rc, _ = g.stop()
    check(rc == 0, f"exit 0 on SIGTERM ({rc})")
    sim.kill()


def test_poller_waits_for_places():
    """More reads fall due at once than a slow bus's queue holds: the poller
    keeps at most half the queue and holds the rest until places free, so no
    read comes back exception 06 (bus busy) and every tag turns good."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    sim = PtySim(d, "1", ["--pace", "--baud", "9600", "--format", "8N1", "--registers", "8000"])
    rows = "".join(f"r{i:02d},holding,{100 * i},uint16\n" for i in range(80))   # 80 reads: too far apart to merge
    with open(os.path.join(d, "tags.csv"), "w") as f:
        f.write("name,table,address,type\n" + rows)
    devices = f"[device plc]\nslave = 1\ninterval_ms = 3000\ntags_file = {d}/tags.csv\n"
    g = Gateway(bus=f"port = {sim.link}\nbaud = 9600\nparity = none\nqueue_depth = 8\n", devices=devices, dir=d,
                timeout_ms=500, extra_tcp="bus_share = 2\n")
    try:
        busy, t_end = set(), time.time() + 4
        while time.time() < t_end:
            busy |= {n for n, t in tag_values(g).items() if t.get("exception") == 6}
            time.sleep(0.05)
        check(not busy, f"no tag read came back exception 06 at start ({len(busy)}: {sorted(busy)[:5]})")
        good = wait_for(lambda: all_good(g), 5)
        bad = {n: (t["quality"], t.get("reason")) for n, t in tag_values(g).items() if t["quality"] != "good"}
        check(good, f"all 80 tags good ({len(bad)} not: {sorted(bad.items())[:4]})")
    finally:
        g.stop()
        sim.kill()


def test_split_on_exception_02():
    """The simulator has registers 0..999: a read of 995..1002 spans the hole
    996..1001 and the missing 1000+; exception 02 splits it, and the tag at
    995 comes good while the one at 1002 stays bad with exception 2."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    sim = PtySim(d, "1")
    devices = ("[device plc]\nslave = 1\n"
               "[tag in_range]\ntable = holding\naddress = 995\ntype = uint16\ninterval_ms = 200\n"
               "[tag past_end]\ntable = holding\naddress = 1002\ntype = uint16\ninterval_ms = 200\n")
    g = gateway(d, sim, devices)
    check(wait_for(lambda: tag_values(g).get("in_range", {}).get("quality") == "good", 5),
          "the tag inside the device's registers comes good after the split")
    v = tag_values(g)
    check(v["in_range"]["value"] == 1995 and v["past_end"]["quality"] == "bad" and
          v["past_end"].get("exception") == 2, f"values after the split: {v}")
    m = g.metrics()
    check(m.get("rtugw_poller_splits_total") == 1 and m.get("rtugw_poller_reads") == 2,
          f"one split, two reads now: {m.get('rtugw_poller_splits_total')} {m.get('rtugw_poller_reads')}")
    check("exception 02 (illegal data address) on plc holding 995+8" in g.log_text(), "the split is logged")
    g.stop()
    sim.kill()


# ---- the generated 2,000-tag file ------------------------------------------------------------

def pattern(slave, table, address):
    """The simulator's words (docs/drivers.md)."""
    if table == "holding":
        return (slave * 1000 + address) & 0xFFFF
    if table == "input":
        return (0x8000 + slave * 1000 + address) & 0xFFFF
    if table == "coil":
        return int((address + slave) % 3 == 0)
    return (address + slave) % 2


def test_demo_file():
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    path = os.path.join(d, "plant.csv")
    with open(path, "w") as f:
        subprocess.run([DEMO_TOOL, "2000", "10", str(SEED)], stdout=f, check=True)
    sim = PtySim(d, ",".join(str(s) for s in range(1, 11)), ["--registers", "65536"])
    devices = "".join(f"[device plc{s}]\nslave = {s}\ntags_file = {path}\n" for s in range(1, 11))
    p = subprocess.run([BIN, "check", "-c", write_config(d, sim, devices)], capture_output=True, text=True)
    check(p.returncode == 0 and "2000 tags" in p.stdout, f"rtugw check: {p.stdout} {p.stderr}")
    g = gateway(d, sim, devices, extra="tag_metrics = true\n", timeout_ms=1000)
    check(wait_for(lambda: all_good(g), 20, step=0.2), "all 2,000 tags good (the 5 s ones polled at start too)")
    got = tag_values(g)
    bad, n = [], 0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            slave = int(row["device"][3:])
            addr, _, bit = row["address"].partition(".")
            typ = row["type"].split(":")[0]
            regs = 1 if typ == "bool" else int(row["type"].split(":")[1]) if ":" in row["type"] \
                else TYPES[typ][1]
            words = [pattern(slave, row["table"], int(addr) + i) for i in range(regs)]
            order = row["order"] or ("ABCD" if typ in TYPES and TYPES[typ][1] > 1 else "AB")
            if typ in TYPES and TYPES[typ][1] == 4 and not row["order"]:
                order = "ABCDEFGH"
            want = decode(typ, order, words, float(row["scale"] or 1), float(row["offset"] or 0),
                          int(bit) if bit else None)
            n += 1
            if typ == "string":   # as JSON carries it: bytes that are not UTF-8 become U+FFFD
                want = as_json_text(want.encode("latin-1"))
            if not same_value(got.get(row["name"], {}).get("value"), want):
                bad.append((row["name"], want, got.get(row["name"])))
    check(n == 2000 and not bad, f"{n} values equal the simulator's pattern decoded by struct ({bad[:3]})")
    st = g.status()
    counts = [dv["tags"]["count"] for dv in st["buses"][0]["devices"]]
    check(sum(counts) == 2000 and len(counts) == 10, f"/status: tags per device {counts}")
    reads = g.metrics().get("rtugw_poller_reads")
    check(f"poller: 0 poll groups and 2000 tags in {int(reads)} reads" in g.log_text() and reads < 400,
          f"planned in {reads} reads (merging only touching ranges takes about 400: docs/tags.md)")
    m = g.metrics()
    gauges = [k for k in m if k.startswith("rtugw_tag_good{")]
    check(len(gauges) == 2000 and all(m[k] == 1 for k in gauges) and
          any(k.startswith('rtugw_tag_value{device="plc1",tag=') and 'unit="degC"' in k for k in m),
          f"tag_metrics: a gauge per tag, labelled device, tag, unit ({len(gauges)})")
    g.stop()
    sim.kill()


def write_config(d, sim, devices):
    path = os.path.join(d, "check.conf")
    with open(path, "w") as f:
        f.write(f"[bus line]\nport = {sim.link}\n{devices}[tcp]\nport = 1\n[http]\nport = 2\n")
    return path


# ---- rtugw check ---------------------------------------------------------------------------

def test_check_reports():
    d = tempfile.mkdtemp(prefix="rtugw-tags-")
    with open(os.path.join(d, "bad.csv"), "w") as f:
        f.write("name,table,address,type,order\n"          # 1
                "ok1,holding,10,int16,\n"                   # 2
                "t2,holding,11,float33,\n"                  # 3: type at column 17
                "t3,coil,12.3,bool,\n"                      # 4: a bit on a coil, address at column 9
                "t4,holding,20,int64,CDAB\n"                # 5: order at column 21
                "ok1,holding,30,uint16,\n")                 # 6: duplicate name
    conf = os.path.join(d, "rtugw.conf")
    with open(conf, "w") as f:
        f.write("[bus line]\nport = sim\n"                                   # 1-2
                "[device plc]\nslave = 1\ntags_file = bad.csv\nmax_read_registers = 4\n"  # 3-6
                "[tag big]\ntable = holding\naddress = 100\ntype = float64\n"  # 7-10
                "[tag huge]\ntable = holding\naddress = 200\ntype = raw:5\n"   # 11-14
                "[tag typo]\ntable = holdnig\naddress = 1\ntype = int16\n"      # 15-18
                "[poll p]\ndevice = plc\nfunction = 3\naddress = 0\ncount = 10\n")  # 19-24
    p = subprocess.run([BIN, "check", "-c", conf], capture_output=True, text=True)
    csvp = os.path.join(d, "bad.csv")
    want = [f"{csvp}:3:15: type: unknown type 'float33'", f"{csvp}:4:9: ", f"{csvp}:5:21: order: order 'CDAB' does not fit int64",
            f"{csvp}:6:1: name: tag 'ok1' is already defined at {csvp}:2",
            f"{conf}:16: [tag typo] table = 'holdnig'",
            f"{conf}:11: tag huge: 5 registers, more than [device plc] max_read_registers = 4",
            f"{conf}:19: [poll p] count = 10: more than [device plc] max_read_registers = 4"]
    missing = [w for w in want if w not in p.stderr]
    check(p.returncode == 2 and not missing, f"rtugw check names file, line and column: missing {missing} in\n{p.stderr}")
    check(f"{conf}:7: [tag big]" not in p.stderr, "a float64 (4 registers) fits max_read_registers = 4")


run_tests("test_tags_gw", (test_types_and_writes, test_new_types, test_nonfinite_floats, test_modicon_addressing, test_read_only_and_no_token, test_quality, test_abandoned_writes,
                           test_poller_waits_for_places, test_split_on_exception_02, test_demo_file, test_check_reports))
