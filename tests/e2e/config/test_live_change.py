#!/usr/bin/python3
"""Live configuration changes (issue 41): a hand edit + SIGHUP and the REST
API (/api/...) against a real `rtugw run` on the simulator, checked by what
the daemon does afterwards (its bus's requests, /tags, /status, /metrics),
not only by what it says.

What must hold:
  - a live change to a file with a [poll] group keeps the bus polling
    (the poller held pointers into the devices' table the reload freed);
  - a section that only moved in the file is unchanged (a comment added at
    the top, a section before it that grew): the change beside it applies;
  - widen_reads = false sent by SIGHUP stops the widened reads at once;
  - a change made while a tag write is in flight is queued and applied when
    the write ends, and the API says it is queued;
  - a template no device uses, added or deleted, is listed at once;
  - the section editor: a header written with spaces inside its brackets,
    a value with a vertical tab or form feed before ';', a body that is not
    a JSON object: each edited correctly or refused clearly;
  - /status last_reload and rtugw_config_reloads_total say how each reload
    went (applied, invalid with FILE:LINE, restart_needed, queued)."""
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
from tagscheck import put, tag_values  # noqa: E402

TOKEN = "s3cret-0123456789abcdefXY"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SIM1 = "port = sim:1\nbaud = 115200\n"


def requests_in(g, seconds, bus=0):
    """Requests the bus took in `seconds` (its /status counter's difference)."""
    a = g.status()["buses"][bus]["requests"]
    time.sleep(seconds)
    return g.status()["buses"][bus]["requests"] - a


def api(g, method, path, obj=None, raw=None):
    """An API call with the token and the file's revision now: status, JSON answer
    (0 and the error when the daemon does not answer at all)."""
    try:
        return api_call(g, method, path, obj, raw)
    except OSError as e:
        return 0, {"error": str(e)}


def api_call(g, method, path, obj, raw):
    rev = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{g.http_port}/api/config", headers=AUTH), timeout=5).read())["revision"]
    body = raw if raw is not None else json.dumps(obj).encode() if obj is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}{path}", data=body, method=method,
                                 headers={**AUTH, "If-Match": rev})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}


def get(g, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def hup(g, text):
    g.rewrite(text)
    g.p.send_signal(signal.SIGHUP)


def tag_good(g, name):
    return tag_values(g).get(name, {}).get("quality") == "good"


POLL_AND_TAG = ("[device m1]\nslave = 1\n"
                "[poll p1]\ndevice = m1\nfunction = 3\naddress = 0\ncount = 4\ninterval_ms = 100\n"
                "[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 100\n")
TAG_T2 = "[tag t2]\ndevice = m1\ntable = holding\naddress = 20\ntype = uint16\ninterval_ms = 100\n"


# ---- 1. the poller kept pointers into the devices' table a reload frees ---------

def test_sighup_with_poll_group_keeps_polling():
    """[poll p1] and [tag t1]; [tag t2] appended and SIGHUP: the bus keeps its
    rate (it fell to 0: the poller's groups named their device through the
    freed table), every tag good, nothing named for a restart."""
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG)
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 read before the change")
    before = requests_in(g, 1.5)
    hup(g, g.text + TAG_T2)
    check(wait_for(lambda: tag_good(g, "t2"), 5), "t2, appended, is read after SIGHUP")
    after = requests_in(g, 1.5)
    check(before > 10 and after >= before // 2, f"the bus keeps polling: {before} then {after} requests in 1.5 s")
    check(all(t["quality"] == "good" for t in tag_values(g).values()), f"every tag good: {tag_values(g)}")
    st = g.status()
    check(st["restart_needed"] == "" and st["polls"][0]["ok"], f"nothing waits ({st['restart_needed']!r}), p1 ok")
    check("is not a range" not in g.log_text(), "no planner error in the log")
    g.stop()


def test_api_device_from_template_keeps_polling():
    """PUT /api/devices/m2 from a template on a file with a [poll] group: the
    new device's tags read, and p1 and m1's tags keep being polled."""
    d = tempfile.mkdtemp(prefix="rtugw-live-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,100\n")
    devs = (f"[template meter]\ntags_file = {d}/meter.csv\n[device m1]\nslave = 1\ntemplate = meter\n"
            "[poll p1]\ndevice = m1\nfunction = 3\naddress = 10\ncount = 4\ninterval_ms = 100\n")
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=devs, extra=f"write_token = {TOKEN}\n", dir=d)
    check(wait_for(lambda: tag_good(g, "m1.voltage"), 5), "m1.voltage read before the change")
    before = requests_in(g, 1.5)
    st, r = api(g, "PUT", "/api/devices/m2", {"slave": 2, "template": "meter"})
    check(st == 200 and r.get("restart_needed") == "", f"PUT /api/devices/m2: applied live ({st} {r})")
    check(wait_for(lambda: tag_values(g).get("m2.voltage", {}).get("value") == 2000, 5), "m2.voltage read")
    after = requests_in(g, 1.5)
    check(before > 10 and after >= before * 3 // 4, f"the bus keeps polling: {before} then {after} requests in 1.5 s")
    polls = g.status()["polls"][0]["polls"]
    check(wait_for(lambda: g.status()["polls"][0]["polls"] > polls + 5, 3), "p1 is still polled")
    check(tag_good(g, "m1.voltage"), "m1.voltage still good")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


# ---- 2. a section that only moved is the same section ------------------------------

def test_moved_sections_are_unchanged():
    """A comment line added at the top plus a new tag: the tag applies live
    and nothing is named for a restart (every section had moved a line)."""
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG)
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 read before the change")
    hup(g, "# hall 2, line 1\n" + g.text + TAG_T2)
    check(wait_for(lambda: tag_good(g, "t2"), 5), f"the new tag is read: {tag_values(g).get('t2')}")
    check(wait_for(lambda: "reloaded" in g.log_text(), 3) and g.status()["restart_needed"] == "",
          f"nothing waits for a restart: {g.status()['restart_needed']!r}")
    g.stop()


def test_api_device_before_a_bus():
    """Two buses, [device d1] above [bus b2]: PUT /api/devices/d1 with a new
    interval_ms grows d1's section, which moves [bus b2] and d2: applied live."""
    devs = ("[device d1]\nbus = line\nslave = 1\n[tag x]\ndevice = d1\ntable = holding\naddress = 3\ntype = uint16\n"
            "[bus b2]\nport = sim:5\nbaud = 115200\n[device d2]\nbus = b2\nslave = 5\n")
    g = Gateway(bus=SIM1, devices=devs, extra=f"write_token = {TOKEN}\n")
    st, r = api(g, "PUT", "/api/devices/d1", {"bus": "line", "slave": 1, "interval_ms": 500})
    check(st == 200 and r.get("restart_needed") == "", f"PUT /api/devices/d1: nothing waits ({st} {r})")
    _, body = get(g, "/api/devices")
    d1 = [d for d in json.loads(body)["devices"] if d["name"] == "d1"]
    check(d1 and d1[0]["interval_ms"] == 500, f"d1's interval_ms is 500 now: {d1}")
    _, body = get(g, "/api/tags")
    x = [t for t in json.loads(body)["tags"] if t["name"] == "x"]
    check(x and x[0]["interval_ms"] == 500, f"and its tag reads every 500 ms: {x}")
    g.stop()


# ---- 3. widen_reads by SIGHUP --------------------------------------------------------

def test_widen_reads_live():
    """widen_reads = false by SIGHUP: the line stops widening m1's reads at
    once (rtugw_bus_shaped_total stays), as a fresh start with the file does."""
    devs = "[device m1]\nslave = 1\n[poll p1]\ndevice = m1\nfunction = 3\naddress = 0\ncount = 4\ninterval_ms = 50\n"
    g = Gateway(bus=SIM1, devices=devs)

    def shaped():
        return g.metrics().get('rtugw_bus_shaped_total{bus="line"}', 0)
    check(wait_for(lambda: shaped() > 3, 5), f"m1's repeated reads are widened (I6): {shaped()}")
    hup(g, g.text.replace("slave = 1\n", "slave = 1\nwiden_reads = false\n"))
    check(wait_for(lambda: "reloaded" in g.log_text(), 3), "reloaded")
    time.sleep(0.3)
    a = shaped()
    polls = g.status()["polls"][0]["polls"]
    time.sleep(1.0)
    b = shaped()
    check(g.status()["polls"][0]["polls"] > polls + 10, "p1 still polled")
    check(b == a, f"no read widened after widen_reads = false: {a} then {b}")
    check(g.status()["restart_needed"] == "", f"nothing waits: {g.status()['restart_needed']!r}")
    hup(g, g.text.replace("widen_reads = false\n", ""))
    check(wait_for(lambda: shaped() > b + 3, 3), "widened again when the key goes")
    g.stop()



# ---- 4. a change made while a tag write is in flight -----------------------------------

def slow_write(g, results):
    """PUT /tags/w9 of a slave that never answers (m9: 1.2 s timeout, a retry):
    in flight for about 2.5 s; its status goes to results."""
    results.append(put(g, "w9", "5", token=TOKEN)[0])


def write_in_flight(g):
    return g.metrics().get("rtugw_tag_writes_in_flight", 0) >= 1


SLOW = ("[device m1]\nslave = 1\n[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\ninterval_ms = 100\n"
        "[device m9]\nslave = 9\ntimeout_ms = 1200\ndead_after = 0\n"
        "[tag w9]\ndevice = m9\ntable = holding\naddress = 1\ntype = uint16\nwritable = true\ninterval_ms = 86400000\n")


def test_change_behind_a_tag_write_sighup():
    """SIGHUP with a new tag while a tag write is in flight: queued (not named
    for a restart), and applied when the write ends, with no second SIGHUP."""
    g = Gateway(bus=SIM1, devices=SLOW, extra=f"write_token = {TOKEN}\n", timeout_ms=1200)
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 read")
    time.sleep(1.5)   # m9's one poll at start is over
    results = []
    th = threading.Thread(target=slow_write, args=(g, results))
    th.start()
    check(wait_for(lambda: write_in_flight(g), 3), "a tag write is in flight")
    hup(g, g.text + TAG_T2)
    check(wait_for(lambda: "reloaded" in g.log_text(), 3), "reloaded")
    check(g.status()["restart_needed"] == "", f"nothing named for a restart: {g.status()['restart_needed']!r}")
    lr = g.status().get("last_reload") or {}
    check(lr.get("result") == "queued" and lr.get("queued") == "tags" and lr.get("waits") == "tags",
          f"/status last_reload says it is queued: {lr}")
    th.join(15)
    check(results and results[0] != 200, f"the write to the silent slave ended ({results})")
    check(wait_for(lambda: tag_good(g, "t2"), 5), f"t2 applied once the write ended: {tag_values(g).get('t2')}")
    check("send SIGHUP again" not in g.log_text() and "applying what was queued" in g.log_text(),
          "the log says it was queued and then applied")
    lr = g.status().get("last_reload") or {}
    check(lr.get("result") == "applied" and "tags" in lr.get("applied", "").split(), f"and then applied: {lr}")
    g.stop()


def test_change_behind_a_tag_write_api():
    """PUT /api/tags/t2 while a tag write is in flight: 200 with queued "tags"
    and restart_needed "", applied when the write ends."""
    g = Gateway(bus=SIM1, devices=SLOW, extra=f"write_token = {TOKEN}\n", timeout_ms=1200)
    check(wait_for(lambda: tag_good(g, "t1"), 5), "t1 read")
    time.sleep(1.5)
    results = []
    th = threading.Thread(target=slow_write, args=(g, results))
    th.start()
    check(wait_for(lambda: write_in_flight(g), 3), "a tag write is in flight")
    st, r = api(g, "PUT", "/api/tags/t2", {"device": "m1", "table": "holding", "address": 20, "type": "uint16"})
    check(st == 200 and r.get("restart_needed") == "" and r.get("queued") == "tags",
          f"the API says the change is queued: {st} {r}")
    th.join(15)
    check(wait_for(lambda: tag_good(g, "t2"), 5), f"t2 applied once the write ended: {tag_values(g).get('t2')}")
    check(g.status()["restart_needed"] == "", "and nothing waits")
    g.stop()


# ---- 5. a template no device uses ---------------------------------------------------------

def test_unused_template_listed_at_once():
    """PUT /api/templates/spare (no device uses it): listed by GET
    /api/templates and its CSV served at once; DELETE: gone at once."""
    d = tempfile.mkdtemp(prefix="rtugw-live-")
    for name in ("meter", "spare"):
        with open(os.path.join(d, f"{name}.csv"), "w") as f:
            f.write("name,table,address,type\nvoltage,holding,0,uint16\n")
    devs = f"[template meter]\ntags_file = {d}/meter.csv\n[device m1]\nslave = 1\ntemplate = meter\n"
    g = Gateway(bus=SIM1, devices=devs, extra=f"write_token = {TOKEN}\n", dir=d)

    def listed():
        return [t["name"] for t in json.loads(get(g, "/api/templates")[1])["templates"]]
    st, r = api(g, "PUT", "/api/templates/spare", {"tags_file": f"{d}/spare.csv"})
    check(st == 200 and r.get("restart_needed") == "", f"PUT /api/templates/spare: 200 ({st} {r})")
    check(listed() == ["meter", "spare"], f"listed at once: {listed()}")
    check(get(g, "/api/templates/spare/csv")[0] == 200, "its CSV is served")
    st, r = api(g, "DELETE", "/api/templates/spare")
    check(st == 200 and r.get("restart_needed") == "", f"DELETE /api/templates/spare: 200 ({st} {r})")
    check(listed() == ["meter"], f"gone at once: {listed()}")
    check(get(g, "/api/templates/spare/csv")[0] == 404, "its CSV is 404")
    check(tag_good(g, "m1.voltage"), "m1's tags untouched")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


# ---- 6. the API's section editor -----------------------------------------------------------

def test_section_editor():
    """Headers written by hand with spaces inside the brackets are the
    sections they name (PUT replaces, DELETE removes them); a value with a
    vertical tab or form feed before ';' is refused (it would be cut); a body
    that is a JSON array is refused with a clear error."""
    devs = ("[device m1 ]\nslave = 1\n[tag t1]\ndevice = m1\ntable = holding\naddress = 10\ntype = uint16\n"
            "[ device\tm2  ]  ; the spare\nslave = 2\n")
    g = Gateway(bus=SIM1, devices=devs, extra=f"write_token = {TOKEN}\n")

    def text():
        with open(g.cfg) as f:
            return f.read()
    st, r = api(g, "PUT", "/api/devices/m1", {"slave": 1, "interval_ms": 500})
    after = text()
    check(st == 200 and after.count("device m1") == 1 and "[device m1]\nslave = 1\ninterval_ms = 500\n" in after,
          f"PUT /api/devices/m1 replaces '[device m1 ]' in place ({st} {r})")
    _, body = get(g, "/api/devices")
    m1 = [d for d in json.loads(body)["devices"] if d["name"] == "m1"]
    check(m1 and m1[0]["interval_ms"] == 500, f"and it applies: {m1}")
    st, r = api(g, "DELETE", "/api/devices/m2")
    check(st == 200 and "m2" not in text() and "[tcp]" in text(), f"DELETE /api/devices/m2 removes '[ device\\tm2  ]' ({st} {r})")
    same = text()
    for bad in ("3\v;4", "3\f;4", "3\v#4", "3\x01"):
        st, r = api(g, "PUT", "/api/devices/m3", {"slave": bad})
        check(st == 400 and "control character" in r.get("error", "") and text() == same,
              f"PUT slave = {bad!r}: refused, the file untouched ({st} {r})")
    st, r = api(g, "PUT", "/api/tags/t3", {"device": "m1", "table": "holding", "address": 10, "type": "uint16",
                                          "description": "tank\t;level"})
    check(st == 400 and "comment" in r.get("error", "") and text() == same,
          f"a tab before ';': refused ({st} {r})")
    for raw in (b"[1]", b"\"x\"", b"42", b"null"):
        st, r = api(g, "PUT", "/api/devices/m1", raw=raw)
        check(st == 400 and "object" in r.get("error", "") and text() == same,
              f"PUT with body {raw!r}: 400, a JSON object expected ({st} {r})")
    # after several reloads t1 may wait for its next poll: good within its interval
    check(g.p.poll() is None and wait_for(lambda: tag_good(g, "t1"), 5), "the daemon runs on, t1 read")
    g.stop()


# ---- 7. /status last_reload and the reload counter ------------------------------------------

def fnv1a64(data):
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def test_last_reload_reported():
    """/status last_reload: null before any; after each reload its time,
    the file's revision, result (applied, invalid with the first error as
    FILE:LINE, restart_needed naming what waits); /metrics counts each result.
    The paths /status had (restart_needed, buses, polls) stay."""
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG)
    st = g.status()
    check(st.get("last_reload", 1) is None and st["restart_needed"] == "" and st["buses"] and st["polls"],
          f"no reload yet: last_reload null ({st.get('last_reload', 'absent')})")

    def counts():
        m = g.metrics()
        return {r: m.get(f'rtugw_config_reloads_total{{result="{r}"}}')
                for r in ("applied", "restart_needed", "queued", "invalid")}
    check(counts() == {"applied": 0, "restart_needed": 0, "queued": 0, "invalid": 0}, f"counters at 0: {counts()}")
    t0 = time.time()
    hup(g, g.text + TAG_T2)
    check(wait_for(lambda: (g.status().get("last_reload") or {}).get("result") == "applied", 3), "applied")
    lr = g.status()["last_reload"]
    with open(g.cfg, "rb") as f:
        rev = fnv1a64(f.read())
    check(lr["revision"] == rev and "tags" in lr["applied"].split() and lr["waits"] == "" and lr["error"] is None
          and abs(lr["time_ms"] / 1000 - t0) < 5 and lr["time"].endswith("Z"), f"its report: {lr}")
    good = g.text
    lines = good.count("\n")
    hup(g, good + "[tag t3]\ndevice = m1\ntable = holding\naddress = 30\ntype = uint17\n")
    check(wait_for(lambda: g.status()["last_reload"]["result"] == "invalid", 3), "an invalid file: invalid")
    lr = g.status()["last_reload"]
    check((lr["error"] or "").startswith(f"{g.cfg}:{lines + 5}:") and "uint17" in lr["error"],
          f"its first error, FILE:LINE: {lr['error']}")
    # workers: one of the keys that still wait for a restart (a bus applies live now)
    hup(g, good.replace("[gateway]\n", "[gateway]\nworkers = 3\n", 1))
    check(wait_for(lambda: g.status()["last_reload"]["result"] == "restart_needed", 3), "workers changed: restart_needed")
    lr = g.status()["last_reload"]
    check(lr["waits"] == "workers" and g.status()["restart_needed"] == "workers", f"what waits: {lr}")
    check(counts() == {"applied": 1, "restart_needed": 1, "queued": 0, "invalid": 1}, f"counted: {counts()}")
    g.stop()


# ---- 9b. what check warns of, said by run, SIGHUP and the API too ----------------------------

MODICON = "[tag tm]\ndevice = m1\ntable = holding\naddress = 40005\ntype = uint16\n"


def test_warnings_everywhere():
    """A tag at holding 40005 (a Modicon number written as an address):
    `rtugw check` warns; so must `run` at start, a SIGHUP (logged, counted in
    last_reload.warnings), POST /api/config/validate and PUT /api/config
    (a "warnings" list). Fails on 150cdbd: only check said it."""
    d = tempfile.mkdtemp(prefix="rtugw-warn-")
    g = Gateway(bus=SIM1, devices="[device m1]\nslave = 1\n" + MODICON, extra=f"write_token = {TOKEN}\n", dir=d)
    check(wait_for(lambda: "40005" in g.log_text() and "warning" in g.log_text(), 3),
          f"run says check's warning at start: {g.log_text()[:400]!r}")
    hup(g, g.text + MODICON.replace("tm]", "tm2]").replace("40005", "40007"))
    check(wait_for(lambda: (g.status().get("last_reload") or {}).get("warnings", 0) >= 2, 3),
          f"SIGHUP: last_reload.warnings counts them ({g.status().get('last_reload')})")
    check("SIGHUP: " in g.log_text() and "40007" in g.log_text(), "and logs them")
    req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/config/validate", data=g.text.encode(),
                                 method="POST", headers=AUTH)
    with urllib.request.urlopen(req, timeout=10) as r:
        v = json.loads(r.read())
    check(v.get("valid") and v.get("warning_count", 0) >= 2 and any("40007" in w for w in v.get("warnings", [])),
          f"POST /api/config/validate: the warnings listed ({v})")
    st, r = api(g, "PUT", "/api/tags/tm3", {"device": "m1", "table": "holding", "address": 40009, "type": "uint16"})
    check(st == 200 and any("40009" in w for w in r.get("warnings", [])), f"PUT: the warnings listed ({st} {r})")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


# ---- 9c. rtugw reload: the SIGHUP that answers ----------------------------------------------

def test_rtugw_reload():
    """`rtugw reload -c FILE` finds the daemon, checks, signals, waits and
    prints the daemon's verdict: applied (exit 0), what waits for a restart
    (exit 0, named), a file check refuses (exit 2, the daemon not signalled:
    its last_reload unchanged), no daemon for a file (exit 1)."""
    from rtugwtest import BIN
    import subprocess
    g = Gateway(bus=SIM1, devices=POLL_AND_TAG)

    def reload(*extra):
        return subprocess.run([BIN, "reload", "-c", g.cfg, *extra], capture_output=True, text=True, timeout=30)
    good = g.text + TAG_T2
    g.rewrite(good)
    r = reload()
    check(r.returncode == 0 and ": applied" in r.stdout and "tags" in r.stdout,
          f"a tag added: applied, exit 0 ({r.returncode} {r.stdout!r} {r.stderr!r})")
    check(wait_for(lambda: tag_good(g, "t2"), 5), "and t2 is read")
    g.rewrite(good.replace("[gateway]\n", "[gateway]\nworkers = 3\n", 1))
    r = reload("--pid", str(g.p.pid))
    check(r.returncode == 0 and "waits: workers" in r.stdout, f"workers changed: what waits is named ({r.stdout!r})")
    before = g.status()["last_reload"]
    g.rewrite(good + "[tag t3]\ndevice = m1\ntable = holding\naddress = 30\ntype = uint17\n")
    r = reload()
    time.sleep(0.3)
    check(r.returncode == 2 and "uint17" in r.stderr and g.status()["last_reload"] == before,
          f"a file check refuses: exit 2, the daemon not signalled ({r.returncode} {r.stderr[-200:]!r})")
    other = os.path.join(tempfile.mkdtemp(prefix="rtugw-reload-"), "other.conf")
    with open(other, "w") as f:
        f.write(good)
    r = subprocess.run([BIN, "reload", "-c", other], capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "no `rtugw run" in r.stderr, f"no daemon runs that file: exit 1 ({r.stderr!r})")
    shutil.rmtree(os.path.dirname(other), ignore_errors=True)
    g.rewrite(good)
    g.stop()


# ---- listeners live: [tcp] and [rtu_tcp] move without a restart ------------------------------

def test_listeners_live():
    """[tcp] port changed by SIGHUP: the new port serves, the old one takes
    no new connection, and a client connected before keeps its connection and
    its answers; a port in use is named in restart_needed (tcp.port) and the
    running listener keeps serving; [rtu_tcp], off at start, turned on by
    SIGHUP serves a pymodbus RTU-framer client; max_pending applies. Fails on
    150cdbd (each of these was restart_needed)."""
    import socket
    from pymodbus.client import ModbusTcpClient
    from pymodbus.transaction import ModbusRtuFramer
    from rtugwtest import free_port
    g = Gateway(bus=SIM1, devices="[device m1]\nslave = 1\n")
    old_port = g.tcp_port
    c1 = g.client()
    check(c1.read_holding_registers(0, 2, slave=1).registers == [1000, 1001], "c1 reads before the change")
    new_port = free_port()
    hup(g, g.text.replace(f"[tcp]\nport = {old_port}\n", f"[tcp]\nport = {new_port}\nmax_pending = 4\n"))
    check(wait_for(lambda: (g.status().get("last_reload") or {}).get("result") == "applied", 5),
          f"applied, nothing waits ({g.status().get('last_reload')})")
    g.tcp_port = new_port
    c2 = g.client()
    check(c2.read_holding_registers(3, 1, slave=1).registers == [1003], "a client on the new port is served")
    r = c1.read_holding_registers(5, 1, slave=1)
    check(not r.isError() and r.registers == [1005], f"c1, connected before, keeps its connection and answers ({r})")
    s = socket.socket()
    s.settimeout(2)
    check(s.connect_ex(("127.0.0.1", old_port)) != 0, "the old port takes no new connection")
    s.close()
    # a port another process holds: the running listener stays
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    hup(g, g.text.replace(f"port = {new_port}\n", f"port = {taken}\n"))
    check(wait_for(lambda: g.status()["restart_needed"] == "tcp.port", 5),
          f"a port in use: restart_needed names tcp.port ({g.status()['restart_needed']!r})")
    check("cannot listen on" in g.log_text() and f"still listening on 127.0.0.1:{new_port}" in g.log_text(),
          "the log gives the reason and the port still served")
    check(c2.read_holding_registers(3, 1, slave=1).registers == [1003], "and the running listener serves")
    c3 = g.client()
    check(c3.read_holding_registers(4, 1, slave=1).registers == [1004], "new connections too")
    holder.close()
    # [rtu_tcp], off at start, on by SIGHUP
    rtu = free_port()
    hup(g, g.text + f"[rtu_tcp]\nport = {rtu}\ndefault_bus = line\n")
    check(wait_for(lambda: "[rtu_tcp] on: listening" in g.log_text(), 5), "[rtu_tcp] started by the reload")
    c4 = ModbusTcpClient("127.0.0.1", port=rtu, framer=ModbusRtuFramer, timeout=3)
    check(c4.connect(), "an RTU-over-TCP client connects")
    r = c4.read_holding_registers(7, 2, slave=1)
    check(not r.isError() and r.registers == [1007, 1008], f"and is served ({r})")
    for c in (c1, c2, c3, c4):
        c.close()
    g.stop()


TESTS = [test_sighup_with_poll_group_keeps_polling, test_api_device_from_template_keeps_polling,
         test_moved_sections_are_unchanged, test_api_device_before_a_bus, test_widen_reads_live,
         test_change_behind_a_tag_write_sighup, test_change_behind_a_tag_write_api, test_unused_template_listed_at_once,
         test_section_editor, test_last_reload_reported, test_warnings_everywhere,
         test_rtugw_reload, test_listeners_live]

if __name__ == "__main__":
    run_tests("test_live_change", TESTS)
