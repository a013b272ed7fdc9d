/*
 * tags/demo.c -- a synthetic tag file shaped like a real plant's: each
 * device has blocks of tags (a pump's registers, a drive's status word)
 * separated by the large unused ranges PLC memory maps have, with small
 * holes inside blocks, so the planner has gaps worth reading over, gaps
 * not worth it, and limits to respect.
 */
#include "tags/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct gen {
    char *buf;
    size_t cap, len;
    uint64_t rng;
    unsigned serial;
    int overflow;
} gen_t;

static uint64_t rnd(gen_t *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

static unsigned below(gen_t *g, unsigned n)
{
    return (unsigned)(rnd(g) % n);
}

static void emit(gen_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(gen_t *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->len < g->cap ? g->buf + g->len : NULL, g->len < g->cap ? g->cap - g->len : 0,
                      fmt, ap);
    va_end(ap);
    g->len += n > 0 ? (size_t)n : 0;
    if (g->len >= g->cap)
        g->overflow = 1;
}

typedef struct kind {
    const char *type;
    unsigned registers;
    unsigned weight;
    const char *stem, *unit;
} kind_t;

static const kind_t register_kinds[] = {
    { "float32", 2, 30, "temp", "degC" }, { "int16", 1, 20, "level", "%" },
    { "uint16", 1, 15, "count", "" },     { "int32", 2, 5, "power", "kW" },
    { "uint32", 2, 5, "energy", "kWh" },  { "bool", 1, 10, "alarm", "" },
    { "float64", 4, 3, "flow", "m3/h" },  { "int64", 4, 1, "pos", "um" },
    { "uint64", 4, 1, "hours", "s" },     { "string:8", 8, 3, "label", "" },
    { "raw:4", 4, 2, "diag", "" },
};
#define KIND_COUNT (sizeof register_kinds / sizeof register_kinds[0])

static const kind_t *pick_kind(gen_t *g)
{
    unsigned total = 0, x;
    for (size_t i = 0; i < KIND_COUNT; i++)
        total += register_kinds[i].weight;
    x = below(g, total);
    for (size_t i = 0; i < KIND_COUNT; i++) {
        if (x < register_kinds[i].weight)
            return &register_kinds[i];
        x -= register_kinds[i].weight;
    }
    return &register_kinds[0];
}

/* A description; every seventh needs quoting (a comma, a quote, a line break). */
static void description(gen_t *g, const char *stem, unsigned n)
{
    switch (below(g, 21)) {
    case 0: emit(g, "\"%s %u, line A\"", stem, n); break;
    case 1: emit(g, "\"%s %u, the \"\"main\"\" one\"", stem, n); break;
    case 2: emit(g, "\"%s %u\nsecond line\"", stem, n); break;
    default: emit(g, "%s %u", stem, n); break;
    }
}

static void tag_row(gen_t *g, unsigned dev, const char *table, const char *address, const kind_t *k,
                    unsigned interval, bool writable)
{
    unsigned n = ++g->serial;
    bool scaled = k->registers <= 2 && k->type[0] == 'i' && below(g, 3) == 0;
    bool swapped = k->registers == 2 && below(g, 4) == 0;
    emit(g, "%s_%05u,plc%u,%s,%s,%s,%s,%s,%s,%s,%s,%s,%u,", k->stem, n, dev, table, address, k->type,
         swapped ? "CDAB" : "", scaled ? "0.1" : "", scaled && below(g, 2) ? "-40" : "", k->unit,
         scaled ? "0.5" : "", writable ? "true" : "", interval);
    description(g, k->stem, n);
    emit(g, "\r\n");
}

/* One block of k tags of one table from address base; returns its end. */
static unsigned block(gen_t *g, unsigned dev, unsigned base, unsigned k, unsigned *left)
{
    static const char *const tables[] = { "holding", "holding", "holding", "holding", "holding",
                                          "input", "input", "input", "coil", "discrete" };
    const char *table = tables[below(g, 10)];
    bool bits = table[0] == 'c' || table[0] == 'd';
    unsigned interval = below(g, 10) < 7 ? 1000 : 5000, at = base;
    bool writable_table = table[0] == 'h' || table[0] == 'c';
    static const kind_t coil = { "bool", 1, 0, "valve", "" };
    char address[24];

    for (unsigned i = 0; i < k && *left; i++, (*left)--) {
        unsigned dice = below(g, 20);   /* 80 % adjacent, 15 % a small hole, 5 % a large one */
        unsigned hole = dice < 16 ? 0 : dice < 19 ? 1 + below(g, 6) : 10 + below(g, 20);
        at += hole * (bits ? 8 : 1);
        const kind_t *kind = bits ? &coil : pick_kind(g);
        bool writable = writable_table && below(g, 4) == 0;
        if (!bits && kind->type[0] == 'b') {   /* a status word: several bits of one register */
            for (unsigned b = 0; b < 8 && *left > 1 && i < k; b += 1 + below(g, 3), i++, (*left)--) {
                snprintf(address, sizeof address, "%u.%u", at, b);
                tag_row(g, dev, table, address, kind, interval, writable);
            }
        }
        snprintf(address, sizeof address, "%u%s", at, !bits && kind->type[0] == 'b' ? ".15" : "");
        tag_row(g, dev, table, address, kind, interval, writable);
        at += kind->registers;
    }
    return at;
}

int tags_demo_csv(char *buf, size_t cap, unsigned n_tags, unsigned n_devices, uint64_t seed)
{
    gen_t g = { .buf = buf, .cap = cap, .rng = seed ? seed : 0x9E3779B97F4A7C15ull };
    if (n_devices == 0 || n_devices > 999)
        return -EINVAL;
    emit(&g, "name,device,table,address,type,order,scale,offset,unit,deadband,writable,"
             "interval_ms,description\r\n");
    for (unsigned d = 1; d <= n_devices; d++) {
        unsigned left = n_tags / n_devices + (d <= n_tags % n_devices), base = 100 * below(&g, 10);
        while (left && base < 60000)
            base = block(&g, d, base, 5 + below(&g, 36), &left) + 40 + below(&g, 300);
        if (left)
            return -ERANGE;   /* more tags than one device's address space holds this way */
    }
    return g.overflow ? -ENOSPC : (int)g.len;
}
