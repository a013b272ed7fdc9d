/*
 * tags/table.c -- the tag table: validated tags, a name index, the devices
 * and their tags, and each tag's current value.
 *
 * Arrays grow by doubling up to the table's bound, so a table made for a
 * million tags costs nothing until they come. Names are found through an
 * open-addressing hash (FNV-1a, at most half full): 2,000 lookups a poll
 * cycle must not walk 2,000 names each.
 *
 * A value changes "for real" when it moved by the deadband from the value
 * last counted as a change (not from the previous read: a slow drift of less
 * than the deadband per read must still show once it adds up).
 */
#include "tags/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define TABLE_MAX 1000000u
#define INTERVAL_MAX 86400000u

typedef struct device {
    char name[TAGS_DEVICE_MAX];
    unsigned *tags;
    size_t n, cap;
} device_t;

struct tags_table {
    size_t max, count, cap;
    tags_tag_t *tags;
    tags_value_t *values;
    double *reported;          /* eng last counted as a change */
    uint16_t **words;          /* string and raw: the words of the value */
    unsigned *source;          /* index into sources, or UINT32_MAX */
    char **exprs;              /* computed tags: "EXPR\0INVERSE\0TARGET\0" (the last two empty
                                  without an inverse), else NULL */
    char **notes;              /* why a computed tag is bad, or NULL */
    tags_stored_fn on_store;   /* the expression engine's ear, or NULL */
    void *on_store_ctx;
    char **sources;
    size_t n_sources;
    unsigned current_source;
    unsigned *slots;           /* name index: tag index + 1, 0 empty */
    size_t n_slots;            /* a power of two */
    device_t *devices;
    size_t n_devices, dev_cap;
    tags_changes_t changes;    /* what changed when (changes.c); its arrays grow with the others */
};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t slot_of(const tags_table_t *t, const char *name)
{
    size_t mask = t->n_slots - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
        if (!t->slots[i] || strcmp(t->tags[t->slots[i] - 1].name, name) == 0)
            return i;
}

static void reindex(tags_table_t *t)
{
    memset(t->slots, 0, t->n_slots * sizeof *t->slots);
    for (size_t i = 0; i < t->count; i++)
        t->slots[slot_of(t, t->tags[i].name)] = (unsigned)i + 1;
}

static int resize_index(tags_table_t *t, size_t n_slots)
{
    unsigned *slots = calloc(n_slots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    reindex(t);
    return 0;
}

tags_table_t *tags_table_new(size_t max_tags)
{
    if (max_tags < 1 || max_tags > TABLE_MAX)
        return NULL;
    tags_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->max = max_tags;
    t->current_source = UINT32_MAX;
    if (resize_index(t, 16) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

void tags_table_free(tags_table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++) {
        free(t->words[i]);
        free(t->exprs[i]);
        free(t->notes[i]);
    }
    for (size_t i = 0; i < t->n_sources; i++)
        free(t->sources[i]);
    for (size_t d = 0; d < t->n_devices; d++)
        free(t->devices[d].tags);
    free(t->tags);
    free(t->values);
    free(t->reported);
    free(t->words);
    free(t->source);
    free(t->exprs);
    free(t->notes);
    free(t->sources);
    free(t->slots);
    free(t->devices);
    free(t->changes.at);
    free(t->changes.stale_at);
    free(t);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Room for one more tag in every per-tag array. */
static int reserve_tag(tags_table_t *t)
{
    size_t cap = t->cap;
    if (t->count < cap)
        return 0;
    size_t n = cap ? cap * 2 : 16;
    if (n > t->max)
        n = t->max;
    void **arrays[] = { (void **)&t->tags, (void **)&t->values, (void **)&t->reported,
                        (void **)&t->words, (void **)&t->source, (void **)&t->exprs, (void **)&t->notes,
                        (void **)&t->changes.at, (void **)&t->changes.stale_at };
    size_t sizes[] = { sizeof *t->tags, sizeof *t->values, sizeof *t->reported, sizeof *t->words,
                       sizeof *t->source, sizeof *t->exprs, sizeof *t->notes, sizeof *t->changes.at,
                       sizeof *t->changes.stale_at };
    for (unsigned a = 0; a < sizeof sizes / sizeof sizes[0]; a++) {
        size_t c = cap;
        if (grow(arrays[a], &c, n, sizes[a]) < 0)
            return -ENOMEM;
    }
    t->cap = n;
    return 0;
}

static int device_index(tags_table_t *t, const char *name)
{
    for (size_t d = 0; d < t->n_devices; d++)
        if (strcmp(t->devices[d].name, name) == 0)
            return (int)d;
    if (grow((void **)&t->devices, &t->dev_cap, t->n_devices + 1, sizeof *t->devices) < 0)
        return -ENOMEM;
    device_t *d = &t->devices[t->n_devices];
    *d = (device_t){ 0 };
    strcpy(d->name, name);
    return (int)t->n_devices++;
}

static bool bounded(const char *s, size_t max)
{
    return memchr(s, '\0', max) != NULL;
}

/* Where the tag is and what it is: table, type, registers, bit, writes. */
static int validate_shape(tags_tag_t *g, tags_field_t *field, char *msg, size_t cap)
{
    const char *n = g->name;
    *field = TAGS_FIELD_TYPE;
    if ((unsigned)g->area > TAGS_AREA_INPUT || (unsigned)g->type > TAGS_TYPE_LAST || (unsigned)g->order > 3)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': table, type or order out of range", n);
    bool sized = g->type == TAGS_STRING || g->type == TAGS_RAW;
    unsigned regs = tags_type_registers(g->type, sized ? g->count : 0);
    if (regs == 0)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %s:%u is not 1..%u registers", n,
                         tags_type_name(g->type), g->count, TAGS_MAX_REGISTERS);
    g->count = (uint16_t)regs;
    bool fixed = g->type >= TAGS_FIXED16 && g->type <= TAGS_UFIXED32;
    if (fixed && (g->point < 1 || g->point > TAGS_POINT_MAX))
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %s:%u is not 1..%u digits after the point",
                         n, tags_type_name(g->type), g->point, TAGS_POINT_MAX);
    if (!fixed)
        g->point = 0;
    bool bits = g->area == TAGS_AREA_COIL || g->area == TAGS_AREA_DISCRETE;
    *field = g->in_register ? TAGS_FIELD_ADDRESS : TAGS_FIELD_TYPE;
    if (bits && (g->type != TAGS_BOOL || g->in_register))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a %s is a bool, without a bit", n,
                         tags_area_name(g->area));
    *field = TAGS_FIELD_ADDRESS;
    if (!bits && g->type == TAGS_BOOL && (!g->in_register || g->bit > 15))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a bool in a %s register needs its bit "
                         "(address.0 .. address.15)", n, tags_area_name(g->area));
    if (!bits && g->type != TAGS_BOOL && g->in_register)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a bit is for bool, not %s", n,
                         tags_type_name(g->type));
    if ((unsigned)g->address + g->count > 65536u)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %u registers from %u run past 65535", n,
                         g->count, g->address);
    *field = TAGS_FIELD_WRITABLE;
    if (g->writable && (g->area == TAGS_AREA_DISCRETE || g->area == TAGS_AREA_INPUT))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': table %s is read-only", n,
                         tags_area_name(g->area));
    return 0;
}

/* The numbers: scale, offset, deadband, interval. */
static int validate_numbers(const tags_tag_t *g, tags_field_t *field, char *msg, size_t cap)
{
    const char *n = g->name;
    bool plain = g->type == TAGS_BOOL || g->type == TAGS_STRING || g->type == TAGS_RAW;
    *field = !isfinite(g->scale) || g->scale == 0 ? TAGS_FIELD_SCALE
             : !isfinite(g->offset) ? TAGS_FIELD_OFFSET : TAGS_FIELD_DEADBAND;
    if (!isfinite(g->scale) || g->scale == 0 || !isfinite(g->offset) || !isfinite(g->deadband) ||
        g->deadband < 0)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': scale %g, offset %g, deadband %g: scale must "
                         "be finite and not 0, deadband finite and >= 0", n, g->scale, g->offset,
                         g->deadband);
    *field = g->scale != 1 ? TAGS_FIELD_SCALE : g->offset != 0 ? TAGS_FIELD_OFFSET : TAGS_FIELD_DEADBAND;
    if (plain && (g->scale != 1 || g->offset != 0 || g->deadband != 0))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a %s takes no scale, offset or deadband", n,
                         tags_type_name(g->type));
    *field = TAGS_FIELD_DECIMALS;
    if (g->has_decimals && (plain || g->decimals > TAGS_DECIMALS_MAX))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': decimals %u: %s", n, g->decimals,
                         plain ? "a number's, not a bool's, string's or raw's" : "more than 15");
    *field = TAGS_FIELD_INTERVAL;
    if (g->interval_ms < 1 || g->interval_ms > INTERVAL_MAX)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': interval %u ms is not 1..%u", n,
                         g->interval_ms, INTERVAL_MAX);
    return 0;
}

/* A computed tag: no place on a device, a type an expression's result has,
 * and no write (its value is not a device's to take). */
static int validate_computed(tags_tag_t *g, tags_field_t *field, char *msg, size_t cap)
{
    *field = TAGS_FIELD_TYPE;
    if (g->type != TAGS_BOOL && g->type != TAGS_INT64 && g->type != TAGS_FLOAT64)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a computed tag is bool, int64 or float64, not %s",
                         g->name, tags_type_name(g->type));
    *field = TAGS_FIELD_WRITABLE;
    if (g->writable)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': a computed tag is not writable as such (its value is "
                         "its expression's): declare an inverse to write it through an input", g->name);
    g->area = TAGS_AREA_HOLDING;
    g->address = 0;
    g->in_register = false;
    g->count = (uint16_t)tags_type_registers(g->type, 0);
    return 0;
}

/* Everything about a tag that does not depend on the table; normalises the
 * order and bit where they mean nothing. */
static int validate(tags_tag_t *g, tags_field_t *field, char *msg, size_t cap)
{
    *field = TAGS_FIELD_NAME;
    if (!bounded(g->name, TAGS_NAME_MAX) || !tags_name_ok(g->name, TAGS_NAME_MAX))
        return tags_fail(msg, cap, -EINVAL, "tag name '%.*s' is not 1..%u of [A-Za-z0-9_.:/-]",
                         TAGS_NAME_MAX - 1, g->name, TAGS_NAME_MAX - 1);
    *field = !bounded(g->unit, TAGS_UNIT_MAX) ? TAGS_FIELD_UNIT : TAGS_FIELD_DESCRIPTION;
    if (!bounded(g->unit, TAGS_UNIT_MAX) || !bounded(g->description, TAGS_DESCRIPTION_MAX))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': unit or description not terminated", g->name);
    int rc = g->computed ? validate_computed(g, field, msg, cap) : validate_shape(g, field, msg, cap);
    if (rc == 0)
        rc = validate_numbers(g, field, msg, cap);
    if (rc < 0)
        return rc;
    if (g->type == TAGS_BOOL || g->type == TAGS_RAW || g->type == TAGS_INT8H || g->type == TAGS_INT8L ||
        g->type == TAGS_UINT8H || g->type == TAGS_UINT8L)
        g->order = TAGS_ORDER_ABCD;        /* an 8-bit type names its byte */
    else if (g->count == 1)
        g->order &= TAGS_ORDER_BYTESWAP;   /* one register: only the byte swap means anything */
    if (!g->in_register)
        g->bit = 0;
    if (!g->has_decimals)
        g->decimals = 0;
    return 0;
}

static int find_name(const tags_table_t *t, const char *name)
{
    unsigned s = t->slots[slot_of(t, name)];
    return s ? (int)s - 1 : -ENOENT;
}

static int duplicate(const tags_table_t *t, int other, const char *name, char *msg, size_t cap)
{
    const char *src = tags_table_source(t, (size_t)other);
    unsigned line = t->tags[other].line;
    if (src && line)
        return tags_fail(msg, cap, -EEXIST, "tag '%s' is already defined at %s:%u", name, src, line);
    return tags_fail(msg, cap, -EEXIST, "tag '%s' is already defined", name);
}

int tags_table_add(tags_table_t *t, const tags_tag_t *tag, const char *device, char *msg, size_t cap)
{
    tags_field_t field;
    return tags_table_add_at(t, tag, device, &field, msg, cap);
}

int tags_table_add_at(tags_table_t *t, const tags_tag_t *tag, const char *device, tags_field_t *field,
                      char *msg, size_t cap)
{
    tags_tag_t g = *tag;
    int rc = validate(&g, field, msg, cap);
    if (rc < 0)
        return rc;
    *field = TAGS_FIELD_DEVICE;
    if (!device || !tags_name_ok(device, TAGS_DEVICE_MAX))
        return tags_fail(msg, cap, -EINVAL, "tag '%s': device '%s' is not 1..%u of [A-Za-z0-9_.:/-]",
                         g.name, device ? device : "", TAGS_DEVICE_MAX - 1);
    *field = TAGS_FIELD_NAME;
    int other = find_name(t, g.name);
    if (other >= 0)
        return duplicate(t, other, g.name, msg, cap);
    if (t->count >= t->max)
        return tags_fail(msg, cap, -ENOSPC, "tag '%s': the table is full (%zu tags)", g.name, t->max);
    if (reserve_tag(t) < 0 || (2 * (t->count + 1) > t->n_slots && resize_index(t, 2 * t->n_slots) < 0))
        return tags_fail(msg, cap, -ENOMEM, "tag '%s': out of memory", g.name);
    int d = device_index(t, device);
    if (d < 0 || grow((void **)&t->devices[d].tags, &t->devices[d].cap, t->devices[d].n + 1,
                      sizeof(unsigned)) < 0)
        return tags_fail(msg, cap, -ENOMEM, "tag '%s': out of memory", g.name);
    uint16_t *words = NULL;
    if ((g.type == TAGS_STRING || g.type == TAGS_RAW) && !(words = calloc(g.count, sizeof *words)))
        return tags_fail(msg, cap, -ENOMEM, "tag '%s': out of memory", g.name);

    size_t i = t->count++;
    g.device = (unsigned)d;
    t->tags[i] = g;
    t->values[i] = (tags_value_t){ .quality = TAGS_BAD, .reason = TAGS_BAD_NOT_READ };
    t->reported[i] = NAN;
    t->changes.at[i] = t->changes.seq;
    t->changes.stale_at[i] = INT64_MAX;
    t->words[i] = words;
    t->exprs[i] = NULL;
    t->notes[i] = NULL;
    t->source[i] = t->current_source;
    t->slots[slot_of(t, g.name)] = (unsigned)i + 1;
    t->devices[d].tags[t->devices[d].n++] = (unsigned)i;
    return (int)i;
}

size_t tags_table_count(const tags_table_t *t)
{
    return t->count;
}

const tags_tag_t *tags_table_tag(const tags_table_t *t, size_t index)
{
    return index < t->count ? &t->tags[index] : NULL;
}

int tags_table_find(const tags_table_t *t, const char *name)
{
    return find_name(t, name);
}

size_t tags_table_device_count(const tags_table_t *t)
{
    return t->n_devices;
}

const char *tags_table_device_name(const tags_table_t *t, size_t device)
{
    return device < t->n_devices ? t->devices[device].name : NULL;
}

int tags_table_find_device(const tags_table_t *t, const char *name)
{
    for (size_t d = 0; d < t->n_devices; d++)
        if (strcmp(t->devices[d].name, name) == 0)
            return (int)d;
    return -ENOENT;
}

const unsigned *tags_table_device_tags(const tags_table_t *t, size_t device, size_t *n)
{
    *n = device < t->n_devices ? t->devices[device].n : 0;
    return device < t->n_devices ? t->devices[device].tags : NULL;
}

int tags_table_carry_value(tags_table_t *dst, size_t di, const tags_table_t *src, size_t si)
{
    if (di >= dst->count || si >= src->count || dst->tags[di].type != src->tags[si].type ||
        dst->tags[di].count != src->tags[si].count)
        return -EINVAL;
    tags_value_t v = src->values[si];
    if (dst->words[di] && src->words[si]) {   /* string and raw: the value points at its own table's words */
        memcpy(dst->words[di], src->words[si], dst->tags[di].count * sizeof *dst->words[di]);
        if (v.words)
            v.words = dst->words[di];
    }
    dst->values[di] = v;
    dst->reported[di] = src->reported[si];
    tags_changes_carry(dst, di, src, si);
    return 0;
}

int tags_table_value(const tags_table_t *t, size_t index, int64_t now_ms, tags_value_t *out)
{
    if (index >= t->count)
        return -ENOENT;
    *out = t->values[index];
    if (out->quality == TAGS_GOOD && now_ms - out->time_ms > 2 * (int64_t)t->tags[index].interval_ms)
        out->quality = TAGS_STALE;
    return 0;
}

/* ---- internal: sources, truncation, value slots ------------------------- */

int tags_table_set_source(tags_table_t *t, const char *source)
{
    if (!source) {
        t->current_source = UINT32_MAX;
        return 0;
    }
    for (size_t i = 0; i < t->n_sources; i++)
        if (strcmp(t->sources[i], source) == 0) {
            t->current_source = (unsigned)i;
            return 0;
        }
    char **s = realloc(t->sources, (t->n_sources + 1) * sizeof *s);
    if (!s)
        return -ENOMEM;
    t->sources = s;
    if (!(s[t->n_sources] = strdup(source)))
        return -ENOMEM;
    t->current_source = (unsigned)t->n_sources++;
    return 0;
}

const char *tags_table_source(const tags_table_t *t, size_t index)
{
    if (index >= t->count || t->source[index] == UINT32_MAX)
        return NULL;
    return t->sources[t->source[index]];
}

void tags_table_truncate(tags_table_t *t, size_t keep)
{
    if (keep >= t->count)
        return;
    for (size_t i = keep; i < t->count; i++) {
        free(t->words[i]);
        free(t->exprs[i]);
        free(t->notes[i]);
    }
    t->count = keep;
    for (size_t d = 0; d < t->n_devices; d++)
        while (t->devices[d].n && t->devices[d].tags[t->devices[d].n - 1] >= keep)
            t->devices[d].n--;
    /* Devices are made by their first tag, so the ones the dropped tags made
     * are the empty ones at the end. */
    while (t->n_devices && t->devices[t->n_devices - 1].n == 0)
        free(t->devices[--t->n_devices].tags);
    reindex(t);
}

tags_value_t *tags_table_slot(tags_table_t *t, size_t index)
{
    return index < t->count ? &t->values[index] : NULL;
}

uint16_t *tags_table_words(tags_table_t *t, size_t index)
{
    return index < t->count ? t->words[index] : NULL;
}

tags_changes_t *tags_table_changes(tags_table_t *t)
{
    return &t->changes;
}

const tags_changes_t *tags_table_changes_const(const tags_table_t *t)
{
    return &t->changes;
}

double *tags_table_reported(tags_table_t *t, size_t index)
{
    return index < t->count ? &t->reported[index] : NULL;
}

/* ---- computed tags: their text, their note, their value ------------------ */

int tags_table_set_expr(tags_table_t *t, size_t index, const char *text)
{
    if (index >= t->count || !t->tags[index].computed || !text || !*text || strlen(text) >= TAGS_EXPR_MAX)
        return -EINVAL;
    size_t n = strlen(text) + 1;
    char *copy = malloc(n + 2);   /* an empty inverse and target after it */
    if (!copy)
        return -ENOMEM;
    memcpy(copy, text, n);
    copy[n] = copy[n + 1] = '\0';
    free(t->exprs[index]);
    t->exprs[index] = copy;
    t->tags[index].writable = false;
    return 0;
}

const char *tags_table_expr(const tags_table_t *t, size_t index)
{
    return index < t->count ? t->exprs[index] : NULL;
}

/* The inverse is kept in the expression's own allocation, after its text:
 * one string per computed tag to copy, compare and free, as before. */
int tags_table_set_inverse(tags_table_t *t, size_t index, const char *text, const char *target)
{
    if (index >= t->count || !t->exprs[index] || !text || !*text || strlen(text) >= TAGS_EXPR_MAX || !target ||
        strlen(target) >= TAGS_NAME_MAX)
        return -EINVAL;
    size_t e = strlen(t->exprs[index]) + 1, n = strlen(text) + 1, m = strlen(target) + 1;
    char *all = realloc(t->exprs[index], e + n + m);
    if (!all)
        return -ENOMEM;
    memcpy(all + e, text, n);
    memcpy(all + e + n, target, m);
    t->exprs[index] = all;
    t->tags[index].writable = true;   /* a write becomes a write of its input (gateway/tag_write.c) */
    return 0;
}

const char *tags_table_inverse(const tags_table_t *t, size_t index, const char **target)
{
    const char *e = index < t->count ? t->exprs[index] : NULL;
    if (!e)
        return NULL;
    const char *inv = e + strlen(e) + 1;
    if (!t->tags[index].writable || !*inv)   /* set_expr leaves no inverse behind it */
        return NULL;
    if (target)
        *target = inv + strlen(inv) + 1;
    return inv;
}

const char *tags_table_note(const tags_table_t *t, size_t index)
{
    return index < t->count && t->notes[index] && t->notes[index][0] ? t->notes[index] : NULL;
}

void tags_table_set_interval(tags_table_t *t, size_t index, unsigned interval_ms)
{
    if (index < t->count && t->tags[index].computed && interval_ms >= 1 && interval_ms <= INTERVAL_MAX)
        t->tags[index].interval_ms = interval_ms;
}

void tags_table_on_store(tags_table_t *t, tags_stored_fn fn, void *ctx)
{
    t->on_store = fn;
    t->on_store_ctx = ctx;
}

void tags_table_stored(tags_table_t *t, size_t index)
{
    if (t->on_store)
        t->on_store(t->on_store_ctx, index);
}

/* The note is kept (a fixed buffer once allocated) only while the value is
 * bad: a good value clears it, so no stale reason lingers in /tags. */
void tags_table_set_note(tags_table_t *t, size_t i, const char *note)
{
    if (i >= t->count)
        return;
    if (!note) {
        if (t->notes[i])
            t->notes[i][0] = '\0';
        return;
    }
    if (!t->notes[i] && !(t->notes[i] = malloc(TAGS_NOTE_MAX)))
        return;   /* out of memory: the reason alone says what failed */
    snprintf(t->notes[i], TAGS_NOTE_MAX, "%s", note);
}
