#!/usr/bin/python3
"""A template's tag file through the API (docs/api.md): GET and PUT
/api/templates/NAME/csv, with the simulator behind a real gateway.

What must hold:
  - GET gives the file's bytes and its revision (ETag);
  - a 100-row CSV with two bad rows: ?dry_run=1 names each by line and column
    ({line, column, message}, the loader's words) and writes nothing; a PUT of
    it is refused (422) with the same errors, nothing written or applied;
  - the fixed CSV: without If-Match 428, a stale revision 409, with the ETag
    written (the file passes `rtugw check`) and applied live: the 100 tags
    read in /tags while a Modbus TCP connection opened before keeps answering
    on the same socket;
  - hostile bodies: a NUL byte (its line and column), an unterminated quoted
    newline, 100,000 rows (413 naming the bound, the daemon's peak RSS flat):
    clear errors, nothing written or applied; no token: refused."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mqtt"))  # tests/e2e/mqtt/test_mqtt_tags.py: mbap_read
from rtugwtest import BIN, Gateway, check, rss_growth_bound_kib, run_tests, status_kib, wait_for  # noqa: E402
from tagscheck import tag_values  # noqa: E402
from test_mqtt_tags import mbap_read  # noqa: E402

HEADER = "name,table,address,type,interval_ms,description\n"


def rows_csv(n, bad=()):
    """n rows r0..r(n-1) at holding 0..n-1; the rows in bad get a broken type or address."""
    out = [HEADER]
    for i in range(n):
        typ, addr = "uint16", str(i)
        if len(bad) > 0 and i == bad[0]:
            typ = "uint17"
        if len(bad) > 1 and i == bad[1]:
            addr = "x12"
        out.append(f"r{i},holding,{addr},{typ},200,\"row {i}, of {n}\"\n")
    return "".join(out)


def test_api_template_csv():
    d = tempfile.mkdtemp(prefix="rtugw-api-csv-")
    csv_path = os.path.join(d, "meter.csv")
    with open(csv_path, "w") as f:
        f.write("name,table,address,type,interval_ms\nvoltage,holding,0,uint16,200\n")
    tpl = f"[template meter]\ntags_file = {csv_path}\n[device meter1]\nslave = 1\ntemplate = meter\n"
    g = Gateway(bus="port = sim:1,2\nbaud = 115200\n", devices=tpl, dir=d,
                extra="write_token = s3cret-0123456789abcdefXY\nmax_body_bytes = 8388608\n")
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}
    url = f"http://127.0.0.1:{g.http_port}/api/templates/meter/csv"

    def call(method, query="", body=None, headers=None):
        req = urllib.request.Request(url + query, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def on_disk():
        with open(csv_path, "rb") as f:
            return f.read()
    original = on_disk()
    st, body, hdr = call("GET")
    etag = (hdr.get("ETag") or "").strip('"')
    check(st == 200 and body == original and len(etag) == 16 and hdr.get("Content-Type", "").startswith("text/csv"),
          f"GET: the file's bytes and its revision ({st} {hdr.get('ETag')})")
    check(wait_for(lambda: tag_values(g).get("meter1.voltage", {}).get("value") == 1000, 5), "meter1 reads before")
    sock = socket.create_connection(("127.0.0.1", g.tcp_port), timeout=3)
    check(mbap_read(sock, 1, 3) == [1003], "Modbus TCP answers before the change")

    bad = rows_csv(100, bad=(37, 81)).encode()
    st, body, _ = call("PUT", "?dry_run=1", bad, auth)
    v = json.loads(body or b"{}")
    where = [(e["line"], e["column"]) for e in v.get("errors", [])]
    check(st == 422 and v.get("error_count") == 2 and where == [(39, 16), (83, 13)] and
          "uint17" in v["errors"][0]["message"] and "x12" in v["errors"][1]["message"],
          f"dry run: the two bad rows by line and column ({st} {v})")
    check(on_disk() == original, "a dry run writes nothing")
    st, body, _ = call("PUT", "", bad, {**auth, "If-Match": etag})
    check(st == 422 and [(e["line"], e["column"]) for e in json.loads(body)["errors"]] == where and
          on_disk() == original, f"PUT of it: 422, the same errors, nothing written ({st})")

    good = rows_csv(100).encode()
    st, body, _ = call("PUT", "?dry_run=1", good, auth)
    check(st == 200 and json.loads(body) == {"valid": True, "rows": 100, "errors": [], "error_count": 0},
          f"dry run of the fixed file: valid, 100 rows ({st} {body})")
    check(call("PUT", "", good, auth)[0] == 428, "PUT without If-Match: 428")
    check(call("PUT", "", good, {**auth, "If-Match": "0123456789abcdef"})[0] == 409, "a stale revision: 409")
    check(call("PUT", "", good)[0] in (401, 403) and on_disk() == original, "no token: refused, nothing written")
    st, body, _ = call("PUT", "", good, {**auth, "If-Match": f'"{etag}"'})
    r = json.loads(body or b"{}")
    check(st == 200 and r.get("rows") == 100 and r.get("restart_needed") == "" and on_disk() == good,
          f"PUT with the ETag: written ({st} {r})")
    p = subprocess.run([BIN, "check", "-c", g.cfg], capture_output=True, text=True)
    check(p.returncode == 0, f"the configuration with it passes rtugw check: {p.stderr}")
    check(not [n for n in os.listdir(d) if ".api-" in n], "no temporary file left")
    check(wait_for(lambda: tag_values(g).get("meter1.r99", {}).get("value") == 1099 and
                   "meter1.voltage" not in tag_values(g), 5), "applied live: meter1.r99 reads 1099, voltage gone")
    check(mbap_read(sock, 2, 3) == [1003], "the Modbus TCP connection opened before answers on the same socket")
    check(call("PUT", "", good, {**auth, "If-Match": etag})[0] == 409, "the old revision is stale now: 409")
    st, _, hdr = call("GET")
    etag = hdr.get("ETag").strip('"')

    # hostile bodies: clear errors, nothing written or applied
    now = on_disk()
    nul = HEADER.encode() + b"a,holding,1,uint16,200,x\nb,holding,2,ui\x00nt16,200,x\n"
    st, body, _ = call("PUT", "?dry_run=1", nul, auth)
    e = json.loads(body)["errors"]
    check(st == 422 and (e[0]["line"], e[0]["column"]) == (3, 15) and "NUL" in e[0]["message"],
          f"a NUL byte: its line and column ({st} {e})")
    quoted = HEADER + 'a,holding,1,uint16,200,"two\nlines"\nb,holding,2,uint16,200,"never\nclosed\n'
    st, body, _ = call("PUT", "", quoted.encode(), {**auth, "If-Match": etag})
    e = json.loads(body)["errors"]
    check(st == 422 and e[0]["line"] == 4 and "quote" in e[0]["message"],
          f"a quoted newline is a field's, an unclosed quote an error at its line ({st} {e})")
    peak = status_kib(g.p.pid, "VmHWM")
    huge = (HEADER + "a,holding,0,uint16,,\n" * 100000).encode()
    st, body, _ = call("PUT", "", huge, {**auth, "If-Match": etag})
    check(st == 413 and "100001 lines: a tag file takes at most 10000" in json.loads(body)["error"],
          f"100,000 rows: 413 naming the bound ({st} {body[:120]})")
    grew = status_kib(g.p.pid, "VmHWM") - peak
    check(grew < rss_growth_bound_kib() + len(huge) // 1024 * 3,
          f"the peak RSS grew {grew} KiB for a {len(huge) // 1024} KiB body (the body, not a table of its rows)")
    check(on_disk() == now and call("GET")[2].get("ETag").strip('"') == etag and
          tag_values(g).get("meter1.r99", {}).get("value") == 1099, "nothing written or applied")
    check(mbap_read(sock, 3, 3) == [1003], "and the connection still answers")
    sock.close()
    m = g.metrics()
    check(m.get("rtugw_http_api_changes_total") == 1, f"one change counted ({m.get('rtugw_http_api_changes_total')})")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_api_template_csv_whole_check():
    """The rows are checked as every device of the template reads them: a
    Modicon address without a table passes for a Modicon device and is an
    error for a plain one (named). A file the loader takes but the whole
    configuration does not (7 devices x 9,999 rows, past the tag limit):
    422 with check's message, the old bytes put back, nothing applied."""
    d = tempfile.mkdtemp(prefix="rtugw-api-csv-check-")
    csv_path = os.path.join(d, "meter.csv")

    def gateway(modicon_first):
        with open(csv_path, "w") as f:
            f.write("name,table,address,type\nvoltage,holding,40001,uint16\n")
        devices = "".join(f"[device meter{i}]\nslave = {i}\ntemplate = meter\n"
                          + ("addressing = modicon\n" if modicon_first and i == 1 else "") for i in range(1, 8))
        return Gateway(bus="port = sim:1,2,3,4,5,6,7\nbaud = 115200\n", dir=d,
                       devices=f"[template meter]\ntags_file = {csv_path}\n" + devices,
                       extra="write_token = s3cret-0123456789abcdefXY\nmax_body_bytes = 8388608\n")
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}

    def call(g, method, query="", body=None, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/templates/meter/csv" + query, data=body,
                                     method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers
    g = gateway(True)
    st, body, _ = call(g, "PUT", "?dry_run=1", b"name,table,address,type\nv,,40001,uint16\n", auth)
    v = json.loads(body)
    check(st == 422 and v.get("device") == "meter2" and v["errors"][0]["line"] == 2,
          f"a Modicon address without a table: an error for the plain devices, named ({st} {v})")
    g.stop()

    g = gateway(False)
    with open(csv_path, "rb") as f:
        original = f.read()
    etag = call(g, "GET")[2].get("ETag").strip('"')
    big = ("name,table,address,type\n" + "".join(f"r{i},holding,{i},uint16\n" for i in range(9999))).encode()
    st, body, _ = call(g, "PUT", "", big, {**auth, "If-Match": etag})
    v = json.loads(body or b"{}")
    with open(csv_path, "rb") as f:
        now = f.read()
    check(st == 422 and v.get("valid") is False and v.get("errors") and now == original,
          f"past the tag limit: check's word, the old bytes back ({st} {str(v)[:300]})")
    check(not [n for n in os.listdir(d) if ".api-" in n], "no temporary file left")
    check(call(g, "GET")[2].get("ETag").strip('"') == etag and "meter1.r9998" not in tag_values(g) and
          g.metrics().get("rtugw_http_api_changes_total", 0) == 0, "nothing applied")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)

def test_api_device_csv():
    """A device's own tags_file through /api/devices/NAME/csv, shared by two
    devices (its device column picks one): GET is the file and its ETag; a
    dry run names a bad row by line and column, and a row for a device that
    does not read the file; the fixed file with the ETag is written, passes
    `rtugw check`, and its rows for both devices are read live, unscoped; a
    device without a file of its own, or none at all: 404."""
    d = tempfile.mkdtemp(prefix="rtugw-api-device-csv-")
    csv_path = os.path.join(d, "plant.csv")
    with open(csv_path, "w") as f:
        f.write("name,device,table,address,type,interval_ms\nboiler_t,boiler,holding,0,uint16,200\n")
    devices = (f"[device boiler]\nslave = 1\ntags_file = {csv_path}\n"
               f"[device pump]\nslave = 2\ntags_file = {csv_path}\n[device spare]\nslave = 3\n")
    g = Gateway(bus="port = sim:1,2,3\nbaud = 115200\n", devices=devices, extra="write_token = s3cret-0123456789abcdefXY\n", dir=d)
    auth = {"Authorization": "Bearer s3cret-0123456789abcdefXY"}

    def call(method, name, query="", body=None, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port}/api/devices/{name}/csv{query}", data=body,
                                     method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers
    check(wait_for(lambda: tag_values(g).get("boiler_t", {}).get("value") == 1000, 5), "boiler_t reads before")
    st, body, hdr = call("GET", "pump")
    etag = (hdr.get("ETag") or "").strip('"')
    with open(csv_path, "rb") as f:
        check(st == 200 and body == f.read() and len(etag) == 16, f"GET /api/devices/pump/csv: the file, its ETag ({st})")
    head = "name,device,table,address,type,interval_ms\n"
    bad = (head + "boiler_t,boiler,holding,0,uint16,200\npump_p,pump,holding,7,uint17,200\n"
           "spare_x,spare,holding,1,uint16,200\n").encode()
    st, body, _ = call("PUT", "pump", "?dry_run=1", bad, auth)
    v = json.loads(body or b"{}")
    where = [(e["line"], e["column"]) for e in v.get("errors", [])]
    check(st == 422 and v.get("error_count") == 2 and where[0] == (3, 23) and "uint17" in v["errors"][0]["message"]
          and where[1][0] == 4 and "spare" in v["errors"][1]["message"],
          f"dry run: the bad type and a device that does not read the file, by line and column ({st} {v})")
    good = (head + "boiler_t,boiler,holding,0,uint16,200\npump_p,pump,holding,7,uint16,200\n").encode()
    check(call("PUT", "pump", "", good, {**auth, "If-Match": "0123456789abcdef"})[0] == 409, "a stale revision: 409")
    st, body, _ = call("PUT", "pump", "", good, {**auth, "If-Match": etag})
    r = json.loads(body or b"{}")
    with open(csv_path, "rb") as f:
        check(st == 200 and r.get("rows") == 2 and f.read() == good, f"PUT with the ETag: written ({st} {r})")
    p = subprocess.run([BIN, "check", "-c", g.cfg], capture_output=True, text=True)
    check(p.returncode == 0, f"the configuration with it passes rtugw check: {p.stderr}")
    check(wait_for(lambda: tag_values(g).get("pump_p", {}).get("value") == 2007 and
                   tag_values(g).get("boiler_t", {}).get("value") == 1000, 5),
          "applied live: pump_p reads 2007 (slave 2), boiler_t still 1000, unscoped names")
    check(call("GET", "spare")[0] == 404, "a device without a tags_file of its own: 404")
    check(call("GET", "nosuch")[0] == 404, "no such device: 404")
    check(call("PUT", "boiler", "", good)[0] in (401, 403), "no token: refused")
    g.stop()
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_api", [test_api_template_csv, test_api_template_csv_whole_check, test_api_device_csv])
