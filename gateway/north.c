/*
 * gateway/north.c -- the MQTT client (north/) in the daemon: a front end
 * like tcp.c, on the I/O thread.
 *
 * Out: after each poll answer the poller hands the values of each of the
 * read's groups here (gw_north_poll_answer, on the poller actor's thread); they
 * cross to the I/O thread with loop_post, so the poller never waits on the
 * network, and become named values of the group's device: tag POLLNAME.N
 * is register (or bit) N of the group. That naming is this adapter's, and
 * the tags work replaces it. The items are defined to north like tags
 * (gw_north_define_devices, poll_item), at start and after a reload that
 * changed the groups, so a removed group leaves its device's set. A device is online while its polls are
 * answered (a slave exception is an answer); a timeout or a port that is
 * down takes it offline; both are published as they happen.
 *
 * Tags (tags.csv) go out typed: after each poll answer the poller hands the
 * indices of the read's tags here (gw_north_tags_answer), in chunks that fit
 * a loop_post; the I/O thread marks them pending. A device's poll is every
 * read of its tags at one interval (the poller spreads those reads over the
 * interval); when the last of them has answered, the poller says so on the
 * read's last chunk, and the I/O thread reads the values of that device's
 * pending tags of that interval from the live table under its lock and
 * publishes them as one message: publish = change sends one message per
 * device per poll with every value that changed, not one per read. The
 * chunks of one read cannot interleave with another's: there is one poller
 * actor, so its posts come from one thread at a time and loop_post keeps
 * their order. Each device's tags are announced to north at start
 * (north_define_device: type, unit, writable), and again after a reload
 * replaced the tag table (gw_north_tags_changed). Chunks carry the table's
 * generation: one posted before a reload names indices of the old table and
 * is dropped, and the reload clears what was pending.
 *
 * In: a write names a device and a tag. A tag of tags.csv is encoded by the
 * tag codec (type, order, scale: tags_encode_text) and written through
 * tag_write.c, the one way a tag is written for HTTP, MQTT and Sparkplug
 * (its table of writes in flight, its overlap rule, the read-modify-write of
 * a bool in a register); its outcome becomes the write's answer
 * (north_write_done). Otherwise the tag is POLLNAME.N and the group says
 * the table and the address: holding registers take FC 6 (one value) or FC
 * 16 (a list), coils FC 5; inputs are refused. That request goes to the
 * device's bus with this file's own origin and exactly one answer comes
 * back through it.
 *
 * The session: north_session.c starts it, and replaces or stops it when a
 * reload changes [mqtt]; this adapter outlives it (the daemon's life), so
 * the threads that post here hold one pointer; while no session runs they
 * see gn->on false and post nothing, and what was posted before is dropped
 * here (gn->north NULL).
 */
#include "gateway/gateway.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "gateway/north_internal.h"

/* A group's values cross to the I/O thread as b = group | generation | good |
 * exception: a group index posted before a reload changed the groups would
 * name another group (or none) after it, so its generation goes along. */
#define POLL_GROUP_SHIFT 16
#define POLL_GROUP_MASK 0xffffu    /* CONFIG_MAX_POLLS (16384) fits */
#define POLL_GEN_SHIFT 9
#define POLL_GEN_MASK 0x7fu

/* ---- out: poll answers --------------------------------------------------------------- */

/* Why a group has no values, as north publishes it. */
static const char *poll_error(uint8_t exception, char *buf, size_t cap)
{
    if (exception == MB_EX_TARGET_FAILED)
        return "timeout";
    if (exception == MB_EX_PATH_UNAVAILABLE)
        return "unavailable";
    if (exception == 0)
        return "bad answer";
    snprintf(buf, cap, "exception %02X", exception);
    return buf;
}

static void device_state(gw_north_t *gn, unsigned device, bool up, const char *reason, uint64_t t_ms)
{
    if (gn->device_up[device] == (signed char)up)
        return;
    gn->device_up[device] = (signed char)up;
    gn->m->device_status(gn->north, gn->gw->cfg->devices[device].name, up, reason, t_ms);
}

/* On the I/O thread: a = wall time (ms), b = group << 16 | generation << 9 |
 * good << 8 | exception, data = the group's items (registers big-endian, or
 * bits packed 8 a byte). */
/* The revision north puts on what it publishes (MQTT v5): the file's at
 * start, then the last reload's. I/O thread (where reloads are reported). */
static void sync_revision(gw_north_t *gn)
{
    const char *now = gn->gw->last_reload.revision;
    if (now[0] && strcmp(now, gn->revision) != 0) {
        snprintf(gn->revision, sizeof gn->revision, "%s", now);
        gn->m->set_revision(gn->north, gn->revision);
    }
}

static void on_poll(void *ctx, uint64_t t_ms, uint32_t b, const uint8_t *data, size_t len)
{
    gw_north_t *gn = ctx;
    const config_t *cfg = gn->gw->cfg;
    unsigned group = (b >> POLL_GROUP_SHIFT) & POLL_GROUP_MASK;
    bool good = (b >> 8) & 1;
    uint8_t exception = (uint8_t)b;
    char why[32];

    if (!gn->north || group >= cfg->poll_count ||
        ((b >> POLL_GEN_SHIFT) & POLL_GEN_MASK) != (gn->polls_generation & POLL_GEN_MASK))
        return;   /* [mqtt] off, or a group of before a reload */
    const config_poll_t *g = &cfg->polls[group];
    const char *error = good ? NULL : poll_error(exception, why, sizeof why);
    for (unsigned i = 0; i < g->count; i++) {
        north_value_t *v = &gn->values[i];
        snprintf(gn->names[i], sizeof gn->names[i], "%s.%u", g->name, i);
        *v = (north_value_t){ .tag = gn->names[i], .error = error };
        if (g->function <= 2) {   /* a bit is a bool, with or without a value: as it was defined */
            v->kind = NORTH_BOOL;
            v->type = NORTH_TYPE_BOOL;
        }
        if (good && g->function >= 3 && 2 * i + 1 < len) {
            v->number = (double)(data[2 * i] << 8 | data[2 * i + 1]);
        } else if (good && g->function <= 2 && i / 8 < len) {
            v->flag = (data[i / 8] >> (i % 8)) & 1;
        } else if (good) {
            v->error = "bad answer";
        }
    }
    bool reachable = good || (exception && exception != MB_EX_TARGET_FAILED && exception != MB_EX_PATH_UNAVAILABLE);
    device_state(gn, g->device, reachable, reachable ? NULL : error, t_ms);
    sync_revision(gn);
    gn->m->publish(gn->north, cfg->devices[g->device].name, t_ms, gn->values, g->count);
}

void gw_north_poll_answer(gw_north_t *gn, unsigned group, bool good, uint8_t exception, const uint16_t *values,
                         unsigned count, unsigned function)
{
    uint8_t data[RTU_MAX_ADU];
    size_t len = 0;
    if (good && function >= 3) {
        for (unsigned i = 0; i < count && len + 2 <= sizeof data; i++) {
            data[len++] = (uint8_t)(values[i] >> 8);
            data[len++] = (uint8_t)values[i];
        }
    } else if (good) {
        len = (count + 7) / 8 <= sizeof data ? (count + 7) / 8 : sizeof data;
        memset(data, 0, len);
        for (unsigned i = 0; i < count && i / 8 < len; i++)
            data[i / 8] |= (uint8_t)((values[i] & 1) << (i % 8));
    }
    _Static_assert(CONFIG_MAX_POLLS <= POLL_GROUP_MASK + 1, "a group index fits its bits");
    uint32_t b = (group & POLL_GROUP_MASK) << POLL_GROUP_SHIFT | (gn->polls_generation & POLL_GEN_MASK) << POLL_GEN_SHIFT |
                 (unsigned)good << 8 | exception;
    if (loop_post(gn->gw->loop, on_poll, gn, gn->m->now_ms(), b, data, len) != 0)
        gw_log(gn->gw, CONFIG_LOG_ERROR, "mqtt: cannot hand poll values to the I/O thread (out of memory)");
}

/* ---- the poller's subscriber ------------------------------------------------------ */

/* The read's groups' values (cut from the answer as the cache cuts them),
 * then its tags' values (read back from the tag table on the I/O thread). */
static void on_poll_result(void *ctx, const gw_poll_result_t *r)
{
    gw_north_t *gn = ctx;
    if (!atomic_load_explicit(&gn->on, memory_order_acquire))
        return;   /* [mqtt] off: the I/O thread would drop it anyway */
    const tags_read_t *read = tags_plan_read(r->plan, r->read);
    size_t n;
    const tags_member_t *m = tags_plan_members(r->plan, r->read, &n);
    uint16_t values[GW_GROUP_ITEMS_MAX];
    for (size_t k = 0; k < n; k++) {
        if (!m[k].is_group)
            continue;
        unsigned count = m[k].count <= GW_GROUP_ITEMS_MAX ? m[k].count : GW_GROUP_ITEMS_MAX;
        for (unsigned i = 0; r->good && i < count; i++)
            values[i] = poll_item(r, m[k].address - read->address + i);
        gw_north_poll_answer(gn, m[k].index, r->good, r->exception ? r->pdu[1] : 0, values, count, read->function);
    }
    gw_north_tags_answer(gn, r->plan, r->read, r->on_demand, r->wall_ms);
    /* the computed tags this answer's values re-evaluated (the tag table's
     * subscriber ran before this one): each goes out with its device's tags */
    unsigned computed[GWTAGS_EVALUATED_MAX];
    size_t nc = gw_tags_evaluated(gn->gw->tags, computed, GWTAGS_EVALUATED_MAX);
    for (size_t k = 0; k < nc; k++)
        gw_north_tags_heard(gn, &computed[k], 1, r->wall_ms);
}

gw_poll_subscriber_t gw_north_poll_subscriber(gw_north_t *gn)
{
    return (gw_poll_subscriber_t){ .answer = on_poll_result, .ctx = gn };
}

/* ---- out: tags ------------------------------------------------------------------------ */

#define CHUNK_TAGS (RTU_MAX_ADU / sizeof(uint32_t))
#define CHUNK_LAST 0x80000000u
#define POLL_DONE 0x40000000u
#define CHUNK_GEN_SHIFT 16
#define CHUNK_GEN_MASK 0x3fffu   /* bits 16-29: below POLL_DONE and CHUNK_LAST */

/* The north type a tag is published as: its own for whole numbers read as
 * they are, a double once scale or offset make it an engineering value. The
 * narrower types go as the smallest north type that holds every value (BCD
 * 9999 in a uint16, a float16 exactly in a float); fixed-point is a decimal,
 * a double. */
static north_type_t north_type_of(const tags_tag_t *g)
{
    bool scaled = g->scale != 1 || g->offset != 0;
    switch (g->type) {
    case TAGS_BOOL: return NORTH_TYPE_BOOL;
    case TAGS_INT16: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_INT16;
    case TAGS_UINT16: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_UINT16;
    case TAGS_INT32: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_INT32;
    case TAGS_UINT32: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_UINT32;
    case TAGS_INT64: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_INT64;
    case TAGS_UINT64: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_UINT64;
    case TAGS_FLOAT32: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_FLOAT;
    case TAGS_FLOAT64: return NORTH_TYPE_DOUBLE;
    case TAGS_BCD16: case TAGS_UINT8H: case TAGS_UINT8L: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_UINT16;
    case TAGS_BCD32: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_UINT32;
    case TAGS_INT8H: case TAGS_INT8L: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_INT16;
    case TAGS_FLOAT16: return scaled ? NORTH_TYPE_DOUBLE : NORTH_TYPE_FLOAT;
    case TAGS_FIXED16: case TAGS_UFIXED16: case TAGS_FIXED32: case TAGS_UFIXED32: return NORTH_TYPE_DOUBLE;
    case TAGS_STRING:
    case TAGS_RAW: return NORTH_TYPE_STRING;   /* raw: its words as hex text */
    }
    return NORTH_TYPE_AUTO;
}

static const char *tag_error(const tags_value_t *v, char *buf, size_t cap)
{
    switch (v->reason) {
    case TAGS_BAD_NONE: return NULL;
    case TAGS_BAD_TIMEOUT: return "timeout";
    case TAGS_BAD_PORT_DOWN: return "unavailable";
    case TAGS_BAD_SHORT: return "bad answer";
    case TAGS_BAD_DATA: return "bad data";
    case TAGS_BAD_NOT_READ: return "not read yet";
    case TAGS_BAD_EXCEPTION: snprintf(buf, cap, "exception %02X", v->exception); return buf;
    case TAGS_BAD_EXPR: return "expression failed";   /* /tags has Lua's why */
    case TAGS_BAD_INPUT: return "input bad";
    }
    return "bad";
}

/* One tag's value as north takes it; its text (string, raw) goes to *text. */
void gw_north_tag_value(const tags_tag_t *g, const tags_value_t *v, north_value_t *out, char *err, size_t errcap,
                      char **text, char *text_end)
{
    *out = (north_value_t){ .tag = g->name, .unit = g->unit[0] ? g->unit : NULL, .type = north_type_of(g),
                            .stale = v->quality == TAGS_STALE, .has_deadband = true, .deadband = g->deadband };
    out->error = v->quality == TAGS_BAD ? tag_error(v, err, errcap) : NULL;
    if (out->type == NORTH_TYPE_BOOL) {
        out->kind = NORTH_BOOL;
        out->flag = v->raw.b;
    } else if (out->type == NORTH_TYPE_STRING) {
        out->kind = NORTH_STRING;
        out->text = "";
        if (!out->error && text_end - *text > 1) {
            int n = tags_format(g, v, *text, (size_t)(text_end - *text));
            if (n >= 0) {
                out->text = *text;
                *text += n + 1;
            } else {
                out->error = "value too long";
            }
        }
    } else {
        out->kind = NORTH_NUMBER;
        out->number = v->eng;
        out->i = v->raw.i;
        out->u = v->raw.u;
        /* the one formatter's text (tags_format), so MQTT json prints what
         * /tags prints, and Sparkplug's float or double carries the value
         * that text says (1450.3 for 14503 x 0.1, not 1450.3000000000002; a
         * tag's decimals rounded). Past the arena (it holds a read's worth),
         * north formats the number itself. */
        if (!out->error && text_end - *text > 1) {
            int n = tags_format(g, v, *text, (size_t)(text_end - *text));
            if (n >= 0) {
                out->number_text = *text;
                *text += n + 1;
                if ((out->type == NORTH_TYPE_FLOAT || out->type == NORTH_TYPE_DOUBLE) && isfinite(v->eng))
                    out->number = strtod(out->number_text, NULL);
            }
        }
    }
}

/* On the I/O thread: the read's tags are all here; publish them. */
static void publish_batch(gw_north_t *gn, uint64_t t_ms, const uint32_t *idx, size_t n)
{
    gw_t *gw = gn->gw;
    const tags_table_t *defs = gw_tags_defs(gw->tags);
    char *text = gn->text, *text_end = gn->text + GWNORTH_TEXT_BYTES;

    if (n == 0 || n > GWNORTH_BATCH)
        return;
    for (size_t k = 0; k < n; k++)
        if (idx[k] >= tags_table_count(defs))
            return;   /* cannot happen: chunks of an older table are dropped in on_tags */
    const tags_tag_t *first = tags_table_tag(defs, idx[0]);
    unsigned device = gw_tags_config_device(gw->tags, first);
    /* Whether the device answers is what its newest answer says: a poll's
     * message can hold values read before the port went and the failure
     * after it, and an older good value must not bring a device back that
     * a newer failure took down (a DBIRTH after its DDEATH, then a second
     * DDEATH). The values of the newest answer's read decide. */
    bool reachable = false, any_answer = false;
    int64_t newest_ms = INT64_MIN;
    const tags_table_t *t = gw_tags_lock(gw->tags);
    for (size_t k = 0; k < n; k++) {
        const tags_tag_t *g = tags_table_tag(defs, idx[k]);
        tags_value_t v;
        tags_table_value(t, idx[k], (int64_t)t_ms, &v);
        gw_north_tag_value(g, &v, &gn->values[k], gn->errors[k], sizeof gn->errors[k], &text, text_end);
        if (v.reason != TAGS_BAD_NOT_READ && !g->computed) {   /* a computed tag says nothing of the device */
            bool answers = v.quality != TAGS_BAD || v.reason == TAGS_BAD_EXCEPTION || v.reason == TAGS_BAD_SHORT ||
                           v.reason == TAGS_BAD_DATA;
            if (!any_answer || v.time_ms > newest_ms) {
                newest_ms = v.time_ms;
                reachable = answers;
            } else if (v.time_ms == newest_ms) {
                reachable |= answers;
            }
            any_answer = true;
        }
    }
    if (any_answer)
        device_state(gn, device, reachable, reachable ? NULL : gn->values[0].error, t_ms);
    sync_revision(gn);
    gn->m->publish(gn->north, gw->cfg->devices[device].name, t_ms, gn->values, n);
    gw_tags_unlock(gw->tags);   /* string values point into the table's words until here */
}

/* The poll of the device and interval of tag `one` is complete: its pending
 * tags go out, in one message (more only past GWNORTH_BATCH values or the
 * text arena: a read's worth, 125 registers, is far below either). */
static void publish_poll(gw_north_t *gn, uint64_t t_ms, uint32_t one)
{
    const tags_table_t *defs = gw_tags_defs(gn->gw->tags);
    const tags_tag_t *g1 = tags_table_tag(defs, one);
    size_t n_dev, n = 0, text = 0;
    const unsigned *tags = tags_table_device_tags(defs, g1->device, &n_dev);
    for (size_t k = 0; k < n_dev; k++) {
        const tags_tag_t *g = tags_table_tag(defs, tags[k]);
        if (!gn->pending[tags[k]] || g->interval_ms != g1->interval_ms)
            continue;
        gn->pending[tags[k]] = 0;
        size_t need = g->type == TAGS_STRING || g->type == TAGS_RAW ? 6u * g->count + 8 : 64;
        if (n == GWNORTH_BATCH || text + need > GWNORTH_TEXT_BYTES) {
            publish_batch(gn, t_ms, gn->gathered, n);
            n = text = 0;
        }
        gn->gathered[n++] = tags[k];
        text += need;
    }
    publish_batch(gn, t_ms, gn->gathered, n);
}

/* On the I/O thread: a = wall time, b = count | generation << 16 | POLL_DONE |
 * CHUNK_LAST, data = tag indices. */
static void on_tags(void *ctx, uint64_t t_ms, uint32_t b, const uint8_t *data, size_t len)
{
    gw_north_t *gn = ctx;
    size_t count = len / sizeof(uint32_t);
    if (!gn->north)
        return;   /* [mqtt] off (a reload removed it): posted before, nobody to publish to */
    if (((b >> CHUNK_GEN_SHIFT) & CHUNK_GEN_MASK) != (gw_tags_generation(gn->gw->tags) & CHUNK_GEN_MASK))
        return;   /* indices of a table since replaced */
    uint32_t idx = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(&idx, data + i * sizeof idx, sizeof idx);
        if (idx < gn->cap_gathered)
            gn->pending[idx] = 1;
    }
    if ((b & CHUNK_LAST) && (b & POLL_DONE) && count && idx < gn->cap_gathered)
        publish_poll(gn, t_ms, idx);
}

/* On the poller's thread: which reads make each device's poll (same device,
 * same interval, with tags), for a plan not seen before. */
static int cycle_rebuild(gw_north_t *gn, const tags_plan_t *plan)
{
    size_t n = tags_plan_read_count(plan);
    free(gn->cycle_first);
    free(gn->cycle_left);
    free(gn->cycle_seen);
    gn->cycle_first = calloc(n + 1, sizeof *gn->cycle_first);
    gn->cycle_left = calloc(n + 1, sizeof *gn->cycle_left);
    gn->cycle_seen = calloc(n + 1, 1);
    gn->cycle_plan = NULL;
    if (!gn->cycle_first || !gn->cycle_left || !gn->cycle_seen)
        return -ENOMEM;
    for (size_t r = 0; r < n; r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        size_t nm, tags = 0;
        const tags_member_t *m = tags_plan_members(plan, r, &nm);
        for (size_t k = 0; k < nm; k++)
            tags += !m[k].is_group;
        gn->cycle_first[r] = UINT_MAX;
        if (!tags)
            continue;
        /* reads come sorted by device, table, interval: the first match is the poll's first read */
        for (size_t q = 0; q <= r && gn->cycle_first[r] == UINT_MAX; q++) {
            const tags_read_t *o = tags_plan_read(plan, q);
            if (gn->cycle_first[q] != UINT_MAX && o->interval_ms == read->interval_ms &&
                strcmp(o->device, read->device) == 0)
                gn->cycle_first[r] = gn->cycle_first[q];
        }
        if (gn->cycle_first[r] == UINT_MAX)
            gn->cycle_first[r] = (unsigned)r;
        gn->cycle_left[gn->cycle_first[r]]++;
    }
    gn->cycle_plan = plan;
    gn->cycle_reads = n;
    return 0;
}

/* On the poller's thread: read r answered (or failed); true when it was the
 * last of its device's poll not answered yet, which starts the next poll. A
 * read skipped for an overrun leaves its poll open until it answers: the two
 * polls then go out as one message, never as two halves. */
static bool cycle_answered(gw_north_t *gn, const tags_plan_t *plan, size_t r)
{
    if ((plan != gn->cycle_plan || r >= gn->cycle_reads) && cycle_rebuild(gn, plan) != 0)
        return true;   /* out of memory: each read its own message, as before */
    unsigned first = gn->cycle_first[r];
    if (first == UINT_MAX)
        return true;
    if (!gn->cycle_seen[r]) {
        gn->cycle_seen[r] = 1;
        gn->cycle_left[first]--;
    }
    if (gn->cycle_left[first] > 0)
        return false;
    for (size_t q = first; q < gn->cycle_reads; q++)
        if (gn->cycle_first[q] == first) {
            gn->cycle_seen[q] = 0;
            gn->cycle_left[first]++;
        }
    return true;
}

/* The tags of one device, in chunks to the I/O thread, which publishes them
 * at the last: done says that chunk completes the device's poll. */
static void post_tags(gw_north_t *gn, const tags_member_t *m, const unsigned *idx, size_t n, bool done,
                      int64_t wall_ms)
{
    size_t sent = 0;
    uint32_t chunk[CHUNK_TAGS];
    size_t k = 0, tags = 0;

    for (size_t i = 0; i < n; i++)
        tags += m ? !m[i].is_group : 1;
    for (size_t i = 0; i < n && tags; i++) {
        if (m && m[i].is_group)
            continue;
        chunk[k++] = m ? m[i].index : idx[i];
        sent++;
        if (k == CHUNK_TAGS || sent == tags) {
            uint32_t b = (uint32_t)k | (sent == tags ? CHUNK_LAST | (done ? POLL_DONE : 0) : 0) |
                         (gw_tags_generation(gn->gw->tags) & CHUNK_GEN_MASK) << CHUNK_GEN_SHIFT;
            if (loop_post(gn->gw->loop, on_tags, gn, (uint64_t)wall_ms, b, chunk, k * sizeof chunk[0]) != 0)
                gw_log(gn->gw, CONFIG_LOG_ERROR, "mqtt: cannot hand tag values to the I/O thread (out of memory)");
            k = 0;
        }
    }
}

void gw_north_tags_answer(gw_north_t *gn, const tags_plan_t *plan, size_t r, bool on_demand, int64_t wall_ms)
{
    size_t n, tags = 0;
    const tags_member_t *m = tags_plan_members(plan, r, &n);
    for (size_t i = 0; i < n; i++)
        tags += !m[i].is_group;
    /* a read asked out of its rhythm (a confirmed write's read back) is no
     * part of the device's poll: its values go out at once, with whatever
     * of the poll is pending, and the poll's count is left as it was */
    bool done = tags && (on_demand || cycle_answered(gn, plan, r));
    post_tags(gn, m, NULL, n, done, wall_ms);
}

/* A listen-only bus has no poll of its own: what is heard goes out at once. */
void gw_north_tags_heard(gw_north_t *gn, const unsigned *tags, size_t n, int64_t wall_ms)
{
    if (!atomic_load_explicit(&gn->on, memory_order_acquire))
        return;
    post_tags(gn, NULL, tags, n, true, wall_ms);
}

/* A device's poll-group items, named as on_poll names them (POLLNAME.N),
 * into list (names holds their names; north copies both): defined like
 * tags, so that a group a reload removes or renames leaves its device's set
 * (Sparkplug: DDEATH, then a DBIRTH without them), and typed as on_poll
 * hands them over (bits bool, registers numbers) so that their first value
 * is no new datatype (no rebirth). Returns how many. */
static size_t define_poll_items(const config_t *cfg, unsigned device, north_metric_def_t *list,
                                char (*names)[NORTH_NAME_MAX])
{
    size_t n = 0;
    for (unsigned p = 0; p < cfg->poll_count; p++) {
        const config_poll_t *g = &cfg->polls[p];
        for (unsigned i = 0; g->device == device && i < g->count; i++, n++) {
            snprintf(names[n], sizeof names[n], "%s.%u", g->name, i);
            list[n] = (north_metric_def_t){ .tag = names[n], .poll_item = true,
                                            .type = g->function <= 2 ? NORTH_TYPE_BOOL : NORTH_TYPE_AUTO };
        }
    }
    return n;
}

/* At start, and after a reload changed the tags or the poll groups: each
 * device's tags, poll-group items and publish mode, before any value. */
int gw_north_define_devices(gw_north_t *gn)
{
    const config_t *cfg = gn->gw->cfg;
    const tags_table_t *defs = gw_tags_defs(gn->gw->tags);
    size_t items = 0;
    for (unsigned p = 0; p < cfg->poll_count; p++)
        items += cfg->polls[p].count;
    north_metric_def_t *list = calloc(tags_table_count(defs) + items + 1, sizeof *list);
    char (*names)[NORTH_NAME_MAX] = calloc(items + 1, sizeof *names);
    int rc = list && names ? 0 : -1;
    for (unsigned c = 0; c < cfg->device_count && rc == 0; c++) {
        const config_device_t *dev = &cfg->devices[c];
        int d = tags_table_find_device(defs, dev->name);
        size_t n = 0;
        const unsigned *idx = d >= 0 ? tags_table_device_tags(defs, (size_t)d, &n) : NULL;
        for (size_t k = 0; k < n; k++) {
            const tags_tag_t *g = tags_table_tag(defs, idx[k]);
            list[k] = (north_metric_def_t){ .tag = g->name, .type = north_type_of(g),
                                            .unit = g->unit[0] ? g->unit : NULL, .writable = g->writable };
        }
        n += define_poll_items(cfg, c, list + n, names);   /* names: reused per device */
        north_device_opts_t opts = { (north_publish_mode_t)dev->mqtt_publish, dev->mqtt_interval_ms };
        if ((n || dev->mqtt_publish >= 0) &&
            gn->m->define_device(gn->north, dev->name, list, n, dev->mqtt_publish >= 0 ? &opts : NULL) != 0)
            rc = -1;
    }
    free(list);
    free(names);
    if (rc == 0)
        gn->m->define_done(gn->north);   /* what was not named above leaves (Sparkplug: DDEATH, DBIRTH) */
    return rc;
}

/* A reload replaced the poll groups (the I/O thread): values posted before
 * it are dropped (the generation), and the new groups' items are the
 * devices' sets from now on. */
void gw_north_polls_changed(gw_north_t *gn)
{
    gn->polls_generation++;
    if (gn->north && gw_north_define_devices(gn) != 0)
        gw_log(gn->gw, CONFIG_LOG_ERROR, "SIGHUP: mqtt: cannot announce the new poll groups (out of memory)");
}

int gw_north_tags_changed(gw_north_t *gn)
{
    unsigned devices = gn->gw->cfg->device_count;
    if (devices > gn->n_devices) {   /* devices appended: not known yet */
        signed char *up = realloc(gn->device_up, devices + 1);
        if (!up)
            return -1;
        memset(up + gn->n_devices, -1, devices + 1 - gn->n_devices);
        gn->device_up = up;
        gn->n_devices = devices;
    }
    size_t n = tags_table_count(gw_tags_defs(gn->gw->tags));
    uint32_t *g = realloc(gn->gathered, (n + 1) * sizeof *g);
    if (!g)
        return -1;
    gn->gathered = g;
    uint8_t *p = realloc(gn->pending, n + 1);
    if (!p)
        return -1;
    memset(p, 0, n + 1);   /* indices of the old table: their chunks are dropped from now on */
    gn->pending = p;
    gn->cap_gathered = n;
    return gn->north ? gw_north_define_devices(gn) : 0;   /* off: the next session's start announces them */
}

/* ---- life, and /metrics ------------------------------------------------------------------ */

gw_north_t *gw_north_new(gw_t *gw, char *err, size_t errcap)
{
    gw_north_t *gn = calloc(1, sizeof *gn);
    if (!gn || !(gn->device_up = malloc(gw->cfg->device_count + 1)) ||
        !(gn->gathered = calloc(tags_table_count(gw_tags_defs(gw->tags)) + 1, sizeof *gn->gathered)) ||
        !(gn->pending = calloc(tags_table_count(gw_tags_defs(gw->tags)) + 1, 1))) {
        snprintf(err, errcap, "mqtt: out of memory");
        gw_north_free(gn);
        return NULL;
    }
    memset(gn->device_up, -1, gw->cfg->device_count + 1);
    gn->n_devices = gw->cfg->device_count;
    gn->cap_gathered = tags_table_count(gw_tags_defs(gw->tags));
    gn->origin.ops = &gw_north_origin_ops;
    gn->gw = gw;
    if (gw->opt.config_path)
        config_file_revision(gw->opt.config_path, gn->revision);
    if (gw->cfg->mqtt_enabled && gw_north_session_start(gn, &gw->cfg->mqtt, err, errcap) != 0) {
        gw_north_free(gn);
        return NULL;
    }
    return gn;
}

void gw_north_free(gw_north_t *gn)
{
    if (!gn)
        return;
    gw_north_session_stop(gn);
    if (gn->ev_swap)
        event_free(gn->ev_swap);
    free(gn->device_up);
    free(gn->values);
    free(gn->names);
    free(gn->errors);
    free(gn->text);
    free(gn->gathered);
    free(gn->pending);
    free(gn->cycle_first);
    free(gn->cycle_left);
    free(gn->cycle_seen);
    free(gn);
}

void gw_north_metrics_text(gw_north_t *gn, struct evbuffer *b)
{
    north_stats_t st;
    if (!gn || !gn->north)
        return;
    gn->m->get_stats(gn->north, &st);
    static const struct { const char *name, *help; size_t off; bool gauge; } defs[] = {
        { "connected", "1 while the MQTT session is up", offsetof(north_stats_t, connected), true },
        { "published", "Publications handed to the broker connection (resends included)", offsetof(north_stats_t, published), false },
        { "acknowledged", "QoS 1 publications acknowledged by the broker", offsetof(north_stats_t, acknowledged), false },
        { "buffered", "Publications in memory waiting for their PUBACK or a connection", offsetof(north_stats_t, buffered), true },
        { "buffered_bytes", "Bytes of the publications in memory", offsetof(north_stats_t, buffered_bytes), true },
        { "spooled", "Publications in the disk spool not yet acknowledged", offsetof(north_stats_t, spooled), true },
        { "spool_bytes", "Bytes of the disk spool", offsetof(north_stats_t, spool_bytes), true },
        { "dropped", "Publications lost: buffer or spool full, or QoS 0 while disconnected", offsetof(north_stats_t, dropped), false },
        { "connects", "MQTT sessions established", offsetof(north_stats_t, connects), false },
        { "reconnects", "Connection attempts after a failure or a lost session", offsetof(north_stats_t, reconnects), false },
        { "connect_failures", "Connection attempts that failed", offsetof(north_stats_t, connect_failures), false },
        { "values", "Values handed to the MQTT client", offsetof(north_stats_t, values), false },
        { "seq", "The last data sequence number", offsetof(north_stats_t, seq), true },
        { "write_requests", "Write requests received", offsetof(north_stats_t, write_requests), false },
        { "write_ok", "Writes answered with success", offsetof(north_stats_t, write_ok), false },
        { "write_errors", "Writes answered with an error", offsetof(north_stats_t, write_errors), false },
        { "write_malformed", "Write requests malformed (not JSON, a field wrong, too large)", offsetof(north_stats_t, write_malformed), false },
        { "spool_write_failures", "Publications the disk spool could not write (disk full, I/O error)", offsetof(north_stats_t, spool_write_failures), false },
        { "spool_damaged", "Damaged spool records passed over, and acked marks refused", offsetof(north_stats_t, spool_damaged), false },
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        const char *suffix = defs[i].gauge ? "" : "_total";
        uint64_t v;
        memcpy(&v, (const char *)&st + defs[i].off, sizeof v);
        evbuffer_add_printf(b, "# HELP rtugw_mqtt_%s%s %s\n# TYPE rtugw_mqtt_%s%s %s\nrtugw_mqtt_%s%s %llu\n",
                            defs[i].name, suffix, defs[i].help, defs[i].name, suffix,
                            defs[i].gauge ? "gauge" : "counter", defs[i].name, suffix, (unsigned long long)v);
    }
}
