#!/usr/bin/python3
"""A row added to a template used by 15 devices, then SIGHUP: the time until
its 15 new tags are good in /tags (docs/tags.md, "A live reload"). Run from
the build tree: RTUGW_BIN=./rtugw /usr/bin/python3 bench/reload_tags.py [--smoke]
(--smoke, for make check: 3 reloads, the output checked, not the figures;
every tag's value is checked against the simulator's in any mode)"""
import os, sys, time, signal, statistics, json, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'lib'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import Gateway, wait_for
import smoke  # bench/smoke.py: the --smoke verdict
import tempfile
SMOKE = "--smoke" in sys.argv[1:]
d = tempfile.mkdtemp(prefix="rtugw-reload-bench-")
csv = f"{d}/meter.csv"
with open(csv, "w") as f:
    f.write("name,table,address,type,interval_ms\n" + "".join(f"r{a},holding,{a},uint16,200\n" for a in range(20)))
devices = f"[template meter]\ntags_file = {csv}\n" + "".join(f"[device meter{k}]\nslave = {k}\ntemplate = meter\n" for k in range(1, 16))
g = Gateway(bus="port = sim:" + ",".join(str(k) for k in range(1, 16)) + "\nbaud = 115200\n", devices=devices, timeout_ms=300, dir=d)
def tags():
    return {t["name"]: t for t in json.loads(urllib.request.urlopen(f"http://127.0.0.1:{g.http_port}/tags", timeout=5).read())["tags"]}
assert wait_for(lambda: len(tags()) == 300 and all(t["quality"] == "good" for t in tags().values()), 20)
times, worst = [], 0
for k in range(3 if SMOKE else 11):
    with open(csv, "a") as f:
        f.write(f"n{k},holding,{30 + k},uint16,200\n")
    t0 = time.monotonic()
    g.p.send_signal(signal.SIGHUP)
    def done():
        global worst
        v = tags()
        worst = max(worst, sum(t["quality"] != "good" for n, t in v.items() if not n.endswith(f".n{k}")))
        return all(v.get(f"meter{m}.n{k}", {}).get("quality") == "good" for m in range(1, 16))
    assert wait_for(done, 10, step=0.05), k
    times.append(time.monotonic() - t0)
    time.sleep(0.3)
# holding[a] = slave * 1000 + a in the simulator: every tag read meter{slave}.{r|n}{k} at its address
addr = lambda n: int(n[1:]) if n[0] == "r" else 30 + int(n[1:])  # noqa: E731
final = tags()
wrong = sum(1 for n, t in final.items() if t.get("value") != int(n.split(".")[0][5:]) * 1000 + addr(n.split(".")[1]))
g.stop()
q = statistics.quantiles(times, n=10)
print(f"SIGHUP -> a template row's 15 new tags all good (15 devices x 20..30 tags, 200 ms): median {statistics.median(times)*1000:.0f} ms, p10 {q[0]*1000:.0f}, p90 {q[-1]*1000:.0f}, n={len(times)}; worst count of old tags not good meanwhile: {worst}; tags with a wrong value: {wrong}")
if SMOKE:
    smoke.check("reload_tags.py", {"median_ms": statistics.median(times) * 1000, "reloads": len(times),
                                   "worst_not_good": worst, "tags": len(final)},
                ["median_ms", "reloads", "worst_not_good", "tags"], wrong=wrong, at_least={"tags": 300 + 15 * len(times)})
elif wrong:
    sys.exit(1)
