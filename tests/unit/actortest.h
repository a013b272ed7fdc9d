/*
 * tests/unit/actortest.h -- what test_actor_api.c and test_actor_hosts.c (one
 * program, tests/unit/test_actor_api) share: a system of N workers, the wait
 * bound, and the host tests that test_actor_api.c's main runs in its list.
 */
#ifndef RTUGW_TESTS_ACTORTEST_H
#define RTUGW_TESTS_ACTORTEST_H

#include "actor/actor.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

/* How long a test waits for a signal before it fails: seconds, not the
 * milliseconds anything takes on a sane machine. */
#define WAIT_S 10

/* A system of `workers` worker threads and room for max_actors (0: the default). */
static inline actor_system_t *make(unsigned workers, unsigned max_actors)
{
    actor_system_t *sys;
    actor_config_t cfg = { .workers = workers, .max_actors = max_actors };
    assert_int_equal(actor_system_create(&sys, &cfg), 0);
    return sys;
}

/* Actors pinned to a host thread that is not a worker (test_actor_hosts.c). */
void test_host_runs_pinned_actor(void **state);
void test_host_keeps_own_timers(void **state);
void test_host_timer_floor_and_cancel(void **state);

#endif
