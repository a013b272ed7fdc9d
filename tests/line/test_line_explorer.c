/*
 * tests/line/test_line_explorer.c -- the line core's explorer: seeded runs of
 * random traffic from several clients against model slaves with random
 * faults (see test_line_core.c's first comment for the whole list and the
 * environment), each answer checked by linesim; and, built into
 * tests/line/test_line_broken, the seeds that must find the core without I2's
 * guard wrong. Part of the programs whose main is in test_line_core.c.
 */
#include "tests/line/explorer.h"
#include "tests/line/linesim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>


#define MS SIM_MS

/* ---- the explorer ------------------------------------------------------------ */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static uint64_t mix(uint64_t *x)
{
    *x += 0x9E3779B97F4A7C15ull;
    uint64_t z = *x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double pick(uint64_t *x, double hi) { return (double)(mix(x) >> 11) * 0x1.0p-53 * hi; }

/* What a run may draw besides its seed: every run a device server, and
 * its address mix-ups on late answers too (RTUGW_EXPLORE_SERVER,
 * RTUGW_EXPLORE_FOREIGN_LATE, or a regression seed's own). */
typedef struct explore_mode {
    bool server, foreign_late;
} explore_mode_t;

static explore_mode_t env_mode(void)
{
    return (explore_mode_t){ .server = env_u64("RTUGW_EXPLORE_SERVER", 0) != 0,
                             .foreign_late = env_u64("RTUGW_EXPLORE_FOREIGN_LATE", 0) != 0 };
}

/*
 * One slave's faults, drawn from the seed, within what line/discipline.c
 * promises to survive: answers late by up to 3 timeouts (a retry or the
 * guard covers them, and the timeout widens), stalls of 3 to 10 timeouts
 * (deaf meanwhile: its questions are given up, and its stale answers come
 * later than every guard, I5 and I6), copies up to 2 timeouts after the
 * answer (in the next transactions: after later answers too, so out of
 * order), noise, damage, cuts, splits, a slave that queues or is deaf while
 * busy, random exceptions; registers of unique, all-zero, all-equal or
 * alternating values, so that equal answers are common. Not modelled: a
 * frame later than every guard with the shape of the slave's next question
 * while no question was given up (the documented limit at the top of
 * discipline.c). Until I6 a slave with equal values and late copies was
 * that limit (kept out unless RTUGW_EXPLORE_LATE_COPIES=1): no longer.
 */
static sim_slave_model_t random_model(uint64_t *x, unsigned timeout_ms, unsigned k)
{
    uint64_t t = (uint64_t)timeout_ms * MS;
    sim_slave_model_t m = { .lat_min_ns = 300000, .lat_max_ns = 300000 + (uint64_t)pick(x, (double)t / 2) };
    m.p_silent = pick(x, 1) < 0.3 ? pick(x, 0.2) : 0;
    m.p_late = pick(x, 1) < 0.5 ? pick(x, 0.3) : 0;
    m.late_min_ns = t;
    m.late_max_ns = t + (uint64_t)pick(x, 2.0 * (double)t);
    m.p_double = pick(x, 1) < 0.4 ? pick(x, 0.3) : 0;
    m.copy_gap_min_ns = 0;
    m.copy_gap_max_ns = (uint64_t)pick(x, 2.0 * (double)t);
    m.p_noise = pick(x, 1) < 0.4 ? pick(x, 0.3) : 0;
    m.p_crc = pick(x, 1) < 0.4 ? pick(x, 0.2) : 0;
    m.p_truncate = pick(x, 1) < 0.3 ? pick(x, 0.2) : 0;
    m.p_split = pick(x, 1) < 0.3 ? pick(x, 0.3) : 0;
    m.split_gap_max_ns = (uint64_t)pick(x, 6.0 * MS);
    m.p_exception = pick(x, 1) < 0.2 ? pick(x, 0.1) : 0;
    m.p_stall = pick(x, 1) < 0.2 ? pick(x, 0.05) : 0;
    m.stall_min_ns = 3 * t;
    m.stall_max_ns = 3 * t + (uint64_t)pick(x, 7.0 * (double)t);
    m.queueing = pick(x, 1) < 0.3;
    m.deaf_while_busy = !m.queueing && pick(x, 1) < 0.3;
    m.values = (enum sim_values)(k % 4);   /* unique, zero, equal, alternating: one of each per run */
    return m;
}

typedef struct explore_totals {
    uint64_t runs, transactions, data, refused, wrong, events, misshapen, reloads, port_changes, crc_escapes;
    uint64_t first_bad_seed, first_bad_answers;
    char first_bad[512];
} explore_totals_t;

/* One seed: a bus with 4 slaves, clients until `n` answers, then drained. */
static void explore_one(uint64_t seed, uint64_t n, explore_mode_t mode, explore_totals_t *tot)
{
    uint64_t x = seed;
    unsigned timeout_ms = 20 + (unsigned)pick(&x, 80), retries = (unsigned)pick(&x, 3);
    static const unsigned bauds[] = { 9600, 19200, 38400, 115200 };
    char ini[1024];
    /* A quarter of the runs is a bus whose operator vouches that nothing
     * repeats a frame ([bus] copies = none): its slaves send no copies
     * (the fault model the vouch promises) and every other fault stays.
     * Drawn apart from x, so that the other runs of a seed are as before
     * (test_line_broken replays seeds found without it, and keeps none). */
    uint64_t v = seed ^ 0x5a5a5a5a5a5a5a5aull;
#ifdef LINE_BROKEN
    bool vouched = false;
    (void)v;
#else
    bool vouched = (mix(&v) & 3) == 0;
#endif
    /* A quarter of the runs is a device server (RTU over TCP) that
     * misbehaves as real ones do (issue 40): its connection closes in the
     * middle of an answer and comes back, the line's later bytes reaching
     * the new connection, and now and then another slave's address comes
     * on an answer, just before the answer itself. Drawn from a stream of
     * its own (w), so the other runs keep their course. */
    uint64_t w = seed ^ 0x3c3c3c3c3c3c3c3cull;
#ifdef LINE_BROKEN
    bool server = false;
    (void)w;
#else
    bool server = (mix(&w) & 3) == 0 || mode.server;
#endif
    unsigned baud = bauds[mix(&x) % 4];
    int k = snprintf(ini, sizeof ini, "baud = %u\nresponse_timeout_ms = %u\nretries = %u\nqueue_depth = 64\n%s%s",
                     baud, timeout_ms, retries, vouched ? "copies = none\n" : "",
                     server ? "port = tcp://127.0.0.1:4001\n" : "");
    for (unsigned id = 1; id <= 4; id++)
        k += snprintf(ini + k, sizeof ini - (size_t)k, "[device d%u]\nbus = line\nslave = %u\ndead_after = %u\n"
                      "dead_backoff_ms = %u\n", id, id, (unsigned)pick(&x, 4), 100 + (unsigned)pick(&x, 1000));
    sim_t *s = sim_new(seed, ini, (uint64_t)pick(&x, 3.0 * MS));
    assert_non_null(s);
    sim_foreign_late(s, mode.foreign_late);
    for (unsigned id = 1; id <= 4; id++) {
        sim_slave_model_t m = random_model(&x, timeout_ms, id + (unsigned)seed);
        if (vouched)
            m.p_double = 0;
#ifndef LINE_BROKEN
        /* a slave in four answers some reads a register short (drawn from
         * v, as the vouch: the runs' other draws stay as they were) */
        if ((mix(&v) & 3) == 0)
            m.p_misshapen = pick(&v, 0.2);
        if (server) {
            m.p_foreign = pick(&w, 1) < 0.7 ? pick(&w, 0.1) : 0;
            m.p_close = pick(&w, 1) < 0.7 ? pick(&w, 0.03) : 0;
            m.reconnect_min_ns = MS;
            m.reconnect_max_ns = MS + (uint64_t)pick(&w, 4.0 * timeout_ms * MS);
        }
#endif
        sim_add_slave(s, id, &m);
    }
    sim_clients(s, 1 + (unsigned)pick(&x, SIM_MAX_CLIENTS - 1), n, (uint64_t)pick(&x, 5.0 * MS));
    if (pick(&x, 1) < 0.2)
        sim_port_flap_at(s, (uint64_t)pick(&x, 2000.0 * MS), (uint64_t)pick(&x, 300.0 * MS));
#ifndef LINE_BROKEN
    /* A quarter of the runs is reloaded one to three times while its
     * clients run (daemon/control.c applies these keys live: line_keys_t):
     * the bus's timeout and retries and every slave's timeout_ms,
     * dead_after and dead_backoff_ms drawn again, questions in flight
     * included. Drawn from a stream of its own (u), so the other runs keep
     * their course. */
    uint64_t u = seed ^ 0x6969696969696969ull;
    if ((mix(&u) & 3) == 0)
        for (unsigned r = 0, n_r = 1 + (unsigned)pick(&u, 3); r < n_r; r++) {
            char again[1024];
            int j = snprintf(again, sizeof again, "baud = %u\nresponse_timeout_ms = %u\nretries = %u\n"
                             "queue_depth = 64\n%s%s", baud, 20 + (unsigned)pick(&u, 80), (unsigned)pick(&u, 3),
                             vouched ? "copies = none\n" : "", server ? "port = tcp://127.0.0.1:4001\n" : "");
            for (unsigned id = 1; id <= 4; id++) {
                unsigned own = pick(&u, 1) < 0.5 ? 0 : 10 + (unsigned)pick(&u, 150);
                j += snprintf(again + j, sizeof again - (size_t)j, "[device d%u]\nbus = line\nslave = %u\n"
                              "timeout_ms = %u\ndead_after = %u\ndead_backoff_ms = %u\n", id, id, own,
                              (unsigned)pick(&u, 4), 100 + (unsigned)pick(&u, 1000));
            }
            assert_int_equal(sim_keys_at(s, (uint64_t)pick(&u, 2000.0 * MS), again), 0);
            tot->reloads++;
        }
    /* ... and a quarter moves its line to another baud (a port reopened at
     * new settings, bus_port_change), its slaves with it, once or twice. */
    if ((mix(&u) & 3) == 0)
        for (unsigned r = 0, n_r = 1 + (unsigned)pick(&u, 2); r < n_r; r++) {
            char again[512];
            snprintf(again, sizeof again, "baud = %u\nresponse_timeout_ms = %u\nretries = %u\nqueue_depth = 64\n%s%s",
                     bauds[mix(&u) % 4], timeout_ms, retries, vouched ? "copies = none\n" : "",
                     server ? "port = tcp://127.0.0.1:4001\n" : "");
            assert_int_equal(sim_port_change_at(s, (uint64_t)pick(&u, 2000.0 * MS), (uint64_t)pick(&u, 50.0 * MS),
                                                again), 0);
            tot->port_changes++;
        }
#endif
    /* Liveness: a run whose requests are not all answered within 2.5
     * simulated seconds per transaction (its longest runs take well under
     * one) fails with them unanswered, where it would run for ever (seed
     * 1796603157793903 before REASKS_MAX: re-asked without end). */
    sim_run(s, n * 2500 * MS);
    const sim_counts_t *c = sim_counts(s);
    uint64_t refused = 0;
    for (unsigned i = 0; i < 256; i++)
        refused += c->gateway_exceptions[i];
    tot->runs++;
    tot->transactions += c->answered;
    tot->data += c->data;
    tot->refused += refused;
    tot->events += c->events;
    tot->crc_escapes += c->crc_escapes;
    tot->misshapen += gw_read(&sim_metrics(s)->misshapen);
    bool bad = c->wrong || c->duplicate_answers || sim_outstanding(s) || c->port_changes_refused;
    tot->wrong += c->wrong + c->duplicate_answers + sim_outstanding(s) + c->port_changes_refused;
    if (bad && env_u64("RTUGW_EXPLORE_LIST_BAD", 0))   /* a long search: every bad seed, not the first only */
        fprintf(stderr, "bad seed %llu (%s): %s\n", (unsigned long long)seed, server ? "device server" : "serial",
                sim_first_wrong(s));
    if (bad && !tot->first_bad_seed) {
        tot->first_bad_seed = seed;
        tot->first_bad_answers = c->answered;
        snprintf(tot->first_bad, sizeof tot->first_bad, "%s%s", sim_first_wrong(s),
                 sim_outstanding(s) ? " (and requests left unanswered)" : "");
    }
    sim_free(s);
}

/* Seeds from RTUGW_SEED (one) or the clock, until `total` transactions. */
static explore_totals_t explore(uint64_t total, uint64_t per_run, bool stop_at_first, explore_mode_t mode)
{
    explore_totals_t tot = { 0 };
    uint64_t seed0 = env_u64("RTUGW_SEED", 0), one = seed0;
    if (!seed0)
        seed0 = (uint64_t)time(NULL) * 1000003u;
    print_message("line explorer: seeds from %llu (replay one with RTUGW_SEED=N)\n", (unsigned long long)seed0);
    for (uint64_t i = 0; tot.transactions < total; i++) {
        explore_one(one ? one : seed0 + i, per_run, mode, &tot);
        if ((stop_at_first && tot.first_bad_seed) || one)
            break;
    }
    return tot;
}

#ifndef LINE_BROKEN
/*
 * Seeds the random search once found wrong on the intact core, each replayed
 * on every run (a run is a pure function of its seed) so that what was fixed
 * stays fixed: 1796193365564005, the port lost between an attempt and its
 * answer, which then came back as the next same-shaped question's answer
 * (line_port_lost_attempts); 1796214496627458, a question refused as
 * doubtful after an attempt had timed out, whose stalled exception was then
 * taken for the next question of its function (resolve_pending: a refusal
 * is a give-up).
 */
/*
 * Issue 40's, each a device server (RTU over TCP, explore_one): on the core
 * before I7-I9, 12, 15, 17, 18, 23 (a frame with another slave's address
 * taken for a parked question, or held when the connection closed), and
 * 1796534719588114 (one in a question's I3 window); with I7 and I8,
 * 1796535255589916 (another slave's late exception, with its mix-ups on
 * late answers too: I9); with I9 too, 1796535731591430 (an I9 re-ask
 * answered with a copy of the widened read's refusal: a re-ask in another
 * shape confirms nothing); 1796535911591602 (a slave that answers a register
 * short answered a question given up late, in the shape of a read one
 * register smaller: line_shape_stale_like); 1796536010591987 (a first
 * attempt asked a register wider than its retry, given up: its late answer
 * took the shape of the next question, asked as wide; every attempt's shape
 * is kept, give_up_on_wire); 1796601068787067 (an exception 204 ms late to
 * a timed-out attempt taken for its retry's answer, and the retry's own
 * late answer and its copy, past a guard that had not widened, taken for
 * the next read's answer and its confirmation: receive.c, guard_owed_attempts);
 * 1796601240790833 (a widened first attempt's refusal, stalled, taken for
 * its retry's answer, asked as it came: discipline.c, asked_widened);
 * 1796603157793903 (no wrong value but no answer: two slaves' reads past
 * their maps re-asked for ever, I4 and I9 taking turns: REASKS_MAX);
 * 1796604920803976 (that guard capped by the configured timeout, not the
 * one in force: a retry's late answer past it); 1796605979803999 (a stale
 * exception and its copy 73 ms later, past I5's 44 ms guard, taken for two
 * agreeing answers: I5's re-ask waits out the copy window);
 * 1796605979805936 (a question answered after two attempts, the other
 * attempt's answer stalled and taken for the next read, widened to its
 * shape: line_shape_owed); 1796605979808417 (the same with a device
 * server); 1796616093835754 (the same on a slave never seen repeating:
 * owed wherever copies are not ruled out); 1796616480843818 (a retried read's
 * owed answer, a register short, taken for the next read of that shape:
 * owed shapes kept even when the answer had them); 1796617202840155 (a
 * stale exception's copy 71 ms after it, past I5's copy window of a timeout
 * a reload had lowered to 30 ms: the window counts the longest timeout);
 * 1796617584837882 (a widened read's refusal owed behind a transient 83 04,
 * taken for the next read: after a transient exception answered after
 * several attempts, the slave's next answer of that function is confirmed);
 * 1796617987838581 (no fault of the core: an answer with a bit flipped and
 * then garbled by a collision came out CRC-good, a frame no slave sent;
 * the simulator now keeps such answers CRC-bad, linesim_slaves.c).
 */
static const struct {
    uint64_t seed;
    explore_mode_t mode;
} regression_seeds[] = {
    { 1796193365564005ull, { false, false } }, { 1796214496627458ull, { false, false } },
    { 12, { true, false } }, { 15, { true, false } }, { 17, { true, false } }, { 18, { true, false } },
    { 23, { true, false } }, { 1796534719588114ull, { true, false } }, { 1796535255589916ull, { true, true } },
    { 1796535731591430ull, { false, false } }, { 1796535911591602ull, { false, false } },
    { 1796536010591987ull, { true, true } }, { 1796601068787067ull, { true, true } },
    { 1796601240790833ull, { false, false } }, { 1796603157793903ull, { false, false } },
    { 1796604920803976ull, { false, false } }, { 1796605979803999ull, { false, false } },
    { 1796605979805936ull, { false, false } }, { 1796605979808417ull, { true, true } },
    { 1796616093835754ull, { false, false } }, { 1796616480843818ull, { false, false } },
    { 1796617202840155ull, { false, false } }, { 1796617584837882ull, { false, false } },
    { 1796617987838581ull, { false, false } },
};

void test_explorer(void **state)
{
    (void)state;
    for (size_t i = 0; !env_u64("RTUGW_SEED", 0) && i < sizeof regression_seeds / sizeof regression_seeds[0]; i++) {
        explore_totals_t tot = { 0 };
        explore_one(regression_seeds[i].seed, 20000, regression_seeds[i].mode, &tot);
        if (tot.wrong)
            fail_msg("regression seed %llu: %s", (unsigned long long)regression_seeds[i].seed, tot.first_bad);
    }
    uint64_t total = env_u64("RTUGW_EXPLORE_TRANSACTIONS", 1000000);
    clock_t t0 = clock();
    explore_totals_t tot = explore(total, 20000, false, env_mode());
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("line explorer: %llu runs, %llu transactions (%llu data, %llu refused by the gateway, "
                  "%llu of them answered in another shape), %llu events, %llu live reloads of the line's keys, "
                  "%llu port changes, %llu garbled answers kept CRC-bad, %.1f s CPU; wrong or unanswered: %llu\n",
                  (unsigned long long)tot.runs, (unsigned long long)tot.transactions, (unsigned long long)tot.data,
                  (unsigned long long)tot.refused, (unsigned long long)tot.misshapen, (unsigned long long)tot.events,
                  (unsigned long long)tot.reloads, (unsigned long long)tot.port_changes,
                  (unsigned long long)tot.crc_escapes, cpu,
                  (unsigned long long)tot.wrong);
#ifndef LINE_BROKEN
    /* Each is drawn in a quarter of the runs: with 40 runs or more (make
     * check's 50) a run without one has odds under 1e-5, so their absence
     * is a fault of the draw; a shorter exploration (the cross checks' 5
     * runs under qemu) may cross none. */
    if (tot.runs >= 40)
        assert_true(tot.reloads > 0 && tot.port_changes > 0);
#endif
    if (tot.wrong)
        fail_msg("seed %llu (RTUGW_SEED=%llu): %s", (unsigned long long)tot.first_bad_seed,
                 (unsigned long long)tot.first_bad_seed, tot.first_bad);
    assert_true(tot.transactions >= total);
    /* Mostly answered with data: the faults do not drown it. Not with every
     * run a device server (most answers are 0x0A while it is gone), nor over
     * a few runs (the cross checks' 5 under qemu): a run whose reload drew
     * timeouts below its slaves' latency is refused for most of its length,
     * and one such run in five sank the share to 40 % on armhf (over 50
     * runs it is 60-71 %). */
    if (!env_u64("RTUGW_EXPLORE_SERVER", 0) && tot.runs >= 40)
        assert_true(tot.data > tot.transactions / 2);
}

/*
 * Every run a device server (issue 40: its connection closes mid-answer,
 * the line's later bytes reach the next connection, and another slave's
 * address comes on answers, late and stalled ones too), RTUGW_EXPLORE_SERVER_TRANSACTIONS
 * (else RTUGW_EXPLORE_TRANSACTIONS, else 10^6: `make check-long` runs 10^7,
 * the cross checks under qemu 10^5). Most answers are 0x0A: the clients
 * ask again at once while the connection is down.
 */
void test_explorer_device_server(void **state)
{
    (void)state;
    uint64_t total = env_u64("RTUGW_EXPLORE_SERVER_TRANSACTIONS", env_u64("RTUGW_EXPLORE_TRANSACTIONS", 1000000));
    explore_totals_t tot = explore(total, 20000, false, (explore_mode_t){ true, true });
    print_message("line explorer, device servers: %llu runs, %llu transactions (%llu data, %llu refused by the "
                  "gateway), %llu events; wrong or unanswered: %llu\n", (unsigned long long)tot.runs,
                  (unsigned long long)tot.transactions, (unsigned long long)tot.data, (unsigned long long)tot.refused,
                  (unsigned long long)tot.events, (unsigned long long)tot.wrong);
    if (tot.wrong)
        fail_msg("seed %llu (RTUGW_SEED=%llu RTUGW_EXPLORE_SERVER=1 RTUGW_EXPLORE_FOREIGN_LATE=1): %s",
                 (unsigned long long)tot.first_bad_seed, (unsigned long long)tot.first_bad_seed, tot.first_bad);
    assert_true(tot.transactions >= total);
    /* A sanity check of the exploration, not of the core: a run's data share
     * swings with its draws (most answers are 0x0A while the connection is
     * down), so it is judged over 40 runs or more: 23 % over the 50 runs of
     * make check; the cross checks' 5 runs under qemu met 6 %. */
    if (tot.runs >= 40)
        assert_true(tot.data > tot.transactions / 10);
}

#else
/*
 * The test build with I2's guard and I6's shapes removed: the explorer must
 * find the wrong answers that follow. Without them, I1, I4 and I5 still
 * catch most stale answers, so a random search is slow to find one: its
 * first wrong answer came after 120,000 to 1,420,000 transactions in four
 * of six tries, and in two not within 2 million (without I2 alone: none in
 * 9 million, I6 covers). So make check replays seeds that random
 * search found (a run is a pure function of its seed, the same on every
 * CPU), each of which the intact core passes (test_explorer with RTUGW_SEED);
 * RTUGW_EXPLORE_BROKEN_SEARCH=N searches N transactions from the clock.
 */
/* found again after the shapes of attempts a question answered may still
 * owe began to be kept (shapes.c, line_shape_owed) and I5's re-ask to wait
 * out its candidate's copy (discipline.c): a run's course changed, and with
 * it where the broken core goes wrong (5 of the first 151 seeds from
 * 1796601240787550) */
static const uint64_t broken_seeds[] = { 1796601240787565ull, 1796601240787588ull, 1796601240787633ull,
                                         1796601240787689ull };

void test_explorer_finds_broken_i2(void **state)
{
    (void)state;
    uint64_t search = env_u64("RTUGW_EXPLORE_BROKEN_SEARCH", 0);
    if (search) {
        explore_totals_t tot = explore(search, 20000, true, env_mode());
        print_message("random search without I2's guard: %s after %llu runs, %llu transactions (seed %llu: %s)\n",
                      tot.wrong ? "first wrong answer" : "no wrong answer", (unsigned long long)tot.runs,
                      (unsigned long long)tot.transactions, (unsigned long long)tot.first_bad_seed, tot.first_bad);
    }
    for (size_t i = 0; i < sizeof broken_seeds / sizeof broken_seeds[0]; i++) {
        explore_totals_t tot = { 0 };
        explore_one(broken_seeds[i], 20000, (explore_mode_t){ 0 }, &tot);
        print_message("core without I2's guard, seed %llu: %llu wrong or unanswered in %llu transactions (%s)\n",
                      (unsigned long long)broken_seeds[i], (unsigned long long)tot.wrong,
                      (unsigned long long)tot.transactions, tot.first_bad);
        assert_true(tot.wrong > 0);
    }
}
#endif
