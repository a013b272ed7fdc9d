#!/usr/bin/python3
"""rtugw demo shows the product: typed tags with values on /tags (a computed one too), every demo
slave polled (the pump too), the frame monitor on, and `--mqtt HOST:PORT`
publishing every PLC's values to a broker. The README's demo lines are run
as written there, read from README.md itself, with two changes only: the
ports (1502, 8502, 1883) become free ports of this test's (other tests and
people on the machine may hold those), and `./rtugw` becomes the binary
under test. The lines run with RTUGW_TOKEN set from the demo's first line
(`export RTUGW_TOKEN=...`, a random write token each start), as a user
pastes it; a second demo prints another token."""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, free_port, procs, run_tests, wait_for, wait_listening  # noqa: E402

SRC = os.environ.get("RTUGW_SRCDIR", ".")


def readme_blocks():
    """The ```sh blocks of README.md, each a list of its command lines."""
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    return [[ln for ln in b.splitlines() if ln.strip()] for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def localise(line, ports):
    for old, new in ports.items():
        line = line.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}").replace(f"-p {old} ", f"-p {new} ")
    return line.replace("./rtugw ", BIN + " ", 1) if line.startswith("./rtugw ") else line


def sh(line, timeout=20, env=None):
    """The line in bash (the README's comment is the shell's comment too); a
    line still running after timeout counts as failed (exit 124)."""
    try:
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(line, 124, out, f"still running after {timeout} s")


def test_demo_lines():
    blocks = readme_blocks()
    demo = [b for b in blocks if any(ln.startswith("mbpoll ") for ln in b)]
    mqtt = [b for b in blocks if any("--mqtt" in ln for ln in b)]
    check(len(demo) == 1 and len(mqtt) == 1, f"README.md has the demo's lines and its --mqtt lines ({blocks})")
    if not (demo and mqtt):
        return
    tcp, http = free_port(), free_port()
    ports = {1502: tcp, 8502: http}
    g = subprocess.Popen([BIN, "demo", "--quiet", "--tcp-port", str(tcp), "--http-port", str(http)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(g)
    first = g.stdout.readline()
    m = re.match(r"export RTUGW_TOKEN=([A-Za-z0-9_-]{44}) ", first)
    check(m, f"rtugw demo prints its write token first ({first!r})")
    env = {"RTUGW_TOKEN": m.group(1) if m else ""}
    check(wait_listening(http, g), "rtugw demo listens")

    def tags():
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/tags", timeout=5) as r:
            return json.loads(r.read())["tags"]
    wait_for(lambda: all(t["quality"] == "good" for t in tags()), 5)
    out = {}
    for line in demo[0]:
        p = sh(localise(line, ports), env=env)
        out[line.split()[0] + " " + line.split()[-1 if line.startswith("curl -X") else 1]] = p
        check(p.returncode == 0 and p.stdout, f"README line runs: {line} (exit {p.returncode}, {p.stderr[-200:]!r})")
    mb = next((p.stdout for k, p in out.items() if k.startswith("mbpoll")), "")
    check(all(f"[{i + 1}]: \t{1000 + i}" in mb for i in range(10)),
          f"mbpoll -1 reads slave 1's holding registers 0-9 once and ends ({mb[-200:]!r})")
    got = {t["name"]: t for t in tags()}
    want = {"boiler_temp": 100.5, "boiler_setpoint": 102, "boiler_burner_on": True, "boiler_runtime_s": 67568646,
            "pump_speed": 1500, "pump_running": True, "meter_energy": 2031647.01, "meter_voltage": 311}
    check(all(got.get(k, {}).get("value") == v and got[k]["quality"] == "good" for k, v in want.items()),
          f"/tags: typed tags with their values (the PUT's 1500 on pump_speed) "
          f"({ {k: got.get(k, {}).get('value') for k in want} })")
    check(all(got.get(k, {}).get("quality") == "good" and isinstance(got[k]["value"], (int, float))
              for k in ("pump_pressure", "meter_pulses")), "/tags: the live input registers' tags are good")
    dev = got.get("boiler_deviation", {})
    check(dev.get("quality") == "good" and dev.get("text") == "%.1f" % (want["boiler_temp"] - want["boiler_setpoint"]),
          f"/tags: the computed tag boiler_temp - boiler_setpoint ({dev})")
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/status", timeout=5) as r:
        st = json.loads(r.read())
    devs = {d["name"]: d for b in st["buses"] for d in b["devices"]}
    check(set(devs) == {"boiler", "pump", "meter"} and all(d["up"] and d["requests"] > 0 for d in devs.values()),
          f"every demo slave polled and up, the pump too ({ {k: (d['up'], d['requests']) for k, d in devs.items()} })")
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/frames?bus=sim", timeout=5) as r:
        frames = json.loads(r.read())
    check(frames.get("frames"), "the frame monitor is on: /frames has the bus's frames")
    p = sh(f"curl -sf -X PUT -H 'Authorization: Bearer demo' -d '{{\"value\": 1}}' "
           f"http://127.0.0.1:{http}/tags/pump_speed")
    check(p.returncode != 0, f"the old fixed token 'demo' writes nothing (curl exit {p.returncode})")
    g.terminate()
    g.wait(timeout=10)
    check(g.returncode == 0, f"rtugw demo stops cleanly (exit {g.returncode})")

    # --mqtt: a broker of the test's own on a free port stands for 127.0.0.1:1883
    d = tempfile.mkdtemp(prefix="rtugw-demo-")
    broker_port = free_port()
    with open(os.path.join(d, "m.conf"), "w") as f:
        f.write(f"listener {broker_port} 127.0.0.1\nallow_anonymous true\n")
    b = subprocess.Popen(["mosquitto", "-c", os.path.join(d, "m.conf")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    procs.append(b)
    check(wait_listening(broker_port, b), "the broker listens")
    ports = {1502: free_port(), 8502: free_port(), 1883: broker_port}
    run_line, sub_line = mqtt[0][0], mqtt[0][1]
    g = subprocess.Popen(shlex.split(localise(run_line, ports)) + ["--quiet", "--tcp-port", str(ports[1502]),
                                                                   "--http-port", str(ports[8502])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(g)
    second = g.stdout.readline()
    check(second.startswith("export RTUGW_TOKEN=") and second != first,
          "a second demo prints another token (random at each start)")
    t0 = time.time()
    p = sh(localise(sub_line, ports), timeout=20)
    lines = [ln.split(" ", 1) for ln in p.stdout.splitlines() if " " in ln]
    devices = {json.loads(m).get("device") for _, m in lines if m.startswith("{")}
    check(p.returncode == 0 and len(lines) == 6 and devices == {"boiler", "pump", "meter"},
          f"--mqtt: {sub_line!r} gets 6 data messages from every PLC within {time.time() - t0:.1f} s ({devices})")
    one = next((json.loads(m) for t, m in lines if t.endswith("/pump/data")), {})
    check(one.get("values", {}).get("pump_speed") == 2010 and one.get("gateway") == "demo",
          f"--mqtt: the pump's typed tags by name ({one})")
    boiler = next((json.loads(m) for t, m in lines if t.endswith("/boiler/data")), {}).get("values", {})
    check(boiler.get("boiler_deviation") == -1.5,
          f"--mqtt: the computed tag goes out with its device's tags ({boiler.get('boiler_deviation')})")
    g.terminate()
    g.wait(timeout=10)
    b.terminate()
    b.wait()
    check(g.returncode == 0, f"rtugw demo --mqtt stops cleanly (exit {g.returncode})")


run_tests("test_demo", (test_demo_lines,))
