#!/usr/bin/python3
"""The page's Scan view (web/page/scan.js) in a real browser: Debian's
chromium, headless, through python3-selenium and chromium-driver, against a
gateway whose bus is this test's scripted slaves on a pseudo-terminal
(tests/e2e/scan/test_scan.py's Line: slave 1 behind a turn-on glitch byte, slave 2
answering FC 3 only, slave 7, ids 3-6 and 8 silent).

What must hold, as an integrator commissioning the line would do it:
  - with the write token given (an admin on a gateway without users), the
    Scan view is offered; a scan of ids 1-8 started from it shows its
    progress and ends "done" with exactly slaves 1, 2 and 7 listed, slave 2
    with FC 3 only;
  - Add on slave 7's row with the template "meter" adds device meter7
    through the Configure view's call (PUT /api/devices/meter7), and its tag
    is then polled live: /tags gives meter7.v quality good and the slave's
    register (7000);
  - no console error on the page."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, chromium, run_tests, wait_for, wait_js  # noqa: E402
from tagscheck import tag_values  # noqa: E402
from test_scan import Line  # noqa: E402

TOKEN = "s3cret-0123456789abcdefXY"


def test_scan_view():
    drv = chromium()
    if not drv:
        return
    from selenium.webdriver.common.by import By
    line = Line([1, 2, 7], glitch={1}, only={2: {3}})
    d = tempfile.mkdtemp(prefix="rtugw-scan-page-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type,interval_ms\nv,holding,0,uint16,200\n")
    g = Gateway(bus=f"port = {line.path}\nbaud = 19200\n", devices="[template meter]\ntags_file = meter.csv\n",
                dir=d, extra=f"write_token = {TOKEN}\n", timeout_ms=150)
    try:
        drv.get(f"http://127.0.0.1:{g.http_port}/#tags")
        drv.find_element(By.ID, "token").send_keys(TOKEN)
        drv.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()
        wait_js(drv, "return !document.getElementById('nav-scan').hidden", "the Scan view is offered with the token")
        drv.execute_script("location.hash = '#scan'")
        wait_js(drv, "return document.querySelector('#scan-bus option[value=\"line\"]')", "the bus is offered")
        wait_js(drv, "return document.getElementById('scan-progress').dataset.state === 'none'",
                "no scan of the bus yet")
        for field, value in (("scan-first", "1"), ("scan-last", "8")):
            e = drv.find_element(By.ID, field)
            e.clear()
            e.send_keys(value)
        t0 = time.time()
        drv.find_element(By.ID, "scan-start").click()
        running = wait_js(drv, "const p = document.getElementById('scan-progress');"
                               "return p.dataset.state === 'running' && p.textContent",
                          "the view shows the scan running", timeout=5)
        print(f"   while running: {running!r}")
        done = wait_js(drv, "const p = document.getElementById('scan-progress');"
                            "return p.dataset.state === 'done' && p.textContent", "the scan ends done", timeout=30)
        print(f"   done in {time.time() - t0:.2f} s: {done!r}")
        slaves = drv.execute_script("return [...document.querySelectorAll('#scan-found tr[data-slave]')]"
                                    ".map((r) => Number(r.dataset.slave))")
        check(slaves == [1, 2, 7] and "8 of 8 ids tried" in done, f"slaves 1, 2 and 7 listed ({slaves}; {done!r})")
        fcs2 = drv.execute_script("return document.querySelector('#scan-found tr[data-slave=\"2\"] td:nth-child(2)')"
                                  ".textContent")
        check(fcs2 == "FC 3", f"slave 2: FC 3 only ({fcs2!r})")
        row = drv.find_element(By.CSS_SELECTOR, '#scan-found tr[data-slave="7"]')
        name = row.find_element(By.TAG_NAME, "input")
        name.clear()
        name.send_keys("meter7")
        check(row.find_element(By.TAG_NAME, "select").get_attribute("value") == "meter", "the template is offered")
        row.find_element(By.TAG_NAME, "button").click()
        msg = wait_js(drv, "const m = document.getElementById('scan-message'); return !m.hidden && m.textContent",
                      "the add is answered")
        check(msg.startswith("Device meter7 added"), f"device meter7 added ({msg!r})")
        check(wait_for(lambda: tag_values(g).get("meter7.v", {}).get("quality") == "good", 10),
              f"meter7.v is polled, quality good ({tag_values(g).get('meter7.v')})")
        v = tag_values(g)["meter7.v"]
        check(v["value"] == 7000, f"meter7.v = slave 7's holding 0, 7000 ({v})")
        errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"no console error ({errors})")
    finally:
        drv.quit()
        g.stop()
        line.close()
        shutil.rmtree(d, ignore_errors=True)


run_tests("test_webpage_scan", (test_scan_view,))
