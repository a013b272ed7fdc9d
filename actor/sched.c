/*
 * actor/sched.c -- worker threads, run queues, stealing and parking.
 *
 * Where a runnable actor goes (sched_make_runnable is called only by the
 * thread whose push found the mailbox EMPTY, mailbox.h M3):
 *  - on a worker (the sender is a behaviour): into that worker's LIFO slot,
 *    so the reply in a ping-pong runs next, on the same core, with a warm
 *    cache. An actor displaced from the slot goes to the tail of the
 *    worker's FIFO run queue. The slot is private to its worker (never
 *    stolen); after LIFO_MAX consecutive runs from it the worker demotes its
 *    occupant to the FIFO tail and takes the FIFO head, so actors in the FIFO
 *    are not starved by a ping-pong pair.
 *  - from any other thread (the inject path): onto a worker's FIFO run
 *    queue, round-robin per sending thread.
 * An actor whose run hit ACTOR_BATCH messages, or whose mailbox refilled
 * while it ran, goes to the tail of its worker's FIFO.
 *
 * Parking protocol (no lost wake-up). Shared: n_searching (workers looking
 * for work), n_parked; per worker: state RUNNING / PARKED / WOKEN (the
 * futex word). All operations named here are seq_cst, so they lie in one
 * total order S.
 *  Worker W without work: n_searching++; spin SPIN_ROUNDS times trying its
 *  own queue and stealing; then state := PARKED; n_parked++; n_searching--;
 *  re-check every run queue (enq_pos != deq_pos, runq.h R3) and `stopping`;
 *  if anything, leave PARKED and search again; else futex-wait while state
 *  is PARKED.
 *  Notifier N, after pushing an actor onto a FIFO run queue (the CAS on
 *  enq_pos): if n_searching == 0 and n_parked > 0, CAS some worker's state
 *  PARKED -> WOKEN, n_parked--, futex-wake it.
 * Claim: after N's push, some worker will find the actor. Either W's
 * re-check follows N's CAS in S (W sees the item and does not sleep), or it
 * precedes it; then W's n_parked++ and n_searching-- precede N's loads, so N
 * sees W counted as parked. If N sees n_searching > 0, that searcher's own
 * n_searching-- (and re-check) follows N's load, so it sees the item. If N
 * sees no searcher, it scans for a PARKED worker: W is PARKED unless it was
 * since woken, and a woken worker searches again after the wake, which
 * follows N's push. A futex wake between W's re-check and its futex_wait is
 * not lost: futex_wait returns at once when the word is no longer PARKED.
 * The LIFO slot needs no wake: its owner is running and will take it. An
 * actor displaced from the slot by a newly runnable one goes to the FIFO
 * with a notify (that is the transition's push). A demotion after LIFO_MAX
 * and a reschedule after a batch notify no one: the actor was runnable
 * already and its own worker, which is running, will reach it.
 * So wakes happen only when an actor becomes runnable (the empty -> non-empty
 * transition of its mailbox) and lands on a FIFO, never per message.
 * Known cost: a parked worker is not woken to help with actors that keep
 * cycling on one worker without a new transition (at most the one running
 * and the one in the LIFO slot); it is woken by the next transition.
 */
#include "actor/internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Thread_local worker_t *tl_worker;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

worker_t *sched_current(const actor_system_t *sys)
{
    worker_t *w = tl_worker;
    return w && w->sys == sys ? w : NULL;
}

static bool wake_worker(actor_system_t *sys, worker_t *from, worker_t *v)
{
    uint32_t expect = W_PARKED;
    if (atomic_load_explicit(&v->state, memory_order_relaxed) != W_PARKED ||
        !atomic_compare_exchange_strong_explicit(&v->state, &expect, W_WOKEN,
                                                 memory_order_seq_cst, memory_order_relaxed))
        return false;
    atomic_fetch_sub_explicit(&sys->n_parked, 1, memory_order_seq_cst);
    futex_wake(&v->state);
    STAT(sys, from, wakeups, 1);
    return true;
}

static void notify(actor_system_t *sys, worker_t *from)
{
    if (atomic_load_explicit(&sys->n_searching, memory_order_seq_cst) != 0)
        return;
    if (atomic_load_explicit(&sys->n_parked, memory_order_seq_cst) == 0)
        return;
    unsigned n = sys->nworkers, start = from ? from->index + 1 : 0;
    for (unsigned i = 0; i < n; i++)
        if (wake_worker(sys, from, &sys->workers[(start + i) % n]))
            return;
}

void sched_make_runnable(actor_system_t *sys, actor_t *a)
{
    if (a->host && host_push(a->host, a))
        return;   /* pinned: its host runs it (host.c, H1) */
    worker_t *w = sched_current(sys);
    if (w) {
        actor_t *old = w->lifo;
        w->lifo = a;
        if (old) {
            runq_push(&w->rq, old);
            notify(sys, w);
        }
        return;
    }
    static _Thread_local unsigned rr;
    w = &sys->workers[rr++ % sys->nworkers];
    runq_push(&w->rq, a);
    notify(sys, NULL);
}

static actor_t *local_next(worker_t *w)
{
    actor_t *a = w->lifo;
    if (a) {
        w->lifo = NULL;
        if (w->lifo_streak < LIFO_MAX) {
            w->lifo_streak++;
            return a;
        }
        /* Demoted to the FIFO tail: not a new transition, no wake (this
         * worker is running and will reach it). */
        runq_push(&w->rq, a);
    }
    w->lifo_streak = 0;
    return runq_pop(&w->rq);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static actor_t *steal(actor_system_t *sys, worker_t *w)
{
    unsigned n = sys->nworkers;
    if (n < 2)
        return NULL;
    unsigned start = (unsigned)(xorshift(&w->rng) % n);
    for (unsigned i = 0; i < n; i++) {
        worker_t *v = &sys->workers[(start + i) % n];
        if (v == w)
            continue;
        actor_t *a = runq_pop(&v->rq);
        if (a) {
            STAT(sys, w, steals, 1);
            return a;
        }
    }
    return NULL;
}

static bool any_work(actor_system_t *sys)
{
    for (unsigned i = 0; i < sys->nworkers; i++)
        if (runq_maybe_nonempty(&sys->workers[i].rq))
            return true;
    return false;
}

/* NULL only when the system is stopping and no work is left. */
static actor_t *find_work(actor_system_t *sys, worker_t *w)
{
    for (;;) {
        atomic_fetch_add_explicit(&sys->n_searching, 1, memory_order_seq_cst);
        for (unsigned spin = 0; spin < SPIN_ROUNDS; spin++) {
            actor_t *a = runq_pop(&w->rq);
            if (!a)
                a = steal(sys, w);
            if (a) {
                atomic_fetch_sub_explicit(&sys->n_searching, 1, memory_order_seq_cst);
                return a;
            }
            if (atomic_load_explicit(&sys->stopping, memory_order_acquire)) {
                atomic_fetch_sub_explicit(&sys->n_searching, 1, memory_order_seq_cst);
                return NULL;
            }
            cpu_relax();
        }
        atomic_store_explicit(&w->state, W_PARKED, memory_order_seq_cst);
        atomic_fetch_add_explicit(&sys->n_parked, 1, memory_order_seq_cst);
        atomic_fetch_sub_explicit(&sys->n_searching, 1, memory_order_seq_cst);
        if (any_work(sys) || atomic_load_explicit(&sys->stopping, memory_order_seq_cst)) {
            uint32_t expect = W_PARKED;
            if (atomic_compare_exchange_strong_explicit(&w->state, &expect, W_RUNNING,
                                                        memory_order_seq_cst,
                                                        memory_order_relaxed))
                atomic_fetch_sub_explicit(&sys->n_parked, 1, memory_order_seq_cst);
            else /* a waker took us out of PARKED and already counted it */
                atomic_store_explicit(&w->state, W_RUNNING, memory_order_relaxed);
            /* The item may still be being published by a preempted
             * producer: let it run rather than spin against it. */
            sched_yield();
            continue;
        }
        STAT(sys, w, parks, 1);
        /* acquire: pairs with the waker's CAS; what the waker published
         * before waking us is visible when we search again. */
        while (atomic_load_explicit(&w->state, memory_order_acquire) == W_PARKED)
            futex_wait(&w->state, W_PARKED);
        atomic_store_explicit(&w->state, W_RUNNING, memory_order_relaxed);
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    actor_system_t *sys = w->sys;

    tl_worker = w;
    for (;;) {
        actor_t *a = local_next(w);
        if (!a)
            a = find_work(sys, w);
        if (!a)
            break;
        actor_run(sys, w, a);
    }
    tl_worker = NULL;
    return NULL;
}

int sched_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg, const char *name)
{
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);

    if (rc != 0)
        return -rc;
    rc = pthread_attr_setstacksize(&attr, ACTOR_STACK_SIZE);
    if (rc == 0)
        rc = pthread_create(thread, &attr, fn, arg);
    if (rc == 0)   /* what `top -H` and /proc/PID/task/N/comm show; best effort */
        pthread_setname_np(*thread, name);
    pthread_attr_destroy(&attr);
    return -rc;
}

int sched_start(actor_system_t *sys)
{
    size_t cap = 2;
    while (cap < sys->max_actors)
        cap *= 2;
    for (unsigned i = 0; i < sys->nworkers; i++) {
        worker_t *w = &sys->workers[i];
        w->sys = sys;
        w->index = i;
        w->rng = 0x9E3779B97F4A7C15ull * (i + 1);
        atomic_store_explicit(&w->state, W_RUNNING, memory_order_relaxed);
        if (runq_init(&w->rq, cap) != 0)
            return -ENOMEM;
    }
    for (unsigned i = 0; i < sys->nworkers; i++) {
        worker_t *w = &sys->workers[i];
        char name[16];
        snprintf(name, sizeof name, "rtugw-worker%u", i % 100u);
        int rc = sched_thread_start(&w->thread, worker_main, w, name);
        if (rc != 0)
            return rc;
        w->started = true;
    }
    return 0;
}

/* Called when no actor is left: makes every worker leave its loop. */
void sched_stop(actor_system_t *sys)
{
    atomic_store_explicit(&sys->stopping, 1, memory_order_seq_cst);
    for (unsigned i = 0; i < sys->nworkers; i++)
        wake_worker(sys, NULL, &sys->workers[i]);
    for (unsigned i = 0; i < sys->nworkers; i++) {
        if (sys->workers[i].started)
            pthread_join(sys->workers[i].thread, NULL);
        sys->workers[i].started = false;
    }
}

bool sched_all_parked(actor_system_t *sys)
{
    return atomic_load_explicit(&sys->n_parked, memory_order_seq_cst) == sys->nworkers;
}
