#!/usr/bin/python3
"""[router] changed live (issue 41): a real `rtugw run` with two buses on the
built-in simulator, each read throughout by a pymodbus Modbus TCP client on ONE
connection, and [router] changed three times:
  1. exploration, policy, explore_run, verify_rate by SIGHUP (the same buckets:
     the new router keeps the learned table, the log says so);
  2. buckets (and sample_every) by PUT /api/config (a new table, which relearns);
  3. state_file alone by SIGHUP (nothing restarts; the stop saves there).
After each: applied, restart_needed empty, "router" in last_reload's applied
(not for 3), every bus restarted once (the log), both clients' answers right
again, /metrics' rtugw_router_* series there with the buckets in force; over
the run 0 wrong values, 0 lost requests, exceptions only 0x0A/0x0B and only
while a swap ran. Then a [router] the new router refuses cannot be written
(the whole-file check), and the stop writes the state file at the new path.
Run it under load too: RTUGW_BURN=2."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
from test_bus_live import Reader, reloaded  # noqa: E402
from test_live_change import TOKEN, api, hup  # noqa: E402

BUS_B = "[bus lineb]\nport = sim:1,2\nbaud = 115200\nresponse_timeout_ms = 150\nretries = 1\n"
ROUTES = "unit2 = lineb:1\nunit3 = lineb:2\n"
ROUTER = "[router]\nexploration = 0.05\nsample_every = 64\n"


def router_buckets(g):
    """The bucket labels of /metrics' rtugw_router_pulls_total series."""
    return sorted({k.split('bucket="')[1].split('"')[0] for k in g.metrics()
                   if k.startswith("rtugw_router_pulls_total{")}, key=lambda s: int(s.split("-")[0]))


def test_router_live():
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=BUS_B, extra_tcp=ROUTES,
                extra=f"write_token = {TOKEN}\n" + ROUTER)
    sdir = tempfile.mkdtemp(prefix="rtugw-router-")   # outlives g.stop(), which removes g.dir
    state = os.path.join(sdir, "router.state")
    a = Reader(g, [(1, [1010, 1011])])
    b = Reader(g, [(2, [1010, 1011]), (3, [2010, 2011])])
    a.start()
    b.start()
    check(wait_for(lambda: a.right > 20 and b.right > 20, 5), f"both buses answer ({a.right}, {b.right})")
    check(router_buckets(g) == ["0-8", "9-16", "17-32", "33-64", "65-128", "129-256"],
          f"/metrics has the default buckets ({router_buckets(g)})")
    swaps = []
    changes = [
        ("policy and exploration by SIGHUP", "hup", "exploration = 0.05\n",
         "exploration = 0.2\npolicy = thompson\nexplore_run = 4\nverify_rate = 0.5\n", True,
         ["0-8", "9-16", "17-32", "33-64", "65-128", "129-256"], "its learned table kept"),
        ("buckets by PUT /api/config", "api", "sample_every = 64\n",
         "sample_every = 16\nbuckets = 12,64,256\n", True, ["0-12", "13-64", "65-256"], "its learned table empty"),
        ("state_file alone by SIGHUP", "hup", "sample_every = 16\n",
         f"sample_every = 16\nstate_file = {state}\n", False, ["0-12", "13-64", "65-256"], None),
    ]
    restarts = 0
    for what, how, old, new, rebuilt, buckets, said in changes:
        text = g.text.replace(old, new)
        check(text != g.text, f"{what}: the file changes")
        rev = (g.status()["last_reload"] or {}).get("revision")
        right_a, right_b = a.right, b.right
        t0 = time.time()
        if how == "hup":
            hup(g, text)
        else:
            st, out = api(g, "PUT", "/api/config", raw=text.encode())
            check(st == 200 and out.get("restart_needed") == "", f"{what}: the API says nothing waits ({st} {out})")
            g.text = text
        check(wait_for(lambda: reloaded(g, rev), 5), f"{what}: reloaded ({g.status()['last_reload']})")
        st = g.status()
        last = st["last_reload"]
        check(st["restart_needed"] == "" and last["result"] == "applied",
              f"{what}: applied, nothing waits ({last['result']}, {st['restart_needed']!r}, {last.get('error')})")
        check(("router" in last["applied"].split()) == rebuilt,
              f"{what}: applied names the router {'' if rebuilt else 'not '}({last['applied']!r})")
        restarts += 2 if rebuilt else 0
        check(wait_for(lambda: g.log_text().count("restarted at its new settings") == restarts, 5),
              f"{what}: {restarts} bus restarts so far ({g.log_text().count('restarted at its new settings')})")
        if said:
            check(said in g.log_text(), f"{what}: the log says '{said}'")
        check(wait_for(lambda: a.right > right_a + 20 and b.right > right_b + 20, 5),
              f"{what}: both buses answer right again ({a.right - right_a}, {b.right - right_b})")
        swaps.append((t0, time.time()))
        check(router_buckets(g) == buckets, f"{what}: /metrics' router series, buckets {router_buckets(g)}")
        time.sleep(0.3)
    # a [router] the router refuses never lands: the whole-file check comes first
    rev = (g.status()["last_reload"] or {}).get("revision")
    st, out = api(g, "PUT", "/api/config", raw=g.text.replace("buckets = 12,64,256\n", "buckets = 64,12\n").encode())
    check(st in (400, 422), f"non-increasing buckets are refused by the API ({st} {out})")
    check(g.status()["last_reload"].get("revision") == rev and router_buckets(g) == ["0-12", "13-64", "65-256"],
          "and the running router is unchanged")
    time.sleep(0.3)
    a.finish()
    b.finish()
    for name, r in (("bus A", a), ("bus B", b)):   # > 20 at the start and after each of 3 changes
        check(r.wrong == 0 and r.lost == 0 and r.right > 80,
              f"{name}: {r.right} right, 0 wrong ({r.wrongs[:5]}), 0 lost ({r.lost})")
        codes = {c for _, c in r.exceptions}
        check(codes <= {0x0A, 0x0B}, f"{name}'s exceptions are 0x0A or 0x0B only ({sorted(codes)})")
        outside = [t for t, _ in r.exceptions if not any(s <= t <= e for s, e in swaps)]
        check(not outside, f"{name}'s exceptions ({len(r.exceptions)}) all came during a swap ({len(outside)} outside)")
    check(g.p.poll() is None, "the daemon runs")
    g.stop()
    check(os.path.exists(state), "the stop saved the router's table at the state_file set live")
    with open(state) as f:
        check("edges 12 64 256" in f.read(), "with the buckets set live")
    shutil.rmtree(sdir, ignore_errors=True)


def test_router_waits_without_io_thread_buses():
    """With buses_on_io_thread = false no bus restarts in place: the change
    waits, named `router` with its reason, and the old router answers on."""
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", gateway_extra="buses_on_io_thread = false\n", extra=ROUTER)
    a = Reader(g, [(1, [1010, 1011])])
    a.start()
    check(wait_for(lambda: a.right > 20, 5), f"the bus answers ({a.right})")
    rev = (g.status()["last_reload"] or {}).get("revision")
    hup(g, g.text.replace("exploration = 0.05\n", "exploration = 0.3\n"))
    check(wait_for(lambda: reloaded(g, rev), 5), "reloaded")
    st = g.status()
    check(st["restart_needed"] == "router" and "buses_on_io_thread" in (st["last_reload"].get("error") or ""),
          f"router waits, with its reason ({st['restart_needed']!r}, {st['last_reload'].get('error')!r})")
    right = a.right
    check(wait_for(lambda: a.right > right + 20, 5), "the bus answers on")
    a.finish()
    check(a.wrong == 0 and a.lost == 0 and not a.exceptions, f"all right ({a.exceptions[:3]} {a.wrongs[:3]})")
    check(router_buckets(g) == ["0-8", "9-16", "17-32", "33-64", "65-128", "129-256"], "the router runs on")
    g.stop()


if __name__ == "__main__":
    run_tests("test_live_router", [test_router_live, test_router_waits_without_io_thread_buses])
