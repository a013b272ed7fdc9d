#!/usr/bin/python3
"""Tags in the daemon against a device nobody here wrote: a pymodbus RTU
server (Debian's pymodbus 3.0) on a pseudo-terminal pair made by socat.

- slave 5 holds words for a tag set of every type in every order (device
  default BADC), tags from a tags_file: /tags equals what Python's struct
  computes from the same words; PUT of every writable type gives struct's
  words in pymodbus's registers, and a coil;
- slave 6 has a sparse register map (pymodbus answers exception 02 to a read
  over its holes): the planner's read across the hole is split after the
  first 02 and every tag comes good.
Seeded: replay with RTUGW_SEED=..."""
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, procs, run_tests  # noqa: E402
from tagscheck import TOKEN, all_good, check_values, put, tag_values, wait_for, write_every_type  # noqa: E402
from tagsref import csv_text, make_tagset  # noqa: E402

SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_tags_pymodbus: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)
for tool in ("socat",):
    if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
        print(f"missing {tool}: install the Debian package {tool} (scripts/bootstrap does)")
        sys.exit(1)


def test_pymodbus_server():
    d = tempfile.mkdtemp(prefix="rtugw-tags-pymodbus-")
    gw_end, plc_end = os.path.join(d, "gw"), os.path.join(d, "plc")
    socat = subprocess.Popen(["socat", f"pty,raw,echo=0,link={gw_end}", f"pty,raw,echo=0,link={plc_end}"])
    procs.append(socat)
    check(wait_for(lambda: os.path.exists(gw_end) and os.path.exists(plc_end), 5), "socat made the pty pair")

    tags = make_tagset(rng, base=100, default_order="BADC")
    hr, ir = [0] * 1000, [0] * 1000
    for t in tags:
        store = hr if t["table"] == "holding" else ir
        store[t["address"]:t["address"] + len(t["words"])] = t["words"]
    # slave 6: registers 100..102 and 108..109 only; the hole 103..107 answers 02
    sparse = {100: 11, 101: 0x4148, 102: 0, 108: 7, 109: 8}
    server_log = os.path.join(d, "server.log")
    server = subprocess.Popen(["/usr/bin/python3", "-c", textwrap.dedent(f"""
    import logging
    logging.basicConfig(filename={server_log!r}, level=logging.DEBUG)
    from pymodbus.server import StartSerialServer
    from pymodbus.transaction import ModbusRtuFramer
    from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusSparseDataBlock, ModbusSlaveContext,
                                    ModbusServerContext)
    plc = ModbusSlaveContext(hr=ModbusSequentialDataBlock(0, {hr!r}), ir=ModbusSequentialDataBlock(0, {ir!r}),
                             co=ModbusSequentialDataBlock(0, [0] * 100), zero_mode=True)
    holes = ModbusSlaveContext(hr=ModbusSparseDataBlock({sparse!r}), zero_mode=True)
    StartSerialServer(context=ModbusServerContext(slaves={{5: plc, 6: holes}}, single=False),
                      framer=ModbusRtuFramer, port={plc_end!r}, baudrate=19200)
    """)])
    procs.append(server)
    check(wait_for(lambda: os.path.exists(server_log) and "Serial connection established" in open(server_log).read(),
                   30, step=0.1), "pymodbus RTU server started")

    with open(os.path.join(d, "tags.csv"), "w", newline="") as f:
        f.write(csv_text(tags, "plc"))
    devices = (f"[device plc]\nslave = 5\norder = BADC\ntags_file = {d}/tags.csv\n"
               "[tag valve]\ndevice = plc\ntable = coil\naddress = 10\ntype = bool\nwritable = true\n"
               "[device holes]\nslave = 6\n" +
               "".join(f"[tag h{a}]\ndevice = holes\ntable = holding\naddress = {a}\ntype = {typ}\ninterval_ms = 300\n"
                       for a, typ in ((100, "uint16"), (101, "float32"), (108, "uint16"), (109, "uint16"))))
    # pymodbus answers from Python: on a loaded machine its answers can take long, so a 2 s timeout.
    g = Gateway(bus=f"port = {gw_end}\nbaud = 19200\nparity = none\n", devices=devices, timeout_ms=2000, dir=d,
                extra=f"write_token = {TOKEN}\n")
    check(wait_for(lambda: all_good(g), 30, step=0.2), "every tag good (the holes' read split first)")
    check_values(g, tags, "pymodbus")
    v = tag_values(g)
    check(v["h100"]["value"] == 11 and v["h101"]["value"] == 12.5 and v["h108"]["value"] == 7 and
          v["h109"]["value"] == 8, f"the sparse device's tags after the split: {[v[n]['value'] for n in ('h100', 'h101', 'h108', 'h109')]}")
    m = g.metrics()
    check(m.get("rtugw_poller_splits_total", 0) >= 1 and "exception 02 (illegal data address) on holes holding 100+10"
          in g.log_text(), f"pymodbus's exception 02 split the read over the hole ({m.get('rtugw_poller_splits_total')})")
    write_every_type(g, rng, tags, "pymodbus", unit=5, settle=3.0)
    status, ans = put(g, "valve", "true")
    c = g.client()
    r = c.read_coils(10, 1, slave=5)
    c.close()
    check(status == 200 and ans["function"] == 5 and not r.isError() and r.bits[0] is True,
          f"a coil written with fc 5: {ans} {r}")
    print(json.dumps(g.status()["buses"][0]["devices"][0]["tags"]))
    g.stop()


run_tests("test_tags_pymodbus", (test_pymodbus_server,))
