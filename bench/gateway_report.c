/*
 * bench/gateway_report.c -- `rtugw bench gateway`'s report, Markdown or JSON,
 * from the cells, the memory and the paced run that bench_gateway.c measured.
 */
#include "bench/gateway.h"

#include <stdio.h>

static void print_json_spread(const char *key, const bench_spread_t *s)
{
    printf("\"%s\": %.2f, \"%s_p10\": %.2f, \"%s_p90\": %.2f", key, s->median, key, s->p10, key, s->p90);
}

/* The cost keys of a row (after the rate and latency keys). */
static void print_json_cost(const cell_t *c)
{
    static const struct { const char *key; size_t off; } keys[] = {
        { "cpu_us_per_req", offsetof(cell_t, cpu_us) },
        { "ctxsw_per_req", offsetof(cell_t, ctxsw) },
        { "direct_cpu_us_per_req", offsetof(cell_t, direct_cpu_us) },
        { "direct_ctxsw_per_req", offsetof(cell_t, direct_ctxsw) },
        { "client_cpu_us_per_req", offsetof(cell_t, client_cpu_us) },
        { "io_ctxsw_per_req", offsetof(cell_t, main_ctxsw) },
        { "direct_master_ctxsw_per_req", offsetof(cell_t, direct_main_ctxsw) },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        print_json_spread(keys[i].key, (const bench_spread_t *)((const char *)c + keys[i].off));
        printf(", ");
    }
    printf("\"rss_kib\": %ld, \"direct_rss_kib\": %ld, \"gateway_threads\": %u", c->rss_kib,
           c->direct_rss_kib, c->threads);
}

static void print_cost_table(const cell_t *cells, size_t ncells, int sim_outside)
{
    printf("\nCost per request, median (p10-p90) over the same rounds: CPU time (utime + stime, all\n"
           "threads) and context switches (voluntary + nonvoluntary, every thread) of the gateway process\n"
           "(%s) and of the direct arm's process (the master and its\n"
           "simulator thread), after the ';' the main thread's alone (the gateway's I/O thread, the\n"
           "direct master); the TCP clients' CPU time (this process, rtugw segments%s); VmRSS after the\n"
           "cell (the direct arm's is this bench process).\n\n"
           "| regs | clients | rtugw CPU us | direct CPU us | rtugw ctxsw (; I/O thread) "
           "| direct ctxsw (; master) "
           "| client CPU us | rtugw VmRSS KiB | direct VmRSS KiB | gateway threads |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
           sim_outside ? "its simulator outside it, in this process: the gateway's threads alone"
                       : "its simulator thread included",
           sim_outside ? ", the gateway's simulator thread included" : "");
    for (size_t i = 0; i < ncells; i++) {
        const cell_t *c = &cells[i];
        printf("| %u | %u | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f (%.2f-%.2f; %.2f) "
               "| %.2f (%.2f-%.2f; %.2f) | %.1f (%.1f-%.1f) | %ld | %ld | %u |\n",
               c->regs, c->clients, c->cpu_us.median, c->cpu_us.p10, c->cpu_us.p90, c->direct_cpu_us.median,
               c->direct_cpu_us.p10, c->direct_cpu_us.p90, c->ctxsw.median, c->ctxsw.p10, c->ctxsw.p90,
               c->main_ctxsw.median, c->direct_ctxsw.median, c->direct_ctxsw.p10, c->direct_ctxsw.p90,
               c->direct_main_ctxsw.median, c->client_cpu_us.median,
               c->client_cpu_us.p10, c->client_cpu_us.p90, c->rss_kib, c->direct_rss_kib, c->threads);
    }
}

/* --relay: the floor's keys of a row. */
static void print_json_relay(const cell_t *c)
{
    printf(", ");
    print_json_spread("relay_rps", &c->relay_rps);
    printf(", ");
    print_json_spread("rtugw_per_relay", &c->rtugw_per_relay);
    printf(", ");
    print_json_spread("relay_cpu_us_per_req", &c->relay_cpu_us);
    printf(", ");
    print_json_spread("relay_ctxsw_per_req", &c->relay_ctxsw);
    printf(", \"relay_p50_us\": %.1f, \"relay_p99_us\": %.1f, \"relay_requests\": %llu, \"relay_errors\": %llu",
           c->relay_p50, c->relay_p99, (unsigned long long)c->relay_requests, (unsigned long long)c->relay_errors);
}

static void print_relay_table(const cell_t *cells, size_t ncells)
{
    printf("\nThe floor (--relay, bench/relay.c): the least a Modbus TCP to RTU gateway does, one thread\n"
           "and poll(), no line discipline, a process of its own on its own simulator in this process,\n"
           "in the same rounds. rtugw/relay: per-round ratio of the rates. Cost per request: the\n"
           "relay's process against the gateway's (its threads alone, simulator outside).\n\n"
           "| regs | clients | relay rps | rtugw/relay | relay p50 us | rtugw p50 - relay p50 us "
           "| relay CPU us | rtugw CPU us | relay ctxsw | rtugw ctxsw |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < ncells; i++) {
        const cell_t *c = &cells[i];
        printf("| %u | %u | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) | %.1f | %+.1f | %.1f (%.1f-%.1f) | %.1f "
               "| %.2f (%.2f-%.2f) | %.2f |\n",
               c->regs, c->clients, c->relay_rps.median, c->relay_rps.p10, c->relay_rps.p90,
               c->rtugw_per_relay.median, c->rtugw_per_relay.p10, c->rtugw_per_relay.p90, c->relay_p50,
               c->p50 - c->relay_p50, c->relay_cpu_us.median, c->relay_cpu_us.p10, c->relay_cpu_us.p90,
               c->cpu_us.median, c->relay_ctxsw.median, c->relay_ctxsw.p10, c->relay_ctxsw.p90, c->ctxsw.median);
    }
}

void gateway_print_report(const gw_options_t *opt, const cell_t *cells, size_t ncells,
                         const rss_result_t *rss, const paced_result_t *paced)
{
    if (opt->json) {
        printf("{\"gap_us\": %d, \"workers\": %u, \"seconds\": %g, \"rounds\": %u, \"warmup\": %u, "
               "\"sim_outside\": %s, \"relay\": %s, \"rows\": [",
               GAP_US, opt->workers, opt->seconds, opt->rounds, opt->warmup, opt->sim_outside ? "true" : "false",
               opt->relay ? "true" : "false");
        for (size_t i = 0; i < ncells; i++) {
            const cell_t *c = &cells[i];
            printf("%s{\"registers\": %u, \"clients\": %u, \"rtugw_rps\": %.1f, \"direct_rps\": %.1f, "
                   "\"p50_us\": %.1f, \"p99_us\": %.1f, \"direct_p50_us\": %.1f, "
                   "\"direct_p99_us\": %.1f, \"rtugw_rps_p10\": %.1f, \"rtugw_rps_p90\": %.1f, "
                   "\"direct_rps_p10\": %.1f, \"direct_rps_p90\": %.1f, \"ratio\": %.3f, "
                   "\"ratio_p10\": %.3f, \"ratio_p90\": %.3f, \"requests\": %llu, "
                   "\"direct_requests\": %llu, \"errors\": %llu, \"direct_errors\": %llu, ",
                   i ? ", " : "", c->regs, c->clients, c->rtugw_rps.median, c->direct_rps.median,
                   c->p50, c->p99, c->direct_p50, c->direct_p99, c->rtugw_rps.p10, c->rtugw_rps.p90,
                   c->direct_rps.p10, c->direct_rps.p90, c->ratio.median, c->ratio.p10, c->ratio.p90,
                   (unsigned long long)c->requests, (unsigned long long)c->direct_requests,
                   (unsigned long long)c->errors, (unsigned long long)c->direct_errors);
            print_json_cost(c);
            if (opt->relay)
                print_json_relay(c);
            printf("}");
        }
        printf("], \"rss\": {\"clients\": %d, \"before_kib\": %ld, \"idle_kib\": %ld, \"busy_kib\": %ld, "
               "\"hwm_kib\": %ld, \"anon_kib\": %ld, \"file_kib\": %ld, \"pss_kib\": %ld, \"busy_rps\": %.1f, "
               "\"errors\": %llu}",
               RSS_CLIENTS, rss->before_kib, rss->idle_kib, rss->busy_kib, rss->hwm_kib, rss->anon_kib,
               rss->file_kib, rss->pss_kib, rss->busy_rps, (unsigned long long)rss->errors);
        if (paced)
            printf(", \"paced\": {\"devices\": %d, \"registers\": %d, \"baud\": %d, \"cycles\": %u, "
                   "\"cycle_ms\": %.2f, \"cycle_ms_p10\": %.2f, \"cycle_ms_p90\": %.2f, "
                   "\"wire_ms\": %.2f, \"wire_answers_ms\": %.2f, \"ratio\": %.3f, "
                   "\"ratio_answers\": %.3f, \"errors\": %llu, \"responses\": %.0f, "
                   "\"crc_errors\": %.0f, \"retries\": %.0f}",
                   PACED_DEVICES, PACED_REGS, PACED_BAUD, paced->cycles, paced->cycle_ms.median,
                   paced->cycle_ms.p10, paced->cycle_ms.p90, paced->wire_full_ms, paced->wire_resp_ms,
                   paced->ratio_full.median, paced->ratio_resp.median, (unsigned long long)paced->errors,
                   paced->transactions, paced->crc_errors, paced->retries);
        printf("}\n");
        return;
    }
    printf("# rtugw bench gateway\n\n"
           "rtugw (subprocess, `port = %s`, gap_us = %d) driven by libmodbus TCP clients, vs a direct\n"
           "libmodbus RTU master on a pty against the same simulator, unpaced. Read holding registers\n"
           "(fc 3). Arms alternate in rounds (direct, rtugw, ...): %u measured rounds of %.3f s per arm\n"
           "and cell, %u warm-up rounds dropped. rps: median (p10-p90) over rounds; ratio: per-round\n"
           "rtugw/direct; latency percentiles pooled over the measured rounds. The direct master is\n"
           "one stream (a serial line has one master) in every row.\n\n"
           "| regs | clients | rtugw rps | direct rps | ratio | p50 us | p99 us | direct p50 us | p50 delta us | errors |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
           opt->sim_outside ? "PTY` on a simulator in this process, `" : "sim:1", GAP_US, opt->rounds,
           opt->seconds / opt->rounds, opt->warmup);
    for (size_t i = 0; i < ncells; i++) {
        const cell_t *c = &cells[i];
        printf("| %u | %u | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) | %.1f | %.1f | %.1f | %+.1f | %llu |\n",
               c->regs, c->clients, c->rtugw_rps.median, c->rtugw_rps.p10, c->rtugw_rps.p90,
               c->direct_rps.median, c->direct_rps.p10, c->direct_rps.p90, c->ratio.median, c->ratio.p10,
               c->ratio.p90, c->p50, c->p99, c->direct_p50, c->p50 - c->direct_p50,
               (unsigned long long)(c->errors + c->direct_errors));
    }
    print_cost_table(cells, ncells, opt->sim_outside);
    if (opt->relay)
        print_relay_table(cells, ncells);
    printf("\nTargets: p50 delta <= 40 us; ratio >= 0.6. With 4 or 8 clients a request waits behind the\n"
           "others' on the one line, so its latency is about that many transactions: the latency target is\n"
           "for the 1-client rows.\n\n"
           "Gateway resident memory, 1 bus, %d clients: before connecting %ld KiB, connected idle %ld KiB,\n"
           "after all busy (%.0f rps) %ld KiB (anonymous %ld, file-backed %ld; PSS %ld), peak (VmHWM)\n"
           "%ld KiB. Target <= 4096 KiB.\n",
           RSS_CLIENTS, rss->before_kib, rss->idle_kib, rss->busy_rps, rss->busy_kib, rss->anon_kib,
           rss->file_kib, rss->pss_kib, rss->hwm_kib);
    if (paced)
        printf("\nPaced (sim-paced, %d baud 8E1): one cycle = %d devices x %d registers, asked at once:\n"
               "%.2f ms (p10 %.2f, p90 %.2f) over %u cycles; computed wire time %.2f ms (requests +\n"
               "answers + t3.5 between): ratio %.3f; answers + t3.5 only (a pty delivers the request at\n"
               "once; only the simulator's answers are paced) %.2f ms: ratio %.3f. Target <= 1.05.\n"
               "Failed reads %llu; the bus counted %.0f responses, %.0f CRC errors, %.0f retries.\n",
               PACED_BAUD, PACED_DEVICES, PACED_REGS, paced->cycle_ms.median, paced->cycle_ms.p10,
               paced->cycle_ms.p90, paced->cycles, paced->wire_full_ms, paced->ratio_full.median,
               paced->wire_resp_ms, paced->ratio_resp.median, (unsigned long long)paced->errors,
               paced->transactions, paced->crc_errors, paced->retries);
}

