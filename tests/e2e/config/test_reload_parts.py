#!/usr/bin/python3
"""A reload names every part it applied (issue 41, each part's own reload):
a real `rtugw run` with two buses on the built-in simulator; one SIGHUP
changes a bus beyond its line keys (queue_depth: restarted in place),
[router] (exploration: rebuilt) and [http]'s port. After it: applied,
nothing waits, and both the log's "SIGHUP: reloaded" line and /status
last_reload.applied (read at the new port) name buses, router and http;
the old port no longer answers. Then a SIGHUP of the same file: buses and
router are not named (the list says what changed, it is not fixed text),
and a bus whose restart cannot apply would be named as waiting -- covered
by test_bus_live. Run it under load too: RTUGW_BURN=2."""
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import Gateway, check, free_port, run_tests, wait_for  # noqa: E402
from test_bus_live import reloaded  # noqa: E402
from test_live_change import hup  # noqa: E402

BUS_B = "[bus lineb]\nport = sim:1,2\nbaud = 115200\nresponse_timeout_ms = 150\nretries = 1\n"
ROUTER = "[router]\nexploration = 0.05\n"


def reload_lines(g):
    return [ln for ln in g.log_text().splitlines() if "SIGHUP: reloaded" in ln]


def applied_in_log(line):
    """The names after "applied " up to the first ';' (what waits or is queued follows)."""
    return line.split(": applied ", 1)[1].split(";")[0].split(" (")[0].split()


def test_one_sighup_names_every_part():
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=BUS_B, extra_tcp="unit2 = lineb:1\n", extra=ROUTER)
    old_http = g.http_port
    new_http = free_port()
    text = (g.text.replace(BUS_B, BUS_B + "queue_depth = 8\n")
            .replace("exploration = 0.05\n", "exploration = 0.2\n")
            .replace(f"[http]\nport = {old_http}\n", f"[http]\nport = {new_http}\n"))
    check(text.count("queue_depth = 8") == 1 and "exploration = 0.2" in text and f"port = {new_http}" in text,
          "the file changes a bus, [router] and [http]")
    rev = (g.status()["last_reload"] or {}).get("revision")
    hup(g, text)
    g.http_port = new_http
    check(wait_for(lambda: wait_status(g) and reloaded(g, rev), 5), "reloaded, /status at the new port")
    st = g.status()
    last = st["last_reload"]
    check(last["result"] == "applied" and st["restart_needed"] == "" and last["waits"] == "",
          f"applied, nothing waits ({last})")
    names = last["applied"].split()
    for part in ("buses", "router", "http", "log_level", "tcp"):
        check(part in names, f"/status last_reload.applied names {part} ({last['applied']!r})")
    check(len(names) == len(set(names)), f"each part named once ({names})")
    lines = reload_lines(g)
    check(len(lines) == 1, f"one reload line ({lines})")
    logged = applied_in_log(lines[-1])
    check(sorted(logged) == sorted(names), f"the log line names what /status does ({logged} vs {names})")
    check("restarting in place at its new settings" in g.log_text(), "the bus restarted in place (the log)")
    check([b.get("name") for b in st["buses"]] == ["line", "lineb"], f"both buses still there ({st['buses']})")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{old_http}/status", timeout=1)
        moved = False
    except OSError:
        moved = True
    check(moved, f"the old HTTP port {old_http} no longer answers")
    # the same file again: nothing of those changed, so they are not named
    rev = last["revision"]
    n = len(lines)
    with open(g.cfg, "a") as f:   # a comment: a new revision, no change
        f.write("; again\n")
    g.text += "; again\n"
    hup(g, g.text)
    check(wait_for(lambda: reloaded(g, rev) and len(reload_lines(g)) > n, 5), "reloaded again")
    last = g.status()["last_reload"]
    names = last["applied"].split()
    check(last["result"] == "applied" and not {"buses", "router", "bus_keys"} & set(names),
          f"an unchanged file names neither buses nor router ({last['applied']!r})")
    check("log_level" in names and "http" in names, f"but what always applies ({names})")
    check(g.p.poll() is None, "the daemon runs")
    g.stop()


def wait_status(g):
    try:
        return g.status() is not None
    except OSError:
        return False


if __name__ == "__main__":
    run_tests("test_reload_parts", [test_one_sighup_names_every_part])
