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
  - seq +1 per message throughout, no NBIRTH/NDEATH from the reloads.

Poll groups (their items POLLNAME.N are metrics of their device too):
  - d1 {a1, P.0, P.1 (registers: Double), C.0, C.1 (coils: Boolean)}, d2
    {Q.0}: births name exactly those, and the first values bring no rebirth;
  - a reload that changes a group's interval only: no DDEATH, no DBIRTH;
  - SIGHUP with C removed: DDEATH d1, a DBIRTH of d1 without C.*;
  - SIGHUP with P renamed R: DDEATH d1, a DBIRTH naming R.0, R.1, not P.*;
  - SIGHUP with Q removed: d2 (nothing left) gets DDEATH and no birth."""
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


def test_poll_groups():
    b = Broker("sppolls")
    host = sp.Host(b.port, "host-polls")
    groups = (test_mqtt.poll("P", "d1", 3, 10, 2) + test_mqtt.poll("C", "d1", 1, 0, 2) +
              test_mqtt.poll("Q", "d2", 3, 0, 1))
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=DEVICES + tag("a1", "d1", 0) + groups,
                extra=sp.sp_section(b.port), dir=WORK)
    first = g.text
    check(sp.births_of(host, 0) is not None, "an NBIRTH and a DBIRTH of d1 and of d2")
    time.sleep(1.5)   # every group has answered: its first values are no new metrics
    d1 = births(host, 0, "DBIRTH", "d1")
    check(d1 and names(d1[-1]) == ["C.0", "C.1", "P.0", "P.1", "a1"], f"d1's DBIRTH: {d1 and names(d1[-1])}")
    types = {sp.one(m, 1): sp.one(m, 4) for m in sp.metrics_of(d1[-1][2])}
    check(types.get("P.0") == 10 and types.get("C.0") == 11, f"registers Double, coils Boolean: {types}")
    check(len(d1) == 1, f"one DBIRTH of d1, no rebirth at the groups' first values: {len(d1)}")
    d2 = births(host, 0, "DBIRTH", "d2")
    check(len(d2) == 1 and names(d2[-1]) == ["Q.0"], f"d2's one DBIRTH names Q.0: {[names(m) for m in d2]}")
    check(wait_for(lambda: sp.fold(host.since(0), "d2")[0].get("Q.0") == 2000, 10),
          f"Q.0 carries slave 2's register 0: {sp.fold(host.since(0), 'd2')[0]}")

    def reloaded(text, n):
        start = reload(g, text, host)
        check(wait_for(lambda: g.log_text().count("poll groups applied") >= n, 10), f"reload {n} applied")
        return start

    # an interval changed only: the same sets, nothing to be born again
    text = first.replace("address = 10\ncount = 2\ninterval_ms = 200", "address = 10\ncount = 2\ninterval_ms = 300")
    check(text != first, "the test's edit applies")
    start = reloaded(text, 1)
    time.sleep(1.5)
    verbs = [(m[0], m[1]) for m in host.since(start) if m[0] != "DDATA"]
    check(not verbs, f"an unrelated reload sends no death or birth: {verbs}")

    # C removed
    text = text.replace(test_mqtt.poll("C", "d1", 1, 0, 2), "")
    start = reloaded(text, 2)
    check(wait_for(lambda: births(host, start, "DBIRTH", "d1"), 10), "after C's removal, a new DBIRTH of d1")
    verbs = [(m[0], m[1]) for m in host.since(start) if m[0] != "DDATA"]
    check(("DDEATH", "d1") in verbs and verbs.index(("DDEATH", "d1")) < verbs.index(("DBIRTH", "d1")),
          f"DDEATH d1 before its new DBIRTH: {verbs}")
    nb = births(host, start, "DBIRTH", "d1")[-1]
    check(names(nb) == ["P.0", "P.1", "a1"], f"the new DBIRTH of d1 has no C.*: {names(nb)}")
    check(not births(host, start, "DDEATH", "d2"), "d2, unchanged, is left alone")

    # P renamed R
    text = text.replace("[poll P]", "[poll R]")
    start = reloaded(text, 3)
    check(wait_for(lambda: births(host, start, "DBIRTH", "d1"), 10), "after P's rename, a new DBIRTH of d1")
    check(births(host, start, "DDEATH", "d1"), "DDEATH d1 before the rename's DBIRTH")
    nb = births(host, start, "DBIRTH", "d1")[-1]
    check(names(nb) == ["R.0", "R.1", "a1"], f"the renamed group's DBIRTH names R.* only: {names(nb)}")
    state = lambda: sp.fold(host.since(start), "d1")[0]   # noqa: E731
    check(wait_for(lambda: state().get("R.0") == 1010, 10), f"R.0 carries slave 1's register 10: {state()}")

    # Q removed: d2 has nothing left
    text = text.replace(test_mqtt.poll("Q", "d2", 3, 0, 1), "")
    start = reloaded(text, 4)
    check(wait_for(lambda: births(host, start, "DDEATH", "d2"), 10), "d2, with no metric left, gets DDEATH")
    time.sleep(1.5)
    after = host.since(start)
    i = next(k for k, m in enumerate(after) if m[0] == "DDEATH" and m[1] == "d2")
    late = [m[0] for m in after[i + 1:] if m[1] == "d2"]
    check(not late, f"nothing of d2 after its DDEATH: {late}")
    check(not births(host, start, "DDEATH", "d1"), "d1, unchanged, is left alone")

    bad = sp.seq_ok(host.since(0))
    check(not bad, f"seq +1 per message across the reloads: {bad[:3]}")
    verbs = [m[0] for m in host.since(0)]
    check(verbs.count("NBIRTH") == 1 and "NDEATH" not in verbs, "the node was born once, never again")
    g.stop()
    host.close()
    b.stop()


def main():
    run_tests("test_sparkplug_reload", [test_removed_metrics, test_poll_groups], cleanup=[WORK, test_mqtt.WORK])


if __name__ == "__main__":
    main()
