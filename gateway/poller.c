/*
 * gateway/poller.c -- the poller actor: poll groups become reads on
 * periodic timers, and their answers go into the register cache.
 *
 * Groups on the same device, function and interval whose address ranges
 * touch or overlap are merged into one read, as long as the merged range
 * stays within what one request may ask (125 registers, 2000 bits): ten
 * groups of ten adjacent registers cost one transaction on the line, not
 * ten. Each group keeps its own cache entry, cut from the read's answer.
 *
 * A read whose previous request has not been answered when its timer fires
 * skips that round (counted as an overrun on each of its groups) rather
 * than queueing a second copy: a slow slave gets fewer polls, never a
 * growing backlog.
 */
#include "gateway/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum poller_msg { POLLER_MSG_TICK = 1, POLLER_MSG_ANSWER };

/* An answer on its way from a bus to the poller actor. */
typedef struct poll_answer {
    uint64_t t_req_ns;     /* when the read was submitted */
    uint32_t seq;          /* the read's index */
    uint16_t pdu_len;
    uint8_t pdu[RTU_MAX_PDU];
} poll_answer_t;

typedef struct poll_read {
    unsigned device, function, address, count, interval_ms;
    unsigned first, n;     /* members: order[first .. first + n) */
    bool outstanding;
} poll_read_t;

struct gw_poller {
    gw_origin_t origin;    /* first: the answers' way back */
    gw_t *gw;
    actor_ref_t self;
    poll_read_t *reads;
    unsigned n_reads;
    unsigned *order;       /* group indices, grouped by read */
};

unsigned poller_read_of(const gw_poller_t *p, unsigned group)
{
    for (unsigned r = 0; r < p->n_reads; r++)
        for (unsigned m = 0; m < p->reads[r].n; m++)
            if (p->order[p->reads[r].first + m] == group)
                return r;
    return 0;
}

unsigned poller_read_count(const gw_poller_t *p)
{
    return p ? p->n_reads : 0;
}

static int by_key(const void *a, const void *b, void *ctx)
{
    const config_t *cfg = ctx;
    const config_poll_t *x = &cfg->polls[*(const unsigned *)a];
    const config_poll_t *y = &cfg->polls[*(const unsigned *)b];
    unsigned kx[4] = { x->device, x->function, x->interval_ms, x->address };
    unsigned ky[4] = { y->device, y->function, y->interval_ms, y->address };
    for (int i = 0; i < 4; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

/* Groups sorted by (device, function, interval, address), then merged. */
static int plan(gw_poller_t *p)
{
    const config_t *cfg = p->gw->cfg;
    unsigned n = cfg->poll_count;

    p->order = calloc(n + 1, sizeof *p->order);
    p->reads = calloc(n + 1, sizeof *p->reads);
    if (!p->order || !p->reads)
        return -1;
    for (unsigned i = 0; i < n; i++)
        p->order[i] = i;
    qsort_r(p->order, n, sizeof *p->order, by_key, (void *)cfg);
    for (unsigned i = 0; i < n; i++) {
        const config_poll_t *g = &cfg->polls[p->order[i]];
        poll_read_t *r = p->n_reads ? &p->reads[p->n_reads - 1] : NULL;
        unsigned limit = g->function <= 2 ? 2000 : 125;
        if (r && r->device == g->device && r->function == g->function &&
            r->interval_ms == g->interval_ms && g->address <= r->address + r->count) {
            unsigned end = g->address + g->count > r->address + r->count ? g->address + g->count
                                                                          : r->address + r->count;
            if (end - r->address <= limit) {
                r->count = end - r->address;
                r->n++;
                continue;
            }
        }
        p->reads[p->n_reads++] = (poll_read_t){ .device = g->device, .function = g->function,
                                                .address = g->address, .count = g->count,
                                                .interval_ms = g->interval_ms, .first = i, .n = 1 };
    }
    return 0;
}

static void poll_once(gw_poller_t *p, unsigned ri)
{
    gw_t *gw = p->gw;
    poll_read_t *r = &p->reads[ri];
    const config_device_t *dev = &gw->cfg->devices[r->device];

    if (r->outstanding) {
        pthread_mutex_lock(&gw->cache_lock);
        for (unsigned m = 0; m < r->n; m++)
            gw->cache[p->order[r->first + m]].overruns++;
        pthread_mutex_unlock(&gw->cache_lock);
        return;
    }
    gw_request_t q = { .origin = &p->origin, .slave = (uint8_t)dev->slave, .pdu_len = 5,
                       .background = 1, .seq = ri, .t_accept_ns = gw_now_ns() };
    q.pdu[0] = (uint8_t)r->function;
    q.pdu[1] = (uint8_t)(r->address >> 8);
    q.pdu[2] = (uint8_t)r->address;
    q.pdu[3] = (uint8_t)(r->count >> 8);
    q.pdu[4] = (uint8_t)r->count;
    if (bus_submit(gw->buses[dev->bus], &q) == 0)
        r->outstanding = true;
}

/* Item i of the answer (register, or bit as 0/1), which plan() sized. */
static uint16_t item(const poll_read_t *r, const poll_answer_t *a, unsigned i)
{
    if (r->function >= 3)
        return (uint16_t)(a->pdu[2 + 2 * i] << 8 | a->pdu[3 + 2 * i]);
    return (a->pdu[2 + i / 8] >> (i % 8)) & 1;
}

static void on_answer(gw_poller_t *p, const poll_answer_t *a)
{
    gw_t *gw = p->gw;

    if (a->seq >= p->n_reads)
        return;
    poll_read_t *r = &p->reads[a->seq];
    unsigned want = r->function >= 3 ? 2 * r->count : (r->count + 7) / 8;
    bool exception = a->pdu_len >= 2 && (a->pdu[0] & 0x80);
    bool good = !exception && a->pdu_len == 2u + want && a->pdu[1] == want;
    uint64_t now = gw_now_ns();

    r->outstanding = false;
    pthread_mutex_lock(&gw->cache_lock);
    for (unsigned m = 0; m < r->n; m++) {
        unsigned gi = p->order[r->first + m];
        const config_poll_t *g = &gw->cfg->polls[gi];
        gw_cache_entry_t *e = &gw->cache[gi];
        e->polls++;
        if (!good) {
            e->ok = 0;
            e->exception = exception ? a->pdu[1] : 0;
            e->failures++;
            continue;
        }
        for (unsigned i = 0; i < g->count; i++)
            e->values[i] = item(r, a, g->address - r->address + i);
        e->ok = 1;
        e->count = (uint16_t)g->count;
        e->t_ns = now;
        e->t_req_ns = a->t_req_ns;
    }
    pthread_mutex_unlock(&gw->cache_lock);
}

static void poller_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                             const void *data, size_t len)
{
    gw_poller_t *p = state;
    uint32_t ri;
    (void)sys;
    (void)self;
    if (type == POLLER_MSG_TICK && len == sizeof ri) {
        memcpy(&ri, data, sizeof ri);
        if (ri < p->n_reads)
            poll_once(p, ri);
    } else if (type == POLLER_MSG_ANSWER) {
        /* answers travel trimmed to their PDU: copy what came */
        poll_answer_t a;
        memset(&a, 0, sizeof a);
        memcpy(&a, data, len < sizeof a ? len : sizeof a);
        on_answer(p, &a);
    }
}

/* origin: a bus worker hands the answer to the poller actor. */
static void origin_answer(gw_origin_t *o, const gw_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_poller_t *p = (gw_poller_t *)o;
    poll_answer_t a = { .t_req_ns = req->t_accept_ns, .seq = req->seq, .pdu_len = (uint16_t)len };
    memcpy(a.pdu, pdu, len);
    actor_send(p->gw->actors, p->self, POLLER_MSG_ANSWER, &a, offsetof(poll_answer_t, pdu) + len);
}

static const gw_origin_ops_t poller_origin_ops = { "poll", origin_answer, NULL };

gw_poller_t *poller_new(gw_t *gw, char *err, size_t errcap)
{
    gw_poller_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    p->origin.ops = &poller_origin_ops;
    p->gw = gw;
    if (plan(p) != 0 || actor_spawn(gw->actors, poller_behaviour, p, &p->self) != 0) {
        snprintf(err, errcap, "poller: out of memory or actors");
        poller_free(p);
        return NULL;
    }
    for (uint32_t i = 0; i < p->n_reads; i++) {
        uint64_t period = (uint64_t)p->reads[i].interval_ms * 1000000ull;
        actor_send(gw->actors, p->self, POLLER_MSG_TICK, &i, sizeof i);   /* first poll now */
        actor_send_every(gw->actors, p->self, POLLER_MSG_TICK, &i, sizeof i, period, NULL);
    }
    if (p->n_reads < gw->cfg->poll_count)
        gw_log(gw, CONFIG_LOG_INFO, "poller: %u poll groups in %u reads (adjacent ranges merged)",
               gw->cfg->poll_count, p->n_reads);
    return p;
}

void poller_free(gw_poller_t *p)
{
    if (!p)
        return;
    free(p->order);
    free(p->reads);
    free(p);
}
