/*
 * tests/line/test_pair.c -- pairing on an overheard line (parser/pair.c) and what is
 * learnt from it (parser/learn.c): each of the rules P1-P5 in simulated time,
 * the bounds, and the learner's polls, intervals and timeouts.
 */
#include "parser/rtu.h"
#include "tests/lib/testutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

typedef struct line {
    rtu_pairer_t *p;
    rtu_learn_t *l;
    uint64_t noise;
    rtu_pair_event_t ev[64];
    size_t n;
} line_t;

static line_t *line_new(void)
{
    line_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->p = rtu_pairer_new(20 * MS);
    t->l = rtu_learn_new();
    assert_non_null(t->p);
    assert_non_null(t->l);
    return t;
}

static void line_free(line_t *t)
{
    rtu_pairer_free(t->p);
    rtu_learn_free(t->l);
    free(t);
}

static void drain(line_t *t)
{
    while (t->n < 64 && rtu_pairer_next(t->p, &t->ev[t->n]) == 1) {
        rtu_learn_event(t->l, &t->ev[t->n]);
        t->n++;
    }
}

/* A frame with a good CRC (or a spoiled one) at t ms. */
static void frame(line_t *t, bool is_request, const uint8_t *pdu_with_slave, size_t n, uint64_t t_ms, bool good)
{
    rtu_frame_t f;
    memset(&f, 0, sizeof f);
    memcpy(f.adu, pdu_with_slave, n);
    uint16_t crc = rtu_crc16(f.adu, n);
    f.adu[n] = (uint8_t)(crc & 0xff);
    f.adu[n + 1] = (uint8_t)((crc >> 8) ^ (good ? 0 : 0x55));
    f.len = (uint16_t)(n + 2);
    f.crc_ok = good;
    f.is_request = is_request;
    f.t_first_ns = t_ms * MS;
    f.t_last_ns = t_ms * MS + MS / 2;
    rtu_pairer_frame(t->p, &f, t->noise);
    drain(t);
}

static void read_req(line_t *t, uint8_t slave, uint16_t addr, uint16_t qty, uint64_t ms)
{
    uint8_t q[6] = { slave, 3, (uint8_t)(addr >> 8), (uint8_t)addr, (uint8_t)(qty >> 8), (uint8_t)qty };
    frame(t, true, q, sizeof q, ms, true);
}

/* An answer of qty registers, all `value`. */
static void read_ans(line_t *t, uint8_t slave, uint16_t qty, uint16_t value, uint64_t ms)
{
    uint8_t a[3 + 250] = { slave, 3, (uint8_t)(2 * qty) };
    for (unsigned i = 0; i < qty; i++) {
        a[3 + 2 * i] = (uint8_t)(value >> 8);
        a[4 + 2 * i] = (uint8_t)value;
    }
    frame(t, false, a, 3u + 2u * qty, ms, true);
}

static void idle(line_t *t, uint64_t ms)
{
    rtu_pairer_idle(t->p, ms * MS, t->noise);
    drain(t);
}

static size_t count(const line_t *t, rtu_pair_kind_t k)
{
    size_t c = 0;
    for (size_t i = 0; i < t->n; i++)
        c += t->ev[i].kind == k;
    return c;
}

/* P1: the shape decides; an exception answers any request of its function. */
static void test_matches(void **state)
{
    (void)state;
    const uint8_t req[] = { 1, 3, 0, 0, 0, 2, 0xc4, 0x0b };
    const uint8_t ok[] = { 1, 3, 4, 0, 0, 0, 0, 0, 0 };
    const uint8_t wrong_count[] = { 1, 3, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    const uint8_t other_slave[] = { 2, 3, 4, 0, 0, 0, 0, 0, 0 };
    const uint8_t exception[] = { 1, 0x83, 2, 0, 0 };
    assert_true(rtu_answer_matches(req, sizeof req, ok, sizeof ok));
    assert_false(rtu_answer_matches(req, sizeof req, wrong_count, sizeof wrong_count));
    assert_false(rtu_answer_matches(req, sizeof req, other_slave, sizeof other_slave));
    assert_true(rtu_answer_matches(req, sizeof req, exception, sizeof exception));
    const uint8_t w6[] = { 1, 6, 0, 5, 0, 9, 0, 0 };
    const uint8_t w6_echo[] = { 1, 6, 0, 5, 0, 9, 0, 0 };
    const uint8_t w6_other[] = { 1, 6, 0, 5, 0, 8, 0, 0 };
    assert_true(rtu_answer_matches(w6, sizeof w6, w6_echo, sizeof w6_echo));
    assert_false(rtu_answer_matches(w6, sizeof w6, w6_other, sizeof w6_other));
}

/* A clean poll: paired with its latency once the hold passes or the next request comes. */
static void test_answered(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_req(t, 1, 0, 2, 0);
    read_ans(t, 1, 2, 7, 3);
    assert_int_equal(t->n, 0);             /* held: not vouched for yet */
    idle(t, 10);
    assert_int_equal(t->n, 0);
    idle(t, 24);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->ev[0].kind, RTU_PAIR_ANSWERED);
    assert_int_equal(t->ev[0].latency_ns, 3 * MS - MS / 2);
    read_req(t, 1, 0, 2, 100);
    read_ans(t, 1, 2, 7, 103);
    read_req(t, 1, 0, 2, 200);             /* the next request vouches at once */
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 2);
    line_free(t);
}

/* P2: an answer with no request, or of another shape, is unpaired; a request followed
 * by another is unanswered, and the same bytes again are a retry. */
static void test_unanswered_retry_unpaired(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_ans(t, 1, 2, 6, 0);
    assert_int_equal(count(t, RTU_PAIR_UNPAIRED), 1);
    read_req(t, 1, 0, 2, 10);
    read_ans(t, 1, 3, 7, 13);              /* 3 registers for a read of 2 */
    assert_int_equal(count(t, RTU_PAIR_UNPAIRED), 2);
    read_req(t, 1, 0, 2, 210);             /* the master gave up, asks again */
    assert_int_equal(count(t, RTU_PAIR_UNANSWERED), 1);
    assert_int_equal(t->ev[2].latency_ns, 200 * MS - MS / 2);
    read_ans(t, 1, 2, 7, 213);
    idle(t, 300);
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 1);
    assert_true(t->ev[3].retry);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(t->p, &st);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.requests, 2);
    line_free(t);
}

/* P3: a second, different answer or noise in the hold makes the pair doubtful; the
 * same bytes again are a duplicate, used once. A damaged frame is never paired. */
static void test_vouching(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_req(t, 1, 0, 2, 0);
    read_ans(t, 1, 2, 7, 3);
    read_ans(t, 1, 2, 8, 8);
    idle(t, 50);
    assert_int_equal(count(t, RTU_PAIR_DOUBTFUL), 1);
    read_req(t, 2, 0, 2, 100);
    read_ans(t, 2, 2, 7, 103);
    read_ans(t, 2, 2, 7, 108);
    idle(t, 150);
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 1);
    assert_true(t->ev[t->n - 1].duplicate);
    read_req(t, 3, 0, 2, 200);
    read_ans(t, 3, 2, 7, 203);
    t->noise += 3;
    idle(t, 250);
    assert_int_equal(count(t, RTU_PAIR_DOUBTFUL), 2);
    read_req(t, 3, 0, 2, 300);
    uint8_t spoiled[] = { 3, 3, 4, 0, 7, 0, 7 };
    frame(t, false, spoiled, sizeof spoiled, 303, false);
    assert_int_equal(count(t, RTU_PAIR_DAMAGED), 1);
    read_req(t, 3, 0, 2, 500);
    assert_int_equal(count(t, RTU_PAIR_UNANSWERED), 1);
    line_free(t);
}

/* P4: an answer byte-equal to one its slave said for another request, within W (or, no
 * timeout heard yet, still in the ring), is doubtful: it may be a copy, until the slave's
 * verdict is GENUINE (twice such an answer stood alone). For the same request bytes it
 * is used (the same question). Past W, equal answers are used again. */
static void test_copies(void **state)
{
    (void)state;
    line_t *t = line_new();
    /* Slave 1, all-zero registers at two addresses the master alternates: the 2nd equals
     * one said for the other address; the 3rd too, but also the one used for its own
     * (its values are that question's, whichever it copies); then the slave is GENUINE
     * (equal answers that stood alone twice), and what P4 alone made owed is not. */
    uint64_t ms = 0;
    for (int i = 0; i < 6; i++, ms += 100) {
        read_req(t, 1, i % 2 ? 10 : 0, 5, ms);
        read_ans(t, 1, 5, 0, ms + 3);
    }
    idle(t, ms + 50);
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 5);
    assert_int_equal(count(t, RTU_PAIR_DOUBTFUL), 1);
    assert_int_equal(t->ev[1].kind, RTU_PAIR_DOUBTFUL);
    /* Slave 3: a copy of the answer for 20 in the wait of the request for 0. */
    read_req(t, 3, 20, 8, 1000);
    read_ans(t, 3, 8, 1020, 1003);
    read_req(t, 3, 0, 8, 1100);
    read_ans(t, 3, 8, 1020, 1110);
    idle(t, 1200);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    /* Slave 4: the same request asked again, answered with the same bytes: used. */
    read_req(t, 4, 0, 5, 2000);
    read_ans(t, 4, 5, 1, 2003);
    read_req(t, 4, 0, 5, 2100);
    read_ans(t, 4, 5, 1, 2103);
    idle(t, 2200);
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 8);
    /* A heard timeout (99.5 ms: W = 398 ms), then slave 8 all-zero: within W of the
     * answer for 0, the one for 10 is doubtful; past W of it, used again. */
    read_req(t, 7, 0, 1, 3000);
    read_req(t, 7, 0, 1, 3100);
    read_req(t, 8, 0, 5, 4000);
    read_ans(t, 8, 5, 0, 4003);
    read_req(t, 8, 10, 5, 4100);
    read_ans(t, 8, 5, 0, 4103);
    idle(t, 4200);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    read_req(t, 8, 0, 5, 4600);
    read_ans(t, 8, 5, 0, 4603);
    idle(t, 4700);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_ANSWERED);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(t->p, &st);
    assert_int_equal(st.heard_timeout_ns, 100 * MS - MS / 2);
    line_free(t);
}

/* T2 (late answers are never used): past the heard timeout after the pending request,
 * an answer is doubtful and counted, and the request owes (P5). */
static void test_late_never_used(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_req(t, 1, 0, 2, 0);
    read_req(t, 1, 0, 2, 100);                          /* the retry: heard timeout 99.5 ms */
    read_ans(t, 1, 2, 7, 103);
    read_req(t, 6, 0, 2, 1000);
    read_ans(t, 6, 2, 8, 1150);                         /* 149.5 ms after the request */
    idle(t, 1190);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(t->p, &st);
    assert_int_equal(st.late, 1);
    read_req(t, 6, 20, 2, 1200);                        /* the request for 0 owes */
    read_ans(t, 6, 2, 9, 1203);
    idle(t, 1250);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    line_free(t);
}

/* P5, debts by time: a request given up on makes its slave owe an answer of its shape
 * until W (4 x the heard timeout) after it; an answer another owed request could own is
 * doubtful, one of another shape is used; nothing but time ends the debt (not a frame
 * nothing asked for); a debt of the pending request's own bytes does not doubt. */
static void test_debt_by_time(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_req(t, 1, 0, 2, 0);
    read_req(t, 1, 20, 2, 100);                         /* gave up on 0: heard timeout 99.5, W 398 */
    read_ans(t, 1, 2, 7, 103);                          /* 0's late answer, or 20's? */
    idle(t, 150);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    read_ans(t, 1, 2, 5, 160);                          /* nothing asked: pays nothing */
    assert_int_equal(count(t, RTU_PAIR_UNPAIRED), 1);
    read_req(t, 1, 40, 3, 200);                         /* another shape: 0 cannot own it */
    read_ans(t, 1, 3, 8, 203);
    read_req(t, 1, 20, 2, 300);                         /* 0 still owes (until 398.5) */
    read_ans(t, 1, 2, 9, 303);
    read_req(t, 1, 20, 2, 600);                         /* 0 expired; 20 owes: the same bytes */
    read_ans(t, 1, 2, 10, 603);
    read_req(t, 1, 0, 2, 1100);                         /* 20 expired (998.5) */
    read_ans(t, 1, 2, 11, 1103);
    idle(t, 1200);
    assert_int_equal(count(t, RTU_PAIR_ANSWERED), 3);
    assert_int_equal(count(t, RTU_PAIR_DOUBTFUL), 2);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_ANSWERED);
    /* An exception of the function counts as the same shape. */
    read_req(t, 5, 0, 2, 2000);
    read_req(t, 5, 10, 5, 2100);
    const uint8_t ex[] = { 5, 0x83, 2 };
    frame(t, false, ex, sizeof ex, 2103, true);
    idle(t, 2150);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(t->p, &st);
    assert_int_equal(st.owed, 3);
    line_free(t);
}

/* P5, the retry: an answer to the master's retry is used (either attempt's answer answers
 * the same question), but the retry's own may still come: it owes, and another request
 * of that shape is doubted until W after it. A smaller late factor ends debts sooner. */
static void test_retry_allowed(void **state)
{
    (void)state;
    line_t *t = line_new();
    read_req(t, 2, 0, 2, 0);
    read_req(t, 2, 0, 2, 100);                          /* the retry */
    read_ans(t, 2, 2, 7, 103);
    idle(t, 150);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_ANSWERED);
    assert_true(t->ev[t->n - 1].retry);
    read_req(t, 2, 10, 2, 200);
    read_ans(t, 2, 2, 8, 203);
    idle(t, 250);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_DOUBTFUL);
    read_req(t, 2, 10, 2, 700);                         /* 0 expired (498.5); 10 is its own */
    read_ans(t, 2, 2, 9, 703);
    idle(t, 750);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_ANSWERED);
    line_free(t);
    /* late factor 2: W = 199 ms */
    t = line_new();
    rtu_pairer_set_late_factor(t->p, 2);
    read_req(t, 2, 0, 2, 0);
    read_req(t, 2, 20, 2, 100);
    read_req(t, 2, 20, 2, 250);                         /* 0 owed until 199.5 only */
    read_ans(t, 2, 2, 7, 253);
    idle(t, 300);
    assert_int_equal(t->ev[t->n - 1].kind, RTU_PAIR_ANSWERED);
    line_free(t);
}

/* Broadcasts leave nothing pending; events the caller does not drain are counted. */
static void test_broadcast_and_bound(void **state)
{
    (void)state;
    rtu_pairer_t *p = rtu_pairer_new(0);
    assert_non_null(p);
    rtu_frame_t f;
    memset(&f, 0, sizeof f);
    const uint8_t bc[] = { 0, 6, 0, 1, 0, 1 };
    memcpy(f.adu, bc, sizeof bc);
    uint16_t crc = rtu_crc16(f.adu, sizeof bc);
    f.adu[6] = (uint8_t)crc;
    f.adu[7] = (uint8_t)(crc >> 8);
    f.len = 8;
    f.crc_ok = 1;
    f.is_request = 1;
    rtu_pairer_frame(p, &f, 0);
    rtu_pairer_frame(p, &f, 0);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(p, &st);
    assert_int_equal(st.broadcasts, 2);
    assert_int_equal(st.by_kind[RTU_PAIR_UNANSWERED], 0);
    f.crc_ok = 0;
    for (int i = 0; i < 100; i++)
        rtu_pairer_frame(p, &f, 0);
    rtu_pairer_get_stats(p, &st);
    assert_int_equal(st.by_kind[RTU_PAIR_DAMAGED], 100);
    assert_true(st.dropped > 0);
    rtu_pair_event_t ev;
    size_t n = 0;
    while (rtu_pairer_next(p, &ev) == 1)
        n++;
    assert_int_equal(n + st.dropped, 100);
    rtu_pairer_free(p);
}

/* The learner: one poll per distinct request, its interval without retries, the master's
 * timeout from the give-ups, the slowest answer. */
static void test_learn(void **state)
{
    (void)state;
    line_t *t = line_new();
    for (int i = 0; i < 5; i++) {
        read_req(t, 4, 100, 10, 1000u * i);
        read_ans(t, 4, 10, 1, 1000u * i + 4);
        read_req(t, 4, 200, 2, 1000u * i + 100);
        if (i == 2) {
            read_req(t, 4, 200, 2, 1000u * i + 400);   /* the master's retry after 300 ms */
            read_ans(t, 4, 2, 1, 1000u * i + 402);
        } else {
            read_ans(t, 4, 2, 1, 1000u * i + 102);
        }
    }
    idle(t, 10000);
    rtu_learn_poll_t p0, p1, p2;
    assert_int_equal(rtu_learn_poll(t->l, 0, &p0), 1);
    assert_int_equal(rtu_learn_poll(t->l, 1, &p1), 1);
    assert_int_equal(rtu_learn_poll(t->l, 2, &p2), 0);
    assert_int_equal(p0.address, 100);
    assert_int_equal(p0.quantity, 10);
    assert_int_equal(p0.count, 5);
    assert_int_equal(p0.interval_min_ns, 1000 * MS);
    assert_int_equal(p0.interval_max_ns, 1000 * MS);
    assert_int_equal(p1.address, 200);
    assert_int_equal(p1.count, 6);                     /* the retry counts as a request ... */
    assert_int_equal(p1.intervals, 4);                 /* ... not as an interval */
    const rtu_learn_slave_t *s = rtu_learn_slave(t->l, 4);
    assert_non_null(s);
    assert_int_equal(s->unanswered, 1);
    assert_int_equal(s->retries, 1);
    assert_int_equal(s->timeout_min_ns, 300 * MS - MS / 2);
    assert_int_equal(s->latency_max_ns, 4 * MS - MS / 2);
    assert_null(rtu_learn_slave(t->l, 5));
    line_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches),
        cmocka_unit_test(test_answered),
        cmocka_unit_test(test_unanswered_retry_unpaired),
        cmocka_unit_test(test_vouching),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_late_never_used),
        cmocka_unit_test(test_debt_by_time),
        cmocka_unit_test(test_retry_allowed),
        cmocka_unit_test(test_broadcast_and_bound),
        cmocka_unit_test(test_learn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
