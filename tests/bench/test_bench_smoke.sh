#!/bin/sh
# tests/bench/test_bench_smoke.sh -- every bench script in its --smoke mode: it
# starts, measures one short round, and checks its own output (every figure
# it reports present and finite, no answer it checked wrong: bench/smoke.py),
# so that a script nothing else runs cannot rot unseen. The figures of a run
# this short mean nothing and are not judged. A bench script that is neither
# run here nor by a test of its own (SEPARATE below) fails this test: a new
# script comes with a --smoke mode.
set -u
src=$(cd "${RTUGW_SRCDIR:-$(dirname "$0")/../..}" && pwd)
bin=${RTUGW_BIN:-$src/rtugw}
py=/usr/bin/python3   # the system's, with pymodbus (web_auth.py, device_server.py)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtugw-bench-smoke.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0
# Run by tests of their own: tls.py (test_bench_tls.sh), footprint.py
# (test_bench_footprint.sh), bus_footprint.py (test_bench_bus_footprint.sh),
# limiter_memory.py (test_bench_limiter.sh); smoke.py is the verdict, not a bench;
# scaling-common.sh is the scaling scripts' preamble, run by both.
SEPARATE="tls.py footprint.py bus_footprint.py smoke.py limiter_memory.py scaling-common.sh"

# smoke NAME COMMAND...: the command exits 0 and prints "smoke ok: NAME".
smoke() {
    name=$1
    shift
    start=$(date +%s)
    out=$(cd "$tmp" && RTUGW_BIN="$bin" timeout 120 "$@" 2>&1)
    rc=$?
    took=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^smoke ok: $name:"; then
        echo "ok: $name (${took} s): $(printf '%s\n' "$out" | grep "^smoke ok: $name:" | cut -c1-160)"
    else
        echo "FAIL: $name (exit $rc, ${took} s):"
        printf '%s\n' "$out" | tail -n 30
        failed=1
    fi
    ran="$ran $name"
}

ran=""
smoke overload.py $py "$src/bench/overload.py" --smoke --bin "$bin"
smoke idle_conns.py $py "$src/bench/idle_conns.py" --smoke --bin "$bin"
smoke machine_load.py $py "$src/bench/machine_load.py" --smoke --arm "rtugw=$bin"
smoke give-up-recovery.py $py "$src/bench/give-up-recovery.py" --smoke "$bin"
smoke paced_wakeups.py $py "$src/bench/paced_wakeups.py" --smoke --arm "rtugw=$bin"
smoke storm_isolation.py $py "$src/bench/storm_isolation.py" --smoke --arm "rtugw=$bin"
smoke reload_tags.py $py "$src/bench/reload_tags.py" --smoke
smoke listen.py $py "$src/bench/listen.py" --smoke
smoke web_auth.py $py "$src/bench/web_auth.py" --smoke --bin "$bin"
smoke device_server.py $py "$src/bench/device_server.py" --smoke "$bin" "$bin"
smoke map.py $py "$src/bench/map.py" --smoke
smoke tags_poll.py $py "$src/bench/tags_poll.py" --smoke --bin "$bin"
# (the lock: test_cpu_latency.py reads the machine's CPU latency request as its daemon's)
smoke wakeup.py flock /tmp/rtugw-cpu-latency.lock $py "$src/bench/wakeup.py" --smoke --cpu-latency 0
smoke actor-scaling.sh sh "$src/bench/actor-scaling.sh" --smoke "$tmp/actors" "$bin"
smoke cores-scaling.sh sh "$src/bench/cores-scaling.sh" --smoke "$tmp/cores" "$bin"

# Every script in bench/ is run here or by its own test.
for f in "$src"/bench/*.py "$src"/bench/*.sh; do
    name=$(basename "$f")
    case " $ran $SEPARATE " in
        *" $name "*) ;;
        *) echo "FAIL: bench/$name is run by no test: give it a --smoke mode and a line here"; failed=1 ;;
    esac
done
exit $failed
