/*
 * gateway/north_session.c -- the MQTT session's life in the daemon: started
 * with [mqtt], stopped and started again by a reload that changed it.
 *
 * Who owns what: the daemon owns the adapter (gw_north_t, gw->north) from
 * start to stop, whether [mqtt] is there or not, so the poller's subscriber
 * and the listen-only buses hold one pointer that never changes. The
 * adapter owns the session (north_t, gn->north), which only the I/O thread
 * touches: it is created, replaced and freed here, on that thread. The
 * other threads (the poller, a listen-only bus) read only gn->on, and post
 * to the I/O thread, which drops a post when no session runs.
 *
 * A reload whose [mqtt] differs (daemon/control.c compares; every key
 * counts, Sparkplug's included):
 *   - removed: the session stops as the daemon's stop ends it (writes open
 *     answered "stopping", NDEATH or the offline status, DISCONNECT, the
 *     spool closed with what is not acknowledged still in it);
 *   - added: a session starts as at the daemon's start;
 *   - changed: north_replace (north/replace.c: what carries over, and the
 *     argument for each publication); then the new session is told what a
 *     start tells it: the configuration's revision and every device's tags
 *     (Sparkplug: NBIRTH at CONNACK with the next bdSeq, each device's
 *     DBIRTH with its next values). The devices' online states start over
 *     as at a start (not known), so the first answer of each republishes
 *     its status on the new topics.
 * Nothing on the I/O thread runs between the stop and the start (one
 * call), so no value handed over meets no session; values posted by the
 * poller during the swap are taken by the new session from the loop, and
 * the tags pending in a device's poll stay pending (the adapter's), so a
 * poll cut by the swap goes out whole on the new session. With publish =
 * change the new session has no values yet: every tag goes out with its
 * next poll, so a subscriber of the new topics gets a full set.
 *
 * A config/set over MQTT reloads from inside north's own hook: the swap
 * then waits for the hook to return (ev_swap), since the session that
 * called it is the one replaced.
 */
#include "gateway/gateway.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/north_internal.h"

static void log_hook(void *ctx, int level, const char *msg)
{
    gw_north_t *gn = ctx;
    gw_log(gn->gw, (config_log_t)level, "%s", msg);
}

static void describe(gw_north_t *gn, const north_config_t *m, const char *how)
{
    gw_log(gn->gw, CONFIG_LOG_INFO, "mqtt: %s%s:%u%s as %s, topics %s/%s/..., qos %u%s%s", how, m->host, m->port,
           m->tls ? " (tls)" : "", m->client_id, m->topic_prefix, m->gateway, m->qos,
           m->spool_dir[0] ? ", spool " : "", m->spool_dir);
}

/* What a start tells a new session before any value (and a swap the same). */
static int announce(gw_north_t *gn)
{
    memset(gn->device_up, -1, gn->n_devices + 1);
    gn->m->set_revision(gn->north, gn->revision);
    return gw_north_define_devices(gn);
}

int gw_north_session_start(gw_north_t *gn, const north_config_t *cfg, char *err, size_t errcap)
{
    north_hooks_t hooks = { .ctx = gn, .log = log_hook, .write = gw_north_on_write,
                            .config_set = gw_north_config_set, .config_get = gw_north_config_get };
    /* a message's scratch, the first time a session runs (a daemon without
     * [mqtt] has none of it); kept until the daemon stops */
    if (!gn->values && (!(gn->values = calloc(GWNORTH_BATCH, sizeof *gn->values)) ||
                        !(gn->names = calloc(GWNORTH_BATCH, sizeof *gn->names)) ||
                        !(gn->errors = calloc(GWNORTH_BATCH, sizeof *gn->errors)) ||
                        !(gn->text = malloc(GWNORTH_TEXT_BYTES)))) {
        free(gn->values);
        free(gn->names);
        free(gn->errors);
        gn->values = NULL;
        gn->names = NULL;
        gn->errors = NULL;
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    if ((!gn->m && !(gn->m = north_module_load(RTUGW_MODULEDIR, err, errcap))) ||
        !(gn->north = gn->m->create(loop_base(gn->gw->loop), cfg, &hooks, err, errcap)))
        return -1;
    if (announce(gn) != 0) {
        snprintf(err, errcap, "mqtt: cannot announce the tags (out of memory, or a name that cannot be a topic level)");
        gw_north_session_stop(gn);
        return -1;
    }
    atomic_store(&gn->on, true);
    describe(gn, cfg, "");
    return 0;
}

void gw_north_session_stop(gw_north_t *gn)
{
    atomic_store(&gn->on, false);
    if (gn->north)
        gn->m->destroy(gn->north);
    gn->north = NULL;
}

/* want NULL: [mqtt] removed. 0, or -1 with err (want could not start: the
 * settings before run again where they can, else none). */
static int swap(gw_north_t *gn, const north_config_t *want, char *err, size_t errcap)
{
    err[0] = 0;
    if (!want) {
        if (gn->north)
            gw_log(gn->gw, CONFIG_LOG_INFO, "mqtt: [mqtt] removed: the session stops");
        gw_north_session_stop(gn);
        return 0;
    }
    if (!gn->north)
        return gw_north_session_start(gn, want, err, errcap);
    bool kept_old = false;
    gn->north = gn->m->replace(gn->north, want, err, errcap, &kept_old);
    if (!gn->north) {
        atomic_store(&gn->on, false);
        return -1;
    }
    if (announce(gn) != 0)
        gw_log(gn->gw, CONFIG_LOG_ERROR, "mqtt: cannot announce the tags to the new session (out of memory)");
    if (kept_old)
        return -1;
    describe(gn, want, "reload: now ");
    return 0;
}

static void on_swap(evutil_socket_t fd, short what, void *arg)
{
    gw_north_t *gn = arg;
    char err[320];
    (void)fd;
    (void)what;
    if (swap(gn, gn->swap_on ? &gn->swap_cfg : NULL, err, sizeof err) == 0)
        return;
    gw_log(gn->gw, CONFIG_LOG_ERROR, "mqtt: reload: %s; %s", err,
           gn->north ? "the settings before run again" : "MQTT is off until a reload that can start it");
    /* the running copy says what runs, so the next reload tries the file's again */
    gn->gw->cfg->mqtt = gn->swap_was;
    gn->gw->cfg->mqtt_enabled = gn->north != NULL;
}

int gw_north_reload(gw_north_t *gn, const north_config_t *want, char *err, size_t errcap)
{
    err[0] = 0;
    if (!gn->in_hook)
        return swap(gn, want, err, errcap);
    if (!gn->ev_swap && !(gn->ev_swap = evtimer_new(loop_base(gn->gw->loop), on_swap, gn))) {
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    gn->swap_on = want != NULL;
    gn->swap_was = gn->gw->cfg->mqtt;   /* the caller takes want into it on our 0 */
    if (want)
        gn->swap_cfg = *want;
    event_active(gn->ev_swap, EV_TIMEOUT, 1);
    return 0;
}

bool gw_north_running(const gw_north_t *gn)
{
    return gn && gn->north;
}
