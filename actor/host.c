/*
 * actor/host.c -- hosts: run queues owned by a thread that is not a worker
 * (the gateway's I/O thread), so the actors pinned to it run on that thread,
 * between its own events, with no hand-off to a worker.
 *
 * Why: a request through the gateway crossed threads four times (I/O thread
 * -> bus actor -> I/O thread to write -> bus actor on the answer -> I/O
 * thread to reply), each a futex or eventfd wake. An actor whose every
 * message comes from and goes to the I/O thread does its work there.
 *
 * Invariants (with mailbox.h's M1-M3, which are unchanged):
 *   H1 a pinned actor, when runnable, is on its host's queue or running on
 *      the host's thread -- never on a worker's run queue, so no worker can
 *      steal it, and it never runs on two threads at once (an actor is still
 *      in exactly one place);
 *   H2 the host's queue is pushed by any thread (under its mutex: a few
 *      thousand pushes a second at most) and popped only by the host thread
 *      in actor_host_run; wake() is called by the push that finds it empty,
 *      so a burst costs one wake-up;
 *   H3 after actor_host_release the host takes nothing more: its queued
 *      actors and every later transition go to the workers, as for any
 *      actor, so shutdown drains them without the host thread;
 *   H4 a one-shot timer that a pinned actor arms for itself while it runs on
 *      its host, due now or in the host's timer floor or more (a bus's
 *      deadline, its guard, its inter-frame rest), is kept by the host,
 *      in (deadline, arming order), and sent by actor_host_run on the host
 *      thread once due: the timer thread never wakes for it and its message
 *      needs no wake-up of the host. The owner of the host thread arms its
 *      own timer for actor_host_next_deadline. Such a timer is the actor's
 *      own, so its messages keep their order among themselves (deadline
 *      order, as the timer thread's do); they are not ordered against
 *      timers that other threads arm for the actor (another sender). At
 *      release, the timers still held go to the timer thread with what is
 *      left of their delay (H3). The floor is what the owner's wake can
 *      honour: 10 ms by default, for a loop that sleeps in whole
 *      milliseconds (epoll), which would stretch a shorter rest, while a
 *      deadline of 10 ms or more fired up to 1 ms late only waits longer;
 *      0 for an owner that wakes at the deadline itself (the gateway's loop
 *      arms a timerfd for actor_host_next_deadline), so a rest of a
 *      fraction of a millisecond costs no timer thread either.
 */
#include "actor/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct host_timer {
    struct host_timer *next;
    uint64_t deadline;
    actor_timer_t id;          /* HOST_TIMER_ID_BIT | a count */
    actor_ref_t to;
    uint32_t type;
    size_t len;
    unsigned char data[];
} host_timer_t;

struct actor_host {
    actor_system_t *sys;
    void (*wake)(void *ctx);
    void *ctx;
    pthread_mutex_t lock;
    actor_t *head, *tail;      /* runnable pinned actors, under lock */
    /* H4: by deadline, then arming order; under lock. A sorted list: a host
     * holds a few timers per bus and one tick per poll read, so an insertion
     * walks tens to hundreds of nodes (a microsecond or so), a few hundred
     * times a second for a few hundred reads at 1 s; thousands of reads at
     * short intervals would want a heap (with an arming count for equal
     * deadlines). */
    host_timer_t *timers;
    uint64_t timer_floor_ns;   /* H4: the shortest delay but 0 it keeps; set before it runs */
    uint64_t timer_count;      /* ids, under lock */
    bool released;             /* under lock */
};

/* H4: the shortest delay but 0 a host keeps unless its owner says it wakes
 * precisely (actor_host_set_timer_floor): an owner that sleeps in whole
 * milliseconds fires up to 1 ms late, 10 % of this at most. */
#define HOST_TIMER_FLOOR_NS 10000000ull

/* The host whose actor runs on this thread now, and that actor (H4). */
static __thread actor_host_t *tl_host;
static __thread actor_t *tl_running;

static uint64_t host_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int actor_host_create(actor_system_t *sys, void (*wake)(void *ctx), void *ctx, actor_host_t **out)
{
    if (!sys || !wake || !out)
        return -EINVAL;
    actor_host_t *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->sys = sys;
    h->timer_floor_ns = HOST_TIMER_FLOOR_NS;
    h->wake = wake;
    h->ctx = ctx;
    pthread_mutex_init(&h->lock, NULL);
    *out = h;
    return 0;
}

/* sched_make_runnable's first step for a pinned actor. false: released (H3). */
bool host_push(actor_host_t *h, actor_t *a)
{
    pthread_mutex_lock(&h->lock);
    if (h->released) {
        pthread_mutex_unlock(&h->lock);
        return false;
    }
    bool was_empty = h->head == NULL;
    a->host_next = NULL;
    if (h->tail)
        h->tail->host_next = a;
    else
        h->head = a;
    h->tail = a;
    pthread_mutex_unlock(&h->lock);
    if (was_empty)
        h->wake(h->ctx);
    return true;
}

static actor_t *host_pop(actor_host_t *h)
{
    pthread_mutex_lock(&h->lock);
    actor_t *a = h->head;
    if (a) {
        h->head = a->host_next;
        if (!h->head)
            h->tail = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    return a;
}

bool host_timer_arm(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data, size_t len,
                    uint64_t delay_ns, actor_timer_t *out, int *rc)
{
    actor_host_t *h = tl_host;
    if (!h || h->sys != sys || !tl_running || tl_running->self != to)
        return false;   /* not an actor arming for itself on its host */
    if (delay_ns != 0 && delay_ns < h->timer_floor_ns)
        return false;   /* shorter than its owner's resolution: the timer thread's */
    host_timer_t *t = malloc(sizeof *t + len);
    if (!t) {
        *rc = -ENOMEM;
        return true;
    }
    t->deadline = host_now_ns() + delay_ns;
    t->to = to;
    t->type = type;
    t->len = len;
    if (len)
        memcpy(t->data, data, len);
    pthread_mutex_lock(&h->lock);
    if (h->released) {
        pthread_mutex_unlock(&h->lock);
        free(t);
        return false;   /* H3: the timer thread takes it */
    }
    t->id = HOST_TIMER_ID_BIT | ++h->timer_count;
    host_timer_t **at = &h->timers;
    while (*at && (*at)->deadline <= t->deadline)   /* equal deadlines: after, in arming order */
        at = &(*at)->next;
    t->next = *at;
    *at = t;
    pthread_mutex_unlock(&h->lock);
    if (out)
        *out = t->id;
    *rc = 0;
    return true;
}

/* H4: a held timer is the actor's own, so only that actor cancels it, while
 * it runs on its host (a pinned actor runs nowhere else). One already sent
 * is in the mailbox and arrives; one handed to the timer thread at release
 * (H3) has a new id there, so this id no longer names it: -ENOENT, and its
 * message arrives. Both are what actor_timer_cancel promises. */
int host_timer_cancel(actor_system_t *sys, actor_timer_t id)
{
    actor_host_t *h = tl_host;
    if (!h || h->sys != sys)
        return -ENOENT;
    int rc = -ENOENT;
    host_timer_t *gone = NULL;
    pthread_mutex_lock(&h->lock);
    for (host_timer_t **at = &h->timers; *at; at = &(*at)->next) {
        if ((*at)->id == id) {
            gone = *at;
            *at = gone->next;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&h->lock);
    free(gone);
    return rc;
}

/* H4: the host's timers that are due, sent from this (the host) thread. */
static void fire_due(actor_host_t *h)
{
    uint64_t now = host_now_ns();
    for (;;) {
        pthread_mutex_lock(&h->lock);
        host_timer_t *t = h->timers;
        if (!t || t->deadline > now) {
            pthread_mutex_unlock(&h->lock);
            return;
        }
        h->timers = t->next;
        pthread_mutex_unlock(&h->lock);
        actor_send(h->sys, t->to, t->type, t->len ? t->data : NULL, t->len);   /* -ESRCH: it stopped */
        free(t);
    }
}

unsigned actor_host_run(actor_host_t *h, unsigned max_runs)
{
    unsigned n = 0;
    actor_t *a;
    actor_host_t *outer = tl_host;
    tl_host = h;
    fire_due(h);
    while (n < max_runs && (a = host_pop(h)) != NULL) {
        tl_running = a;
        actor_run(h->sys, NULL, a);
        tl_running = NULL;
        n++;
    }
    fire_due(h);   /* delay 0 (a rest already over): its actor is pending now */
    tl_host = outer;
    return n;
}

void actor_host_set_timer_floor(actor_host_t *h, uint64_t min_ns)
{
    h->timer_floor_ns = min_ns;
}

uint64_t actor_host_next_deadline(actor_host_t *h)
{
    pthread_mutex_lock(&h->lock);
    uint64_t d = h->timers ? h->timers->deadline : 0;
    pthread_mutex_unlock(&h->lock);
    return d;
}

bool actor_host_pending(actor_host_t *h)
{
    pthread_mutex_lock(&h->lock);
    bool any = h->head != NULL;
    pthread_mutex_unlock(&h->lock);
    return any;
}

int actor_spawn_on(actor_system_t *sys, actor_host_t *host, actor_behaviour_fn behaviour, void *state,
                   actor_ref_t *out)
{
    return actor_spawn_pinned(sys, host, behaviour, state, out);
}

void actor_host_release(actor_host_t *h)
{
    actor_t *a;
    pthread_mutex_lock(&h->lock);
    h->released = true;
    a = h->head;
    h->head = h->tail = NULL;
    host_timer_t *timers = h->timers;
    h->timers = NULL;
    pthread_mutex_unlock(&h->lock);
    uint64_t now = host_now_ns();
    for (host_timer_t *t = timers, *next; t; t = next) {   /* H3, H4: to the timer thread */
        next = t->next;
        actor_send_after(h->sys, t->to, t->type, t->len ? t->data : NULL, t->len,
                         t->deadline > now ? t->deadline - now : 0, NULL);
        free(t);
    }
    while (a) {
        actor_t *next = a->host_next;
        sched_make_runnable(h->sys, a);   /* released: to the workers (H3) */
        a = next;
    }
}

void actor_host_destroy(actor_host_t *h)
{
    if (!h)
        return;
    for (host_timer_t *t = h->timers, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    pthread_mutex_destroy(&h->lock);
    free(h);
}
