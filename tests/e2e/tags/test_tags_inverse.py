#!/usr/bin/python3
"""Writes to computed tags through an inverse (issue 46), end to end, against
the daemon's simulated slaves (port = sim:1,2), read back with pymodbus:

- PUT /tags/NAME (and an MQTT write, through a real mosquitto) on a
  computed tag without an inverse: 409 (NOT_WRITABLE) naming the tag,
  counted; with one: 200, the answer names the input written ("through"),
  the input's device register holds the inverse's value (read back over
  Modbus TCP), and the computed tag then shows the value written;
- a SunSpec-style inverse that reads another tag (value / 10^W_SF): the
  register gets value x 10^-sf, for two scale factors;
- an inverse that fails (its step budget, a result out of the input's
  range) or reads a tag that is not good: refused (422, 409), nothing
  written;
- the same through a [map]: fc 6/16 on a computed entry writes the input;
  fc 16 spanning three entries writes each, answered when all are; one whose
  inverse fails midway answers 04, the entries before it written, those after
  not (docs/tags.md); a computed entry without an inverse answers 02;
- two devices from one template: each one's computed tag reads and writes
  its own device's input (DEVICE.ROW scoping of expr, inverse and target);
- rtugw check refuses what an inverse may not be, with FILE:LINE."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mqtt"))  # tests/e2e/mqtt/: test_mqtt's brokers and subscribers
from rtugwtest import BIN, Gateway, check, check_config_refused, run_tests, wait_for  # noqa: E402
from tagscheck import TOKEN, http, put, tag_values  # noqa: E402
import test_mqtt  # noqa: E402,F401  (its brokers and subscribers; its main() does not run on import)
from test_mqtt import Broker, Subscriber, mqtt_section  # noqa: E402

D = tempfile.mkdtemp(prefix="rtugw-inverse-")

TAGS = """
[device d1]
slave = 1
[device d2]
slave = 2
[tag t_raw]
device = d1
table = holding
address = 10
type = int16
interval_ms = 100
writable = true
[tag t_eng]
device = d1
expr = t_raw / 10 + 5
inverse = round((value - 5) * 10)
[tag t_ro]
device = d1
expr = t_raw * 2
[tag W]
device = d1
table = holding
address = 20
type = int16
interval_ms = 100
writable = true
[tag W_SF]
device = d1
table = holding
address = 21
type = int16
interval_ms = 100
[tag power]
device = d1
expr = W * 10^W_SF
inverse = round(value / 10^W_SF)
inverse_target = W
[tag spin]
device = d1
expr = t_raw + 0
inverse = (function() while true do end end)()
[tag dead_in]
device = d9
table = holding
address = 0
type = int16
interval_ms = 200
[tag via_dead]
device = d1
expr = t_raw + dead_in
inverse = value - dead_in
inverse_target = t_raw
[tag u_a]
device = d2
table = holding
address = 30
type = uint16
interval_ms = 100
writable = true
[tag u_b]
device = d2
table = holding
address = 31
type = uint16
interval_ms = 100
writable = true
[device d9]
slave = 9
dead_after = 0
[template meter]
tags_file = meter.csv
[device m3]
slave = 3
template = meter
[device m4]
slave = 4
template = meter
"""
# a template's rows: the computed row names its inputs as the row does, each device its own
METER = """name,table,address,type,writable,expr,inverse,inverse_target
raw,holding,40,uint16,true,,,
kw,,,,,raw / 100,round(value * 100),raw
"""
# a map's rows for every device of the template: each deviceN places a copy at its base
METER_MAP = """name,table,address,type
raw,holding,0,uint16
kw,holding,1,float32
"""
MAP = """name,table,address,type,order,scale
u_a,holding,0,uint16,,
t_eng,holding,1,float32,,
u_b,holding,3,uint16,,
t_ro,holding,4,float32,,
power,holding,6,float32,,
"""


def regs(c, unit, address, count=1):
    r = c.read_holding_registers(address, count, slave=unit)
    return None if r.isError() else list(r.registers)


def s16(v):
    return v - 65536 if v >= 32768 else v


def f32(v):
    return list(struct.unpack(">2H", struct.pack(">f", v)))


def shows(g, name, want):
    t = tag_values(g).get(name, {})
    return t.get("quality") == "good" and t.get("value") is not None and abs(t["value"] - want) < 1e-6


def refused(g):
    return g.metrics().get("rtugw_http_tag_writes_refused_total", 0)


def test_inverse():
    with open(os.path.join(D, "meter.csv"), "w") as f:
        f.write(METER)
    with open(os.path.join(D, "scada.csv"), "w") as f:
        f.write(MAP)
    with open(os.path.join(D, "meter_map.csv"), "w") as f:
        f.write(METER_MAP)
    broker = Broker("inverse")
    sub = Subscriber(broker.port, "rtugw/ginv/write/response", "sub-inverse", clean=True)
    g = Gateway(bus="port = sim:1,2,3,4\nbaud = 115200\n", devices=TAGS, dir=D, timeout_ms=100,
                extra=f"write_token = {TOKEN}\n{mqtt_section(broker.port, 'ginv')}"
                "[map scada]\nunit = 100\nregisters = scada.csv\n"
                "[map meters]\nunit = 101\ndevice_registers = meter_map.csv\ndevice0 = m3, 0\ndevice1 = m4, 10\n")
    c = g.client()
    c.write_register(21, 0, slave=1)   # the simulator's registers start at a pattern: 10^W_SF may overflow
    check(wait_for(lambda: all(tag_values(g).get(n, {}).get("quality") == "good"
                               for n in ("t_eng", "power", "u_a", "m3.kw", "m4.kw")), 15, 0.1),
          f"the computed tags have values ({ {n: t.get('quality') for n, t in tag_values(g).items()} })")

    # ---- HTTP: without an inverse refused, with one written through its input --------------------------
    before = refused(g)
    status, body = put(g, "t_ro", "4")
    check(status == 409 and body.get("tag") == "t_ro" and "no inverse" in body.get("error", ""),
          f"PUT to a computed tag without an inverse: 409 naming it ({status} {body})")
    check(refused(g) == before + 1, "the refusal is counted")
    status, body = put(g, "t_eng", "17.5")
    check(status == 200 and body.get("tag") == "t_eng" and body.get("through") == "t_raw" and body.get("confirmed")
          and body.get("words") == [125], f"PUT t_eng = 17.5 writes t_raw = (17.5 - 5) * 10 = 125: {status} {body}")
    check(regs(c, 1, 10) == [125], f"d1 holding 10 holds 125 ({regs(c, 1, 10)})")
    check(wait_for(lambda: shows(g, "t_eng", 17.5), 5, 0.05), f"t_eng shows 17.5 ({tag_values(g).get('t_eng')})")
    # ... and a reader of changes only (GET /tags?since=N, the page's refresh) is told
    seq = json.loads(http(g, "GET", "/tags")[1])["seq"]
    put(g, "t_eng", "18.5")

    def since():
        listed = {t["name"]: t for t in json.loads(http(g, "GET", f"/tags?since={seq}")[1]).get("tags", [])}
        return listed.get("t_eng", {}).get("value") == 18.5
    check(wait_for(since, 5, 0.05), "GET /tags?since=N lists the computed tag's new value")

    # the inverse reads the scale factor: value / 10^W_SF, for two scale factors
    for sf, value, want in ((65535, 123.4, 1234), (1, 4560, 456)):
        check(not c.write_register(21, sf, slave=1).isError(), f"W_SF = {s16(sf)} written to the device")
        check(wait_for(lambda: tag_values(g).get("W_SF", {}).get("value") == s16(sf), 5, 0.05), "W_SF read")
        status, body = put(g, "power", str(value))
        check(status == 200 and body.get("through") == "W" and regs(c, 1, 20) == [want],
              f"PUT power = {value} at W_SF {s16(sf)}: W = {want} on the device ({status} {body}, {regs(c, 1, 20)})")
        check(wait_for(lambda: shows(g, "power", value), 5, 0.05), f"power shows {value}")

    # MQTT: the same path (tag_write.c), the same refusal without an inverse
    def mqtt_write(uuid, tag, value):
        sub.publish("rtugw/ginv/write", '{"uuid": "%s", "device": "d1", "tag": "%s", "value": %s}' % (uuid, tag, value))
        wait_for(lambda: any(m.get("uuid") == uuid for _, m, _ in sub.messages()), 10)
        r = [m for _, m, _ in sub.messages() if m.get("uuid") == uuid]
        return r[-1] if r else {}
    check(wait_for(lambda: g.metrics().get("rtugw_mqtt_connected") == 1, 10), "MQTT up")
    r = mqtt_write("m1", "t_eng", "8.5")
    check(r.get("error") == 0 and regs(c, 1, 10) == [35], f"MQTT write t_eng = 8.5 writes t_raw = 35 ({r}, {regs(c, 1, 10)})")
    r = mqtt_write("m2", "t_ro", "8")
    check(r.get("error") == 1009 and "no inverse" in r.get("message", ""), f"MQTT write to t_ro: NOT_WRITABLE ({r})")

    # refusals: nothing reaches the device
    c.write_register(10, 77, slave=1)
    for name, value, code, why in (("spin", "1", 422, "step budget"),
                                   ("t_eng", "5000", 422, "t_raw"),          # 49950 is past int16
                                   ("via_dead", "3", 409, "dead_in")):
        before = refused(g)
        status, body = put(g, name, value)
        check(status == code and why in body.get("error", "") and refused(g) == before + 1,
              f"PUT {name} = {value}: {code} saying {why!r} ({status} {body})")
    check(regs(c, 1, 10) == [77], f"none of them wrote d1 10 ({regs(c, 1, 10)})")

    # ---- a map: computed entries written through their inverse ------------------------------------
    r = c.write_registers(1, f32(9.5), slave=100)
    check(not r.isError() and regs(c, 1, 10) == [45], f"fc16 to t_eng in the map writes t_raw = 45 ({r}, {regs(c, 1, 10)})")
    r = c.write_registers(4, f32(2.0), slave=100)
    check(r.isError() and r.exception_code == 2, f"fc16 to a computed entry without an inverse: 02 ({r})")
    r = c.write_registers(0, [11] + f32(12.5) + [13], slave=100)
    check(not r.isError() and regs(c, 2, 30, 2) == [11, 13] and regs(c, 1, 10) == [75],
          f"fc16 over three entries writes all three (d2 30..31 {regs(c, 2, 30, 2)}, d1 10 {regs(c, 1, 10)})")
    check(wait_for(lambda: regs(c, 100, 0, 4) == [11] + f32(12.5) + [13], 5, 0.05),
          f"the map then reads what was written ({regs(c, 100, 0, 4)})")
    r = c.write_registers(0, [21] + f32(5000.0) + [23], slave=100)
    check(r.isError() and r.exception_code == 4, f"fc16 whose second entry's inverse fails: 04 ({r})")
    check(regs(c, 2, 30, 2) == [21, 13] and regs(c, 1, 10) == [75],
          f"the entry before it is written, the one after is not (d2 30..31 {regs(c, 2, 30, 2)})")
    check("stopped at entry 2 of 3" in g.log_text(), "the log says where the write stopped")

    # ---- a template: each device's computed tag reads and writes its own input ---------------------
    for dev, slave, value in (("m3", 3, 1.5), ("m4", 4, 2.25)):
        status, body = put(g, f"{dev}.kw", str(value))
        check(status == 200 and body.get("through") == f"{dev}.raw" and regs(c, slave, 40) == [int(value * 100)],
              f"PUT {dev}.kw = {value} writes {dev}.raw on slave {slave} ({status} {body})")
    check(wait_for(lambda: shows(g, "m3.kw", 1.5) and shows(g, "m4.kw", 2.25), 5, 0.05),
          "each device's computed tag shows its own value")
    # ... and one map serves each device's rows at its own base, written through the computed row's inverse
    check(wait_for(lambda: regs(c, 101, 0, 3) == [150] + f32(1.5) and regs(c, 101, 10, 3) == [225] + f32(2.25), 5, 0.05),
          f"map meters: m3's rows at 0, m4's at 10 ({regs(c, 101, 0, 3)}, {regs(c, 101, 10, 3)})")
    r = c.write_registers(11, f32(3.5), slave=101)
    check(not r.isError() and regs(c, 4, 40) == [350] and regs(c, 3, 40) == [150],
          f"fc16 to m4's kw in the map writes m4.raw = 350 on slave 4 only ({r}, {regs(c, 4, 40)}, {regs(c, 3, 40)})")
    c.close()
    rc, _ = g.stop()
    check(rc == 0, "the gateway stopped cleanly")


def test_check_errors():
    base = ("[bus line]\nport = sim:1\n[device plc]\nslave = 1\n"
            "[tag x]\ntable = holding\naddress = 1\ntype = uint16\nwritable = true\n"
            "[tag y]\ntable = holding\naddress = 2\ntype = uint16\n")
    cases = [
        ("[tag c]\nexpr = x + y\ninverse = value\n", ":14: tag c: inverse 'value'", "inverse_target names"),
        ("[tag c]\nexpr = x + y\ninverse = value - x\ninverse_target = y\n", ":14: tag c", "'y' is not writable"),
        ("[tag c]\nexpr = x * 2\ninverse = value\ninverse_target = y\n", ":14: tag c", "not an input"),
        ("[tag c]\nexpr = x * 2\ninverse = value / prev(x)\n", ":14: tag c: inverse", "no meaning in an inverse"),
        ("[tag c]\nexpr = x * 2\ninverse = value +\n", ":14: tag c: inverse 'value +'", "unexpected symbol"),
        ("[tag c]\nexpr = x * 2\ninverse_target = x\n", ":14: [tag c]", "inverse_target without an inverse"),
        ("[tag c]\ntable = holding\naddress = 3\ntype = uint16\ninverse = value\n", ":14: [tag c]",
         "belong to a computed tag"),
    ]
    cfg = os.path.join(D, "gw.ini")
    for extra, where, why in cases:
        check_config_refused(cfg, base + extra, where, why)
    # a map's device rows: the placement's own mistakes at the deviceN line
    with open(os.path.join(D, "rows.csv"), "w") as f:
        f.write("name,table,address,type\nx,holding,1,uint16\n")
    base_m = ("[bus line]\nport = sim:1,2\n[template t]\ntags_file = t.csv\n[device m1]\nslave = 2\ntemplate = t\n"
              "[device plc]\nslave = 1\n[tag x]\ndevice = plc\ntable = holding\naddress = 1\ntype = uint16\n")
    with open(os.path.join(D, "t.csv"), "w") as f:
        f.write("name,table,address,type\nx,holding,0,uint16\n")
    for extra, where, why in (
            ("[map m]\nunit = 100\ndevice_registers = rows.csv\ndevice0 = m1, 0\ndevice1 = m1, 5\n", ":19: [map m] device",
             "placed already"),
            ("[map m]\nunit = 100\ndevice_registers = rows.csv\n", ":15: [map m]", "go together"),
            ("[map m]\nunit = 100\ndevice_registers = rows.csv\ndevice0 = plc, 0\n", "rows.csv:2: [map m]",
             "'plc.x': no such tag"),
            ("[map m]\nunit = 100\ndevice_registers = rows.csv\ndevice0 = m1, 65535\n", ":18: [map m] device = m1, 65535",
             "ends past address 65535")):
        check_config_refused(cfg, base_m + extra, where, why)
    with open(cfg, "w") as f:
        f.write(base_m + "[map m]\nunit = 100\ndevice_registers = rows.csv\ndevice0 = m1, 7\n")
    r = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True)
    check(r.returncode == 0, f"a template device placed in a map loads: {(r.stdout + r.stderr).strip()[:200]}")
    with open(cfg, "w") as f:
        f.write(base + "[tag c]\nexpr = x * 2\ninverse = value // 2\n")
    r = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True)
    check(r.returncode == 0, f"an inverse of the one input loads: {(r.stdout + r.stderr).strip()[:200]}")


if __name__ == "__main__":
    run_tests("test_tags_inverse", [test_inverse, test_check_errors], cleanup=[D])
