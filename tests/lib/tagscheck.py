"""The daemon's tags over HTTP, for the end-to-end tests (tests/e2e/tags/test_tags_gw.py
against the simulator, tests/peers/test_tags_pymodbus.py against pymodbus): the
requests, and the checks both make of a gateway serving a tag set made by
tagsref.make_tagset: every value equal to the reference, and writes of every
writable type giving struct's words on the device."""
import json
import math
import struct
import time
import urllib.error
import urllib.request

from rtugwtest import check, wait_for  # noqa: F401 (the tag scripts import wait_for from here)
from tagsref import INT_RANGE, TYPES, bytes_to_words, decode, expected_words, same_value, string_words, wire_bytes

TOKEN = "s3cret-token-0123456789ab"


def http(g, method, path, body=None, token=None, timeout=15):
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def put(g, name, value_text, token=TOKEN, body=None):
    """PUT /tags/NAME {"value": value_text} (or a body of its own): status, JSON answer."""
    status, out = http(g, "PUT", f"/tags/{name}", (body if body is not None else
                                                   '{"value": %s}' % value_text).encode(), token)
    try:
        return status, json.loads(out)
    except ValueError:
        return status, {"raw": out[:200]}


def tag_values(g):
    status, out = http(g, "GET", "/tags")
    return {t["name"]: t for t in json.loads(out)["tags"]} if status == 200 else {}


def read_ok(t):
    """Good, or read and a float that is NaN or an infinity: JSON has no token
    for those, so /tags gives null, quality bad, reason bad_data and the text
    (issue 44)."""
    return t["quality"] == "good" or (t["quality"] == "bad" and t.get("reason") == "bad_data"
                                      and t.get("text") in ("nan", "inf", "-inf"))


def nonfinite(tags):
    """The tags of a make_tagset whose words are a float NaN or infinity."""
    return [t["name"] for t in tags if isinstance(t["want"], float) and not math.isfinite(t["want"])]


def all_good(g, names=None):
    v = tag_values(g)
    return bool(v) and all(read_ok(t) for n, t in v.items() if names is None or n in names)


def registers(g, address, count, unit=1):
    """Holding registers through the gateway's Modbus TCP front end."""
    c = g.client()
    out = []
    for at in range(address, address + count, 100):
        r = c.read_holding_registers(at, min(100, address + count - at), slave=unit)
        out = None if out is None or r.isError() else out + list(r.registers)
    c.close()
    return out


def check_values(g, tags, how):
    got = tag_values(g)
    bad = [(t["name"], t["want"], got.get(t["name"], {}).get("value")) for t in tags
           if not same_value(got.get(t["name"], {}).get("value"), t["want"])]
    check(not bad and len(got) >= len(tags),
          f"{how}: {len(tags)} tags of every type and order equal struct's reading of their words "
          f"({len(bad)} differ: {bad[:5]})")
    return got


def value_for(rng, t):
    """A value to write to tag t, as JSON text, and the words it must become."""
    typ, order, scale, offset = t["type"], t["effective"], t["scale"], t["offset"]
    if typ.startswith("string"):
        text = "Hi!"[:rng.randrange(1, 4)]
        return json.dumps(text), string_words(text.encode(), 3, order)
    if typ.startswith("raw"):
        words = [rng.randrange(65536) for _ in range(2)]
        return json.dumps(" ".join(f"{w:04x}" for w in words)), words
    if typ in INT_RANGE and scale == 1.0:
        lo, hi = INT_RANGE[typ]
        raw = rng.choice([lo, hi - 1, rng.randrange(lo, hi)])
        return str(raw), bytes_to_words(wire_bytes(struct.pack(TYPES[typ][0], raw), order))
    if typ in INT_RANGE:
        raw = rng.randrange(max(INT_RANGE[typ][0], -30000), min(INT_RANGE[typ][1], 30000))
        eng = raw * scale + offset
        return repr(eng), expected_words(typ, order, eng, scale, offset)
    eng = rng.choice([12.5, -3.25e10, 0.0, 1.5e-3, 65504.0])
    return repr(eng), expected_words(typ, order, eng, scale, offset)


def write_every_type(g, rng, tags, how, unit=1, settle=0.6):
    """PUT a value to every writable register tag: struct's words on the device,
    then the same value back through the poll and /tags; bits of a register
    by read-modify-write, the other bits kept."""
    bad = []
    for t in tags:
        if not t["writable"] or t["table"] != "holding" or t["type"] == "bool":
            continue
        text, want = value_for(rng, t)
        status, ans = put(g, t["name"], text)
        back = registers(g, t["address"], len(want), unit)
        if status != 200 or ans.get("words") != want or back != want:
            bad.append((t["name"], text, status, ans, want, back))
        t["written"] = decode(t["type"].split(":")[0], t["effective"], want, t["scale"], t["offset"])
    check(not bad, f"{how}: PUT of every writable type gives struct's words, read back over Modbus TCP "
                   f"({bad[:3]})")
    time.sleep(settle)
    got = tag_values(g)
    bad = [(t["name"], t["written"], got[t["name"]]["value"]) for t in tags
           if "written" in t and not same_value(got[t["name"]]["value"], t["written"])]
    check(not bad, f"{how}: written values read back through /tags ({bad[:3]})")
    bit_tags = [t for t in tags if t["type"] == "bool" and t["table"] == "holding"]
    ok = True
    for t in rng.sample(bit_tags, min(6, len(bit_tags))):
        before = registers(g, t["address"], 1, unit)[0]
        value = rng.choice([True, False])
        status, ans = put(g, t["name"], json.dumps(value))
        after = registers(g, t["address"], 1, unit)[0]
        want = (before | (1 << t["bit"])) if value else (before & ~(1 << t["bit"]))
        if status != 200 or ans.get("function") != 6 or after != want:
            ok = False
            print(f"  bit {t['bit']} := {value}: {before:04x} -> {after:04x}, want {want:04x}: {status} {ans}")
    check(ok, f"{how}: a bool in a register: fc 3 then fc 6, only its bit changes")
