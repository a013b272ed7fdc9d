/*
 * tests/line/test_line_queue.c -- line/queue.c's order of a bus queue on its
 * own (white-box: line/state.h): first come, first served within a
 * priority; a priority request ([tcp] priority_clients, priority_units,
 * priority_functions, a role's priority) queued before normal ones; and
 * the normal class served after LINE_STARVATION_BOUND (8) priority requests
 * in a row, however many normal ones wait; and the polls' share
 * ([bus] poll_share): a background request goes after 100/share - 1
 * interactive ones in a row, however many interactive ones wait.
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
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++) {
        l->queue[qi].slot = calloc(depth, sizeof(line_request_t));
        assert_non_null(l->queue[qi].slot);
    }
    return l;
}

static void push_to(line_t *l, unsigned qi, uint32_t seq, uint8_t priority)
{
    line_request_t r = { .origin = &origin, .seq = seq, .slave = 1, .priority = priority, .pdu_len = 5,
                       .pdu = { 3, 0, 0, 0, 1 }, .background = qi == 1 };
    assert_true(line_queue_push(l, qi, &r));
}

static void push(line_t *l, uint32_t seq, uint8_t priority)
{
    push_to(l, 0, seq, priority);
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
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        free(l->queue[qi].slot);
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

/* Clients that always have a request waiting (each answered one asks
 * again) and polls behind them (tcp_first): with poll_share the polls get
 * one transaction in 100/share, in their order, and no more than that
 * while clients wait; with 0, none while a client waits (the order before).
 * The share is the one rtugw_bus_poll_turns_total counts. */
static unsigned polls_among(unsigned share, unsigned picks, unsigned *longest_client_run)
{
    line_t *l = queue_of(64);
    l->cfg.tcp_first = true;
    l->cfg.poll_share = share;
    for (uint32_t k = 1; k <= 8; k++)
        push_to(l, 0, k, 0);
    for (uint32_t k = 0; k < 40; k++)
        push_to(l, 1, 1000 + k, 0);
    unsigned polls = 0, run = 0;
    uint32_t next_poll = 1000;
    *longest_client_run = 0;
    for (unsigned n = 0; n < picks; n++) {
        uint32_t seq = next_seq(l);
        if (seq >= 1000) {
            assert_int_equal(seq, next_poll++);   /* the polls in their order */
            polls++;
            run = 0;
        } else {
            push_to(l, 0, seq + 10, 0);   /* the client asks again */
            if (++run > *longest_client_run)
                *longest_client_run = run;
        }
    }
    assert_int_equal(l->m.poll_turns, polls);
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        free(l->queue[qi].slot);
    free(l);
    return polls;
}

static void test_poll_share(void **state)
{
    (void)state;
    unsigned run;
    assert_int_equal(polls_among(20, 100, &run), 20);   /* 4 clients, 1 poll */
    assert_int_equal(run, 4);
    assert_int_equal(polls_among(50, 100, &run), 40);   /* 1 and 1, until the 40 polls are done */
    assert_int_equal(polls_among(10, 100, &run), 10);
    assert_int_equal(run, 9);
    assert_int_equal(polls_among(0, 100, &run), 0);     /* strict tcp_first: never while clients wait */
    assert_int_equal(run, 100);
}

/* No client waiting: polls go back to back; the share is a floor. */
static void test_poll_share_is_a_floor(void **state)
{
    (void)state;
    line_t *l = queue_of(16);
    l->cfg.tcp_first = true;
    l->cfg.poll_share = 20;
    for (uint32_t k = 0; k < 5; k++)
        push_to(l, 1, 1000 + k, 0);
    for (uint32_t k = 0; k < 5; k++)
        assert_int_equal(next_seq(l), 1000 + k);
    assert_int_equal(l->m.poll_turns, 0);   /* nobody was passed over */
    push_to(l, 0, 1, 0);
    push_to(l, 1, 2000, 0);
    assert_int_equal(next_seq(l), 1);       /* a client first, as tcp_first says */
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++)
        free(l->queue[qi].slot);
    free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_first_fifo_within),
        cmocka_unit_test(test_starvation_bound),
        cmocka_unit_test(test_starvation_bound_is_the_class),
        cmocka_unit_test(test_poll_share),
        cmocka_unit_test(test_poll_share_is_a_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
