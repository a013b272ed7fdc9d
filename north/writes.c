/*
 * north/writes.c -- PREFIX/GATEWAY/write: requests in, one answer out.
 *
 * A request is {"uuid", "device", "tag", "value"} or a list of them (at
 * most max_write_items); value is a number, true/false, a string, or
 * a list of numbers (consecutive registers). Each item gets exactly one answer on
 * PREFIX/GATEWAY/write/response: {"uuid", "error": 0 | code, "message"}.
 * What is not a well-formed request (too large, not JSON, a field missing
 * or of the wrong type) is answered with an error, counted, and changes
 * nothing. The payload is bounded by max_write_bytes, then its values by
 * what the largest request needs and its depth by WRITE_DEPTH before json-c
 * parses it (json_parse_request, the rule HTTP bodies follow too).
 *
 * An accepted item takes a slot (NORTH_PENDING_WRITES at most: beyond,
 * NORTH_WRITE_BUSY) whose token goes to the gateway; north_write_done()
 * with that token answers it. A token carries its slot's generation, so a
 * late or repeated answer is ignored.
 */
#include "north/internal.h"
#include "json/json.h"

#include <event2/buffer.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#define WRITE_DEPTH 8
#define UUID_MAX 64

static void respond_value(north_t *n, const char *uuid, int error, const char *message, const north_value_t *read)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        n->st.dropped++;
        return;
    }
    evbuffer_add_printf(b, "{\"uuid\":");
    if (uuid)
        values_add_quoted(b, uuid);
    else
        evbuffer_add_printf(b, "null");
    evbuffer_add_printf(b, ",\"error\":%d,\"message\":", error);
    values_add_quoted(b, message);
    if (read) {
        evbuffer_add_printf(b, ",\"value\":");
        values_add_one(b, read);
    }
    evbuffer_add(b, "}", 1);
    size_t len = evbuffer_get_length(b);
    const unsigned char *p = evbuffer_pullup(b, -1);
    if (p)
        queue_publish(n, n->topic_response, p, len, (int)n->cfg.status_qos, false, 0);
    evbuffer_free(b);
    if (error == NORTH_WRITE_OK)
        n->st.write_ok++;
    else
        n->st.write_errors++;
}

static void respond(north_t *n, const char *uuid, int error, const char *message)
{
    respond_value(n, uuid, error, message, NULL);
}

static void refuse(north_t *n, const char *uuid, int error, const char *message)
{
    if (error == NORTH_WRITE_MALFORMED || error == NORTH_WRITE_BAD_FIELD || error == NORTH_WRITE_TOO_LARGE)
        n->st.write_malformed++;
    respond(n, uuid, error, message);
}

static const char *string_field(struct json_object *o, const char *key, size_t max)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    size_t len = (size_t)json_object_get_string_len(v);
    const char *s = json_object_get_string(v);
    if (len == 0 || len > max || strlen(s) != len)   /* no NUL inside */
        return NULL;
    return s;
}

static bool is_number(struct json_object *v)
{
    return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

/* value: a number, true/false, a string (string tags), or a list of numbers
 * (consecutive registers of a poll group). */
static bool read_value(struct json_object *o, north_write_t *w)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, "value", &v))
        return false;
    if (json_object_is_type(v, json_type_boolean)) {
        w->is_bool = true;
        w->count = 1;
        w->values[0] = json_object_get_boolean(v) ? 1 : 0;
        w->text = w->values[0] ? "true" : "false";
        return true;
    }
    if (is_number(v)) {
        w->count = 1;
        w->values[0] = json_object_get_double(v);
        /* the number as it was written (json-c keeps a double's text), so a
         * 64-bit integer or a decimal reaches the tag codec unrounded */
        w->text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        return true;
    }
    if (json_object_is_type(v, json_type_string)) {
        size_t len = (size_t)json_object_get_string_len(v);
        w->text = json_object_get_string(v);
        w->is_string = true;
        w->count = 1;
        w->values[0] = 0;
        return strlen(w->text) == len && len <= 2 * 125;   /* no NUL inside; the longest string tag */
    }
    if (!json_object_is_type(v, json_type_array))
        return false;
    size_t len = json_object_array_length(v);
    if (len == 0 || len > NORTH_WRITE_MAX_VALUES)
        return false;
    for (size_t i = 0; i < len; i++) {
        struct json_object *e = json_object_array_get_idx(v, i);
        if (!is_number(e))
            return false;
        w->values[i] = json_object_get_double(e);
    }
    w->count = len;
    return true;
}

int writes_take_slot(north_t *n, const char *uuid, uint32_t *token)
{
    for (unsigned i = 0; i < NORTH_PENDING_WRITES; i++) {
        north_pending_t *p = &n->pending[i];
        if (p->gen)
            continue;
        if (++n->next_gen >= (1u << 24))
            n->next_gen = 1;
        p->gen = n->next_gen;
        snprintf(p->uuid, sizeof p->uuid, "%s", uuid);
        *token = p->gen << 8 | i;
        return 0;
    }
    return -1;
}

static void write_item(north_t *n, struct json_object *o, size_t index)
{
    char why[128];
    n->st.write_requests++;
    if (!json_object_is_type(o, json_type_object)) {
        snprintf(why, sizeof why, "item %zu is not an object {\"uuid\", \"device\", \"tag\", \"value\"}", index);
        refuse(n, NULL, NORTH_WRITE_MALFORMED, why);
        return;
    }
    const char *uuid = string_field(o, "uuid", UUID_MAX);
    if (!uuid) {
        refuse(n, NULL, NORTH_WRITE_BAD_FIELD, "uuid: expected a string of 1..64 characters");
        return;
    }
    north_write_t w = { .uuid = uuid };
    if (!(w.device = string_field(o, "device", NORTH_NAME_MAX - 1))) {
        refuse(n, uuid, NORTH_WRITE_BAD_FIELD, "device: expected a device name");
        return;
    }
    if (!(w.tag = string_field(o, "tag", NORTH_NAME_MAX - 1))) {
        refuse(n, uuid, NORTH_WRITE_BAD_FIELD, "tag: expected a tag name");
        return;
    }
    if (!read_value(o, &w)) {
        refuse(n, uuid, NORTH_WRITE_BAD_FIELD,
               "value: expected a number, true/false, a string of at most 250 bytes, or a list of 1..123 numbers");
        return;
    }
    if (n->cfg.read_only || !n->hooks.write) {
        respond(n, uuid, NORTH_WRITE_READ_ONLY, "read_only: this gateway refuses writes ([mqtt] read_only)");
        return;
    }
    uint32_t token;
    if (writes_take_slot(n, uuid, &token) != 0) {
        respond(n, uuid, NORTH_WRITE_BUSY, "busy: too many writes waiting for their answer");
        return;
    }
    n->hooks.write(n->hooks.ctx, token, &w);
}

/* The structural tokens ('[', '{', ',', ':') of the largest request this
 * gateway takes: per item an object of four keys and a list of values. */
#define WRITE_TOKENS_PER_ITEM (8 + NORTH_WRITE_MAX_VALUES)

void writes_on_message(north_t *n, const void *payload, size_t len)
{
    char why[160], what[96];
    if (len > n->cfg.max_write_bytes) {
        n->st.write_requests++;
        snprintf(why, sizeof why, "too large: %zu bytes, max_write_bytes is %u", len, n->cfg.max_write_bytes);
        refuse(n, NULL, NORTH_WRITE_TOO_LARGE, why);
        return;
    }
    struct json_object *root = json_parse_request(payload, len, WRITE_DEPTH,
                                                  (size_t)n->cfg.max_write_items * WRITE_TOKENS_PER_ITEM, what,
                                                  sizeof what);
    if (!root) {
        n->st.write_requests++;
        snprintf(why, sizeof why, "malformed JSON: %s", what);
        refuse(n, NULL, NORTH_WRITE_MALFORMED, why);
    } else if (json_object_is_type(root, json_type_array)) {
        size_t items = json_object_array_length(root);
        if (items == 0 || items > n->cfg.max_write_items) {
            n->st.write_requests++;
            snprintf(why, sizeof why, "a list of %zu writes: expected 1..%u (max_write_items)", items,
                     n->cfg.max_write_items);
            refuse(n, NULL, NORTH_WRITE_TOO_LARGE, why);
        }
        for (size_t i = 0; i < items && items <= n->cfg.max_write_items; i++)
            write_item(n, json_object_array_get_idx(root, i), i);
    } else {
        write_item(n, root, 0);
    }
    json_object_put(root);
}

static void write_done(north_t *n, uint32_t token, int error, const char *message, const north_value_t *read);

void north_write_done(north_t *n, uint32_t token, int error, const char *message)
{
    write_done(n, token, error, message, NULL);
}

void north_write_done_value(north_t *n, uint32_t token, const north_value_t *read)
{
    write_done(n, token, NORTH_WRITE_OK, "ok", read);
}

static void write_done(north_t *n, uint32_t token, int error, const char *message, const north_value_t *read)
{
    if ((token & 0xFF) >= NORTH_PENDING_WRITES)
        return;
    north_pending_t *p = &n->pending[token & 0xFF];
    if (p->gen == 0 || p->gen != token >> 8)
        return;
    char uuid[sizeof p->uuid];
    memcpy(uuid, p->uuid, sizeof uuid);
    p->gen = 0;
    if (n->cfg.format == NORTH_FORMAT_SPARKPLUG)
        sparkplug_write_done(n, uuid, error, message);   /* a DCMD has no answer topic */
    else
        respond_value(n, uuid, error, message ? message : (error ? "error" : "ok"), read);
}

void writes_stop(north_t *n)
{
    for (unsigned i = 0; i < NORTH_PENDING_WRITES; i++)
        if (n->pending[i].gen)
            north_write_done(n, n->pending[i].gen << 8 | i, NORTH_WRITE_STOPPING,
                             "stopping: the gateway stopped before the device answered");
}
