/*
 * gateway/vslave.c -- virtual slaves ([map NAME]): the tags served at a
 * register map of the integrator's own, at a unit id of its own, answered
 * from the tags' last values without a request on any serial line.
 *
 * One dispatch for every front end. A request's unit id is offered to
 * gw_unit_dispatch before the front end's own routes ([tcp] and its TLS
 * listener, [rtu_tcp], each [serial_slave]; a datagram front end calls it
 * the same way): a map's unit is answered here, any other goes on to the
 * routes. The configuration refuses a map whose unit a front end routes
 * (config/maps.c), so the order never decides anything. Roles and
 * read_only are the front end's, as for any request (a read needs the read
 * class, a write the write class, of a role granted the unit).
 *
 * Reads (fc 1..4) are answered at once, from one snapshot: every value of
 * one answer is read within one hold of the tag table's own lock
 * (tags.c), the lock the poller holds while it applies an answer. So a
 * read spanning tags of different ages gives each tag's own last value as
 * the table held them all at one instant, and a 32- or 64-bit value is
 * never torn: its words are encoded from one value, never from two polls.
 * A read may cover part of an entry: those words of the value at that
 * instant. A tag whose quality is not good (bad, stale, never read, or not
 * in the running table) answers exception 0B, or with stale = last its last
 * value (zero before the first). The quality register, where the map has
 * one, holds how many of the map's entries are not good at that instant.
 * Unmapped registers inside a read are 0 (gaps = zero) or refuse the read
 * with 02 (gaps = exception); a read touching no entry is 02 either way.
 * A value the entry's type cannot hold (out of range, NaN into an integer)
 * answers 04: the map's type is the integrator's promise, not the tag's.
 *
 * Writes (fc 5, 6, 15, 16) cover whole entries, end to end (else 02, and
 * nothing is written): each entry's words are decoded with its type, order
 * and scale into the engineering value, encoded for its tag's own device
 * (tags_encode_number, or the words as they are for string and raw) and
 * written through tag_write.c, the one path (overlap rule, confirmation
 * read-back; a computed tag through its inverse), one entry after another
 * (write_done says why). Refused before anything is written: 02 for a tag
 * that is not writable (a computed tag without an inverse included), a gap
 * or part of an entry, 03 for a value outside a tag's type. Each tag
 * write's own refusal: 02 on a listen-only bus (the address cannot be
 * written, as on a slave whose register is read-only), 06 while an
 * overlapping write is in flight or the table of writes is full, 0A when
 * the bus took nothing, 04 when an inverse cannot give a value.
 * tag_write_begin is the I/O thread's: a write from another thread (the
 * serial slave's actor) is posted there, and its refusal comes back
 * through the request's origin.
 *
 * Memory. An entry is 12 bytes (address, count, the tag's index, its
 * encoding); encodings are shared (a map of 5,000 float32 entries holds
 * one tags_tag_t for them all). A map's entries per table are sorted: a
 * read finds its first entry by binary search.
 *
 * Live reload (daemon/control.c): vslave_rebuild builds a new set from the
 * configuration against the running tag table, on the I/O thread, and
 * swaps it in under a rwlock the readers hold for the length of one
 * answer. Each set names the tag table's generation it indexes; an answer
 * whose set is older than the table (a reload between the two swaps)
 * answers 06, busy, for that instant.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_TAG UINT32_MAX

typedef struct vs_entry {
    uint16_t address, count;
    uint32_t tag;                 /* index in the running table; NO_TAG: not there */
    uint16_t shape;               /* its encoding, in the map's shapes */
    bool cached;                  /* words[word] holds the encoding of the value keyed `key` */
    uint32_t word;                /* its words' place in the map's words */
    uint64_t key;                 /* the value encoded: its eng's bits (64-bit integers: raw's) */
} vs_entry_t;

typedef struct vs_map {
    uint8_t unit;
    bool gaps_exception, stale_last;
    int quality_register;
    vs_entry_t *area[4];          /* per tags_area_t, sorted by address */
    unsigned n[4];
    tags_tag_t *shapes;
    unsigned n_shapes;
    uint16_t *words;              /* each numeric entry's last encoding (cached) */
} vs_map_t;

typedef struct vs_set {
    vs_map_t *maps;
    unsigned n;
    int16_t by_unit[256];         /* index in maps, or -1 */
    uint32_t generation;          /* of the tag table it indexes */
} vs_set_t;

struct gw_maps {
    gw_t *gw;
    pthread_rwlock_t lock;
    vs_set_t *set;
    _Atomic uint64_t units[4];    /* bit u: unit u is a map's (the set's by_unit, for vslave_owns without the lock) */
    gw_map_metrics_t m;
};

/* One entry of a map write: the tag and what to write to it (encoded as the tag). */
typedef struct vs_item {
    unsigned tag, bus, slave;
    tags_write_t w;
} vs_item_t;

/* A write waiting for its tag writes' outcomes: the request, to answer it,
 * and its entries, written one after another (next is the one in flight). */
typedef struct vs_write {
    gw_maps_t *maps;
    line_request_t req;
    unsigned n, next;
    vs_item_t items[];
} vs_write_t;

static void set_free(vs_set_t *s)
{
    for (unsigned i = 0; s && i < s->n; i++) {
        for (unsigned a = 0; a < 4; a++)
            free(s->maps[i].area[a]);
        free(s->maps[i].shapes);
        free(s->maps[i].words);
    }
    if (s)
        free(s->maps);
    free(s);
}

/* The shared encoding of entry e (a tags_tag_t that tags/ encodes with). */
static int shape_of(vs_map_t *m, const config_map_entry_t *e, unsigned *cap)
{
    tags_tag_t g = { .area = e->area, .type = e->type, .count = e->count, .order = e->order, .point = e->point,
                     .scale = e->scale, .offset = e->offset, .writable = true };
    snprintf(g.name, sizeof g.name, "map");
    for (unsigned i = 0; i < m->n_shapes; i++) {
        const tags_tag_t *s = &m->shapes[i];
        if (s->area == g.area && s->type == g.type && s->count == g.count && s->order == g.order &&
            s->point == g.point && s->scale == g.scale && s->offset == g.offset)
            return (int)i;
    }
    if (m->n_shapes == *cap) {
        unsigned ncap = *cap ? 2 * *cap : 8;
        tags_tag_t *n = ncap <= 65535 ? realloc(m->shapes, ncap * sizeof *n) : NULL;
        if (!n)
            return -ENOMEM;
        m->shapes = n;
        *cap = ncap;
    }
    m->shapes[m->n_shapes] = g;
    return (int)m->n_shapes++;
}

static int build_map(vs_map_t *m, const config_map_t *c, const tags_table_t *live)
{
    unsigned cap = 0, at[4] = { 0 };
    *m = (vs_map_t){ .unit = (uint8_t)c->unit, .gaps_exception = c->gaps_exception, .stale_last = c->stale_last,
                     .quality_register = c->quality_register };
    size_t n_words = 0;
    for (unsigned i = 0; i < c->entry_count; i++) {
        m->n[c->entries[i].area & 3]++;
        n_words += c->entries[i].count;
    }
    for (unsigned a = 0; a < 4; a++)
        if (m->n[a] && !(m->area[a] = calloc(m->n[a], sizeof *m->area[a])))
            return -ENOMEM;
    if (n_words && !(m->words = calloc(n_words, sizeof *m->words)))
        return -ENOMEM;
    n_words = 0;
    /* the configuration's entries are sorted by table, then address */
    for (unsigned i = 0; i < c->entry_count; i++) {
        const config_map_entry_t *e = &c->entries[i];
        int shape = shape_of(m, e, &cap);
        int tag = tags_table_find(live, e->tag);
        if (shape < 0)
            return shape;
        /* a tag of another type than the configuration checked (a change waiting for a restart) is not served */
        const tags_tag_t *g = tag >= 0 ? tags_table_tag(live, (size_t)tag) : NULL;
        if (g && (g->type == TAGS_STRING || g->type == TAGS_RAW) && (g->type != e->type || g->count != e->count))
            tag = -1;
        m->area[e->area & 3][at[e->area & 3]++] = (vs_entry_t){ .address = e->address, .count = e->count,
                                                                 .tag = tag >= 0 ? (uint32_t)tag : NO_TAG,
                                                                 .shape = (uint16_t)shape,
                                                                 .word = (uint32_t)n_words };
        n_words += e->count;
    }
    return 0;
}

static vs_set_t *build_set(const config_t *cfg, gw_tags_t *tags)
{
    vs_set_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    memset(s->by_unit, 0xff, sizeof s->by_unit);
    s->generation = gw_tags_generation(tags);
    s->maps = cfg->map_count ? calloc(cfg->map_count, sizeof *s->maps) : NULL;
    if (cfg->map_count && !s->maps) {
        free(s);
        return NULL;
    }
    for (unsigned i = 0; i < cfg->map_count; i++) {
        s->n = i + 1;
        if (build_map(&s->maps[i], &cfg->maps[i], gw_tags_defs(tags)) != 0) {
            set_free(s);
            return NULL;
        }
        s->by_unit[cfg->maps[i].unit & 0xff] = (int16_t)i;
    }
    return s;
}

static void publish_units(gw_maps_t *m, const vs_set_t *s)
{
    for (unsigned w = 0; w < 4; w++) {
        uint64_t bits = 0;
        for (unsigned b = 0; b < 64; b++)
            bits |= (uint64_t)(s->by_unit[w * 64 + b] >= 0) << b;
        atomic_store_explicit(&m->units[w], bits, memory_order_relaxed);
    }
}

gw_maps_t *vslave_new(gw_t *gw, char *err, size_t errcap)
{
    gw_maps_t *m = calloc(1, sizeof *m);
    if (!m || !(m->set = build_set(gw->cfg, gw->tags))) {
        free(m);
        snprintf(err, errcap, "maps: out of memory");
        return NULL;
    }
    m->gw = gw;
    pthread_rwlock_init(&m->lock, NULL);
    publish_units(m, m->set);
    return m;
}

void vslave_free(gw_maps_t *m)
{
    if (!m)
        return;
    pthread_rwlock_destroy(&m->lock);
    set_free(m->set);
    free(m);
}

int vslave_rebuild(gw_maps_t *m, const config_t *cfg)
{
    vs_set_t *fresh = build_set(cfg, m->gw->tags);
    if (!fresh)
        return -ENOMEM;
    pthread_rwlock_wrlock(&m->lock);
    vs_set_t *old = m->set;
    m->set = fresh;
    publish_units(m, fresh);
    pthread_rwlock_unlock(&m->lock);
    set_free(old);
    return 0;
}

const gw_map_metrics_t *vslave_metrics(const gw_maps_t *m)
{
    return &m->m;
}

/* ---- reads ---------------------------------------------------------------------- */

/* The first entry of a (sorted, n) that ends after address. */
static unsigned first_entry(const vs_entry_t *a, unsigned n, unsigned address)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if ((unsigned)a[mid].address + a[mid].count <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool good(const tags_value_t *v)
{
    return v->quality == TAGS_GOOD;
}

/* The words of a number (the table locked): 0, or the exception. */
static uint8_t encode(const tags_tag_t *shape, const tags_tag_t *g, const tags_value_t *v, uint16_t *out)
{
    tags_write_t w;
    int rc;
    /* 64-bit integers beyond 2^53 are exact only through their text */
    if ((shape->type == TAGS_INT64 || shape->type == TAGS_UINT64) && shape->scale == 1 && shape->offset == 0 &&
        (g->type == TAGS_INT64 || g->type == TAGS_UINT64) && g->scale == 1 && g->offset == 0) {
        char text[32];
        if (g->type == TAGS_INT64)
            snprintf(text, sizeof text, "%lld", (long long)v->raw.i);
        else
            snprintf(text, sizeof text, "%llu", (unsigned long long)v->raw.u);
        rc = tags_encode_text(shape, text, TAGS_WRITE_MULTIPLE, &w, NULL, 0);
    } else {
        rc = tags_encode_number(shape, v->eng, TAGS_WRITE_MULTIPLE, &w, NULL, 0);
    }
    if (rc < 0)
        return MB_EX_SLAVE_FAILURE;   /* the map's type cannot hold the value */
    memcpy(out, w.words, shape->count * sizeof *out);
    return 0;
}

/*
 * The words of entry e's tag now (the table locked): 0, or the exception.
 * A number's encoding is kept with its entry, keyed by the value (its
 * engineering value's bits; a 64-bit integer's raw bits): reads between
 * two polls cost a comparison, not an encoding. Written and read only under
 * the tag table's lock, which every reader holds (any thread).
 */
static uint8_t entry_words(const vs_map_t *m, vs_entry_t *e, const tags_table_t *t, int64_t now_ms,
                           uint16_t *out)
{
    const tags_tag_t *shape = &m->shapes[e->shape];
    tags_value_t v = { .quality = TAGS_BAD };
    if (e->tag != NO_TAG)
        tags_table_value(t, e->tag, now_ms, &v);
    memset(out, 0, e->count * sizeof *out);
    if (!good(&v) && !m->stale_last)
        return MB_EX_TARGET_FAILED;
    if (e->tag == NO_TAG || v.time_ms == 0)
        return 0;   /* stale = last, never read: zero */
    if (shape->type == TAGS_STRING || shape->type == TAGS_RAW) {
        if (v.words && v.n_words == e->count)
            memcpy(out, v.words, e->count * sizeof *out);
        return 0;
    }
    if (shape->type == TAGS_BOOL) {
        out[0] = v.eng != 0;
        return 0;
    }
    const tags_tag_t *g = tags_table_tag(t, e->tag);
    uint64_t key;
    if (g->type == TAGS_INT64 || g->type == TAGS_UINT64)
        key = v.raw.u;
    else
        memcpy(&key, &v.eng, sizeof key);
    uint16_t *kept = &m->words[e->word];
    if (!e->cached || e->key != key) {
        uint8_t ex = encode(shape, g, &v, kept);
        if (ex)
            return ex;
        e->cached = true;
        e->key = key;
    }
    memcpy(out, kept, e->count * sizeof *out);
    return 0;
}

/* How many entries of m are not good now (the table locked). */
static unsigned not_good(const vs_map_t *m, const tags_table_t *t, int64_t now_ms)
{
    unsigned bad = 0;
    for (unsigned a = 0; a < 4; a++) {
        for (unsigned i = 0; i < m->n[a]; i++) {
            tags_value_t v = { .quality = TAGS_BAD };
            if (m->area[a][i].tag != NO_TAG)
                tags_table_value(t, m->area[a][i].tag, now_ms, &v);
            bad += !good(&v);
        }
    }
    return bad;
}

/* A read of m: the answer's length in pdu, or 0 with *ex its exception. */
static size_t map_read(gw_maps_t *ms, const vs_set_t *set, const vs_map_t *m, const rtu_request_t *req,
                       uint8_t *pdu, uint8_t *ex)
{
    unsigned area = req->function - 1u;   /* fc 1..4 are coils, discretes, holding, input */
    unsigned a0 = req->address, q = req->quantity, covered = 0;
    uint16_t items[2000];
    uint16_t words[TAGS_MAX_REGISTERS];
    bool regs = area >= TAGS_AREA_HOLDING;
    vs_entry_t *ents = m->area[area];
    int64_t now_ms = gw_wall_ms();

    *ex = 0;
    memset(items, 0, q * sizeof *items);
    tags_table_t *t = gw_tags_lock(ms->gw->tags);
    if (gw_tags_generation(ms->gw->tags) != set->generation) {
        *ex = MB_EX_BUSY;   /* the tags were replaced, the maps not yet (a reload) */
    } else {
        for (unsigned i = first_entry(ents, m->n[area], a0); i < m->n[area] && ents[i].address < a0 + q; i++) {
            vs_entry_t *e = &ents[i];
            if ((*ex = entry_words(m, e, t, now_ms, words)) != 0)
                break;
            for (unsigned k = 0; k < e->count; k++) {
                unsigned at = (unsigned)e->address + k;
                if (at >= a0 && at < a0 + q) {
                    items[at - a0] = words[k];
                    covered++;
                }
            }
        }
        int qr = m->quality_register;
        if (!*ex && regs && qr >= (int)a0 && qr < (int)(a0 + q)) {
            unsigned bad = not_good(m, t, now_ms);
            items[qr - (int)a0] = (uint16_t)(bad > 65535 ? 65535 : bad);
            covered++;
        }
    }
    gw_tags_unlock(ms->gw->tags);
    if (!*ex && (covered == 0 || (covered < q && m->gaps_exception)))
        *ex = MB_EX_ILLEGAL_DATA_ADDRESS;
    if (*ex)
        return 0;
    pdu[0] = req->function;
    if (regs) {
        pdu[1] = (uint8_t)(2 * q);
        for (unsigned k = 0; k < q; k++) {
            pdu[2 + 2 * k] = (uint8_t)(items[k] >> 8);
            pdu[3 + 2 * k] = (uint8_t)items[k];
        }
    } else {
        pdu[1] = (uint8_t)((q + 7) / 8);
        memset(pdu + 2, 0, pdu[1]);
        for (unsigned k = 0; k < q; k++)
            pdu[2 + k / 8] |= (uint8_t)((items[k] & 1) << (k % 8));
    }
    return 2u + pdu[1];
}

/* ---- writes ----------------------------------------------------------------------- */

/* The tag write of entry e for its words: 0 and *it; else the exception. */
static uint8_t entry_write(gw_maps_t *ms, const vs_map_t *m, const vs_entry_t *e, const uint16_t *words,
                           vs_item_t *it)
{
    const tags_table_t *defs = gw_tags_defs(ms->gw->tags);
    if (e->tag == NO_TAG)
        return MB_EX_ILLEGAL_DATA_ADDRESS;
    const tags_tag_t *shape = &m->shapes[e->shape], *g = tags_table_tag(defs, e->tag);
    if (!g->writable)
        return MB_EX_ILLEGAL_DATA_ADDRESS;   /* computed tags without an inverse included */
    int rc;
    if (shape->type == TAGS_STRING || shape->type == TAGS_RAW) {
        it->w = (tags_write_t){ .function = 16, .address = g->address, .count = g->count };
        memcpy(it->w.words, words, e->count * sizeof *words);
        rc = 0;
    } else {
        tags_value_t v = { .quality = TAGS_GOOD };
        tags_decode(shape, words, &v);
        if (v.quality != TAGS_GOOD)
            return MB_EX_ILLEGAL_DATA_VALUE;   /* words that are no value of the entry's type */
        rc = tags_encode_number(g, v.eng, 0, &it->w, NULL, 0);
    }
    if (rc == -EACCES)
        return MB_EX_ILLEGAL_DATA_ADDRESS;
    if (rc < 0)
        return MB_EX_ILLEGAL_DATA_VALUE;
    const config_device_t *dev = &ms->gw->cfg->devices[gw_tags_config_device(ms->gw->tags, g)];
    it->tag = e->tag;
    it->bus = dev->bus;
    it->slave = dev->slave;
    return 0;
}

/*
 * A map write into its entries' tag writes: 0 and *out; else the exception,
 * and nothing is written. The written range must be whole entries end to
 * end (fc 16 over three float32 entries is three tag writes): a gap or half
 * an entry refuses the whole request (02), a value out of an entry's tag's
 * type too (03), before any entry is written.
 */
static uint8_t map_write_of(gw_maps_t *ms, const vs_map_t *m, const line_request_t *r, const rtu_request_t *req,
                            vs_write_t **out)
{
    bool coils = req->function == 5 || req->function == 15;
    unsigned area = coils ? TAGS_AREA_COIL : TAGS_AREA_HOLDING;
    bool single = req->function == 5 || req->function == 6;
    unsigned count = single ? 1 : req->write_quantity, address = single ? req->address : req->write_address;
    uint16_t words[2000];   /* fc 15 carries at most 1968 coils, fc 16 123 registers */

    if (count == 0 || count > sizeof words / sizeof *words)
        return MB_EX_ILLEGAL_DATA_VALUE;
    if (req->function == 5 || req->function == 6) {
        words[0] = req->function == 5 ? req->quantity == 0xFF00 : req->quantity;
    } else {
        for (unsigned k = 0; k < count; k++)
            words[k] = coils ? (req->data[k / 8] >> (k % 8)) & 1 : (uint16_t)(req->data[2 * k] << 8 | req->data[2 * k + 1]);
    }
    const vs_entry_t *ents = m->area[area];
    unsigned i = first_entry(ents, m->n[area], address), n = 0;
    for (unsigned at = address, j = i; at < address + count; at += ents[j++].count, n++)
        if (j >= m->n[area] || ents[j].address != at || at + ents[j].count > address + count)
            return MB_EX_ILLEGAL_DATA_ADDRESS;   /* a gap, or half an entry */
    vs_write_t *vw = calloc(1, sizeof *vw + n * sizeof *vw->items);
    if (!vw)
        return MB_EX_SLAVE_FAILURE;
    *vw = (vs_write_t){ .maps = ms, .req = *r, .n = n };
    for (unsigned k = 0; k < n; k++) {
        const vs_entry_t *e = &ents[i + k];
        uint8_t ex = entry_write(ms, m, e, words + (e->address - address), &vw->items[k]);
        if (ex) {
            free(vw);
            return ex;
        }
    }
    *out = vw;
    return 0;
}

static void write_done(void *owner, uint64_t cookie, const tag_write_outcome_t *o);

/* The exception of a tag write refused at once. */
static uint8_t refused(int rc)
{
    return rc == TAG_WRITE_QUEUED ? 0 : rc == TAG_WRITE_LISTEN_ONLY || rc == TAG_WRITE_COMPUTED ? MB_EX_ILLEGAL_DATA_ADDRESS
           : rc == TAG_WRITE_UNAVAILABLE ? MB_EX_PATH_UNAVAILABLE
           : rc == TAG_WRITE_FULL || rc == TAG_WRITE_OVERLAP ? MB_EX_BUSY : MB_EX_SLAVE_FAILURE;   /* the inverse's refusals */
}

/* The next entry's tag write begun (I/O thread): 0, or the exception. */
static uint8_t write_next(gw_maps_t *ms, vs_write_t *vw)
{
    vs_item_t *it = &vw->items[vw->next];
    char why[320];
    int rc = tag_write_begin(ms->gw->tag_writes, it->tag, it->bus, it->slave, &it->w, write_done, ms,
                             (uint64_t)(uintptr_t)vw, why, sizeof why);
    if (rc != TAG_WRITE_QUEUED && vw->next > 0)
        gw_log(ms->gw, CONFIG_LOG_WARN, "map unit %u: a write of %u entries stopped at entry %u of %u "
               "(tag %s): %s; the %u before it stay written", vw->req.slave, vw->n, vw->next + 1, vw->n,
               tags_table_tag(gw_tags_defs(ms->gw->tags), it->tag)->name, why, vw->next);
    return refused(rc);
}

static void answer(gw_maps_t *ms, vs_write_t *vw, uint8_t ex)
{
    const line_request_t *r = &vw->req;
    if (ex) {
        uint8_t pdu[2] = { (uint8_t)(r->pdu[0] | 0x80), ex };
        gw_count(&ms->m.exceptions);
        r->origin->ops->answer(r->origin, r, pdu, sizeof pdu);
    } else {
        uint8_t pdu[5] = { r->pdu[0], r->pdu[1], r->pdu[2], r->pdu[3], r->pdu[4] };
        r->origin->ops->answer(r->origin, r, pdu, sizeof pdu);   /* 5, 6: the echo; 15, 16: address and count */
    }
    free(vw);
}

/*
 * An entry's outcome: the next entry begun, or the answer. Entries are
 * written one after another, in address order, each confirmed (its echo,
 * and its read-back where the device confirms writes) before the next goes:
 * so the answer comes only when every entry was, and a failure stops the
 * rest. The entries before the failure stay written (Modbus has no
 * rollback); the client gets the failure's exception, and the log names how
 * many were written (docs/tags.md). One at a time also keeps two entries
 * that share a device register from meeting in the overlap rule.
 */
static void write_done(void *owner, uint64_t cookie, const tag_write_outcome_t *o)
{
    vs_write_t *vw = (vs_write_t *)(uintptr_t)cookie;
    gw_maps_t *ms = owner;
    uint8_t ex = o->exception || o->malformed_read || o->unwritten ? (o->exception ? o->exception : MB_EX_SLAVE_FAILURE) : 0;
    if (ex && vw->next > 0)
        gw_log(ms->gw, CONFIG_LOG_WARN, "map unit %u: a write of %u entries failed at entry %u (tag %s): "
               "exception %u; the %u before it stay written", vw->req.slave, vw->n, vw->next + 1,
               tags_table_tag(gw_tags_defs(ms->gw->tags), o->tag)->name, ex, vw->next);
    if (!ex && ++vw->next < vw->n && (ex = write_next(ms, vw)) == 0)
        return;   /* the next entry's outcome comes next */
    answer(ms, vw, ex);
}

/* On the I/O thread: a map write begun (*vw is then its owner's), or its refusal (the exception). */
static uint8_t write_begin(gw_maps_t *ms, const vs_map_t *m, const line_request_t *r, vs_write_t **vw)
{
    rtu_request_t req;
    if (rtu_request_decode_pdu(r->pdu, r->pdu_len, &req) != RTU_OK)
        return MB_EX_ILLEGAL_DATA_VALUE;
    uint8_t ex = map_write_of(ms, m, r, &req, vw);
    if (ex)
        return ex;
    if ((ex = write_next(ms, *vw)) != 0)
        free(*vw);
    return ex;
}

/* A write posted from another thread: begun here, or refused through its origin. */
static void on_posted_write(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_maps_t *ms = ctx;
    line_request_t *r;
    vs_write_t *vw = NULL;
    (void)b;
    memcpy(&r, data, len < sizeof r ? len : sizeof r);
    pthread_rwlock_rdlock(&ms->lock);
    int idx = ms->set->by_unit[a & 0xff];
    uint8_t ex = idx < 0 ? MB_EX_PATH_UNAVAILABLE : write_begin(ms, &ms->set->maps[idx], r, &vw);
    pthread_rwlock_unlock(&ms->lock);
    if (ex) {
        uint8_t pdu[2] = { (uint8_t)(r->pdu[0] | 0x80), ex };
        gw_count(&ms->m.exceptions);
        r->origin->ops->answer(r->origin, r, pdu, sizeof pdu);
    }
    free(r);
}

/* ---- the dispatch ------------------------------------------------------------------ */

/* One load, no lock: asked for every request of every front end. A unit
 * that stops being a map's between this and the dispatch is answered 0A
 * by the front end (a reload at that instant). */
bool vslave_owns(gw_maps_t *ms, uint8_t unit)
{
    return ms && (atomic_load_explicit(&ms->units[unit / 64], memory_order_relaxed) >> (unit % 64) & 1);
}

static size_t exception(uint8_t *answer, uint8_t fc, uint8_t code)
{
    answer[0] = (uint8_t)(fc | 0x80);
    answer[1] = code;
    return 2;
}

int gw_unit_dispatch(gw_t *gw, uint8_t unit, const line_request_t *req, uint8_t answer[RTU_MAX_PDU], size_t *len)
{
    gw_maps_t *ms = gw->maps;
    rtu_request_t dec;
    int verdict = GW_UNIT_ANSWERED;

    if (!ms)
        return GW_UNIT_ROUTE;
    pthread_rwlock_rdlock(&ms->lock);
    const vs_set_t *set = ms->set;
    int idx = set->by_unit[unit];
    if (idx < 0) {
        pthread_rwlock_unlock(&ms->lock);
        return GW_UNIT_ROUTE;
    }
    const vs_map_t *m = &set->maps[idx];
    rtu_status_t st = rtu_request_decode_pdu(req->pdu, req->pdu_len, &dec);
    uint8_t fc = req->pdu_len ? req->pdu[0] : 0, ex = 0;
    if (st != RTU_OK) {
        ex = st == RTU_ERR_FUNCTION ? MB_EX_ILLEGAL_FUNCTION : MB_EX_ILLEGAL_DATA_VALUE;
    } else if (fc >= 1 && fc <= 4) {
        gw_count(&ms->m.reads);
        *len = map_read(ms, set, m, &dec, answer, &ex);
    } else if (fc == 5 || fc == 6 || fc == 15 || fc == 16) {
        gw_count(&ms->m.writes);
        line_request_t r = *req;
        vs_write_t *vw;
        r.bus = GW_BUS_MAP;   /* no bus's place is taken: the tag writes take their own */
        if (loop_is_current(gw->loop)) {
            ex = write_begin(ms, m, &r, &vw);
        } else {
            line_request_t *copy = malloc(sizeof *copy);
            if (copy)
                *copy = r;
            if (!copy || loop_post(gw->loop, on_posted_write, ms, unit, 0, &copy, sizeof copy) != 0) {
                free(copy);
                ex = MB_EX_SLAVE_FAILURE;
            }
        }
        if (!ex)
            verdict = GW_UNIT_PENDING;
    } else {
        ex = MB_EX_ILLEGAL_FUNCTION;   /* a map holds registers, nothing else */
    }
    pthread_rwlock_unlock(&ms->lock);
    if (ex) {
        gw_count(&ms->m.exceptions);
        *len = exception(answer, fc, ex);
    }
    return verdict;
}

void vslave_metrics_text(gw_maps_t *ms, struct evbuffer *b)
{
    if (!ms)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_map_reads_total Reads answered by [map] sections from the tags\n"
                           "# TYPE rtugw_map_reads_total counter\nrtugw_map_reads_total %llu\n"
                           "# HELP rtugw_map_writes_total Writes to [map] sections (each a tag write)\n"
                           "# TYPE rtugw_map_writes_total counter\nrtugw_map_writes_total %llu\n"
                           "# HELP rtugw_map_exceptions_total Exceptions [map] sections answered\n"
                           "# TYPE rtugw_map_exceptions_total counter\nrtugw_map_exceptions_total %llu\n",
                        (unsigned long long)atomic_load(&ms->m.reads), (unsigned long long)atomic_load(&ms->m.writes),
                        (unsigned long long)atomic_load(&ms->m.exceptions));
}
