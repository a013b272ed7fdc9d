#!/usr/bin/python3
"""What issue 40's guarantees cost on an RTU-over-TCP bus (I3's two talkers,
I7-I9: line/foreign.c), side by side with another build: the device server
of tests/e2e/modbus/test_device_server.py, four pymodbus clients, answers with data per
second, per run, for each build in turn (so both see the same machine).

    bench/device_server.py OLD_RTUGW [NEW_RTUGW] [--profile issue|fast|none] [--smoke]
                           [--scale S] [--seconds T] [--rounds N]

--profile none --scale 0: a healthy device server (no fault): the cost on a
line where nothing goes wrong. The issue's own mix: --profile issue --scale 1.
Prints median and p10-p90 of data answers/s per build, their ratio, and the
wrong answers each got (a build that lets another slave's frame through).
"""
import argparse
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(here, "..", "tests", "e2e", "modbus"))   # test_device_server: the device server
sys.path.insert(0, here)
import smoke  # noqa: E402   bench/smoke.py: the --smoke verdict


def quantile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", nargs="?", default=os.path.join(here, "..", "rtugw"))
    ap.add_argument("new", nargs="?", default=os.path.join(here, "..", "rtugw"))
    ap.add_argument("--profile", default="issue")
    ap.add_argument("--scale", default="1")
    ap.add_argument("--seconds", default="10")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true",
                    help="make check: one run of 2 s of one build; checks the output, not the figures")
    a = ap.parse_args()
    if a.smoke:
        a.seconds, a.rounds = "2", 1
    os.environ["RTUGW_DEVSERVER_SCALE"] = a.scale
    os.environ["RTUGW_DEVSERVER_SECONDS"] = a.seconds
    import rtugwtest
    import test_device_server as t
    builds = {"new": a.new} if a.smoke else {"old": a.old, "new": a.new}
    rate = {k: [] for k in builds}
    wrong = {k: 0 for k in builds}
    for r in range(a.rounds):
        for name, path in builds.items():
            rtugwtest.BIN = path
            res = t.one_run(100 + r, r % 2 == 1, a.profile)
            rate[name].append(res["data"] / float(a.seconds))
            wrong[name] += res["wrong"]
    print(f"\n| device server, profile {a.profile} x{a.scale}, {a.rounds} runs of {a.seconds} s | "
          "data answers/s median (p10-p90) | wrong |")
    print("|---|---|---|")
    for name in builds:
        xs = rate[name]
        print(f"| {name} ({builds[name]}) | {statistics.median(xs):.1f} ({quantile(xs, .1):.1f}-"
              f"{quantile(xs, .9):.1f}) | {wrong[name]} |")
    if a.smoke:
        smoke.check("device_server.py", {"data_answers_s": rate["new"][0]}, ["data_answers_s"], wrong=wrong["new"],
                    at_least={"data_answers_s": 0.5})
        return
    ratios = [n / o for n, o in zip(rate["new"], rate["old"]) if o]
    if ratios:
        print(f"| new/old, run by run | {statistics.median(ratios):.3f} ({quantile(ratios, .1):.3f}-"
              f"{quantile(ratios, .9):.3f}) | |")


if __name__ == "__main__":
    main()
