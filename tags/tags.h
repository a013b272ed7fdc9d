/*
 * tags/tags.h -- tags: named, typed, scaled values of Modbus devices, the
 * codec between them and 16-bit words, a CSV loader and the read planner.
 * Owns: the tag model, the codec, the CSV loader, the planner. May call:
 * `parser/` (the one parser of a table's name, rtu_table_parse, inline in
 * its header) and libc.
 *
 * Pure code: nothing here opens a port or a socket or reads a clock. The only
 * I/O is reading a CSV file (tags_load_csv). Times are passed in by the caller
 * (wall-clock milliseconds, what a published value is stamped with).
 *
 * How the gateway uses it (docs/tags.md has the whole story):
 *
 *   tags_table_t *t = tags_table_new(4096);
 *   tags_load_csv(t, "tags.csv", defaults, n_defaults, &errs);  // or tags_table_add
 *   tags_planner_t *pl = tags_planner_new(NULL);                  // 125 regs, 2000 bits, gap 8
 *   tags_plan_t *plan;
 *   tags_plan_build(pl, t, groups, n_groups, &plan, msg, sizeof msg);
 *   for each read r (tags_plan_read): a timer at r->interval_ms sends
 *       tags_read_pdu(r, pdu) to r->device; its answer goes to
 *       tags_table_apply(t, plan, r, words, n, now_ms)      (registers)
 *       tags_table_apply_bits(t, plan, r, packed, n, now_ms) (coils, discretes)
 *       tags_table_fail(t, plan, r, TAGS_BAD_TIMEOUT, 0, now_ms) (no answer)
 *   an exception 02 on a read that spans holes: tags_plan_split(pl, plan, r, &what),
 *       then build the plan again (the planner remembers the split);
 *   readers (HTTP, MQTT): tags_table_value(t, i, now_ms, &v), tags_format(...);
 *   writes: tags_encode_text(tag, "12.5", 0, &w, msg, cap), tags_write_pdu(&w, ...).
 *
 * Tag definitions (tags_tag_t) and values (tags_value_t) are plain data, like
 * config_t: they are values read everywhere. The table, the planner and the
 * plan are opaque. Functions return 0 (or a count) and negative errno codes:
 * -EINVAL a value that is not one, -ERANGE out of range, -EDOM NaN or an
 * infinity where a number is needed, -EACCES a write to a read-only tag,
 * -EEXIST a duplicate name, -ENOENT not found, -ENOSPC a bound reached,
 * -ENOMEM, and the errno of a failed read of a file. Where a function takes
 * msg/cap, it writes one line there naming the value that is wrong.
 *
 * Not thread-safe: a table, a planner and a plan are each used by one thread
 * at a time. The gateway guards its live table with a mutex of the table's
 * own (gateway/tags.c, gw_tags_lock), not with its cache lock.
 */
#ifndef RTUGW_TAGS_TAGS_H
#define RTUGW_TAGS_TAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TAGS_NAME_MAX 48         /* tag name, including the NUL */
#define TAGS_DEVICE_MAX 32       /* device name, including the NUL (config's CONFIG_NAME_MAX) */
#define TAGS_UNIT_MAX 16
#define TAGS_DESCRIPTION_MAX 128
#define TAGS_MAX_REGISTERS 125   /* one tag fits one read: string and raw are 1..125 */
#define TAGS_WRITE_MAX 123       /* registers one write (fc 16) may carry */
#define TAGS_CSV_LINE_MAX 4096   /* bytes in one physical CSV line */
#define TAGS_MAX_ERRORS 16
#define TAGS_EXPR_MAX 1024       /* a computed tag's expression, including the NUL */
#define TAGS_NOTE_MAX 160        /* why a computed tag is bad, including the NUL */

/* The four Modbus tables ("table" in the CSV). */
typedef enum tags_area {
    TAGS_AREA_COIL = 0,          /* read fc 1, write fc 5/15 */
    TAGS_AREA_DISCRETE,          /* read fc 2, read-only */
    TAGS_AREA_HOLDING,           /* read fc 3, write fc 6/16 */
    TAGS_AREA_INPUT,             /* read fc 4, read-only */
} tags_area_t;

typedef enum tags_type {
    TAGS_BOOL = 0,   /* a coil or discrete input, or bit N of a register */
    TAGS_INT16,
    TAGS_UINT16,
    TAGS_INT32,
    TAGS_UINT32,
    TAGS_INT64,
    TAGS_UINT64,
    TAGS_FLOAT32,
    TAGS_FLOAT64,
    TAGS_STRING,     /* N registers of text, two bytes each, NUL-padded */
    TAGS_RAW,        /* N words as they are */
    TAGS_BCD16,      /* 4 packed BCD digits, 0..9999 (Kepware's BCD) */
    TAGS_BCD32,      /* 8 packed BCD digits, 0..99999999 (Kepware's LBCD) */
    TAGS_FLOAT16,    /* IEEE 754 binary16 */
    TAGS_INT8H,      /* the high byte of a register, signed */
    TAGS_INT8L,      /* the low byte, signed */
    TAGS_UINT8H,
    TAGS_UINT8L,
    TAGS_FIXED16,    /* int16 with `point` decimal digits: 14503 at point 1 is 1450.3 */
    TAGS_UFIXED16,
    TAGS_FIXED32,
    TAGS_UFIXED32,
} tags_type_t;
#define TAGS_TYPE_LAST TAGS_UFIXED32
#define TAGS_POINT_MAX 9         /* decimal digits of a fixed-point type */
#define TAGS_DECIMALS_MAX 15     /* a tag's display decimals */

/*
 * Word and byte order, as two independent swaps of the big-endian (Modbus)
 * layout, so one device default serves every width: CDAB on a 32-bit value
 * is GHEFCDAB on a 64-bit one (the words reversed), BADC is BADCFEHG (the
 * bytes of each register swapped). For one-register types only the byte swap
 * means anything (AB / BA). A string takes both: the word swap exchanges the
 * registers of each pair (CDAB: a string stored as 32-bit little-word
 * values), the byte swap turns each register around (BA).
 */
typedef enum tags_order {
    TAGS_ORDER_ABCD = 0,                 /* ABCDEFGH, AB: big-endian, the Modbus default */
    TAGS_ORDER_CDAB = 1,                 /* GHEFCDAB: words reversed */
    TAGS_ORDER_BADC = 2,                 /* BADCFEHG, BA: bytes swapped in each register */
    TAGS_ORDER_DCBA = 3,                 /* HGFEDCBA: both, i.e. little-endian */
} tags_order_t;
#define TAGS_ORDER_WORDSWAP 1u
#define TAGS_ORDER_BYTESWAP 2u

typedef enum tags_quality {
    TAGS_GOOD = 0,
    TAGS_BAD,        /* reason says why */
    TAGS_STALE,      /* good, but older than twice the tag's interval */
} tags_quality_t;

typedef enum tags_reason {
    TAGS_BAD_NONE = 0,
    TAGS_BAD_NOT_READ,   /* no answer yet since the table was loaded */
    TAGS_BAD_EXCEPTION,  /* the slave answered an exception (tags_value_t.exception) */
    TAGS_BAD_TIMEOUT,    /* no answer after the retries (gateway exception 0x0B) */
    TAGS_BAD_PORT_DOWN,  /* the serial line is closed (gateway exception 0x0A) */
    TAGS_BAD_SHORT,      /* the answer had fewer words than the read asked for */
    TAGS_BAD_DATA,       /* words that are no value of the type (BCD nibble above 9) */
    TAGS_BAD_EXPR,       /* a computed tag's expression failed (tags_table_note says why) */
    TAGS_BAD_INPUT,      /* an input of a computed tag is bad or stale (the note names it) */
} tags_reason_t;

/*
 * One tag. Plain data: tags_table_add validates and copies it. `count` is
 * derived from the type (bool 1, 16-bit 1, 32-bit 2, 64-bit 4) except for
 * string and raw, where it is the N of string:N / raw:N.
 */
typedef struct tags_tag {
    char name[TAGS_NAME_MAX];
    unsigned device;                 /* index into the table's devices */
    tags_area_t area;
    uint16_t address;                /* protocol address, 0-based */
    bool in_register;                /* bool that is bit `bit` of a holding/input register */
    uint8_t bit;                     /* 0 = least significant */
    tags_type_t type;
    uint16_t count;                  /* registers it occupies (bits: 1) */
    tags_order_t order;              /* in effect: the tag's own or its device's default */
    uint8_t point;                   /* fixed-point types: digits after the decimal point */
    bool has_decimals;               /* its text has `decimals` digits after the point */
    uint8_t decimals;                /* 0..TAGS_DECIMALS_MAX; numbers only */
    double scale;                    /* engineering = raw * scale + offset */
    double offset;
    double deadband;                 /* a change smaller than this is not a change; 0: any */
    bool writable;
    uint8_t confirm_write;           /* TAGS_CONFIRM_*: read back after a write, or as its device */
    unsigned interval_ms;            /* how often it is read */
    char unit[TAGS_UNIT_MAX];
    char description[TAGS_DESCRIPTION_MAX];
    unsigned line;                   /* CSV line it came from; 0 when added by code */
    bool modicon;                    /* its address was written in Modicon form (40101) */
    bool computed;                   /* its value is an expression over other tags (expr/), not
                                        read: no table or address; type bool, int64 or float64;
                                        writable only through an inverse (tags_table_set_inverse);
                                        text in tags_table_expr */
} tags_tag_t;

/*
 * A value as read. `raw` is what the words say, by type: b for bool, i for
 * the signed integers, u for the unsigned ones, f for the floats. `eng` is
 * raw * scale + offset for the numbers (exact only below 2^53 for the 64-bit
 * integers: use raw for counters), 0/1 for bool, 0 for string and raw, whose
 * words (wire order, one register per element) are in `words`.
 */
typedef struct tags_value {
    tags_quality_t quality;
    tags_reason_t reason;            /* TAGS_BAD_NONE unless quality is TAGS_BAD */
    uint8_t exception;               /* the slave's exception code (reason EXCEPTION) */
    int64_t time_ms;                 /* wall clock when its answer arrived; 0: never */
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double f;
    } raw;
    double eng;
    const uint16_t *words;           /* string and raw only, else NULL */
    uint16_t n_words;
} tags_value_t;

/* ---- names: parse and print (used by the CSV loader and config) ------------
 * Each parser returns 0, or -EINVAL with one line in msg naming the value and
 * what would have been accepted. msg may be NULL. */
int tags_parse_area(const char *text, tags_area_t *area, char *msg, size_t cap);
/* "bool", "int16", ... "float64", "string:N", "raw:N" (N = 1..125), "bcd16",
 * "bcd32" (aliases "bcd", "lbcd"), "float16", "int8h", "int8l", "uint8h",
 * "uint8l". A fixed-point type ("fixed16:D", "ufixed16:D", "fixed32:D",
 * "ufixed32:D", D = 1..9 digits after the point) needs tags_parse_type_point. */
int tags_parse_type(const char *text, tags_type_t *type, unsigned *count, char *msg, size_t cap);
/* The same, every type: *point gets a fixed-point type's D, else 0. */
int tags_parse_type_point(const char *text, tags_type_t *type, unsigned *count, unsigned *point,
                          char *msg, size_t cap);
/* Any order name of any width (a device default). */
int tags_parse_order(const char *text, tags_order_t *order, char *msg, size_t cap);
/* An order name for this type: 32-bit names for 32-bit types, 64-bit names for
 * 64-bit ones, AB/BA for 16-bit types; strings AB/BA and the 32-bit names;
 * bool, raw and the 8-bit types (their byte is in their name) take none. */
int tags_parse_order_for(const char *text, tags_type_t type, tags_order_t *order, char *msg, size_t cap);
/* What a device's default order means for a tag of this type that names none:
 * a string takes only its byte swap (a device's CDAB is about its 32-bit
 * values; a string's registers are swapped in pairs only where its tag says
 * CDAB or DCBA). */
tags_order_t tags_device_order(tags_order_t device_order, tags_type_t type);
/* "100" or "0x64" (0..65535); "100.3" is bit 3 of register 100 (bit may be NULL:
 * then a bit is refused). */
int tags_parse_address(const char *text, unsigned *address, int *bit, char *msg, size_t cap);
/* A tag's confirm_write: its device's (the default, 0), or true/false of its own. */
enum { TAGS_CONFIRM_DEVICE = 0, TAGS_CONFIRM_ON, TAGS_CONFIRM_OFF };
int tags_parse_confirm(const char *text, uint8_t *confirm, char *msg, size_t cap);
/* A tag's display decimals, 0..TAGS_DECIMALS_MAX: sets *has and *decimals. */
int tags_parse_decimals(const char *text, bool *has, uint8_t *decimals, char *msg, size_t cap);
/* Modicon notation: 0xxxx coil, 1xxxx discrete, 3xxxx input, 4xxxx holding,
 * counting from 1 (40101 is holding register 100), and the 6-digit forms
 * (400001..465536); "40101.3" a bit of a register (bit may be NULL: refused). */
int tags_parse_modicon(const char *text, tags_area_t *area, unsigned *address, int *bit, char *msg,
                       size_t cap);
/* An address as a device with that addressing writes it: protocol (from 0,
 * tags_parse_address) or Modicon, whose first digit gives *area (a table the
 * caller already has, have_table, must agree). */
int tags_parse_address_as(const char *text, bool modicon, bool have_table, tags_area_t *area,
                          unsigned *address, int *bit, char *msg, size_t cap);
/* true/false, yes/no, on/off, 1/0. */
int tags_parse_bool(const char *text, bool *value, char *msg, size_t cap);
const char *tags_area_name(tags_area_t area);
const char *tags_type_name(tags_type_t type);     /* without the :N */
/* The order's name at this type's width: "CDAB", "GHEFCDAB", "BA", "" for bool/raw;
 * a string's: AB, CDAB, BA, DCBA. */
const char *tags_order_name(tags_order_t order, tags_type_t type);
const char *tags_reason_name(tags_reason_t reason);
const char *tags_quality_name(tags_quality_t quality);
/* Registers a type occupies (string and raw: their N); 0 for an invalid type. */
unsigned tags_type_registers(tags_type_t type, unsigned n);

/* ---- the codec (pure: words <-> values) ------------------------------------- */

/*
 * Decodes tag->count words (the tag's first register first; for a coil or
 * discrete input words[0] != 0 is on) into out's raw, eng, words and n_words.
 * Quality and time are the caller's, but for words that are no value of the
 * type (a BCD nibble above 9): then quality TAGS_BAD, reason TAGS_BAD_DATA.
 * String and raw values point at `words`. raw holds i for the signed
 * integers (int8, fixed: the integer before the point), u for the unsigned
 * ones and BCD (its decimal value), f for the floats (float16 too).
 */
void tags_decode(const tags_tag_t *tag, const uint16_t *words, tags_value_t *out);

/* The text of a string value: its bytes in the tag's byte order up to the
 * first NUL, NUL-terminated. Returns its length (truncated to cap - 1). */
size_t tags_string_text(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap);

/*
 * A value as text: the one number formatter, what HTTP (/tags and the page),
 * MQTT json and Sparkplug's strings publish. The shortest text that reads
 * back as the same value of the tag's type:
 *   integers (BCD and bytes too), unscaled: exactly, all 64 bits;
 *   fixed-point, unscaled: its decimal, all D digits ("1450.30");
 *   float16 and float32, unscaled: the fewest digits that read back as the
 *     same float16 or float32 ("3.14159", not 3.141590118408203);
 *   an integer scaled: the decimal of raw x scale + offset with scale and
 *     offset as written (their shortest decimals): 14503 x 0.1 is "1450.3",
 *     not 1450.3000000000002, and writing it back gives raw 14503 again;
 *   anything else (floats scaled, float64): the fewest digits (15 to 17)
 *     that read back as the same double;
 *   with has_decimals: any number (below 1e15) with exactly `decimals`
 *     digits after the point, rounded ("21.50");
 * bool true/false; strings as text; raw as hex words "0001 ff00". NaN and
 * the infinities print "nan", "inf", "-inf" (JSON writers print null).
 * Returns the length, or -ENOSPC when cap is too small (64 holds any number).
 */
int tags_format(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap);

/* Whether the type's value is a number (eng): all but bool, string and raw words. */
static inline bool tags_type_numeric(tags_type_t type)
{
    return type != TAGS_BOOL && type != TAGS_STRING && type != TAGS_RAW;
}
/* Why a number tag's value is no number: "nan", "inf" or "-inf" (bad data,
 * null in JSON); NULL when it is finite, or the tag is no number. */
const char *tags_nonfinite(const tags_tag_t *tag, const tags_value_t *v);

/* What a write puts on the wire. For a bool in a register the caller must
 * first read the register (fc 3, address, 1) and pass it to tags_write_merge:
 * Modbus has no single-bit write for registers. (Or send fc 22, mask write,
 * with and_mask = ~mask, or_mask = bits, where the device supports it.) */
typedef struct tags_write {
    uint8_t function;                /* 5, 6, 15 or 16 */
    uint16_t address;
    uint16_t count;                  /* coils (5, 15) or registers (6, 16) */
    uint16_t words[TAGS_WRITE_MAX];  /* registers, wire order; coils: 0 or 1 */
    bool needs_read;                 /* a bool or a byte in a register, not merged yet */
    uint16_t mask;                   /* the bit (or byte) it changes */
    uint16_t bits;                   /* their new value, within mask */
} tags_write_t;

#define TAGS_WRITE_MULTIPLE 1u       /* fc 15/16 even for one coil/register */

/*
 * Encodes an engineering value: raw = (eng - offset) / scale, rounded to the
 * nearest integer for the integer types (half away from zero; fixed-point:
 * raw * 10^D rounded), to the nearest float16 (ties to even). Refused, never
 * wrapped or clamped: a value outside the type (-ERANGE: int8 -128..127,
 * uint8 0..255, bcd16 0..9999, bcd32 0..99999999), NaN or an infinity for an
 * integer or a bool (-EDOM), a bool other than 0 or 1, a float32 or float16
 * beyond its largest finite value (65504), a tag that is not writable
 * (-EACCES), strings and raw (-EINVAL: use tags_encode_text). An 8-bit type
 * writes its byte as a bool in a register writes its bit: needs_read, mask
 * 0xff00 or 0x00ff, then tags_write_merge.
 */
int tags_encode_number(const tags_tag_t *tag, double eng, unsigned flags, tags_write_t *w,
                       char *msg, size_t cap);
/* Encodes text as tags_format writes it: integers with scale 1 and offset 0
 * exactly (all 64 bits), fixed-point with scale 1 and offset 0 as exact
 * decimals ("4.0005" at D 3 is 4001, half away from zero, as Python's
 * decimal rounds it), other numbers through tags_encode_number, bool as
 * tags_parse_bool takes it, a string of at most 2N bytes (NUL-padded), raw as
 * exactly N hex words separated by spaces or commas. */
int tags_encode_text(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                     char *msg, size_t cap);
/* The words to words[0] for a bool or a byte in a register, from the register's value now. */
void tags_write_merge(tags_write_t *w, uint16_t current);
/* The request PDU (function code first). Returns its length, -EAGAIN while
 * needs_read, -ENOSPC when cap is too small. 6 + 2 * TAGS_WRITE_MAX is enough. */
int tags_write_pdu(const tags_write_t *w, uint8_t *pdu, size_t cap);

/* True when a change from `last` to `now` is one (beyond the tag's deadband;
 * any change when the deadband is 0). */
bool tags_deadband_exceeded(const tags_tag_t *tag, double last, double now);

/* ---- the table -------------------------------------------------------------- */
typedef struct tags_table tags_table_t;

/* A table of at most max_tags tags (1..1,000,000); NULL on -ENOMEM or a bad bound. */
tags_table_t *tags_table_new(size_t max_tags);
void tags_table_free(tags_table_t *t);

/*
 * Validates tag and adds a copy on device `device` (a new device when the
 * name is new; tag->device is ignored). Refuses: a duplicate name (-EEXIST),
 * the table full (-ENOSPC), a name not [A-Za-z0-9_.:/-], a range past 65535,
 * a bit on a coil or discrete input or on a type other than bool, a bool
 * register without a bit, a writable discrete/input tag, a scale that is 0 or
 * not finite, a scale/offset/deadband on bool, string or raw, an interval
 * outside 1..86400000 ms (-EINVAL or -ERANGE). Returns the new index.
 */
int tags_table_add(tags_table_t *t, const tags_tag_t *tag, const char *device, char *msg, size_t cap);
size_t tags_table_count(const tags_table_t *t);
const tags_tag_t *tags_table_tag(const tags_table_t *t, size_t index);
/* Index of the tag called name, or -ENOENT. */
int tags_table_find(const tags_table_t *t, const char *name);
/* Copies the value of tag si of src (quality, time, last reported value, the
 * words of a string or raw) to tag di of dst, a table built again with the
 * same definition of that tag (a reload): it keeps its value instead of
 * starting "not read". -EINVAL when the two differ in type or width. */
int tags_table_carry_value(tags_table_t *dst, size_t di, const tags_table_t *src, size_t si);
size_t tags_table_device_count(const tags_table_t *t);
const char *tags_table_device_name(const tags_table_t *t, size_t device);
/* Index of the device called name, or -ENOENT. */
int tags_table_find_device(const tags_table_t *t, const char *name);
/* The tags of one device, in the order they were added; *n their number. */
const unsigned *tags_table_device_tags(const tags_table_t *t, size_t device, size_t *n);

/*
 * Warnings about a map that is likely misread, one line each to warn(ctx,
 * "SOURCE:LINE: warning: ..."): an address that looks like a Modicon number
 * (40001..49999 as a holding register, 30001.. input, 10001.. discrete) on a
 * tag not written in Modicon form; a device whose 32/64-bit tags all start at
 * odd addresses (a one-based map); two tags whose registers overlap (bits and
 * bytes of a register are views of it and do not count). Returns how many.
 */
typedef void (*tags_lint_fn)(void *ctx, const char *line);
/* source: the file of tags added by code ([tag] sections: the config file). */
unsigned tags_lint(const tags_table_t *t, const char *source, tags_lint_fn warn, void *ctx);

/* ---- computed tags (the expression engine, expr/, evaluates them) -----------
 * A computed tag is added like any other with tag->computed set, then given
 * its expression text (at most TAGS_EXPR_MAX - 1 bytes). The table only holds
 * the text, a note saying why the value is bad, and the value: tags/ knows
 * no expression language. */
int tags_table_set_expr(tags_table_t *t, size_t index, const char *text);
/* NULL for a tag that is not computed. */
const char *tags_table_expr(const tags_table_t *t, size_t index);
/* A computed tag's inverse: a Lua expression of `value` (the value written
 * to the computed tag) giving what to write to one of its inputs, `target`
 * (a name as the expression writes it; "" for its only input). Setting one
 * makes the tag writable (a write becomes a write of the input, expr/ and
 * gateway/tag_write.c); call after tags_table_set_expr. */
int tags_table_set_inverse(tags_table_t *t, size_t index, const char *text, const char *target);
/* The inverse's text and *target (when target is not NULL), or NULL when the tag has none. */
const char *tags_table_inverse(const tags_table_t *t, size_t index, const char **target);
/* Why tag i is bad, beyond its reason ("step budget exceeded"), or NULL. */
const char *tags_table_note(const tags_table_t *t, size_t index);
/* Stores a computed value (quality, reason, time, raw, eng; no words) and its
 * note (NULL: none). True when it changed (tags_table_apply's rule). */
bool tags_table_store_computed(tags_table_t *t, size_t index, const tags_value_t *v, const char *note);
/* A computed tag's interval (how old its value may be before it is stale):
 * set by the engine from its inputs when it is built; the only definition
 * that changes after tags_table_add, and only before the table is in use. */
void tags_table_set_interval(tags_table_t *t, size_t index, unsigned interval_ms);
/* Called with the index of every tag whose value a read (apply, fail,
 * observe) stored, good or bad, changed or not: how a computed tag hears that
 * an input was read. One listener (NULL: none); it must not store values. */
typedef void (*tags_stored_fn)(void *ctx, size_t index);
void tags_table_on_store(tags_table_t *t, tags_stored_fn fn, void *ctx);
/* Where tag i came from (the CSV file; NULL for a [tag] section or code). */
const char *tags_table_source(const tags_table_t *t, size_t index);

/* The value of a tag now: STALE when good and older than 2 x interval_ms.
 * String and raw words stay valid until the tag's next update. */
int tags_table_value(const tags_table_t *t, size_t index, int64_t now_ms, tags_value_t *out);

/* ---- changes: what changed since a reader last looked -------------------------
 * Every change a reader of tags_table_value could see, but for the time
 * (value, quality, reason, exception; a good value turning stale once
 * tags_table_sweep has seen it, and back), takes the next change number, and
 * the tag remembers it. A reader that saw the table at number N asks for the
 * tags changed after N: none missed, since the numbers are given under the
 * same lock as the values. A re-read of the same value changes its time only:
 * that is no change (a table polled every second would otherwise change all
 * the time). docs/tags.md, "Polling /tags cheaply". */
/* The last change number given. */
uint64_t tags_table_seq(const tags_table_t *t);
/* The number every tag counts as changed at (tags_table_seq_start's base):
 * a reader at an older one (another table, before a reload or a restart)
 * must read everything. */
uint64_t tags_table_seq_base(const tags_table_t *t);
/* Numbers start at base: the table's tags all count as changed then. The
 * gateway passes the wall clock in microseconds, and after a reload more
 * than the old table's last number, so a number never means two states. */
void tags_table_seq_start(tags_table_t *t, uint64_t base);
/* Good values whose age passed 2 x interval_ms by now_ms (stale from now
 * on) take a change number. Call before reading the numbers. Returns how many. */
size_t tags_table_sweep(tags_table_t *t, int64_t now_ms);
/* The tags changed after `since`, each once (in the order of their last
 * change when since is recent, else of their index), up to cap of them into
 * out. Returns how many there are (more than cap: only cap written). */
size_t tags_table_changed(const tags_table_t *t, uint64_t since, unsigned *out, size_t cap);

/* ---- CSV loading ------------------------------------------------------------ */
typedef struct tags_device_defaults {
    const char *name;                /* as the CSV's device column writes it */
    tags_order_t order;              /* for tags without an order of their own */
    unsigned interval_ms;            /* for tags without an interval; 0: 1000 */
    bool scoped;                     /* a register list (template) read for this device: its rows
                                        name no device and each tag is named DEVICE.NAME */
    bool modicon;                    /* addresses in Modicon form; the table column may be empty */
} tags_device_defaults_t;

typedef struct tags_errors {
    char text[TAGS_MAX_ERRORS][320];
    unsigned count;                  /* messages kept */
    unsigned total;                  /* errors found, including those not kept */
} tags_errors_t;

/*
 * Loads one tag per row of an RFC 4180 CSV file into t: a header row names
 * the columns (name, device, table, address, type, order, scale, offset,
 * unit, deadband, writable, interval_ms, description, decimals; name, table, address
 * and type are required; an unknown or repeated column is an error). Quoted
 * fields may hold commas, doubled quotes and line breaks; lines end in LF or
 * CRLF; a UTF-8 byte order mark is skipped; blank lines are skipped.
 *
 * devices: when n_devices > 0, a row's device must be one of them (an empty
 * device column is allowed when there is exactly one); when 0, any device
 * name goes, with order ABCD and interval 1000 ms. A scoped default (pass it
 * alone) reads the file as a register list for that device: a row naming a
 * device is an error, and row "voltage" becomes tag "DEVICE.voltage", so one
 * list read once per device gives each its own tags.
 *
 * Every error is reported, each "FILE:LINE:COLUMN: column 'value': reason"
 * (COLUMN counts bytes from 1, where the field starts), up to
 * TAGS_MAX_ERRORS kept. On any error nothing is added to t. Returns the
 * number of tags added, or the first error's code.
 */
int tags_load_csv(tags_table_t *t, const char *path, const tags_device_defaults_t *devices,
                  size_t n_devices, tags_errors_t *errs);
/* The same from text in memory; name stands for the file in messages. */
int tags_load_csv_string(tags_table_t *t, const char *text, const char *name,
                         const tags_device_defaults_t *devices, size_t n_devices,
                         tags_errors_t *errs);

/* A synthetic tag file for demos, tests and benchmarks: n_tags tags over
 * n_devices devices ("plc1".."plcN"), clustered in blocks with holes, every
 * type and table, intervals 1000 and 5000 ms, descriptions that need quoting.
 * The same seed gives the same file. Returns its length, or -ENOSPC. */
int tags_demo_csv(char *buf, size_t cap, unsigned n_tags, unsigned n_devices, uint64_t seed);

/* ---- the read planner ------------------------------------------------------- */
typedef struct tags_limits {
    unsigned max_read_registers;     /* 1..125, default 125 */
    unsigned max_read_bits;          /* 1..2000, default 2000 */
    unsigned max_gap;                /* registers read over rather than split; default 8.
                                        Coils and discretes: 16 bits per register */
} tags_limits_t;
#define TAGS_LIMITS_DEFAULT ((tags_limits_t){ 125, 2000, 8 })

/* An item to plan: a tag's registers or a poll group's range. */
typedef struct tags_range {
    unsigned address;
    unsigned count;                  /* >= 1 */
} tags_range_t;

/*
 * The planner's core, for one device, table and interval: reads that cover
 * every item exactly once, never split one, stay within the limit and read
 * over no hole longer than the gap, and cross no cut (a cut c forbids a read
 * holding both c - 1 and c, unless one of the items itself spans c). Among
 * those, the fewest reads, then the fewest words read. reads must hold n
 * entries; assign[i] gets item i's read. Returns the number of reads, or
 * -EINVAL for an item longer than the limit or past 65535.
 */
int tags_plan_ranges(const tags_limits_t *lim, tags_area_t area, const tags_range_t *items,
                     size_t n, const unsigned *cuts, size_t n_cuts, tags_range_t *reads,
                     unsigned *assign);

typedef struct tags_planner tags_planner_t;
typedef struct tags_plan tags_plan_t;

/* A raw poll group: planned with the tags, answered to the caller by id. */
typedef struct tags_group {
    const char *device;
    tags_area_t area;
    unsigned address;
    unsigned count;
    unsigned interval_ms;
    unsigned id;
} tags_group_t;

typedef struct tags_read {
    const char *device;              /* owned by the plan */
    tags_area_t area;
    uint8_t function;                /* 1, 2, 3 or 4 */
    uint16_t address;
    uint16_t count;                  /* registers or bits */
    unsigned interval_ms;
    unsigned members;                /* tags and groups it answers */
} tags_read_t;

typedef struct tags_member {
    bool is_group;
    unsigned index;                  /* tag index, or the group's id */
    uint16_t address;
    uint16_t count;
} tags_member_t;

/* The planner holds limits (a default and per device) and the cuts that
 * earlier splits made, per device and table. NULL limits: the defaults. */
tags_planner_t *tags_planner_new(const tags_limits_t *limits);
void tags_planner_free(tags_planner_t *pl);
/* Limits for one device (a PLC that takes at most 64 registers a read). */
int tags_planner_set_limits(tags_planner_t *pl, const char *device, const tags_limits_t *limits,
                            char *msg, size_t cap);

/*
 * Plans every tag of t (may be NULL) and every group together, by device,
 * table and interval: a group and a tag on the same device, table and interval
 * can share a read. Reads come sorted by device, table, interval, address.
 */
int tags_plan_build(const tags_planner_t *pl, const tags_table_t *t, const tags_group_t *groups,
                    size_t n_groups, tags_plan_t **out, char *msg, size_t cap);
void tags_plan_free(tags_plan_t *plan);
size_t tags_plan_read_count(const tags_plan_t *plan);
const tags_read_t *tags_plan_read(const tags_plan_t *plan, size_t r);
/* The members of read r, by address; *n how many. */
const tags_member_t *tags_plan_members(const tags_plan_t *plan, size_t r, size_t *n);
/* The request PDU of read r: function, address, count (5 bytes). */
int tags_read_pdu(const tags_read_t *read, uint8_t pdu[5]);

typedef enum tags_split_kind {
    TAGS_SPLIT_NONE = 0,             /* one item, or no point to cut at: mark its tags bad */
    TAGS_SPLIT_HOLES,                /* cut at every hole the read spanned */
    TAGS_SPLIT_HALVES,               /* no holes: cut at the member boundary nearest the middle */
} tags_split_kind_t;

typedef struct tags_split {
    tags_split_kind_t kind;
    unsigned cuts;                   /* cuts added */
    char text[160];                  /* for the log: "plc1 holding 100+40: cut at 112, 130" */
} tags_split_t;

/*
 * Read r got exception 02 (illegal data address): remembers cuts so that the
 * next tags_plan_build divides it, and says what it did. Returns 0, or
 * -ENOSPC when the planner holds its most cuts (4096).
 */
int tags_plan_split(tags_planner_t *pl, const tags_plan_t *plan, size_t r, tags_split_t *what);

/*
 * An answer to read r: words[0] is the register at the read's address.
 * Decodes each member tag into the table, good, stamped now_ms. Fewer words
 * than the read's count mark the tags beyond them TAGS_BAD_SHORT. Returns how
 * many tag values changed (beyond the deadband, or in quality).
 */
int tags_table_apply(tags_table_t *t, const tags_plan_t *plan, size_t r, const uint16_t *words,
                     size_t n_words, int64_t now_ms);
/* The same for coils and discrete inputs: bits packed as on the wire (LSB first). */
/*
 * An answer overheard on a listen-only bus (observe.c): the device's tags of this
 * area whose every register (or bit) lies in [address, address + n) take their value
 * from it, stamped now_ms; the others are untouched. words for registers, packed
 * for coils and discretes (the other NULL). Returns how many changed.
 */
int tags_table_observe(tags_table_t *t, size_t device, tags_area_t area, uint16_t address,
                       const uint16_t *words, const uint8_t *packed, size_t n, int64_t now_ms);
/* The tags tags_table_observe would store for that answer: up to cap indices into out;
 * returns how many there are (may exceed cap). No value is read or written. */
size_t tags_table_covered(const tags_table_t *t, size_t device, tags_area_t area, uint16_t address, size_t n,
                          unsigned *out, size_t cap);
int tags_table_apply_bits(tags_table_t *t, const tags_plan_t *plan, size_t r,
                          const uint8_t *packed, size_t n_bits, int64_t now_ms);
/* No data for read r: its tags become bad for `reason` (with the slave's
 * exception code for TAGS_BAD_EXCEPTION). Returns how many changed quality. */
int tags_table_fail(tags_table_t *t, const tags_plan_t *plan, size_t r, tags_reason_t reason,
                    uint8_t exception, int64_t now_ms);

#endif
