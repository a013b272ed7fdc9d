"""The reference for tag values, independent of tags/: Python's struct module
on the bytes of the words, put in value order by the order's own letters
(wire position i holds the value byte named order[i]). Shared by the codec
test (tests/unit/test_tags_codec.py) and the end-to-end tests of the daemon's
tags (tests/e2e/tags/test_tags_gw.py, tests/peers/test_tags_pymodbus.py, tests/e2e/cli/test_read_cli.py)."""
import math
import struct
from decimal import Decimal
from fractions import Fraction

# type -> (struct format, registers, orders)
O16 = ["AB", "BA"]
O32 = ["ABCD", "CDAB", "BADC", "DCBA"]
O64 = ["ABCDEFGH", "GHEFCDAB", "BADCFEHG", "HGFEDCBA"]
TYPES = {
    "int16": (">h", 1, O16), "uint16": (">H", 1, O16),
    "int32": (">i", 2, O32), "uint32": (">I", 2, O32), "float32": (">f", 2, O32),
    "int64": (">q", 4, O64), "uint64": (">Q", 4, O64), "float64": (">d", 4, O64),
}
INT_RANGE = {"int16": (-2**15, 2**15), "uint16": (0, 2**16), "int32": (-2**31, 2**31),
             "uint32": (0, 2**32), "int64": (-2**63, 2**63), "uint64": (0, 2**64)}


def value_bytes(wire, order):
    """The value's big-endian bytes from the wire's, by the order's letters."""
    return bytes(wire[order.index(letter)] for letter in sorted(order))


def wire_bytes(value, order):
    return bytes(value[sorted(order).index(letter)] for letter in order)


def words_to_bytes(words):
    return b"".join(struct.pack(">H", w) for w in words)


def bytes_to_words(b):
    return [struct.unpack(">H", b[i:i + 2])[0] for i in range(0, len(b), 2)]


def same_float(a, b):
    return (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)


def round_half_away(q):
    f = Fraction(q)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def expected_words(typ, order, eng, scale=1.0, offset=0.0):
    """The words struct.pack gives, or None where the value must be refused."""
    fmt, regs, _ = TYPES[typ]
    q = (eng - offset) / scale
    if typ.startswith("float"):
        if math.isfinite(eng) and not math.isfinite(q):
            return None
        try:
            value = struct.pack(fmt, q)
        except OverflowError:
            return None
    else:
        if not math.isfinite(q):
            return None
        lo, hi = INT_RANGE[typ]
        r = round_half_away(q)
        if not lo <= r < hi:
            return None
        value = struct.pack(fmt, r)
    return bytes_to_words(wire_bytes(value, order))


def decode(typ, order, words, scale=1.0, offset=0.0, bit=None):
    """What a tag of this type reads from its words, as the daemon shows it:
    the engineering value (int where unscaled integers print exactly; a
    scaled integer's decimal; an unscaled float32 in float32 digits; else the
    float), True/False, a string's text up to its first NUL, a raw tag's hex
    words."""
    if typ == "bool":
        return bool((words[0] >> bit) & 1) if bit is not None else bool(words[0])
    if typ.startswith("string"):
        raw = b"".join(value_bytes(words_to_bytes([w]), order) for w in words)
        return raw.split(b"\0")[0].decode("latin-1")
    if typ.startswith("raw"):
        return " ".join(f"{w:04x}" for w in words)
    fmt = TYPES[typ][0]
    raw = struct.unpack(fmt, value_bytes(words_to_bytes(words), order))[0]
    if typ in INT_RANGE and scale == 1.0 and offset == 0.0:
        return raw
    if typ in INT_RANGE:
        return shown_scaled(raw, scale, offset)
    if typ == "float32" and scale == 1.0 and offset == 0.0 and math.isfinite(raw):
        return float(shortest_float32(raw))
    return float(raw) * scale + offset


def shortest_float32(x):
    """The fewest significant digits that struct 'f' packs to the same float32."""
    for digits in range(1, 10):
        text = "%.*g" % (digits, x)
        try:
            same = struct.pack(">f", float(text)) == struct.pack(">f", x)
        except OverflowError:       # rounded past FLT_MAX: strtof gives inf
            same = False
        if same:
            return text
    return repr(x)


def shown_scaled(raw, scale, offset):
    """What the daemon shows for a scaled integer: the decimal raw x scale +
    offset makes with scale and offset as written (their shortest repr), when
    that decimal writes back to the same raw; else the double. At 1e15 and
    beyond (tags/format.c: %f would print every digit) it is the double."""
    if not abs(float(raw) * scale + offset) < 1e15:
        return float(raw) * scale + offset
    exact = Decimal(raw) * Decimal(repr(scale)) + Decimal(repr(offset))
    if round_half_away((float(exact) - offset) / scale) == raw:
        return float(exact)
    return float(raw) * scale + offset


def full_order(typ, order):
    """A device default of any width, named at this type's width (as tags/ applies it)."""
    if not order:
        order = "ABCD"
    swap_words = order in ("CDAB", "DCBA", "GHEFCDAB", "HGFEDCBA")
    swap_bytes = order in ("BADC", "DCBA", "BA", "BADCFEHG", "HGFEDCBA")
    names = O16 if TYPES.get(typ, (0, 1))[1] == 1 or typ.startswith("string") else \
        O32 if TYPES[typ][1] == 2 else O64
    if len(names) == 2:
        return names[swap_bytes]
    return names[swap_words + 2 * swap_bytes]


# ---- a tag set for the end-to-end tests ------------------------------------------
EDGE_WORDS = [0x0000, 0xFFFF, 0x8000, 0x7FFF, 0x0001, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0x0080]


def _words(rng, n):
    return [rng.choice(EDGE_WORDS) if rng.random() < 0.25 else rng.randrange(65536) for _ in range(n)]


def string_words(text, n, order):
    padded = (text + bytes(2 * n))[:2 * n]
    return [bytes_to_words(wire_bytes(padded[i:i + 2], order))[0] for i in range(0, 2 * n, 2)]


def make_tagset(rng, base=100, default_order="ABCD"):
    """Holding-register tags of every type in every order (and "", the
    device's default), unscaled and scaled, strings, raw words, the 16 bits
    of one register, and input-register tags; each with random words (edge
    patterns a quarter of the time). Each tag: a dict with name, table,
    address, bit, type (as a CSV writes it), order ("" for the default),
    effective (the order in force), scale, offset, words, writable, and
    want, the value the reference reads from the words."""
    tags, at = [], base

    def add(name, typ, order, words, scale=1.0, offset=0.0, table="holding", bit=None, writable=True):
        nonlocal at
        base_type = typ.split(":")[0]
        eff = order or (full_order(base_type, default_order) if base_type in TYPES or base_type == "string"
                        else "")
        tags.append({"name": name, "table": table, "address": at, "bit": bit, "type": typ, "order": order,
                     "effective": eff, "scale": scale, "offset": offset, "words": words, "writable": writable,
                     "want": decode(base_type, eff, words, scale, offset, bit)})
        if bit is None or bit == 15:
            at += len(words)

    for typ, (_, regs, orders) in TYPES.items():
        for order in orders + [""]:
            for scale, offset in ((1.0, 0.0), (0.1, -40.0)):
                add(f"{typ}_{order or 'dflt'}_{'s' if scale != 1 else 'u'}", typ, order, _words(rng, regs),
                    scale, offset)
    for order in O16:
        text = bytes(rng.randrange(33, 127) for _ in range(rng.randrange(1, 7)))
        add(f"text_{order}", "string:3", order, string_words(text, 3, order))
    add("diag", "raw:2", "", _words(rng, 2))
    status = rng.randrange(65536)
    for bit in range(16):
        add(f"status_b{bit}", "bool", "", [status], bit=bit)
    add("in_i32", "int32", "CDAB", _words(rng, 2), table="input", writable=False)
    add("in_u16", "uint16", "", _words(rng, 1), 0.5, 10.0, table="input", writable=False)
    return tags


def load_lines(tags, slave):
    """`rtugw sim --load` lines seeding every tag's words."""
    seen, out = set(), []
    for t in tags:
        if (t["table"], t["address"]) not in seen:
            seen.add((t["table"], t["address"]))
            out.append(f"{slave} {t['table']} {t['address']} " + " ".join(str(w) for w in t["words"]))
    return "".join(line + "\n" for line in out)


def address_text(t):
    return f"{t['address']}" + (f".{t['bit']}" if t["bit"] is not None else "")


def csv_text(tags, device):
    """A tags_file for these tags (device column empty: the file's one device)."""
    rows = ["name,device,table,address,type,order,scale,offset,unit,writable,interval_ms"]
    for t in tags:
        scaled = t["scale"] != 1.0 or t["offset"] != 0.0
        rows.append(f"{t['name']},{device},{t['table']},{address_text(t)},{t['type']},{t['order']},"
                    f"{repr(t['scale']) if scaled else ''},{repr(t['offset']) if scaled else ''},u,"
                    f"{'true' if t['writable'] else 'false'},200")
    return "\r\n".join(rows) + "\r\n"


def section_text(tags, device):
    """The same tags as [tag NAME] sections."""
    out = []
    for t in tags:
        out.append(f"[tag {t['name']}]\ndevice = {device}\ntable = {t['table']}\naddress = {address_text(t)}\n"
                   f"type = {t['type']}\n" + (f"order = {t['order']}\n" if t["order"] else "") +
                   (f"scale = {t['scale']!r}\noffset = {t['offset']!r}\n" if t["scale"] != 1.0 else "") +
                   f"writable = {'true' if t['writable'] else 'false'}\ninterval_ms = 200\nunit = u\n")
    return "".join(out)


def same_value(got, want):
    """A JSON value against the reference: floats to the bit (non-finite: null)."""
    if isinstance(want, bool):
        return got is want
    if isinstance(want, float):
        if not math.isfinite(want):
            return got is None
        return isinstance(got, (int, float)) and not isinstance(got, bool) and same_float(float(got), want)
    return got == want


def as_json_text(raw):
    """Text bytes as rtugw's JSON carries them (json/quote.c): each byte that
    does not start a valid UTF-8 sequence becomes U+FFFD on its own."""
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        n = 1 if c < 0x80 else 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 else 0
        try:
            out.append(raw[i:i + n].decode("utf-8") if n else None)
        except UnicodeDecodeError:
            out.append(None)
        if out[-1] is None or len(raw[i:i + n]) < n:
            out[-1] = "\ufffd"
            n = 1
        i += n
    return "".join(out)
