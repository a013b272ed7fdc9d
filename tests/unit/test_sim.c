/*
 * tests/unit/test_sim.c -- the simulator on real pseudo-terminal pairs, against
 * libmodbus's RTU client, Debian's mbpoll, and raw bytes (for the faults,
 * whose effect on the wire must be exact).
 */
#include "drivers/driver.h"
#include "parser/rtu.h"
#include "tests/unit/simtest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <cmocka.h>
#include <modbus.h>

static modbus_t *client(const simtest_fx_t *f, int slave, unsigned timeout_ms)
{
    modbus_t *ctx = modbus_new_rtu(f->path, 9600, 'N', 8, 1);
    assert_non_null(ctx);
    assert_int_equal(modbus_set_slave(ctx, slave), 0);
    if (modbus_connect(ctx) != 0)
        fail_msg("modbus_connect %s: %s", f->path, modbus_strerror(errno));
    modbus_set_response_timeout(ctx, timeout_ms / 1000, (timeout_ms % 1000) * 1000);
    return ctx;
}

static void client_free(modbus_t *ctx)
{
    modbus_close(ctx);
    modbus_free(ctx);
}

/* ---- libmodbus client --------------------------------------------------------- */

static void test_libmodbus_reads_writes(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.baud = 9600;
    simtest_start(&f, &cfg);
    modbus_t *ctx = client(&f, 2, 1000);

    uint16_t regs[125];
    assert_int_equal(modbus_read_registers(ctx, 0, 10, regs), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(regs[i], driver_sim_pattern(2, DRIVER_SIM_HOLDING, (unsigned)i));
    assert_int_equal(regs[7], 2007);
    assert_int_equal(modbus_read_input_registers(ctx, 990, 10, regs), 10);
    assert_int_equal(regs[9], (uint16_t)(0x8000 + 2000 + 999));
    uint8_t bits[64];
    assert_int_equal(modbus_read_bits(ctx, 100, 30, bits), 30);
    for (int i = 0; i < 30; i++)
        assert_int_equal(bits[i], (100 + i + 2) % 3 == 0);
    assert_int_equal(modbus_read_input_bits(ctx, 0, 17, bits), 17);
    for (int i = 0; i < 17; i++)
        assert_int_equal(bits[i], (i + 2) % 2);

    /* Writes stick, and only on slave 2. */
    assert_int_equal(modbus_write_register(ctx, 500, 0xBEEF), 1);
    uint16_t v = 0;
    assert_int_equal(driver_sim_get(f.sim, 2, DRIVER_SIM_HOLDING, 500, &v), 0);
    assert_int_equal(v, 0xBEEF);
    assert_int_equal(driver_sim_get(f.sim, 1, DRIVER_SIM_HOLDING, 500, &v), 0);
    assert_int_equal(v, 1500);
    const uint16_t w[3] = { 7, 8, 9 };
    assert_int_equal(modbus_write_registers(ctx, 997, 3, w), 3);
    assert_int_equal(modbus_read_registers(ctx, 996, 4, regs), 4);
    assert_int_equal(regs[0], 2996);
    assert_int_equal(regs[1], 7);
    assert_int_equal(regs[3], 9);
    assert_int_equal(modbus_write_bit(ctx, 1, 1), 1);
    const uint8_t wb[5] = { 1, 1, 0, 1, 0 };
    assert_int_equal(modbus_write_bits(ctx, 10, 5, wb), 5);
    assert_int_equal(modbus_read_bits(ctx, 0, 15, bits), 15);
    assert_int_equal(bits[1], 1);
    assert_memory_equal(bits + 10, wb, 5);
    /* fc 22: (0x1234 & 0x00F2) | (0x0025 & ~0x00F2) */
    assert_int_equal(modbus_write_register(ctx, 4, 0x1234), 1);
    assert_int_equal(modbus_mask_write_register(ctx, 4, 0x00F2, 0x0025), 1);
    assert_int_equal(modbus_read_registers(ctx, 4, 1, regs), 1);
    assert_int_equal(regs[0], (0x1234 & 0x00F2) | (0x0025 & ~0x00F2));
    /* fc 23 */
    const uint16_t wr[2] = { 111, 222 };
    assert_int_equal(modbus_write_and_read_registers(ctx, 20, 2, wr, 19, 4, regs), 4);
    assert_int_equal(regs[0], 2019);
    assert_int_equal(regs[1], 111);
    assert_int_equal(regs[2], 222);
    assert_int_equal(regs[3], 2022);
    /* 125 registers and 2000 coils, the most one read can carry */
    assert_int_equal(modbus_read_registers(ctx, 0, 125, regs), 125);
    uint8_t many[2000];
    assert_int_equal(modbus_read_bits(ctx, 0, 2000, many), -1); /* only 1000 exist */
    assert_int_equal(errno, EMBXILADD);
    assert_int_equal(modbus_read_input_bits(ctx, 0, 1000, many), 1000);
    assert_int_equal(many[999], (999 + 2) % 2);

    /* Exception 02 outside 0..999. */
    assert_int_equal(modbus_read_registers(ctx, 999, 2, regs), -1);
    assert_int_equal(errno, EMBXILADD);
    assert_int_equal(modbus_read_bits(ctx, 1000, 1, bits), -1);
    assert_int_equal(errno, EMBXILADD);
    assert_int_equal(modbus_write_register(ctx, 1000, 1), -1);
    assert_int_equal(errno, EMBXILADD);
    client_free(ctx);

    /* A slave the simulator does not serve: no answer. */
    ctx = client(&f, 9, 200);
    assert_int_equal(modbus_read_registers(ctx, 0, 1, regs), -1);
    assert_int_equal(errno, ETIMEDOUT);
    client_free(ctx);

    driver_sim_stats_t st;
    driver_sim_get_stats(f.sim, &st);
    assert_int_equal(st.requests, 20);
    assert_int_equal(st.ignored, 1);
    assert_int_equal(st.exceptions, 4);
    simtest_stop(&f);
}

static void test_unsupported_function_and_broadcast(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    /* fc 8 (diagnostics) is not served: exception 01. */
    size_t n = simtest_make_req(1, 8, 0, 0, req);
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 5);
    assert_int_equal(rsp[1], 0x88);
    assert_int_equal(rsp[2], 1);
    assert_true(simtest_crc_ok(rsp, got));
    /* Broadcast write: everybody executes, nobody answers. */
    n = simtest_make_req(0, 6, 42, 4242, req);
    got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, NONE_MS, NULL, NULL);
    assert_int_equal(got, 0);
    for (uint8_t s = 1; s <= 3; s++) {
        uint16_t v;
        assert_int_equal(driver_sim_get(f.sim, s, DRIVER_SIM_HOLDING, 42, &v), 0);
        assert_int_equal(v, 4242);
    }
    /* A request with a bad CRC is not answered; the next good one is. */
    n = simtest_make_req(1, 3, 0, 1, req);
    req[7] ^= 1;
    got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, NONE_MS, NULL, NULL);
    assert_int_equal(got, 0);
    req[7] ^= 1;
    got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 7);
    /* Garbage, then a request with a bad CRC and a good one in the same
     * burst: the framer resynchronises and only the good one is answered. */
    uint8_t burst[2 + 8 + 8];
    burst[0] = 0xFF;
    burst[1] = 0x00;
    memcpy(burst + 2, req, 8);
    burst[2 + 7] ^= 0x40;
    memcpy(burst + 10, req, 8);
    got = simtest_xfer(f.slave, burst, sizeof burst, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 7);
    assert_int_equal(rsp[0], 1);
    assert_true(simtest_crc_ok(rsp, got));
    driver_sim_stats_t st;
    driver_sim_get_stats(f.sim, &st);
    assert_true(st.bad_crc + st.noise_in >= 2);
    assert_int_equal(st.broadcasts, 1);
    simtest_stop(&f);
}

/* ---- mbpoll ------------------------------------------------------------------------ */

static const char *find_mbpoll(void)
{
    static const char *candidates[] = { "/usr/bin/mbpoll", "/usr/local/bin/mbpoll", NULL };
    for (int i = 0; candidates[i]; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    fail_msg("mbpoll not found (Debian package mbpoll): this test needs it");
    return NULL;
}

/* Runs mbpoll with the arguments; returns its exit code, stdout+stderr in out. */
static int run_mbpoll(char *out, size_t cap, const char *const *args)
{
    const char *exe = find_mbpoll();
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        const char *argv[32] = { "mbpoll" };
        int i = 0;
        for (; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        argv[i + 1] = NULL;
        alarm(10);
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

static void test_mbpoll(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.baud = 9600;
    simtest_start(&f, &cfg);
    char out[8192];

    /* Read holding registers 5..7 of slave 2 (-0: references from 0; -1: once). */
    const char *rd[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "2", "-t", "4",
                         "-r", "5", "-c", "3", "-0", "-1", f.path, NULL };
    int rc = run_mbpoll(out, sizeof out, rd);
    if (rc != 0)
        fail_msg("mbpoll read exited %d:\n%s", rc, out);
    assert_non_null(strstr(out, "[5]: \t2005"));
    assert_non_null(strstr(out, "[7]: \t2007"));

    /* Write holding register 10 of slave 3. */
    const char *wr[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "3", "-t", "4",
                         "-r", "10", "-0", f.path, "4321", NULL };
    rc = run_mbpoll(out, sizeof out, wr);
    if (rc != 0)
        fail_msg("mbpoll write exited %d:\n%s", rc, out);
    uint16_t v;
    assert_int_equal(driver_sim_get(f.sim, 3, DRIVER_SIM_HOLDING, 10, &v), 0);
    assert_int_equal(v, 4321);

    /* Input registers of slave 1 and coils of slave 3. */
    const char *ir[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "1", "-t", "3",
                         "-r", "0", "-c", "2", "-0", "-1", f.path, NULL };
    rc = run_mbpoll(out, sizeof out, ir);
    if (rc != 0)
        fail_msg("mbpoll input registers exited %d:\n%s", rc, out);
    char want[64];
    snprintf(want, sizeof want, "[0]: \t%d", (int16_t)(0x8000 + 1000));
    if (!strstr(out, want)) {
        snprintf(want, sizeof want, "[0]: \t%u", 0x8000 + 1000);
        if (!strstr(out, want))
            fail_msg("mbpoll input registers: no '%s' in:\n%s", want, out);
    }
    const char *co[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "3", "-t", "0",
                         "-r", "0", "-c", "4", "-0", "-1", f.path, NULL };
    rc = run_mbpoll(out, sizeof out, co);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "[0]: \t1"));
    assert_non_null(strstr(out, "[1]: \t0"));
    assert_non_null(strstr(out, "[3]: \t1"));

    /* Outside 0..999: exception 02, mbpoll exits 1. */
    const char *bad[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "1", "-t", "4",
                          "-r", "998", "-c", "5", "-0", "-1", f.path, NULL };
    rc = run_mbpoll(out, sizeof out, bad);
    assert_int_equal(rc, 1);
    if (!strstr(out, "Illegal data address"))
        fail_msg("mbpoll out of range: expected 'Illegal data address' in:\n%s", out);
    simtest_stop(&f);
}

static void test_rtugw_sim_command(void **state)
{
    (void)state;
    alarm(30);
    const char *exe = getenv("RTUGW_BIN");
    if (!exe)
        exe = "./rtugw";
    if (access(exe, X_OK) != 0)
        fail_msg("rtugw not found at %s (set RTUGW_BIN)", exe);
    char dir[] = "/tmp/rtugw-test-simcmd-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char link[256], errpath[256];
    snprintf(link, sizeof link, "%s/plc", dir);
    snprintf(errpath, sizeof errpath, "%s/stderr", dir);
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(e, 2);
        close(out[0]);
        alarm(25);
        execl(exe, "rtugw", "sim", "--link", link, "--slaves", "5,6", "--baud", "9600",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    /* The first line on standard output is the pseudo-terminal's path. */
    char line[256];
    size_t have = 0;
    while (have < sizeof line - 1) {
        ssize_t r = read(out[0], line + have, 1);
        if (r <= 0 || line[have] == '\n')
            break;
        have++;
    }
    line[have] = 0;
    assert_true(strncmp(line, "/dev/pts/", 9) == 0);
    char target[256];
    ssize_t tl = readlink(link, target, sizeof target - 1);
    assert_true(tl > 0);
    target[tl] = 0;
    assert_string_equal(target, line);

    char text[8192];
    const char *rd[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "6", "-t", "4",
                         "-r", "3", "-c", "2", "-0", "-1", link, NULL };
    int rc = run_mbpoll(text, sizeof text, rd);
    if (rc != 0)
        fail_msg("mbpoll against rtugw sim exited %d:\n%s", rc, text);
    assert_non_null(strstr(text, "[3]: \t6003"));
    const char *other[] = { "-m", "rtu", "-b", "9600", "-P", "none", "-a", "1", "-t", "4",
                            "-r", "0", "-0", "-1", "-o", "0.2", link, NULL };
    assert_int_equal(run_mbpoll(text, sizeof text, other), 1); /* slave 1 not served */

    assert_int_equal(kill(pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(out[0]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(access(link, F_OK), -1); /* the link is removed on exit */
    FILE *f = fopen(errpath, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    if (!strstr(text, "1 requests, 1 answers") || !strstr(text, "1 for other slaves"))
        fail_msg("rtugw sim summary: %s", text);
    unlink(errpath);
    rmdir(dir);
    alarm(0);
}

/* ---- faults -------------------------------------------------------------------------- */

static void test_fault_silent(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.silent[0] = 2;
    cfg.faults.n_silent = 1;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(2, 3, 0, 1, req);
    assert_int_equal(simtest_xfer(f.slave, req, n, rsp, sizeof rsp, NONE_MS, NULL, NULL), 0);
    n = simtest_make_req(1, 3, 0, 1, req);
    assert_int_equal(simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL), 7);
    driver_sim_stats_t st;
    driver_sim_get_stats(f.sim, &st);
    assert_int_equal(st.f_silent, 1);
    simtest_stop(&f);
}

static void test_fault_exception(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.exception_rate = 1;
    cfg.faults.exception_code = 6; /* server busy */
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(1, 6, 3, 777, req);
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 5);
    assert_int_equal(rsp[0], 1);
    assert_int_equal(rsp[1], 0x86);
    assert_int_equal(rsp[2], 6);
    assert_true(simtest_crc_ok(rsp, got));
    uint16_t v;
    assert_int_equal(driver_sim_get(f.sim, 1, DRIVER_SIM_HOLDING, 3, &v), 0);
    assert_int_equal(v, 1003); /* not executed */
    /* libmodbus sees the exception as such. */
    modbus_t *ctx = client(&f, 1, 500);
    uint16_t regs[2];
    assert_int_equal(modbus_read_registers(ctx, 0, 2, regs), -1);
    assert_int_equal(errno, EMBXSBUSY);
    client_free(ctx);
    simtest_stop(&f);
}

static void test_fault_crc(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.crc_rate = 1;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(3, 3, 0, 4, req);
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 5 + 8);
    assert_false(simtest_crc_ok(rsp, got));
    rsp[got - 1] ^= 0xA5;
    assert_true(simtest_crc_ok(rsp, got)); /* only the CRC was touched */
    modbus_t *ctx = client(&f, 3, 500);
    uint16_t regs[4];
    assert_int_equal(modbus_read_registers(ctx, 0, 4, regs), -1);
    assert_int_equal(errno, EMBBADCRC);
    client_free(ctx);
    simtest_stop(&f);
}

static void test_fault_noise(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.noise_rate = 1;
    cfg.faults.noise_bytes = 6;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(1, 4, 0, 2, req);
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, 6 + 9);
    assert_true(simtest_crc_ok(rsp + 6, 9)); /* the answer follows the noise intact */
    assert_int_equal(rsp[6], 1);
    assert_int_equal(rsp[7], 4);
    driver_sim_stats_t st;
    driver_sim_get_stats(f.sim, &st);
    assert_int_equal(st.f_noise, 1);
    simtest_stop(&f);
}

static void test_fault_late(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.late_rate = 1;
    cfg.faults.late_ms = 400;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(1, 3, 0, 1, req);
    uint64_t sent = 0, last = 0;
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, &sent, &last);
    assert_int_equal(got, 7);
    assert_true(last - sent >= 400000000ull);
    /* A master with a 200 ms timeout gives up first. */
    modbus_t *ctx = client(&f, 1, 200);
    uint16_t r;
    assert_int_equal(modbus_read_registers(ctx, 0, 1, &r), -1);
    assert_int_equal(errno, ETIMEDOUT);
    client_free(ctx);
    usleep(400000); /* let the late answer land before the pair closes */
    simtest_stop(&f);
}

static void test_fault_truncate(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.truncate_rate = 1;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(2, 3, 0, 10, req);
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, NULL, NULL);
    assert_int_equal(got, (5 + 20) / 2);
    assert_int_equal(rsp[0], 2);
    assert_int_equal(rsp[1], 3);
    assert_int_equal(rsp[2], 20);
    simtest_stop(&f);
}

static bool crc_damaged(const driver_sim_answer_t *a)
{
    return !simtest_crc_ok(a->adu, a->len);
}

static void test_fault_rate_is_a_rate(void **state)
{
    (void)state;
    /* At rate 0.5 over 200 requests, both outcomes occur, about half each. */
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.crc_rate = 0.5;
    cfg.faults.seed = 42;
    assert_in_range(simtest_plan_hits(&cfg, 1, crc_damaged), 60, 140);
}

static void test_random_requests(void **state)
{
    (void)state;
    /* Random PDUs of every function code, with a good CRC: every answer is a
     * well-formed frame of at most 256 bytes (and sanitizers watch libmodbus). */
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    char err[DRIVER_ERRLEN];
    driver_sim_t *sim = driver_sim_new(&cfg, err, sizeof err);
    assert_non_null(sim);
    uint64_t rng = 0x1234567;
    for (int i = 0; i < 20000; i++) {
        uint8_t pdu[RTU_MAX_PDU], adu[RTU_MAX_ADU];
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t plen = 1 + (size_t)((rng >> 33) % (i % 3 == 0 ? RTU_MAX_PDU : 12));
        static const uint8_t fcs[] = { 1, 2, 3, 4, 5, 6, 15, 16, 22, 23, 7, 8, 17, 43 };
        for (size_t k = 0; k < plen; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            pdu[k] = (uint8_t)(rng >> 40);
        }
        pdu[0] = fcs[(rng >> 20) % sizeof fcs];
        if (plen >= 5 && (rng & 1)) { /* often a plausible address and quantity */
            pdu[1] = (uint8_t)((rng >> 8) & 3);
            pdu[3] = 0;
            pdu[4] = (uint8_t)(1 + (rng >> 12) % 20);
        }
        int n = rtu_adu_from_pdu((uint8_t)(1 + i % 3), pdu, plen, adu, sizeof adu);
        assert_true(n > 0);
        driver_sim_answer_t a;
        assert_int_equal(driver_sim_handle(sim, adu, (size_t)n, driver_now_ns(), &a), 1);
        assert_in_range(a.len, 5, RTU_MAX_ADU);
        assert_true(simtest_crc_ok(a.adu, a.len));
        assert_int_equal(a.adu[0], adu[0]);
        assert_int_equal(a.adu[1] & 0x7F, pdu[0]);
        if (a.adu[1] & 0x80)
            assert_int_equal(a.len, 5);
    }
    driver_sim_free(sim);
}

/* ---- pacing ----------------------------------------------------------------------------- */

static void test_pacing(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.baud = 9600;
    cfg.char_bits = 11; /* 8E1 */
    cfg.pace = true;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(1, 3, 0, 125, req);
    uint64_t sent = 0, last = 0;
    size_t got = simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, &sent, &last);
    assert_int_equal(got, 255);
    assert_true(simtest_crc_ok(rsp, got));
    /* 255 characters of 11 bits at 9600 baud: 292.2 ms on the wire. The last
     * byte cannot arrive before the first 254 have been sent. */
    uint64_t wire = 254ull * 11 * 1000000000ull / 9600;
    if (last - sent < wire)
        fail_msg("paced 255-byte answer took %.1f ms, less than its wire time %.1f ms",
                 (double)(last - sent) / 1e6, (double)wire / 1e6);
    simtest_stop(&f);
}

static void test_turnaround(void **state)
{
    (void)state;
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.turnaround_us = 50000;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(1, 3, 0, 1, req);
    uint64_t sent = 0, last = 0;
    assert_int_equal(simtest_xfer(f.slave, req, n, rsp, sizeof rsp, ANSWER_MS, &sent, &last), 7);
    assert_true(last - sent >= 50000000ull);
    simtest_stop(&f);
}

/* ---- model: live values, loading ------------------------------------------------------- */

static void test_live_and_load(void **state)
{
    (void)state;
    char path[] = "/tmp/rtugw-test-sim-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# initial values\n"
                       "1 holding 10 100 101 102\n"
                       "2 coils 0 0 0 0\n"
                       "3 ir 999 0xFFFF\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.load_path = path;
    cfg.live = true;
    cfg.live_period_ms = 40;
    char err[DRIVER_ERRLEN];
    driver_sim_t *sim = driver_sim_new(&cfg, err, sizeof err);
    if (!sim)
        fail_msg("load: %s", err);
    uint16_t v;
    assert_int_equal(driver_sim_get(sim, 1, DRIVER_SIM_HOLDING, 12, &v), 0);
    assert_int_equal(v, 102);
    assert_int_equal(driver_sim_get(sim, 1, DRIVER_SIM_HOLDING, 13, &v), 0);
    assert_int_equal(v, 1013);
    assert_int_equal(driver_sim_get(sim, 2, DRIVER_SIM_COILS, 1, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(driver_sim_get(sim, 3, DRIVER_SIM_INPUT, 999, &v), 0);
    assert_int_equal(v, 0xFFFF);
    assert_int_equal(driver_sim_get(sim, 3, DRIVER_SIM_INPUT, 1000, &v), -ERANGE);
    assert_int_equal(driver_sim_get(sim, 4, DRIVER_SIM_INPUT, 0, &v), -ENOENT);

    /* Live: input registers move between two reads, holding registers do not. */
    uint8_t req[RTU_MAX_ADU];
    driver_sim_answer_t a1, a2, h1, h2;
    size_t n = simtest_make_req(1, 4, 5, 1, req);
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &a1), 1);
    n = simtest_make_req(1, 3, 5, 1, req);
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &h1), 1);
    usleep(100000);
    n = simtest_make_req(1, 4, 5, 1, req);
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &a2), 1);
    n = simtest_make_req(1, 3, 5, 1, req);
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &h2), 1);
    assert_int_equal(a1.len, 7);
    assert_memory_not_equal(a1.adu + 3, a2.adu + 3, 2);
    assert_memory_equal(h1.adu, h2.adu, 7);
    driver_sim_free(sim);

    /* A bad file names its line. */
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "1 holding 0 1\n1 tables 0 1\n";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    assert_null(driver_sim_new(&cfg, err, sizeof err));
    char want[256];
    snprintf(want, sizeof want, "%s:2: table 'tables'", path);
    if (!strstr(err, want))
        fail_msg("expected '%s' in '%s'", want, err);
    unlink(path);
}

static void test_capture_written(void **state)
{
    (void)state;
    char path[] = "/tmp/rtugw-test-sim-cap-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.capture_path = path;
    simtest_start(&f, &cfg);
    modbus_t *ctx = client(&f, 1, 1000);
    uint16_t regs[3];
    assert_int_equal(modbus_read_registers(ctx, 7, 3, regs), 3);
    assert_int_equal(modbus_write_register(ctx, 7, 77), 1);
    client_free(ctx);
    simtest_stop(&f); /* closes the capture */

    char err[DRIVER_ERRLEN];
    driver_capture_t *c = driver_capture_open(path, DRIVER_CAPTURE_AUTO, err, sizeof err);
    if (!c)
        fail_msg("capture: %s", err);
    driver_record_t rec;
    static const size_t lens[] = { 8, 11, 8, 8 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(driver_capture_next(c, &rec, err, sizeof err), 1);
        assert_int_equal(rec.len, lens[i]);
        assert_true(simtest_crc_ok(rec.data, rec.len));
        assert_int_equal(rec.data[0], 1);
    }
    assert_int_equal(rec.data[1], 6);
    assert_int_equal(driver_capture_next(c, &rec, err, sizeof err), 0);
    driver_capture_close(c);
    unlink(path);
}

/* ---- the simulator as a driver ---------------------------------------------------------- */

static void test_sim_driver(void **state)
{
    (void)state;
    alarm(30);
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    char err[DRIVER_ERRLEN];
    driver_t *d = driver_sim_driver_new(&cfg, err, sizeof err);
    if (!d)
        fail_msg("sim driver: %s", err);
    if (driver_open(d, err, sizeof err) != 0)
        fail_msg("sim driver open: %s", err);
    assert_string_equal(driver_backend_name(d), "sim");
    assert_non_null(driver_sim_of(d));
    uint8_t req[RTU_MAX_ADU], rsp[300];
    size_t n = simtest_make_req(3, 3, 100, 2, req);
    assert_int_equal(driver_write(d, req, n), (ssize_t)n);
    size_t have = 0;
    while (have < 9) {
        struct pollfd p = { driver_fd(d), POLLIN, 0 };
        assert_int_equal(poll(&p, 1, 2000), 1);
        uint64_t t;
        ssize_t r = driver_read(d, rsp + have, sizeof rsp - have, &t);
        if (r == DRIVER_AGAIN)
            continue;
        assert_true(r > 0);
        have += (size_t)r;
    }
    rtu_envelope_t env;
    assert_int_equal(rtu_decode_reference(rsp, have, &env), RTU_OK);
    assert_int_equal(env.count, 2);
    assert_int_equal(env.data.regs[0], 3100);
    assert_int_equal(env.data.regs[1], 3101);
    driver_stats_t st;
    driver_get_stats(d, &st);
    assert_int_equal(st.bytes_out, 8);
    assert_int_equal(st.bytes_in, 9);
    driver_free(d);
    alarm(0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libmodbus_reads_writes),
        cmocka_unit_test(test_unsupported_function_and_broadcast),
        cmocka_unit_test(test_mbpoll),
        cmocka_unit_test(test_rtugw_sim_command),
        cmocka_unit_test(test_fault_silent),
        cmocka_unit_test(test_fault_exception),
        cmocka_unit_test(test_fault_crc),
        cmocka_unit_test(test_fault_noise),
        cmocka_unit_test(test_fault_late),
        cmocka_unit_test(test_fault_truncate),
        cmocka_unit_test(test_fault_rate_is_a_rate),
        cmocka_unit_test(test_random_requests),
        cmocka_unit_test(test_pacing),
        cmocka_unit_test(test_turnaround),
        cmocka_unit_test(test_live_and_load),
        cmocka_unit_test(test_capture_written),
        cmocka_unit_test(test_sim_driver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
