/*
 * web/http_tags.c -- the tags over HTTP: GET /tags and /tags/NAME (value,
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
 * goes to the device through tag_write.c, the one way a tag is written for
 * HTTP, MQTT and Sparkplug alike: its table of writes in flight, its
 * overlap rule (a write that touches a register of a read-modify-write in
 * flight, or is one, is refused: 409 here), the read-modify-write of a bool
 * in a register. Its outcome comes back on the I/O thread (write_done) and
 * answers the request with the slave's result or exception. Writes from
 * Modbus TCP clients to the same register in between cannot be seen from
 * here (docs/tags.md).
 */
#include "web/internal.h"
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

struct gw_http_tags {
    gw_t *gw;
    gw_http_t *http;
    http_tags_list_t *list;      /* GET /tags (http_tags_list.c) */
    /* /status's tag counts per configured device, as of change number
     * counts_seq of table generation counts_gen (http_tags_seq) */
    unsigned (*counts)[4];       /* good, bad, stale, count */
    unsigned n_counts;
    uint64_t counts_seq;
    uint32_t counts_gen;
    const config_t *counts_cfg;
};

/* ---- JSON ----------------------------------------------------------------------- */

void http_tags_reply_json(struct evhttp_request *req, int code, const char *reason, struct evbuffer *b)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, reason, b);
}

/* A buffer for req's answer; NULL when there is no one to answer (an
 * abandoned write's outcome) or no memory (then req is answered 500). */
static struct evbuffer *reply_buffer(struct evhttp_request *req)
{
    struct evbuffer *b = req ? evbuffer_new() : NULL;
    if (req && !b)
        evhttp_send_error(req, 500, "out of memory");
    return b;
}

/* {"tag": NAME, "ok": false, "error": WHY}, with the HTTP status that says so. */
void http_tags_reply_error(struct evhttp_request *req, int code, const char *reason, const char *tag,
                           const char *why)
{
    struct evbuffer *b = reply_buffer(req);
    if (!b)
        return;
    evbuffer_add_printf(b, "{\"tag\":");
    http_json_str(b, tag ? tag : "");
    evbuffer_add_printf(b, ",\"ok\":false,\"error\":");
    http_json_str(b, why);
    evbuffer_add_printf(b, "}\n");
    http_tags_reply_json(req, code, reason, b);
    evbuffer_free(b);
}

static void get_tags(gw_http_tags_t *ht, struct evhttp_request *req, const char *name)
{
    if (!name) {
        http_tags_list_get(ht->list, req);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    int64_t now = gw_wall_ms();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    const tags_table_t *t = gw_tags_lock(gw_tags(ht->gw));
    int i = tags_table_find(t, name);
    if (i >= 0)
        http_tags_add_tag(b, t, (size_t)i, now, true);
    gw_tags_unlock(gw_tags(ht->gw));
    evbuffer_add(b, "\n", 1);
    if (i < 0)
        http_tags_reply_error(req, HTTP_NOTFOUND, "Not Found", name, "no such tag");
    else
        http_tags_reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

/* ---- /status and /metrics ---------------------------------------------------------- */

/*
 * /status's tag counts (good, stale, bad per device) are a function of what
 * the change numbers cover (value and quality; stale once swept), so they
 * are counted again only when the table's number (or the table, or the
 * configuration) moved since the last count: a /status of a gateway whose
 * 10,000 tags did not change reads no tag. Returns the number, swept, that
 * /status's ETag carries.
 */
uint64_t http_tags_seq(gw_http_tags_t *ht)
{
    gw_t *gw = ht->gw;
    int64_t now = gw_wall_ms();
    tags_table_t *t = gw_tags_lock(gw_tags(gw));
    tags_table_sweep(t, now);
    uint64_t seq = tags_table_seq(t);
    uint32_t gen = gw_tags_generation(gw_tags(gw));
    if (ht->counts && seq == ht->counts_seq && gen == ht->counts_gen && gw_config(gw) == ht->counts_cfg &&
        gw_config(gw)->device_count == ht->n_counts) {
        gw_tags_unlock(gw_tags(gw));
        return seq;
    }
    unsigned (*counts)[4] = calloc(gw_config(gw)->device_count + 1, sizeof *counts);
    for (unsigned d = 0; counts && d < gw_config(gw)->device_count; d++) {
        int td = tags_table_find_device(t, gw_config(gw)->devices[d].name);
        size_t nt = 0;
        const unsigned *idx = td >= 0 ? tags_table_device_tags(t, (size_t)td, &nt) : NULL;
        for (size_t k = 0; k < nt; k++) {
            tags_value_t v;
            char text[8];
            tags_table_value(t, idx[k], now, &v);
            http_json_quality(tags_table_tag(t, idx[k]), &v, text);
            counts[d][v.quality]++;
            counts[d][3]++;
        }
    }
    gw_tags_unlock(gw_tags(gw));
    free(ht->counts);
    ht->counts = counts;
    ht->n_counts = counts ? gw_config(gw)->device_count : 0;
    ht->counts_seq = seq;
    ht->counts_gen = gen;
    ht->counts_cfg = gw_config(gw);
    return seq;
}

/* After http_tags_seq, in the same callback. */
void http_tags_status(gw_http_tags_t *ht, unsigned d, struct evbuffer *b)
{
    const unsigned zero[4] = { 0, 0, 0, 0 }, *n = d < ht->n_counts ? ht->counts[d] : zero;
    evbuffer_add_printf(b, ",\"tags\":{\"count\":%u,\"good\":%u,\"stale\":%u,\"bad\":%u}", n[3],
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
    const tags_table_t *t = gw_tags_lock(gw_tags(gw));
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
    gw_tags_unlock(gw_tags(gw));
}

void http_tags_metrics(gw_t *gw, struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP rtugw_poller_reads Reads in the poll plan (poll groups and tags)\n"
                           "# TYPE rtugw_poller_reads gauge\nrtugw_poller_reads %u\n"
                           "# HELP rtugw_poller_splits_total Reads divided after exception 02 across holes\n"
                           "# TYPE rtugw_poller_splits_total counter\nrtugw_poller_splits_total %llu\n"
                           "# HELP rtugw_tags Tags configured\n# TYPE rtugw_tags gauge\nrtugw_tags %zu\n"
                           "# HELP rtugw_tag_writes_in_flight Tag writes (HTTP, MQTT, Sparkplug) waiting for their "
                           "slave, of at most rtugw_tag_writes_max\n# TYPE rtugw_tag_writes_in_flight gauge\n"
                           "rtugw_tag_writes_in_flight %u\n# HELP rtugw_tag_writes_max Tag writes that may be in "
                           "flight: [http] max_connections + 64\n# TYPE rtugw_tag_writes_max gauge\n"
                           "rtugw_tag_writes_max %u\n",
                        poller_read_count(gw_poller(gw)), (unsigned long long)poller_splits(gw_poller(gw)),
                        tags_table_count(gw_tags_defs(gw_tags(gw))), tag_writes_in_flight(gw_tag_writes(gw)),
                        tag_writes_capacity(gw_tag_writes(gw)));
    evbuffer_add_printf(b, "# HELP rtugw_tag_write_readbacks_total Tag writes read back after the slave's echo "
                           "(confirm_write), by what was read: same as written, differs (the slave clamped or "
                           "refused part), failed\n# TYPE rtugw_tag_write_readbacks_total counter\n");
    static const char *const results[] = { "same", "differs", "failed" };
    for (int r = 0; r < 3; r++)
        evbuffer_add_printf(b, "rtugw_tag_write_readbacks_total{result=\"%s\"} %llu\n", results[r],
                            (unsigned long long)tag_writes_readbacks(gw_tag_writes(gw), r));
    if (gw_config(gw)->http.tag_metrics)
        tag_gauges(gw, b);
}

/* ---- writes ---------------------------------------------------------------------------- */

/* A write refused before it reached a bus: counted, and said why. */
static void refuse(gw_http_tags_t *ht, struct evhttp_request *req, int code, const char *reason,
                   const char *tag, const char *why)
{
    web_count(ht->gw, tag_writes_refused);
    http_tags_reply_error(req, code, reason, tag, why);
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
        /* as the body spells it (json-c keeps a parsed number's text): a
         * fixed-point tag rounds on the decimal digits, 4.0005 at three
         * digits is 4001, where the double 4.0005 times 1000 is 4000.4999999999995;
         * every other type reads the text back to the same double */
        double d = json_object_get_double(v);
        const char *text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        status = !isfinite(d) ? (snprintf(msg, cap, "%s is not a finite number", text), 422)
                 : tags_encode_text(g, text, 0, w, msg, cap) < 0 ? 422 : 0;
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

static void write_done(void *owner, uint64_t cookie, const tag_write_outcome_t *o);

/* Who may write what: the policy checks, in the order a caller fixes them. */
static bool write_allowed(gw_http_tags_t *ht, struct evhttp_request *req, const char *name)
{
    const config_t *cfg = gw_config(ht->gw);
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    const char *why;
    if (cfg->http.user_count) {
        /* users: an operator or an admin (a session, or the write_token) */
        if (!web_auth_require(ht->gw, req, ROLE_OPERATOR)) {
            web_count(ht->gw, tag_writes_refused);
            return false;
        }
        why = cfg->tcp.read_only ? "the gateway is read-only ([tcp] read_only)" : NULL;
    } else {
        why = !cfg->http.write_token[0] ? "writes are off: [http] write_token is not set"
              : !authorized(auth, cfg->http.write_token) ? "missing or wrong bearer token"
              : cfg->tcp.read_only ? "the gateway is read-only ([tcp] read_only)" : NULL;
    }
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
    int i = tags_table_find(gw_tags_defs(gw_tags(gw)), name);
    const tags_tag_t *g = i >= 0 ? tags_table_tag(gw_tags_defs(gw_tags(gw)), (size_t)i) : NULL;
    if (!g) {
        refuse(ht, req, HTTP_NOTFOUND, "Not Found", name, "no such tag");
        return;
    }
    if (!g->writable && g->computed) {   /* writable through an inverse only: the tag's state, not the client's rights */
        refuse(ht, req, 409, "Conflict", name, "the tag is computed (expr) and declares no inverse: its value is "
                                               "its expression's, not a device's to write");
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
    char asked[100];   /* for the audit log: what was asked, cut */
    snprintf(asked, sizeof asked, "%.96s", body);
    free(body);
    if (status) {
        refuse(ht, req, status, status == 422 ? "Unprocessable Entity" : "Bad Request", name, msg);
        return;
    }
    const config_device_t *dev = &gw_config(gw)->devices[gw_tags_config_device(gw_tags(gw), g)];
    int rc = tag_write_begin(gw_tag_writes(gw), (unsigned)i, dev->bus, dev->slave, &w, write_done, ht,
                             (uint64_t)(uintptr_t)req, msg, sizeof msg);
    if (rc != TAG_WRITE_QUEUED) {
        /* 409: the tags' state refuses it now (an overlap, no inverse, an
         * input of the inverse not good); 422: the inverse cannot give a
         * value for this one */
        int code = rc == TAG_WRITE_LISTEN_ONLY ? 403
                   : rc == TAG_WRITE_OVERLAP || rc == TAG_WRITE_COMPUTED || rc == TAG_WRITE_INVERSE_INPUT ? 409
                   : rc == TAG_WRITE_INVERSE_FAILED || rc == TAG_WRITE_INVERSE_RANGE ? 422 : 503;
        refuse(ht, req, code, code == 403 ? "Forbidden" : code == 409 ? "Conflict" : code == 422
                   ? "Unprocessable Entity" : "Service Unavailable", name, msg);
        return;
    }
    web_audit(gw, req, "tag write %s: %s", name, asked);
    http_hold(ht->http, req, true);
}

/* {"tag":ASKED, and "through":WRITTEN when a computed tag's inverse wrote an input. */
static void add_names(struct evbuffer *b, const tags_tag_t *asked, const tags_tag_t *written)
{
    evbuffer_add_printf(b, "{\"tag\":");
    http_json_str(b, asked->name);
    if (asked != written) {
        evbuffer_add_printf(b, ",\"through\":");
        http_json_str(b, written->name);
    }
}

/* The slave's answer to the write: its echo, or the exception, as JSON. */
static void reply_result(gw_http_tags_t *ht, const tag_write_outcome_t *o, struct evhttp_request *req)
{
    const tags_tag_t *g = tags_table_tag(gw_tags_defs(gw_tags(ht->gw)), o->tag);
    /* a computed tag written through its inverse: named as asked, and the
     * input written ("through"), whose words and read-back follow */
    const tags_tag_t *asked = tags_table_tag(gw_tags_defs(gw_tags(ht->gw)), o->asked);
    const uint8_t *pdu = o->pdu;
    size_t len = o->len;
    if (len >= 2 && (pdu[0] & 0x80)) {
        static const char *const names[] = { "", "illegal function", "illegal data address",
                                             "illegal data value", "slave device failure" };
        uint8_t code = pdu[1];
        char why[96];
        snprintf(why, sizeof why, "exception %u: %s", code,
                 code < 5 ? names[code] : code == MB_EX_BUSY ? "busy (the bus queue is full)"
                 : code == MB_EX_PATH_UNAVAILABLE ? "gateway path unavailable (port down)"
                 : code == MB_EX_TARGET_FAILED ? "no answer from the device" : "from the device");
        web_count(ht->gw, tag_write_failures);
        struct evbuffer *b = reply_buffer(req);
        if (!b)
            return;
        add_names(b, asked, g);
        evbuffer_add_printf(b, ",\"ok\":false,\"exception\":%u,\"error\":", code);
        http_json_str(b, why);
        evbuffer_add_printf(b, "}\n");
        int status = code == MB_EX_TARGET_FAILED ? 504 : code == MB_EX_BUSY || code == MB_EX_PATH_UNAVAILABLE
                                                             ? 503 : 502;
        http_tags_reply_json(req, status, status == 504 ? "Gateway Timeout" : status == 503 ? "Service Unavailable"
                                                                                 : "Bad Gateway", b);
        evbuffer_free(b);
        return;
    }
    web_count(ht->gw, tag_writes);
    struct evbuffer *b = reply_buffer(req);
    if (!b)
        return;
    add_names(b, asked, g);
    evbuffer_add_printf(b, ",\"ok\":true,\"function\":%u,\"address\":%u,\"count\":%u,\"words\":[", o->w->function,
                        o->w->address, o->w->count);
    for (unsigned k = 0; k < o->w->count; k++)
        evbuffer_add_printf(b, k ? ",%u" : "%u", o->w->words[k]);
    /* confirm_write: what the slave holds now, read back, as /tags writes it */
    evbuffer_add_printf(b, "],\"confirmed\":%s", o->confirmed ? "true" : "false");
    if (o->confirmed) {
        tags_value_t v;
        tag_write_read_value(g, o, &v);
        evbuffer_add_printf(b, ",\"value\":");
        http_json_value(b, g, &v);
        evbuffer_add_printf(b, ",\"read_words\":[");
        for (unsigned k = 0; k < o->w->count; k++)
            evbuffer_add_printf(b, k ? ",%u" : "%u", o->read_words[k]);
        evbuffer_add_printf(b, "]");
    }
    evbuffer_add_printf(b, "}\n");
    http_tags_reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

/* The write's outcome (tag_write.c), on the I/O thread: the request
 * answered, or counted only when its client had gone. */
static void write_done(void *owner, uint64_t cookie, const tag_write_outcome_t *o)
{
    gw_http_tags_t *ht = owner;
    struct evhttp_request *req = o->abandoned ? NULL : (struct evhttp_request *)(uintptr_t)cookie;
    if (req)
        http_hold(ht->http, req, false);
    if (o->unwritten) {   /* its client had gone before the write itself went */
        web_count(ht->gw, tag_write_failures);
        return;
    }
    if (o->malformed_read) {
        web_count(ht->gw, tag_write_failures);
        http_tags_reply_error(req, 502, "Bad Gateway", tags_table_tag(gw_tags_defs(gw_tags(ht->gw)), o->tag)->name,
                    "the register's read came back malformed");
        return;
    }
    reply_result(ht, o, req);
}

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
            web_count(ht->gw, tag_writes_refused);
        http_tags_reply_error(req, HTTP_BADREQUEST, "Bad Request", name, "the tag name holds a NUL byte (%00)");
    } else if (cmd == EVHTTP_REQ_PUT && one) {
        put_tag(ht, req, name);
    } else if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD) {
        get_tags(ht, req, name);
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", one ? "GET, HEAD, PUT" : "GET, HEAD");
        http_tags_reply_error(req, 405, "Method Not Allowed", name, one ? "GET, HEAD or PUT" : "GET or HEAD (PUT /tags/NAME)");
    }
    free(name);
    return true;
}

gw_http_tags_t *http_tags_new(gw_t *gw, gw_http_t *h)
{
    gw_http_tags_t *ht = calloc(1, sizeof *ht);
    if (!ht)
        return NULL;
    ht->gw = gw;
    ht->http = h;
    if (!(ht->list = http_tags_list_new(gw, h))) {
        free(ht);
        return NULL;
    }
    return ht;
}

/* After evhttp_free, which freed the requests still waiting; their writes'
 * outcomes, if any come, go nowhere (the loop has stopped). */
void http_tags_free(gw_http_tags_t *ht)
{
    if (ht) {
        free(ht->counts);
        http_tags_list_free(ht->list);
    }
    free(ht);
}

/*
 * The client of a held write has gone (http.c's sweep saw its connection
 * end). The write keeps its slot until the bus answers, since the bus holds
 * the request, but not the client's HTTP connection: that is handed back
 * for closing now, and the answer, when it comes, is counted and goes to no
 * one. A write not yet on the line is dropped (tag_write.c).
 */
static bool on_connection(uint64_t cookie, const void *bev)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection((struct evhttp_request *)(uintptr_t)cookie);
    return evcon && evhttp_connection_get_bufferevent(evcon) == bev;
}

struct evhttp_connection *http_tags_abandon(gw_http_tags_t *ht, const struct bufferevent *bev)
{
    struct evhttp_connection *listing = http_tags_list_abandon(ht->list, bev);
    if (listing)
        return listing;
    uint64_t cookie;
    if (!tag_write_abandon(gw_tag_writes(ht->gw), ht, on_connection, bev, &cookie))
        return NULL;
    web_count(ht->gw, tag_writes_abandoned);
    return evhttp_request_get_connection((struct evhttp_request *)(uintptr_t)cookie);
}
