/*
 * tests/unit/test_replay.c -- capture readers (pcap, pcapng, text), the replay
 * driver, and `rtugw replay` end to end. Every capture is built byte by byte
 * here; malformed ones must give a clear error and never crash.
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
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

/* ---- building captures ---------------------------------------------------------- */

typedef struct buf {
    uint8_t b[8192];
    size_t n;
    bool be; /* write multi-byte fields big-endian */
} buf_t;

static void put(buf_t *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void u8(buf_t *b, uint8_t v)
{
    put(b, &v, 1);
}

static void u16(buf_t *b, uint16_t v)
{
    uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    if (b->be) {
        x[0] = (uint8_t)(v >> 8);
        x[1] = (uint8_t)v;
    }
    put(b, x, 2);
}

static void u32(buf_t *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[b->be ? 3 - i : i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}

static void be16w(buf_t *b, uint16_t v)
{
    u8(b, (uint8_t)(v >> 8));
    u8(b, (uint8_t)v);
}

static void pad4(buf_t *b)
{
    while (b->n % 4)
        u8(b, 0);
}

static void pcap_global(buf_t *b, uint32_t magic, uint32_t linktype)
{
    u32(b, magic);
    u16(b, 2);
    u16(b, 4);
    u32(b, 0);
    u32(b, 0);
    u32(b, 65535);
    u32(b, linktype);
}

static void pcap_record(buf_t *b, uint32_t sec, uint32_t frac, const uint8_t *p, size_t n)
{
    u32(b, sec);
    u32(b, frac);
    u32(b, (uint32_t)n);
    u32(b, (uint32_t)n);
    put(b, p, n);
}

static void ng_shb(buf_t *b)
{
    u32(b, 0x0a0d0d0a);
    u32(b, 28);
    u32(b, 0x1a2b3c4d);
    u16(b, 1);
    u16(b, 0);
    u32(b, 0xffffffff);
    u32(b, 0xffffffff);
    u32(b, 28);
}

static void ng_idb(buf_t *b, uint16_t linktype, int tsresol)
{
    uint32_t len = 20 + (tsresol >= 0 ? 12 : 0);
    u32(b, 1);
    u32(b, len);
    u16(b, linktype);
    u16(b, 0);
    u32(b, 65535);
    if (tsresol >= 0) {
        u16(b, 9);
        u16(b, 1);
        u8(b, (uint8_t)tsresol);
        u8(b, 0);
        u8(b, 0);
        u8(b, 0);
        u16(b, 0); /* opt_endofopt */
        u16(b, 0);
    }
    u32(b, len);
}

static void ng_epb(buf_t *b, uint32_t iface, uint64_t ts, const uint8_t *p, size_t n)
{
    uint32_t len = (uint32_t)(32 + ((n + 3) & ~(size_t)3));
    u32(b, 6);
    u32(b, len);
    u32(b, iface);
    u32(b, (uint32_t)(ts >> 32));
    u32(b, (uint32_t)ts);
    u32(b, (uint32_t)n);
    u32(b, (uint32_t)n);
    put(b, p, n);
    pad4(b);
    u32(b, len);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* The scratch directory comes in the cmocka group state. */
static void tmp(void **state, const char *name, char *path)
{
    snprintf(path, 256, "%s/%s", (const char *)*state, name);
}

/* Frames used throughout: a read request, its answer, a write and its echo. */
static const uint8_t REQ[] = { 0x01, 0x03, 0x00, 0x00, 0x00, 0x02, 0xC4, 0x0B };
static const uint8_t RSP[] = { 0x01, 0x03, 0x04, 0x00, 0x0A, 0x00, 0x0B, 0x9B, 0xF6 };
static const uint8_t WREQ[] = { 0x02, 0x06, 0x00, 0x01, 0x00, 0x03, 0x98, 0x38 };

static void frames_init(void)
{
    assert_int_equal(rtu_crc16(REQ, 6), 0x0BC4);
    assert_int_equal(rtu_crc16(RSP, 7), 0xF69B);
    assert_int_equal(rtu_crc16(WREQ, 6), 0x3898);
}

static void expect_record(driver_capture_t *c, const uint8_t *data, size_t n, uint64_t ts,
                          int dir)
{
    driver_record_t rec;
    char err[DRIVER_ERRLEN];
    int rc = driver_capture_next(c, &rec, err, sizeof err);
    if (rc != 1)
        fail_msg("expected a record, got %d: %s", rc, rc < 0 ? err : "end");
    assert_int_equal(rec.len, n);
    assert_memory_equal(rec.data, data, n);
    if (ts != UINT64_MAX)
        assert_int_equal(rec.ts_ns, ts);
    assert_int_equal(rec.direction, dir);
}

static void expect_end(driver_capture_t *c)
{
    driver_record_t rec;
    char err[DRIVER_ERRLEN];
    assert_int_equal(driver_capture_next(c, &rec, err, sizeof err), 0);
}

/* ---- pcap ---------------------------------------------------------------------------- */

static void test_pcap_user(void **state)
{
    (void)state;
    frames_init();
    for (int variant = 0; variant < 3; variant++) {
        buf_t b = { .n = 0, .be = variant == 1 };
        uint32_t magic = variant == 2 ? 0xa1b23c4d : 0xa1b2c3d4; /* ns : us */
        uint32_t unit = variant == 2 ? 1000 : 1;
        pcap_global(&b, magic, 147);
        pcap_record(&b, 100, 250000 * unit, REQ, sizeof REQ);
        pcap_record(&b, 100, 500000 * unit, RSP, sizeof RSP);
        uint8_t merged[sizeof REQ + sizeof RSP];
        memcpy(merged, REQ, sizeof REQ);
        memcpy(merged + sizeof REQ, RSP, sizeof RSP);
        pcap_record(&b, 101, 0, merged, sizeof merged);
        char path[256];
        tmp(state, "user.pcap", path);
        write_file(path, b.b, b.n);
        char err[DRIVER_ERRLEN];
        driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
        if (!c)
            fail_msg("open: %s", err);
        assert_int_equal(driver_capture_format(c), DRIVER_CAPTURE_PCAP);
        expect_record(c, REQ, sizeof REQ, 100250000000ull, -1);
        expect_record(c, RSP, sizeof RSP, 100500000000ull, -1);
        expect_record(c, merged, sizeof merged, 101000000000ull, -1);
        expect_end(c);
        driver_capture_close(c);
    }
}

/* Ethernet + IPv4 + TCP to or from port 502, with MBAP ADUs as payload. */
static void eth_tcp(buf_t *pkt, uint16_t sport, uint16_t dport, const uint8_t *pl, size_t n)
{
    static const uint8_t macs[12] = { 0 };
    put(pkt, macs, 12);
    be16w(pkt, 0x0800);
    u8(pkt, 0x45);
    u8(pkt, 0);
    be16w(pkt, (uint16_t)(20 + 20 + n));
    be16w(pkt, 1);
    be16w(pkt, 0x4000); /* DF */
    u8(pkt, 64);
    u8(pkt, 6);
    be16w(pkt, 0);
    static const uint8_t ips[8] = { 127, 0, 0, 1, 127, 0, 0, 1 };
    put(pkt, ips, 8);
    be16w(pkt, sport);
    be16w(pkt, dport);
    static const uint8_t seqack[8] = { 0 };
    put(pkt, seqack, 8);
    u8(pkt, 0x50);
    u8(pkt, 0x18);
    be16w(pkt, 1024);
    be16w(pkt, 0);
    be16w(pkt, 0);
    put(pkt, pl, n);
}

static void test_pcap_tcp(void **state)
{
    (void)state;
    frames_init();
    /* Two MBAP ADUs in one segment (a pipelining client), then the answer. */
    uint8_t mb[64];
    int n1 = mbap_encode(1, 1, REQ + 1, sizeof REQ - 3, mb, sizeof mb);
    int n2 = mbap_encode(2, 2, WREQ + 1, sizeof WREQ - 3, mb + n1, sizeof mb - (size_t)n1);
    assert_true(n1 > 0 && n2 > 0);
    uint8_t ans[32];
    int na = mbap_encode(1, 1, RSP + 1, sizeof RSP - 3, ans, sizeof ans);
    buf_t p1 = { .n = 0 }, p2 = { .n = 0 }, p3 = { .n = 0 };
    eth_tcp(&p1, 40000, 502, mb, (size_t)(n1 + n2));
    eth_tcp(&p2, 502, 40000, ans, (size_t)na);
    eth_tcp(&p3, 40000, 8080, mb, (size_t)n1); /* not Modbus: skipped */
    buf_t b = { .n = 0 };
    pcap_global(&b, 0xa1b2c3d4, 1);
    pcap_record(&b, 5, 0, p1.b, p1.n);
    pcap_record(&b, 5, 1, p3.b, p3.n);
    pcap_record(&b, 5, 2, p2.b, p2.n);
    char path[256];
    tmp(state, "tcp.pcap", path);
    write_file(path, b.b, b.n);
    char err[DRIVER_ERRLEN];
    driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
    assert_non_null(c);
    expect_record(c, REQ, sizeof REQ, 5000000000ull, 1);   /* CRC added back */
    expect_record(c, WREQ, sizeof WREQ, 5000000000ull, 1);
    expect_record(c, RSP, sizeof RSP, 5000002000ull, 0);
    expect_end(c);
    assert_int_equal(driver_capture_skipped(c), 1);
    driver_capture_close(c);
}

/* ---- pcapng --------------------------------------------------------------------------- */

static void test_pcapng(void **state)
{
    (void)state;
    frames_init();
    for (int variant = 0; variant < 2; variant++) {
        buf_t b = { .n = 0, .be = variant == 1 };
        ng_shb(&b);
        ng_idb(&b, 148, 9);  /* USER1, nanoseconds */
        ng_idb(&b, 1, -1);   /* Ethernet, default microseconds */
        /* an unknown block type is skipped */
        u32(&b, 0x0BAD);
        u32(&b, 16);
        u32(&b, 0);
        u32(&b, 16);
        ng_epb(&b, 0, 1000000001ull, REQ, sizeof REQ);
        ng_epb(&b, 0, 1004000000ull, RSP, sizeof RSP);
        uint8_t ans[32];
        int na = mbap_encode(7, 1, RSP + 1, sizeof RSP - 3, ans, sizeof ans);
        buf_t pkt = { .n = 0 };
        eth_tcp(&pkt, 502, 1234, ans, (size_t)na);
        ng_epb(&b, 1, 2000000ull, pkt.b, pkt.n); /* 2 s in microseconds */
        char path[256];
    tmp(state, "capture.pcapng", path);
        write_file(path, b.b, b.n);
        char err[DRIVER_ERRLEN];
        driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
        if (!c)
            fail_msg("open: %s", err);
        assert_int_equal(driver_capture_format(c), DRIVER_CAPTURE_PCAPNG);
        expect_record(c, REQ, sizeof REQ, 1000000001ull, -1);
        expect_record(c, RSP, sizeof RSP, 1004000000ull, -1);
        expect_record(c, RSP, sizeof RSP, 2000000000ull, 0);
        expect_end(c);
        driver_capture_close(c);
    }
}

/* ---- text ------------------------------------------------------------------------------- */

static void test_text(void **state)
{
    (void)state;
    frames_init();
    const char *text =
        "# a text log\n"
        "\n"
        "1700000000.250 > 01 03 00 00 00 02 C4 0B\n"
        "1700000000.300 rx 01:03:04:00:0a:00:0b:%02x:%02x\n"
        "2024-05-01T12:00:00.5Z request 02-06-00-01-00-03-98-38\n"
        "010300000002c40b\n";
    char body[512];
    snprintf(body, sizeof body, text, RSP[7], RSP[8]);
    char path[256];
    tmp(state, "log.txt", path);
    write_file(path, body, strlen(body));
    char err[DRIVER_ERRLEN];
    driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
    if (!c)
        fail_msg("open: %s", err);
    assert_int_equal(driver_capture_format(c), DRIVER_CAPTURE_TEXT);
    expect_record(c, REQ, sizeof REQ, 1700000000250000000ull, 1);
    expect_record(c, RSP, sizeof RSP, 1700000000300000000ull, 0);
    expect_record(c, WREQ, sizeof WREQ, 1714564800500000000ull, 1);
    expect_record(c, REQ, sizeof REQ, 0, -1);
    expect_end(c);
    driver_capture_close(c);

    /* Not hex: the line and column are named. */
    write_file(path, "0.5 > 01 03\n0.6 < 01 0g 03\n", 26);
    c = driver_capture_open(path, DRIVER_CAPTURE_TEXT, err, sizeof err);
    assert_non_null(c);
    driver_record_t rec;
    assert_int_equal(driver_capture_next(c, &rec, err, sizeof err), 1);
    assert_int_equal(driver_capture_next(c, &rec, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, path));
    if (!strstr(err, "line 2, column 11: not hex: 'g'"))
        fail_msg("got: %s", err);
    driver_capture_close(c);
}

/* ---- malformed ---------------------------------------------------------------------------- */

static void expect_error(const char *path, const void *data, size_t n, int records_ok,
                         const char *what)
{
    write_file(path, data, n);
    char err[DRIVER_ERRLEN] = "";
    driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
    if (!c) {
        assert_int_equal(records_ok, -1);
    } else {
        driver_record_t rec;
        int rc, got = 0;
        while ((rc = driver_capture_next(c, &rec, err, sizeof err)) == 1)
            got++;
        assert_int_equal(rc, -EBADMSG);
        assert_int_equal(got, records_ok);
        driver_capture_close(c);
    }
    assert_non_null(strstr(err, path));
    if (!strstr(err, what))
        fail_msg("expected '%s' in '%s'", what, err);
}

static void test_malformed(void **state)
{
    (void)state;
    frames_init();
    char path[256];
    tmp(state, "bad.cap", path);
    buf_t b = { .n = 0 };
    /* pcap: the second record announces 100 bytes, 10 follow */
    pcap_global(&b, 0xa1b2c3d4, 147);
    pcap_record(&b, 1, 0, REQ, sizeof REQ);
    size_t keep = b.n;
    u32(&b, 1);
    u32(&b, 0);
    u32(&b, 100);
    u32(&b, 100);
    put(&b, RSP, 9);
    u8(&b, 0);
    expect_error(path, b.b, b.n, 1, "record 2 at offset 48: truncated");
    /* pcap: absurd length */
    b.n = keep;
    u32(&b, 1);
    u32(&b, 0);
    u32(&b, 0xFFFFFFF0u);
    u32(&b, 0xFFFFFFF0u);
    expect_error(path, b.b, b.n, 1, "exceeds");
    /* pcap: a record header cut short */
    b.n = keep + 7;
    expect_error(path, b.b, b.n, 1, "truncated record header");
    /* pcap: the file header cut short */
    expect_error(path, b.b, 20, -1, "truncated pcap file header");
    /* pcapng: block length not a multiple of 4 */
    buf_t g = { .n = 0 };
    ng_shb(&g);
    ng_idb(&g, 147, -1);
    keep = g.n;
    ng_epb(&g, 0, 1, REQ, sizeof REQ);
    size_t one = g.n;
    u32(&g, 6);
    u32(&g, 41);
    u32(&g, 0);
    expect_error(path, g.b, g.n, 1, "block length 41 invalid");
    /* pcapng: a block that runs past the end of the file */
    g.n = one;
    ng_epb(&g, 0, 2, RSP, sizeof RSP);
    expect_error(path, g.b, g.n - 6, 1, "record 2 at offset");
    /* pcapng: captured length larger than its block */
    g.n = keep;
    ng_epb(&g, 0, 1, REQ, sizeof REQ);
    g.b[keep + 20] = 0xFF; /* captured length, low byte */
    expect_error(path, g.b, g.n, 0, "exceeds its block");
    /* pcapng: a packet on an interface never described */
    g.n = keep;
    ng_epb(&g, 3, 1, REQ, sizeof REQ);
    expect_error(path, g.b, g.n, 0, "interface 3 not described");
    /* not a capture at all */
    static const uint8_t junk[] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0xff, 0xfe };
    expect_error(path, junk, sizeof junk, -1, "not a capture");
    /* a text line without end */
    char longline[10000];
    memset(longline, 'a', sizeof longline);
    expect_error(path, longline, sizeof longline, 0, "longer than");
}

/* ---- the replay driver ------------------------------------------------------------------- */

static void test_replay_driver(void **state)
{
    (void)state;
    frames_init();
    alarm(20);
    buf_t b = { .n = 0 };
    pcap_global(&b, 0xa1b2c3d4, 147);
    pcap_record(&b, 10, 0, REQ, sizeof REQ);
    pcap_record(&b, 10, 60000, RSP, sizeof RSP);     /* +60 ms */
    pcap_record(&b, 10, 120000, REQ, sizeof REQ);    /* +120 ms */
    char path[256];
    tmp(state, "drv.pcap", path);
    write_file(path, b.b, b.n);
    for (int original = 0; original < 2; original++) {
        char err[DRIVER_ERRLEN];
        driver_t *d = driver_replay_new(path, DRIVER_CAPTURE_AUTO, original, 1.0, err, sizeof err);
        assert_non_null(d);
        /* Before the open: the replay's clock starts there, and under
         * qemu-user (scripts/cross-check-armhf) the open and the write take
         * milliseconds, which would otherwise be missing from elapsed. */
        uint64_t t0 = driver_now_ns();
        if (driver_open(d, err, sizeof err) != 0)
            fail_msg("replay open: %s", err);
        assert_int_equal(driver_write(d, REQ, sizeof REQ), -EROFS);
        size_t total = 0;
        int chunks = 0;
        uint64_t ts[3] = { 0 };
        for (;;) {
            struct pollfd p = { driver_fd(d), POLLIN, 0 };
            assert_int_equal(poll(&p, 1, 2000), 1);
            uint8_t buf[64];
            uint64_t t;
            ssize_t r = driver_read(d, buf, sizeof buf, &t);
            if (r == DRIVER_EOF)
                break;
            if (r == DRIVER_AGAIN)
                continue;
            assert_true(r > 0);
            if (chunks < 3)
                ts[chunks] = t;
            chunks++;
            total += (size_t)r;
        }
        uint64_t elapsed = driver_now_ns() - t0;
        assert_int_equal(chunks, 3);
        assert_int_equal(total, 2 * sizeof REQ + sizeof RSP);
        assert_int_equal(ts[1] - ts[0], 60000000ull);
        if (original)
            assert_true(elapsed >= 120000000ull);
        char desc[512];
        driver_describe(d, desc, sizeof desc);
        assert_non_null(strstr(desc, original ? "original timing" : "as fast as possible"));
        driver_free(d);
    }
    alarm(0);
}

/* ---- rtugw replay -------------------------------------------------------------------------- */

static int run_rtugw(char *out, size_t cap, const char *const *args)
{
    const char *exe = getenv("RTUGW_BIN");
    if (!exe)
        exe = "./rtugw";
    if (access(exe, X_OK) != 0)
        fail_msg("rtugw not found at %s (set RTUGW_BIN)", exe);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        const char *argv[16] = { "rtugw" };
        int i = 0;
        for (; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        argv[i + 1] = NULL;
        alarm(20);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t have = 0;
    ssize_t r;
    while (have + 1 < cap && (r = read(p[0], out + have, cap - 1 - have)) > 0)
        have += (size_t)r;
    out[have] = 0;
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_rtugw_replay(void **state)
{
    (void)state;
    frames_init();
    /* A USER0 capture: request, answer merged into one record after some
     * noise, then a damaged answer cut short and a clean pair again. */
    buf_t b = { .n = 0 };
    pcap_global(&b, 0xa1b2c3d4, 147);
    uint8_t merged[sizeof REQ + sizeof RSP];
    memcpy(merged, REQ, sizeof REQ);
    memcpy(merged + sizeof REQ, RSP, sizeof RSP);
    pcap_record(&b, 1, 0, merged, sizeof merged);
    pcap_record(&b, 2, 0, REQ, sizeof REQ);
    pcap_record(&b, 2, 100000, RSP, sizeof RSP);
    char path[256];
    tmp(state, "replay.pcap", path);
    write_file(path, b.b, b.n);
    char out[16384];
    const char *json[] = { "replay", path, "--json", "--as-fast-as-possible", NULL };
    int rc = run_rtugw(out, sizeof out, json);
    if (rc != 0)
        fail_msg("rtugw replay exited %d:\n%s", rc, out);
    /* Two responses, each paired with its request. */
    char *first = strstr(out, "\"ok\":true");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "\"ok\":true"));
    assert_non_null(strstr(out, "\"request\":\"010300000002c40b\""));
    assert_non_null(strstr(out, "\"ts\":2.100000"));
    assert_non_null(strstr(out, "frames: 2 requests, 2 responses (2 ok)"));

    /* Damaged: decoded up to the damage, exit 1 naming where. */
    b.n -= 4;
    write_file(path, b.b, b.n);
    const char *plain[] = { "replay", path, NULL };
    rc = run_rtugw(out, sizeof out, plain);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "record 3 at offset"));
    assert_non_null(strstr(out, "1 responses (1 ok)"));

    /* Not a capture: exit 2. */
    static const uint8_t junk[] = { 0x00, 0x01, 0x02, 0xff };
    write_file(path, junk, sizeof junk);
    rc = run_rtugw(out, sizeof out, plain);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "not a capture"));
}

static int group_setup(void **state)
{
    char *dir = malloc(64);
    if (!dir)
        return -1;
    snprintf(dir, 64, "/tmp/rtugw-test-replay-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

static int group_teardown(void **state)
{
    static const char *names[] = { "user.pcap", "tcp.pcap", "capture.pcapng", "log.txt",
                                   "bad.cap", "drv.pcap", "replay.pcap", NULL };
    char path[256];
    for (int i = 0; names[i]; i++) {
        tmp(state, names[i], path);
        unlink(path);
    }
    rmdir(*state);
    free(*state);
    return 0;
}

int main(void)
{
    alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pcap_user),
        cmocka_unit_test(test_pcap_tcp),
        cmocka_unit_test(test_pcapng),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_replay_driver),
        cmocka_unit_test(test_rtugw_replay),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
