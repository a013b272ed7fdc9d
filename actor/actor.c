/*
 * actor/actor.c -- the system, the actor table (handles), send, stop, the
 * actor run loop, counters, shutdown.
 *
 * Handles. Actors live in a table of slots allocated with the system and
 * never freed before it, so a reference can always be dereferenced; the
 * slot's control word (internal.h) decides whether a send is accepted:
 *  H1. A sender announces itself (fetch_add of 1 to the in-flight count) and
 *      in the same atomic step reads the generation and CLOSED. It proceeds
 *      only if the generation is its reference's and CLOSED is clear; it then
 *      pushes and leaves (in-flight -1, pushed +1, one fetch_add). A refused
 *      sender leaves at once (-1) and counts `refused`.
 *  H2. actor_stop sets CLOSED (CAS, only on the right generation). From then
 *      on no sender is accepted, so the set of accepted messages is fixed
 *      once the in-flight count is 0 with CLOSED set.
 *  H3. Whoever observes CLOSED, in-flight 0 and STOP_SENT clear (the stopper,
 *      or the last sender to leave) CASes STOP_SENT in and pushes the stop
 *      message, exactly once. Every accepted message was pushed before the
 *      pusher's CAS (their leave is release, the CAS acquire), so the stop
 *      message is the last one in the mailbox: the actor runs every accepted
 *      message, then gets ACTOR_STOPPED, then its slot is freed.
 *  H4. Freeing a slot bumps the generation and leaves CLOSED|STOP_SENT set,
 *      keeping the in-flight bits (stale senders still leaving); spawn clears
 *      CLOSED|STOP_SENT the same way. A stale reference therefore never
 *      matches (until the 26-bit generation wraps on that one slot).
 */
#include "actor/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t next_system_id = 1;

#define DEFAULT_MAX_ACTORS 16384u
#define LIMIT_MAX_ACTORS (1u << 24)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns)
{
    struct timespec ts = { 0, ns };
    nanosleep(&ts, NULL);
}

static actor_t *slot_of(actor_system_t *sys, actor_ref_t ref)
{
    uint32_t idx = (uint32_t)ref;
    if (idx == 0 || idx > sys->max_actors)
        return NULL;
    return &sys->slots[idx - 1];
}

static uint32_t ref_gen(actor_ref_t ref)
{
    return (uint32_t)(ref >> 32);
}


static actor_ref_t make_ref(uint32_t index, uint32_t gen)
{
    return ((uint64_t)gen << 32) | (uint64_t)(index + 1);
}

static int workers_from_env(unsigned *out)
{
    const char *e = getenv("RTUGW_WORKERS");
    if (e && *e) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(e, &end, 10);
        if (errno || *end || v < 1 || v > 1024)
            return -EINVAL;
        *out = (unsigned)v;
        return 0;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    *out = n >= 1 ? (unsigned)n : 1;
    return 0;
}

int actor_system_create(actor_system_t **out, const actor_config_t *config)
{
    actor_config_t cfg = config ? *config : (actor_config_t){ 0 };
    int rc;

    if (!out)
        return -EINVAL;
    *out = NULL;
    if (cfg.workers == 0 && (rc = workers_from_env(&cfg.workers)) != 0)
        return rc;
    if (cfg.max_actors == 0)
        cfg.max_actors = DEFAULT_MAX_ACTORS;
    if (cfg.workers > 1024 || cfg.max_actors > LIMIT_MAX_ACTORS)
        return -EINVAL;

    /* aligned_alloc, not calloc: the struct holds cache-line-aligned
     * members, and malloc promises only 8 bytes (armhf) or 16 (x86_64). */
    actor_system_t *sys = aligned_alloc(CACHE_LINE, sizeof *sys);
    if (!sys)
        return -ENOMEM;
    memset(sys, 0, sizeof *sys);
    sys->id = atomic_fetch_add_explicit(&next_system_id, 1, memory_order_relaxed);
    sys->nworkers = cfg.workers;
    sys->max_actors = cfg.max_actors;
    pthread_mutex_init(&sys->slot_lock, NULL);
    pthread_mutex_init(&sys->pool_lock, NULL);
    sys->slots = aligned_alloc(CACHE_LINE, sizeof(actor_t) * cfg.max_actors);
    sys->free_slots = malloc(sizeof(uint32_t) * cfg.max_actors);
    sys->workers = aligned_alloc(CACHE_LINE, sizeof(worker_t) * cfg.workers);
    if (!sys->slots || !sys->free_slots || !sys->workers) {
        free(sys->slots);
        free(sys->free_slots);
        free(sys->workers);
        free(sys);
        return -ENOMEM;
    }
    memset(sys->slots, 0, sizeof(actor_t) * cfg.max_actors);
    memset(sys->workers, 0, sizeof(worker_t) * cfg.workers);
    for (uint32_t i = 0; i < cfg.max_actors; i++) {
        actor_t *a = &sys->slots[i];
        a->index = i;
        atomic_store_explicit(&a->ctl, CTL_CLOSED | CTL_STOP_SENT, memory_order_relaxed);
        atomic_store_explicit(&a->mb.head, MB_EMPTY, memory_order_relaxed);
        sys->free_slots[cfg.max_actors - 1 - i] = i;
    }
    sys->nfree = cfg.max_actors;
    if ((rc = timers_start(sys)) != 0 || (rc = sched_start(sys)) != 0) {
        sys->shut_down = true;
        sched_stop(sys);
        actor_system_destroy(sys);
        return rc;
    }
    *out = sys;
    return 0;
}

unsigned actor_system_workers(const actor_system_t *sys)
{
    return sys ? sys->nworkers : 0;
}

int actor_spawn(actor_system_t *sys, actor_behaviour_fn behaviour, void *state, actor_ref_t *out)
{
    return actor_spawn_pinned(sys, NULL, behaviour, state, out);
}

int actor_spawn_pinned(actor_system_t *sys, actor_host_t *host, actor_behaviour_fn behaviour, void *state,
                       actor_ref_t *out)
{
    if (!sys || !behaviour || !out)
        return -EINVAL;
    if (atomic_load_explicit(&sys->closing, memory_order_acquire))
        return -ESHUTDOWN;
    amsg_t *stub = pool_alloc(sys, 0);
    amsg_t *stop = pool_alloc(sys, 0);
    if (!stub || !stop) {
        if (stub)
            pool_free(sys, stub);
        if (stop)
            pool_free(sys, stop);
        return -ENOMEM;
    }
    pthread_mutex_lock(&sys->slot_lock);
    if (sys->nfree == 0) {
        pthread_mutex_unlock(&sys->slot_lock);
        pool_free(sys, stub);
        pool_free(sys, stop);
        return -EAGAIN;
    }
    actor_t *a = &sys->slots[sys->free_slots[--sys->nfree]];
    pthread_mutex_unlock(&sys->slot_lock);
    atomic_fetch_add_explicit(&sys->live, 1, memory_order_acq_rel);

    stub->kind = AMSG_USER;
    stop->kind = AMSG_STOP;
    stop->type = ACTOR_STOPPED;
    stop->len = 0;
    mb_init(&a->mb, &a->mbt, stub);
    a->fn = behaviour;
    a->state = state;
    a->stop_msg = stop;
    a->host = host;   /* before the release below publishes the actor */
    uint64_t c = atomic_load_explicit(&a->ctl, memory_order_relaxed), open;
    do {
        a->popped = CTL_PUSHED(c);
        a->self = make_ref(a->index, CTL_GEN(c));
        open = c & ~(CTL_CLOSED | CTL_STOP_SENT);
        /* release: publishes fn, state, the mailbox to senders (their
         * fetch_add on ctl is acquire). */
    } while (!atomic_compare_exchange_weak_explicit(&a->ctl, &c, open, memory_order_release,
                                                    memory_order_relaxed));
    *out = a->self;
    return 0;
}

static void push_internal(actor_system_t *sys, actor_t *a, amsg_t *m)
{
    if (mb_push(&a->mb, m))
        sched_make_runnable(sys, a);
}

/* H3: queue the stop message if this caller is the one to do it. */
static void stop_check(actor_system_t *sys, actor_t *a)
{
    uint64_t c = atomic_load_explicit(&a->ctl, memory_order_acquire);
    while ((c & CTL_CLOSED) && !(c & CTL_STOP_SENT) && !(c & CTL_INFLIGHT)) {
        /* acq_rel: acquire orders every accepted sender's push (their
         * release leave) before our push of the stop message. */
        if (atomic_compare_exchange_weak_explicit(&a->ctl, &c, c | CTL_STOP_SENT,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            push_internal(sys, a, a->stop_msg);
            return;
        }
    }
}

/* H1: leave; `add` is -1 (refused) or PUSH_UNIT - 1 (accepted). release:
 * our push happens before whoever sees the count drop and pushes the stop. */
static inline void sender_leave(actor_system_t *sys, actor_t *a, uint64_t add)
{
    uint64_t c = atomic_fetch_add_explicit(&a->ctl, add, memory_order_acq_rel);
    if (__builtin_expect((c & CTL_CLOSED) != 0, 0))
        stop_check(sys, a);
}

int actor_send(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data, size_t len)
{
    if (len > ACTOR_MSG_MAX)
        return -EMSGSIZE;
    if (!sys || (len && !data) || type >= ACTOR_TYPE_RESERVED)
        return -EINVAL;
    actor_t *a = slot_of(sys, to);
    if (!a)
        return -EINVAL;
    worker_t *w = sched_current(sys);
    /* acquire: pairs with spawn's release, so fn/state/mailbox are seen. */
    uint64_t c = atomic_fetch_add_explicit(&a->ctl, 1, memory_order_acquire);
    if ((c & CTL_CLOSED) || CTL_GEN(c) != ref_gen(to)) {
        sender_leave(sys, a, (uint64_t)-1);
        STAT(sys, w, refused, 1);
        return -ESRCH;
    }
    amsg_t *m = pool_alloc(sys, len);
    if (!m) {
        sender_leave(sys, a, (uint64_t)-1);
        return -ENOMEM;
    }
    m->type = type;
    m->len = (uint16_t)len;
    m->kind = AMSG_USER;
    if (len)
        memcpy(m->data, data, len);
    STAT(sys, w, enqueue, 1);
    if (mb_push(&a->mb, m))
        sched_make_runnable(sys, a);
    sender_leave(sys, a, CTL_PUSH_UNIT - 1);
    return 0;
}

int actor_stop(actor_system_t *sys, actor_ref_t ref)
{
    if (!sys)
        return -EINVAL;
    actor_t *a = slot_of(sys, ref);
    if (!a)
        return -EINVAL;
    uint64_t c = atomic_load_explicit(&a->ctl, memory_order_acquire);
    do {
        if ((c & CTL_CLOSED) || CTL_GEN(c) != ref_gen(ref))
            return -ESRCH;
    } while (!atomic_compare_exchange_weak_explicit(&a->ctl, &c, c | CTL_CLOSED,
                                                    memory_order_acq_rel, memory_order_acquire));
    stop_check(sys, a);
    return 0;
}

/* The stop message was popped: every accepted message has run (H3). */
static void finalize(actor_system_t *sys, worker_t *w, actor_t *a)
{
    (void)w;
    a->fn(sys, a->self, a->state, ACTOR_STOPPED, NULL, 0);
    pool_free(sys, a->mbt.tail); /* the stop message, the last ever pushed */
    a->mbt.tail = NULL;
    a->fn = NULL;
    a->state = NULL;
    a->stop_msg = NULL;
    a->host = NULL;
    /* No sender touches head any more (all refused): reset it so the
     * quiescence scan reads a free slot as idle. */
    atomic_store_explicit(&a->mb.head, MB_EMPTY, memory_order_relaxed);
    uint64_t c = atomic_load_explicit(&a->ctl, memory_order_relaxed), dead;
    do {
        uint64_t gen = (CTL_GEN(c) + 1u) & (((uint64_t)1 << CTL_GEN_BITS) - 1);
        dead = (c & ~CTL_GEN_MASK) | (gen << CTL_GEN_SHIFT) | CTL_CLOSED | CTL_STOP_SENT;
    } while (!atomic_compare_exchange_weak_explicit(&a->ctl, &c, dead, memory_order_release,
                                                    memory_order_relaxed));
    pthread_mutex_lock(&sys->slot_lock);
    sys->free_slots[sys->nfree++] = a->index;
    pthread_mutex_unlock(&sys->slot_lock);
    atomic_fetch_sub_explicit(&sys->live, 1, memory_order_acq_rel);
}

void actor_run(actor_system_t *sys, worker_t *w, actor_t *a)
{
    unsigned n = 0;
    amsg_t *m, *consumed;

    while (n < ACTOR_BATCH && (m = mb_pop(&a->mbt, &consumed)) != NULL) {
        pool_free(sys, consumed);
        if (__builtin_expect(m->kind == AMSG_STOP, 0)) {
            finalize(sys, w, a);
            return;
        }
        /* Depth: pushed minus popped, this one included. The pushed count
         * lags the push a little (it is bumped when the sender leaves), so
         * clamp to at least 1. relaxed: a statistic. */
        uint64_t c = atomic_load_explicit(&a->ctl, memory_order_relaxed);
        uint32_t depth = (CTL_PUSHED(c) - a->popped) & PUSH_COUNT_MASK;
        if (depth == 0 || depth > PUSH_COUNT_MASK / 2)
            depth = 1;
        a->popped = (a->popped + 1) & PUSH_COUNT_MASK;
        STAT(sys, w, dequeue, 1);
        STAT(sys, w, depth_sum, depth);
        if (w && depth > atomic_load_explicit(&w->stats.depth_peak, memory_order_relaxed))
            atomic_store_explicit(&w->stats.depth_peak, depth, memory_order_relaxed);
        a->fn(sys, a->self, a->state, m->type, m->data, m->len);
        n++;
    }
    if (mb_mark_empty(&a->mb, &a->mbt))
        return; /* idle: another thread may schedule it from now on */
    if (n == ACTOR_BATCH)
        STAT(sys, w, batch_limit, 1);
    /* Still runnable (more messages, or a push in progress): back of our
     * FIFO. Not a new empty -> non-empty transition, so no wake. A pinned
     * actor goes back to its host's queue (or, released, to a worker). */
    if (!w) {
        sched_make_runnable(sys, a);
        return;
    }
    runq_push(&w->rq, a);
}

static bool quiescent(actor_system_t *sys)
{
    if (!sched_all_parked(sys))
        return false;
    for (unsigned i = 0; i < sys->max_actors; i++) {
        actor_t *a = &sys->slots[i];
        if (atomic_load_explicit(&a->ctl, memory_order_acquire) & CTL_INFLIGHT)
            return false;
        if (!mb_is_idle(&a->mb))
            return false;
    }
    return sched_all_parked(sys);
}

int actor_system_shutdown(actor_system_t *sys, uint64_t drain_timeout_ns)
{
    if (!sys)
        return -EINVAL;
    if (sys->shut_down)
        return sys->shutdown_result;
    timers_stop(sys);
    int result = 0;
    uint64_t deadline = now_ns() + drain_timeout_ns;
    while (!quiescent(sys)) {
        if (now_ns() >= deadline) {
            result = -ETIMEDOUT;
            break;
        }
        sleep_ns(200000);
    }
    atomic_store_explicit(&sys->closing, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&sys->live, memory_order_acquire) != 0) {
        for (unsigned i = 0; i < sys->max_actors; i++) {
            uint64_t c = atomic_load_explicit(&sys->slots[i].ctl, memory_order_acquire);
            if (!(c & CTL_CLOSED))
                actor_stop(sys, make_ref(i, CTL_GEN(c)));
        }
        if (atomic_load_explicit(&sys->live, memory_order_acquire) != 0)
            sleep_ns(200000);
    }
    sched_stop(sys);
    sys->shut_down = true;
    sys->shutdown_result = result;
    return result;
}

void actor_system_destroy(actor_system_t *sys)
{
    if (!sys)
        return;
    if (!sys->shut_down)
        actor_system_shutdown(sys, 0);
    timers_free(sys);   /* the workers are joined: nobody arms a timer now */
    for (unsigned i = 0; i < sys->nworkers; i++)
        runq_free(&sys->workers[i].rq);
    pool_destroy(sys);
    pthread_mutex_destroy(&sys->slot_lock);
    pthread_mutex_destroy(&sys->pool_lock);
    free(sys->slots);
    free(sys->free_slots);
    free(sys->workers);
    free(sys);
}

static void add_block(actor_stats_t *s, const stats_block_t *b)
{
#define RD(f) atomic_load_explicit(&b->f, memory_order_relaxed)
    s->enqueue += RD(enqueue);
    s->dequeue += RD(dequeue);
    s->depth_sum += RD(depth_sum);
    uint64_t peak = RD(depth_peak);
    if (peak > s->depth_peak)
        s->depth_peak = peak;
    s->wakeups += RD(wakeups);
    s->parks += RD(parks);
    s->steals += RD(steals);
    s->batch_limit += RD(batch_limit);
    s->refused += RD(refused);
#undef RD
}

void actor_system_stats(const actor_system_t *sys, actor_stats_t *out)
{
    *out = (actor_stats_t){ 0 };
    if (!sys)
        return;
    for (unsigned i = 0; i < sys->nworkers; i++)
        add_block(out, &sys->workers[i].stats);
    add_block(out, &sys->ext);
    out->depth_mean = out->dequeue ? (double)out->depth_sum / (double)out->dequeue : 0.0;
}
