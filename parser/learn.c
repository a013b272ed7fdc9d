/*
 * parser/learn.c -- what a tap learns about the master from the pairer's events.
 *
 * An integrator who maps tags onto a line someone else masters needs to know
 * what that master actually reads: per slave, each distinct request (function,
 * address, quantity) and how often it comes, and the master's own timeout and
 * retries. Every request the pairer hears ends in exactly one event (ANSWERED,
 * UNANSWERED or DOUBTFUL), so counting events counts requests, once each.
 *
 * The poll interval is measured between a request's consecutive first
 * attempts (a retry is the same poll late, not a new one), on the stamp of the
 * request's last byte. The timeout is the gap from an unanswered request's last
 * byte to the master's next request: an upper bound of the master's setting
 * (it adds the master's own turnaround), tight when the master retries at once.
 *
 * Bounded: RTU_LEARN_POLLS polls in one array, searched linearly (a master
 * polls tens of blocks; 256 entries are a few microseconds at worst, per
 * request, where the line takes milliseconds), 256 slave records.
 */
#include "parser/internal.h"

#include <stdlib.h>
#include <string.h>

struct rtu_learn {
    rtu_learn_poll_t polls[RTU_LEARN_POLLS];
    unsigned n_polls;
    uint64_t polls_dropped;
    rtu_learn_slave_t slaves[256];
};

rtu_learn_t *rtu_learn_new(void)
{
    return calloc(1, sizeof(rtu_learn_t));
}

void rtu_learn_free(rtu_learn_t *l)
{
    free(l);
}

static bool has_quantity(uint8_t fc)
{
    return fc == 1 || fc == 2 || fc == 3 || fc == 4 || fc == 15 || fc == 16 || fc == 23;
}

static rtu_learn_poll_t *find_poll(rtu_learn_t *l, const rtu_frame_t *r)
{
    uint8_t fc = r->adu[1];
    uint16_t addr = r->len >= 6 ? (uint16_t)(r->adu[2] << 8 | r->adu[3]) : 0;
    uint16_t qty = has_quantity(fc) && r->len >= 8 ? (uint16_t)(r->adu[4] << 8 | r->adu[5]) : 0;
    for (unsigned i = 0; i < l->n_polls; i++) {
        rtu_learn_poll_t *p = &l->polls[i];
        if (p->slave == r->adu[0] && p->function == fc && p->address == addr && p->quantity == qty)
            return p;
    }
    if (l->n_polls == RTU_LEARN_POLLS) {
        l->polls_dropped++;
        return NULL;
    }
    rtu_learn_poll_t *p = &l->polls[l->n_polls++];
    memset(p, 0, sizeof *p);
    p->slave = r->adu[0];
    p->function = fc;
    p->address = addr;
    p->quantity = qty;
    return p;
}

static void note_min_max(uint64_t v, uint64_t *min, uint64_t *max, bool first)
{
    if (first || v < *min)
        *min = v;
    if (first || v > *max)
        *max = v;
}

void rtu_learn_event(rtu_learn_t *l, const rtu_pair_event_t *ev)
{
    if (ev->kind != RTU_PAIR_ANSWERED && ev->kind != RTU_PAIR_UNANSWERED && ev->kind != RTU_PAIR_DOUBTFUL)
        return;
    const rtu_frame_t *r = &ev->request;
    if (r->len < 4)
        return;
    rtu_learn_slave_t *s = &l->slaves[r->adu[0]];
    s->requests++;
    if (ev->retry)
        s->retries++;
    if (ev->kind == RTU_PAIR_ANSWERED) {
        s->answered++;
        if (ev->latency_ns > s->latency_max_ns)
            s->latency_max_ns = ev->latency_ns;
    } else if (ev->kind == RTU_PAIR_DOUBTFUL) {
        s->doubtful++;
    } else {
        note_min_max(ev->latency_ns, &s->timeout_min_ns, &s->timeout_max_ns, s->unanswered == 0);
        s->unanswered++;
    }
    rtu_learn_poll_t *p = find_poll(l, r);
    if (!p)
        return;
    if (!ev->retry) {
        if (p->count && r->t_last_ns > p->last_ns) {
            note_min_max(r->t_last_ns - p->last_ns, &p->interval_min_ns, &p->interval_max_ns,
                         p->intervals == 0);
            p->intervals++;
        }
        if (!p->count)
            p->first_ns = r->t_last_ns;
        p->last_ns = r->t_last_ns;
    }
    p->count++;
    if (ev->kind == RTU_PAIR_ANSWERED) {
        p->answered++;
        if (ev->latency_ns > p->latency_max_ns)
            p->latency_max_ns = ev->latency_ns;
    }
}

int rtu_learn_poll(const rtu_learn_t *l, unsigned i, rtu_learn_poll_t *out)
{
    if (i >= l->n_polls)
        return 0;
    *out = l->polls[i];
    return 1;
}

const rtu_learn_slave_t *rtu_learn_slave(const rtu_learn_t *l, uint8_t slave)
{
    return l->slaves[slave].requests ? &l->slaves[slave] : NULL;
}

uint64_t rtu_learn_polls_dropped(const rtu_learn_t *l)
{
    return l->polls_dropped;
}
