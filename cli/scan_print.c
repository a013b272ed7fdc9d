/*
 * cli/scan_print.c -- what `rtugw scan` found, for people (a table and its
 * hints), for programs (--json) and for the configuration (--snippet).
 */
#include "cli/scan.h"
#include "json/json.h"

#include <stdio.h>
#include <string.h>

static const char *parity_word(char p)
{
    return p == 'N' ? "none" : p == 'O' ? "odd" : "even";
}

/* What the answers said besides the slaves: ids whose answers were garbled,
 * slaves whose answers came behind noise, identifications --budget cut. */
void scan_print_hints(const scan_run_t *r, FILE *to)
{
    for (unsigned id = 1; id < 248; id++) {
        const scan_garbled_t *g = &r->garbled[id];
        if (g->count)
            fprintf(to, "garbled answers at id %u (%u, the first at %u %s): two slaves at one id, or a wrong "
                        "baud/parity?\n", id, g->count, g->baud, g->format.text);
    }
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        if (s->noise)
            fprintf(to, "slave %u: %llu noise byte%s before its answers, skipped (a transceiver's turn-on "
                        "glitch?)\n", s->id, (unsigned long long)s->noise, s->noise == 1 ? "" : "s");
        if (s->unfinished)
            fprintf(to, "slave %u: --budget ended its identification\n", s->id);
    }
}

void scan_print_table(const scan_run_t *r)
{
    if (!r->n_found) {
        printf("no slave answered\n");
        scan_print_hints(r, stdout);
        return;
    }
    printf("%-5s %-7s %-6s %-8s %-40s %s\n", "slave", "baud", "format", "reads", "device id (FC 43)",
           "server id (FC 17)");
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        char reads[16] = "", dev[160] = "-", sid[140] = "-";
        for (int fc = 1; fc <= 4; fc++)
            if (s->reads[fc])
                snprintf(reads + strlen(reads), sizeof reads - strlen(reads), "%s%d", reads[0] ? "," : "", fc);
        if (s->has_device_id)
            snprintf(dev, sizeof dev, "%s / %s / %s", s->vendor, s->product, s->revision);
        if (s->has_server_id) {
            size_t at = 0;
            for (size_t k = 0; k < s->server_id_len && at + 3 < sizeof sid - 12; k++)
                at += (size_t)snprintf(sid + at, sizeof sid - at, "%02x", s->server_id[k]);
            if (s->run >= 0)
                snprintf(sid + at, sizeof sid - at, " run %s", s->run ? "on" : "off");
        }
        printf("%-5u %-7u %-6s %-8s %-40s %s\n", s->id, s->baud, s->format.text, reads[0] ? reads : "-",
               dev, sid);
    }
    scan_print_hints(r, stdout);
}

void scan_print_json(const scan_run_t *r)
{
    char q[JSON_QUOTED_MAX(512)];
    json_quote(q, sizeof q, r->o->port);
    printf("{\"port\":%s,\"elapsed_s\":%.3f,\"complete\":%s", q, scan_elapsed_s(r),
           r->budget_hit ? "false" : "true");
    json_quote(q, sizeof q, r->skipped);
    printf(",\"not_finished\":%s,\"slaves\":[", q);
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        printf("%s{\"slave\":%u,\"baud\":%u,\"format\":\"%s\",\"parity\":\"%s\",\"data_bits\":%u,"
               "\"stop_bits\":%u,\"reads\":[",
               i ? "," : "", s->id, s->baud, s->format.text, parity_word(s->format.parity),
               s->format.data_bits, s->format.stop_bits);
        for (int fc = 1, k = 0; fc <= 4; fc++)
            if (s->reads[fc])
                printf("%s%d", k++ ? "," : "", fc);
        printf("],\"device_id\":");
        if (s->has_device_id) {
            char v[JSON_QUOTED_MAX(64)], p[JSON_QUOTED_MAX(64)], rv[JSON_QUOTED_MAX(64)];
            json_quote(v, sizeof v, s->vendor);
            json_quote(p, sizeof p, s->product);
            json_quote(rv, sizeof rv, s->revision);
            printf("{\"vendor\":%s,\"product\":%s,\"revision\":%s}", v, p, rv);
        } else {
            printf("null");
        }
        printf(",\"server_id\":");
        if (s->has_server_id) {
            printf("\"");
            for (size_t k = 0; k < s->server_id_len; k++)
                printf("%02x", s->server_id[k]);
            printf("\",\"run\":%s", s->run < 0 ? "null" : s->run ? "true" : "false");
        } else {
            printf("null");
        }
        printf(",\"noise_bytes\":%llu,\"identified\":%s}", (unsigned long long)s->noise,
               s->unfinished ? "false" : "true");
    }
    printf("],\"garbled\":[");
    for (unsigned id = 1, k = 0; id < 248; id++)
        if (r->garbled[id].count)
            printf("%s{\"slave\":%u,\"answers\":%u,\"baud\":%u,\"format\":\"%s\"}", k++ ? "," : "", id,
                   r->garbled[id].count, r->garbled[id].baud, r->garbled[id].format.text);
    printf("]}\n");
}

void scan_print_snippet(const scan_run_t *r)
{
    unsigned bus = 0;
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        bool first = true;
        for (size_t k = 0; k < i; k++)
            if (r->found[k].baud == s->baud && strcmp(r->found[k].format.text, s->format.text) == 0)
                first = false;
        if (!first)
            continue;
        bus++;
        printf("%s[bus scan%u]\nport = %s\nbaud = %u\nparity = %s\ndata_bits = %u\nstop_bits = %u\n",
               bus > 1 ? "\n" : "", bus, r->o->port, s->baud, parity_word(s->format.parity),
               s->format.data_bits, s->format.stop_bits);
        for (size_t k = i; k < r->n_found; k++) {
            const scan_slave_t *t = &r->found[k];
            if (t->baud == s->baud && strcmp(t->format.text, s->format.text) == 0)
                printf("\n[device slave%u]\nbus = scan%u\nslave = %u\n", t->id, bus, t->id);
        }
    }
}

