/*
 * web/api_scan.c -- /api/scan (docs/api.md): a scan of a bus started from
 * the page or a script, its progress and its results. The scan itself is
 * gateway/scan.c's (on the bus's own line, never blocking this thread);
 * this file is its HTTP face:
 *   POST /api/scan          {"bus": NAME, "first_id": 1, "last_id": 247,
 *                            "pause_polling": false}: 202 and the scan's
 *                            state; admin only
 *   GET  /api/scan          {"scans": [...]}: every bus's scan
 *   GET  /api/scan/NAME     one bus's scan: state, ids, tried, found so far,
 *                            elapsed_s; 404 for a bus that does not exist
 *
 * Bounds, before anything is started: the body at most SCAN_BODY_MAX bytes
 * (413), parsed by json_parse_request (depth 2, 16 tokens); only the four
 * fields above, each of its type, ids within 1..247 and first <= last (400
 * naming the field); bus may be left out only where there is one bus. A
 * bus with a scan running is refused 409 (busy), as is a polled bus
 * without pause_polling, a listen-only bus and a bus whose port is down:
 * each refusal says why, and is counted by reason (/metrics,
 * rtugw_scans_refused_total) and logged by gateway/scan.c; a role refused
 * is counted with the API's other refusals (rtugw_http_api_refused_total).
 */
#include "web/internal.h"
#include "json/json.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_BODY_MAX 1024

/* An integer field within lo..hi into *v; false with why naming it. */
static bool int_field(struct json_object *val, const char *key, unsigned lo, unsigned hi, unsigned *v, char *why,
                      size_t cap)
{
    int64_t n = json_object_get_int64(val);
    if (!json_object_is_type(val, json_type_int) || n < lo || n > hi) {
        snprintf(why, cap, "%s: expected an integer within %u..%u", key, lo, hi);
        return false;
    }
    *v = (unsigned)n;
    return true;
}

/* The request's parameters from its body; false with why (a 400's text). */
static bool parse_body(gw_t *gw, const char *body, size_t len, gw_scan_params_t *p, char *why, size_t cap)
{
    struct json_object *root = json_parse_request(body, len, 2, 16, why, cap);
    if (!root)
        return false;
    bool ok = json_object_is_type(root, json_type_object), have_bus = false;
    if (!ok)
        snprintf(why, cap, "expected a JSON object: {\"bus\": NAME, \"first_id\": 1, \"last_id\": 247, "
                           "\"pause_polling\": false}");
    *p = (gw_scan_params_t){ .first_id = 1, .last_id = 247 };
    if (ok) {
        json_object_object_foreach(root, key, val) {
            if (!ok)
                break;
            if (strcmp(key, "bus") == 0) {
                int b = json_object_is_type(val, json_type_string) ? config_find_bus(gw_config(gw), json_object_get_string(val)) : -1;
                if (b < 0)
                    snprintf(why, cap, "bus: expected the name of a [bus] of the configuration");
                ok = b >= 0;
                p->bus = (unsigned)(b < 0 ? 0 : b);
                have_bus = true;
            } else if (strcmp(key, "first_id") == 0) {
                ok = int_field(val, key, 1, 247, &p->first_id, why, cap);
            } else if (strcmp(key, "last_id") == 0) {
                ok = int_field(val, key, 1, 247, &p->last_id, why, cap);
            } else if (strcmp(key, "pause_polling") == 0) {
                ok = json_object_is_type(val, json_type_boolean);
                if (!ok)
                    snprintf(why, cap, "pause_polling: expected true or false");
                p->pause_polling = json_object_get_boolean(val);
            } else {
                snprintf(why, cap, "%.40s: not a field of a scan (bus, first_id, last_id, pause_polling)", key);
                ok = false;
            }
        }
    }
    json_object_put(root);
    if (ok && !have_bus && config_bus_listed(gw_config(gw)) == 1)
        p->bus = config_bus_at(gw_config(gw), 0);   /* the one bus, at its slot */
    if (ok && !have_bus && config_bus_listed(gw_config(gw)) != 1) {
        snprintf(why, cap, "bus: required where the configuration has %u buses", config_bus_listed(gw_config(gw)));
        ok = false;
    }
    if (ok && p->first_id > p->last_id) {
        snprintf(why, cap, "first_id: %u is after last_id %u", p->first_id, p->last_id);
        ok = false;
    }
    return ok;
}

static void post_scan(gw_t *gw, struct evhttp_request *req, struct evbuffer *b)
{
    if (!api_admin_ok(gw, req))
        return;   /* a role refused is counted with the API's (rtugw_http_api_refused_total) */
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    char why[192], body[SCAN_BODY_MAX + 1];
    gw_scan_params_t p;
    if (len > SCAN_BODY_MAX) {
        scan_refused(gw_scans(gw), GW_SCAN_INVALID);
        snprintf(why, sizeof why, "the body is larger than %u bytes", SCAN_BODY_MAX);
        api_reply_error(gw, req, 413, "Payload Too Large", why);
        return;
    }
    evbuffer_copyout(in, body, len);
    body[len] = 0;
    if (!parse_body(gw, body, len, &p, why, sizeof why)) {
        scan_refused(gw_scans(gw), GW_SCAN_INVALID);
        api_reply_error(gw, req, 400, "Bad Request", why);
        return;
    }
    int rc = scan_start(gw_scans(gw), &p);
    static const char *const refusal[GW_SCAN_REFUSALS] = {
        [GW_SCAN_BUSY] = "a scan of this bus is running already: one at a time per bus",
        [GW_SCAN_POLLED] = "the bus is polled: say \"pause_polling\": true to pause its polling during the scan",
        [GW_SCAN_LISTEN] = "the bus is listen-only (mode = listen): the gateway asks nothing on it",
        [GW_SCAN_DOWN] = "the bus's port is down",
        [GW_SCAN_INVALID] = "the request's ids or bus are not valid",
    };
    if (rc != GW_SCAN_STARTED) {
        api_reply_error(gw, req, rc == GW_SCAN_INVALID ? 400 : 409, rc == GW_SCAN_INVALID ? "Bad Request" : "Conflict",
                        refusal[rc] ? refusal[rc] : "refused");
        return;
    }
    char where[64 + CONFIG_NAME_MAX];
    snprintf(where, sizeof where, "/api/scan/%s", gw_config(gw)->buses[p.bus].name);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Location", where);
    scan_json(gw_scans(gw), p.bus, b);
    evbuffer_add(b, "\n", 1);
    api_reply_json(gw, req, 202, "Accepted", b);
}

bool api_scan_request(gw_t *gw, struct evhttp_request *req, const char *what, struct evbuffer *b)
{
    bool all = strcmp(what, "scan") == 0, one = strncmp(what, "scan/", 5) == 0;
    if (!all && !one)
        return false;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (all && cmd == EVHTTP_REQ_POST) {
        post_scan(gw, req, b);
    } else if (cmd != EVHTTP_REQ_GET) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", all ? "GET, POST" : "GET");
        api_reply_error(gw, req, 405, "Method Not Allowed", "see docs/api.md");
    } else if (all) {
        evbuffer_add_printf(b, "{\"scans\":[");
        const char *sep = "";
        for (unsigned i = 0; i < gw_bus_count(gw); i++)
            if (scan_exists(gw_scans(gw), i)) {
                evbuffer_add_printf(b, "%s", sep);
                scan_json(gw_scans(gw), i, b);
                sep = ",";
            }
        evbuffer_add_printf(b, "]}\n");
        api_reply_json(gw, req, 200, "OK", b);
    } else {
        int bus = config_find_bus(gw_config(gw), what + 5);
        if (bus < 0 || (unsigned)bus >= gw_bus_count(gw)) {
            api_reply_error(gw, req, 404, "Not Found", "no such bus");
            return true;
        }
        scan_json(gw_scans(gw), (unsigned)bus, b);
        evbuffer_add(b, "\n", 1);
        api_reply_json(gw, req, 200, "OK", b);
    }
    return true;
}
