#!/usr/bin/python3
"""The types vendors' register maps use beyond the plain integers and floats,
against independent references, over thousands of values and every order:

- bcd16/bcd32: the value bytes' hex digits read as a decimal number
  (bytes.hex), a nibble above 9 refused (bad data); written back through
  bytes.fromhex of the zero-padded decimal;
- float16: Python's struct 'e' (IEEE binary16, round to nearest even,
  OverflowError past 65504 -> refused); its text the fewest digits that read
  back to the same float16;
- int8h/int8l/uint8h/uint8l: struct 'b'/'B' of the high or low byte; a
  write names its byte (mask) so the other survives;
- fixed16/fixed32 (and unsigned) with D digits after the point: the
  integer by struct, its text and its exact writes by Python's decimal
  (ROUND_HALF_UP is half away from zero);
- strings in the four orders: each pair of registers put in value order by
  the 32-bit order's letters (an odd last register by the 16-bit name).

Values outside a type are refused, never wrapped. Seeded: RTUGW_SEED=..."""
import math
import os
import random
import re
import struct
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, check, finish  # noqa: E402
from tagsref import O16, O32, bytes_to_words, round_half_away, same_float, value_bytes, wire_bytes, \
    words_to_bytes  # noqa: E402

TOOL = os.path.join(os.path.dirname(os.path.abspath(BIN)), "tests", "unit", "tags_codec_tool")
SEED = int(os.environ.get("RTUGW_SEED", str(random.randrange(1, 2**32))), 0)
print(f"test_tags_types: seed {SEED} (replay with RTUGW_SEED={SEED})", flush=True)
rng = random.Random(SEED)
CASES = 300   # per type, order and check
SCALES = [(1.0, 0.0), (1.0, 0.0), (0.1, 0.0), (0.1, -40.0), (-2.5, 273.15)]


def run_tool(lines):
    p = subprocess.run([TOOL], input="".join(line + "\n" for line in lines), capture_output=True, text=True)
    check(p.returncode == 0, f"tool exit {p.returncode}: {p.stderr[-300:]}", quiet=True)
    out = p.stdout.splitlines()
    check(len(out) == len(lines), f"tool answered {len(out)} of {len(lines)} lines", quiet=True)
    return out


def num(x):
    return float(x).hex()


def hexwords(words):
    return " ".join(f"{w:04x}" for w in words)


def compare(what, requests, expect, judge):
    bad = 0
    out = run_tool(requests)
    for line, want, got in zip(requests, expect, out):
        if not judge(got, want):
            bad += 1
            if bad <= 10:
                print(f"FAIL: {line} -> {got}; want {want}")
    check(bad == 0 and len(out) == len(requests), f"{what}: {len(requests)} cases, every order ({bad} differ)")


# type -> (registers, orders, struct format of the integer or None)
BCD = {"bcd16": (1, O16, 4), "bcd32": (2, O32, 8)}
FIXED = {"fixed16": (1, O16, ">h"), "ufixed16": (1, O16, ">H"), "fixed32": (2, O32, ">i"),
         "ufixed32": (2, O32, ">I")}
BYTES = {"int8h": ("b", 0), "int8l": ("b", 1), "uint8h": ("B", 0), "uint8l": ("B", 1)}
FIXED_RANGE = {"fixed16": (-2**15, 2**15), "ufixed16": (0, 2**16), "fixed32": (-2**31, 2**31),
               "ufixed32": (0, 2**32)}


def bcd_words(value, digits, order):
    return bytes_to_words(wire_bytes(bytes.fromhex(f"{value:0{digits}d}"), order))


# ---- decode: words -> raw and engineering value ------------------------------------
requests, expect = [], []
for typ, (regs, orders, digits) in BCD.items():
    for order in orders:
        for _ in range(CASES):
            scale, offset = rng.choice(SCALES)
            if rng.random() < 0.7:   # a BCD value, as devices send it
                words = bcd_words(rng.randrange(10**digits), digits, order)
            else:
                words = [rng.randrange(65536) for _ in range(regs)]
            digits_text = value_bytes(words_to_bytes(words), order).hex()
            raw = int(digits_text) if digits_text.isdigit() else None
            requests.append(f"decode {typ} {order} {num(scale)} {num(offset)} {hexwords(words)}")
            expect.append(None if raw is None else (raw, float(raw) * scale + offset))
for order in O16:
    for k in range(CASES * 4):
        scale, offset = rng.choice(SCALES)
        word = k if k < 64 else rng.randrange(65536)   # the subnormals, then anything
        raw = struct.unpack(">e", value_bytes(words_to_bytes([word]), order))[0]
        requests.append(f"decode float16 {order} {num(scale)} {num(offset)} {word:04x}")
        expect.append((raw, raw * scale + offset))
for typ, (fmt, byte) in BYTES.items():
    for _ in range(CASES):
        scale, offset = rng.choice(SCALES)
        word = rng.randrange(65536)
        raw = struct.unpack(">" + fmt, words_to_bytes([word])[byte:byte + 1])[0]
        requests.append(f"decode {typ} - {num(scale)} {num(offset)} {word:04x}")
        expect.append((raw, float(raw) * scale + offset))
for typ, (regs, orders, fmt) in FIXED.items():
    for order in orders:
        for _ in range(CASES):
            point = rng.randrange(1, 10)
            scale, offset = rng.choice(SCALES)
            words = [rng.randrange(65536) for _ in range(regs)]
            raw = struct.unpack(fmt, value_bytes(words_to_bytes(words), order))[0]
            requests.append(f"decode {typ}:{point} {order} {num(scale)} {num(offset)} {hexwords(words)}")
            expect.append((raw, float(raw) / 10.0**point * scale + offset))


def judge_decode(got, want):
    f = got.split()
    if want is None:
        return f == ["ok", "bad", "bad", "data"]
    if len(f) != 3 or f[0] != "ok":
        return False
    raw = float.fromhex(f[1]) if isinstance(want[0], float) else int(f[1])
    return (same_float(raw, want[0]) if isinstance(raw, float) else raw == want[0]) and \
        same_float(float.fromhex(f[2]), want[1])


compare("decode bcd, float16, 8-bit, fixed-point against struct and bytes.hex", requests, expect, judge_decode)

# ---- text: what HTTP and MQTT publish, unscaled ----------------------------------------
requests, expect = [], []
for typ, (regs, orders, digits) in BCD.items():
    for order in orders:
        for _ in range(CASES // 3):
            value = rng.randrange(10**digits)
            requests.append(f"format {typ} {order} 1 0 {hexwords(bcd_words(value, digits, order))}")
            expect.append(str(value))
for order in O16:
    for _ in range(CASES):
        word = rng.randrange(65536)
        x = struct.unpack(">e", value_bytes(words_to_bytes([word]), order))[0]
        if not math.isfinite(x):
            continue
        requests.append(f"format float16 {order} 1 0 {word:04x}")
        expect.append(x)
for typ, (regs, orders, fmt) in FIXED.items():
    for order in orders:
        for _ in range(CASES // 3):
            point = rng.randrange(1, 10)
            words = [rng.randrange(65536) for _ in range(regs)]
            raw = struct.unpack(fmt, value_bytes(words_to_bytes(words), order))[0]
            requests.append(f"format {typ}:{point} {order} 1 0 {hexwords(words)}")
            expect.append(f"{Decimal(raw).scaleb(-point):.{point}f}")
for typ, (fmt, byte) in BYTES.items():
    for _ in range(CASES // 3):
        word = rng.randrange(65536)
        requests.append(f"format {typ} - 1 0 {word:04x}")
        expect.append(str(struct.unpack(">" + fmt, words_to_bytes([word])[byte:byte + 1])[0]))


def significant(text):
    return len(Decimal(text).normalize().as_tuple().digits)


def fewest_half_digits(x):
    """The fewest significant digits of any decimal that struct 'e' packs to x's float16."""
    for digits in range(1, 6):
        y = float("%.*g" % (digits, x))
        if abs(y) < 65520 and struct.pack(">e", y) == struct.pack(">e", x):
            return significant("%.*g" % (digits, x))
    return 5


def judge_text(got, want):
    if not got.startswith("ok "):
        return False
    text = got[3:]
    if isinstance(want, float):   # float16: reads back the same, in the fewest digits
        return abs(float(text)) < 65520 and struct.pack(">e", float(text)) == struct.pack(">e", want) and \
            significant(text) == fewest_half_digits(want)
    return text == want


compare("text of bcd, float16 (fewest digits), fixed-point (decimal), 8-bit", requests, expect, judge_text)

# ---- the one formatter on the old types: float32 in float32 digits, scaled integers as decimals --------


def fewest_float_digits(x):
    for digits in range(1, 10):
        if struct.pack(">f", float("%.*g" % (digits, x))) == struct.pack(">f", x):
            return significant("%.*g" % (digits, x))
    return 9


def plain_ok(text, x):
    """No exponent between 1e-6 and 1e21, as JavaScript prints numbers; beyond,
    JavaScript's exponent: a sign and no leading zero ("6e-8", "1e+21")."""
    return ("e" in text) == (x != 0 and not 1e-6 <= abs(x) < 1e21) and \
        ("e" not in text or re.search(r"e[+-][1-9][0-9]*$", text) is not None)


requests, expect = [], []
for order in O32:
    for _ in range(CASES):
        words = [rng.randrange(65536) for _ in range(2)] if rng.random() < 0.5 else \
            bytes_to_words(wire_bytes(struct.pack(">f", rng.choice([rng.uniform(-1e4, 1e4), rng.uniform(-1, 1),
                                                                   float(rng.randrange(-10**7, 10**7))])), order))
        x = struct.unpack(">f", value_bytes(words_to_bytes(words), order))[0]
        if math.isfinite(x):
            requests.append(f"format float32 {order} 1 0 {hexwords(words)}")
            expect.append(("float32", x))
for typ, fmt, order in (("int16", ">h", "AB"), ("uint16", ">H", "AB"), ("int32", ">i", "ABCD")):
    for _ in range(CASES):
        scale, offset = rng.choice([(0.1, 0.0), (0.01, -40.0), (0.5, 273.15), (2.5e-05, 0.0), (10.0, 0.0),
                                    (0.001, 0.5), (1 / 3, 0.0)])
        words = [rng.randrange(65536) for _ in range(struct.calcsize(fmt) // 2)]
        raw = struct.unpack(fmt, words_to_bytes(words))[0]
        exact = Decimal(raw) * Decimal(repr(scale)) + Decimal(repr(offset))
        requests.append(f"format {typ} {order} {num(scale)} {num(offset)} {hexwords(words)}")
        expect.append(("scaled", raw, scale, offset, exact))


def judge_number(got, want):
    if not got.startswith("ok "):
        return False
    text = got[3:]
    if want[0] == "float32":
        x = want[1]
        return struct.pack(">f", float(text)) == struct.pack(">f", x) and \
            significant(text) == fewest_float_digits(x) and plain_ok(text, x)
    _, raw, scale, offset, exact = want
    back = round_half_away((float(text) - offset) / scale)
    if back == raw and len(str(exact.normalize())) < 24 and Decimal(text) == exact:
        return True   # the decimal scale and offset as written make
    # no short decimal (1/3): the double's own shortest digits
    return float(text) == float(raw) * scale + offset and Decimal(text) != exact and back == raw


compare("text of float32 (float32 digits, no exponent where JavaScript has none) and scaled integers "
        "(the decimal of raw x scale + offset as written, writing back the same raw)", requests, expect,
        judge_number)

# ---- encode: engineering values -> words, refused outside the type ------------------------
requests, expect = [], []


def int_draw(lo, hi, scale, offset):
    pick = rng.random()
    raw = rng.choice([lo - 1, hi, lo - rng.randrange(1, 1000), hi + rng.randrange(1000)]) if pick < 0.2 \
        else rng.choice([lo, hi - 1]) if pick < 0.3 else rng.randrange(lo, hi)
    eng = float(raw) * scale + offset + rng.choice([0.0, 0.0, 0.3, -0.3, 0.5 * scale])
    return rng.choice([math.nan, math.inf]) if rng.random() < 0.02 else eng


for typ, (regs, orders, digits) in BCD.items():
    for order in orders:
        for _ in range(CASES):
            scale, offset = rng.choice(SCALES)
            eng = int_draw(0, 10**digits, scale, offset)
            q = (eng - offset) / scale
            r = round_half_away(q) if math.isfinite(q) else None
            requests.append(f"encode {typ} {order} {num(scale)} {num(offset)} {num(eng)}")
            expect.append(bcd_words(r, digits, order) if r is not None and 0 <= r < 10**digits else None)
for order in O16:
    for _ in range(CASES * 2):
        scale, offset = rng.choice(SCALES)
        eng = rng.choice([rng.uniform(-70000, 70000), rng.uniform(-1, 1), rng.uniform(-1e-4, 1e-4),
                          rng.choice([65504.0, 65519.99, 65520.0, -65520.0, 6e-8, 2.9e-8, 3e-8]),
                          math.nan, math.inf])
        q = (eng - offset) / scale
        try:
            want = bytes_to_words(wire_bytes(struct.pack(">e", q), order))
        except OverflowError:
            want = None
        requests.append(f"encode float16 {order} {num(scale)} {num(offset)} {num(eng)}")
        expect.append(want)
for typ, (fmt, byte) in BYTES.items():
    lo, hi = (-128, 128) if fmt == "b" else (0, 256)
    for _ in range(CASES):
        scale, offset = rng.choice(SCALES)
        eng = int_draw(lo, hi, scale, offset)
        q = (eng - offset) / scale
        r = round_half_away(q) if math.isfinite(q) else None
        if r is None or not lo <= r < hi:
            want = None
        else:
            b = struct.pack(">" + fmt, r)[0]
            want = [b << 8 if byte == 0 else b, "mask", 0xFF00 if byte == 0 else 0x00FF]
        requests.append(f"encode {typ} - {num(scale)} {num(offset)} {num(eng)}")
        expect.append(want)
for typ, (regs, orders, fmt) in FIXED.items():
    lo, hi = FIXED_RANGE[typ]
    for order in orders:
        for _ in range(CASES):
            point = rng.randrange(1, 5)
            scale, offset = rng.choice(SCALES)
            eng = int_draw(lo, hi, scale, offset) / 10.0**point
            q = (eng - offset) / scale * 10.0**point   # as the codec computes it, in double
            r = round_half_away(q) if math.isfinite(q) else None
            requests.append(f"encode {typ}:{point} {order} {num(scale)} {num(offset)} {num(eng)}")
            expect.append(bytes_to_words(wire_bytes(struct.pack(fmt, r), order))
                          if r is not None and lo <= r < hi else None)
            if not math.isfinite(eng):
                continue
            # a value written as decimal text: exact, by Python's decimal, with
            # one digit more than the type keeps (the rounding) or none
            whole = rng.randrange(lo // 10**point - 2, hi // 10**point + 2)
            text = rng.choice([f"{eng:.{point + 1}f}", f"{whole}.{rng.randrange(10**(point + 1)):0{point + 1}d}",
                               f"{whole}", f"-0.{'0' * point}5"])
            r = int(Decimal(text).scaleb(point).quantize(Decimal(1), rounding=ROUND_HALF_UP))
            requests.append(f"text {typ}:{point} {order} 1 0 {text.encode().hex()}")
            expect.append(bytes_to_words(wire_bytes(struct.pack(fmt, r), order)) if lo <= r < hi else None)


def judge_encode(got, want):
    f = got.split()
    if want is None:
        return f[:1] == ["refused"] and f[1] in ("34", "33")   # ERANGE, EDOM
    return f[:1] == ["ok"] and [x if x == "mask" else int(x, 16) for x in f[1:]] == want


compare("encode bcd, float16, 8-bit (its byte only), fixed-point (numbers and exact text)", requests,
        expect, judge_encode)

# ---- strings in four orders: read and written ---------------------------------------------
STRING_16 = {"ABCD": "AB", "CDAB": "AB", "BADC": "BA", "DCBA": "BA"}


def string_value(words, order):
    out = b""
    for i in range(0, len(words) - 1, 2):
        out += value_bytes(words_to_bytes(words[i:i + 2]), order)
    if len(words) % 2:
        out += value_bytes(words_to_bytes(words[-1:]), STRING_16[order])
    return out


def string_wire(text, n, order):
    padded = (text + bytes(2 * n))[:2 * n]
    out = b""
    for i in range(0, 4 * (n // 2), 4):
        out += wire_bytes(padded[i:i + 4], order)
    if n % 2:
        out += wire_bytes(padded[-2:], STRING_16[order])
    return bytes_to_words(out)


requests, expect = [], []
for n in (2, 3, 6, 9):
    for order in O32:
        for _ in range(CASES // 4):
            text = bytes(rng.randrange(32, 127) for _ in range(rng.randrange(2 * n + 2)))
            if len(text) <= 2 * n:
                words = string_wire(text, n, order)
                requests.append(f"decode string:{n} {order} 1 0 {hexwords(words)}")
                expect.append(["ok", text.hex() or "-", "-"])
                check(string_value(words, order).split(b"\0")[0] == text, "reference self-check", quiet=True)
            requests.append(f"text string:{n} {order} 1 0 {text.hex() or '-'}")
            expect.append(["ok"] + [f"{w:04x}" for w in string_wire(text, n, order)] if len(text) <= 2 * n
                          else None)
compare("strings with byte and word order, read and written", requests, expect,
        lambda got, want: got.split()[:2] == ["refused", "34"] if want is None else got.split() == want)

# docs/tags.md, which these rules are written in: every heading is a heading
# ("#**A live reload**" was bold text with a stray '#', issue 44)
_src = os.environ.get("RTUGW_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
with open(os.path.join(_src, "docs", "tags.md")) as _f:
    _stray = [(n, ln.rstrip()) for n, ln in enumerate(_f, 1) if re.match(r"#+[^# \n]", ln)]
check(not _stray, f"docs/tags.md: no '#' glued to text, which renders as neither heading nor text ({_stray})")
finish("test_tags_types")
