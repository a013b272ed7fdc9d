#!/usr/bin/python3
"""The gateway's web page (GET /) in a real browser: Debian's chromium, headless,
driven by python3-selenium through chromium-driver, against `rtugw demo` and
against a gateway with silent slaves. What an integrator at the cabinet would
check by eye, checked in the page's DOM:
  - the page and its two files load, small, with no console error;
  - buses and devices show their states; the silent slave's device turns to
    backed off, the one never backed off shows it never answered;
  - a poll value changes on screen when the simulator's register is written
    through Modbus TCP; the name filter hides what does not match;
  - the frame monitor shows a request sent with mbpoll, decoded, and its
    answer; paused it shows nothing new, resumed it catches up;
  - a phone-sized screen scrolls no wider than itself;
  - where the daemon has tags (/tags): a write with the token changes the
    register, a write with a wrong one is refused. A daemon without tags
    serves the poll groups' raw values instead, which is then what is checked;
  - the maps (GET /api/maps) listed with their entries, and computed tags
    marked with their expression and whether an inverse makes them writable.
/frames, its bounds and its counters are checked over plain HTTP too.
Screenshots of each state go to tests/screenshots/ in the build tree
($RTUGW_SCREENSHOTS to put them elsewhere)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, fetch_metrics, finish, free_port, procs, wait_listening  # noqa: E402

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
missing = [f"{p} (Debian package {pkg})" for p, pkg in ((CHROMIUM, "chromium"), (DRIVER, "chromium-driver"))
           if not os.access(p, os.X_OK)]
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    missing.append("selenium (Debian package python3-selenium)")
try:
    from pymodbus.client import ModbusTcpClient
except ImportError as e:
    missing.append(f"{e.name} (Debian packages python3-pymodbus, python3-serial-asyncio)")
if subprocess.run(["sh", "-c", "command -v mbpoll"], capture_output=True).returncode:
    missing.append("mbpoll (Debian package mbpoll)")
if missing:
    print("FAIL: the web page test needs a real browser and Modbus peers; missing:\n  " + "\n  ".join(missing) +
          "\nscripts/bootstrap installs them (apt-get install chromium chromium-driver python3-selenium ...)")
    sys.exit(1)

SHOTS = os.environ.get("RTUGW_SCREENSHOTS") or os.path.join(os.getcwd(), "tests", "screenshots")
os.makedirs(SHOTS, exist_ok=True)


def http(port, path, method="GET", body=None, headers=None):
    """(status, headers, body bytes) of one request to the daemon's HTTP port."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class Browser:
    """A headless chromium; get_log() entries are collected as the test goes."""

    def __init__(self):
        o = webdriver.ChromeOptions()
        o.binary_location = CHROMIUM
        self.profile = tempfile.mkdtemp(prefix="rtugw-chromium-")
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1280,900", "--user-data-dir=" + self.profile):
            o.add_argument(a)
        o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.d = webdriver.Chrome(service=Service(DRIVER), options=o)
        self.log = []

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def wait(self, script, what, timeout=10.0, *args):
        """Polls script (JavaScript returning a value) until it is truthy; checks it."""
        end, v = time.time() + timeout, None
        while time.time() < end:
            v = self.js(script, *args)
            if v:
                break
            time.sleep(0.2)
        check(bool(v), what)
        return v

    def shot(self, name):
        path = os.path.join(SHOTS, name)
        self.d.save_screenshot(path)
        print(f"   screenshot {path}")

    def console_errors(self, allowed=()):
        """SEVERE console entries since the last call, less those naming an allowed string."""
        self.log += self.d.get_log("browser")
        bad = [e for e in self.log if e["level"] == "SEVERE" and not any(a in e["message"] for a in allowed)]
        self.log = []
        return bad

    def phone(self, on):
        if on:
            self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        else:
            self.d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def quit(self):
        self.d.quit()


def text_of(b, selector):
    return b.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", selector)


def device_state(b, bus, device):
    return b.js("const e = document.querySelector(`[data-bus=\"${arguments[0]}\"] tr[data-device=\"${arguments[1]}\"]`);"
                "return e ? e.dataset.state : null;", bus, device)


def mbpoll_read(tcp_port, slave, address, count):
    """Holding registers through the gateway with mbpoll (0-based address)."""
    p = subprocess.run(["mbpoll", "-m", "tcp", "-p", str(tcp_port), "-a", str(slave), "-t", "4", "-0",
                        "-r", str(address), "-c", str(count), "-1", "127.0.0.1"],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode == 0, f"mbpoll read of slave {slave} at {address} ({p.stdout[-120:]!r})")


def frame_row(b, text):
    """The meaning of the first frame row whose meaning contains text, or null."""
    return b.js("for (const r of document.querySelectorAll('#frames tr.frame'))"
                "  if (r.querySelector('.meaning').textContent.includes(arguments[0]))"
                "    return {dir: r.dataset.dir, slave: r.children[2].textContent,"
                "            meaning: r.querySelector('.meaning').textContent, hex: r.querySelector('.hex').textContent};"
                "return null;", text)


# ---- over HTTP: the files, /status's new figures, /frames and its bounds ---------------------

def check_http(port, ring):
    size = 0
    for path, ctype in (("/", "text/html"), ("/app.js", "text/javascript"), ("/config.js", "text/javascript"),
                        ("/style.css", "text/css")):
        st, h, body = http(port, path)
        size += len(body)
        check(st == 200 and h.get("Content-Type", "").startswith(ctype), f"GET {path}: {st} {h.get('Content-Type')}")
    check(0 < size < 100 * 1024, f"the page is {size} bytes in all (under 100 KB)")
    st, h, _ = http(port, "/")
    check("script-src 'self'" in (h.get("Content-Security-Policy") or ""), "the page is served with a strict CSP")
    st, h, body = http(port, "/", method="HEAD")
    check(st == 200 and body == b"", f"HEAD / is answered without a body ({st}, {len(body)} bytes)")

    s = json.loads(http(port, "/status")[2])
    bus = s["buses"][0]
    check(all(k in bus for k in ("crc_errors", "exceptions", "retries", "latency_p50_ms", "latency_p99_ms")),
          f"/status has each bus's CRC errors, exceptions, retries and latency p50/p99 ({sorted(bus)})")
    check(all(k in bus["devices"][0] for k in ("requests", "responses", "timeouts", "exceptions")),
          "/status has each device's counters")
    check(s.get("frame_ring") == ring, f"/status says frame_ring = {s.get('frame_ring')} (configured {ring})")
    name = bus["name"]
    for query, code in ((f"?bus={name}&since=x", 400), (f"?bus={name}&limit=0", 400), (f"?bus={name}&limit=257", 400),
                        ("?since=1", 400), (f"?bus={name}&what=1", 400), ("?bus=nosuchbus", 404),
                        ("?bus=%ff%00", 404), (f"?bus={name}&since=99999999999999999999999", 400)):
        st, h, body = http(port, "/frames" + query)
        ok = st == code and h.get("Content-Type") == "application/json" and json.loads(body)["ok"] is False
        check(ok, f"/frames{query} is refused with {code} and a JSON reason ({st}: {body[:80]!r})")
    st, _, body = http(port, f"/frames?bus={name}&limit=3")
    f = json.loads(body)
    check(st == 200 and f["enabled"] == (ring > 0) and f["capacity"] == ring,
          f"/frames answers enabled={f.get('enabled')} capacity={f.get('capacity')}")
    m = fetch_metrics(port)
    check(m.get("rtugw_frames_capacity") == ring, f"/metrics: rtugw_frames_capacity {m.get('rtugw_frames_capacity')}")
    return name, f


def check_ring_bounds():
    """A ring of 8 on a busy bus: a watcher that falls behind is told how many it
    missed, and /metrics counts them and the overwritten ones. The bus actor on
    a worker, so the ring's writer and reader are on two threads."""
    g = Gateway(log_level="info\nbuses_on_io_thread = false", extra="frame_ring = 8\n[poll fast]\ndevice = d1\nfunction = 3\naddress = 0\ncount = 2\n"
                      "interval_ms = 20\n")
    try:
        first = json.loads(http(g.http_port, "/frames?bus=line")[2])
        frames = first["frames"]
        check(0 < len(frames) <= 8 and first["missed"] == 0,
              f"a first look gets at most the ring's 8 frames and misses nothing ({len(frames)}, {first['missed']})")
        seqs = [fr["seq"] for fr in frames]
        check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"frames come in order, once each ({seqs})")
        time.sleep(1.0)   # ~100 frames at 20 ms polls: the ring of 8 turns over
        later = json.loads(http(g.http_port, f"/frames?bus=line&since={first['last']}")[2])
        check(later["missed"] > 0 and len(later["frames"]) <= 8 and later["frames"][0]["seq"] > first["last"],
              f"a watcher behind the ring is told it missed {later['missed']} frames")
        up_to_date = json.loads(http(g.http_port, f"/frames?bus=line&since={later['last']}&limit=1")[2])
        check(len(up_to_date["frames"]) <= 1 and up_to_date["missed"] == 0, "limit=1 gives at most one frame")
        future = json.loads(http(g.http_port, "/frames?bus=line&since=18446744073709551615")[2])
        check(future["reset"] is True, "a number from before a restart (ahead of the ring) starts the watcher over")
        m = g.metrics()
        over = m.get('rtugw_frames_overwritten_total{bus="line"}', 0)
        lost = m.get('rtugw_frames_missed_total{bus="line"}', 0)
        check(over > 0 and lost >= later["missed"], f"/metrics counts overwritten ({over:.0f}) and missed ({lost:.0f}) frames")
    finally:
        g.stop()


# ---- the demo, in the browser ----------------------------------------------------------------

def test_demo(b):
    tcp, hp = free_port(), free_port()
    log = open(os.path.join(tempfile.mkdtemp(prefix="rtugw-demo-"), "log"), "w+")
    p = subprocess.Popen([BIN, "demo", "--tcp-port", str(tcp), "--http-port", str(hp), "--quiet"],
                         stdout=log, stderr=log)
    procs.append(p)
    try:
        check(wait_listening(hp, p), "rtugw demo serves HTTP")
        time.sleep(0.5)
        bus, _ = check_http(hp, 256)
        url = f"http://127.0.0.1:{hp}/"

        # Overview: the bus up, every demo device polled (its tags) and up, the pump too.
        b.d.get(url)
        b.wait(f"return document.querySelector('[data-bus=\"{bus}\"] [data-role=bus-state]')?.textContent === 'up'",
               "overview: the demo's bus shows up")
        b.wait("return ['boiler','pump','meter'].every(n => document.querySelector(`tr[data-device=\"${n}\"]`)"
               "?.dataset.state === 'up')", "overview: boiler, pump and meter (all polled) show up")
        b.wait("return document.querySelector('.spark polyline.req')?.getAttribute('points').split(' ').length >= 4",
               "overview: the requests sparkline fills as the seconds go", timeout=10)
        rate = text_of(b, f"[data-bus=\"{bus}\"] .fig b")
        check(rate not in (None, "-") and float(rate) > 0, f"overview: requests/s from /status's counters ({rate})")
        p50 = b.js("return [...document.querySelectorAll('.fig')].find(f => f.textContent.includes('p50'))"
                   "?.querySelector('b').textContent")
        check(p50 and p50.endswith(" ms"), f"overview: latency p50 from the histogram ({p50})")
        b.shot("overview.png")

        # Tags view: the demo's typed tags; a register written through Modbus
        # TCP changes on screen, decoded (boiler_temp: int16 x 0.1).
        b.d.get(url + "#tags")
        cell = "tr[data-tag=\"boiler_temp\"] td.value"
        b.wait(f"return document.querySelector('{cell}')", "tags view: the demo's tags are shown")
        before = text_of(b, cell)
        c = ModbusTcpClient("127.0.0.1", port=tcp, timeout=3)
        check(c.connect() and not c.write_register(5, 4321, slave=1).isError(),
              "write register 5 of slave 1 through Modbus TCP")
        c.close()
        b.wait(f"return document.querySelector('{cell}')?.textContent === '432.1'",
               f"tags view: boiler_temp changes on screen ({before!r} -> 432.1)", timeout=8)
        check(b.js("return document.querySelector('tr[data-tag=\"boiler_temp\"]').dataset.quality") == "good",
              "tags view: a fresh poll is good")
        b.shot("polls.png")
        f = b.d.find_element(By.ID, "tag-filter")
        f.send_keys("meter")
        b.wait("return !document.querySelector('tr[data-tag=\"boiler_temp\"]') && "
               "document.querySelector('tr[data-tag=\"meter_energy\"]')", "tags view: the name filter hides the others")
        f.clear()
        f.send_keys(" ")   # clear() fires no input event; a space matches every name
        check(not b.console_errors(), "no console error on the overview and tags views")

        # Frame monitor: a request sent with mbpoll, decoded, and its answer.
        b.d.get(url + "#frames")
        b.wait("return document.querySelectorAll('#frames tr.frame').length > 0", "frames: the monitor shows the polls")
        mbpoll_read(tcp, 2, 50, 3)
        row = b.wait("for (const r of document.querySelectorAll('#frames tr.frame'))"
                     "  if (r.querySelector('.meaning').textContent === 'read holding registers 3 at 50')"
                     "    return [r.dataset.dir, r.children[2].textContent, r.querySelector('.hex').textContent];"
                     "return null;", "frames: mbpoll's request shows, decoded", timeout=6)
        if row:
            check(row[0] == "tx" and row[1] == "2" and row[2].startswith("02 03 00 32 00 03"),
                  f"frames: it went out (tx) to slave 2 as 02 03 00 32 00 03 ... ({row})")
        # The answer's own values: "3 registers: " alone also matches a poll's "23 registers: ...".
        b.wait("return [...document.querySelectorAll('#frames tr.frame .meaning')]"
               ".some(m => m.textContent === '3 registers: 2050, 2051, 2052')", "frames: mbpoll's answer shows", timeout=6)
        ans = frame_row(b, "3 registers: 2050, 2051, 2052")
        check(ans is not None and ans["dir"] == "rx" and ans["slave"] == "2", f"frames: and its answer came back ({ans})")
        b.d.find_element(By.CSS_SELECTOR, "#frames tr.frame").click()
        b.wait("return document.querySelector('#frames tr.more pre')?.textContent.startsWith('{\"ok\":')",
               "frames: a click shows the decoded fields")
        b.shot("frames.png")

        # Paused, nothing new shows; resumed, the frames sent meanwhile do.
        b.d.find_element(By.ID, "frame-pause").click()
        check(text_of(b, "#frame-pause") == "Resume", "frames: Pause turns into Resume")
        mbpoll_read(tcp, 2, 60, 2)
        time.sleep(2.5)
        check(frame_row(b, "read holding registers 2 at 60") is None, "frames: paused, a new request does not show")
        b.d.find_element(By.ID, "frame-pause").click()
        b.wait("return [...document.querySelectorAll('#frames .meaning')].some(m => m.textContent === "
               "'read holding registers 2 at 60')", "frames: resumed, the request sent while paused shows")
        # The slave filter: only slave 2's frames, mbpoll's requests and answers.
        b.d.find_element(By.ID, "frame-slave").send_keys("2")
        slaves = b.wait("const s = [...document.querySelectorAll('#frames tr.frame td:nth-child(3)')]"
                        ".map(td => td.textContent); return s.length && s.every(x => x === '2') ? s : null;",
                        "frames: the slave filter leaves only slave 2's frames")
        check(slaves and len(slaves) >= 4, f"frames: both mbpoll reads and their answers ({len(slaves or [])} frames)")
        b.d.set_window_size(1100, 520)
        b.shot("frames-slave2.png")
        b.d.set_window_size(1280, 900)
        check(not b.console_errors(), "no console error on the frame monitor")

        # A phone-sized screen: nothing wider than the screen but the tables' own scroll.
        b.phone(True)
        b.d.get(url)
        b.wait("return document.querySelector('tr[data-device=\"boiler\"]')", "phone: the overview loads")
        time.sleep(1.5)
        width = b.js("return [document.documentElement.scrollWidth, window.innerWidth]")
        check(width[0] <= width[1], f"phone: the page is no wider than the screen ({width[0]} <= {width[1]} px)")
        b.shot("phone.png")
        b.phone(False)
        check(not b.console_errors(), "no console error on a phone-sized screen")
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
        log.seek(0)
        text = log.read()
        check(not any(s in text for s in ("ERROR: AddressSanitizer", "runtime error:", "ThreadSanitizer")),
              f"no sanitizer report from rtugw demo ({log.name})")


# ---- silent slaves, in the browser ---------------------------------------------------------------

def test_silent(b):
    # sim:1,2,3 answers 1-3; d8 (slave 8, dead_after 0) and d9 (slave 9,
    # dead_after 2) never answer: d9 is backed off, d8 only unanswered.
    polls = "".join(f"[poll p{s}]\ndevice = d{s}\nfunction = 3\naddress = 0\ncount = 2\ninterval_ms = 300\n"
                    for s in (1, 8, 9))
    g = Gateway(extra=polls)   # frame_ring left out: the monitor off
    try:
        check_http(g.http_port, 0)
        url = f"http://127.0.0.1:{g.http_port}/"
        b.d.get(url)
        b.wait("return document.querySelector('tr[data-device=\"d9\"]')?.dataset.state === 'backed-off'",
               "silent slave: d9 turns to backed off", timeout=10)
        check(device_state(b, "line", "d1") == "up", f"silent slave: d1 stays up ({device_state(b, 'line', 'd1')})")
        check(device_state(b, "line", "d8") == "failing",
              f"silent slave: d8 (never backed off) shows it is not answering ({device_state(b, 'line', 'd8')})")
        check(device_state(b, "line", "d2") == "never", f"silent slave: d2 (never asked) shows not asked yet "
              f"({device_state(b, 'line', 'd2')})")
        check(b.js("return document.querySelector('tr[data-device=\"d9\"] .badge').classList.contains('red')"),
              "silent slave: backed off is red")
        b.wait("return document.querySelector('.spark polyline.err')?.getAttribute('points').split(' ').length >= 8",
               "silent slave: the errors sparkline fills", timeout=15)
        b.d.set_window_size(1100, 640)
        b.shot("silent.png")
        b.d.set_window_size(1280, 900)
        b.d.get(url + "#tags")
        b.wait("return document.querySelector('[data-poll=\"p9\"]')?.dataset.quality === 'bad' && "
               "document.querySelector('[data-poll=\"p1\"]')?.dataset.quality === 'good'",
               "silent slave: its poll group is bad, the answering one good")
        b.d.get(url + "#frames")
        b.wait("return document.getElementById('frame-info').textContent.includes('frame monitor is off')",
               "frames: with frame_ring unset the page says the monitor is off")
        # the last test's page polled its gateway after that one stopped: a
        # refused fetch of another port is not this page's error
        errs = [e for e in b.console_errors() if f":{g.http_port}/" in e["message"] or "127.0.0.1:" not in e["message"]]
        check(not errs, f"no console error with silent slaves ({errs})")
    finally:
        g.stop()


# ---- tags, where the daemon has them ---------------------------------------------------------------

TAG = ("[tag boiler_sp]\ndevice = d1\ntable = holding\naddress = 40\ntype = uint16\nunit = degC\n"
       "writable = true\ninterval_ms = 300\n")


def daemon_has_tags():
    """Does this rtugw take [tag NAME] sections? `rtugw check` says."""
    d = tempfile.mkdtemp(prefix="rtugw-tags-probe-")
    cfg = os.path.join(d, "probe.conf")
    with open(cfg, "w") as f:
        f.write("[bus line]\nport = sim:1\n[device d1]\nbus = line\nslave = 1\n" + TAG +
                "[tcp]\ndefault_bus = line\n[http]\nwrite_token = secret-0123456789abcdefgh\n")
    p = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True, timeout=20)
    return p.returncode == 0, (p.stderr or p.stdout).strip().splitlines()[:1]


def on_fresh(b, css, act, tries=10):
    """act(element) on the element css names now: the table is re-rendered by
    each refresh, so an element found a moment ago may be gone (stale)."""
    from selenium.common.exceptions import StaleElementReferenceException
    for _ in range(tries - 1):
        try:
            return act(b.d.find_element(By.CSS_SELECTOR, css))
        except StaleElementReferenceException:
            time.sleep(0.05)
    return act(b.d.find_element(By.CSS_SELECTOR, css))


def write_through_page(b, token, value, tag="boiler_sp"):
    row = f'tr[data-tag=\\"{tag}\\"]'
    b.d.find_element(By.ID, "token").send_keys(token)
    b.d.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()
    b.wait(f"return document.querySelector('{row} button')", "tags: Edit is offered with a token")
    on_fresh(b, row.replace("\\", "") + " button", lambda e: e.click())
    # The page asks /tags/NAME whether the tag is writable before it opens the form.
    b.wait(f"return document.querySelector('{row} form input')", "tags: the edit form opens")
    field = b.d.find_element(By.CSS_SELECTOR, row.replace("\\", "") + " form input")
    field.clear()
    field.send_keys(str(value))
    b.d.find_element(By.CSS_SELECTOR, row.replace("\\", "") + " form button[type=submit]").click()
    return b.wait(f"const m = document.querySelector('{row} .msg');"
                  "return m && !m.textContent.startsWith('writing') ? m.textContent : null;", "tags: the write is answered")


def leave_page(b):
    """The previous test's page off the browser, and what it logged once its daemon had stopped (its /status
    polls refused) dropped: each test counts its own page's console errors."""
    b.d.get("about:blank")
    b.console_errors()


def test_tags(b):
    ok, why = daemon_has_tags()
    if not ok:
        print(f"NOTE: this rtugw refuses [tag] sections ({why}): it serves no /tags, so the tag write checks "
              "cannot run here; the page's fallback to the poll groups' raw values was checked instead.")
        return
    leave_page(b)
    g = Gateway(devices="[device d1]\nslave = 1\n", extra="write_token = secret-0123456789abcdefgh\n" + TAG)
    try:
        url = f"http://127.0.0.1:{g.http_port}/#tags"
        b.d.get(url)
        b.wait("return document.querySelector('tr[data-tag=\"boiler_sp\"]')?.dataset.quality === 'good'",
               "tags: boiler_sp is shown, good")
        check(text_of(b, "tr[data-tag=\"boiler_sp\"] td:nth-child(3)") == "degC", "tags: with its unit")
        check(b.js("return !document.querySelector('tr[data-tag=\"boiler_sp\"] button')"),
              "tags: no Edit before a token is given")
        c = g.client()
        start = c.read_holding_registers(40, 1, slave=1).registers[0]
        msg = write_through_page(b, "wrong", 77)
        check(msg and msg.startswith("refused (403)"), f"tags: a wrong token is refused ({msg})")
        check(c.read_holding_registers(40, 1, slave=1).registers[0] == start, "tags: ... and the register is unchanged")
        b.d.find_element(By.ID, "token-forget").click()
        msg = write_through_page(b, "secret-0123456789abcdefgh", 77)
        check(msg == "written", f"tags: with the token the write is done ({msg})")
        check(c.read_holding_registers(40, 1, slave=1).registers[0] == 77, "tags: ... and the register holds 77")
        b.wait("return document.querySelector('tr[data-tag=\"boiler_sp\"] td.value')?.textContent === '77'",
               "tags: the page shows 77")
        c.close()
        b.shot("tags.png")
        errors = b.console_errors(allowed=("/tags/boiler_sp",))
        check(not errors, f"no console error but the refused write's 403 ({errors[:2]})")
    finally:
        g.stop()


MAP_TAGS = ("[tag t_raw]\ndevice = d1\ntable = holding\naddress = 10\ntype = int16\nwritable = true\ninterval_ms = 300\n"
            "[tag t_eng]\ndevice = d1\nexpr = t_raw / 10\ninverse = round(value * 10)\n"
            "[tag t_ro]\ndevice = d1\nexpr = t_raw * 2\n"
            "[map scada]\nunit = 100\nquality_register = 9\nentry0 = t_raw, holding, 0, int16\n"
            "entry1 = t_eng, holding, 1, float32, CDAB\nentry2 = t_ro, holding, 3, float32\n")


def test_maps(b):
    """The page's maps and computed tags: GET /api/maps, and the Tags view listing each map's entries and
    marking computed tags with their expression (and whether an inverse makes them writable)."""
    leave_page(b)
    g = Gateway(devices="[device d1]\nslave = 1\n", extra="write_token = secret-0123456789abcdefgh\n" + MAP_TAGS)
    try:
        st, _, body = http(g.http_port, "/api/maps")
        maps = json.loads(body)["maps"] if st == 200 else []
        entries = [(e["table"], e["address"], e["count"], e["tag"], e["type"], e.get("expr"), e.get("inverse"),
                    e["writable"]) for e in (maps[0]["entries"] if maps else [])]
        want = [("holding", 0, 1, "t_raw", "int16", None, None, True),
                ("holding", 1, 2, "t_eng", "float32", "t_raw / 10", "round(value * 10)", True),
                ("holding", 3, 2, "t_ro", "float32", "t_raw * 2", None, False)]
        check(st == 200 and len(maps) == 1 and maps[0]["name"] == "scada" and maps[0]["unit"] == 100 and
              maps[0]["quality_register"] == 9 and entries == want, f"GET /api/maps lists the map and its entries: {st} {body[:400]}")
        st, _, _ = http(g.http_port, "/api/maps", method="PUT", body=b"{}")
        check(st in (403, 405), f"PUT /api/maps is refused ({st})")
        b.d.get(f"http://127.0.0.1:{g.http_port}/#tags")
        b.wait("return document.querySelectorAll('#maps [data-map=\"scada\"] tbody tr').length === 3",
               "maps: the map's three entries are listed")
        rows = b.js("return [...document.querySelectorAll('#maps [data-map=\"scada\"] tbody tr')]"
                    ".map((r) => [...r.children].map((c) => c.textContent))")
        check(text_of(b, "#maps [data-map=\"scada\"] h3") == "Map scada \u2014 unit 100" and
              [r[:4] for r in rows] == [["holding", "0", "t_raw", "int16"], ["holding", "1\u20132", "t_engcomputed", "float32 CDAB"],
                                        ["holding", "3\u20134", "t_rocomputed", "float32 ABCD"]],
              f"maps: each entry's table, address, tag and type, computed ones marked ({rows})")
        b.wait("return document.querySelector('tr[data-tag=\"t_eng\"] td[data-computed=\"yes\"]')",
               "tags: t_eng is marked computed")
        check(text_of(b, "tr[data-tag=\"t_eng\"] td .expr") == "t_raw / 10" and
              text_of(b, "tr[data-tag=\"t_eng\"] td .computed") == "computed, inverse" and
              text_of(b, "tr[data-tag=\"t_ro\"] td .computed") == "computed" and
              not b.js("return document.querySelector('tr[data-tag=\"t_raw\"] td[data-computed]')"),
              "tags: computed tags show their expression and whether an inverse writes them; a read tag is not marked")
        # a computed tag with an inverse is edited like any writable tag: its input gets the inverse's value
        msg = write_through_page(b, "secret-0123456789abcdefgh", 12.5, "t_eng")
        c = g.client()
        check(msg == "written" and c.read_holding_registers(10, 1, slave=1).registers == [125],
              f"tags: a write of 12.5 to t_eng through the page writes t_raw = 125 ({msg})")
        c.close()
        b.wait("return document.querySelector('tr[data-tag=\"t_eng\"] td.value')?.textContent === '12.5'",
               "tags: the page then shows t_eng = 12.5 (its ?since= refresh lists computed tags)")
        b.shot("maps.png")
        errors = b.console_errors()
        check(not errors, f"maps: no console error ({errors[:2]})")
    finally:
        g.stop()


def check_config_key():
    """[http] frame_ring takes 0..4096; beyond, `rtugw check` names the line."""
    d = tempfile.mkdtemp(prefix="rtugw-ring-")
    cfg = os.path.join(d, "ring.conf")
    with open(cfg, "w") as f:
        f.write("[bus line]\nport = sim:1\n[tcp]\ndefault_bus = line\n[http]\nframe_ring = 4097\n")
    p = subprocess.run([BIN, "check", "-c", cfg], capture_output=True, text=True, timeout=20)
    check(p.returncode != 0 and f"{cfg}:6: [http] frame_ring = '4097'" in p.stderr,
          f"frame_ring = 4097 is refused with its line ({p.stderr.strip()[:120]})")


browser = None
try:
    check_config_key()
    check_ring_bounds()
    browser = Browser()
    test_demo(browser)
    test_silent(browser)
    test_tags(browser)
    test_maps(browser)
finally:
    if browser:
        browser.quit()
    for p in procs:
        if p.poll() is None:
            p.kill()
finish("webpage")
