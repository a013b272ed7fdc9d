/*
 * tests/line/test_line_queue.c -- line/queue.c's order of a bus queue on its
 * own (white-box: line/state.h): first come, first served within a
 * priority; a priority request ([tcp] priority_clients, priority_units,
 * priority_functions, a role's priority) queued before normal ones; and
 * the normal class served after LINE_STARVATION_BOUND (8) priority requests
 * in a row, however many normal ones wait.
 */
#include "line/state.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

static const line_origin_ops_t ops = { "test", NULL, NULL };
static line_origin_t origin = { &ops };

static line_t *queue_of(unsigned depth)
{
    line_t *l = calloc(1, sizeof *l);
    assert_non_null(l);
    l->cfg.queue_depth = depth;
    l->queue[0].slot = calloc(depth, sizeof(line_request_t));
    assert_non_null(l->queue[0].slot);
    return l;
}

static void push(line_t *l, uint32_t seq, uint8_t priority)
{
    line_request_t r = { .origin = &origin, .seq = seq, .slave = 1, .priority = priority, .pdu_len = 5,
                       .pdu = { 3, 0, 0, 0, 1 } };
    assert_true(line_queue_push(l, 0, &r));
}

static uint32_t next_seq(line_t *l)
{
    unsigned attempts;
    uint64_t wake;
    assert_true(line_queue_pick(l, 0, &attempts, &wake));
    return l->cur.seq;
}

static void drop(line_t *l)
{
    free(l->queue[0].slot);
    free(l);
}

static void test_priority_first_fifo_within(void **state)
{
    (void)state;
    line_t *l = queue_of(16);
    push(l, 1, 0);
    push(l, 2, 0);
    push(l, 10, 1);
    push(l, 3, 0);
    push(l, 11, 1);
    static const uint32_t want[] = { 10, 11, 1, 2, 3 };
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(next_seq(l), want[i]);
    drop(l);
}

static void test_starvation_bound(void **state)
{
    (void)state;
    line_t *l = queue_of(64);
    push(l, 1, 0);   /* a normal request, then a flood of priority ones */
    for (uint32_t k = 0; k < 20; k++)
        push(l, 100 + k, 1);
    unsigned at = 0;
    while (next_seq(l) != 1)
        at++;
    assert_int_equal(at, 8);   /* passed over exactly LINE_STARVATION_BOUND times */
    drop(l);
}

/* The bound is the class's: with four normal requests waiting and a
 * priority one coming back after each of its answers (a master in a loop),
 * the line goes 8 priority, 1 normal, 8 priority, ... (a bound per request,
 * "passed over 8 times", let the four alternate with it, P N P N). */
static void test_starvation_bound_is_the_class(void **state)
{
    (void)state;
    line_t *l = queue_of(64);
    for (uint32_t k = 1; k <= 4; k++)
        push(l, k, 0);
    unsigned priority = 0, normal = 0, run = 0, longest = 0;
    for (uint32_t k = 0; k < 36; k++) {
        push(l, 100 + k, 1);   /* the master's next request, queued before the normal ones */
        uint32_t seq = next_seq(l);
        if (seq >= 100) {
            priority++;
            run++;
            if (run > longest)
                longest = run;
        } else {
            normal++;
            run = 0;
            push(l, seq + 10, 0);   /* its client asks again */
        }
    }
    assert_int_equal(longest, 8);
    assert_int_equal(normal, 4);     /* 36 picks: 8 P + 1 N, four times */
    drop(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_first_fifo_within),
        cmocka_unit_test(test_starvation_bound),
        cmocka_unit_test(test_starvation_bound_is_the_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
