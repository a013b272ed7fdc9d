/*
 * north/north.c -- the client as its user sees it: start, stop, values,
 * device status, stats. The parts are in north/internal.h.
 */
#include "north/internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <mosquitto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void north_log(north_t *n, int level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    if (!n->hooks.log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    n->hooks.log(n->hooks.ctx, level, msg);
}

uint64_t north_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t north_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* The first line of password_file, so the password is in no config file. */
static int read_password(north_t *n, char *err, size_t errcap)
{
    FILE *f = fopen(n->cfg.password_file, "r");
    if (!f) {
        snprintf(err, errcap, "[mqtt] password_file = '%s': %s", n->cfg.password_file, strerror(errno));
        return -1;
    }
    if (!fgets(n->password, sizeof n->password, f))
        n->password[0] = 0;
    fclose(f);
    n->password[strcspn(n->password, "\r\n")] = 0;
    return 0;
}

static void on_sync(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    (void)fd;
    (void)what;
    spool_sync(n->spool, n->seq + 1);
    if (spool_last_error(n->spool)[0])
        north_log(n, 3, "mqtt: spool: %s", spool_last_error(n->spool));
}

static int start_spool(north_t *n, char *err, size_t errcap)
{
    uint64_t next_seq = 1;
    if (spool_open(n, n->cfg.spool_dir, n->cfg.spool_max_bytes, &n->spool, &next_seq, err, errcap) != 0)
        return -1;
    n->seq = next_seq - 1;
    spool_stats_t st;
    spool_get_stats(n->spool, &st);
    if (st.records)
        north_log(n, 2, "mqtt: spool %s: %llu publications from before the restart go out first", n->cfg.spool_dir,
                  (unsigned long long)st.records);
    /* fsync_ms = 0 syncs after every message; the acked mark is still kept once a second. */
    unsigned ms = n->cfg.spool_fsync_ms ? n->cfg.spool_fsync_ms : 1000;
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    n->ev_sync = event_new(n->base, -1, EV_PERSIST, on_sync, n);
    if (!n->ev_sync || event_add(n->ev_sync, &tv) != 0) {
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    return 0;
}

/* What a predecessor hands over (north_replace), before the first CONNECT:
 * the numbers go on from it, its publications go in ahead of anything new. */
static void take_carry(north_t *n, const north_carry_t *c)
{
    n->st = c->st;
    n->st.connected = 0;
    if (c->seq > n->seq)   /* a spool's own count may be behind (another spool_dir) */
        n->seq = c->seq;
    if (n->sp && c->has_bdseq)
        sparkplug_set_bdseq_next(n, c->bdseq_next);
    n->next_gen = c->next_gen;
    for (const north_msg_t *m = c->head; m; m = m->next)
        queue_publish(n, msg_topic(m), msg_payload(m), m->payload_len, m->qos, m->retain, m->seq);
}

north_t *north_new(struct event_base *base, const north_config_t *cfg, const north_hooks_t *hooks, char *err,
                   size_t errcap)
{
    return north_start(base, cfg, hooks, NULL, err, errcap);
}

north_t *north_start(struct event_base *base, const north_config_t *cfg, const north_hooks_t *hooks,
                     const north_carry_t *carry, char *err, size_t errcap)
{
    north_t *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(err, errcap, "mqtt: out of memory");
        return NULL;
    }
    mosquitto_lib_init();
    n->cfg = *cfg;
    n->hooks = *hooks;
    n->base = base;
    n->sock = -1;
    n->rng = (north_mono_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    snprintf(n->topic_status, sizeof n->topic_status, "%s/%s/status", cfg->topic_prefix, cfg->gateway);
    snprintf(n->topic_write, sizeof n->topic_write, "%s/%s/write", cfg->topic_prefix, cfg->gateway);
    snprintf(n->topic_response, sizeof n->topic_response, "%s/%s/write/response", cfg->topic_prefix, cfg->gateway);
    bool ok = (!cfg->password_file[0] || read_password(n, err, errcap) == 0) &&
              (!cfg->spool_dir[0] || start_spool(n, err, errcap) == 0) &&
              (cfg->format != NORTH_FORMAT_SPARKPLUG || sparkplug_start(n, err, errcap) == 0) && values_start(n) == 0;
    if (ok && carry)
        take_carry(n, carry);
    if (!ok || remote_start(n, err, errcap) != 0 || client_start(n, err, errcap) != 0) {
        if (!err[0])
            snprintf(err, errcap, "mqtt: out of memory");
        north_free(n);
        return NULL;
    }
    return n;
}

void north_free(north_t *n)
{
    if (!n)
        return;
    writes_stop(n);
    client_stop(n);
    if (n->ev_sync)
        event_free(n->ev_sync);
    spool_close(n->spool, n->seq + 1);
    queue_free(n);
    values_free(n);
    sparkplug_free(n);
    remote_free(n);
    memset(n->password, 0, sizeof n->password);
    free(n);
    mosquitto_lib_cleanup();
}

int north_publish(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *values, size_t count)
{
    return values_publish(n, device, timestamp_ms, values, count);
}

int north_define_device(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                        const north_device_opts_t *opts)
{
    return values_define_device(n, device, defs, count, opts);
}

void north_set_revision(north_t *n, const char *revision)
{
    snprintf(n->revision, sizeof n->revision, "%s", revision ? revision : "");
}

void north_define_done(north_t *n)
{
    values_define_done(n);
}

int north_device_status(north_t *n, const char *device, bool online, const char *reason, uint64_t timestamp_ms)
{
    char topic[NORTH_PREFIX_MAX + 2 * NORTH_NAME_MAX + 16];
    if (!device[0] || strlen(device) >= NORTH_NAME_MAX || strpbrk(device, "/+#"))
        return -EINVAL;
    if (n->sp)
        return sparkplug_device_status(n, device, online, timestamp_ms);   /* DDEATH, or DBIRTH to come */
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return -ENOMEM;
    evbuffer_add_printf(b, "{\"online\":%s,\"timestamp\":%llu,\"gateway\":", online ? "true" : "false",
                        (unsigned long long)timestamp_ms);
    values_add_quoted(b, n->cfg.gateway);
    evbuffer_add_printf(b, ",\"device\":");
    values_add_quoted(b, device);
    evbuffer_add_printf(b, ",\"reason\":");
    if (reason)
        values_add_quoted(b, reason);
    else
        evbuffer_add_printf(b, "null");
    evbuffer_add(b, "}", 1);
    snprintf(topic, sizeof topic, "%s/%s/%s/status", n->cfg.topic_prefix, n->cfg.gateway, device);
    size_t len = evbuffer_get_length(b);
    const unsigned char *p = evbuffer_pullup(b, -1);
    int rc = p ? queue_publish(n, topic, p, len, (int)n->cfg.status_qos, true, 0) : -ENOMEM;
    evbuffer_free(b);
    return rc;
}

void north_get_stats(const north_t *n, north_stats_t *st)
{
    *st = n->st;
    st->buffered = n->q.count;
    st->buffered_bytes = n->q.bytes;
    st->seq = n->sp ? sparkplug_seq(n) : n->seq;
    if (n->spool) {
        spool_stats_t sp;
        spool_get_stats(n->spool, &sp);
        st->spooled = sp.records;
        st->spool_bytes = sp.bytes;
        st->dropped += sp.dropped;
        st->spool_damaged = sp.damaged;
    }
}
