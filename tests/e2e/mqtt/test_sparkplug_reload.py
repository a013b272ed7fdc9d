#!/usr/bin/python3
"""Sparkplug B and a live reload (issue 41, fault 7): a DBIRTH is the whole
metric set of its device, so a reload that removes or renames a tag must take
it out of the device's birth, and a device left with no tag must die.

rtugw as the edge node on Debian's mosquitto, paho as the host; every payload
decoded by `protoc --decode_raw` (test_sparkplug's decoder, field numbers of
the Sparkplug 3.0 payload definition).

  - d1 {a1, a2}, d2 {b1}: births name exactly those;
  - SIGHUP with a2 removed and b1 removed: DDEATH d1 then a DBIRTH d1 naming
    a1 only; DDEATH d2 and no DBIRTH or DDATA of d2 after it;
  - a host's Rebirth (NCMD): the DBIRTH of d1 names a1 only, none for d2;
  - SIGHUP with a1 renamed a3: DDEATH d1, DBIRTH d1 naming a3 only, a new
    alias (a host must not read a3's values as a1's);
  - seq +1 per message throughout, no NBIRTH/NDEATH from the reloads."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
import sparkplugtest as sp  # noqa: E402  (the Sparkplug tests' decoder, host and tag set)
from test_mqtt import Broker  # noqa: E402

WORK = sp.WORK


def tag(name, device, address):
    return (f"[tag {name}]\ndevice = {device}\ntable = holding\naddress = {address}\ntype = uint16\n"
            f"interval_ms = 100\n")


DEVICES = "[device d1]\nslave = 1\n[device d2]\nslave = 2\n"


def births(host, start, verb, device):
    return [m for m in host.since(start) if m[0] == verb and m[1] == device]


def names(msg):
    return sorted(sp.one(m, 1) for m in sp.metrics_of(msg[2]))


def aliases(msg):
    return {sp.one(m, 1): sp.one(m, 2) for m in sp.metrics_of(msg[2])}


def reload(g, text, host):
    start = host.count()
    with open(g.cfg, "w") as f:
        f.write(text)
    g.p.send_signal(signal.SIGHUP)
    return start


def test_removed_metrics():
    b = Broker("spreload")
    host = sp.Host(b.port, "host-reload")
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=DEVICES + tag("a1", "d1", 0) + tag("a2", "d1", 1) +
                tag("b1", "d2", 0), extra=sp.sp_section(b.port), dir=WORK)
    first = g.text
    msgs = sp.births_of(host, 0)
    check(msgs is not None, "an NBIRTH and a DBIRTH of d1 and of d2")
    d1 = births(host, 0, "DBIRTH", "d1")
    check(d1 and names(d1[-1]) == ["a1", "a2"], f"d1's DBIRTH names a1, a2: {d1 and names(d1[-1])}")
    old_alias = aliases(d1[-1]).get("a1")

    # a2 and b1 removed
    text = first.replace(tag("a2", "d1", 1), "").replace(tag("b1", "d2", 0), "")
    start = reload(g, text, host)
    check(wait_for(lambda: births(host, start, "DBIRTH", "d1"), 10), "after the reload, a new DBIRTH of d1")
    time.sleep(1.5)   # values of the devices go on; nothing more of d2 may come
    after = host.since(start)
    verbs = [(m[0], m[1]) for m in after if m[0] != "DDATA"]
    check(("DDEATH", "d1") in verbs and verbs.index(("DDEATH", "d1")) < verbs.index(("DBIRTH", "d1")),
          f"DDEATH d1 before its new DBIRTH: {verbs}")
    check(names(births(host, start, "DBIRTH", "d1")[-1]) == ["a1"],
          f"the new DBIRTH of d1 names a1 only: {names(births(host, start, 'DBIRTH', 'd1')[-1])}")
    check(("DDEATH", "d2") in verbs, f"d2, with no tag left, gets DDEATH: {verbs}")
    i = next(k for k, m in enumerate(after) if m[0] == "DDEATH" and m[1] == "d2")
    late = [m[0] for m in after[i + 1:] if m[1] == "d2"]
    check(not late, f"nothing of d2 after its DDEATH: {late}")
    check(not any(m[0] in ("NBIRTH", "NDEATH") for m in after), "the node was not born again")

    # a host's Rebirth: the current set only
    start = host.count()
    host.publish(f"spBv1.0/{sp.GROUP}/NCMD/{sp.EDGE}",
                 sp.command(sp.metric(name="Node Control/Rebirth", datatype=11, boolean=True)))
    check(wait_for(lambda: births(host, start, "DBIRTH", "d1"), 10), "Rebirth: NBIRTH and the DBIRTH of d1")
    time.sleep(0.5)
    check(names(births(host, start, "DBIRTH", "d1")[-1]) == ["a1"],
          f"after Rebirth, d1's DBIRTH names a1 only: {names(births(host, start, 'DBIRTH', 'd1')[-1])}")
    check(not births(host, start, "DBIRTH", "d2"), "after Rebirth, no DBIRTH of d2 (it has no metric)")

    # a1 renamed a3
    start = reload(g, text.replace("[tag a1]", "[tag a3]"), host)
    check(wait_for(lambda: births(host, start, "DBIRTH", "d1"), 10), "after the rename, a new DBIRTH of d1")
    nb = births(host, start, "DBIRTH", "d1")[-1]
    check(names(nb) == ["a3"], f"the renamed tag's DBIRTH names a3 only: {names(nb)}")
    check(aliases(nb).get("a3") not in (None, old_alias), f"a3 has an alias of its own: {aliases(nb)}, a1 had {old_alias}")
    check(births(host, start, "DDEATH", "d1"), "DDEATH d1 before the rename's DBIRTH")
    state = lambda: sp.fold(host.since(start), "d1")[0]   # noqa: E731
    check(wait_for(lambda: state().get("a3") == 1000, 10), f"a3 carries slave 1's register 0: {state()}")

    bad = sp.seq_ok(host.since(0))
    check(not bad, f"seq +1 per message across the reloads: {bad[:3]}")
    g.stop()
    host.close()
    b.stop()


def main():
    run_tests("test_sparkplug_reload", [test_removed_metrics], cleanup=[WORK, test_mqtt.WORK])


if __name__ == "__main__":
    main()
