/*
 * gateway/runtime.c -- what every bus, the poller and the serial slaves run
 * on: the actor scheduler and the router (and the registry of the listen://
 * ports dial-in buses share, which their drivers find there). Made from the configuration at
 * start, drained at the stop, the router's learning saved to [router]
 * state_file, and their lines of /metrics.
 *
 * Why here and not in daemon/gw.c, which decides when: both are gw_t's
 * (gw->actors, gw->router) and gateway/ is the folder that may call actor/
 * and routing/; the wiring above it says when, through these, and the web
 * side reads their counters the way it reads every other part's, through a
 * *_metrics_text of the part that owns them (make check-calls holds the
 * folders to that).
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

/* A router from a [router] section: policy, exploration, buckets. */
static router_t *router_from(const config_router_t *c)
{
    router_config_t rc;
    router_t *r = NULL;
    router_config_default(&rc);
    rc.epsilon = c->exploration;
    rc.sample_every = c->sample_every;
    rc.explore_run = c->explore_run;
    if (strcmp(c->policy, "thompson") == 0)
        rc.policy = ROUTER_POLICY_THOMPSON;
    rc.n_edges = c->bucket_count;
    for (unsigned i = 0; i < rc.n_edges; i++)
        rc.edges[i] = (uint16_t)c->buckets[i];
    return router_new(&rc, &r) == 0 ? r : NULL;
}

/* The router from [router], with its last run's table when state_file
 * names one (router_load warns and starts fresh when the file is missing
 * or damaged). */
static int start_router(gw_t *gw)
{
    if (!(gw->router = router_from(&gw->cfg->router)))
        return -1;
    if (gw->cfg->router.state_file[0])
        router_load(gw->router, gw->cfg->router.state_file);
    return 0;
}

int gw_runtime_start(gw_t *gw)
{
    /* Actors: one per bus, per serial slave and the poller; the table is
     * allocated up front, so size it to what the configuration needs
     * rather than the default. */
    const config_t *cfg = gw->cfg;
    actor_config_t ac = { .workers = cfg->workers, .max_actors = cfg->bus_count + cfg->serial_slave_count + 16 };
    if (actor_system_create(&gw->actors, &ac) != 0 || !(gw->dialin_ports = driver_dialin_ports_new()))
        return -1;
    return start_router(gw);
}

unsigned gw_runtime_workers(const gw_t *gw)
{
    return gw->actors ? actor_system_workers(gw->actors) : 0;
}

void gw_runtime_drain(gw_t *gw, uint64_t grace_ns)
{
    if (gw->actors)
        actor_system_shutdown(gw->actors, grace_ns);
}

void gw_runtime_save(gw_t *gw)
{
    const char *path = gw->cfg->router.state_file;
    if (gw->router && path[0] && router_save(gw->router, path) != 0)
        gw_log(gw, CONFIG_LOG_WARN, "router: cannot save %s", path);
}

void gw_runtime_free(gw_t *gw)
{
    if (gw->actors)
        actor_system_destroy(gw->actors);
    gw->actors = NULL;
    if (gw->router)
        router_free(gw->router);
    gw->router = NULL;
    driver_dialin_ports_free(gw->dialin_ports);   /* after the buses: their drivers left it */
    gw->dialin_ports = NULL;
}

/*
 * [router] changed by a reload (I/O thread). Only state_file: nothing runs
 * from it until the stop's save, so the running copy takes it. Else every
 * bus decodes through a handle of the old router (its line's, and a
 * listen:// bus's observer), made by bus_new and used on the bus's port
 * loop, which the I/O thread cannot reach into; and [router] verify_rate is
 * read by the line at bus_new only. So:
 *  1. the new router is built first: a bad key or no memory leaves the old
 *     one running, untouched, and says why (the reload names `router`);
 *  2. where the bucket edges are the same it takes the old one's learned
 *     table (router_inherit: what a save and a load would carry); else it
 *     starts empty and relearns, as a fresh start with those edges would;
 *  3. gw->router and the running copy switch, then every bus restarts in
 *     place (bus_restart): its successor, made later by bus_new on this
 *     thread, takes a handle of the new router; a bus already restarting
 *     has not made its successor yet, so it takes the new one too;
 *  4. the old router is released (router_release): freed by whichever
 *     retired bus closes the last handle, in bus_free on that bus's port
 *     loop, after its listen observer (the only other reader, through
 *     l->table) is gone. /metrics and the stop's save read gw->router on
 *     this thread, so they see the new one from step 3 on.
 * The buses restart only with [gateway] buses_on_io_thread (bus_restart's
 * argument); without it the change waits for a restart, checked before
 * anything is built.
 */
int gw_router_reload(gw_t *gw, const config_router_t *fresh, char *err, size_t errcap)
{
    const config_router_t *cur = &gw->cfg->router;
    /* field by field: a struct copy need not carry its padding */
    bool same = cur->exploration == fresh->exploration && cur->sample_every == fresh->sample_every &&
                cur->explore_run == fresh->explore_run && cur->verify_rate == fresh->verify_rate &&
                cur->bucket_count == fresh->bucket_count && strcmp(cur->policy, fresh->policy) == 0 &&
                memcmp(cur->buckets, fresh->buckets, cur->bucket_count * sizeof cur->buckets[0]) == 0;
    if (same) {
        snprintf(gw->cfg->router.state_file, sizeof gw->cfg->router.state_file, "%s", fresh->state_file);
        return 0;   /* nothing to rebuild */
    }
    if (!gw->cfg->buses_on_io_thread && gw->bus_count) {
        snprintf(err, errcap, "router: applied live only with buses_on_io_thread = true");
        return -1;
    }
    router_t *nr = router_from(fresh);
    if (!nr) {
        snprintf(err, errcap, "router: cannot build the new router (invalid [router] values or out of memory); "
                 "the running one is kept");
        return -1;
    }
    bool kept = router_inherit(nr, gw->router) == 0;
    router_t *old = gw->router;
    gw->router = nr;
    gw->cfg->router = *fresh;
    for (unsigned i = 0; i < gw->bus_count; i++) {
        char why[256];
        if (gw->buses[i] && bus_restart(gw, i, why, sizeof why) != 0)
            gw_log(gw, CONFIG_LOG_ERROR, "router: %s", why);
    }
    router_release(old);
    gw_log(gw, CONFIG_LOG_INFO, "router: rebuilt from [router]%s; %u buses restarted onto it",
           kept ? ", its learned table kept" : " with new buckets, its learned table empty (it relearns)",
           gw->bus_count);
    return 1;
}

/* ---- /metrics ------------------------------------------------------------------------ */

void gw_router_metrics_text(gw_t *gw, struct evbuffer *b)
{
    router_report_t rep;
    if (!gw->router || router_report(gw->router, &rep) != 0)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_router_info The router's learning policy ([router] policy)\n"
                           "# TYPE rtugw_router_info gauge\nrtugw_router_info{policy=\"%s\"} 1\n",
                        router_policy_name(rep.policy));
    evbuffer_add_printf(b, "# HELP rtugw_router_pulls_total Frames decoded per length bucket and arm\n"
                           "# TYPE rtugw_router_pulls_total counter\n");
    for (unsigned i = 0; i < rep.n_buckets; i++)
        for (int a = 0; a < ROUTER_ARM_COUNT; a++)
            evbuffer_add_printf(b, "rtugw_router_pulls_total{bucket=\"%u-%u\",arm=\"%s\"} %llu\n",
                                rep.bucket[i].lo, rep.bucket[i].hi, router_arm_name((router_arm_t)a),
                                (unsigned long long)rep.bucket[i].pulls[a]);
    evbuffer_add_printf(b, "# TYPE rtugw_router_cost_ns gauge\n");
    for (unsigned i = 0; i < rep.n_buckets; i++)
        for (int a = 0; a < ROUTER_ARM_COUNT; a++)
            if (rep.bucket[i].has_cost[a])
                evbuffer_add_printf(b, "rtugw_router_cost_ns{bucket=\"%u-%u\",arm=\"%s\"} %.1f\n",
                                    rep.bucket[i].lo, rep.bucket[i].hi, router_arm_name((router_arm_t)a),
                                    rep.bucket[i].cost_ns[a]);
}

void gw_actor_metrics_text(gw_t *gw, struct evbuffer *b)
{
    actor_stats_t st;
    if (!gw->actors)
        return;
    actor_system_stats(gw->actors, &st);
    static const char *const names[] = { "enqueue", "dequeue", "wakeups", "parks", "steals",
                                         "batch_limit", "refused" };
    const uint64_t values[] = { st.enqueue, st.dequeue, st.wakeups, st.parks, st.steals,
                                st.batch_limit, st.refused };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        evbuffer_add_printf(b, "# TYPE rtugw_actor_%s_total counter\nrtugw_actor_%s_total %llu\n", names[i],
                            names[i], (unsigned long long)values[i]);
    evbuffer_add_printf(b, "# TYPE rtugw_actor_mailbox_depth_peak gauge\nrtugw_actor_mailbox_depth_peak %llu\n",
                        (unsigned long long)st.depth_peak);
}
