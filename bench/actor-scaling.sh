#!/bin/sh
# Actor scheduler scaling run: `rtugw bench actors` at 1, 2, 4, 8 and 15 workers
# (issue 4), each arm paired with the 1-worker arm inside every repetition, then
# the widest arm again with 4x the pairs. Meant for a machine with 16 or more cores,
# run once, as one script, nothing else running.
#
#   bench/actor-scaling.sh [--smoke] OUTDIR [rtugw command...]
#
# --smoke (make check, tests/bench/test_bench_smoke.sh): 1 and 2 workers, a few
# thousand rounds, then each run's JSON checked for its shape (every arm's
# figures finite, enqueue = dequeue) through bench/smoke.py; not the figures.
#
# The rtugw command defaults to ./rtugw. `rtugw bench` runs rtugw-bench from
# beside the rtugw binary with exec: on a machine without the libraries, point
# LD_LIBRARY_PATH at copies of them (a loader given on the command line, as
# docs/actor.md's run of 2026-11-30 did before the benchmarks left the
# daemon, is not inherited by that exec). Writes
# OUTDIR/scaling.jsonl (one `--json` object per run) and OUTDIR/scaling.md (the
# machine's description and a line per run). Exits non-zero if any run does
# (the bench itself exits 1 when enqueue != dequeue).
script=actor-scaling.sh stem=scaling title="rtugw bench actors: scaling"
# shellcheck source=bench/scaling-common.sh
. "$(dirname "$0")/scaling-common.sh"

# rounds: 100000 a pair keeps even the 15-worker repetition near 20 ms; the
# mutex baseline (a thread per actor) gets 2000 rounds, it is ~50x slower.
if [ $smoke = 1 ]; then
    for w in 1 2; do
        run "$@" bench actors --pairs 4 --rounds 2000 --mutex-rounds 100 --workers $w
    done
    /usr/bin/python3 - "$js" "$(dirname "$0")" <<'PY' || rc=1
import sys
sys.path.insert(0, sys.argv[2])
import smoke
smoke.check_arms("actor-scaling.sh", sys.argv[1], ("ns_per_message", "cpu_ns_per_message", "messages"),
                 lambda r, run, k, arm: "%d.%d" % (r, k),
                 lambda run, arm: arm["enqueue"] != arm["dequeue"],   # a message lost or made up
                 at_least={"runs": 2})
PY
    exit $rc
fi
for w in 1 2 4 8 15; do
    run "$@" bench actors --pairs 32 --rounds 100000 --mutex-rounds 2000 --workers $w
done
run "$@" bench actors --pairs 128 --rounds 50000 --mutex-rounds 500 --workers 15

echo "load after: $(cat /proc/loadavg)" >>"$md"
exit $rc
