/*
 * tests/unit/test_actor_wakeup.c -- no lost wake-up. Each test makes the workers
 * park again and again and then gives them work through one of the paths
 * that must wake them: a send from a thread that is not a worker (inject),
 * an actor pair ping-ponging across parked workers, a fan-out from one
 * actor (LIFO displacement onto the stealable run queue), and timers firing
 * into an idle system. A lost wake-up would leave a message unprocessed
 * with every worker asleep: every wait here has a time limit and fails the
 * test instead of hanging, and alarm() ends the whole program as a backstop.
 */
#include "actor/actor.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_S 10 /* one wait; a healthy run needs microseconds */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_actor_wakeup: time limit exceeded (lost wake-up?)\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    _exit(1);
}

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* Fails the test if the semaphore is not posted within WAIT_S seconds. */
static void wait_sem(sem_t *s, const char *what, unsigned round)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_S;
    while (sem_timedwait(s, &ts) != 0) {
        if (errno == ETIMEDOUT)
            fail_msg("%s: round %u not answered within %d s: lost wake-up", what, round, WAIT_S);
    }
}

static sem_t done;
/* Failures seen on worker threads: counted there, asserted on the test's
 * thread (cmocka's failure path must not run on another thread). */
static _Atomic unsigned worker_errors;

static void poster(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                   const void *data, size_t len)
{
    (void)sys;
    (void)self;
    (void)data;
    (void)len;
    if (type == ACTOR_STOPPED)
        return;
    atomic_fetch_add_explicit((_Atomic unsigned *)state, 1, memory_order_relaxed);
    sem_post(&done);
}

static actor_system_t *make(unsigned workers)
{
    actor_system_t *sys;
    actor_config_t cfg = { .workers = workers };
    assert_int_equal(actor_system_create(&sys, &cfg), 0);
    return sys;
}

static void test_inject_wakes_parked(void **state)
{
    (void)state;
    _Atomic unsigned got = 0;
    actor_ref_t a;
    actor_stats_t st;
    const unsigned rounds = 20000;

    alarm(120);
    sem_init(&done, 0, 0);
    actor_system_t *sys = make(2);
    assert_int_equal(actor_spawn(sys, poster, &got, &a), 0);
    for (unsigned r = 0; r < rounds; r++) {
        if (r % 8 == 0)
            sleep_us(300); /* long enough for both workers to spin out and park */
        assert_int_equal(actor_send(sys, a, 1, &r, sizeof r), 0);
        wait_sem(&done, "inject", r);
    }
    actor_system_stats(sys, &st);
    assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
    actor_system_destroy(sys);
    sem_destroy(&done);
    alarm(0);
    assert_int_equal(got, rounds);
    /* The park and wake paths were exercised, not bypassed by spinning. */
    assert_true(st.parks > 0);
    assert_true(st.wakeups > 0);
}

typedef struct pp {
    actor_ref_t peer;
    unsigned left;
} pp_t;

static void pinger(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                   const void *data, size_t len)
{
    (void)self;
    (void)data;
    (void)len;
    pp_t *p = state;
    if (type == ACTOR_STOPPED)
        return;
    if (p->left == 0) { /* the first of the two to run out ends the exchange */
        sem_post(&done);
        return;
    }
    p->left--;
    if (actor_send(sys, p->peer, 1, NULL, 0) != 0)
        atomic_fetch_add_explicit(&worker_errors, 1, memory_order_relaxed);
}

static void test_pingpong_across_parked_workers(void **state)
{
    (void)state;
    const unsigned legs = 20000;
    alarm(120);
    sem_init(&done, 0, 0);
    for (unsigned workers = 2; workers <= 4; workers += 2) {
        actor_system_t *sys = make(workers);
        for (unsigned round = 0; round < 20; round++) {
            pp_t a = { .left = legs / 2 }, b = { .left = legs / 2 };
            actor_ref_t ra, rb;
            assert_int_equal(actor_spawn(sys, pinger, &a, &ra), 0);
            assert_int_equal(actor_spawn(sys, pinger, &b, &rb), 0);
            a.peer = rb;
            b.peer = ra;
            /* a's state was written before the send; the send publishes it. */
            assert_int_equal(actor_send(sys, ra, 1, NULL, 0), 0);
            wait_sem(&done, "ping-pong", round);
            assert_int_equal(actor_stop(sys, ra), 0);
            assert_int_equal(actor_stop(sys, rb), 0);
            sleep_us(200);
        }
        assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
        actor_system_destroy(sys);
    }
    sem_destroy(&done);
    alarm(0);
    assert_int_equal(atomic_load(&worker_errors), 0);
}

#define FAN 64
static actor_ref_t fan_targets[FAN];

static void fanner(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                   const void *data, size_t len)
{
    (void)self;
    (void)state;
    (void)data;
    (void)len;
    if (type == ACTOR_STOPPED)
        return;
    for (unsigned i = 0; i < FAN; i++)
        if (actor_send(sys, fan_targets[i], 1, NULL, 0) != 0)
            atomic_fetch_add_explicit(&worker_errors, 1, memory_order_relaxed);
}

static void test_fan_out_from_worker(void **state)
{
    (void)state;
    _Atomic unsigned got = 0;
    actor_ref_t f;
    alarm(120);
    sem_init(&done, 0, 0);
    actor_system_t *sys = make(2);
    for (unsigned i = 0; i < FAN; i++)
        assert_int_equal(actor_spawn(sys, poster, &got, &fan_targets[i]), 0);
    assert_int_equal(actor_spawn(sys, fanner, NULL, &f), 0);
    for (unsigned r = 0; r < 1000; r++) {
        if (r % 4 == 0)
            sleep_us(300);
        assert_int_equal(actor_send(sys, f, 1, NULL, 0), 0);
        for (unsigned i = 0; i < FAN; i++)
            wait_sem(&done, "fan-out", r);
    }
    assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
    actor_system_destroy(sys);
    sem_destroy(&done);
    alarm(0);
    assert_int_equal(got, 1000 * FAN);
    assert_int_equal(atomic_load(&worker_errors), 0);
}

static void test_timers_wake_idle_system(void **state)
{
    (void)state;
    _Atomic unsigned got = 0;
    actor_ref_t a;
    alarm(120);
    sem_init(&done, 0, 0);
    actor_system_t *sys = make(2);
    assert_int_equal(actor_spawn(sys, poster, &got, &a), 0);
    for (unsigned r = 0; r < 300; r++) {
        /* 0..600 us: sometimes before the workers park, mostly after. */
        assert_int_equal(actor_send_after(sys, a, 1, NULL, 0, (r * 7919u % 600u) * 1000u, NULL),
                         0);
        wait_sem(&done, "timer", r);
    }
    assert_int_equal(actor_system_shutdown(sys, 5000000000ull), 0);
    actor_system_destroy(sys);
    sem_destroy(&done);
    alarm(0);
    assert_int_equal(got, 300);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inject_wakes_parked),
        cmocka_unit_test(test_pingpong_across_parked_workers),
        cmocka_unit_test(test_fan_out_from_worker),
        cmocka_unit_test(test_timers_wake_idle_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
