/*
 * actor/internal.h -- shared by actor/'s own .c files only.
 */
#ifndef RTUGW_ACTOR_INTERNAL_H
#define RTUGW_ACTOR_INTERNAL_H

#include "actor/actor.h"
#include "actor/mailbox.h"
#include "actor/runq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CACHE_LINE 64

/* Messages per actor run before it goes to the back of the run queue. */
#define ACTOR_BATCH 64
/*
 * Consecutive runs from the LIFO slot before the worker takes its FIFO. 32,
 * not 8: on the 16-core machine 8 made a worker with two ping-pong pairs
 * hand one to its FIFO every 8 runs, where idle workers stole it (4-6x the
 * steals) and paid the cache misses; 32 was 12 % faster at 15 workers
 * (docs/actor.md, "Scaling"). The cost: an actor waiting in the FIFO behind a
 * ping-pong pair waits up to 32 runs (at most 32 x ACTOR_BATCH messages).
 * Both tunables may be overridden with -D for an A/B build.
 */
#ifndef LIFO_MAX
#define LIFO_MAX 32
#endif
/* Search rounds (steal attempts with a pause) before a worker parks. */
#ifndef SPIN_ROUNDS
#define SPIN_ROUNDS 64
#endif
/*
 * The stack of each worker and of the timer thread: 256 KiB, instead of what
 * glibc derives from RLIMIT_STACK (8 MiB under systemd and most shells).
 * Handlers do not block and keep their frames small: the most any rtugw
 * thread touched, a debug log of 125-register frames under load, was 20 KiB
 * with glibc's TLS and thread descriptor (docs/bench-gateway.md, "Footprint"),
 * so this leaves 12x for deeper handlers and sanitizer builds. What it saves
 * is not resident memory (untouched stack pages never are) but address space
 * and commit charge: glibc maps the whole stack writable up front, which under
 * strict overcommit (vm.overcommit_memory = 2, found on small boxes) counts
 * against the box's RAM and swap: 3 x 8 MiB for a 2-worker gateway.
 */
#ifndef ACTOR_STACK_SIZE
#define ACTOR_STACK_SIZE (256u * 1024u)
#endif

/*
 * The slot's control word, one atomic 64-bit value (see actor.c, "handles"):
 *   bits  0-11  senders in flight (between their check and their push)
 *   bit     12  CLOSED: sends are refused
 *   bit     13  STOP_SENT: the stop message has been queued (or the slot is free)
 *   bits 14-39  generation (26 bits), matched against the reference
 *   bits 40-63  user messages pushed, mod 2^24 (for the depth counter)
 */
#define CTL_INFLIGHT ((uint64_t)0xFFF)
#define CTL_CLOSED ((uint64_t)1 << 12)
#define CTL_STOP_SENT ((uint64_t)1 << 13)
#define CTL_GEN_SHIFT 14
#define CTL_GEN_BITS 26
#define CTL_GEN_MASK ((((uint64_t)1 << CTL_GEN_BITS) - 1) << CTL_GEN_SHIFT)
#define CTL_PUSH_SHIFT 40
#define CTL_PUSH_UNIT ((uint64_t)1 << CTL_PUSH_SHIFT)
#define CTL_GEN(c) ((uint32_t)(((c) & CTL_GEN_MASK) >> CTL_GEN_SHIFT))
#define CTL_PUSHED(c) ((uint32_t)((c) >> CTL_PUSH_SHIFT))
#define PUSH_COUNT_MASK 0xFFFFFFu

typedef struct actor {
    /* Producer line: written by every sender. */
    _Alignas(CACHE_LINE) _Atomic uint64_t ctl;
    mb_head_t mb;
    /* Consumer line: touched by the one worker running the actor (and by the
     * spawner before the actor is reachable). */
    _Alignas(CACHE_LINE) mb_tail_t mbt;
    actor_behaviour_fn fn;
    void *state;
    actor_ref_t self;
    amsg_t *stop_msg; /* allocated at spawn, so stopping never needs memory */
    uint32_t popped; /* user messages popped, mod 2^24 */
    uint32_t index;
    actor_host_t *host;         /* pinned: runs on this host's thread (host.c); set at spawn */
    struct actor *host_next;    /* the host's queue link, under its lock */
} actor_t;

/* Per-worker counters: written only by the owner (relaxed load + store, no
 * read-modify-write), read by anyone (relaxed). The external block is
 * shared by non-worker threads and uses relaxed fetch_add. */
typedef struct stats_block {
    _Atomic uint64_t enqueue, dequeue, depth_sum, depth_peak, wakeups, parks, steals,
        batch_limit, refused;
} stats_block_t;

enum { W_RUNNING = 0, W_PARKED = 1, W_WOKEN = 2 };

typedef struct worker {
    _Alignas(CACHE_LINE) runq_t rq;
    /* Owner-only fields. */
    _Alignas(CACHE_LINE) actor_t *lifo;
    unsigned lifo_streak;
    unsigned index;
    uint64_t rng;
    struct actor_system *sys;
    pthread_t thread;
    bool started;
    /* Parking word (futex), written by the owner and by wakers. */
    _Alignas(CACHE_LINE) _Atomic uint32_t state;
    _Alignas(CACHE_LINE) stats_block_t stats;
} worker_t;

#define POOL_CLASSES 3

typedef struct timer_wheel timer_wheel_t; /* timer.c */

struct actor_system {
    uint64_t id; /* unique per process, keys the thread-local caches */
    unsigned nworkers;
    unsigned max_actors;
    actor_t *slots;
    worker_t *workers;

    _Alignas(CACHE_LINE) _Atomic unsigned n_searching;
    _Alignas(CACHE_LINE) _Atomic unsigned n_parked;
    _Alignas(CACHE_LINE) _Atomic int stopping; /* workers exit when they find no work */
    _Atomic int closing;                       /* spawn refused */
    _Atomic unsigned live;                     /* actors spawned and not finalized */

    pthread_mutex_t slot_lock; /* spawn and slot release only, never send */
    uint32_t *free_slots;
    unsigned nfree;

    pthread_mutex_t pool_lock; /* the depot: once per POOL_MAG messages at most */
    amsg_t *depot[POOL_CLASSES]; /* chains of POOL_MAG free cells */
    void **slabs;
    size_t nslabs, cap_slabs;

    stats_block_t ext;
    timer_wheel_t *timers;
    bool shut_down;
    int shutdown_result;
};

/* pool.c */
amsg_t *pool_alloc(actor_system_t *sys, size_t len);
void pool_free(actor_system_t *sys, amsg_t *m);
void pool_destroy(actor_system_t *sys);

/* sched.c */
worker_t *sched_current(const actor_system_t *sys);
void sched_make_runnable(actor_system_t *sys, actor_t *a);
int sched_start(actor_system_t *sys);
/* pthread_create with an ACTOR_STACK_SIZE stack; 0 or -errno. */
/* A thread of ACTOR_STACK_SIZE named `name` (at most 15 characters). */
int sched_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg, const char *name);
void sched_stop(actor_system_t *sys);
bool sched_all_parked(actor_system_t *sys);

/* actor.c; w is NULL when a host runs a pinned actor */
void actor_run(actor_system_t *sys, worker_t *w, actor_t *a);
int actor_spawn_pinned(actor_system_t *sys, actor_host_t *host, actor_behaviour_fn behaviour, void *state,
                       actor_ref_t *out);

/* host.c */
bool host_push(actor_host_t *h, actor_t *a);
/* timer.c's arm() asks first: a one-shot timer that a pinned actor, running
 * on its host, arms for itself is kept by the host (H4). true: taken, *rc set
 * (and *out, when not NULL, an id with HOST_TIMER_ID_BIT set). */
#define HOST_TIMER_ID_BIT (1ull << 63)   /* the wheel's ids count up from 1: never this high */
bool host_timer_arm(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data, size_t len,
                    uint64_t delay_ns, actor_timer_t *out, int *rc);
/* actor_timer_cancel of a host's timer: by its own actor on its host. */
int host_timer_cancel(actor_system_t *sys, actor_timer_t id);

/* timer.c */
int timers_start(actor_system_t *sys);
void timers_stop(actor_system_t *sys);
void timers_free(actor_system_t *sys);

/* Counts on the calling worker's block (owner-only: relaxed load and store,
 * no locked instruction) or, from any other thread, on the external block
 * (relaxed fetch_add). Relaxed: counters order nothing. */
#define STAT(sys, w, field, n)                                                              \
    do {                                                                                    \
        if (w)                                                                              \
            atomic_store_explicit(&(w)->stats.field,                                        \
                                  atomic_load_explicit(&(w)->stats.field,                   \
                                                       memory_order_relaxed) + (n),         \
                                  memory_order_relaxed);                                    \
        else                                                                                \
            atomic_fetch_add_explicit(&(sys)->ext.field, (n), memory_order_relaxed);        \
    } while (0)

#endif
