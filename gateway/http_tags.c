/*
 * gateway/http_tags.c -- the tags over HTTP: GET /tags and /tags/NAME (value,
 * unit, quality, time, age), the tags' part of /status and /metrics, and
 * PUT /tags/NAME, a write to the device.
 *
 * A write is refused before it reaches a bus unless the gateway is not
 * read-only ([tcp] read_only), [http] write_token is set and presented as
 * "Authorization: Bearer TOKEN" (403 otherwise), the tag is writable (403),
 * and its value fits the tag's type after scale and offset (422; refused,
 * never wrapped or clamped). The body is JSON, {"value": V} and nothing
 * after it, parsed by json_parse_request and bounded by [http]
 * max_body_bytes. V is a number, a boolean or
 * a string (a string tag's text, a raw tag's hex words, or any value as
 * text). Integers keep all 64 bits: they go to the codec as text.
 *
 * The request then waits (evhttp lets a reply come later) while the write
 * goes to the bus with this file's own origin. Its one answer arrives on
 * the bus actor's thread and goes to the I/O thread with loop_post: queued
 * from a worker, run at once for a bus pinned to the I/O thread (whose turn
 * runs from its host's own event, never inside an HTTP callback). There it
 * answers the request with the slave's result or exception. A bool in a register is a
 * read-modify-write: fc 3 of the register first, the bit merged, then fc 6.
 * While one is in flight, another write to that register is refused (409)
 * rather than allowed to undo its bit; writes from Modbus TCP clients to
 * the same register in between cannot be seen from here (docs/tags.md).
 */
#include "gateway/internal.h"
#include "json/json.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_BODY_MAX 16384   /* bytes of a PUT body parsed, whatever max_body_bytes allows */

typedef struct tag_write {
    uint64_t id;                  /* index | generation << 16; 0: free */
    struct evhttp_request *req;   /* NULL once its client has gone (http_tags_abandon) */
    unsigned tag;
    unsigned bus, slave;
    tags_write_t w;
    bool rmw;                     /* a read-modify-write (a bool in a register) */
    bool reading;                 /* ... whose read is in flight */
} tag_write_t;

struct gw_http_tags {
    gw_origin_t origin;           /* first: the answers' way back */
    gw_t *gw;
    gw_http_t *http;
    tag_write_t *writes;          /* one per HTTP connection at most */
    _Atomic uint64_t *live;       /* per slot: its id while its client waits (read by bus workers) */
    unsigned n_writes, in_flight;
    uint64_t generation;
};

/* ---- JSON ----------------------------------------------------------------------- */

static void add_str(struct evbuffer *b, const char *s)
{
    char q[JSON_QUOTED_MAX(2 * TAGS_MAX_REGISTERS + 1)];
    json_quote(q, sizeof q, s);
    evbuffer_add(b, q, strlen(q));
}

/* A good (or stale) value as JSON: a number, true/false, or a string. */
static void add_value(struct evbuffer *b, const tags_tag_t *g, const tags_value_t *v)
{
    char text[6 * TAGS_MAX_REGISTERS + 8];
    if (v->quality == TAGS_BAD || tags_format(g, v, text, sizeof text) < 0 ||
        ((g->type == TAGS_FLOAT32 || g->type == TAGS_FLOAT64 || g->scale != 1 || g->offset != 0) &&
         !isfinite(v->eng)))
        evbuffer_add_printf(b, "null");
    else if (g->type == TAGS_STRING || g->type == TAGS_RAW)
        add_str(b, text);
    else
        evbuffer_add(b, text, strlen(text));
}

/* Why a value is bad, as the JSON API spells it. */
static const char *reason_token(tags_reason_t r)
{
    static const char *const tokens[] = { "", "not_read", "exception", "timeout", "port_down", "short" };
    return (unsigned)r < sizeof tokens / sizeof tokens[0] ? tokens[r] : "unknown";
}

/* One tag: its value and quality, and with `full` what it is. */
static void add_tag(struct evbuffer *b, const tags_table_t *t, size_t i, int64_t now_ms, bool full)
{
    const tags_tag_t *g = tags_table_tag(t, i);
    tags_value_t v;
    tags_table_value(t, i, now_ms, &v);
    evbuffer_add_printf(b, "{\"name\":");
    add_str(b, g->name);
    evbuffer_add_printf(b, ",\"device\":");
    add_str(b, tags_table_device_name(t, g->device));
    evbuffer_add_printf(b, ",\"value\":");
    add_value(b, g, &v);
    evbuffer_add_printf(b, ",\"unit\":");
    add_str(b, g->unit);
    evbuffer_add_printf(b, ",\"quality\":\"%s\"", tags_quality_name(v.quality));
    if (v.quality == TAGS_BAD)
        evbuffer_add_printf(b, ",\"reason\":\"%s\"", reason_token(v.reason));
    if (v.reason == TAGS_BAD_EXCEPTION)
        evbuffer_add_printf(b, ",\"exception\":%u", v.exception);
    if (v.time_ms)
        evbuffer_add_printf(b, ",\"timestamp\":%lld,\"age_s\":%.3f", (long long)v.time_ms,
                            (double)(now_ms - v.time_ms) / 1e3);
    else
        evbuffer_add_printf(b, ",\"timestamp\":null,\"age_s\":null");
    if (full) {
        evbuffer_add_printf(b, ",\"table\":\"%s\",\"address\":%u", tags_area_name(g->area), g->address);
        if (g->in_register)
            evbuffer_add_printf(b, ",\"bit\":%u", g->bit);
        evbuffer_add_printf(b, ",\"type\":\"%s\",\"registers\":%u,\"order\":\"%s\",\"scale\":%.17g,"
                               "\"offset\":%.17g,\"deadband\":%.17g,\"writable\":%s,\"interval_ms\":%u,"
                               "\"description\":",
                            tags_type_name(g->type), g->count, tags_order_name(g->order, g->type), g->scale,
                            g->offset, g->deadband, g->writable ? "true" : "false", g->interval_ms);
        add_str(b, g->description);
    }
    evbuffer_add_printf(b, "}");
}

static void reply_json(struct evhttp_request *req, int code, const char *reason, struct evbuffer *b)
{
    if (!req)
        return;   /* an abandoned write's answer: counted by the caller, sent to no one */
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, reason, b);
}

/* {"tag": NAME, "ok": false, "error": WHY}, with the HTTP status that says so. */
static void reply_error(struct evhttp_request *req, int code, const char *reason, const char *tag,
                        const char *why)
{
    struct evbuffer *b = req ? evbuffer_new() : NULL;
    if (!b) {
        if (req)
            evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"tag\":");
    add_str(b, tag ? tag : "");
    evbuffer_add_printf(b, ",\"ok\":false,\"error\":");
    add_str(b, why);
    evbuffer_add_printf(b, "}\n");
    reply_json(req, code, reason, b);
    evbuffer_free(b);
}

static void get_tags(gw_http_tags_t *ht, struct evhttp_request *req, const char *name)
{
    struct evbuffer *b = evbuffer_new();
    int64_t now = gw_wall_ms();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    const tags_table_t *t = gwtags_lock(ht->gw->tags);
    int i = name ? tags_table_find(t, name) : 0;
    if (name && i >= 0)
        add_tag(b, t, (size_t)i, now, true);
    if (!name) {
        evbuffer_add_printf(b, "{\"time\":%lld,\"tags\":[", (long long)now);
        for (size_t k = 0; k < tags_table_count(t); k++) {
            if (k)
                evbuffer_add(b, ",", 1);
            add_tag(b, t, k, now, false);
        }
        evbuffer_add_printf(b, "]}");
    }
    gwtags_unlock(ht->gw->tags);
    evbuffer_add(b, "\n", 1);
    if (i < 0)
        reply_error(req, HTTP_NOTFOUND, "Not Found", name, "no such tag");
    else
        reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

/* ---- /status and /metrics ---------------------------------------------------------- */

void http_tags_status(gw_t *gw, unsigned d, struct evbuffer *b)
{
    unsigned n[3] = { 0, 0, 0 }, count = 0;
    int64_t now = gw_wall_ms();
    const tags_table_t *t = gwtags_lock(gw->tags);
    int td = tags_table_find_device(t, gw->cfg->devices[d].name);
    size_t nt = 0;
    const unsigned *idx = td >= 0 ? tags_table_device_tags(t, (size_t)td, &nt) : NULL;
    for (size_t k = 0; k < nt; k++) {
        tags_value_t v;
        tags_table_value(t, idx[k], now, &v);
        n[v.quality]++;
        count++;
    }
    gwtags_unlock(gw->tags);
    evbuffer_add_printf(b, ",\"tags\":{\"count\":%u,\"good\":%u,\"stale\":%u,\"bad\":%u}", count,
                        n[TAGS_GOOD], n[TAGS_STALE], n[TAGS_BAD]);
}

/* A Prometheus label value: backslash, quote and line feed escaped. */
static void add_label(struct evbuffer *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            evbuffer_add_printf(b, "\\%c", *s);
        else if (*s == '\n')
            evbuffer_add_printf(b, "\\n");
        else
            evbuffer_add(b, s, 1);
    }
}

static void tag_gauge(struct evbuffer *b, const tags_table_t *t, const tags_tag_t *g, const char *metric,
                      double value)
{
    evbuffer_add_printf(b, "rtugw_tag_%s{device=\"", metric);
    add_label(b, tags_table_device_name(t, g->device));
    evbuffer_add_printf(b, "\",tag=\"");
    add_label(b, g->name);
    evbuffer_add_printf(b, "\",unit=\"");
    add_label(b, g->unit);
    evbuffer_add_printf(b, "\"} %.17g\n", value);
}

/* Per tag: its value (numbers and bools; bad ones left out), whether it is
 * good, and its age: three gauges by device, tag and unit. */
static void tag_gauges(gw_t *gw, struct evbuffer *b)
{
    int64_t now = gw_wall_ms();
    const tags_table_t *t = gwtags_lock(gw->tags);
    static const char *const help[3][2] = {
        { "value", "The tag's engineering value (good or stale values of numbers and bools)" },
        { "good", "1 while the tag's value is good, 0 when bad or stale" },
        { "age_seconds", "Seconds since the tag's last answer (good or bad)" },
    };
    for (int m = 0; m < 3; m++) {
        evbuffer_add_printf(b, "# HELP rtugw_tag_%s %s\n# TYPE rtugw_tag_%s gauge\n", help[m][0], help[m][1],
                            help[m][0]);
        for (size_t i = 0; i < tags_table_count(t); i++) {
            const tags_tag_t *g = tags_table_tag(t, i);
            tags_value_t v;
            tags_table_value(t, i, now, &v);
            if (m == 0 && (v.quality == TAGS_BAD || g->type == TAGS_STRING || g->type == TAGS_RAW))
                continue;
            if (m == 2 && !v.time_ms)
                continue;
            tag_gauge(b, t, g, help[m][0], m == 0 ? v.eng : m == 1 ? v.quality == TAGS_GOOD
                                                                   : (double)(now - v.time_ms) / 1e3);
        }
    }
    gwtags_unlock(gw->tags);
}

void http_tags_metrics(gw_t *gw, struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP rtugw_poller_reads Reads in the poll plan (poll groups and tags)\n"
                           "# TYPE rtugw_poller_reads gauge\nrtugw_poller_reads %u\n"
                           "# HELP rtugw_poller_splits_total Reads divided after exception 02 across holes\n"
                           "# TYPE rtugw_poller_splits_total counter\nrtugw_poller_splits_total %llu\n"
                           "# HELP rtugw_tags Tags configured\n# TYPE rtugw_tags gauge\nrtugw_tags %zu\n",
                        poller_read_count(gw->poller), (unsigned long long)poller_splits(gw->poller),
                        tags_table_count(gwtags_defs(gw->tags)));
    if (gw->cfg->http.tag_metrics)
        tag_gauges(gw, b);
}

/* ---- writes ---------------------------------------------------------------------------- */

static tag_write_t *slot_of(gw_http_tags_t *ht, uint64_t id)
{
    tag_write_t *w = &ht->writes[id & 0xFFFF];
    return (id & 0xFFFF) < ht->n_writes && w->id == id ? w : NULL;
}

/* Frees the slot and returns its request, to be answered now: before the
 * answer, since answering a request whose client has gone frees it. */
static struct evhttp_request *release(gw_http_tags_t *ht, tag_write_t *w)
{
    struct evhttp_request *req = w->req;
    if (req)
        http_hold(ht->http, req, false);
    atomic_store_explicit(&ht->live[w - ht->writes], 0, memory_order_relaxed);
    w->id = 0;
    w->req = NULL;
    ht->in_flight--;
    return req;
}

/* A write refused before it reached a bus: counted, and said why. */
static void refuse(gw_http_tags_t *ht, struct evhttp_request *req, int code, const char *reason,
                   const char *tag, const char *why)
{
    gw_count(&ht->gw->http_metrics.tag_writes_refused);
    reply_error(req, code, reason, tag, why);
}

/* The token as "Bearer TOKEN", compared in time that does not depend on where it differs. */
static bool authorized(const char *header, const char *token)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *given = header + 7;
    size_t a = strlen(given), b = strlen(token);
    unsigned diff = a != b;
    for (size_t i = 0; i < a; i++)
        diff |= (unsigned)(uint8_t)given[i] ^ (uint8_t)token[i < b ? i : 0];
    return diff == 0;
}

/* json-c saturates an integer beyond 64 bits to the nearest limit: a limit
 * is believed only when the body spells it, as a whole number. */
static bool spelled(const char *body, const char *digits)
{
    size_t n = strlen(digits);
    for (const char *p = strstr(body, digits); p; p = strstr(p + 1, digits)) {
        bool before = p > body && (p[-1] == '-' || (p[-1] >= '0' && p[-1] <= '9'));
        bool after = strchr("0123456789.eE", p[n]) != NULL && p[n];
        if (!before && !after)
            return true;
    }
    return false;
}

/* The body's value, encoded for the tag. Returns the HTTP status of a refusal, or 0.
 * The body is parsed by the rule MQTT write payloads follow too
 * (json_parse_request): {"value": V} has two structural tokens; a string V
 * holds none that count. */
static int encode_body(const tags_tag_t *g, const char *body, size_t len, tags_write_t *w, char *msg,
                       size_t cap)
{
    char why[96];
    struct json_object *root = json_parse_request(body, len, 4, 2, why, sizeof why), *v = NULL;
    int status = 0;

    if (!root || !json_object_is_type(root, json_type_object) || json_object_object_length(root) != 1 ||
        !json_object_object_get_ex(root, "value", &v)) {
        snprintf(msg, cap, "the body must be a JSON object {\"value\": V}%s%s", root ? "" : ": ", root ? "" : why);
        status = HTTP_BADREQUEST;
    } else if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        status = !isfinite(d) ? (snprintf(msg, cap, "%s is not a finite number",
                                          json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN)), 422)
                 : tags_encode_number(g, d, 0, w, msg, cap) < 0 ? 422 : 0;
    } else if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_boolean)) {
        const char *text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        bool limit = strcmp(text, "-9223372036854775808") == 0 || strcmp(text, "18446744073709551615") == 0;
        if (limit && !spelled(body, text))
            status = (snprintf(msg, cap, "tag '%s': an integer beyond 64 bits does not fit", g->name), 422);
        else
            status = tags_encode_text(g, text, 0, w, msg, cap) < 0 ? 422 : 0;
    } else if (json_object_is_type(v, json_type_string)) {
        const char *text = json_object_get_string(v);
        if (strlen(text) != (size_t)json_object_get_string_len(v))
            status = (snprintf(msg, cap, "the value holds a NUL character"), HTTP_BADREQUEST);
        else
            status = tags_encode_text(g, text, 0, w, msg, cap) < 0 ? 422 : 0;
    } else {
        snprintf(msg, cap, "the value must be a number, a boolean or a string");
        status = HTTP_BADREQUEST;
    }
    json_object_put(root);
    return status;
}

/* Another write in flight to the same registers, one of them a read-modify-write. */
static bool registers(const tags_write_t *w)
{
    return w->function == 6 || w->function == 16;
}

static bool conflicts(const gw_http_tags_t *ht, unsigned bus, unsigned slave, const tags_write_t *w)
{
    for (unsigned i = 0; i < ht->n_writes; i++) {
        const tag_write_t *o = &ht->writes[i];
        bool rmw = w->needs_read || o->rmw;
        if (o->id && rmw && o->bus == bus && o->slave == slave && registers(w) && registers(&o->w) &&
            w->address < o->w.address + o->w.count && o->w.address < w->address + w->count)
            return true;
    }
    return false;
}

/* Sends the slot's next request: the register's read, or the write. */
static int submit(gw_http_tags_t *ht, tag_write_t *s)
{
    gw_request_t q = { .origin = &ht->origin, .slave = (uint8_t)s->slave, .bus = (uint8_t)s->bus,
                       .conn_id = s->id, .t_accept_ns = gw_now_ns() };
    if (s->w.needs_read) {
        uint8_t pdu[5] = { 3, (uint8_t)(s->w.address >> 8), (uint8_t)s->w.address, 0, 1 };
        memcpy(q.pdu, pdu, sizeof pdu);
        q.pdu_len = sizeof pdu;
    } else {
        int n = tags_write_pdu(&s->w, q.pdu, sizeof q.pdu);
        if (n < 0)
            return n;
        q.pdu_len = (uint16_t)n;
        cache_write_begin(ht->gw, s->bus, s->slave, q.pdu, q.pdu_len);
    }
    s->reading = s->w.needs_read;
    int rc = bus_submit(ht->gw->buses[s->bus], &q);
    if (rc != 0 && !s->reading)
        cache_write_end(ht->gw, s->bus, s->slave, q.pdu, q.pdu_len);
    return rc;
}

/* Who may write what: the policy checks, in the order a caller fixes them. */
static bool write_allowed(gw_http_tags_t *ht, struct evhttp_request *req, const char *name)
{
    const config_t *cfg = ht->gw->cfg;
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    const char *why = !cfg->http.write_token[0] ? "writes are off: [http] write_token is not set"
                      : !authorized(auth, cfg->http.write_token) ? "missing or wrong bearer token"
                      : cfg->tcp.read_only ? "the gateway is read-only ([tcp] read_only)" : NULL;
    if (why)
        refuse(ht, req, 403, "Forbidden", name, why);
    return why == NULL;
}

static void put_tag(gw_http_tags_t *ht, struct evhttp_request *req, const char *name)
{
    gw_t *gw = ht->gw;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    char msg[320], *body = NULL;
    tags_write_t w;

    if (!write_allowed(ht, req, name))
        return;
    int i = tags_table_find(gwtags_defs(gw->tags), name);
    const tags_tag_t *g = i >= 0 ? tags_table_tag(gwtags_defs(gw->tags), (size_t)i) : NULL;
    if (!g) {
        refuse(ht, req, HTTP_NOTFOUND, "Not Found", name, "no such tag");
        return;
    }
    if (!g->writable) {
        refuse(ht, req, 403, "Forbidden", name, "the tag is not writable");
        return;
    }
    if (len > WRITE_BODY_MAX || !(body = malloc(len + 1))) {
        refuse(ht, req, HTTP_ENTITYTOOLARGE, "Payload Too Large", name, "the body is too large");
        return;
    }
    evbuffer_copyout(in, body, len);
    body[len] = '\0';
    int status = encode_body(g, body, len, &w, msg, sizeof msg);
    free(body);
    if (status) {
        refuse(ht, req, status, status == 422 ? "Unprocessable Entity" : "Bad Request", name, msg);
        return;
    }
    const config_device_t *dev = &gw->cfg->devices[gwtags_config_device(gw->tags, g)];
    unsigned free_slot = 0;
    while (free_slot < ht->n_writes && ht->writes[free_slot].id)
        free_slot++;
    if (free_slot == ht->n_writes || conflicts(ht, dev->bus, dev->slave, &w)) {
        bool full = free_slot == ht->n_writes;
        refuse(ht, req, full ? 503 : 409, full ? "Service Unavailable" : "Conflict", name,
                    full ? "too many writes in flight" : "a read-modify-write of that register is in flight");
        return;
    }
    tag_write_t *s = &ht->writes[free_slot];
    *s = (tag_write_t){ .id = free_slot | (++ht->generation << 16), .req = req, .tag = (unsigned)i,
                        .bus = dev->bus, .slave = dev->slave, .w = w, .rmw = w.needs_read };
    ht->in_flight++;
    atomic_store_explicit(&ht->live[free_slot], s->id, memory_order_relaxed);
    if (submit(ht, s) != 0) {
        atomic_store_explicit(&ht->live[free_slot], 0, memory_order_relaxed);
        s->id = 0;
        ht->in_flight--;
        refuse(ht, req, 503, "Service Unavailable", name, "the bus refused the request");
        return;
    }
    http_hold(ht->http, req, true);
}

/* The slave's answer to the write: its echo, or the exception, as JSON. */
static void reply_result(gw_http_tags_t *ht, const tag_write_t *s, struct evhttp_request *req,
                         const uint8_t *pdu, size_t len)
{
    const tags_tag_t *g = tags_table_tag(gwtags_defs(ht->gw->tags), s->tag);
    if (len >= 2 && (pdu[0] & 0x80)) {
        static const char *const names[] = { "", "illegal function", "illegal data address",
                                             "illegal data value", "slave device failure" };
        uint8_t code = pdu[1];
        char why[96];
        snprintf(why, sizeof why, "exception %u: %s", code,
                 code < 5 ? names[code] : code == MB_EX_BUSY ? "busy (the bus queue is full)"
                 : code == MB_EX_PATH_UNAVAILABLE ? "gateway path unavailable (port down)"
                 : code == MB_EX_TARGET_FAILED ? "no answer from the device" : "from the device");
        gw_count(&ht->gw->http_metrics.tag_write_failures);
        struct evbuffer *b = evbuffer_new();
        if (b) {
            evbuffer_add_printf(b, "{\"tag\":");
            add_str(b, g->name);
            evbuffer_add_printf(b, ",\"ok\":false,\"exception\":%u,\"error\":", code);
            add_str(b, why);
            evbuffer_add_printf(b, "}\n");
            int status = code == MB_EX_TARGET_FAILED ? 504 : code == MB_EX_BUSY || code == MB_EX_PATH_UNAVAILABLE
                                                                 ? 503 : 502;
            reply_json(req, status, status == 504 ? "Gateway Timeout" : status == 503 ? "Service Unavailable"
                                                                                     : "Bad Gateway", b);
            evbuffer_free(b);
        } else if (req) {
            evhttp_send_error(req, 500, "out of memory");
        }
        return;
    }
    gw_count(&ht->gw->http_metrics.tag_writes);
    struct evbuffer *b = req ? evbuffer_new() : NULL;
    if (!b) {
        if (req)
            evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"tag\":");
    add_str(b, g->name);
    evbuffer_add_printf(b, ",\"ok\":true,\"function\":%u,\"address\":%u,\"count\":%u,\"words\":[", s->w.function,
                        len >= 3 ? (unsigned)(pdu[1] << 8 | pdu[2]) : 0u, s->w.count);
    for (unsigned k = 0; k < s->w.count; k++)
        evbuffer_add_printf(b, k ? ",%u" : "%u", s->w.words[k]);
    evbuffer_add_printf(b, "]}\n");
    reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

/* I/O thread: an answer for slot `id`. */
static void on_write_answer(void *ctx, uint64_t id, uint32_t unused, const uint8_t *pdu, size_t len)
{
    gw_http_tags_t *ht = ctx;
    tag_write_t *s = slot_of(ht, id);
    (void)unused;
    if (!s)
        return;
    if (!s->req && s->reading) {   /* its client has gone before anything was written: no write */
        release(ht, s);
        return;
    }
    if (s->reading && !(len >= 2 && (pdu[0] & 0x80))) {
        const char *name = tags_table_tag(gwtags_defs(ht->gw->tags), s->tag)->name;
        int code = 0;
        const char *why = NULL;
        if (len != 4 || pdu[0] != 3 || pdu[1] != 2) {
            code = 502, why = "the register's read came back malformed";
        } else if (ht->gw->cfg->tcp.read_only) {
            code = 403, why = "the gateway is read-only ([tcp] read_only)";
        } else {
            tags_write_merge(&s->w, (uint16_t)(pdu[2] << 8 | pdu[3]));
            if (submit(ht, s) == 0)
                return;   /* the write's answer comes next */
            code = 503, why = "the bus refused the request";
        }
        gw_count(&ht->gw->http_metrics.tag_write_failures);
        reply_error(release(ht, s), code, code == 502 ? "Bad Gateway" : code == 403 ? "Forbidden"
                                                                    : "Service Unavailable", name, why);
        return;
    }
    tag_write_t done = *s;
    reply_result(ht, &done, release(ht, s), pdu, len);
}

/* origin: on the bus actor's thread; the HTTP request is the I/O thread's. */
static void origin_answer(gw_origin_t *o, const gw_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_http_tags_t *ht = (gw_http_tags_t *)o;
    cache_write_end(ht->gw, req->bus, req->slave, req->pdu, req->pdu_len);   /* a no-op for the read */
    if (loop_post(ht->gw->loop, on_write_answer, ht, req->conn_id, 0, pdu, len) != 0)
        gw_log(ht->gw, CONFIG_LOG_ERROR, "http: cannot queue a tag write's answer (out of memory)");
}

/* origin: on a bus worker, before the request goes on the line. An abandoned
 * write is dropped there (answered 0x0B without line time), as a Modbus TCP
 * client's request is once its connection has gone. */
static bool origin_wanted(gw_origin_t *o, const gw_request_t *req)
{
    gw_http_tags_t *ht = (gw_http_tags_t *)o;
    return atomic_load_explicit(&ht->live[req->conn_id & 0xFFFF], memory_order_relaxed) == req->conn_id;
}

static const gw_origin_ops_t http_tags_origin_ops = { "http-tags", origin_answer, origin_wanted };

/* ---- routing and life ---------------------------------------------------------------- */

bool http_tags_request(gw_http_tags_t *ht, struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool one = strncmp(path, "/tags/", 6) == 0 && path[6];
    if (strcmp(path, "/tags") != 0 && !one)
        return false;
    size_t name_len = 0;
    char *name = one ? evhttp_uridecode(path + 6, 0, &name_len) : NULL;
    if (one && !name) {
        evhttp_send_error(req, 500, "out of memory");
    } else if (one && strlen(name) != name_len) {
        /* %00 decodes to a NUL: as a C string the name would be cut there and
         * another tag's (w_u16%00xyz is not w_u16); no tag name holds one */
        if (cmd == EVHTTP_REQ_PUT)
            gw_count(&ht->gw->http_metrics.tag_writes_refused);
        reply_error(req, HTTP_BADREQUEST, "Bad Request", name, "the tag name holds a NUL byte (%00)");
    } else if (cmd == EVHTTP_REQ_PUT && one) {
        put_tag(ht, req, name);
    } else if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD) {
        get_tags(ht, req, name);
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", one ? "GET, HEAD, PUT" : "GET, HEAD");
        reply_error(req, 405, "Method Not Allowed", name, one ? "GET, HEAD or PUT" : "GET or HEAD (PUT /tags/NAME)");
    }
    free(name);
    return true;
}

unsigned http_tags_in_flight(const gw_http_tags_t *ht)
{
    return ht ? ht->in_flight : 0;
}

gw_http_tags_t *http_tags_new(gw_t *gw, gw_http_t *h)
{
    gw_http_tags_t *ht = calloc(1, sizeof *ht);
    if (!ht)
        return NULL;
    ht->origin.ops = &http_tags_origin_ops;
    ht->gw = gw;
    ht->http = h;
    ht->n_writes = gw->cfg->http.max_connections;
    ht->writes = calloc(ht->n_writes, sizeof *ht->writes);
    ht->live = calloc(ht->n_writes, sizeof *ht->live);
    if (!ht->writes || !ht->live) {
        free(ht->writes);
        free(ht->live);
        free(ht);
        return NULL;
    }
    return ht;
}

/* After evhttp_free: the requests still waiting were freed with their connections. */
void http_tags_free(gw_http_tags_t *ht)
{
    if (!ht)
        return;
    free(ht->writes);
    free(ht->live);
    free(ht);
}

/*
 * The client of a held write has gone (http.c's sweep saw its connection
 * end). The write keeps its slot until the bus answers, since the bus holds
 * the request, but not the client's HTTP connection: that is handed back
 * for closing now, and the answer, when it comes, is counted and goes to no
 * one. A write not yet on the line is dropped by origin_wanted.
 */
struct evhttp_connection *http_tags_abandon(gw_http_tags_t *ht, const struct bufferevent *bev)
{
    for (unsigned i = 0; i < ht->n_writes; i++) {
        tag_write_t *s = &ht->writes[i];
        struct evhttp_connection *evcon = s->id && s->req ? evhttp_request_get_connection(s->req) : NULL;
        if (evcon && evhttp_connection_get_bufferevent(evcon) == bev) {
            s->req = NULL;
            atomic_store_explicit(&ht->live[i], 0, memory_order_relaxed);
            gw_count(&ht->gw->http_metrics.tag_writes_abandoned);
            return evcon;
        }
    }
    return NULL;
}
