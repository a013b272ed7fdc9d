#!/usr/bin/python3
"""The tags codec against an independent reference, Python's struct module.

For every type in every order: random words (and the edge patterns) decode
to what struct.unpack computes from the same bytes, put in value order by
the order's name (wire position i holds the value byte named name[i]);
engineering values are raw * scale + offset in Python's float, which must
match to the bit. Encoding: engineering values map back to the words
struct.pack gives for round((eng - offset) / scale), half away from zero,
computed exactly with fractions; values outside the type are refused, never
wrapped; NaN and infinities are refused for integers. 64-bit integers go
through the exact text path. Seeded: replay with RTUGW_SEED=..."""
import math
import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish  # noqa: E402
from tagsref import (INT_RANGE, O16, O64, TYPES, bytes_to_words, expected_words, same_float,  # noqa: E402
                     value_bytes, wire_bytes, words_to_bytes)

TOOL = os.path.join(os.path.dirname(os.path.abspath(BIN)), "tests", "unit", "tags_codec_tool")
SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_tags_codec: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)
CASES = 400   # per type and order

SCALES = [(1.0, 0.0), (1.0, 0.0), (0.1, 0.0), (0.1, -40.0), (-2.5, 273.15), (1e-3, 0.5), (3.0, -1e6)]
EDGE_WORDS = [0x0000, 0xFFFF, 0x8000, 0x7FFF, 0x0001, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0x0080]


def run_tool(lines):
    p = subprocess.run([TOOL], input="".join(l + "\n" for l in lines), capture_output=True, text=True)
    check(p.returncode == 0, f"tool exit {p.returncode}: {p.stderr[-300:]}", quiet=True)
    out = p.stdout.splitlines()
    check(len(out) == len(lines), f"tool answered {len(out)} of {len(lines)} lines", quiet=True)
    return out


def random_words(n):
    if rng.random() < 0.2:
        return [rng.choice(EDGE_WORDS) for _ in range(n)]
    return [rng.randrange(65536) for _ in range(n)]


def num(x):
    return float(x).hex()


# ---- decode ------------------------------------------------------------------
requests, expect = [], []
for typ, (fmt, regs, orders) in TYPES.items():
    for order in orders:
        for _ in range(CASES):
            words = random_words(regs)
            scale, offset = rng.choice(SCALES)
            raw = struct.unpack(fmt, value_bytes(words_to_bytes(words), order))[0]
            eng = float(raw) * scale + offset
            requests.append(f"decode {typ} {order} {num(scale)} {num(offset)} " +
                            " ".join(f"{w:04x}" for w in words))
            expect.append((typ, order, words, raw, eng))
for n in (1, 3, 8):
    for order in O16:
        for _ in range(CASES // 4):
            words = random_words(n)
            if rng.random() < 0.5:   # NUL-padded text, as devices send it
                text = bytes(rng.randrange(32, 127) for _ in range(rng.randrange(2 * n + 1)))
                padded = (text + bytes(2 * n))[:2 * n]
                words = bytes_to_words(b"".join(wire_bytes(padded[i:i + 2], order) for i in range(0, 2 * n, 2)))
            raw = b"".join(value_bytes(words_to_bytes([w]), order) for w in words).split(b"\0")[0]
            requests.append(f"decode string:{n} {order} 1 0 " + " ".join(f"{w:04x}" for w in words))
            expect.append((f"string:{n}", order, words, raw, None))
for n in (1, 5):
    words = random_words(n)
    requests.append(f"decode raw:{n} - 1 0 " + " ".join(f"{w:04x}" for w in words))
    expect.append((f"raw:{n}", "-", words, words, None))
for bit in range(16):
    words = random_words(1)
    requests.append(f"decode bool:{bit} - 1 0 {words[0]:04x}")
    expect.append(("bool", "-", words, (words[0] >> bit) & 1, float((words[0] >> bit) & 1)))

bad = 0
for line, (typ, order, words, raw, eng), got in zip(requests, expect, run_tool(requests)):
    f = got.split()
    ok = len(f) == 3 and f[0] == "ok"
    if ok and typ.startswith("float"):
        ok = same_float(float.fromhex(f[1]), raw) and same_float(float.fromhex(f[2]), eng)
    elif ok and typ.startswith("string"):
        ok = f[1] == (raw.hex() or "-")
    elif ok and typ.startswith("raw"):
        ok = f[1] == ",".join(f"{w:04x}" for w in raw)
    elif ok:
        ok = int(f[1]) == raw and same_float(float.fromhex(f[2]), eng)
    if not ok:
        bad += 1
        if bad <= 10:
            print(f"FAIL: {line} -> {got}; struct says raw {raw!r} eng {eng!r}")
check(bad == 0, f"decode: {len(requests)} values, every type and order, equal to struct ({bad} differ)")

# ---- encode ------------------------------------------------------------------
requests, expect = [], []
for typ, (fmt, regs, orders) in TYPES.items():
    for order in orders:
        for _ in range(CASES):
            scale, offset = rng.choice(SCALES)
            if typ in INT_RANGE:
                lo, hi = INT_RANGE[typ]
                pick = rng.random()
                if pick < 0.15:   # just outside, either side
                    raw = rng.choice([lo - 1, hi, lo - rng.randrange(1, 1000), hi + rng.randrange(1000)])
                elif pick < 0.25:  # the edges
                    raw = rng.choice([lo, hi - 1])
                else:
                    raw = rng.randrange(lo, hi)
                eng = float(raw) * scale + offset + rng.choice([0.0, 0.0, 0.3, -0.3, 0.5 * scale])
                if rng.random() < 0.03:
                    eng = rng.choice([math.nan, math.inf, -math.inf])
            else:
                eng = rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1), 3.4e38 * rng.uniform(0.9, 1.1),
                                  1e300, math.nan, math.inf, -math.inf])
            requests.append(f"encode {typ} {order} {num(scale)} {num(offset)} {num(eng)}")
            expect.append(expected_words(typ, order, eng, scale, offset))
# exact 64-bit integers through text, in range and just outside
for typ in ("int64", "uint64"):
    lo, hi = INT_RANGE[typ]
    for order in O64:
        for raw in [lo, hi - 1, lo - 1, hi] + [rng.randrange(lo, hi) for _ in range(CASES // 4)]:
            requests.append(f"text {typ} {order} 1 0 {str(raw).encode().hex()}")
            expect.append(bytes_to_words(wire_bytes(struct.pack(TYPES[typ][0], raw), order))
                          if lo <= raw < hi else None)
# strings: at most 2N bytes, NUL-padded, each register in the tag's byte order
for n in (1, 4):
    for order in O16:
        for length in range(2 * n + 2):
            text = bytes(rng.randrange(32, 127) for _ in range(length))
            padded = text + bytes(2 * n - len(text)) if len(text) <= 2 * n else None
            requests.append(f"text string:{n} {order} 1 0 {text.hex() or '-'}")
            expect.append(None if padded is None else
                          [bytes_to_words(wire_bytes(padded[i:i + 2], order))[0] for i in range(0, 2 * n, 2)])

bad = refused = 0
for line, want, got in zip(requests, expect, run_tool(requests)):
    f = got.split()
    if want is None:
        ok = f[:1] == ["refused"] and f[1] in ("34", "33")   # ERANGE, EDOM
        refused += ok
    else:
        ok = f[:1] == ["ok"] and [int(x, 16) for x in f[1:]] == want
    if not ok:
        bad += 1
        if bad <= 10:
            print(f"FAIL: {line} -> {got}; want {want if want is not None else 'refused'}")
check(bad == 0, f"encode: {len(requests)} values ({refused} refused as out of range), equal to struct ({bad} differ)")
check(refused > 200, f"encode: the draws reach outside the types ({refused} refusals)")

# ---- round trip: words -> value -> text -> words, for unscaled integers --------
requests = []
for typ in INT_RANGE:
    fmt, regs, orders = TYPES[typ]
    for order in orders:
        words = random_words(regs)
        raw = struct.unpack(fmt, value_bytes(words_to_bytes(words), order))[0]
        requests.append((f"text {typ} {order} 1 0 {str(raw).encode().hex()}", words))
out = run_tool([r for r, _ in requests])
check(all(g.split()[1:] == [f"{w:04x}" for w in words] for (_, words), g in zip(requests, out)),
      "round trip: decoded integers written back give the same words")
finish("test_tags_codec")
