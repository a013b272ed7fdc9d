/*
 * actor/actor.h -- the actor scheduler: actors with lock-free mailboxes run
 * by a pool of worker threads, timers, and per-worker counters. Owns:
 * actors, mailboxes, workers, run queues, timers. May call: libc and
 * pthreads only.
 *
 * The only header other folders include. Everything behind it is opaque;
 * see docs/actor.md for the design and its invariants.
 *
 * Errors are negative errno values:
 *   -EINVAL    a bad argument (NULL, a malformed reference, a reserved type)
 *   -ENOMEM    out of memory
 *   -EAGAIN    the actor table is full (actor_config_t.max_actors)
 *   -ESRCH     the target has stopped (or was never spawned): refused, counted
 *   -EMSGSIZE  payload larger than ACTOR_MSG_MAX
 *   -ESHUTDOWN the system is shutting down (spawn only)
 */
#ifndef RTUGW_ACTOR_ACTOR_H
#define RTUGW_ACTOR_ACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct actor_system actor_system_t;

/* A reference to an actor: a slot index and a generation. Safe to keep and
 * send to after the actor stopped (the send is refused and counted). */
typedef uint64_t actor_ref_t;
#define ACTOR_REF_NONE ((actor_ref_t)0)

typedef uint64_t actor_timer_t;

/* Largest payload a message carries (bytes, copied into a pooled cell). */
#define ACTOR_MSG_MAX 1072u

/* Message types at or above this are reserved for the scheduler. */
#define ACTOR_TYPE_RESERVED 0xFFFFFF00u
/* The type of the last call an actor's behaviour gets, after every message
 * that was accepted for it: free the state here. data is NULL, len 0. */
#define ACTOR_STOPPED 0xFFFFFFFFu

/* An actor's behaviour: runs on a worker thread, one message at a time per
 * actor (never concurrently with itself). It must not block. data is valid
 * only during the call. */
typedef void (*actor_behaviour_fn)(actor_system_t *sys, actor_ref_t self, void *state,
                                   uint32_t type, const void *data, size_t len);

typedef struct actor_config {
    unsigned workers;    /* 0: $RTUGW_WORKERS if set, else online cores */
    unsigned max_actors; /* 0: 16384; live actors at once (slots) */
} actor_config_t;

/* Counters, per worker, summed on read. Messages are counted by the thread
 * that sends (enqueue, refused) or runs them (dequeue); sends from threads
 * that are not workers are counted in a separate external block. */
typedef struct actor_stats {
    uint64_t enqueue;     /* user messages accepted into a mailbox */
    uint64_t dequeue;     /* user messages handed to a behaviour */
    uint64_t depth_sum;   /* sum of mailbox depth at each dequeue */
    uint64_t depth_peak;  /* largest mailbox depth seen at a dequeue */
    uint64_t wakeups;     /* parked workers woken */
    uint64_t parks;       /* times a worker went to sleep */
    uint64_t steals;      /* actors taken from another worker's run queue */
    uint64_t batch_limit; /* actor runs ended by the batch bound with messages left */
    uint64_t refused;     /* sends refused because the target had stopped */
    double depth_mean;    /* depth_sum / dequeue (0 if none) */
} actor_stats_t;

int actor_system_create(actor_system_t **out, const actor_config_t *config);
unsigned actor_system_workers(const actor_system_t *sys);

/* Spawns an idle actor; *out receives its reference. */
int actor_spawn(actor_system_t *sys, actor_behaviour_fn behaviour, void *state, actor_ref_t *out);

/* Copies len bytes of data into a pooled message and queues it. From any
 * thread: a worker (inside a behaviour) or any other (the inject path).
 * Messages from one sender to one actor arrive in the order sent. */
int actor_send(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data, size_t len);

/* Refuses further sends to the actor; every message accepted before is
 * still delivered, then the behaviour gets ACTOR_STOPPED and, once that call
 * has returned, the slot is freed for reuse. Returns -ESRCH if it had
 * already stopped or been asked to. */
int actor_stop(actor_system_t *sys, actor_ref_t ref);

/* Timers: a message sent by the timer thread after delay_ns, or every
 * period_ns (first after one period). Timers due at the same instant fire
 * in the order they were armed. A one-shot timer that a pinned actor arms
 * for itself while running on its host is sent by the host thread instead
 * (host.c, H4); only that actor, on its host, can cancel it. A periodic timer whose target has stopped
 * cancels itself. *out (may be NULL) receives an id for actor_timer_cancel. */
int actor_send_after(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data,
                     size_t len, uint64_t delay_ns, actor_timer_t *out);
int actor_send_every(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data,
                     size_t len, uint64_t period_ns, actor_timer_t *out);
/* 0, or -ENOENT if it already fired (one-shot) or is unknown. A message the
 * timer thread is sending at this very moment may still arrive. */
int actor_timer_cancel(actor_system_t *sys, actor_timer_t timer);

/* Shut down with drain: pending timers are dropped; waits up to
 * drain_timeout_ns for quiescence (no message queued or running), then stops
 * every actor (each still gets every message accepted for it, then
 * ACTOR_STOPPED) and joins the workers. Threads other than the workers must
 * have stopped sending; never call it from a behaviour. 0 if quiescence was
 * reached, -ETIMEDOUT if actors were stopped while still busy. Idempotent. */
int actor_system_shutdown(actor_system_t *sys, uint64_t drain_timeout_ns);
/* Shuts down (drain timeout 0) if not done yet, then frees everything. */
void actor_system_destroy(actor_system_t *sys);

/*
 * Hosts: a thread that is not a worker (an event loop) may run actors
 * pinned to it, between its own events, so that an actor whose messages
 * come from and go to that thread costs no hand-off (host.c states the
 * invariants). wake(ctx) is called, from any thread, when a pinned actor
 * becomes runnable and the host had none; the host thread then calls
 * actor_host_run. Before actor_system_shutdown, actor_host_release hands
 * the pinned actors to the workers, so they drain without the host.
 */
typedef struct actor_host actor_host_t;
int actor_host_create(actor_system_t *sys, void (*wake)(void *ctx), void *ctx, actor_host_t **out);
int actor_spawn_on(actor_system_t *sys, actor_host_t *host, actor_behaviour_fn behaviour, void *state,
                   actor_ref_t *out);
/* Host thread only: runs up to max_runs actor runs (each at most a batch of
 * messages); returns how many ran. */
unsigned actor_host_run(actor_host_t *host, unsigned max_runs);
/* The monotonic deadline (CLOCK_MONOTONIC ns) of the earliest timer the host
 * keeps (host.c, H4): its thread must call actor_host_run by then. 0: none. */
uint64_t actor_host_next_deadline(actor_host_t *host);
/* The shortest delay but 0 the host keeps (H4); shorter ones than the owner
 * can honour go to the timer thread. Default 10 ms, for an owner that sleeps
 * in whole milliseconds; 0 for one that wakes at the deadline (a timerfd).
 * Set it before the host runs. */
void actor_host_set_timer_floor(actor_host_t *host, uint64_t min_ns);
bool actor_host_pending(actor_host_t *host);
void actor_host_release(actor_host_t *host);
void actor_host_destroy(actor_host_t *host);

/* Sum over workers and the external block. Safe at any time; the parts
 * are read one after another, so a running system gives an approximation. */
void actor_system_stats(const actor_system_t *sys, actor_stats_t *out);

#endif
