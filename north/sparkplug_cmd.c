/*
 * north/sparkplug_cmd.c -- commands in to the Sparkplug B edge node
 * (sparkplug.c): NCMD and DCMD payloads, decoded (sparkplug_codec.c) and
 * turned into a rebirth or into writes.
 *
 * DCMD metrics, by name or alias, become writes through hooks->write with
 * the value as text (the gateway's tag codec applies type, order and scale,
 * and checks the range); the tag goes out in the next DDATA whether or not
 * it changed. A metric that is unknown, not
 * writable, of the wrong kind, or a payload that does not decode, is
 * ignored, logged at debug level and counted (write_errors, and
 * write_malformed for the payload).
 *
 * NCMD takes Node Control/Rebirth = true only; sparkplug.c does the births
 * (it owns the session and knows whether the node may publish).
 */
#include "north/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    north_t *n;
    north_device_t *d;
    bool rebirth;
} cmd_ctx_t;

static void ignored(north_t *n, const char *what, const char *why)
{
    n->st.write_errors++;
    north_log(n, 3, "mqtt: sparkplug: %s ignored: %s", what, why);
}

static void on_ncmd_metric(void *arg, const sp_metric_t *m)
{
    cmd_ctx_t *c = arg;
    c->n->st.write_requests++;
    if (m->refused) {
        ignored(c->n, "NCMD metric", m->refused);
        return;
    }
    if (m->name && strcmp(m->name, SP_REBIRTH) == 0 && m->vtype == SPV_BOOL) {
        c->n->st.write_ok++;
        c->rebirth |= m->boolean_value;
        return;
    }
    ignored(c->n, "NCMD metric", m->name ? "not a metric this node takes" : "a metric without a name");
}

/* The value of m as the text a tag of datatype dt takes; NULL when m's
 * value is not of that kind. */
static const char *command_text(uint32_t dt, const sp_metric_t *m, char *buf, size_t cap, north_write_t *w)
{
    switch (dt) {
    case SP_BOOLEAN:
        if (m->vtype != SPV_BOOL)
            return NULL;
        w->is_bool = true;
        w->values[0] = m->boolean_value;
        return m->boolean_value ? "true" : "false";
    case SP_STRING:
        if (m->vtype != SPV_STRING || strlen(m->string_value) > 250)
            return NULL;
        w->is_string = true;
        return m->string_value;
    default:
        break;
    }
    /* numbers: integers as the two's complement of the tag's width */
    if (m->vtype == SPV_INT || m->vtype == SPV_LONG) {
        uint64_t raw = m->vtype == SPV_INT ? m->int_value : m->long_value;
        if (dt == SP_INT16 && raw <= UINT16_MAX)
            snprintf(buf, cap, "%d", (int)(int16_t)(uint16_t)raw);
        else if ((dt == SP_INT16 || dt == SP_INT32) && raw <= UINT32_MAX)
            snprintf(buf, cap, "%" PRId32, (int32_t)(uint32_t)raw);   /* a 32-bit -1 for an Int16 is -1 too */
        else if (dt == SP_INT64 || dt == SP_INT16 || dt == SP_INT32)
            snprintf(buf, cap, "%" PRId64, (int64_t)raw);
        else
            snprintf(buf, cap, "%" PRIu64, raw);   /* unsigned, Float, Double: the tag codec checks the range */
        w->values[0] = strtod(buf, NULL);   /* what the text says (a poll group's path reads it) */
        return buf;
    }
    if (m->vtype == SPV_FLOAT || m->vtype == SPV_DOUBLE) {
        double v = m->vtype == SPV_FLOAT ? (double)m->float_value : m->double_value;
        if (!isfinite(v))
            return NULL;
        w->values[0] = v;
        if (m->vtype == SPV_FLOAT) {
            /* Its text is the gateway's to write, with the one number formatter
             * (tags/format.c, which north/ does not link): "0.1", not the
             * 0.100000001 of %.9g, which a fixed-point tag of one decimal
             * refuses and which no other output would print for that value. */
            w->is_float32 = true;
            return "";
        }
        snprintf(buf, cap, "%.17g", v);
        return buf;
    }
    return NULL;
}

static void on_dcmd_metric(void *arg, const sp_metric_t *m)
{
    cmd_ctx_t *c = arg;
    north_t *n = c->n;
    char what[2 * NORTH_NAME_MAX + 16], num[40];
    n->st.write_requests++;
    if (m->refused) {
        ignored(n, "DCMD metric", m->refused);
        return;
    }
    north_tag_t *t = m->name ? values_find_tag(c->d, m->name, 0) : m->has_alias ? values_find_tag(c->d, NULL, m->alias)
                                                                                 : NULL;
    if (!t) {
        ignored(n, "DCMD metric", "no such metric of the device");
        return;
    }
    snprintf(what, sizeof what, "DCMD %s/%s", c->d->name, t->name);
    if (!t->writable) {
        ignored(n, what, "the tag is not writable");
        return;
    }
    if (n->cfg.read_only || !n->hooks.write) {
        ignored(n, what, "this gateway refuses writes ([mqtt] read_only)");
        return;
    }
    north_write_t w = { .uuid = "", .device = c->d->name, .tag = t->name, .count = 1 };
    if (!(w.text = command_text(sparkplug_datatype(t), m, num, sizeof num, &w))) {
        ignored(n, what, "the value is not of the metric's datatype");
        return;
    }
    uint32_t token;
    if (writes_take_slot(n, what, &token) != 0) {
        ignored(n, what, "busy: too many writes waiting for their answer");
        return;
    }
    t->force = true;   /* the result shows in the next DDATA, changed or not */
    n->hooks.write(n->hooks.ctx, token, &w);
}

void sparkplug_write_done(north_t *n, const char *note, int error, const char *message)
{
    if (error == NORTH_WRITE_OK) {
        n->st.write_ok++;
        north_log(n, 3, "mqtt: sparkplug: %s: ok", note);
    } else {
        n->st.write_errors++;
        north_log(n, 1, "mqtt: sparkplug: %s failed: %s", note, message ? message : "error");
    }
}

bool sparkplug_command(north_t *n, bool ncmd, north_device_t *d, const void *payload, size_t len)
{
    cmd_ctx_t c = { .n = n, .d = d };
    if (!ncmd && !d) {
        n->st.write_requests++;
        ignored(n, "DCMD", "no such device");
        return false;
    }
    int rc = len > n->cfg.max_write_bytes ? -EMSGSIZE
             : spc_decode(payload, len, n->cfg.max_write_items, ncmd ? on_ncmd_metric : on_dcmd_metric, &c);
    if (rc != 0) {
        const char *why = rc == -EMSGSIZE ? "larger than max_write_bytes"
                          : rc == -E2BIG ? "more metrics than max_write_items" : "not a Sparkplug B payload";
        n->st.write_requests++;
        n->st.write_malformed++;
        ignored(n, ncmd ? "NCMD" : "DCMD", why);
        return false;
    }
    return c.rebirth;
}
