/*
 * tests/unit/test_serial.c -- the serial driver on pseudo-terminal pairs
 * (termios path): configuration, data both ways, exclusive open, RS-485
 * errors, echo suppression, hang-up and reopen with back-off.
 * Never opens /dev/ttyS0 (it may be a console).
 */
#include "drivers/driver.h"
#include "parser/rtu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <cmocka.h>

typedef struct pair {
    int master, slave;
    char path[128];
} pair_t;

static void pair_open(pair_t *p)
{
    assert_int_equal(driver_pty_open(&p->master, &p->slave, p->path, sizeof p->path), 0);
}

static void pair_close(pair_t *p)
{
    if (p->master >= 0)
        close(p->master);
    if (p->slave >= 0)
        close(p->slave);
    p->master = p->slave = -1;
}

static driver_t *serial_on(const char *path, const char *format, unsigned baud, char *err)
{
    driver_serial_config_t c;
    driver_serial_defaults(&c);
    c.path = path;
    c.baud = baud;
    assert_int_equal(driver_serial_parse_format(format, &c), 0);
    driver_t *d = driver_serial_new(&c, err, DRIVER_ERRLEN);
    if (!d)
        fail_msg("driver_serial_new: %s", err);
    return d;
}

/* Reads from the driver until n bytes came or 2 s passed. */
static size_t drv_read_n(driver_t *d, uint8_t *buf, size_t n, uint64_t *t)
{
    size_t have = 0;
    uint64_t until = driver_now_ns() + 2000000000ull;
    while (have < n && driver_now_ns() < until) {
        struct pollfd p = { driver_fd(d), POLLIN, 0 };
        poll(&p, 1, 100);
        ssize_t r = driver_read(d, buf + have, n - have, t);
        if (r > 0)
            have += (size_t)r;
        else if (r != DRIVER_AGAIN)
            fail_msg("driver_read: %zd", r);
    }
    return have;
}

static size_t fd_read_n(int fd, uint8_t *buf, size_t n)
{
    size_t have = 0;
    while (have < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 2000) != 1)
            break;
        ssize_t r = read(fd, buf + have, n - have);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    return have;
}

static void test_configure_and_data(void **state)
{
    (void)state;
    alarm(20);
    pair_t p;
    pair_open(&p);
    char err[DRIVER_ERRLEN];
    driver_t *d = serial_on(p.path, "8E1", 9600, err);
    assert_false(driver_is_open(d));
    if (driver_open(d, err, sizeof err) != 0)
        fail_msg("open %s: %s", p.path, err);
    int fd = driver_fd(d);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
    struct termios tio;
    assert_int_equal(tcgetattr(fd, &tio), 0);
    assert_int_equal(tio.c_cflag & CSIZE, CS8);
    /* (A pseudo-terminal forces 8 bits without parity: not checked here.) */
    assert_false(tio.c_lflag & ICANON);
    assert_false(tio.c_lflag & ECHO);
    assert_int_equal(cfgetospeed(&tio), B9600);
    char desc[256];
    driver_describe(d, desc, sizeof desc);
    assert_non_null(strstr(desc, p.path));
    assert_non_null(strstr(desc, "9600 8E1"));
    /* t3.5 at 9600 8E1: 3.5 * 11 / 9600 s = 4.0104 ms; t1.5 = 1.71875 ms. */
    assert_int_equal(driver_serial_t35_ns(d), 4010417);
    assert_int_equal(driver_serial_t15_ns(d), 1718750);

    /* Driver to line, byte exact (raw mode: no CR/LF translation). */
    static const uint8_t frame[] = { 0x01, 0x03, 0x0A, 0x0D, 0x11, 0x13, 0xFF, 0x00 };
    assert_int_equal(driver_write(d, frame, sizeof frame), (ssize_t)sizeof frame);
    uint8_t buf[64];
    assert_int_equal(fd_read_n(p.master, buf, sizeof frame), sizeof frame);
    assert_memory_equal(buf, frame, sizeof frame);
    /* Line to driver, stamped on arrival with CLOCK_MONOTONIC. */
    uint64_t before = driver_now_ns();
    assert_int_equal(write(p.master, frame, sizeof frame), (ssize_t)sizeof frame);
    uint64_t t = 0;
    assert_int_equal(drv_read_n(d, buf, sizeof frame, &t), sizeof frame);
    assert_memory_equal(buf, frame, sizeof frame);
    assert_true(t >= before && t <= driver_now_ns());
    /* Nothing there: DRIVER_AGAIN, at once. */
    assert_int_equal(driver_read(d, buf, sizeof buf, &t), DRIVER_AGAIN);
    driver_stats_t st;
    driver_get_stats(d, &st);
    assert_int_equal(st.bytes_in, sizeof frame);
    assert_int_equal(st.bytes_out, sizeof frame);
    driver_free(d);
    pair_close(&p);
    alarm(0);
}

static void test_exclusive(void **state)
{
    (void)state;
    alarm(20);
    pair_t p;
    pair_open(&p);
    char err[DRIVER_ERRLEN];
    driver_t *a = serial_on(p.path, "8N1", 19200, err);
    driver_t *b = serial_on(p.path, "8N1", 19200, err);
    assert_int_equal(driver_open(a, err, sizeof err), 0);
    int rc = driver_open(b, err, sizeof err);
    assert_int_equal(rc, -EBUSY);
    assert_non_null(strstr(err, p.path));
    assert_non_null(strstr(err, "in use"));
    assert_false(driver_is_open(b));
    driver_stats_t st;
    driver_get_stats(b, &st);
    assert_int_equal(st.open_failures, 1);
    /* Once the first lets go, the second gets it. */
    driver_close(a);
    assert_int_equal(driver_open(b, err, sizeof err), 0);
    assert_int_equal(driver_open(a, err, sizeof err), -EBUSY);
    driver_free(a);
    driver_free(b);
    pair_close(&p);
    alarm(0);
}

static void test_bad_config_and_missing_port(void **state)
{
    (void)state;
    char err[DRIVER_ERRLEN];
    driver_serial_config_t c;
    driver_serial_defaults(&c);
    c.path = "/dev/rtugw-no-such-port";
    c.baud = 12345;
    assert_null(driver_serial_new(&c, err, sizeof err));
    assert_non_null(strstr(err, "12345"));
    c.baud = 9600;
    assert_int_equal(driver_serial_parse_format("9N1", &c), -EINVAL);
    assert_int_equal(driver_serial_parse_format("8X1", &c), -EINVAL);
    assert_int_equal(driver_serial_parse_format("7O2", &c), 0);
    assert_int_equal(c.data_bits, 7);
    assert_int_equal(c.parity, 'O');
    assert_int_equal(c.stop_bits, 2);
    driver_t *d = driver_serial_new(&c, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(driver_open(d, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/dev/rtugw-no-such-port"));
    driver_free(d);
}

static void test_rs485_unsupported(void **state)
{
    (void)state;
    alarm(20);
    pair_t p;
    pair_open(&p);
    char err[DRIVER_ERRLEN];
    driver_serial_config_t c;
    driver_serial_defaults(&c);
    c.path = p.path;
    c.rs485 = DRIVER_RS485_KERNEL;
    c.delay_before_us = 500;
    driver_t *d = driver_serial_new(&c, err, sizeof err);
    assert_non_null(d);
    int rc = driver_open(d, err, sizeof err);
    assert_true(rc < 0);
    assert_non_null(strstr(err, p.path));
    assert_non_null(strstr(err, "RS-485"));
    assert_non_null(strstr(err, "not supported"));
    assert_false(driver_is_open(d));
    /* The failed open released the lock: a plain open works. */
    driver_t *plain = serial_on(p.path, "8E1", 19200, err);
    if (driver_open(plain, err, sizeof err) != 0)
        fail_msg("plain open after RS-485 failure: %s", err);
    assert_int_equal(driver_serial_rs485_active(plain), DRIVER_RS485_OFF);
    driver_free(plain);
    driver_free(d);
    pair_close(&p);
    alarm(0);
}

static void test_echo_suppression(void **state)
{
    (void)state;
    alarm(20);
    pair_t p;
    pair_open(&p);
    char err[DRIVER_ERRLEN];
    driver_serial_config_t c;
    driver_serial_defaults(&c);
    c.path = p.path;
    c.echo_suppress = true;
    driver_t *d = driver_serial_new(&c, err, sizeof err);
    assert_int_equal(driver_open(d, err, sizeof err), 0);
    static const uint8_t req[] = { 0x01, 0x03, 0x00, 0x00, 0x00, 0x01, 0x84, 0x0A };
    static const uint8_t rsp[] = { 0x01, 0x03, 0x02, 0x03, 0xE8, 0xB8, 0xFA };
    assert_int_equal(driver_write(d, req, sizeof req), (ssize_t)sizeof req);
    uint8_t buf[64];
    assert_int_equal(fd_read_n(p.master, buf, sizeof req), sizeof req);
    /* The transceiver echoes our request, then the slave answers. */
    uint8_t line[sizeof req + sizeof rsp];
    memcpy(line, req, sizeof req);
    memcpy(line + sizeof req, rsp, sizeof rsp);
    assert_int_equal(write(p.master, line, sizeof line), (ssize_t)sizeof line);
    uint64_t t;
    assert_int_equal(drv_read_n(d, buf, sizeof rsp, &t), sizeof rsp);
    assert_memory_equal(buf, rsp, sizeof rsp);
    driver_stats_t st;
    driver_get_stats(d, &st);
    assert_int_equal(st.echo_bytes, sizeof req);
    assert_int_equal(st.echo_mismatches, 0);
    driver_free(d);
    pair_close(&p);
    alarm(0);
}

static void test_hangup_and_reopen(void **state)
{
    (void)state;
    alarm(20);
    char link[] = "/tmp/rtugw-test-serial-XXXXXX";
    assert_non_null(mkdtemp(link));
    char lpath[256];
    snprintf(lpath, sizeof lpath, "%s/port", link);
    pair_t a, b;
    pair_open(&a);
    assert_int_equal(symlink(a.path, lpath), 0);
    char err[DRIVER_ERRLEN];
    driver_t *d = serial_on(lpath, "8N1", 115200, err);
    if (driver_open(d, err, sizeof err) != 0)
        fail_msg("open %s: %s", lpath, err);
    /* t3.5 above 19200 baud is fixed at 1750 us. */
    assert_int_equal(driver_serial_t35_ns(d), 1750000);

    /* The peer goes away: the next read says hang-up (not "nothing yet"). */
    pair_close(&a);
    struct pollfd pf = { driver_fd(d), POLLIN, 0 };
    assert_int_equal(poll(&pf, 1, 1000), 1);
    assert_true(pf.revents & (POLLHUP | POLLERR));
    uint8_t buf[64];
    uint64_t t;
    assert_int_equal(driver_read(d, buf, sizeof buf, &t), DRIVER_HANGUP);
    driver_stats_t st;
    driver_get_stats(d, &st);
    assert_int_equal(st.hangups, 1);

    /* Reopen with back-off while the port is gone: 100 ms doubling to 5 s. */
    driver_backoff_t bo;
    driver_backoff_reset(&bo);
    driver_close(d);
    uint64_t now = 1000000000ull;
    static const uint64_t waits[] = { 100, 200, 400, 800, 1600, 3200, 5000, 5000 };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        assert_true(driver_open(d, err, sizeof err) < 0);
        uint64_t at = driver_backoff_next(&bo, now);
        assert_int_equal(at - now, waits[i] * 1000000ull);
        now = at;
    }
    assert_non_null(strstr(err, lpath));

    /* The peer comes back (a restarted `rtugw sim --link`): reopen works. */
    pair_open(&b);
    assert_int_equal(unlink(lpath), 0);
    assert_int_equal(symlink(b.path, lpath), 0);
    if (driver_open(d, err, sizeof err) != 0)
        fail_msg("reopen: %s", err);
    driver_backoff_reset(&bo);
    assert_int_equal(driver_backoff_next(&bo, 0), 100000000ull);
    static const uint8_t hello[] = { 0x02, 0x06, 0x00, 0x01, 0x00, 0x03, 0x98, 0x38 };
    assert_int_equal(write(b.master, hello, sizeof hello), (ssize_t)sizeof hello);
    assert_int_equal(drv_read_n(d, buf, sizeof hello, &t), sizeof hello);
    assert_memory_equal(buf, hello, sizeof hello);
    driver_get_stats(d, &st);
    assert_int_equal(st.opens, 2);
    assert_int_equal(st.open_failures, 8);
    driver_free(d);
    pair_close(&b);
    unlink(lpath);
    rmdir(link);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configure_and_data),
        cmocka_unit_test(test_exclusive),
        cmocka_unit_test(test_bad_config_and_missing_port),
        cmocka_unit_test(test_rs485_unsupported),
        cmocka_unit_test(test_echo_suppression),
        cmocka_unit_test(test_hangup_and_reopen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
