#!/usr/bin/python3
"""[http] enabled made live both ways (issue 41), against a real `rtugw run`,
checked from the outside, while one pymodbus client on one connection reads
throughout (0 answers lost or wrong):
  - off by PUT /api/config: the server turns itself off under the PUT, which
    still gets its whole 200 (restart_needed empty); the port refuses at
    once; an idle keep-alive connection is closed;
  - off by SIGHUP: the port refuses;
  - on by SIGHUP, both while the closed server still drains (turned on again
    at once) and after it was freed: /status answers, last_reload applied,
    restart_needed empty;
  - the frame rings (frame_ring, recorded by a bus actor on a worker) kept
    across off and on, recording again;
  - on with the port taken by another socket: http.port named (log), and
    the next SIGHUP once it is free turns it on.
Several rounds; the daemon exits cleanly (sanitizer builds: no report)."""
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, HERE)
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
from test_live_http import TOKEN, Live, Reader, frames, refused  # noqa: E402  (its reader, client and checks)


def closed(conn):
    """True when the server has closed this kept-alive connection."""
    if conn.sock is None:
        return True   # http.client closed it itself: the answer said Connection: close
    conn.sock.settimeout(2)
    try:
        return conn.sock.recv(1) == b""
    except OSError:
        return True


def hup(g, text):
    g.rewrite(text)
    g.p.send_signal(signal.SIGHUP)


def turn_on(live, g, on, round_, rings=True):
    hup(g, on)
    check(wait_for(lambda: live.get("/status")[0] == 200, 5), f"round {round_}: on by SIGHUP: /status answers")
    s = live.status()
    check(s["restart_needed"] == "" and s["last_reload"]["result"] == "applied",
          f"round {round_}: on: applied, nothing waits: {s['restart_needed']!r} {s['last_reload']}")
    last = frames(live)["last"] if rings else 0
    check(not rings or wait_for(lambda: frames(live)["last"] > last + 5, 3), f"round {round_}: on: the frame rings record again")


def test_enabled_live():
    # the bus actor on a worker thread, recording frames while the server goes and comes
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices="[device m1]\nslave = 1\n",
                extra=f"write_token = {TOKEN}\nframe_ring = 16\n", gateway_extra="buses_on_io_thread = false\n")
    rd, live = Reader(g), Live(g)
    on = g.text
    off = on.replace("[http]\n", "[http]\nenabled = false\n")
    for round_ in range(3):
        # off by the API: the PUT is served by the server it turns off
        idle = http.client.HTTPConnection("127.0.0.1", live.port, timeout=5)
        idle.request("GET", "/status")
        check(idle.getresponse().read() != b"", "an idle keep-alive connection, open before the off")
        st, body = live.get("/api/config")
        rev = json.loads(body)["revision"]
        put = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
        put.request("PUT", "/api/config", off.encode(), {**live.auth, "If-Match": rev})
        r = put.getresponse()
        answer = r.read()
        check(r.status == 200 and json.loads(answer).get("restart_needed") == "",
              f"round {round_}: the PUT that turns HTTP off gets its whole 200: {r.status} {answer[:300]!r}")
        g.text = off
        check(refused(live.port), f"round {round_}: off by the API: the port refuses at once")
        check(wait_for(lambda: closed(put) and closed(idle), 3),
              f"round {round_}: the PUT's and the idle keep-alive connections are closed")
        put.close()
        idle.close()
        if round_ == 1:
            time.sleep(1.5)   # drained and freed (the retired listener's second): the on makes a new server
            check("[http] closed" in g.log_text(), "the closed server was freed once drained")
        turn_on(live, g, on, round_)   # round 0 and 2: at once, while the closed server still drains
        # off by SIGHUP
        hup(g, off)
        check(wait_for(lambda: refused(live.port), 5), f"round {round_}: off by SIGHUP: the port refuses")
        time.sleep(0.3 if round_ != 1 else 1.5)
        turn_on(live, g, on, round_)
    # on while another socket holds the port: named, and the next SIGHUP turns it on
    hup(g, off)
    check(wait_for(lambda: refused(live.port), 5), "off by SIGHUP: the port refuses")
    time.sleep(1.5)
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past the TIME_WAITs of the cut connections
    busy.bind(("127.0.0.1", live.port))
    busy.listen(1)
    n = g.log_text().count("not applied until a restart: http.port")
    hup(g, on)
    check(wait_for(lambda: g.log_text().count("not applied until a restart: http.port") > n, 5),
          "on with the port taken: http.port named in restart_needed (the log line)")
    busy.close()
    turn_on(live, g, on, "last")
    rd.finish()
    g.stop()


def test_held_write_cut():
    """Off while a tag write waits for a silent slave past request_timeout_ms:
    the drain ends at that bound, the write is abandoned, its client's
    connection closed (not left hanging), and on again serves; twice, once
    turned on again while the closed server still drains."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", timeout_ms=400,
                devices="[device m1]\nslave = 1\n[device dead]\nslave = 9\n"
                        "[tag w]\ndevice = dead\ntable = holding\naddress = 0\ntype = uint16\nwritable = true\n",
                extra=f"write_token = {TOKEN}\nrequest_timeout_ms = 100\n")
    rd, live = Reader(g), Live(g)
    on, off = g.text, g.text.replace("[http]\n", "[http]\nenabled = false\n")
    for round_ in range(2):
        res = []

        def put():
            c = http.client.HTTPConnection("127.0.0.1", live.port, timeout=5)
            try:
                c.request("PUT", "/tags/w", b'{"value": 1}', live.auth)
                res.append(c.getresponse().status)
            except (OSError, http.client.HTTPException) as e:
                res.append(repr(e))
        t = threading.Thread(target=put)
        t.start()
        time.sleep(0.15)   # the write is on the line, waiting for slave 9
        hup(g, off)
        t.join(4)
        check(res and not isinstance(res[0], int) and "timed out" not in res[0],
              f"round {round_}: the held write's connection is closed by the drain: {res}")
        check(wait_for(lambda: refused(live.port), 3), f"round {round_}: off")
        time.sleep(1.6 if round_ == 0 else 0.05)
        turn_on(live, g, on, round_, rings=False)
    rd.finish()
    g.stop()


if __name__ == "__main__":
    run_tests("test_live_http_enabled", [test_enabled_live, test_held_write_cut])
