/*
 * gateway/north_write.c -- writes in from MQTT and Sparkplug (gateway/north.c
 * has the adapter): a write names a device and a tag. A tag of tags.csv is
 * encoded by the tag codec and written through tag_write.c, the one way a
 * tag is written for HTTP, MQTT and Sparkplug; otherwise the tag is
 * POLLNAME.N and the poll group says the table and the address. Exactly one
 * answer goes back to north for each write.
 */
#include "gateway/north_internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- in: writes ------------------------------------------------------------------------- */

/* "POLLNAME.N" of device -> its group and N. The device is looked at first:
 * a device that does not exist is 1003 whatever the tag's name looks like
 * (a tag name without ".N" used to make it 1004, docs/mqtt.md says 1003). */
static int find_tag(const config_t *cfg, const char *device, const char *tag, unsigned *group, unsigned *index)
{
    bool device_known = false;
    for (unsigned d = 0; d < cfg->device_count && !device_known; d++)
        device_known = strcmp(cfg->devices[d].name, device) == 0;
    if (!device_known)
        return NORTH_WRITE_UNKNOWN_DEVICE;
    const char *dot = strrchr(tag, '.');
    char *end;
    if (!dot || dot == tag || !dot[1])
        return NORTH_WRITE_UNKNOWN_TAG;
    unsigned long n = strtoul(dot + 1, &end, 10);
    if (*end || dot[1] == '-' || dot[1] == '+')
        return NORTH_WRITE_UNKNOWN_TAG;
    for (unsigned i = 0; i < cfg->poll_count; i++) {
        const config_poll_t *g = &cfg->polls[i];
        if (strcmp(cfg->devices[g->device].name, device) == 0 && strlen(g->name) == (size_t)(dot - tag) &&
            strncmp(g->name, tag, (size_t)(dot - tag)) == 0 && n < g->count) {
            *group = i;
            *index = (unsigned)n;
            return 0;
        }
    }
    return NORTH_WRITE_UNKNOWN_TAG;
}

/* A register value: 0..65535, or -32768..-1 as its two's complement. */
static bool register_value(double v, uint16_t *out)
{
    if (!isfinite(v) || v != floor(v) || v < -32768 || v > 65535)
        return false;
    *out = (uint16_t)(v < 0 ? (long)v + 65536 : (long)v);
    return true;
}

/* The request PDU of a write; 0 or the answer code and *why. */
static int write_pdu(const config_poll_t *g, unsigned index, const north_write_t *w, line_request_t *r,
                     const char **why)
{
    unsigned addr = g->address + index;
    uint16_t v;
    if (g->function == 2 || g->function == 4) {
        *why = "not writable: the tag is an input (function 2 or 4)";
        return NORTH_WRITE_NOT_WRITABLE;
    }
    if (w->is_string) {
        *why = "bad value: a poll group's register or coil takes a number or true/false, not a string";
        return NORTH_WRITE_BAD_VALUE;
    }
    if (g->function == 1) {
        if (w->count != 1 || (w->values[0] != 0 && w->values[0] != 1)) {
            *why = "bad value: a coil takes true/false (or 1/0)";
            return NORTH_WRITE_BAD_VALUE;
        }
        uint8_t pdu[5] = { 5, (uint8_t)(addr >> 8), (uint8_t)addr, w->values[0] ? 0xFF : 0, 0 };
        memcpy(r->pdu, pdu, sizeof pdu);
        r->pdu_len = sizeof pdu;
        return 0;
    }
    if (w->is_bool || index + w->count > g->count) {
        *why = w->is_bool ? "bad value: a register takes a number" : "bad value: the list runs past the poll group";
        return NORTH_WRITE_BAD_VALUE;
    }
    if (w->count == 1) {
        if (!register_value(w->values[0], &v)) {
            *why = "bad value: a register takes a whole number -32768..65535";
            return NORTH_WRITE_BAD_VALUE;
        }
        uint8_t pdu[5] = { 6, (uint8_t)(addr >> 8), (uint8_t)addr, (uint8_t)(v >> 8), (uint8_t)v };
        memcpy(r->pdu, pdu, sizeof pdu);
        r->pdu_len = sizeof pdu;
        return 0;
    }
    uint8_t *p = r->pdu;
    p[0] = 16;
    p[1] = (uint8_t)(addr >> 8);
    p[2] = (uint8_t)addr;
    p[3] = 0;
    p[4] = (uint8_t)w->count;
    p[5] = (uint8_t)(2 * w->count);
    for (size_t i = 0; i < w->count; i++) {
        if (!register_value(w->values[i], &v)) {
            *why = "bad value: a register takes a whole number -32768..65535";
            return NORTH_WRITE_BAD_VALUE;
        }
        p[6 + 2 * i] = (uint8_t)(v >> 8);
        p[7 + 2 * i] = (uint8_t)v;
    }
    r->pdu_len = (uint16_t)(6 + 2 * w->count);
    return 0;
}

/* ---- in: writes of tags ------------------------------------------------------------------ */

static const char *exception_text(uint8_t code);

/* A write's answer, to the session running now: a reload that replaced it
 * (north_replace carries the tokens' generation) makes the token stale, and
 * one that stopped MQTT leaves nobody to answer (gateway/north_session.c). */
static void write_done(gw_north_t *gn, uint32_t token, int error, const char *message)
{
    if (gn->north)
        gn->m->write_done(gn->north, token, error, message);
}

/* A tag write's outcome (tag_write.c), on the I/O thread: its answer. */
static void tag_write_done(void *owner, uint64_t token, const tag_write_outcome_t *o)
{
    gw_north_t *gn = owner;
    if (o->malformed_read)
        write_done(gn, (uint32_t)token, NORTH_WRITE_BAD_VALUE, "the register's read came back malformed");
    else if (o->exception)
        write_done(gn, (uint32_t)token, o->exception, exception_text(o->exception));
    else if (!o->confirmed || o->asked != o->tag)   /* through an inverse: the computed tag's value comes with its data */
        write_done(gn, (uint32_t)token, NORTH_WRITE_OK, "ok");
    else {   /* confirm_write: the answer carries what the device holds, as data messages write it */
        const tags_tag_t *g = tags_table_tag(gw_tags_defs(gn->gw->tags), o->tag);
        tags_value_t v;
        north_value_t nv;
        char err[32], text[6 * TAGS_MAX_REGISTERS + 8], *at = text;
        tag_write_read_value(g, o, &v);
        gw_north_tag_value(g, &v, &nv, err, sizeof err, &at, text + sizeof text);
        if (gn->north)
            gn->m->write_done_value(gn->north, (uint32_t)token, &nv);
    }
}

/* A tag of tags.csv: true when w names one of the device (answered here). */
static bool tag_write(gw_north_t *gn, uint32_t token, const north_write_t *w)
{
    gw_t *gw = gn->gw;
    const tags_table_t *defs = gw_tags_defs(gw->tags);
    int i = tags_table_find(defs, w->tag);
    const tags_tag_t *g = i >= 0 ? tags_table_tag(defs, (size_t)i) : NULL;
    char msg[320];
    tags_write_t tw;

    if (!g || strcmp(tags_table_device_name(defs, g->device), w->device) != 0)
        return false;
    if (!g->writable) {
        write_done(gn, token, NORTH_WRITE_NOT_WRITABLE,
                          g->computed ? "not writable: the tag is computed (expr) and declares no inverse"
                          : g->area == TAGS_AREA_DISCRETE || g->area == TAGS_AREA_INPUT
                              ? "not writable: the tag is an input (discrete input or input register)"
                              : "not writable: the tag is not marked writable in the tag file");
        return true;
    }
    int rc = w->text ? tags_encode_text(g, w->text, 0, &tw, msg, sizeof msg) : -EINVAL;
    if (rc != 0) {
        if (!w->text)
            snprintf(msg, sizeof msg, "a tag takes one value, not a list");
        char why[340];
        snprintf(why, sizeof why, "bad value: %s", msg);
        write_done(gn, token, NORTH_WRITE_BAD_VALUE, why);
        return true;
    }
    const config_device_t *dev = &gw->cfg->devices[gw_tags_config_device(gw->tags, g)];
    rc = tag_write_begin(gw->tag_writes, (unsigned)i, dev->bus, dev->slave, &tw, tag_write_done, gn, token, msg,
                         sizeof msg);
    char why[340];
    snprintf(why, sizeof why, "%s: %s",
             rc == TAG_WRITE_OVERLAP || rc == TAG_WRITE_FULL || rc == TAG_WRITE_INVERSE_INPUT ? "busy"
             : rc == TAG_WRITE_LISTEN_ONLY ? "refused" : rc == TAG_WRITE_UNAVAILABLE ? "unavailable" : "bad value",
             msg);
    if (rc == TAG_WRITE_OVERLAP || rc == TAG_WRITE_FULL || rc == TAG_WRITE_INVERSE_INPUT)
        write_done(gn, token, NORTH_WRITE_BUSY, why);
    else if (rc == TAG_WRITE_INVERSE_FAILED || rc == TAG_WRITE_INVERSE_RANGE)
        write_done(gn, token, NORTH_WRITE_BAD_VALUE, why);
    else if (rc == TAG_WRITE_COMPUTED)
        write_done(gn, token, NORTH_WRITE_NOT_WRITABLE, why);
    else if (rc != TAG_WRITE_QUEUED)
        write_done(gn, token, MB_EX_PATH_UNAVAILABLE, why);
    return true;
}

/* north's write hook, on the I/O thread. */
void gw_north_on_write(void *ctx, uint32_t token, const north_write_t *w)
{
    gw_north_t *gn = ctx;
    gw_t *gw = gn->gw;
    unsigned group, index;
    const char *why = NULL;
    north_write_t as_text;
    char num[64];

    if (w->is_float32) {
        /* A float32 from north (a Sparkplug Float) as text by the one number
         * formatter, in float32 digits: what every output prints for that
         * value, and what a fixed-point tag's exact decimal parse accepts. */
        tags_tag_t f32 = { .type = TAGS_FLOAT32, .scale = 1.0, .offset = 0.0 };
        tags_value_t v = { .eng = w->values[0], .raw.f = w->values[0] };
        if (tags_format(&f32, &v, num, sizeof num) < 0)
            num[0] = '\0';
        as_text = *w;
        as_text.text = num;
        w = &as_text;
    }
    if (tag_write(gn, token, w))
        return;
    int rc = find_tag(gw->cfg, w->device, w->tag, &group, &index);
    if (rc) {
        write_done(gn, token, rc,
                         rc == NORTH_WRITE_UNKNOWN_DEVICE ? "unknown device" : "unknown tag (POLLNAME.N of the device)");
        return;
    }
    const config_poll_t *g = &gw->cfg->polls[group];
    const config_device_t *dev = &gw->cfg->devices[g->device];
    line_request_t r = { .origin = &gn->origin, .slave = (uint8_t)dev->slave, .bus = (uint8_t)dev->bus,
                       .conn_id = token, .t_accept_ns = gw_now_ns() };
    if ((rc = write_pdu(g, index, w, &r, &why)) != 0) {
        write_done(gn, token, rc, why);
        return;
    }
    if (gw_submit(gw, &r) != 0) {
        write_done(gn, token, MB_EX_PATH_UNAVAILABLE, "unavailable: the bus took no request");
    }
}

static const char *exception_text(uint8_t code)
{
    switch (code) {
    case 1: return "exception 01: illegal function";
    case 2: return "exception 02: illegal data address";
    case 3: return "exception 03: illegal data value";
    case 4: return "exception 04: slave device failure";
    case 6: return "exception 06: busy";
    case MB_EX_PATH_UNAVAILABLE: return "exception 0A: gateway path unavailable (port down)";
    case MB_EX_TARGET_FAILED: return "exception 0B: no answer from the device (timeout)";
    default: return "exception from the device";
    }
}

/* On the I/O thread: the bus's answer to a write. */
static void on_write_answer(void *ctx, uint64_t token, uint32_t unused, const uint8_t *pdu, size_t len)
{
    gw_north_t *gn = ctx;
    (void)unused;
    if (len >= 2 && (pdu[0] & 0x80))
        write_done(gn, (uint32_t)token, pdu[1], exception_text(pdu[1]));
    else
        write_done(gn, (uint32_t)token, NORTH_WRITE_OK, "ok");
}

/* origin: on the bus actor's thread (a worker, or the I/O thread itself);
 * north is the I/O thread's, reached in post order. */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_north_t *gn = (gw_north_t *)o;
    if (loop_post(gn->gw->loop, on_write_answer, gn, req->conn_id, req->seq, pdu, len) != 0)
        gw_log(gn->gw, CONFIG_LOG_ERROR, "mqtt: cannot queue a write answer (out of memory)");
}

const line_origin_ops_t gw_north_origin_ops = { "mqtt", origin_answer, NULL };


/* ---- in: the configuration (remote_config) ----------------------------------------------- */

/* config/set: the API's one write path (gw->config_put: check, atomic
 * write, live reload), so MQTT applies a change exactly as PUT /api/config. */
int gw_north_config_set(void *ctx, const char *if_match, const char *text, size_t len, char **answer)
{
    gw_north_t *gn = ctx;
    gw_t *gw = gn->gw;
    struct evbuffer *b = evbuffer_new();
    char *copy = malloc(len + 1);
    int status = 500;
    *answer = NULL;
    if (b && copy && gw->config_put && gw->opt.config_path) {
        memcpy(copy, text, len);
        copy[len] = 0;
        gn->in_hook++;   /* a reload it makes replaces north after this hook has returned */
        status = gw->config_put(gw, if_match, copy, len, b);   /* takes copy */
        gn->in_hook--;
        copy = NULL;
        size_t n = evbuffer_get_length(b);
        if ((*answer = malloc(n + 1))) {
            evbuffer_copyout(b, *answer, n);
            (*answer)[n] = 0;
        }
    } else if (!gw->opt.config_path) {
        *answer = strdup("{\"error\":\"the daemon runs without a configuration file\"}");
    }
    free(copy);
    if (b)
        evbuffer_free(b);
    return status;
}

#define GWNORTH_CONFIG_MAX (16u << 20)   /* as the API: a larger file is not served */

int gw_north_config_get(void *ctx, char revision[17], char *restart_needed, size_t cap, char **text, size_t *len)
{
    gw_north_t *gn = ctx;
    gw_t *gw = gn->gw;
    revision[0] = 0;
    snprintf(restart_needed, cap, "%s", gw->restart_needed);
    if (!gw->opt.config_path)
        return -1;
    config_file_revision(gw->opt.config_path, revision);
    if (!text)
        return revision[0] ? 0 : -1;
    FILE *f = fopen(gw->opt.config_path, "rb");
    char *buf = f ? malloc(GWNORTH_CONFIG_MAX + 1) : NULL;
    size_t n = buf ? fread(buf, 1, GWNORTH_CONFIG_MAX + 1, f) : 0;
    bool ok = buf && !ferror(f) && n <= GWNORTH_CONFIG_MAX;
    if (f)
        fclose(f);
    if (!ok) {
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}
