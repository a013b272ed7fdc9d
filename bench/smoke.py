"""bench/smoke.py -- the one verdict of a bench script's --smoke run.

Every bench script has a --smoke mode that tests/bench/test_bench_smoke.sh runs in
make check: a few seconds, one short round, so that a script nothing else runs
cannot rot unseen. Its figures mean nothing at that length and are not judged;
what is judged is that the run produced every figure it reports (present,
numeric, finite) and that no answer it checked was wrong. check() prints one
line, "smoke ok: NAME: ..." (which the test looks for), or "smoke FAIL: ..."
and exits 1.
"""
import json
import math
import sys


def check(name, figures, keys, wrong=0, at_least=None):
    """figures: a dict of the run's figures; keys: those it must hold;
    wrong: answers the run found wrong (must be 0); at_least: {key: minimum}
    for figures that prove the run did something (answers > 0)."""
    problems = []
    for k in keys:
        v = figures.get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            problems.append("%s: %r, not a finite number" % (k, v))
    for k, least in (at_least or {}).items():
        if isinstance(figures.get(k), (int, float)) and figures[k] < least:
            problems.append("%s = %r, below %r" % (k, figures[k], least))
    if wrong:
        problems.append("%d wrong answer(s)" % wrong)
    if problems:
        print("smoke FAIL: %s: %s" % (name, "; ".join(problems)), flush=True)
        sys.exit(1)
    print("smoke ok: %s: %s" % (name, ", ".join("%s=%.4g" % (k, figures[k]) for k in keys)), flush=True)


def check_arms(name, jsonl, keys, label, wrong_arm, at_least=None):
    """check() over a scaling script's OUTDIR/*.jsonl (one `--json` run a
    line, each with its "arms"): figure "LABEL.KEY" for each arm and key,
    LABEL = label(run_index, run, arm_index, arm); wrong_arm(run, arm) true
    counts one wrong; at_least as check()'s, "runs" the lines read."""
    runs = [json.loads(line) for line in open(jsonl)]
    figures, wrong = {"runs": len(runs)}, 0
    for r, run in enumerate(runs):
        for k, arm in enumerate(run["arms"]):
            for key in keys:
                figures["%s.%s" % (label(r, run, k, arm), key)] = arm[key]
            wrong += bool(wrong_arm(run, arm))
    check(name, figures, sorted(figures), wrong=wrong, at_least=at_least)


def holding_expected(slave, address, count):
    """What `rtugw sim` and the built-in simulator hold (cli/cmd_sim.c):
    holding[a] = slave * 1000 + a, as the big-endian bytes of an answer."""
    return b"".join(((slave * 1000 + a) & 0xFFFF).to_bytes(2, "big") for a in range(address, address + count))


def wrong_reads(port, unit, slave, count=10, reads=3):
    """Reads holding registers 0..count-1 of unit through the gateway's
    Modbus TCP port, reads times; returns how many answers were not the
    simulator's values (or not an answer to that read)."""
    import socket
    import struct
    wrong = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for tid in range(1, reads + 1):
            s.sendall(struct.pack(">HHHBBHH", tid, 0, 6, unit, 3, 0, count))
            head = b""
            while len(head) < 7:
                chunk = s.recv(7 - len(head))
                if not chunk:
                    return wrong + reads - tid + 1
                head += chunk
            body = b""
            while len(body) < struct.unpack(">H", head[4:6])[0] - 1:
                chunk = s.recv(512)
                if not chunk:
                    return wrong + reads - tid + 1
                body += chunk
            if head[:2] != struct.pack(">H", tid) or body != bytes([3, 2 * count]) + holding_expected(slave, 0, count):
                wrong += 1
    return wrong
