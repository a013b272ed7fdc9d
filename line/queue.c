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

unsigned line_queued(const line_t *l)
{
    return l->queue[0].len + l->queue[1].len + l->parked_count;
}

static line_request_t *ring_at(line_t *l, unsigned qi, unsigned i)
{
    request_ring_t *r = &l->queue[qi];
    return &r->slot[(r->head + i) % l->cfg.queue_depth];
}

/*
 * Priority (the priority class's request, req->priority: [tcp]
 * priority_clients, _units, _functions, a role's priority): it is queued
 * before the requests of lower priority, so it waits only for the
 * transaction on the wire, not for the queue. The starvation bound is the
 * class's, as in the front end (front/backpressure.c): after
 * LINE_STARVATION_BOUND priority transactions in a row with normal requests
 * waiting, the oldest normal one that may go goes next (line_queue_pick),
 * so the others get at least one transaction in nine however many priority
 * masters there are, and are never starved. (It was a count per request,
 * "passed over 8 times": with a few normal requests queued that let them
 * alternate with a priority master, P N P N, and halved its rate.) Equal
 * priorities keep their order (first come, first served), so without
 * priority classes the queue is the plain FIFO it always was.
 */
#define LINE_STARVATION_BOUND 8

bool line_queue_push(line_t *l, unsigned qi, const line_request_t *req)
{
    request_ring_t *r = &l->queue[qi];
    if (r->len == l->cfg.queue_depth)
        return false;
    unsigned at = r->len;
    while (at > 0) {
        const line_request_t *before = ring_at(l, qi, at - 1);
        if (before->priority >= req->priority)
            break;
        at--;
    }
    r->len++;
    for (unsigned k = r->len - 1; k > at; k--)
        *ring_at(l, qi, k) = *ring_at(l, qi, k - 1);
    *ring_at(l, qi, at) = *req;
    return true;
}

/* Takes entry i out, keeping the others in order. */
static void ring_take(line_t *l, unsigned qi, unsigned i, line_request_t *out)
{
    request_ring_t *r = &l->queue[qi];
    *out = *ring_at(l, qi, i);
    for (unsigned k = i; k + 1 < r->len; k++)
        *ring_at(l, qi, k) = *ring_at(l, qi, k + 1);
    r->len--;
}

void line_park(line_t *l, const line_request_t *req, unsigned attempts)
{
    slave_state_t *s = line_slave(l, req->slave);
    line_request_t *copy = malloc(sizeof *copy);
    if (!copy) {   /* no room to wait: refused, never lost */
        line_refuse(l, req, l->now_ns);
        return;
    }
    *copy = *req;
    s->parked = copy;
    s->parked_attempts = attempts;
    l->parked_count++;
}

void line_unpark(line_t *l, unsigned slave, line_request_t *out, unsigned *attempts)
{
    slave_state_t *s = line_slave(l, slave);
    *out = *s->parked;
    *attempts = s->parked_attempts;
    free(s->parked);
    s->parked = NULL;
    l->parked_count--;
}

bool line_slave_dead(const line_t *l, unsigned slave, uint64_t now)
{
    slave_state_t tmp;
    return slave && slave < N_SLAVES && line_slave_view(l, slave, &tmp)->dead_until_ns > now;
}

/* Answers everything waiting with code (the port went down). */
void line_queue_answer_all(line_t *l, uint8_t code)
{
    line_request_t req;
    unsigned attempts;
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        while (l->queue[qi].len) {
            ring_take(l, qi, 0, &req);
            gw_count(&l->m.unavailable);
            line_answer_exception(l, &req, code);
        }
    for (unsigned s = 0; s < N_SLAVES && l->parked_count; s++)
        if (l->slaves[s].parked) {
            line_unpark(l, s, &req, &attempts);
            gw_count(&l->m.unavailable);
            line_answer_exception(l, &req, code);
        }
}

/* Does its asker still want the answer? (A TCP client may have gone.) */
static bool wanted(const line_request_t *r)
{
    return !r->origin->ops->wanted || r->origin->ops->wanted(r->origin, r);
}

/* Entry i will never go on the line (its slave is backed off, or its asker
 * has gone): take it out and answer it now. */
static bool answer_unsendable(line_t *l, unsigned qi, unsigned i, uint64_t now)
{
    line_request_t *r = ring_at(l, qi, i);
    bool dead = line_slave_dead(l, r->slave, now);
    if (!dead && wanted(r))
        return false;
    line_request_t gone;
    ring_take(l, qi, i, &gone);
    gw_count(dead ? &l->m.dead_fast : &l->m.gone_dropped);
    line_answer_exception(l, &gone, MB_EX_TARGET_FAILED);
    return true;
}

/* A full queue first gives up the places of requests that will never go
 * on the line, so they do not turn a live client away with 0x06. */
bool line_queue_push_or_purge(line_t *l, unsigned qi, const line_request_t *req, uint64_t now)
{
    if (line_queue_push(l, qi, req))
        return true;
    for (unsigned i = 0; i < l->queue[qi].len;)
        if (!answer_unsendable(l, qi, i, now))
            i++;
    return line_queue_push(l, qi, req);
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
static bool hold_passes(const slave_state_t *ss, const line_request_t *r, uint64_t now)
{
    if (ss->hold_fcs)   /* I4's re-asks: only their functions' late answers may still come */
        return line_hold_end(ss, r->pdu[0]) <= now;
    return ss->hold_by_function && line_shape_function_free(ss, r->pdu[0]);
}

static bool normal_waiting(line_t *l)
{
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        for (unsigned i = 0; i < l->queue[qi].len; i++)
            if (!ring_at(l, qi, i)->priority)
                return true;
    return false;
}

/*
 * The polls' share ([bus] poll_share, with tcp_first). tcp_first queues
 * background requests (the poller's reads, scans) behind interactive ones,
 * so on a bus whose clients always have a request waiting the polls never
 * went: under the full storm (bench/storm_isolation.py --full) 1,000
 * clients kept bus b1's queue full and its 10,000 polled tags were
 * published at 160-180 values/s instead of 10,100, their values going
 * stale although the bus answered 550 transactions a second. So the
 * background class is owed a share, as the normal class is owed one by
 * the priority class: after poll_turn_after(share) interactive
 * transactions in a row with a poll waiting, the first poll that may go
 * goes next (counted: rtugw_bus_poll_turns_total), so polls get at least
 * share percent of the transactions while they wait; the clients keep the
 * rest, and all of it while no poll waits. Only the order between the two
 * queues changes: within each, first come, first served; a poll is a
 * read, and every question is still asked and answered under the same
 * discipline, so no answer can go to another question by it. 0: the
 * strict order of before.
 */
static unsigned poll_turn_after(unsigned share)
{
    return share ? (100 + share - 1) / share - 1 : 0;
}

static bool poll_turn_due(const line_t *l)
{
    return l->cfg.tcp_first && l->cfg.poll_share && l->queue[1].len &&
           l->poll_streak >= poll_turn_after(l->cfg.poll_share);
}

/* l->cur was taken from queue qi: the polls' streak follows. */
static void poll_streak_after(line_t *l, unsigned qi, bool turn)
{
    if (qi == 1) {
        if (turn && l->queue[0].len)
            gw_count(&l->m.poll_turns);
        l->poll_streak = 0;
    } else if (l->queue[1].len) {
        l->poll_streak++;
    }
}

bool line_queue_pick(line_t *l, uint64_t now, unsigned *attempts, uint64_t *wake)
{
    *wake = 0;
    for (unsigned s = 0; s < N_SLAVES && l->parked_count; s++) {
        slave_state_t *ss = &l->slaves[s];
        if (!ss->parked)
            continue;   /* a slave never used has nothing parked (events.c, line_slave) */
        if (ss->hold_until_ns <= now || hold_passes(ss, ss->parked, now)) {
            line_unpark(l, s, &l->cur, attempts);
            if (wanted(&l->cur))
                return true;
            gw_count(&l->m.gone_dropped);
            line_answer_exception(l, &l->cur, MB_EX_TARGET_FAILED);
            continue;
        }
        if (!*wake || line_hold_end(ss, ss->parked->pdu[0]) < *wake)
            *wake = line_hold_end(ss, ss->parked->pdu[0]);
    }
    /* the class's starvation bound reached: normal requests first, this once;
     * the polls' turn come: the background queue first, this once */
    bool turn = poll_turn_due(l);
    for (int pass = l->prio_streak >= LINE_STARVATION_BOUND ? 0 : 1; pass < 2; pass++) {
        for (unsigned k = 0; k < BUS_QUEUES; k++) {
            unsigned qi = turn ? BUS_QUEUES - 1 - k : k;
            for (unsigned i = 0; i < l->queue[qi].len;) {
                line_request_t *r = ring_at(l, qi, i);
                slave_state_t *ss = line_slave(l, r->slave);
                if (answer_unsendable(l, qi, i, now))
                    continue;
                if ((pass == 0 && r->priority) ||
                    (r->slave && (ss->parked || (ss->hold_until_ns > now && !hold_passes(ss, r, now))))) {
                    if (!ss->parked && ss->hold_until_ns > now && (!*wake || line_hold_end(ss, r->pdu[0]) < *wake))
                        *wake = line_hold_end(ss, r->pdu[0]);
                    i++;
                    continue;
                }
                ring_take(l, qi, i, &l->cur);
                *attempts = 0;
                poll_streak_after(l, qi, turn);
                if (!l->cur.priority)
                    l->prio_streak = 0;
                else if (normal_waiting(l))
                    l->prio_streak++;
                return true;
            }
        }
    }
    return false;
}

/*
 * The priority class's hold. A priority master that loops (ask, answer, ask
 * again) finds the line busy with a normal request each time it comes
 * back, since the line starts the next queued request the moment its
 * answer goes: it waits a transaction for every one of its own, about half
 * its solo rate (0.55 in bench/overload.py). So, as an anticipatory
 * disk scheduler does for a process that reads on, after a priority answer
 * the line waits a little for that class's next request before it starts a
 * normal one: as long as its masters are seen to come back within
 * [bus] priority_hold_us (their return time learned as TCP learns a round
 * trip: a moving average and its mean deviation, the hold being the
 * average plus four deviations plus 100 us, at most priority_hold_us;
 * twice the average lost a third of the returns to a loaded box's jitter,
 * bench/overload.py). A master
 * that comes back later than that is not waited for (the hold is off
 * until its returns are short again). The wait costs the normal class at
 * most the hold per priority answer, and only while a priority master is
 * active (counted: rtugw_bus_priority_holds_total, _hold_us_total); a
 * normal request is never refused or reordered for it, and the starvation
 * bound above still holds (the hold delays, it does not pass over).
 * Nothing waits when no priority request was answered last.
 */
#define PRIORITY_HOLD_FLOOR_NS 100000ull

void line_priority_answered(line_t *l)
{
    l->prio_answered_ns = l->now_ns;
    l->prio_hold_open = true;
}

void line_priority_submitted(line_t *l)
{
    l->prio_hold_open = false;   /* it came: nothing more to wait for */
    if (!l->prio_answered_ns)
        return;
    uint64_t back = l->now_ns - l->prio_answered_ns;
    if (!l->prio_return_ns) {
        l->prio_return_ns = back;
        l->prio_return_dev_ns = back / 2;
    } else {   /* Jacobson's estimator, as TCP's retransmission timer */
        uint64_t dev = back > l->prio_return_ns ? back - l->prio_return_ns : l->prio_return_ns - back;
        l->prio_return_dev_ns = (3 * l->prio_return_dev_ns + dev) / 4;
        l->prio_return_ns = (7 * l->prio_return_ns + back) / 8;
    }
    l->prio_answered_ns = 0;   /* one return per answer */
}

static bool priority_queued(line_t *l)
{
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        for (unsigned i = 0; i < l->queue[qi].len; i++)
            if (ring_at(l, qi, i)->priority)
                return true;
    return false;
}

/* The line starts something again: what the hold cost, counted. */
static void hold_released(line_t *l, uint64_t now)
{
    if (!l->prio_held_since_ns)
        return;
    gw_count(&l->m.priority_holds);
    atomic_fetch_add_explicit(&l->m.priority_hold_us, (now - l->prio_held_since_ns) / 1000,
                              memory_order_relaxed);
    l->prio_held_since_ns = 0;
}

/* Until when a normal request waits for the priority class (0: it does not). */
uint64_t line_priority_hold(line_t *l, uint64_t now)
{
    uint64_t cap = (uint64_t)l->cfg.priority_hold_us * 1000ull;
    uint64_t want = l->prio_return_ns + 4 * l->prio_return_dev_ns + PRIORITY_HOLD_FLOOR_NS;
    if (want > cap)
        want = cap;
    /* its masters come back too late to be waited for: no hold */
    bool open = l->prio_hold_open && l->prio_return_ns < cap / 2 &&
                l->prio_streak < LINE_STARVATION_BOUND;   /* a normal one goes next anyway */
    if (!open || now >= l->prio_answered_ns + want || priority_queued(l)) {
        l->prio_hold_open = false;
        hold_released(l, now);
        return 0;
    }
    if (!l->prio_held_since_ns)
        l->prio_held_since_ns = now;
    return l->prio_answered_ns + want;
}
