/*
 * north/remote.c -- [mqtt] remote_config = on: the configuration through the
 * broker (docs/fleet.md).
 *
 *   PREFIX/GATEWAY/config/set     in:  {"id": "...", "if_match": "REVISION", "text": "the whole file"}
 *   PREFIX/GATEWAY/config/get     in:  {"id": "..."} (or empty)
 *   PREFIX/GATEWAY/config/result  out, retained, QoS 1:
 *       {"id", "op": "set"|"get"|"start", "ok", "status", "revision",
 *        "restart_needed", "answer"} (+ "text" for get, not retained)
 *
 * A set goes through hooks->config_set: the gateway hands it to the one
 * write path of the configuration API (web/api.c: the revision compared
 * like If-Match, the text checked as `rtugw check` does, written
 * atomically, applied by the live reload), so a change by MQTT, by PUT
 * /api/config and by hand + SIGHUP is the same thing; a refused one (stale
 * revision, check's errors) changes nothing, and the answer says why
 * ("answer": the body PUT /api/config would have answered). "revision" is
 * the file's after the operation, so a fleet's central script sees who has
 * applied what by reading the retained results. At each session's start the
 * gateway publishes {"op": "start"} with its revision and restart_needed.
 *
 * The set runs outside libmosquitto's callback (an event of its own): a
 * reload can publish (Sparkplug births, discovery documents) and must not
 * run inside the call that delivered the message. One at a time: a set that
 * arrives while one waits is refused (status 503) and answered. Payloads
 * over max_config_bytes are refused (413) unread.
 *
 * Who may send: whoever the broker lets publish on config/set. The broker's
 * ACL is the authorisation (docs/fleet.md gives mosquitto's and EMQX's).
 */
#include "north/internal.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REMOTE_ID_MAX 64

struct north_remote {
    char t_set[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 24];
    char t_get[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 24];
    char t_result[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 24];
    struct event *ev;                /* runs the waiting set */
    char *pending;                   /* the waiting set's payload (NUL-terminated) */
    size_t pending_len;
};

/* {"id","op","ok","status","revision","restart_needed"[,"answer"][,"text"]} on config/result. */
static void result(north_t *n, const char *id, const char *op, int status, const char *answer, const char *text,
                   size_t text_len)
{
    char rev[17] = "", restart[512] = "";
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    if (n->hooks.config_get)
        n->hooks.config_get(n->hooks.ctx, rev, restart, sizeof restart, NULL, NULL);
    evbuffer_add_printf(b, "{\"id\":");
    values_add_quoted(b, id ? id : "");
    evbuffer_add_printf(b, ",\"op\":\"%s\",\"ok\":%s,\"status\":%d,\"gateway\":", op,
                        status == 200 ? "true" : "false", status);
    values_add_quoted(b, n->cfg.gateway);
    evbuffer_add_printf(b, ",\"revision\":\"%s\",\"restart_needed\":", rev);
    values_add_quoted(b, restart);
    if (answer) {
        struct json_object *a = json_tokener_parse(answer);   /* the API's body: JSON, else quoted */
        evbuffer_add_printf(b, ",\"answer\":");
        if (a)
            evbuffer_add_printf(b, "%s", json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
        else
            values_add_quoted(b, answer);
        json_object_put(a);
    }
    if (text) {
        char *copy = malloc(text_len + 1);
        evbuffer_add_printf(b, ",\"text\":");
        if (copy) {
            memcpy(copy, text, text_len);
            copy[text_len] = 0;
            values_add_quoted(b, copy);
            free(copy);
        } else {
            evbuffer_add_printf(b, "null");
        }
    }
    evbuffer_add(b, "}", 1);
    size_t len = evbuffer_get_length(b);
    const unsigned char *p = evbuffer_pullup(b, -1);
    if (p)   /* a get's answer holds the file: not kept by the broker */
        queue_publish(n, n->remote->t_result, p, len, 1, text == NULL, 0);
    evbuffer_free(b);
}

/* The fields of a request; false: not an object of strings. */
static bool fields(struct json_object *root, const char **id, const char **if_match, const char **text, size_t *len)
{
    struct json_object *v;
    *id = *if_match = *text = NULL;
    *len = 0;
    if (!root || !json_object_is_type(root, json_type_object))
        return false;
    if (json_object_object_get_ex(root, "id", &v)) {
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) > REMOTE_ID_MAX)
            return false;
        *id = json_object_get_string(v);
    }
    if (json_object_object_get_ex(root, "if_match", &v)) {
        if (!json_object_is_type(v, json_type_string))
            return false;
        *if_match = json_object_get_string(v);
    }
    if (json_object_object_get_ex(root, "text", &v)) {
        if (!json_object_is_type(v, json_type_string))
            return false;
        *text = json_object_get_string(v);
        *len = (size_t)json_object_get_string_len(v);
    }
    return true;
}

static void run_set(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    north_remote_t *r = n->remote;
    const char *id, *if_match, *text;
    size_t len;
    char *answer = NULL;
    (void)fd;
    (void)what;
    struct json_tokener *tok = json_tokener_new_ex(8);
    struct json_object *root = tok ? json_tokener_parse_ex(tok, r->pending, (int)r->pending_len) : NULL;
    if (!fields(root, &id, &if_match, &text, &len) || !text) {
        north_log(n, 1, "mqtt: %s: not {\"id\", \"if_match\", \"text\"}: refused", r->t_set);
        result(n, id, "set", 400, "{\"error\":\"expected {\\\"id\\\": string, \\\"if_match\\\": revision, "
                                  "\\\"text\\\": the whole file}\"}", NULL, 0);
    } else {
        int status = n->hooks.config_set(n->hooks.ctx, if_match, text, len, &answer);
        north_log(n, status == 200 ? 2 : 1, "mqtt: %s (id %s): %s (%d)", r->t_set, id ? id : "-",
                  status == 200 ? "applied" : "refused, the running configuration kept", status);
        result(n, id, "set", status, answer ? answer : "{}", NULL, 0);
    }
    free(answer);
    if (root)
        json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    free(r->pending);
    r->pending = NULL;
}

static void on_get(north_t *n, const void *payload, size_t len)
{
    char rev[17], restart[512];
    char *text = NULL;
    size_t text_len = 0;
    const char *id = NULL, *ignored;
    size_t ignored_len;
    struct json_object *root = len && len <= 4096 ? json_tokener_parse((const char *)payload) : NULL;
    if (root)
        fields(root, &id, &ignored, &ignored, &ignored_len);
    if (n->hooks.config_get(n->hooks.ctx, rev, restart, sizeof restart, &text, &text_len) != 0)
        result(n, id, "get", 500, "{\"error\":\"the configuration file cannot be read\"}", NULL, 0);
    else
        result(n, id, "get", 200, NULL, text ? text : "", text_len);
    free(text);
    if (root)
        json_object_put(root);
}

bool remote_on_message(north_t *n, const char *topic, const void *payload, size_t len)
{
    north_remote_t *r = n->remote;
    if (!r)
        return false;
    if (strcmp(topic, r->t_get) == 0) {
        on_get(n, payload, len < 4096 ? len : 0);
        return true;
    }
    if (strcmp(topic, r->t_set) != 0)
        return false;
    if (len > n->cfg.max_config_bytes) {
        result(n, NULL, "set", 413, "{\"error\":\"larger than [mqtt] max_config_bytes\"}", NULL, 0);
        return true;
    }
    if (r->pending) {
        result(n, NULL, "set", 503, "{\"error\":\"busy: a change is being applied; send it again\"}", NULL, 0);
        return true;
    }
    if (!(r->pending = malloc(len + 1))) {
        result(n, NULL, "set", 500, "{\"error\":\"out of memory\"}", NULL, 0);
        return true;
    }
    memcpy(r->pending, payload, len);
    r->pending[len] = 0;
    r->pending_len = len;
    event_active(r->ev, EV_TIMEOUT, 0);
    return true;
}

void remote_on_connect(north_t *n)
{
    if (!n->remote)
        return;
    client_subscribe(n, n->remote->t_set);
    client_subscribe(n, n->remote->t_get);
    result(n, NULL, "start", 200, NULL, NULL, 0);
}

int remote_start(north_t *n, char *err, size_t errcap)
{
    const north_config_t *c = &n->cfg;
    if (!c->remote_config)
        return 0;
    if (!n->hooks.config_set || !n->hooks.config_get) {
        snprintf(err, errcap, "mqtt: remote_config: this daemon has no configuration write path to give it");
        return -1;
    }
    north_remote_t *r = calloc(1, sizeof *r);
    if (!r || !(r->ev = event_new(n->base, -1, 0, run_set, n))) {
        free(r);
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    snprintf(r->t_set, sizeof r->t_set, "%s/%s/config/set", c->topic_prefix, c->gateway);
    snprintf(r->t_get, sizeof r->t_get, "%s/%s/config/get", c->topic_prefix, c->gateway);
    snprintf(r->t_result, sizeof r->t_result, "%s/%s/config/result", c->topic_prefix, c->gateway);
    n->remote = r;
    return 0;
}

void remote_free(north_t *n)
{
    north_remote_t *r = n->remote;
    if (!r)
        return;
    event_free(r->ev);
    free(r->pending);
    free(r);
    n->remote = NULL;
}
