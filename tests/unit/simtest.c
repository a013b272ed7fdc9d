/*
 * tests/unit/simtest.c -- see simtest.h.
 */
#include "tests/unit/simtest.h"
#include "parser/rtu.h"

#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <cmocka.h>

void simtest_start(simtest_fx_t *f, const driver_sim_config_t *cfg)
{
    char err[DRIVER_ERRLEN];
    alarm(30); /* no test may hang */
    assert_int_equal(driver_pty_open(&f->master, &f->slave, f->path, sizeof f->path), 0);
    f->sim = driver_sim_new(cfg, err, sizeof err);
    if (!f->sim)
        fail_msg("driver_sim_new: %s", err);
    assert_int_equal(driver_sim_start(f->sim, f->master), 0);
}

void simtest_stop(simtest_fx_t *f)
{
    driver_sim_free(f->sim); /* stops and joins the thread */
    close(f->master);
    close(f->slave);
    alarm(0);
}

void simtest_collect_chunks(int fd, simtest_chunks_t *c, int first_ms, int quiet_ms)
{
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        int rc = poll(&p, 1, c->len ? quiet_ms : first_ms);
        if (rc <= 0 || c->len == sizeof c->bytes)
            break;
        ssize_t r = read(fd, c->bytes + c->len, sizeof c->bytes - c->len);
        if (r <= 0)
            break;
        c->len += (size_t)r;
        if (c->n < SIMTEST_CHUNKS)
            c->n++;          /* else the last chunk grows: byte-by-byte answers */
        c->end[c->n - 1] = c->len;
        c->t[c->n - 1] = driver_now_ns();
    }
}

size_t simtest_xfer(int fd, const uint8_t *req, size_t n, uint8_t *rsp, size_t cap, int first_ms,
            uint64_t *t_sent, uint64_t *t_last)
{
    tcflush(fd, TCIFLUSH);
    /* Stamped before the write: the answer cannot start earlier, so elapsed
     * times measured from here are safe lower-bound checks even when this
     * thread is preempted right after writing. */
    if (t_sent)
        *t_sent = driver_now_ns();
    assert_int_equal(write(fd, req, n), (ssize_t)n);
    static simtest_chunks_t c;
    memset(&c, 0, sizeof c);
    simtest_collect_chunks(fd, &c, first_ms, QUIET_MS);
    size_t have = c.len < cap ? c.len : cap;
    memcpy(rsp, c.bytes, have);
    if (t_last && c.n)
        *t_last = c.t[c.n - 1];
    return have;
}

int simtest_plan_hits(const driver_sim_config_t *cfg, uint16_t qty, simtest_pred_t hit)
{
    char err[DRIVER_ERRLEN];
    driver_sim_t *sim = driver_sim_new(cfg, err, sizeof err);
    if (!sim)
        fail_msg("driver_sim_new: %s", err);
    uint8_t req[RTU_MAX_ADU];
    size_t n = simtest_make_req(1, 3, 0, qty, req);
    int hits = 0;
    for (int i = 0; i < 200; i++) {
        driver_sim_answer_t a;
        assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &a), 1);
        hits += hit(&a);
    }
    driver_sim_free(sim);
    return hits;
}

size_t simtest_make_req(uint8_t slave, uint8_t fc, uint16_t a, uint16_t q, uint8_t *adu)
{
    uint8_t pdu[5] = { fc, (uint8_t)(a >> 8), (uint8_t)a, (uint8_t)(q >> 8), (uint8_t)q };
    int n = rtu_adu_from_pdu(slave, pdu, sizeof pdu, adu, RTU_MAX_ADU);
    assert_int_equal(n, 8);
    return (size_t)n;
}

bool simtest_crc_ok(const uint8_t *p, size_t n)
{
    return n >= 4 && rtu_crc16(p, n - 2) == (uint16_t)(p[n - 2] | p[n - 1] << 8);
}
