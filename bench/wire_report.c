/*
 * bench/wire_report.c -- `rtugw bench wire`'s report: Markdown tables or
 * JSON, each figure a median with its p10-p90.
 */
#include "bench/wire.h"

#include <stdio.h>
#include <stdlib.h>

const char *const wire_stage_names[WIRE_STAGES] = {
    "client send -> gateway read",      /* loopback, the I/O thread's wake, MBAP parse */
    "gateway read -> line thread",      /* hop 1: the request to the bus actor */
    "line thread -> frame written",     /* the line's queue, the port write */
    "frame written -> first byte read", /* the slave's turn-around and the paced read's first sleep */
    "first byte -> last byte read",     /* the answer's wire time, and the read's overshoot */
    "last byte read -> answer queued",  /* the framer, I3's quiet, the delivery */
    "answer queued -> client received", /* hop 2, the socket write, loopback, the client's wake */
};

int bench_samples_push(bench_samples_t *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        double *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

const char *const wire_arm_names[WIRE_ARMS] = { "rtugw", "rtugw_nowiden", "rtugw_oneloop" };

static void json_spread(const char *name, const bench_spread_t *s, const char *sep)
{
    printf("\"%s\": %.4f, \"%s_p10\": %.4f, \"%s_p90\": %.4f%s", name, s->median, name, s->p10, name, s->p90, sep);
}

static void print_json(const wire_options_t *opt, const wire_row_t *rows, size_t n)
{
    printf("{\"seconds\": %.3f, \"rounds\": %u, \"warmup\": %u, \"regs\": %u, \"rows\": [", opt->seconds,
           opt->rounds, opt->warmup, opt->regs);
    for (size_t i = 0; i < n; i++) {
        const wire_row_t *r = &rows[i];
        printf("%s\n  {\"baud\": %u, \"cpu_latency_us\": ", i ? "," : "", r->baud);
        printf(r->cpu_latency_us >= 0 ? "%d" : "null", r->cpu_latency_us);
        printf(", \"answer_wire_us\": %.2f, \"direct_requests\": %llu, \"direct_errors\": %llu, ", r->wire_us,
               (unsigned long long)r->direct_requests, (unsigned long long)r->direct_errors);
        json_spread("direct_rps", &r->direct_rps, ", ");
        json_spread("direct_us", &r->direct_us, ", ");
        printf("\"arms\": [");
        for (unsigned k = 0; k < WIRE_ARMS; k++) {
            const wire_arm_t *g = &r->gw[k];
            printf("%s{\"arm\": \"%s\", ", k ? ", " : "", wire_arm_names[k]);
            json_spread("rps", &g->rps, ", ");
            json_spread("ratio", &g->ratio, ", ");
            json_spread("us", &g->us, ", ");
            printf("\"added_us\": %.2f, \"requests\": %llu, \"errors\": %llu, \"timeline_n\": %zu, \"stages\": [",
                   g->added_us, (unsigned long long)g->requests, (unsigned long long)g->errors, g->timeline_n);
            for (unsigned s = 0; g->timeline_n && s < WIRE_STAGES; s++)
                printf("%s{\"stage\": \"%s\", \"us\": %.2f, \"us_p10\": %.2f, \"us_p90\": %.2f}", s ? ", " : "",
                       wire_stage_names[s], g->stage_us[s].median, g->stage_us[s].p10, g->stage_us[s].p90);
            printf("]}");
        }
        printf("]}");
    }
    printf("\n]}\n");
}

/* What follows a row's baud, in its table cell and its timelines' titles:
 * the request held in its rounds (--cpu-latency), or nothing. */
static const char *held_suffix(const wire_row_t *r, char *buf, size_t cap)
{
    buf[0] = 0;
    if (r->cpu_latency_us >= 0)
        snprintf(buf, cap, ", %d us held", r->cpu_latency_us);
    return buf;
}

void wire_print(const wire_options_t *opt, const wire_row_t *rows, size_t n)
{
    char label[48];

    if (opt->json) {
        print_json(opt, rows, n);
        return;
    }
    printf("One client, %u holding registers per read, paced 8N1 pty, gap_us = 1; %u rounds of %.2f s per arm "
           "(median, p10-p90)\n\n", opt->regs, opt->rounds, opt->seconds / opt->rounds);
    printf("| baud | arm | rps | /direct | us per read | added us (medians) |\n|---:|---|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        const wire_row_t *r = &rows[i];
        held_suffix(r, label, sizeof label);
        printf("| %u%s | direct | %.1f (%.1f-%.1f) | 1 | %.1f (%.1f-%.1f) | (answer's wire time %.1f) |\n", r->baud,
               label,
               r->direct_rps.median, r->direct_rps.p10, r->direct_rps.p90, r->direct_us.median, r->direct_us.p10,
               r->direct_us.p90, r->wire_us);
        for (unsigned k = 0; k < WIRE_ARMS; k++) {
            const wire_arm_t *g = &r->gw[k];
            printf("| %u%s | %s | %.1f (%.1f-%.1f) | %.3f (%.3f-%.3f) | %.1f (%.1f-%.1f) | %+.1f |\n", r->baud, label,
                   wire_arm_names[k], g->rps.median, g->rps.p10, g->rps.p90, g->ratio.median, g->ratio.p10,
                   g->ratio.p90, g->us.median, g->us.p10, g->us.p90, g->added_us);
        }
    }
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < WIRE_ARMS; k++) {
            const wire_arm_t *g = &rows[i].gw[k];
            if (!g->timeline_n)
                continue;
            printf("\nTimeline, %s at %u baud%s, %zu transactions (us, median p10-p90):\n\n| stage | us |\n"
                   "|---|---:|\n", wire_arm_names[k], rows[i].baud, held_suffix(&rows[i], label, sizeof label),
                   g->timeline_n);
            for (unsigned s = 0; s < WIRE_STAGES; s++)
                printf("| %s | %.1f (%.1f-%.1f) |\n", wire_stage_names[s], g->stage_us[s].median, g->stage_us[s].p10,
                       g->stage_us[s].p90);
        }
}
