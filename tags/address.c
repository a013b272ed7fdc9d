/*
 * tags/address.c -- addresses as vendors print them, and the checks that
 * catch an address copied from a manual without being converted.
 *
 * Modicon notation (Kepware's 5- and 6-digit forms): the first digit names
 * the table, the rest counts from 1: 40101 is holding register 100, 300001
 * input register 0. A device or gateway with `addressing = modicon` reads
 * its tags' addresses that way; with the default (protocol addresses, from
 * 0) tags_lint warns about addresses that look like Modicon numbers or like
 * a one-based map, and about tags that overlap, the three ways a register
 * map is most often misread (mbpoll#51, pymodbus#1350).
 */
#include "tags/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tags_parse_modicon(const char *text, tags_area_t *area, unsigned *address, int *bit, char *msg,
                       size_t cap)
{
    const char *dot = strchr(text, '.');
    size_t len = dot ? (size_t)(dot - text) : strlen(text);
    static const int areas[] = { TAGS_AREA_COIL, TAGS_AREA_DISCRETE, -1, TAGS_AREA_INPUT, TAGS_AREA_HOLDING };
    char head[8];
    unsigned long n, b = 0;

    if ((len != 5 && len != 6) || strspn(text, "0123456789") != len)
        return tags_fail(msg, cap, -EINVAL, "address '%s' is not a Modicon address (5 or 6 digits: "
                         "0xxxx coil, 1xxxx discrete, 3xxxx input, 4xxxx holding)", text);
    int first = text[0] - '0';
    if (first > 4 || areas[first] < 0)
        return tags_fail(msg, cap, -EINVAL, "address '%s': a Modicon address starts with 0 (coil), "
                         "1 (discrete), 3 (input) or 4 (holding)", text);
    memcpy(head, text + 1, len - 1);
    head[len - 1] = '\0';
    unsigned long max = len == 5 ? 9999 : 65536;
    if (tags_parse_decimal(head, 1, max, &n) < 0)
        return tags_fail(msg, cap, -EINVAL, "address '%s': Modicon numbers count from 1 (%c%s is %s 0) "
                         "up to %lu", text, text[0], len == 5 ? "0001" : "00001",
                         tags_area_name((tags_area_t)areas[first]), max);
    bool registers = areas[first] == TAGS_AREA_HOLDING || areas[first] == TAGS_AREA_INPUT;
    if (dot && (!bit || !registers || tags_parse_decimal(dot + 1, 0, 15, &b) < 0))
        return tags_fail(msg, cap, -EINVAL, "address '%s': a bit (.0 to .15) is of a 3xxxx or 4xxxx "
                         "register", text);
    *area = (tags_area_t)areas[first];
    *address = (unsigned)(n - 1);
    if (bit)
        *bit = dot ? (int)b : -1;
    return 0;
}

int tags_parse_address_as(const char *text, bool modicon, bool have_table, tags_area_t *area,
                          unsigned *address, int *bit, char *msg, size_t cap)
{
    if (!modicon)
        return tags_parse_address(text, address, bit, msg, cap);
    tags_area_t from_address;
    int rc = tags_parse_modicon(text, &from_address, address, bit, msg, cap);
    if (rc < 0)
        return rc;
    if (have_table && *area != from_address)
        return tags_fail(msg, cap, -EINVAL, "address '%s' is a Modicon %s address, the table says %s "
                         "(leave the table out, or write the %s's own number)", text,
                         tags_area_name(from_address), tags_area_name(*area), tags_area_name(*area));
    *area = from_address;
    return 0;
}

/* ---- the lint ---------------------------------------------------------------- */

typedef struct span {
    unsigned index;
    unsigned device;
    tags_area_t area;
    unsigned first, end;          /* registers [first, end) */
} span_t;

static int by_place(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->area != y->area)
        return x->area < y->area ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* A view of part of a register, made to share it with others: a bit, a byte. */
static bool part_of_register(const tags_tag_t *g)
{
    return g->in_register || g->type == TAGS_INT8H || g->type == TAGS_INT8L || g->type == TAGS_UINT8H ||
           g->type == TAGS_UINT8L;
}

/* One warning about tag i, at its file and line. */
typedef struct lint {
    const tags_table_t *t;
    const char *source;           /* for tags without a file of their own */
    tags_lint_fn warn;
    void *ctx;
} lint_t;

static void say(const lint_t *l, size_t i, const char *what)
{
    char line[400];
    const tags_tag_t *g = tags_table_tag(l->t, i);
    const char *src = tags_table_source(l->t, i);
    src = src ? src : l->source;
    if (src && g->line)
        snprintf(line, sizeof line, "%s:%u: warning: %s", src, g->line, what);
    else
        snprintf(line, sizeof line, "warning: %s", what);
    l->warn(l->ctx, line);
}

/* Addresses written in Modicon form where the device reads protocol addresses. */
static unsigned lint_modicon(const lint_t *l)
{
    const tags_table_t *t = l->t;
    unsigned n = 0;
    for (size_t i = 0; i < tags_table_count(t); i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        unsigned lead = g->area == TAGS_AREA_HOLDING ? 4 : g->area == TAGS_AREA_INPUT ? 3
                        : g->area == TAGS_AREA_DISCRETE ? 1 : 0;
        if (g->computed || g->modicon || lead == 0 || g->address < lead * 10000 + 1 || g->address > lead * 10000 + 9999)
            continue;
        char what[256];
        snprintf(what, sizeof what, "tag '%s' at %u looks like a Modicon address (%s register %u); the "
                 "device reads protocol addresses from 0: set addressing = modicon or write %u", g->name,
                 g->address, tags_area_name(g->area), g->address - lead * 10000 - 1,
                 g->address - lead * 10000 - 1);
        say(l, i, what);
        n++;
    }
    return n;
}

/*
 * A one-based map: every value of two registers or more on a device starts at
 * an odd address (vendors lay 32- and 64-bit values on even offsets from 0;
 * all of them odd is the sign of numbering copied from a manual that counts
 * from 1). Said once per device, at its first such tag.
 */
static unsigned lint_one_based(const lint_t *l)
{
    const tags_table_t *t = l->t;
    unsigned said = 0;
    for (size_t d = 0; d < tags_table_device_count(t); d++) {
        size_t n;
        const unsigned *idx = tags_table_device_tags(t, d, &n);
        const tags_tag_t *first = NULL;
        size_t first_i = 0;
        unsigned wide = 0, odd = 0;
        for (size_t k = 0; k < n; k++) {
            const tags_tag_t *g = tags_table_tag(t, idx[k]);
            if (g->count < 2 || g->type == TAGS_STRING || g->type == TAGS_RAW || g->modicon || g->computed)
                continue;
            wide++;
            odd += g->address & 1;
            if (!first) {
                first = g;
                first_i = idx[k];
            }
        }
        if (wide >= 2 && odd == wide) {
            char what[256];
            snprintf(what, sizeof what, "device '%s': all %u of its 32/64-bit tags start at an odd "
                     "address (first: '%s' at %u): the map may count from 1 (subtract 1)",
                     tags_table_device_name(t, d), wide, first->name, first->address);
            say(l, first_i, what);
            said++;
        }
    }
    return said;
}

static unsigned lint_overlaps(const lint_t *l)
{
    const tags_table_t *t = l->t;
    size_t n = tags_table_count(t), m = 0;
    span_t *s = malloc((n ? n : 1) * sizeof *s);
    unsigned said = 0;
    if (!s)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        if (!part_of_register(g) && !g->computed)   /* a computed tag has no registers */
            s[m++] = (span_t){ (unsigned)i, g->device, g->area, g->address, g->address + g->count };
    }
    qsort(s, m, sizeof *s, by_place);
    /* each tag against the one reaching furthest among those before it */
    size_t reach = 0;
    for (size_t k = 1; k < m; k++) {
        if (s[k].device != s[reach].device || s[k].area != s[reach].area) {
            reach = k;
            continue;
        }
        if (s[k].first < s[reach].end) {
            const tags_tag_t *a = tags_table_tag(t, s[reach].index), *b = tags_table_tag(t, s[k].index);
            char what[256];
            snprintf(what, sizeof what, "tag '%s' (%s %u..%u) overlaps tag '%s' (%u..%u): one register "
                     "read as two values", b->name, tags_area_name(b->area), b->address,
                     b->address + b->count - 1, a->name, a->address, a->address + a->count - 1);
            say(l, s[k].index, what);
            said++;
        }
        if (s[k].end > s[reach].end)
            reach = k;
    }
    free(s);
    return said;
}

unsigned tags_lint(const tags_table_t *t, const char *source, tags_lint_fn warn, void *ctx)
{
    lint_t l = { t, source, warn, ctx };
    return lint_modicon(&l) + lint_one_based(&l) + lint_overlaps(&l);
}
