/*
 * line/queue.c -- a line's requests waiting for the wire: two rings
 * (interactive first, then background polls when tcp_first) and at most one
 * parked retry per slave (discipline.c's invariant I1). Which request goes next is
 * decided here: a parked retry whose guard has passed, else the first queued
 * request whose slave is free. Per slave the order is first come, first
 * served; across slaves a guarded slave's requests wait while the others go.
 */
#include "line/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the queue ------------------------------------------------------------- */

unsigned line_queued(const line_t *bus)
{
    return bus->queue[0].len + bus->queue[1].len + bus->parked_count;
}

static gw_request_t *ring_at(line_t *bus, unsigned qi, unsigned i)
{
    request_ring_t *r = &bus->queue[qi];
    return &r->slot[(r->head + i) % bus->cfg.queue_depth];
}

/*
 * Priority (a [tcp] priority_clients master's request, req->priority): it
 * is queued before the requests of lower priority, so it waits only for
 * the transaction on the wire, not for the queue; but never before one
 * that has already been passed over LINE_STARVATION_BOUND times, so a
 * flood of priority requests delays the others by at most that many
 * transactions each, and never starves them. Equal priorities keep their
 * order (first come, first served), so without priority_clients the queue
 * is the plain FIFO it always was.
 */
#define LINE_STARVATION_BOUND 8

bool line_queue_push(line_t *bus, unsigned qi, const gw_request_t *req)
{
    request_ring_t *r = &bus->queue[qi];
    if (r->len == bus->cfg.queue_depth)
        return false;
    unsigned at = r->len;
    while (at > 0) {
        const gw_request_t *before = ring_at(bus, qi, at - 1);
        if (before->priority >= req->priority || before->passed >= LINE_STARVATION_BOUND)
            break;
        at--;
    }
    r->len++;
    for (unsigned k = r->len - 1; k > at; k--) {
        *ring_at(bus, qi, k) = *ring_at(bus, qi, k - 1);
        ring_at(bus, qi, k)->passed++;
    }
    *ring_at(bus, qi, at) = *req;
    return true;
}

/* Takes entry i out, keeping the others in order. */
static void ring_take(line_t *bus, unsigned qi, unsigned i, gw_request_t *out)
{
    request_ring_t *r = &bus->queue[qi];
    *out = *ring_at(bus, qi, i);
    for (unsigned k = i; k + 1 < r->len; k++)
        *ring_at(bus, qi, k) = *ring_at(bus, qi, k + 1);
    r->len--;
}

void line_park(line_t *bus, const gw_request_t *req, unsigned attempts)
{
    slave_state_t *s = &bus->slaves[req->slave];
    gw_request_t *copy = malloc(sizeof *copy);
    if (!copy) {   /* no room to wait: refused, never lost */
        line_refuse(bus, req, bus->now_ns);
        return;
    }
    *copy = *req;
    s->parked = copy;
    s->parked_attempts = attempts;
    bus->parked_count++;
}

void line_unpark(line_t *bus, unsigned slave, gw_request_t *out, unsigned *attempts)
{
    slave_state_t *s = &bus->slaves[slave];
    *out = *s->parked;
    *attempts = s->parked_attempts;
    free(s->parked);
    s->parked = NULL;
    bus->parked_count--;
}

bool line_slave_dead(const line_t *bus, unsigned slave, uint64_t now)
{
    return slave && slave < N_SLAVES && bus->slaves[slave].dead_until_ns > now;
}

/* Answers everything waiting with code (the port went down). */
void line_queue_answer_all(line_t *bus, uint8_t code)
{
    gw_request_t req;
    unsigned attempts;
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        while (bus->queue[qi].len) {
            ring_take(bus, qi, 0, &req);
            gw_count(&bus->m.unavailable);
            line_answer_exception(bus, &req, code);
        }
    for (unsigned s = 0; s < N_SLAVES && bus->parked_count; s++)
        if (bus->slaves[s].parked) {
            line_unpark(bus, s, &req, &attempts);
            gw_count(&bus->m.unavailable);
            line_answer_exception(bus, &req, code);
        }
}

/* Does its asker still want the answer? (A TCP client may have gone.) */
static bool wanted(const gw_request_t *r)
{
    return !r->origin->ops->wanted || r->origin->ops->wanted(r->origin, r);
}

/* Entry i will never go on the line (its slave is backed off, or its asker
 * has gone): take it out and answer it now. */
static bool answer_unsendable(line_t *bus, unsigned qi, unsigned i, uint64_t now)
{
    gw_request_t *r = ring_at(bus, qi, i);
    bool dead = line_slave_dead(bus, r->slave, now);
    if (!dead && wanted(r))
        return false;
    gw_request_t gone;
    ring_take(bus, qi, i, &gone);
    gw_count(dead ? &bus->m.dead_fast : &bus->m.gone_dropped);
    line_answer_exception(bus, &gone, MB_EX_TARGET_FAILED);
    return true;
}

/* A full queue first gives up the places of requests that will never go
 * on the line, so they do not turn a live client away with 0x06. */
bool line_queue_push_or_purge(line_t *bus, unsigned qi, const gw_request_t *req, uint64_t now)
{
    if (line_queue_push(bus, qi, req))
        return true;
    for (unsigned i = 0; i < bus->queue[qi].len;)
        if (!answer_unsendable(bus, qi, i, now))
            i++;
    return line_queue_push(bus, qi, req);
}

/*
 * The next request that may go on the line now: a parked retry whose guard
 * has passed, else the first queued request whose slave is free (I1, I2).
 * Requests of backed-off slaves and of askers that have gone are answered
 * on the way, without line time. *wake: the earliest guard that holds a
 * request back (0: none).
 */
/* I2 by function (discipline.c, line_on_timeout): a give-up's guard holds
 * only the functions given up; a question of another function may go. */
static bool hold_passes(const slave_state_t *ss, const gw_request_t *r)
{
    if (ss->hold_fcs)   /* I4's re-asks: only their functions' late answers may still come */
        return r->pdu[0] < 32 && !(ss->hold_fcs >> r->pdu[0] & 1);
    return ss->hold_by_function && line_shape_function_free(ss, r->pdu[0]);
}

bool line_queue_pick(line_t *bus, uint64_t now, unsigned *attempts, uint64_t *wake)
{
    *wake = 0;
    for (unsigned s = 0; s < N_SLAVES && bus->parked_count; s++) {
        slave_state_t *ss = &bus->slaves[s];
        if (!ss->parked)
            continue;
        if (ss->hold_until_ns <= now || hold_passes(ss, ss->parked)) {
            line_unpark(bus, s, &bus->cur, attempts);
            if (wanted(&bus->cur))
                return true;
            gw_count(&bus->m.gone_dropped);
            line_answer_exception(bus, &bus->cur, MB_EX_TARGET_FAILED);
            continue;
        }
        if (!*wake || ss->hold_until_ns < *wake)
            *wake = ss->hold_until_ns;
    }
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++) {
        for (unsigned i = 0; i < bus->queue[qi].len;) {
            gw_request_t *r = ring_at(bus, qi, i);
            slave_state_t *ss = &bus->slaves[r->slave];
            if (answer_unsendable(bus, qi, i, now))
                continue;
            if (r->slave && (ss->parked || (ss->hold_until_ns > now && !hold_passes(ss, r)))) {
                if (!ss->parked && (!*wake || ss->hold_until_ns < *wake))
                    *wake = ss->hold_until_ns;
                i++;
                continue;
            }
            ring_take(bus, qi, i, &bus->cur);
            *attempts = 0;
            return true;
        }
    }
    return false;
}
