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
 *      actor, so shutdown drains them without the host thread.
 */
#include "actor/internal.h"

#include <errno.h>
#include <stdlib.h>

struct actor_host {
    actor_system_t *sys;
    void (*wake)(void *ctx);
    void *ctx;
    pthread_mutex_t lock;
    actor_t *head, *tail;      /* runnable pinned actors, under lock */
    bool released;             /* under lock */
};

int actor_host_create(actor_system_t *sys, void (*wake)(void *ctx), void *ctx, actor_host_t **out)
{
    if (!sys || !wake || !out)
        return -EINVAL;
    actor_host_t *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->sys = sys;
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

unsigned actor_host_run(actor_host_t *h, unsigned max_runs)
{
    unsigned n = 0;
    actor_t *a;
    while (n < max_runs && (a = host_pop(h)) != NULL) {
        actor_run(h->sys, NULL, a);
        n++;
    }
    return n;
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
    pthread_mutex_unlock(&h->lock);
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
    pthread_mutex_destroy(&h->lock);
    free(h);
}
