#!/bin/sh
# Front-end scaling run: `rtugw bench cores` with the gateway on 1, 2, 4 and 8
# CPUs ([tcp] loops the same number) and the client on CPUs of its own, on
# cached reads, on cached reads 4 in flight, and through a Modbus TCP device
# bus (--bus): issue 45's "2 cores >= 1.7x the rate on 1 core", which a 2-core
# box cannot show (its client and loopback take most of a core). Meant for a
# machine with 16 or more cores (the device machine), run once, as one
# script, nothing else running; about 3 minutes.
#
#   bench/cores-scaling.sh [--smoke] OUTDIR [rtugw command...]
#
# --smoke (make check, tests/bench/test_bench_smoke.sh): two arms, unpinned,
# the bench's --smoke rounds, the JSON checked for its shape and where the
# answers came from (the cache, or the bus with --bus); not the figures.
#
# The rtugw command defaults to ./rtugw. `rtugw bench` runs rtugw-bench from
# beside the rtugw binary, and the bench starts the rtugw beside itself, both
# with exec: on a machine without the libraries, point LD_LIBRARY_PATH at
# copies of them (a loader given on the command line is not inherited). Writes
# OUTDIR/cores.jsonl (one `--json` object per run) and OUTDIR/cores.md (the
# machine and each command, then each run as a Markdown table). Exits non-zero if any run does
# (the bench exits 1 on any wrong or missing answer).
script=cores-scaling.sh stem=cores title="rtugw bench cores: scaling"
# shellcheck source=bench/scaling-common.sh
. "$(dirname "$0")/scaling-common.sh"
cpus=$(getconf _NPROCESSORS_ONLN)

# Each run's JSON as a Markdown table in cores.md.
tables() {
    /usr/bin/python3 - "$js" >>"$md" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("\n%s, %d clients on %d threads (CPUs %s), depth %d, %d rounds of %.2f s\n" % (
        r["path"], r["clients"], r["client_threads"], r["client_cpus"], r["depth"], r["rounds"],
        r["seconds"] / r["rounds"]))
    print("| arm | CPUs | keys | answers/s | / first | us per read | gateway CPU (busiest) | client CPU | box busy |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for a in r["arms"]:
        print("| %s | %s | %s | %.0f (%.0f-%.0f) | %.3f (%.3f-%.3f) | %.1f (%.1f-%.1f) | %.2f (%.2f) | %.2f | %.2f |" % (
            a["label"], a["cpus"] or "any", a["keys"] or "-", a["rps"], a["rps_p10"], a["rps_p90"], a["ratio"],
            a["ratio_p10"], a["ratio_p90"], a["us"], a["us_p10"], a["us_p90"], a["gateway_cpu"],
            a["gateway_thread_cpu"], a["client_cpu"], a["box_cpu"]))
PY
}
if [ $smoke = 1 ]; then
    for path in "" --bus; do
        run "$@" bench cores --smoke $path --arm one:: --arm two::'loops = 2'
    done
    /usr/bin/python3 - "$js" "$(dirname "$0")" <<'PY' || rc=1
import sys
sys.path.insert(0, sys.argv[2])
import smoke
# where the answers came from: the cache, or with --bus the bus
smoke.check_arms("cores-scaling.sh", sys.argv[1], ("rps", "us", "answers"),
                 lambda r, run, k, arm: "%s.%s" % (run["path"], arm["label"]),
                 lambda run, arm: arm["cache_fraction"] < 0.99 if run["path"] == "cache" else arm["cache_fraction"] > 0.01,
                 at_least={"runs": 2, "cache.one.answers": 1, "cache.two.answers": 1, "bus.one.answers": 1,
                           "bus.two.answers": 1})
PY
    tables || rc=1
    exit $rc
fi
if [ "$cpus" -lt 16 ]; then
    echo "bench/cores-scaling.sh: $cpus online cores; the run needs 16 (8 for the gateway, 8 for the client)" >&2
    exit 2
fi
# the gateway on CPUs 0..N-1 with N loops; the client on 8-15, 8 threads
arms="--arm one_core:0: --arm two_cores:0-1:loops=2 --arm four_cores:0-3:loops=4 --arm eight_cores:0-7:loops=8;bus_share=8"
client="--client-cpus 8-15 --client-threads 8 --seconds 8 --rounds 8"
# shellcheck disable=SC2086 # the arms and the client options are word lists
run "$@" bench cores $client $arms
# shellcheck disable=SC2086
run "$@" bench cores $client --depth 4 $arms
# shellcheck disable=SC2086
run "$@" bench cores $client --bus $arms
echo "load after: $(cat /proc/loadavg)" >>"$md"
tables || rc=1
exit $rc
