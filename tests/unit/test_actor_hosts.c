/*
 * tests/unit/test_actor_hosts.c -- actors pinned to a host: a thread that is
 * not a worker runs them when woken (actor_host_*), keeps their timers on its
 * own deadline, with the floor and cancel of a worker's. Part of the program
 * tests/unit/test_actor_api (its main is in test_actor_api.c).
 */
#include "tests/unit/actortest.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- hosts: actors pinned to a thread that is not a worker ---------------- */

typedef struct hosted {
    pthread_t host_thread;
    _Atomic unsigned received, off_host, out_of_order, stopped;
    unsigned next;                  /* touched only by the behaviour */
    actor_ref_t echo_to;            /* a worker actor it replies to */
} hosted_t;

typedef struct host_ctx {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned wakes;
} host_ctx_t;

static void host_wake(void *ctx)
{
    host_ctx_t *hc = ctx;
    pthread_mutex_lock(&hc->lock);
    hc->wakes++;
    pthread_cond_signal(&hc->cond);
    pthread_mutex_unlock(&hc->lock);
}

static void hosted_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                             const void *data, size_t len)
{
    hosted_t *h = state;
    (void)self;
    if (type == ACTOR_STOPPED) {
        atomic_fetch_add(&h->stopped, 1);
        return;
    }
    unsigned v;
    assert_int_equal(len, sizeof v);
    memcpy(&v, data, sizeof v);
    if (!pthread_equal(pthread_self(), h->host_thread))
        atomic_fetch_add(&h->off_host, 1);
    if (v != h->next)
        atomic_fetch_add(&h->out_of_order, 1);
    h->next = v + 1;
    atomic_fetch_add(&h->received, 1);
    actor_send(sys, h->echo_to, 1, &v, sizeof v);
}

typedef struct echoer {
    actor_ref_t back;
    _Atomic unsigned got;
    unsigned limit;
} echoer_t;

/* A worker actor: sends each number + 1 back to the hosted actor, up to limit. */
static void echo_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                           const void *data, size_t len)
{
    echoer_t *e = state;
    (void)self;
    (void)len;
    if (type == ACTOR_STOPPED)
        return;
    unsigned v;
    memcpy(&v, data, sizeof v);
    atomic_fetch_add(&e->got, 1);
    if (v + 1 < e->limit) {
        v++;
        actor_send(sys, e->back, 1, &v, sizeof v);
    }
}

/* A ping-pong between a pinned actor and a worker actor: every message of
 * the pinned one runs on the host thread (H1), in order, woken only by
 * wake(); after release the rest drains on the workers and shutdown is clean. */
void test_host_runs_pinned_actor(void **state)
{
    (void)state;
    static hosted_t h;
    static echoer_t e;
    host_ctx_t hc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    memset(&h, 0, sizeof h);
    memset(&e, 0, sizeof e);
    const unsigned n = 20000;
    e.limit = n;
    h.host_thread = pthread_self();   /* this thread is the host */
    actor_system_t *sys = make(2, 0);
    actor_host_t *host;
    actor_ref_t pinned, echo;
    assert_int_equal(actor_host_create(sys, host_wake, &hc, &host), 0);
    assert_int_equal(actor_spawn_on(sys, host, hosted_behaviour, &h, &pinned), 0);
    e.back = pinned;
    assert_int_equal(actor_spawn(sys, echo_behaviour, &e, &echo), 0);
    h.echo_to = echo;
    unsigned zero = 0;
    assert_int_equal(actor_send(sys, pinned, 1, &zero, sizeof zero), 0);
    time_t t0 = time(NULL);
    while (atomic_load(&h.received) < n / 2 && time(NULL) - t0 < WAIT_S) {
        pthread_mutex_lock(&hc.lock);
        while (!actor_host_pending(host) && hc.wakes == 0)
            pthread_cond_wait(&hc.cond, &hc.lock);
        hc.wakes = 0;
        pthread_mutex_unlock(&hc.lock);
        actor_host_run(host, 16);
    }
    assert_true(atomic_load(&h.received) >= n / 2);
    /* Hand the rest to the workers: the exchange goes on without the host. */
    actor_host_release(host);
    t0 = time(NULL);
    while (atomic_load(&e.got) < n && time(NULL) - t0 < WAIT_S)
        usleep(1000);
    assert_int_equal(actor_system_shutdown(sys, 10ull * 1000000000ull), 0);
    actor_system_destroy(sys);
    actor_host_destroy(host);
    assert_int_equal(atomic_load(&h.received), n);
    assert_int_equal(atomic_load(&e.got), n);
    assert_int_equal(atomic_load(&h.out_of_order), 0);
    assert_int_equal(atomic_load(&h.stopped), 1);
    /* Before the release every message ran here; after it, on workers. */
    assert_true(atomic_load(&h.off_host) > 0);
    assert_true(atomic_load(&h.off_host) <= n - n / 2);
}

typedef struct timed {
    pthread_t host_thread;
    unsigned order[8];
    _Atomic unsigned n;
    _Atomic unsigned off_host;
    actor_ref_t other;
} timed_t;

/* H4: timers a pinned actor arms for itself go to its host. */
static void timed_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                            const void *data, size_t len)
{
    timed_t *t = state;
    (void)len;
    if (type == 1) {   /* kick-off: three timers for itself out of order, one for another actor */
        unsigned v;
        v = 2, actor_send_after(sys, self, 3, &v, sizeof v, 30000000ull, NULL);
        v = 1, actor_send_after(sys, self, 3, &v, sizeof v, 10000000ull, NULL);
        v = 0, actor_send_after(sys, self, 3, &v, sizeof v, 0, NULL);
        v = 3, actor_send_after(sys, self, 3, &v, sizeof v, 400000000ull, NULL);   /* still held at release */
        v = 9, actor_send_after(sys, t->other, 3, &v, sizeof v, 1000000000ull, NULL);
    } else if (type == 3) {
        unsigned v, k = atomic_load(&t->n);
        memcpy(&v, data, sizeof v);
        if (k < 8)
            t->order[k] = v;
        if (!pthread_equal(pthread_self(), t->host_thread))
            atomic_fetch_add(&t->off_host, 1);
        atomic_fetch_add(&t->n, 1);
    }
}

static void ignore_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                             const void *data, size_t len)
{
    (void)sys, (void)self, (void)state, (void)type, (void)data, (void)len;
}

/* The host sends them, in deadline order, once actor_host_run is called by
 * actor_host_next_deadline; the timer armed for another actor is not the
 * host's; at release, the one still held goes to the timer thread. */
void test_host_keeps_own_timers(void **state)
{
    (void)state;
    static timed_t t;
    host_ctx_t hc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    memset(&t, 0, sizeof t);
    t.host_thread = pthread_self();
    actor_system_t *sys = make(2, 0);
    actor_host_t *host;
    actor_ref_t pinned;
    assert_int_equal(actor_host_create(sys, host_wake, &hc, &host), 0);
    assert_int_equal(actor_spawn(sys, ignore_behaviour, NULL, &t.other), 0);
    assert_int_equal(actor_spawn_on(sys, host, timed_behaviour, &t, &pinned), 0);
    assert_int_equal(actor_host_next_deadline(host), 0);
    assert_int_equal(actor_send(sys, pinned, 1, NULL, 0), 0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    actor_host_run(host, 16);   /* the kick-off, and the timer of delay 0 made due */
    actor_host_run(host, 16);
    assert_int_equal(atomic_load(&t.n), 1);
    uint64_t d = actor_host_next_deadline(host);
    assert_true(d >= t0 + 10000000ull && d <= t0 + 10000000ull + 1000000000ull);   /* the 10 ms one */
    time_t start = time(NULL);
    while (atomic_load(&t.n) < 3 && time(NULL) - start < WAIT_S) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        d = actor_host_next_deadline(host);
        if (d > now)
            usleep((useconds_t)((d - now) / 1000 + 1));
        actor_host_run(host, 16);
        actor_host_run(host, 16);
    }
    assert_int_equal(atomic_load(&t.n), 3);
    assert_int_equal(t.order[0], 0);
    assert_int_equal(t.order[1], 1);
    assert_int_equal(t.order[2], 2);
    assert_int_equal(atomic_load(&t.off_host), 0);
    d = actor_host_next_deadline(host);
    assert_true(d >= t0 + 400000000ull);   /* the 400 ms one; the other actor's is not here */
    actor_host_release(host);
    assert_int_equal(actor_host_next_deadline(host), 0);
    time_t w0 = time(NULL);
    while (atomic_load(&t.n) < 4 && time(NULL) - w0 < WAIT_S)
        usleep(1000);
    assert_int_equal(atomic_load(&t.n), 4);
    assert_int_equal(t.order[3], 3);
    assert_int_equal(atomic_load(&t.off_host), 1);   /* sent by the timer thread, run by a worker */
    assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
    actor_system_destroy(sys);
    actor_host_destroy(host);
}

/* H4 with a floor of 0 (an owner that wakes at the deadline): a 1 ms timer
 * is the host's too, and its actor can cancel one of its own there. */
typedef struct cancelling {
    timed_t t;
    actor_timer_t first, second;
    int cancel_rc, cancel_again_rc;
} cancelling_t;

static void cancelling_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                                 const void *data, size_t len)
{
    cancelling_t *c = state;
    if (type == 1) {
        unsigned v = 1;
        actor_send_after(sys, self, 3, &v, sizeof v, 1000000ull, &c->first);
        v = 2;
        actor_send_after(sys, self, 3, &v, sizeof v, 2000000ull, &c->second);
        c->cancel_rc = actor_timer_cancel(sys, c->first);
        c->cancel_again_rc = actor_timer_cancel(sys, c->first);
    } else {
        timed_behaviour(sys, self, &c->t, type, data, len);
    }
}

void test_host_timer_floor_and_cancel(void **state)
{
    (void)state;
    static cancelling_t c;
    host_ctx_t hc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    memset(&c, 0, sizeof c);
    c.t.host_thread = pthread_self();
    actor_system_t *sys = make(2, 0);
    actor_host_t *host;
    actor_ref_t pinned;
    assert_int_equal(actor_host_create(sys, host_wake, &hc, &host), 0);
    actor_host_set_timer_floor(host, 0);
    assert_int_equal(actor_spawn_on(sys, host, cancelling_behaviour, &c, &pinned), 0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    assert_int_equal(actor_send(sys, pinned, 1, NULL, 0), 0);
    actor_host_run(host, 16);
    assert_int_equal(c.cancel_rc, 0);
    assert_int_equal(c.cancel_again_rc, -ENOENT);
    assert_true(c.first != 0 && c.second != 0 && c.first != c.second);
    uint64_t d = actor_host_next_deadline(host);
    assert_true(d >= t0 + 2000000ull && d < t0 + 1000000000ull);   /* the 2 ms one is held; the 1 ms one gone */
    /* Off its host (no actor of it running here), the id names nothing. */
    assert_int_equal(actor_timer_cancel(sys, c.second), -ENOENT);
    time_t start = time(NULL);
    while (atomic_load(&c.t.n) < 1 && time(NULL) - start < WAIT_S) {
        usleep(500);
        actor_host_run(host, 16);
    }
    assert_int_equal(atomic_load(&c.t.n), 1);
    assert_int_equal(c.t.order[0], 2);
    assert_int_equal(atomic_load(&c.t.off_host), 0);   /* sent by the host, run on it */
    usleep(5000);
    actor_host_run(host, 16);
    assert_int_equal(atomic_load(&c.t.n), 1);   /* the cancelled one never comes */
    assert_int_equal(actor_host_next_deadline(host), 0);
    actor_host_release(host);
    assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
    actor_system_destroy(sys);
    actor_host_destroy(host);
}
