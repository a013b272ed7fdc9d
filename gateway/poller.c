/*
 * gateway/poller.c -- the poller actor: each poll group on its own periodic
 * timer, its answers into the register cache.
 *
 * A group whose previous read has not been answered when its timer fires
 * skips that round (counted as an overrun) rather than queueing a second
 * read of the same registers: a slow slave gets fewer polls, never a
 * growing backlog.
 */
#include "gateway/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_poller {
    gw_t *gw;
    actor_ref_t self;
    bool *outstanding;
};

actor_ref_t poller_ref(const gw_poller_t *p)
{
    return p ? p->self : ACTOR_REF_NONE;
}

static void poll_once(gw_poller_t *p, unsigned idx)
{
    gw_t *gw = p->gw;
    const config_poll_t *pg = &gw->cfg->polls[idx];
    const config_device_t *dev = &gw->cfg->devices[pg->device];

    if (p->outstanding[idx]) {
        pthread_mutex_lock(&gw->cache_lock);
        gw->cache[idx].overruns++;
        pthread_mutex_unlock(&gw->cache_lock);
        return;
    }
    gw_request_t r = { .origin = ORIGIN_POLL, .slave = (uint8_t)dev->slave, .pdu_len = 5,
                       .seq = idx, .t_accept_ns = gw_now_ns() };
    r.pdu[0] = (uint8_t)pg->function;
    r.pdu[1] = (uint8_t)(pg->address >> 8);
    r.pdu[2] = (uint8_t)pg->address;
    r.pdu[3] = (uint8_t)(pg->count >> 8);
    r.pdu[4] = (uint8_t)pg->count;
    if (actor_send(gw->actors, bus_ref(gw->buses[dev->bus]), MSG_REQUEST, &r,
                   offsetof(gw_request_t, pdu) + r.pdu_len) == 0)
        p->outstanding[idx] = true;
}

static void on_answer(gw_poller_t *p, const gw_answer_t *a)
{
    gw_t *gw = p->gw;
    unsigned idx = a->seq;

    if (idx >= gw->cfg->poll_count)
        return;
    const config_poll_t *pg = &gw->cfg->polls[idx];
    p->outstanding[idx] = false;
    pthread_mutex_lock(&gw->cache_lock);
    gw_cache_entry_t *e = &gw->cache[idx];
    e->polls++;
    if (a->pdu_len >= 2 && (a->pdu[0] & 0x80)) {
        e->ok = 0;
        e->exception = a->pdu[1];
        e->failures++;
    } else if (pg->function >= 3 && a->pdu_len >= 2 && a->pdu[1] == 2 * pg->count &&
               a->pdu_len == 2u + a->pdu[1]) {
        for (unsigned i = 0; i < pg->count; i++)
            e->values[i] = (uint16_t)(a->pdu[2 + 2 * i] << 8 | a->pdu[3 + 2 * i]);
        e->ok = 1;
        e->count = (uint16_t)pg->count;
        e->t_ns = gw_now_ns();
    } else if (pg->function <= 2 && a->pdu_len >= 2 && a->pdu[1] == (pg->count + 7) / 8 &&
               a->pdu_len == 2u + a->pdu[1]) {
        for (unsigned i = 0; i < pg->count; i++)
            e->values[i] = (a->pdu[2 + i / 8] >> (i % 8)) & 1;
        e->ok = 1;
        e->count = (uint16_t)pg->count;
        e->t_ns = gw_now_ns();
    } else {
        e->ok = 0;
        e->exception = 0;
        e->failures++;
    }
    pthread_mutex_unlock(&gw->cache_lock);
}

static void poller_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                             const void *data, size_t len)
{
    gw_poller_t *p = state;
    uint32_t idx;
    (void)sys;
    (void)self;
    (void)len;
    if (type == MSG_POLL_TICK) {
        memcpy(&idx, data, sizeof idx);
        if (idx < p->gw->cfg->poll_count)
            poll_once(p, idx);
    } else if (type == MSG_ANSWER) {
        on_answer(p, data);
    }
}

gw_poller_t *poller_new(gw_t *gw, char *err, size_t errcap)
{
    gw_poller_t *p = calloc(1, sizeof *p);
    if (!p || !(p->outstanding = calloc(gw->cfg->poll_count + 1, sizeof *p->outstanding))) {
        free(p);
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    p->gw = gw;
    if (actor_spawn(gw->actors, poller_behaviour, p, &p->self) != 0) {
        snprintf(err, errcap, "poller: cannot spawn its actor");
        poller_free(p);
        return NULL;
    }
    gw->poller = p;   /* answers find the poller through gw: publish before the first poll */
    for (uint32_t i = 0; i < gw->cfg->poll_count; i++) {
        uint64_t period = (uint64_t)gw->cfg->polls[i].interval_ms * 1000000ull;
        actor_send(gw->actors, p->self, MSG_POLL_TICK, &i, sizeof i);   /* first poll now */
        actor_send_every(gw->actors, p->self, MSG_POLL_TICK, &i, sizeof i, period, NULL);
    }
    return p;
}

void poller_free(gw_poller_t *p)
{
    if (!p)
        return;
    free(p->outstanding);
    free(p);
}
