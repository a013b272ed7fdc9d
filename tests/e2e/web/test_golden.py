#!/usr/bin/python3
"""The shape of what monitoring reads, held by golden files (issue 41: "/status
JSON paths and /metrics series names of `rtugw demo` and config/example.ini
are unchanged"): a dashboard, a Prometheus rule or a script keyed on a path
or a series name breaks silently when a refactoring renames it.

For `rtugw demo` and for config/example.ini (its serial port replaced by the
simulator, its ports by free ones), the daemon runs until every device has
been polled, then:
  - /status: every JSON path, arrays collapsed to [] (the union of their
    elements' paths), one per line, sorted;
  - /metrics: every series name (the text before '{' or ' '), sorted, unique;
compared with tests/golden/NAME.status and NAME.metrics. A difference is
printed as lines added and removed. A deliberate change is recorded with
`make golden` (RTUGW_GOLDEN_UPDATE=1), and the diff of the golden files is
then part of the commit that makes it, for review."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish, free_port, procs, sanitizer_env, wait_listening  # noqa: E402

SRC = os.environ.get("RTUGW_SRCDIR", ".")
GOLDEN = os.path.join(SRC, "tests", "golden")
UPDATE = os.environ.get("RTUGW_GOLDEN_UPDATE") == "1"


def paths(v, prefix=""):
    out = set()
    if isinstance(v, dict):
        for k, x in v.items():
            out |= paths(x, f"{prefix}.{k}")
    elif isinstance(v, list):
        out.add(prefix + "[]")
        for x in v:
            out |= paths(x, prefix + "[]")
    else:
        out.add(prefix or ".")
    return out


def series(text):
    return {re.split(r"[{ ]", ln, 1)[0] for ln in text.splitlines() if ln and not ln.startswith("#")}


def get(port, path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read().decode()


def settled(port, seconds=15):
    """/status once every bus has answered and no device waits for a first poll."""
    deadline, st = time.time() + seconds, {}
    while time.time() < deadline:
        st = json.loads(get(port, "/status"))
        if all(b.get("answers", b.get("requests", 0)) for b in st.get("buses", [])) and st.get("buses"):
            time.sleep(1.5)   # a second round: every tag has a value, every counter a line
            return json.loads(get(port, "/status"))
        time.sleep(0.2)
    return st


def compare(name, kind, lines):
    path = os.path.join(GOLDEN, f"{name}.{kind}")
    text = "".join(ln + "\n" for ln in sorted(lines))
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path} ({len(lines)} lines)")
        return
    try:
        with open(path) as f:
            want = set(f.read().splitlines())
    except OSError as e:
        check(False, f"{path}: {e} (make golden writes it)")
        return
    added, removed = sorted(set(lines) - want), sorted(want - set(lines))
    for ln in added:
        print(f"  + {ln}")
    for ln in removed:
        print(f"  - {ln}")
    check(not added and not removed,
          f"{name} {kind}: the same {len(want)} lines as {path} ({len(added)} added, {len(removed)} removed; "
          f"a deliberate change: make golden, and commit the diff)")


def run_and_compare(name, argv, http):
    log = tempfile.TemporaryFile()
    p = subprocess.Popen(argv, stdout=log, stderr=log, env=sanitizer_env())
    procs.append(p)
    up = wait_listening(http, p)
    check(up, f"{name}: listening")
    if not up:
        log.seek(0)
        print(log.read().decode(errors="replace")[-2000:])
        return
    st = settled(http)
    compare(name, "status", paths(st))
    compare(name, "metrics", series(get(http, "/metrics")))
    p.terminate()
    p.wait(timeout=10)


def main():
    tcp, http = free_port(), free_port()
    run_and_compare("demo", [BIN, "demo", "--quiet", "--tcp-port", str(tcp), "--http-port", str(http)], http)

    with open(os.path.join(SRC, "config", "example.ini")) as f:
        text = f.read()
    d = tempfile.mkdtemp(prefix="rtugw-golden-")
    tcp, http, tls = free_port(), free_port(), free_port()
    text = (text.replace("port = /dev/ttyUSB0", "port = sim:1")
            .replace("port = 1502", f"port = {tcp}").replace("port = 8502", f"port = {http}")
            .replace("port = 802", f"port = {tls}"))
    for csv in ("example-tags.csv",):
        src = os.path.join(SRC, "config", csv)
        if os.path.exists(src):
            with open(src) as f, open(os.path.join(d, csv), "w") as g:
                g.write(f.read())
    cfg = os.path.join(d, "example.ini")
    with open(cfg, "w") as f:
        f.write(text)
    run_and_compare("example", [BIN, "run", "-c", cfg], http)
    finish("golden /status paths and /metrics series")


if __name__ == "__main__":
    main()
