/*
 * gateway/tag_write.c -- the one way a tag's value is written to its device,
 * for every front end that writes tags: HTTP (PUT /tags/NAME, http_tags.c),
 * MQTT json and Sparkplug commands (north.c). The value comes encoded by
 * tags/ (tags_encode_text, tags_encode_number: its type, order, scale and
 * range checks); the front end has checked who may write. This file owns
 * what happens next, so that the front ends cannot disagree about it:
 *
 *   - a computed tag's write through its inverse (through_inverse): the
 *     value becomes the write of one input tag, and from then on it is
 *     that tag's write by every rule below; without an inverse, refused;
 *   - a bounded table of writes in flight (a slot each, until its answer);
 *   - the overlap rule: a write is refused while another write in flight
 *     touches one of its registers and either of them is a read-modify-write
 *     (a bool in a register: the register is read, the bit merged, the
 *     register written). Two such writes would each write back the other's
 *     bit unchanged. HTTP refused overlapping ranges and MQTT only the same
 *     address before; this is HTTP's rule, for both, and one table, so an
 *     HTTP write and an MQTT write of the same register see each other;
 *   - the read-modify-write itself (fc 3 of the register, merge, fc 6);
 *   - the submission (gw_submit) under this file's origin, and the one
 *     outcome per write, on the I/O thread, to the owner's callback;
 *   - the confirmation: with the device's confirm_write (default on), a
 *     write the slave echoed is read back (fc 3 of its registers, fc 1 of
 *     its coils) and the outcome carries what was read, not what was sent:
 *     a slave may clamp 108 to 100 and still echo 108. The tag's poll read
 *     is then asked for at once (poller_poll_tag_now), so the new value
 *     reaches the tag table and MQTT without waiting for its interval. A
 *     read-back that fails leaves the write answered as written, unconfirmed;
 *   - abandonment: an owner that no longer waits (an HTTP client gone)
 *     still gets the outcome, marked abandoned (to count it, not to answer
 *     it); the write is dropped before the line if it is not there yet
 *     (origin_wanted, 0x0B), as a Modbus TCP client's request is, and a
 *     read-modify-write whose read comes back writes nothing.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tag_write {
    uint64_t id;                  /* index | generation << 16; 0: free */
    tag_write_done_fn done;
    bool abandoned;               /* its owner no longer waits: told, but to answer no one */
    void *owner;
    uint64_t cookie;
    unsigned tag, bus, slave;
    unsigned asked;               /* the tag named: a computed one written through its inverse, else tag */
    tags_write_t w;
    bool rmw;                     /* a read-modify-write ... */
    bool reading;                 /* ... whose read is in flight */
    bool confirm;                 /* read back after the write (the device's confirm_write) */
    bool confirming;              /* the read-back is in flight */
} tag_write_t;

struct gw_tag_writes {
    line_origin_t origin;           /* first: the answers' way back */
    gw_t *gw;
    tag_write_t *slots;
    _Atomic uint64_t *live;       /* per slot: its id while its owner waits (read on the bus's thread) */
    unsigned n_slots, in_flight;
    uint64_t generation;
    uint64_t readbacks[3];        /* I/O thread: TAG_READBACK_SAME, _DIFFERS, _FAILED */
};

static tag_write_t *slot_of(gw_tag_writes_t *tw, uint64_t id)
{
    tag_write_t *s = &tw->slots[id & 0xFFFF];
    return (id & 0xFFFF) < tw->n_slots && s->id == id ? s : NULL;
}

static bool registers(const tags_write_t *w)
{
    return w->function == 6 || w->function == 16;
}

/* The overlap rule (above). */
static bool overlaps(const gw_tag_writes_t *tw, unsigned bus, unsigned slave, const tags_write_t *w)
{
    for (unsigned i = 0; i < tw->n_slots; i++) {
        const tag_write_t *o = &tw->slots[i];
        if (o->id && (w->needs_read || o->rmw) && o->bus == bus && o->slave == slave && registers(w) &&
            registers(&o->w) && w->address < o->w.address + o->w.count && o->w.address < w->address + w->count)
            return true;
    }
    return false;
}

/* The slot's next request: the register's read, the write, or the read-back. */
static int submit(gw_tag_writes_t *tw, tag_write_t *s)
{
    line_request_t q = { .origin = &tw->origin, .slave = (uint8_t)s->slave, .bus = (uint8_t)s->bus,
                       .conn_id = s->id, .t_accept_ns = gw_now_ns() };
    if (s->confirming) {
        bool coils = s->w.function == 5 || s->w.function == 15;
        uint8_t pdu[5] = { coils ? 1 : 3, (uint8_t)(s->w.address >> 8), (uint8_t)s->w.address,
                           (uint8_t)(s->w.count >> 8), (uint8_t)s->w.count };
        memcpy(q.pdu, pdu, sizeof pdu);
        q.pdu_len = sizeof pdu;
    } else if (s->w.needs_read) {
        uint8_t pdu[5] = { 3, (uint8_t)(s->w.address >> 8), (uint8_t)s->w.address, 0, 1 };
        memcpy(q.pdu, pdu, sizeof pdu);
        q.pdu_len = sizeof pdu;
    } else {
        int n = tags_write_pdu(&s->w, q.pdu, sizeof q.pdu);
        if (n < 0)
            return MB_EX_ILLEGAL_DATA_VALUE;
        q.pdu_len = (uint16_t)n;
    }
    s->reading = s->w.needs_read;
    return gw_submit(tw->gw, &q);
}

/* Frees the slot, then tells its owner (if it still waits): the owner may
 * begin another write from its callback. */
static void finish(gw_tag_writes_t *tw, tag_write_t *s, tag_write_outcome_t *o)
{
    tag_write_t done = *s;
    atomic_store_explicit(&tw->live[s - tw->slots], 0, memory_order_relaxed);
    s->id = 0;
    tw->in_flight--;
    o->tag = done.tag;
    o->asked = done.asked;
    o->w = &done.w;
    o->abandoned = done.abandoned;
    done.done(done.owner, done.cookie, o);
    /* after the owner's callback, which may have begun another write */
    if (!tw->in_flight && tw->gw->writes_idle)
        tw->gw->writes_idle(tw->gw);
}

/*
 * A computed tag is written through its inverse, here, so that every front
 * end does it alike: the value asked becomes the write of one input tag
 * (gw_tags_inverse), and from there on it is that tag's write, by every rule
 * below (its device, its overlap, its confirmation, its poll at once, which
 * evaluates the computed tag again). Without an inverse: refused, the one
 * rule for every caller.
 */
static int through_inverse(gw_tag_writes_t *tw, unsigned *tag, unsigned *bus, unsigned *slave, tags_write_t *w,
                           char *why, size_t cap)
{
    const tags_table_t *all = gw_tags_defs(tw->gw->tags);
    unsigned target;
    tags_write_t asked = *w;
    if (*tag >= tags_table_count(all) || !tags_table_tag(all, *tag)->computed)
        return TAG_WRITE_QUEUED;
    int rc = gw_tags_inverse(tw->gw->tags, *tag, &asked, &target, w, why, cap);
    if (rc == -ENOENT)
        return TAG_WRITE_COMPUTED;
    if (rc < 0)
        return rc == -EAGAIN ? TAG_WRITE_INVERSE_INPUT : rc == -ERANGE ? TAG_WRITE_INVERSE_RANGE
                                                                       : TAG_WRITE_INVERSE_FAILED;
    const config_device_t *dev = &tw->gw->cfg->devices[gw_tags_config_device(tw->gw->tags, tags_table_tag(all, target))];
    *tag = target;
    *bus = dev->bus;
    *slave = dev->slave;
    return TAG_WRITE_QUEUED;
}

int tag_write_begin(gw_tag_writes_t *tw, unsigned tag, unsigned bus, unsigned slave, const tags_write_t *asked,
                    tag_write_done_fn done, void *owner, uint64_t cookie, char *why, size_t cap)
{
    unsigned i = 0, named = tag;
    tags_write_t inv = *asked;
    const tags_write_t *w = &inv;
    snprintf(why, cap, "%s", "");
    int ir = through_inverse(tw, &tag, &bus, &slave, &inv, why, cap);
    if (ir != TAG_WRITE_QUEUED)
        return ir;
    if (bus < tw->gw->cfg->bus_count && tw->gw->cfg->buses[bus].listen)
        return snprintf(why, cap, "its bus is listen-only (mode = listen): rtugw never writes to it"),
               TAG_WRITE_LISTEN_ONLY;   /* rtugw never writes to a line another master owns */
    while (i < tw->n_slots && tw->slots[i].id)
        i++;
    if (i == tw->n_slots)
        return snprintf(why, cap, "too many writes in flight"), TAG_WRITE_FULL;
    if (overlaps(tw, bus, slave, w))
        return snprintf(why, cap, "a read-modify-write of that register is in flight"), TAG_WRITE_OVERLAP;
    tag_write_t *s = &tw->slots[i];
    const tags_table_t *defs = gw_tags_defs(tw->gw->tags);
    const tags_tag_t *g = tag < tags_table_count(defs) ? tags_table_tag(defs, tag) : NULL;
    /* the tag's own confirm_write, else its device's */
    bool confirm = g && (g->confirm_write != TAGS_CONFIRM_DEVICE
                             ? g->confirm_write == TAGS_CONFIRM_ON
                             : tw->gw->cfg->devices[gw_tags_config_device(tw->gw->tags, g)].confirm_write);
    *s = (tag_write_t){ .id = i | (++tw->generation << 16), .done = done, .owner = owner, .cookie = cookie,
                        .tag = tag, .asked = named, .bus = bus, .slave = slave, .w = *w, .rmw = w->needs_read,
                        .confirm = confirm };
    tw->in_flight++;
    atomic_store_explicit(&tw->live[i], s->id, memory_order_relaxed);
    if (submit(tw, s) != 0) {
        atomic_store_explicit(&tw->live[i], 0, memory_order_relaxed);
        s->id = 0;
        tw->in_flight--;
        return snprintf(why, cap, "the bus refused the request"), TAG_WRITE_UNAVAILABLE;
    }
    return TAG_WRITE_QUEUED;
}

bool tag_write_abandon(gw_tag_writes_t *tw, void *owner, bool (*match)(uint64_t cookie, const void *arg),
                       const void *arg, uint64_t *cookie)
{
    for (unsigned i = 0; i < tw->n_slots; i++) {
        tag_write_t *s = &tw->slots[i];
        if (s->id && !s->abandoned && s->owner == owner && match(s->cookie, arg)) {
            s->abandoned = true;
            atomic_store_explicit(&tw->live[i], 0, memory_order_relaxed);
            *cookie = s->cookie;
            return true;
        }
    }
    return false;
}

void tag_write_read_value(const tags_tag_t *g, const tag_write_outcome_t *o, tags_value_t *v)
{
    *v = (tags_value_t){ .quality = TAGS_GOOD };
    tags_decode(g, o->read_words, v);
}

unsigned tag_writes_in_flight(const gw_tag_writes_t *tw)
{
    return tw ? tw->in_flight : 0;
}

uint64_t tag_writes_readbacks(const gw_tag_writes_t *tw, int result)
{
    return tw && result >= 0 && result < 3 ? tw->readbacks[result] : 0;
}

unsigned tag_writes_capacity(const gw_tag_writes_t *tw)
{
    return tw ? tw->n_slots : 0;
}

/* I/O thread: an answer for slot `id`. */
static void on_answer(void *ctx, uint64_t id, uint32_t unused, const uint8_t *pdu, size_t len)
{
    gw_tag_writes_t *tw = ctx;
    tag_write_t *s = slot_of(tw, id);
    tag_write_outcome_t o = { .pdu = pdu, .len = len };
    (void)unused;
    if (!s)
        return;
    bool exception = len >= 2 && (pdu[0] & 0x80);
    if (s->confirming) {
        /* the write itself was confirmed by its echo: a failed read-back
         * leaves it answered as written, unconfirmed */
        o.pdu = NULL;
        o.len = 0;
        bool coils = s->w.function == 5 || s->w.function == 15;
        size_t want = coils ? (s->w.count + 7u) / 8u : 2u * s->w.count;
        if (!exception && len == 2 + want && pdu[1] == want) {
            o.confirmed = true;
            for (unsigned k = 0; k < s->w.count; k++)
                o.read_words[k] = coils ? (pdu[2 + k / 8] >> (k % 8)) & 1
                                        : (uint16_t)(pdu[2 + 2 * k] << 8 | pdu[3 + 2 * k]);
            /* a slave that holds other than it echoed (a clamp) is worth a counter */
            bool same = memcmp(o.read_words, s->w.words, s->w.count * sizeof *o.read_words) == 0;
            tw->readbacks[same ? TAG_READBACK_SAME : TAG_READBACK_DIFFERS]++;
        } else {
            tw->readbacks[TAG_READBACK_FAILED]++;
        }
        poller_poll_tag_now(tw->gw->poller, s->tag);
    } else if (exception) {
        o.exception = pdu[1];
    } else if (!s->reading && s->confirm && !s->abandoned) {
        s->confirming = true;
        if (submit(tw, s) == 0)
            return;   /* the read-back's answer comes next */
        poller_poll_tag_now(tw->gw->poller, s->tag);
    } else if (s->reading) {
        if (len != 4 || pdu[0] != 3 || pdu[1] != 2) {
            o.malformed_read = true;
        } else if (s->abandoned) {   /* an abandoned write stops here: nothing was written */
            o.unwritten = true;
        } else {
            tags_write_merge(&s->w, (uint16_t)(pdu[2] << 8 | pdu[3]));
            int code = submit(tw, s);
            if (code == 0)
                return;   /* the write's answer comes next */
            o.exception = (uint8_t)code;
        }
    }
    finish(tw, s, &o);
}

/* origin: on the bus actor's thread; the outcome is the I/O thread's. */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_tag_writes_t *tw = (gw_tag_writes_t *)o;
    if (loop_post(tw->gw->loop, on_answer, tw, req->conn_id, 0, pdu, len) != 0)
        gw_log(tw->gw, CONFIG_LOG_ERROR, "tags: cannot queue a tag write's answer (out of memory)");
}

/* origin: on the bus's thread (the line thread by default), before the request goes on the line. */
static bool origin_wanted(line_origin_t *o, const line_request_t *req)
{
    gw_tag_writes_t *tw = (gw_tag_writes_t *)o;
    return atomic_load_explicit(&tw->live[req->conn_id & 0xFFFF], memory_order_relaxed) == req->conn_id;
}

static const line_origin_ops_t tag_write_origin_ops = { "tag-write", origin_answer, origin_wanted };

gw_tag_writes_t *tag_writes_new(gw_t *gw, unsigned slots)
{
    if (slots == 0 || slots > 0xFFFF)
        return NULL;
    gw_tag_writes_t *tw = calloc(1, sizeof *tw);
    if (!tw)
        return NULL;
    tw->origin.ops = &tag_write_origin_ops;
    tw->gw = gw;
    tw->n_slots = slots;
    tw->slots = calloc(slots, sizeof *tw->slots);
    tw->live = calloc(slots, sizeof *tw->live);
    if (!tw->slots || !tw->live) {
        tag_writes_free(tw);
        return NULL;
    }
    return tw;
}

/* After the loop has stopped: answers still to come go nowhere. */
void tag_writes_free(gw_tag_writes_t *tw)
{
    if (!tw)
        return;
    free(tw->slots);
    free(tw->live);
    free(tw);
}
