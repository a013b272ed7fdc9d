/*
 * bench/bench_crossover.c -- `rtugw bench crossover`: where the native parser
 * pays off, and whether the router found it.
 *
 * Three forms of the same subject: fallback only, native only, and routed
 * (the live router of routing/, exploring at its configured rate). Tiers R1,
 * R8, R125 (read-holding-registers responses of 1, 8, 125 registers: 7, 21,
 * 255 bytes); --sweep adds every frame length from 5 to 256 (register frames
 * at odd lengths 7..255, read-coils frames at even lengths 6..254, an
 * exception response at 5, a function without a decoder (0x41) at 256).
 *
 * Method (docs/crossover.md has the long form):
 *   1. Equivalence gate before any timing: per tier (and per sweep length)
 *      16 valid and 8 mutated frames, every form's envelope compared with
 *      rtu_decode_reference's by memcmp, in the direct layer and through the
 *      actor pool. The routed form is checked on the live router and on one
 *      that explores at epsilon 1, so both arms pass through router_decode.
 *      A mismatch prints the frame and the differing envelope bytes and
 *      exits 1; nothing is timed.
 *   2. Direct layer: on one thread, a batch of frames (16 distinct frames
 *      cycled) per form, timed as a whole; ns per frame = batch time / frames
 *      (exploration pulls included).
 *   3. Actor layer: a driver actor keeps `concurrency` tasks in flight to a
 *      pool of `concurrency` parse actors (1, 2, 4); a task carries one frame
 *      and the send time, the reply carries it back; per-task end-to-end time
 *      = reply handled - send. Per round and form: the median over the
 *      batch's tasks.
 *   4. Every round runs every form once per row, in an order that rotates
 *      each round; warm-up rounds are dropped. A pair of forms is compared
 *      on the per-round paired difference a - b: "faster" when its p75 < 0,
 *      "slower" when its p25 > 0, else "undecided". No tolerance band.
 *
 * Test hook: RTUGW_CROSSOVER_BREAK=fallback|native|routed flips one byte of
 * that form's envelope for the first gate input of R1 (direct layer; with
 * the suffix @actors, in the actor layer's gate), so a test can prove that
 * the gate stops the run.
 *
 * The pieces are in bench/crossover_*.c; bench/crossover.h says which file
 * holds what. This file is the command: its options, the test hook, the
 * environment it reports, the phases in order and the output files.
 */
#include "actor/actor.h"
#include "bench/crossover.h"
#include "bench/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- environment ------------------------------------------------------------------ */

static void read_trimmed(const char *cmd_or_file, int is_cmd, char *out, size_t cap)
{
    FILE *f = is_cmd ? popen(cmd_or_file, "r") : fopen(cmd_or_file, "r");
    snprintf(out, cap, "unknown");
    if (!f)
        return;
    if (fgets(out, (int)cap, f)) {
        out[strcspn(out, "\n")] = 0;
        if (!out[0])
            snprintf(out, cap, "unknown");
    } else {
        snprintf(out, cap, "unknown");
    }
    if (is_cmd)
        pclose(f);
    else
        fclose(f);
}

static void environment_read(crossover_env_t *e, int argc, char **argv)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(e->cpu, sizeof e->cpu, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c += 1 + (c[1] == ' ');
                c[strcspn(c, "\n")] = 0;
                snprintf(e->cpu, sizeof e->cpu, "%s", c);
                break;
            }
        }
    }
    if (f)
        fclose(f);
    read_trimmed("git rev-parse --short HEAD 2>/dev/null", 1, e->commit, sizeof e->commit);
#ifdef RTUGW_BUILD_SRCDIR
    if (strcmp(e->commit, "unknown") == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null",
                 RTUGW_BUILD_SRCDIR);
        read_trimmed(cmd, 1, e->commit, sizeof e->commit);
        if (strcmp(e->commit, "unknown") != 0)
            strncat(e->commit, " (of the source tree it was built from)",
                    sizeof e->commit - strlen(e->commit) - 1);
    }
#endif
    read_trimmed("/proc/loadavg", 0, e->load_start, sizeof e->load_start);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(e->date, sizeof e->date, "%Y-%m-%d %H:%M UTC", &tm);
    size_t used = (size_t)snprintf(e->command, sizeof e->command, "rtugw bench");
    for (int i = 0; i < argc && used < sizeof e->command; i++)
        used += (size_t)snprintf(e->command + used, sizeof e->command - used, " %s", argv[i]);
    e->cores = sysconf(_SC_NPROCESSORS_ONLN);
}

/* ---- options ------------------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench crossover [--sweep] [--callgrind] [--json[=FILE]] [--out FILE]\n"
            "                             [--svg FILE] [--rounds N] [--warmup N] [--frames N]\n"
            "                             [--tasks N] [--epsilon E] [--no-progress]\n"
            "\n"
            "Fallback only, native only and routed decode of the same frames at 7, 21 and 255\n"
            "bytes (R1, R8, R125), directly on one thread and through the actor scheduler at\n"
            "concurrency 1, 2, 4. An equivalence gate (memcmp of envelopes against the\n"
            "reference) runs first; a failure stops the run with exit status 1. Verdicts come\n"
            "from the interquartile range of per-round paired differences.\n"
            "  --sweep        also every frame length 5..256 (direct layer)\n"
            "  --callgrind    also instructions per frame per form under valgrind\n"
            "  --json         JSON on standard output instead of Markdown\n"
            "  --json=FILE    JSON to FILE (Markdown still on standard output); also\n"
            "                 spelt --json FILE\n"
            "  --out FILE     the Markdown report to FILE as well\n"
            "  --svg FILE     chart: ns per frame against frame length, crossover marked\n"
            "  --rounds N     measured rounds (default 101)\n"
            "  --warmup N     warm-up rounds, dropped (default 5)\n"
            "  --frames N     frames per direct batch (default 20000: the router's\n"
            "                 verdict window, 262144 pulls, fills twice)\n"
            "  --tasks N      tasks per actor batch (default 1000)\n"
            "  --epsilon E    the router's exploration rate (default: the router's, 0.05)\n"
            "  --no-progress  no progress line on standard error\n"
            "Test hook: RTUGW_CROSSOVER_BREAK=fallback|native|routed[@actors] corrupts one\n"
            "envelope byte of that form in the gate, in the direct layer (or with @actors in\n"
            "the actor layer); the run must then stop with exit status 1.\n");
}

/* --json alone: JSON on stdout (or into the file named after the options);
 * --json=FILE: into FILE. */
static int set_json(void *dst, const char *file)
{
    crossover_options_t *opt = dst;
    if (file)
        opt->json_file = file;
    else
        opt->json_stdout = 1;
    return 0;
}

static int parse_options(int argc, char **argv, crossover_options_t *opt)
{
    const bench_opt_t opts[] = {
        BENCH_FLAG("sweep", &opt->sweep),
        BENCH_FLAG("callgrind", &opt->callgrind),
        BENCH_CALL("json", set_json, opt, optional_argument, NULL),
        BENCH_TEXT("out", &opt->out_file),
        BENCH_TEXT("svg", &opt->svg_file),
        BENCH_UINT("rounds", &opt->rounds, 1, 100000000),
        BENCH_UINT("warmup", &opt->warmup, 0, 100000000),
        BENCH_UINT("frames", &opt->frames, 1, 100000000),
        BENCH_UINT("tasks", &opt->tasks, 1, 100000000),
        BENCH_DOUBLE("epsilon", &opt->epsilon, 0.0, 1.0),
        BENCH_FLAG("no-progress", &opt->no_progress),
        BENCH_TEXT("only", &opt->only),
        BENCH_UINT("bytes", &opt->only_bytes, 1, 100000000),
        BENCH_UINT("iterations", &opt->iterations, 1, 100000000),
        BENCH_OPT_END,
    };
    int rest, rc = bench_options(argc, argv, "crossover", opts, usage, &rest);
    if (rc >= 0)
        return rc;
    /* --json FILE (with a space) names the file as the one argument left. */
    if (opt->json_stdout && !opt->json_file && rest == argc - 1) {
        opt->json_file = argv[rest++];
        opt->json_stdout = 0;
    }
    if (rest < argc) {
        fprintf(stderr, "rtugw bench crossover: unexpected argument '%s'\n", argv[rest]);
        return 2;
    }
    return -1;
}

/* ---- main --------------------------------------------------------------------------- */

/* RTUGW_CROSSOVER_BREAK=FORM[@actors] into opt; 0, or 2 (usage) when it names no form. */
static int parse_break(crossover_options_t *opt)
{
    const char *brk = getenv("RTUGW_CROSSOVER_BREAK");
    if (!brk || !*brk)
        return 0;
    size_t flen = strcspn(brk, "@");
    opt->break_actors = strcmp(brk + flen, "@actors") == 0;
    for (int f = 0; f < FORMS; f++)
        if (strncmp(brk, crossover_form_names[f], flen) == 0 &&
            crossover_form_names[f][flen] == 0 && (brk[flen] == 0 || opt->break_actors))
            opt->break_form = f;
    if (opt->break_form < 0) {
        fprintf(stderr, "rtugw bench crossover: RTUGW_CROSSOVER_BREAK='%s': expected "
                        "fallback, native or routed, optionally with @actors\n", brk);
        return 2;
    }
    return 0;
}

/* The routers and the actor pool of a run; 0, or -1 after saying which failed
 * (what was made is left in g for rig_close). */
static int rig_open(crossover_rig_t *g, const router_config_t *cfg, unsigned tasks)
{
    router_config_t explore_cfg = *cfg;
    explore_cfg.epsilon = 1.0;
    if (router_new(cfg, &g->direct) != 0 || router_new(&explore_cfg, &g->explore) != 0 ||
        router_new(cfg, &g->sweep) != 0 || !(g->dt = router_thread_new(g->direct)) ||
        !(g->et = router_thread_new(g->explore)) || !(g->st = router_thread_new(g->sweep))) {
        fprintf(stderr, "rtugw bench crossover: cannot create the routers\n");
        return -1;
    }
    if (crossover_actors_start(cfg, tasks, &g->actors) != 0) {
        fprintf(stderr, "rtugw bench crossover: cannot start the actor layer\n");
        return -1;
    }
    return 0;
}

static void rig_close(crossover_rig_t *g)
{
    crossover_actors_stop(g->actors);
    router_free(g->direct);
    router_free(g->explore);
    router_free(g->sweep);
}

/* The report on standard output, then the files asked for. 0 or -1. */
static int write_outputs(const crossover_results_t *R)
{
    const crossover_options_t *opt = &R->opt;
    if (opt->json_stdout)
        crossover_write_json(stdout, R);
    else
        crossover_write_markdown(stdout, R);
    fflush(stdout);
    if (opt->json_file) {
        FILE *f = fopen(opt->json_file, "w");
        if (!f) {
            fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->json_file, strerror(errno));
            return -1;
        }
        crossover_write_json(f, R);
        if (fclose(f) != 0)
            return -1;
    }
    if (opt->out_file) {
        FILE *f = fopen(opt->out_file, "w");
        if (!f) {
            fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->out_file, strerror(errno));
            return -1;
        }
        crossover_write_markdown(f, R);
        if (fclose(f) != 0)
            return -1;
    }
    if (opt->svg_file && crossover_write_svg(opt->svg_file, R) != 0) {
        fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->svg_file, strerror(errno));
        return -1;
    }
    return 0;
}

int bench_crossover_main(int argc, char **argv)
{
    router_config_t cfg;
    router_config_default(&cfg);
    static crossover_results_t R0;
    crossover_results_t *R = &R0;
    memset(R, 0, sizeof *R);
    crossover_options_t *opt = &R->opt;
    *opt = (crossover_options_t){ .rounds = 101, .warmup = 5, .frames = 20000, .tasks = 1000,
                                  .epsilon = cfg.epsilon, .iterations = 1000,
                                  .break_form = -1 };
    int rc = parse_options(argc, argv, opt);
    if (rc >= 0)
        return rc;
    if (!isatty(STDERR_FILENO))
        opt->no_progress = 1;
    if (parse_break(opt) != 0)
        return 2;
    if (opt->only)
        return crossover_run_only(opt);

    R->eps = opt->epsilon;
    cfg.epsilon = opt->epsilon;
    environment_read(&R->env, argc, argv);

    crossover_rig_t rig = { 0 };
    int status = 1;
    if (rig_open(&rig, &cfg, opt->tasks) != 0)
        goto out;
    R->env.workers = crossover_actors_workers(rig.actors);

    /* 1. the gate: tiers in both layers, then the sweep lengths; nothing is
     * timed unless every form passes */
    if (crossover_gate_tiers(R, &rig) != 0 || (opt->sweep && crossover_gate_sweep(R, &rig) != 0))
        goto out;
    /* 2. rows; 3. the rounds: the tiers in both layers, then the sweep */
    if (crossover_rows_alloc(R) != 0 || crossover_rounds(R, &rig) != 0)
        goto out;
    read_trimmed("/proc/loadavg", 0, R->env.load_end, sizeof R->env.load_end);
    /* 4. analysis: statistics, routing verdicts, findings, the crossover */
    crossover_analyse(R, &rig);
    if (opt->callgrind) {
        if (crossover_callgrind(opt, R->cg) != 0)
            goto out;
        R->have_cg = 1;
    }
    /* 5. output */
    if (write_outputs(R) != 0)
        goto out;
    status = R->sink == 0xFFFFFFFFu; /* never true; keeps the sink alive */
out:
    rig_close(&rig);
    crossover_results_free(R);
    return status;
}
