/*
 * tests/unit/test_backpressure_shares.c -- front/backpressure.c on its own: a listener's
 * share of a bus, connections served in turn when it is taken, the
 * priority class first with its place beyond the share, and the starvation
 * bound that keeps the normal class going under a priority flood.
 */
#include "front/internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define N 6

/* Connections 0..4 wait on bus 0 in order; each turn frees one place. */
static void test_turns_in_order(void **state)
{
    (void)state;
    tcp_shares_t *s = shares_new(2, 2);
    tcp_waiter_t w[N] = { 0 };
    assert_true(shares_room(s, 0, TCP_CLASS_NORMAL, false));
    shares_taken(s, 0);
    shares_taken(s, 0);
    assert_false(shares_room(s, 0, TCP_CLASS_NORMAL, false));   /* the share is taken */
    assert_true(shares_room(s, 1, TCP_CLASS_NORMAL, false));    /* another bus is not */
    for (unsigned i = 0; i < 5; i++)
        shares_wait(s, &w[i], 0, TCP_CLASS_NORMAL, i);
    shares_wait(s, &w[0], 0, TCP_CLASS_NORMAL, 9);   /* waiting already: keeps its place */
    assert_int_equal(shares_waiting(s, TCP_CLASS_NORMAL), 5);
    assert_null(shares_next(s, 0));                  /* no place free: nobody goes */
    shares_leave(s, &w[2]);                          /* closed while waiting */
    unsigned order[N], n = 0;
    tcp_waiter_t *t;
    for (unsigned k = 0; k < 4; k++) {
        shares_answered(s, 0);
        while ((t = shares_next(s, 0)) != NULL) {
            order[n++] = (unsigned)(t - w);
            shares_taken(s, 0);
        }
    }
    assert_int_equal(n, 4);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 3);
    assert_int_equal(order[3], 4);
    /* A newcomer never overtakes the list; the one given its turn does. */
    shares_wait(s, &w[5], 0, TCP_CLASS_NORMAL, 10);
    shares_answered(s, 0);
    assert_false(shares_room(s, 0, TCP_CLASS_NORMAL, false));
    assert_true(shares_room(s, 0, TCP_CLASS_NORMAL, true));
    shares_free(s);
}

/* Priority first, with one place of its own beyond the share; a waiting
 * normal connection is passed over at most TCP_STARVATION_BOUND times. */
static void test_priority_and_starvation_bound(void **state)
{
    (void)state;
    tcp_shares_t *s = shares_new(1, 1);
    tcp_waiter_t lo = { 0 }, hi[2 * TCP_STARVATION_BOUND] = { { 0 } };
    shares_taken(s, 0);
    assert_false(shares_room(s, 0, TCP_CLASS_NORMAL, false));
    assert_true(shares_room(s, 0, TCP_CLASS_PRIORITY, false));   /* its own place */
    shares_taken(s, 0);
    assert_false(shares_room(s, 0, TCP_CLASS_PRIORITY, false));
    shares_wait(s, &lo, 0, TCP_CLASS_NORMAL, 0);
    unsigned passed = 0;
    bool lo_served = false;
    for (unsigned k = 0; k < 2 * TCP_STARVATION_BOUND && !lo_served; k++) {
        shares_wait(s, &hi[k], 0, TCP_CLASS_PRIORITY, k);   /* a priority flood: always one waiting */
        shares_answered(s, 0);
        shares_answered(s, 0);   /* both places free */
        tcp_waiter_t *t = shares_next(s, 0);
        assert_non_null(t);
        shares_taken(s, 0);
        if (t == &lo)
            lo_served = true;
        else
            passed++;
        t = shares_next(s, 0);   /* the place beyond the share: priority only */
        if (t) {
            assert_true(t != &lo);
            shares_taken(s, 0);
        } else {
            shares_taken(s, 0);
        }
    }
    assert_true(lo_served);
    assert_int_equal(passed, TCP_STARVATION_BOUND);
    shares_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_turns_in_order),
        cmocka_unit_test(test_priority_and_starvation_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
