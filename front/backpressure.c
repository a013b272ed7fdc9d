/*
 * front/backpressure.c -- a listener's shares of each bus: how many of its
 * requests may be in a bus's queue and on its line at once (bus_share), and,
 * beyond that, which waiting connection goes next.
 *
 * Why the front end, not the bus, bounds this: a full bus queue can only
 * answer exception 06, which a looping master resends at once; 1,000 such
 * masters spend the I/O thread on refusals (58,000 a second against 68
 * answers). A request that finds its listener's share of the bus taken is
 * instead left unread in its connection, which stops being read (TCP flow
 * control holds the client) and waits in its class's list for that bus.
 * Nothing is refused, nothing is lost, and a waiting client costs nothing.
 *
 * Fair shares: each answer frees one place; the connection at the head of
 * the list takes it, submits one request and, if it has another for a bus
 * still full, goes to the tail. Connections are so served in turn, a
 * request each, whatever they pipeline or however fast they loop: a
 * connection has at most one request waiting for its turn, and a
 * connection that is not waiting may submit directly only while nobody
 * waits for that bus (a newcomer never overtakes the list).
 *
 * Priority classes (TCP_CLASS_PRIORITY: [tcp] priority_clients): the
 * higher class's list is served first, but a waiting lower class is passed
 * over at most TCP_STARVATION_BOUND times in a row, so a flood of
 * priority masters slows the others down to one place in
 * TCP_STARVATION_BOUND + 1, never to none. The class rides with the
 * request into the bus queue, which orders it the same way (line/queue.c).
 * The priority class has TCP_PRIORITY_PLACES places beyond the share that
 * the other class cannot take: a priority master's request then goes into
 * the bus queue at once, ahead of the others there, and waits only for the
 * transaction on the wire, not first for one to end and free a place.
 *
 * The count of places taken is decremented by the answer's callback on the
 * bus's thread, the line thread by default (atomic); everything else here is the I/O thread's.
 */
#include "front/internal.h"

#include <stdatomic.h>
#include <stdlib.h>

/* buses: how many have shares; it only grows (shares_grow: a bus a reload
 * added gets its share with its first request, on the I/O thread), so a
 * connection waiting on a bus removed since is still served in turn (its
 * request then meets no bus: 0x0A). The arrays are sized for every bus, so
 * a reader on another thread (shares_answered, from the line thread) never
 * indexes past them: relaxed is enough. */
struct tcp_shares {
    _Atomic unsigned buses;
    unsigned share;
    atomic_uint in_bus[CONFIG_MAX_BUSES];
    tcp_waiter_t *head[CONFIG_MAX_BUSES][TCP_CLASSES], *tail[CONFIG_MAX_BUSES][TCP_CLASSES];
    unsigned waiting[TCP_CLASSES];           /* connections waiting, over all buses */
    unsigned passed[CONFIG_MAX_BUSES];       /* the lower class passed over in a row */
};

tcp_shares_t *shares_new(unsigned buses, unsigned share)
{
    tcp_shares_t *s = calloc(1, sizeof *s);
    if (s) {
        atomic_init(&s->buses, 0);
        shares_grow(s, buses);
        s->share = share ? share : 1;
    }
    return s;
}

void shares_grow(tcp_shares_t *s, unsigned buses)
{
    buses = buses < CONFIG_MAX_BUSES ? buses : CONFIG_MAX_BUSES;
    if (buses > atomic_load_explicit(&s->buses, memory_order_relaxed))
        atomic_store_explicit(&s->buses, buses, memory_order_relaxed);
}

static unsigned buses_of(const tcp_shares_t *s)
{
    return atomic_load_explicit(&s->buses, memory_order_relaxed);
}

void shares_free(tcp_shares_t *s)
{
    free(s);
}

void shares_set(tcp_shares_t *s, unsigned share)
{
    s->share = share ? share : 1;
}

/* Anyone of this class or above waiting for bus? */
static bool anyone_ahead(const tcp_shares_t *s, unsigned bus, unsigned klass)
{
    for (unsigned k = klass; k < TCP_CLASSES; k++)
        if (s->head[bus][k])
            return true;
    return false;
}

/* The places of bus the class may fill. */
static unsigned class_limit(const tcp_shares_t *s, unsigned klass)
{
    return s->share + (klass == TCP_CLASS_PRIORITY ? TCP_PRIORITY_PLACES : 0);
}

bool shares_room(const tcp_shares_t *s, unsigned bus, unsigned klass, bool turn)
{
    if (bus >= buses_of(s))
        return true;   /* gw_submit refuses it: no share to take */
    if (atomic_load_explicit(&s->in_bus[bus], memory_order_relaxed) >= class_limit(s, klass))
        return false;
    return turn || !anyone_ahead(s, bus, klass);
}

void shares_taken(tcp_shares_t *s, unsigned bus)
{
    if (bus < buses_of(s))
        atomic_fetch_add_explicit(&s->in_bus[bus], 1, memory_order_relaxed);
}

void shares_answered(tcp_shares_t *s, unsigned bus)
{
    if (bus < buses_of(s))
        atomic_fetch_sub_explicit(&s->in_bus[bus], 1, memory_order_relaxed);
}

void shares_wait(tcp_shares_t *s, tcp_waiter_t *w, unsigned bus, unsigned klass, uint64_t now_ns)
{
    if (w->linked || bus >= buses_of(s))
        return;
    klass = klass < TCP_CLASSES ? klass : TCP_CLASSES - 1;
    *w = (tcp_waiter_t){ .prev = s->tail[bus][klass], .bus = (uint8_t)bus, .klass = (uint8_t)klass,
                         .linked = true, .since_ns = now_ns };
    if (w->prev)
        w->prev->next = w;
    else
        s->head[bus][klass] = w;
    s->tail[bus][klass] = w;
    s->waiting[klass]++;
}

void shares_leave(tcp_shares_t *s, tcp_waiter_t *w)
{
    if (!w->linked)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else
        s->head[w->bus][w->klass] = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        s->tail[w->bus][w->klass] = w->prev;
    s->waiting[w->klass]--;
    w->linked = false;
    w->prev = w->next = NULL;
}

tcp_waiter_t *shares_next(tcp_shares_t *s, unsigned bus)
{
    if (bus >= buses_of(s))
        return NULL;
    unsigned in = atomic_load_explicit(&s->in_bus[bus], memory_order_relaxed);
    tcp_waiter_t *hi = in < class_limit(s, TCP_CLASS_PRIORITY) ? s->head[bus][TCP_CLASS_PRIORITY] : NULL;
    tcp_waiter_t *lo = in < class_limit(s, TCP_CLASS_NORMAL) ? s->head[bus][TCP_CLASS_NORMAL] : NULL, *w = hi;
    if (!hi || (lo && s->passed[bus] >= TCP_STARVATION_BOUND))
        w = lo;
    if (!w)
        return NULL;
    s->passed[bus] = (w == hi && s->head[bus][TCP_CLASS_NORMAL]) ? s->passed[bus] + 1 : 0;
    shares_leave(s, w);
    return w;
}

unsigned shares_buses(const tcp_shares_t *s)
{
    return buses_of(s);
}

unsigned shares_waiting(const tcp_shares_t *s, unsigned klass)
{
    return klass < TCP_CLASSES ? s->waiting[klass] : 0;
}
