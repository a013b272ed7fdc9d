/*
 * routing/config.c -- the router's configuration: its defaults, the names
 * of arms and policies, the parsers of the configuration's texts (policy,
 * bucket edges), and its one way to warn (the configured log, else stderr).
 */
#include "routing/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint16_t default_edges[] = { 8, 16, 32, 64, 128, 256 };

const char *router_arm_name(router_arm_t arm)
{
    return arm == ROUTER_ARM_NATIVE ? "native" : arm == ROUTER_ARM_FALLBACK ? "fallback" : "?";
}

const char *router_policy_name(router_policy_t policy)
{
    return policy == ROUTER_POLICY_THOMPSON ? "thompson" : "epsilon-greedy";
}

int router_parse_policy(const char *text, router_policy_t *out)
{
    if (strcmp(text, "epsilon-greedy") == 0)
        *out = ROUTER_POLICY_EPSILON_GREEDY;
    else if (strcmp(text, "thompson") == 0)
        *out = ROUTER_POLICY_THOMPSON;
    else
        return -EINVAL;
    return 0;
}

void router_config_default(router_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_edges = sizeof default_edges / sizeof default_edges[0];
    memcpy(cfg->edges, default_edges, sizeof default_edges);
    cfg->epsilon = 0.05;
    cfg->sample_every = 4096;
    cfg->explore_run = 64;
    cfg->alpha = 0.05;
    cfg->hysteresis = 0.02;
    cfg->window = 0;
    cfg->default_arm = -1;
}

int router_parse_edges(const char *text, router_config_t *cfg)
{
    uint16_t edges[ROUTER_MAX_BUCKETS];
    unsigned n = 0;
    const char *p = text;

    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v < 1 || v > RTU_MAX_ADU || n == ROUTER_MAX_BUCKETS ||
            (n && v <= edges[n - 1]) || (*end && *end != ',' && *end != ' '))
            return -EINVAL;
        edges[n++] = (uint16_t)v;
        p = end;
    }
    if (n == 0)
        return -EINVAL;
    cfg->n_edges = n;
    memcpy(cfg->edges, edges, n * sizeof edges[0]);
    return 0;
}

void router_warn(const router_t *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->cfg.log)
        r->cfg.log(r->cfg.log_ctx, msg);
    else
        fprintf(stderr, "rtugw router: %s\n", msg);
}
