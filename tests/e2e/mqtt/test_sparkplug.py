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
import os
import struct
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, rss_growth_bound_kib, status_kib, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402  (its brokers; its main() does not run on import)
from test_mqtt import Broker  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402
# The decoder, the hand-made commands, the host and the tag set: beside this file.
from sparkplugtest import (DATATYPE, EDGE, GROUP, TAGS, WORK, Host, births_of, command, decode_raw,  # noqa: E402
                           devices_text, field, fold, metric, metric_count, metrics_of, one, seq_ok, sim,
                           sp_section, tahu_reads, varint)


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
