/*
 * tests/unit/test_rtu_tcp_frame.c -- where an RTU over TCP request without a
 * length rule ends (front/rtu_tcp_frame.c), fed 10^6 random requests as
 * a TCP stream delivers them: split at random points, one at a time or
 * several back to back, the stream quiet after the last byte. No request
 * may be cut or run into the next (a wrong answer), none may be left
 * waiting once quiet; a few may be refused (the end undecidable).
 */
#include "front/internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 16);
}

static size_t add_crc(uint8_t *f, size_t n)
{
    uint16_t c = rtu_crc16(f, n);
    f[n] = (uint8_t)c;
    f[n + 1] = (uint8_t)(c >> 8);
    return n + 2;
}

/* A random request without a length rule: mostly FC 8 echoes (the 16
 * random bytes among them), else another function the parser has no rule for. */
static size_t random_request(uint8_t *f)
{
    static const uint8_t others[] = { 7, 8, 11, 12, 17, 20, 21, 24, 43, 65, 66, 100, 110 };
    size_t n = 0, data = next_random() % 4 == 0 ? 16 : next_random() % 24;
    f[n++] = (uint8_t)(1 + next_random() % 247);
    if (next_random() % 4) {
        f[n++] = 8;
        f[n++] = 0;
        f[n++] = 0;
    } else {
        f[n++] = others[next_random() % sizeof others];
    }
    for (size_t i = 0; i < data; i++)
        f[n++] = (uint8_t)next_random();
    return add_crc(f, n);
}

/* A read with a length rule, pipelined among the others. */
static size_t read_request(uint8_t *f)
{
    uint8_t pdu[] = { (uint8_t)(1 + next_random() % 247), 3, (uint8_t)next_random(), (uint8_t)next_random(), 0,
                      (uint8_t)(1 + next_random() % 125) };
    memcpy(f, pdu, sizeof pdu);
    return add_crc(f, sizeof pdu);
}

typedef struct {
    unsigned wrong, refused, stalled, requests;
} tally_t;

/* The front end's side (rtu_tcp.c's rtu_next): frames what it can of buf. */
static size_t frame_all(uint8_t *buf, size_t have, bool quiet, const size_t *lens, size_t count, size_t *done,
                        tally_t *t)
{
    size_t at = 0;
    while (at < have && *done < count) {
        size_t n = 0;
        int want = rtu_request_length(buf + at, have - at);
        rtu_tcp_end_t e;
        if (want > 0) {
            if (have - at < (size_t)want)
                break;
            n = (size_t)want;
            e = RTU_TCP_END_FOUND;
        } else if (want == 0) {
            break;
        } else {
            e = rtu_tcp_frame_end(buf + at, have - at, quiet, &n);
        }
        if (e == RTU_TCP_END_AMBIGUOUS) {
            t->refused++;
            *done = count;   /* the whole rest refused as one */
            return have;
        }
        if (e != RTU_TCP_END_FOUND)
            break;
        if (n != lens[*done])
            t->wrong++;
        at += lens[*done];   /* keep in step to go on counting */
        (*done)++;
    }
    return at;
}

/* count requests back to back, delivered in random pieces, then quiet. */
static void one_burst(tally_t *t, size_t count)
{
    uint8_t stream[8 * 300], buf[sizeof stream];
    size_t lens[8], total = 0, done = 0, have = 0, sent = 0;

    for (size_t i = 0; i < count; i++) {
        lens[i] = (count > 1 && next_random() % 3 == 0) ? read_request(stream + total) : random_request(stream + total);
        total += lens[i];
    }
    t->requests += (unsigned)count;
    while (sent < total) {
        size_t piece = next_random() % 3 == 0 ? total - sent : 1 + next_random() % (total - sent);
        memcpy(buf + have, stream + sent, piece);
        have += piece;
        sent += piece;
        size_t used = frame_all(buf, have, false, lens, count, &done, t);
        memmove(buf, buf + used, have - used);
        have -= used;
    }
    size_t used = frame_all(buf, have, true, lens, count, &done, t);
    if (done < count || used < have)
        t->stalled++;
}

static void test_random_requests(void **state)
{
    (void)state;
    tally_t t = { 0 };
    while (t.requests < 1000000)
        one_burst(&t, next_random() % 4 ? 1 : 2 + next_random() % 4);
    printf("%u requests: %u cut or run on, %u refused, %u left waiting\n", t.requests, t.wrong, t.refused, t.stalled);
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.stalled, 0);
    assert_true(t.refused < t.requests / 1000);
}

/* The crafted requests, which the shortest good prefix cut every time. */
static void test_crafted(void **state)
{
    (void)state;
    uint8_t diag[] = { 24, 8, 0x00, 0x0A, 0x00, 0x00, 0, 0 }, mei[] = { 1, 43, 14, 1, 0xB4, 0, 0 };
    const struct { uint8_t *f; size_t n; } cases[] = { { diag, sizeof diag }, { mei, sizeof mei } };
    for (size_t i = 0; i < 2; i++) {
        size_t n = add_crc(cases[i].f, cases[i].n - 2), len = 0;
        assert_int_equal(cases[i].f[n - 1], 0);   /* the shape that has a good prefix */
        assert_int_equal(rtu_tcp_frame_end(cases[i].f, n, false, &len), RTU_TCP_END_IF_QUIET);
        assert_int_equal(rtu_tcp_frame_end(cases[i].f, n, true, &len), RTU_TCP_END_FOUND);
        assert_int_equal(len, n);
        /* its first n - 1 bytes alone, quiet: that is a whole request */
        assert_int_equal(rtu_tcp_frame_end(cases[i].f, n - 1, true, &len), RTU_TCP_END_FOUND);
        assert_int_equal(len, n - 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crafted),
        cmocka_unit_test(test_random_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
