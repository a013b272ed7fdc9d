/*
 * gateway/tags.c -- the live tag table: the configuration's tag
 * definitions copied into a table of the daemon's own, whose values the
 * poller's answers update and HTTP reads.
 *
 * The lock. Definitions never change once the gateway runs, so reading a
 * tag's name, type or address needs nothing. Values change on the poller's
 * thread, and HTTP reads them on the I/O thread: every access to a value
 * (tags_table_value, tags_table_apply, tags_table_fail, and the words of a
 * string or raw value, which stay valid only until the next update) holds
 * this table's own mutex. It is not the cache lock: a listing of 2,000 tags
 * formatted under it must not hold up the Modbus TCP front end's cached
 * reads, and the poller holds it only for one answer's apply (~20 ns a tag).
 *
 * A reload (gw_tags_replace) swaps in a table built from the new
 * configuration. It runs on the I/O thread, and is only called there when
 * every user of the definitions runs there too (the poller with the buses on
 * the I/O thread, HTTP, MQTT) and no tag write holds an index: so no one
 * holds a definition across the swap, and the old table is freed at once.
 * Work in flight names its table's generation (the poller's plan, MQTT's
 * chunks of indices): what an older generation named is dropped. A tag
 * defined the same before and after keeps its value.
 *
 * Change numbers (tags/changes.c; what GET /tags?since=N and its ETag are
 * made of) start at the wall clock in microseconds, and after a reload at
 * more than the old table's last one: a number a reader holds from an earlier
 * table, of this process or of one before a restart, is below the table's
 * base (or above its last number, if the clock went back), and the reader is
 * sent everything. A process would have to make more than one change per
 * microsecond of its life to hand out a number its successor also uses.
 */
#include "gateway/gateway.h"
#include "expr/expr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gw_tags {
    pthread_mutex_t lock;
    tags_table_t *table;
    unsigned *config_device;     /* per table device: its index in cfg->devices */
    uint32_t generation;         /* +1 per reload that replaced the table */
    expr_engine_t *expr;         /* the table's computed tags, or NULL when it has none */
    unsigned evaluated[GWTAGS_EVALUATED_MAX];   /* computed tags the last store evaluated */
    size_t n_evaluated;
};

static int config_device_index(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (strcmp(cfg->devices[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The running copy of cfg's tags, and each table device's config index;
 * its change numbers start at the wall clock's microseconds. */
static int build(const config_t *cfg, tags_table_t **table, unsigned **config_device, char *err, size_t errcap)
{
    const tags_table_t *src = cfg->tags;
    size_t n = src ? tags_table_count(src) : 0;
    tags_table_t *t = tags_table_new(n ? n : 1);
    char msg[320];

    *table = NULL;
    *config_device = NULL;
    if (!t) {
        snprintf(err, errcap, "tags: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const tags_tag_t *g = tags_table_tag(src, i);
        tags_tag_t copy = *g;
        const char *target, *inverse = tags_table_inverse(src, i, &target);
        copy.writable = g->writable && !g->computed;   /* a computed tag's comes with its inverse */
        int at = tags_table_add(t, &copy, tags_table_device_name(src, g->device), msg, sizeof msg);
        if (at < 0 || (g->computed && tags_table_set_expr(t, (size_t)at, tags_table_expr(src, i)) < 0) ||
            (inverse && tags_table_set_inverse(t, (size_t)at, inverse, target) < 0)) {
            snprintf(err, errcap, "tags: %s", at < 0 ? msg : "out of memory");   /* the config validated it */
            tags_table_free(t);
            return -1;
        }
    }
    size_t n_dev = tags_table_device_count(t);
    unsigned *cd = calloc(n_dev + 1, sizeof *cd);
    for (size_t d = 0; cd && d < n_dev; d++) {
        int c = config_device_index(cfg, tags_table_device_name(t, d));
        if (c < 0) {
            snprintf(err, errcap, "tags: device '%s' is not configured", tags_table_device_name(t, d));
            free(cd);
            tags_table_free(t);
            return -1;
        }
        cd[d] = (unsigned)c;
    }
    if (!cd) {
        snprintf(err, errcap, "tags: out of memory");
        tags_table_free(t);
        return -1;
    }
    tags_table_seq_start(t, wall_us());
    *table = t;
    *config_device = cd;
    return 0;
}

/* The engine of a table's computed tags (NULL, and no error, when it has none). */
static int build_expr(tags_table_t *t, expr_engine_t **out, char *err, size_t errcap)
{
    bool any = false;
    unsigned errors;
    *out = NULL;
    for (size_t i = 0; i < tags_table_count(t) && !any; i++)
        any = tags_table_tag(t, i)->computed;
    if (!any)
        return 0;
    if (!(*out = expr_engine_new(t, NULL, NULL, NULL, NULL, &errors)))
        snprintf(err, errcap, "tags: %s", errors ? "an expression the configuration passed fails to compile"
                                                 : "out of memory for the computed tags");
    return *out ? 0 : -1;
}

/* Under the lock, after values were stored: the computed tags that read them.
 * Appended, not replaced: the poller and a listen-only bus's actor store on
 * their own threads, and whichever drains the list next (gw_tags_evaluated)
 * publishes them all, so none is lost to the other's store in between. */
static void evaluate(gw_tags_t *t, int64_t now_ms)
{
    if (!t->expr)
        return;
    size_t room = GWTAGS_EVALUATED_MAX - t->n_evaluated;
    size_t n = expr_engine_run(t->expr, now_ms, t->evaluated + t->n_evaluated, room);
    t->n_evaluated += n < room ? n : room;
}

size_t gw_tags_evaluated(gw_tags_t *t, unsigned *out, size_t cap)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->n_evaluated < cap ? t->n_evaluated : cap;
    memcpy(out, t->evaluated, n * sizeof *out);
    t->n_evaluated = 0;
    pthread_mutex_unlock(&t->lock);
    return n;
}

gw_tags_t *gw_tags_new(const config_t *cfg, char *err, size_t errcap)
{
    gw_tags_t *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errcap, "tags: out of memory");
        return NULL;
    }
    if (build(cfg, &t->table, &t->config_device, err, errcap) != 0) {
        free(t);
        return NULL;
    }
    if (build_expr(t->table, &t->expr, err, errcap) != 0) {
        tags_table_free(t->table);
        free(t->config_device);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void gw_tags_free(gw_tags_t *t)
{
    if (!t)
        return;
    if (t->table)
        pthread_mutex_destroy(&t->lock);
    expr_engine_free(t->expr);
    tags_table_free(t->table);
    free(t->config_device);
    free(t);
}

tags_table_t *gw_tags_lock(gw_tags_t *t)
{
    pthread_mutex_lock(&t->lock);
    return t->table;
}

void gw_tags_unlock(gw_tags_t *t)
{
    pthread_mutex_unlock(&t->lock);
}

const tags_table_t *gw_tags_defs(const gw_tags_t *t)
{
    return t->table;
}

size_t gw_tags_count(const gw_tags_t *t)
{
    return tags_table_count(t->table);
}

unsigned gw_tags_config_device(const gw_tags_t *t, const tags_tag_t *tag)
{
    return t->config_device[tag->device];
}

/* What a gateway or slave exception means for the tags of the read. */
static tags_reason_t reason_of(uint8_t code)
{
    if (code == MB_EX_PATH_UNAVAILABLE)
        return TAGS_BAD_PORT_DOWN;
    if (code == MB_EX_TARGET_FAILED)
        return TAGS_BAD_TIMEOUT;
    return TAGS_BAD_EXCEPTION;
}

int gw_tags_apply(gw_tags_t *t, const tags_plan_t *plan, size_t r, const uint8_t *pdu, size_t len,
                 int64_t now_ms)
{
    const tags_read_t *read = tags_plan_read(plan, r);
    bool bits = read->function <= 2;
    size_t want = bits ? (read->count + 7u) / 8u : 2u * read->count;
    uint16_t words[TAGS_MAX_REGISTERS];
    int changed;

    pthread_mutex_lock(&t->lock);
    if (len >= 2 && (pdu[0] & 0x80)) {
        changed = tags_table_fail(t->table, plan, r, reason_of(pdu[1]), pdu[1], now_ms);
    } else if (len < 2 || pdu[1] != len - 2 || (size_t)pdu[1] > want || (!bits && pdu[1] % 2)) {
        changed = tags_table_fail(t->table, plan, r, TAGS_BAD_SHORT, 0, now_ms);
    } else if (bits) {
        changed = tags_table_apply_bits(t->table, plan, r, pdu + 2, pdu[1] == want ? read->count : 8u * pdu[1],
                                        now_ms);
    } else {
        size_t n = pdu[1] / 2u;
        for (size_t i = 0; i < n; i++)
            words[i] = (uint16_t)(pdu[2 + 2 * i] << 8 | pdu[3 + 2 * i]);
        changed = tags_table_apply(t->table, plan, r, words, n, now_ms);
    }
    evaluate(t, now_ms);
    pthread_mutex_unlock(&t->lock);
    return changed;
}

static bool same_tag(const tags_tag_t *a, const char *dev_a, const tags_tag_t *b, const char *dev_b)
{
    return strcmp(a->name, b->name) == 0 && strcmp(dev_a, dev_b) == 0 && a->area == b->area &&
           a->address == b->address && a->in_register == b->in_register && a->bit == b->bit &&
           a->type == b->type && a->count == b->count && a->point == b->point &&
           a->has_decimals == b->has_decimals && a->decimals == b->decimals && a->modicon == b->modicon && a->order == b->order && a->scale == b->scale &&
           a->offset == b->offset && a->deadband == b->deadband && a->writable == b->writable &&
           a->interval_ms == b->interval_ms && a->computed == b->computed && strcmp(a->unit, b->unit) == 0 &&
           strcmp(a->description, b->description) == 0;
}

/* A computed tag's expression, inverse and inverse target the same (or neither computed). */
static bool same_expr(const tags_table_t *a, size_t i, const tags_table_t *b, size_t j)
{
    const char *ea = tags_table_expr(a, i), *eb = tags_table_expr(b, j), *ta = "", *tb = "";
    if (!ea || !eb)
        return !ea && !eb;
    const char *ia = tags_table_inverse(a, i, &ta), *ib = tags_table_inverse(b, j, &tb);
    return strcmp(ea, eb) == 0 && strcmp(ia ? ia : "", ib ? ib : "") == 0 && strcmp(ta, tb) == 0;
}

bool gw_tags_same(const gw_tags_t *t, const tags_table_t *defs)
{
    size_t n = tags_table_count(t->table);
    if (n != (defs ? tags_table_count(defs) : 0))
        return false;
    for (size_t i = 0; i < n; i++) {
        const tags_tag_t *a = tags_table_tag(t->table, i), *b = tags_table_tag(defs, i);
        if (!same_tag(a, tags_table_device_name(t->table, a->device), b,
                      tags_table_device_name(defs, b->device)) || !same_expr(t->table, i, defs, i))
            return false;
    }
    return true;
}

static bool same_def(const tags_table_t *a, size_t i, const tags_table_t *b, size_t j)
{
    const tags_tag_t *x = tags_table_tag(a, i), *y = tags_table_tag(b, j);
    if (!same_expr(a, i, b, j))
        return false;   /* a computed tag whose expression changed starts afresh */
    return same_tag(x, tags_table_device_name(a, x->device), y, tags_table_device_name(b, y->device));
}

/* Whether a device answers where it did: a device moved to another bus or
 * slave id is read from other registers, so its tags' values are not
 * carried (they are the old slave's). A device new or gone: its tags are
 * matched by definition (same_def) alone. */
static bool same_place(const config_t *cfg, const config_t *was, const char *device)
{
    int a = was && device ? config_device_index(cfg, device) : -1;
    int b = was && device ? config_device_index(was, device) : -1;
    return a < 0 || b < 0 ||
           (cfg->devices[a].bus == was->devices[b].bus && cfg->devices[a].slave == was->devices[b].slave);
}

int gw_tags_replace(gw_tags_t *t, const config_t *cfg, const config_t *was, size_t *kept, char *err, size_t errcap)
{
    tags_table_t *fresh;
    unsigned *cd;
    expr_engine_t *expr;
    if (build(cfg, &fresh, &cd, err, errcap) != 0)
        return -1;
    if (build_expr(fresh, &expr, err, errcap) != 0) {
        tags_table_free(fresh);
        free(cd);
        return -1;
    }
    *kept = 0;
    pthread_mutex_lock(&t->lock);
    /* above every number the old table gave, the last ones under this lock */
    if (tags_table_seq_base(fresh) <= tags_table_seq(t->table))
        tags_table_seq_start(fresh, tags_table_seq(t->table) + 1);
    for (size_t i = 0; i < tags_table_count(fresh); i++) {
        int old = tags_table_find(t->table, tags_table_tag(fresh, i)->name);
        const tags_tag_t *g = tags_table_tag(fresh, i);
        if (old >= 0 && same_def(fresh, i, t->table, (size_t)old) &&
            same_place(cfg, was, tags_table_device_name(fresh, g->device)) &&
            tags_table_carry_value(fresh, i, t->table, (size_t)old) == 0)
            (*kept)++;
    }
    tags_table_t *old_table = t->table;
    unsigned *old_cd = t->config_device;
    expr_engine_t *old_expr = t->expr;
    t->table = fresh;
    t->config_device = cd;
    t->expr = expr;
    t->n_evaluated = 0;
    t->generation++;
    pthread_mutex_unlock(&t->lock);
    expr_engine_free(old_expr);
    tags_table_free(old_table);
    free(old_cd);
    return 0;
}

uint32_t gw_tags_generation(const gw_tags_t *t)
{
    return t->generation;
}

int gw_tags_observe(gw_tags_t *t, const char *device, tags_area_t area, uint16_t address, const uint16_t *words,
                   const uint8_t *packed, size_t n, int64_t now_ms)
{
    pthread_mutex_lock(&t->lock);
    int d = tags_table_find_device(t->table, device);
    int moved = d < 0 ? 0 : tags_table_observe(t->table, (size_t)d, area, address, words, packed, n, now_ms);
    evaluate(t, now_ms);
    pthread_mutex_unlock(&t->lock);
    return moved;
}

static void on_poll_answer(void *ctx, const gw_poll_result_t *r)
{
    gw_tags_apply(ctx, r->plan, r->read, r->pdu, r->len, r->wall_ms);
}

gw_poll_subscriber_t gw_tags_poll_subscriber(gw_tags_t *t)
{
    return (gw_poll_subscriber_t){ .answer = on_poll_answer, .ctx = t };
}

/* Here because the engine is the table's (one Lua state, under the lock):
 * the asked words decoded as the computed tag, the inverse run on them, its
 * result encoded by the target's codec (type, scale, range) as any write's
 * value is. */
int gw_tags_inverse(gw_tags_t *t, unsigned tag, const tags_write_t *asked, unsigned *target, tags_write_t *w,
                   char *why, size_t cap)
{
    const tags_tag_t *g = tag < tags_table_count(t->table) ? tags_table_tag(t->table, tag) : NULL;
    tags_value_t v = { .quality = TAGS_GOOD };
    char text[64], msg[TAGS_NOTE_MAX];
    if (!g || !g->computed || !t->expr || !tags_table_inverse(t->table, tag, NULL)) {
        snprintf(why, cap, "the tag is computed (expr) and declares no inverse: its value is its expression's");
        return -ENOENT;
    }
    tags_decode(g, asked->words, &v);
    pthread_mutex_lock(&t->lock);
    int rc = expr_engine_inverse(t->expr, tag, &v, gw_wall_ms(), target, text, sizeof text, msg, sizeof msg);
    pthread_mutex_unlock(&t->lock);
    if (rc < 0) {
        snprintf(why, cap, "inverse: %s", msg);
        return rc;
    }
    const tags_tag_t *tg = tags_table_tag(t->table, *target);
    if (tags_encode_text(tg, text, 0, w, msg, sizeof msg) < 0) {
        snprintf(why, cap, "inverse gave %s for %s: %s", text, tg->name, msg);
        return -ERANGE;
    }
    return 0;
}
