#!/usr/bin/python3
"""rtugw check: exit 0 for valid files, 2 with FILE:LINE messages otherwise;
`rtugw run` refuses every file check refuses, with the same messages and exit
2, before it opens anything; `check --open` opens the ports and names the
system's reason when one cannot be opened."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, SLOWDOWN, check as _check, finish, free_port  # noqa: E402
SRC = os.environ.get("RTUGW_SRCDIR", ".")


def check(cond, what):
    _check(cond, what, quiet=True)


def rtugw(*args, timeout=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def run(*args):
    return rtugw("check", *args)


p = run("--demo")
check(p.returncode == 0 and "ok: 1 bus, 3 devices, 2 poll groups" in p.stdout, f"demo: {p.stdout} {p.stderr}")
p = run("-c", os.path.join(SRC, "config", "example.ini"))
check(p.returncode == 0, f"example.ini: {p.stderr}")
p = run("--demo", "--print")
check(p.returncode == 0 and "[bus sim]" in p.stdout, "print demo")

tmp = tempfile.mkdtemp(prefix="rtugw-check-")


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


bad = write("bad.ini", "[bus a]\nport = /dev/x\nbaud = fast\n")
p = run("-c", bad)
check(p.returncode == 2, f"bad file exit {p.returncode}")
check(f"{bad}:3: [bus a] baud = 'fast'" in p.stderr, f"message: {p.stderr!r}")

p = run("-c", "/nonexistent.ini")
check(p.returncode == 2 and "/nonexistent.ini: cannot open" in p.stderr, f"missing file: {p.stderr!r}")
check(run().returncode == 2, "no arguments is a usage error")
check(run("--help").returncode == 0, "--help")

# Every file below is refused by check with the messages shown, and by run
# with exactly the same output and exit 2: nothing run would refuse short of
# opening a device passes check. The servers get free ports and the bus is
# the simulator, so a run that wrongly accepted a file would start (and is
# stopped by the timeout), not fail for some other reason.
TAIL = "[tcp]\n{tcp_bind}port = {tcp}\n[http]\n{http_bind}port = {http}\n"
CASES = [
    ("sim list with slave 999", "[bus a]\nport = sim:1,2,999\n",
     ["{f}:2: [bus a] port = 'sim:1,2,999': expected sim:SLAVE,SLAVE,..."]),
    ("sim list empty", "[bus a]\nport = sim:\n", ["{f}:2: [bus a] port = 'sim:'"]),
    ("sim list with a slave twice", "[bus a]\nport = sim-paced:3,3\n",
     ["{f}:2: [bus a] port = 'sim-paced:3,3': expected sim:SLAVE,SLAVE,..."]),
    ("sim list too long", "[bus a]\nport = sim:" + ",".join(str(i) for i in range(1, 34)) + "\n",
     ["{f}:2: [bus a] port = 'sim:1,2,3,", "1 to 32 slaves"]),
    ("baud the driver cannot set", "[bus a]\nport = sim\nbaud = 300\n",
     ["{f}:3: [bus a] baud = '300': baud 300: not a speed the port can be set to; use one of 1200, 2400"]),
    ("a baud inside the range no port takes", "[bus a]\nport = sim\nbaud = 14400\n",
     ["{f}:3: [bus a] baud = '14400': baud 14400: not a speed the port can be set to; use one of 1200, "
      "2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600"]),
    ("empty misspelt sections", "[bus a]\nport = sim\n[bsu x]\n[tpc]\n",
     ["{f}:3: [bsu x]: unknown section", "{f}:4: [tpc]: unknown section"]),
    ("a name with extra words", "[bus a b]\nport = sim\n", ["{f}:1: [bus a b]: one name expected"]),
    ("a key twice", "[bus a]\nport = sim\nport = sim:1\n",
     ["{f}:3: [bus a] port = 'sim:1': given twice in this section (first at line 2)"]),
    ("a section twice in a row", "[bus a]\nport = sim\n[bus a]\nretries = 2\n",
     ["{f}:3: [bus a]: section defined twice (first at line 1)"]),
    ("an indented line", "[bus a]\nport = sim\n  baud = 9600\n",
     ["{f}:3: [bus a] port = 'baud = 9600': the line is indented, so it continues port from line 2"]),
    ("tcp bind a host name", "[bus a]\nport = sim\n",
     ["{f}:4: [tcp] bind = 'localhost': expected an IPv4 address"], "bind = localhost\n"),
    ("http bind a host name", "[bus a]\nport = sim\n",
     ["{f}:6: [http] bind = 'localhost': expected an IPv4 address"], "", "bind = localhost\n"),
    # a listener's bus_share at or above a bus's queue_depth: it alone fills
    # the queue, which answers exception 06 (the storm back-pressure prevents)
    ("bus_share not below queue_depth", "[bus a]\nport = sim\n",
     ["{f}:4: [tcp] bus_share = '64': not below [bus a] queue_depth = 64 (default)"], "bus_share = 64\n"),
    ("queue_depth not above the default bus_share", "[bus a]\nport = sim\nqueue_depth = 3\n",
     ["{f}:3: [bus a] queue_depth = '3': not above [tcp] bus_share = 4 (default)"]),
    # issue 44: two buses and a device that names none: which bus it must name
    ("a device without bus among two buses", "[bus a]\nport = sim:1\n[bus b]\nport = sim:2\n"
     "[device d]\nslave = 1\n",
     ["{f}:5: [device d]: bus is required (2 buses are configured): name one of a, b"]),
    # issue 44: a [tag] wrong twice says both, not only the type
    ("a tag with a bad device and a bad type", "[bus a]\nport = sim:1\n[device d]\nslave = 1\n"
     "[tag t]\ndevice = nosuch\ntable = holding\naddress = 1\ntype = float33\n",
     ["{f}:6: [tag t] device = 'nosuch': no such device", "{f}:9: [tag t] type = 'float33'"]),
]

for what, body, wanted, *binds in CASES:
    tcp_bind, http_bind = (binds + ["", ""])[:2]
    f = write("case.ini", body + TAIL.format(tcp_bind=tcp_bind, http_bind=http_bind, tcp=free_port(),
                                             http=free_port()))
    c = run("-c", f)
    check(c.returncode == 2, f"{what}: check exit {c.returncode}: {c.stdout!r} {c.stderr!r}")
    for w in wanted:
        check(w.format(f=f) in c.stderr, f"{what}: check says {w.format(f=f)!r}: {c.stderr!r}")
    try:
        r = rtugw("run", "-c", f, timeout=10 * SLOWDOWN)
        check(r.returncode == 2, f"{what}: run exit {r.returncode}: {r.stderr!r}")
        check(r.stderr == c.stderr, f"{what}: run says what check says: {r.stderr!r} vs {c.stderr!r}")
    except subprocess.TimeoutExpired:
        check(False, f"{what}: run started on a file check refuses")

good = write("good.ini", "[bus a]\nport = sim:1,2,3\nbaud = 9600\n[device d]\nslave = 1\n"
             "[tcp]\nport = 1502\nunit7 = a:2\n")
p = run("-c", good)
check(p.returncode == 0 and "ok: 1 bus, 1 device" in p.stdout, f"good file: {p.stdout!r} {p.stderr!r}")

# check --open: ports opened as run opens them. A pseudo-terminal opens; a
# directory, a plain file and a missing path are refused with the system's
# reason (a directory used to read "no such serial port: Success").
master, slave = os.openpty()
pty = os.ttyname(slave)
plain = write("plain", "")
ports = write("ports.ini", f"[bus pty]\nport = {pty}\n[bus sim]\nport = sim\n[tcp]\nenabled = false\n")
p = run("--open", "-c", ports)
check(p.returncode == 0, f"--open on a pty: exit {p.returncode}: {p.stderr!r}")
check(f"[bus pty] port = '{pty}': opened" in p.stdout, f"--open says opened: {p.stdout!r}")
check("[bus sim] port = 'sim': the built-in simulator" in p.stdout, f"--open on sim: {p.stdout!r}")
p = run("-c", ports)
check(p.returncode == 0 and "opened" not in p.stdout, f"without --open nothing is opened: {p.stdout!r}")
for port, reason in [(tmp, "not a serial port: Is a directory"),
                     (plain, "not a serial port: Inappropriate ioctl for device"),
                     ("/nonexistent/ttyUSB9", "No such file or directory")]:
    f = write("open.ini", f"[tcp]\nenabled = false\n[bus a]\nport = {port}\n")
    p = run("--open", "-c", f)
    check(p.returncode == 1, f"--open {port}: exit {p.returncode}")
    check(f"{f}:4: [bus a] port = '{port}': {reason}" in p.stderr, f"--open {port}: {p.stderr!r}")
    check("Success" not in p.stderr, f"--open {port}: no 'Success': {p.stderr!r}")

# Addresses: in the default mode a Modicon-looking or one-based map and
# overlapping tags are warned about, naming file and line, and still pass
# (exit 0); with addressing = modicon (a device's, or [gateway]'s for all)
# the same numbers are table and offset and nothing is warned; a Modicon
# number that is none, or that disagrees with the table, is refused.
write("map.csv", "name,table,address,type\nflow,holding,40101,float32\nstate,holding,40102,uint16\n"
      "count,holding,7,int32\ntotal,holding,9,int32\n")
f = write("map.ini", "[bus b]\nport = sim:1\n[device plc]\nbus = b\nslave = 1\ntags_file = map.csv\n"
          "[tag level]\ndevice = plc\ntable = input\naddress = 30005\ntype = uint16\n")
p = run("-c", f)
mapcsv = os.path.join(tmp, "map.csv")
check(p.returncode == 0 and
      f"{f}:7: warning: tag 'level' at 30005 looks like a Modicon address (input register 4)" in p.stderr and
      f"{mapcsv}:2: warning: tag 'flow' at 40101 looks like a Modicon address (holding register 100)" in p.stderr and
      f"{mapcsv}:3: warning: tag 'state' (holding 40102..40102) overlaps tag 'flow' (40101..40102)" in p.stderr and
      f"{mapcsv}:2: warning: device 'plc': all 3 of its 32/64-bit tags start at an odd address" in p.stderr,
      f"default addressing: Modicon-looking, one-based and overlapping tags warned, by file and line, exit 0: "
      f"{p.returncode} {p.stderr!r}")
write("modicon.csv", "name,table,address,type\nflow,,40101,float32\nstate,holding,400103,uint16\n"
      "run,,00001,bool\n")
for where, dev in (("[device]", "addressing = modicon\n"), ("[gateway]", "")):
    head = "[gateway]\naddressing = modicon\n" if not dev else ""
    f = write("modicon.ini", head + f"[bus b]\nport = sim:1\n[device plc]\nbus = b\nslave = 1\n{dev}"
              "tags_file = modicon.csv\n[tag level]\ndevice = plc\naddress = 30005\ntype = uint16\n")
    p = run("-c", f)
    check(p.returncode == 0 and "warning" not in p.stderr and "4 tags" in p.stdout,
          f"addressing = modicon in {where}: 5- and 6-digit forms, no table needed, no warning: {p.stdout} {p.stderr!r}")
for text, why in (("40000", "Modicon numbers count from 1"), ("50001", "starts with 0 (coil), 1"),
                  ("465537", "count from 1 (400001 is holding 0) up to 65536")):
    write("modicon.csv", f"name,table,address,type\nx,,{text},uint16\n")
    p = run("-c", f)
    check(p.returncode == 2 and f"modicon.csv:2:4: address: address '{text}'" in p.stderr and why in p.stderr,
          f"Modicon address {text} refused with its line and column: {p.stderr!r}")
f = write("modicon.ini", "[bus b]\nport = sim:1\n[device plc]\nbus = b\nslave = 1\naddressing = modicon\n"
          "[tag level]\ndevice = plc\ntable = holding\naddress = 30005\ntype = uint16\n")
p = run("-c", f)
check(p.returncode == 2 and f"{f}:10: [tag level] address = '30005': address '30005' is a Modicon input "
      "address, the table says holding" in p.stderr, f"a Modicon address against its table: {p.stderr!r}")
f = write("modicon.ini", "[bus b]\nport = sim:1\n[device plc]\nbus = b\nslave = 1\naddressing = one\n")
p = run("-c", f)
check(p.returncode == 2 and f"{f}:6: [device plc] addressing = 'one': expected protocol" in p.stderr,
      f"addressing takes protocol or modicon: {p.stderr!r}")

# run on a directory: the log carries the same real reason while it retries.
f = write("dir.ini", f"[bus a]\nport = {tmp}\n" + TAIL.format(tcp_bind="", http_bind="", tcp=free_port(), http=free_port()))
d = subprocess.Popen([BIN, "run", "-c", f], stderr=subprocess.PIPE, text=True)
line = d.stderr.readline()
d.terminate()
d.wait(timeout=10 * SLOWDOWN)
check("not a serial port: Is a directory; retrying" in line, f"run on a directory logs: {line!r}")
os.close(master)
os.close(slave)

# config/example.ini: every commented block (";[section]" or a ";key = value"
# run inside a live section) is an option its comment says to uncomment by
# removing the ';'. Each, uncommented alone in place, must pass check; a
# header commented as prose ("; [mqtt] -- text") would not and is refused.
import re  # noqa: E402
ex_dir = os.path.join(tmp, "example")
os.mkdir(ex_dir)
shutil.copy(os.path.join(SRC, "config", "example-tags.csv"), ex_dir)
with open(os.path.join(SRC, "config", "example.ini")) as f:
    ex_lines = f.read().split("\n")
option = re.compile(r"^;(\[|[a-z_0-9]+ *=)")
check(not [ln for ln in ex_lines if re.match(r"^[;#] +\[[a-z]", ln)],
      "example.ini: no section header commented with a space (it reads as prose, not as an option)")
blocks, start = [], None
for i, ln in enumerate(ex_lines + [""]):
    if option.match(ln) and start is None:
        start = i
    elif not option.match(ln) and start is not None:
        blocks.append((start, i))
        start = None
check(len(blocks) >= 9, f"example.ini: {len(blocks)} commented blocks found")
for a, b in blocks:
    text = "\n".join(ex_lines[:a] + [ln[1:] for ln in ex_lines[a:b]] + ex_lines[b:])
    f = os.path.join(ex_dir, "example.ini")
    with open(f, "w") as out:
        out.write(text)
    p = run("-c", f)
    check(p.returncode == 0, f"example.ini lines {a + 1}-{b} uncommented: {p.stderr.strip()!r}")

# One rule for service sections: present = on, enabled = false = off. Old
# files that said enabled = true keep working; a [tls] present without it is
# now on, and its missing keys say how to keep it off.
ON = [("[tls]\nport = 8802\n", 2, "cert_file is required (a section present is on; enabled = false keeps it off)"),
      ("[tls]\nenabled = false\n", 0, "http on\n"),
      ("[tls]\nenabled = true\nport = 8802\n", 2, "key_file is required"),
      ("[rtu_tcp]\nport = 1600\n", 0, "http on, rtu_tcp on\n"),
      ("[rtu_tcp]\nenabled = false\nport = 1600\n", 0, "http on\n"),
      ("[mqtt]\nhost = 127.0.0.1\n", 0, "http on, mqtt on\n"),
      ("[mqtt]\nenabled = false\n", 0, "http on\n"),
      ("[mqtt]\nenabled = maybe\n", 2, "[mqtt] enabled = 'maybe': expected true or false")]
for body, rc, text in ON:
    f = write("on.ini", "[bus a]\nport = sim\n" + body)
    p = run("-c", f)
    check(p.returncode == rc and text in (p.stdout if rc == 0 else p.stderr),
          f"{body!r}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
# The friction a newcomer met (issue 33): each says what it means.
p = rtugw("--help")
bench = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("bench")]
check(p.returncode == 0 and bench and all(k in p.stdout for k in ("gateway", "soak", "transports", "mqtt")),
      f"rtugw --help lists the benchmarks, not 'parse' alone: {bench}")
p = rtugw("demo", "--help")
mb = [ln for ln in p.stdout.splitlines() if "mbpoll" in ln]
check(p.returncode == 0 and mb and " -1 " in mb[0], f"rtugw demo --help: its mbpoll line polls once (-1): {mb}")
# every key of rtugw.conf.5 starts its own paragraph (.TP, or .TQ to share the one after): frame_ring ran into write_token
with open(os.path.join(SRC, "man", "rtugw.conf.5")) as f:
    man = f.read().splitlines()
run_on = [man[i] for i in range(1, len(man)) if man[i].startswith('.BI "') and " = " in man[i] and man[i - 1] not in (".TP", ".TQ")]
check(not run_on, f"rtugw.conf.5: every key begins a paragraph (.TP): {run_on}")
# the start-up line: a front end that is off shows no address
tls_off = write("tlsoff.ini", "[bus a]\nport = sim\n" + TAIL.format(tcp_bind="", http_bind="", tcp=free_port(),
                                                                    http=free_port()))
try:
    r = rtugw("run", "-c", tls_off, timeout=3 * SLOWDOWN)
    out = r.stderr
except subprocess.TimeoutExpired as e:
    out = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
line = [ln for ln in out.splitlines() if "modbus tls" in ln]
check(line and "modbus tls off;" in line[0] and "off 127.0.0.1" not in line[0],
      f"the log: 'modbus tls off', no address for what does not listen: {line}")

shutil.rmtree(tmp)
finish("check cli")
