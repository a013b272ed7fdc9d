/*
 * web/host.c -- what every request must be before any route sees it: asked
 * of this server (Host), and framed one way only (Content-Length).
 *
 * DNS rebinding: a page on evil.example whose name the attacker's DNS then
 * points at 127.0.0.1 (or at the gateway's address on the plant network)
 * makes the victim's browser send requests here that the browser counts as
 * evil.example's own: same origin, so its script reads the answers (and an
 * Origin check, which sees "http://evil.example:8502" asked as
 * "evil.example:8502", passes). Only the Host tells: it is the name the
 * browser resolved. So a request is served only when its Host is one of
 * [http] server_names (any port): by default the bind address, localhost,
 * 127.0.0.1, ::1, this host's name (gethostname, and its first label), and
 * with bind = 0.0.0.0 any IP address literal (an address cannot be rebound:
 * rebinding needs a name). Else 421 Misdirected Request. An HTTP/1.1
 * request without Host, or with two, gets 400 (RFC 9112 3.2), as does one
 * with two Content-Length headers that differ (RFC 9112 6.3: evhttp reads
 * the first; a proxy in front might have read the other, and the rest of
 * the body would then be a request of its own), and one with both
 * Transfer-Encoding and Content-Length (the same ambiguity, RFC 9112 6.1):
 * the connection is closed after the answer.
 */
#include "web/internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The host part of a Host value: "[::1]:8502" -> "::1", "a.b:80" -> "a.b". */
static bool host_part(const char *value, char *out, size_t cap)
{
    size_t n;
    if (value[0] == '[') {
        const char *end = strchr(value, ']');
        if (!end || (end[1] && end[1] != ':'))
            return false;
        value++;
        n = (size_t)(end - value);
    } else {
        const char *colon = strchr(value, ':');
        if (colon && strchr(colon + 1, ':'))
            return false;   /* an IPv6 address must be in brackets */
        n = colon ? (size_t)(colon - value) : strlen(value);
        if (colon)
            for (const char *p = colon + 1; *p; p++)
                if (!isdigit((unsigned char)*p))
                    return false;
    }
    if (n == 0 || n >= cap)
        return false;
    memcpy(out, value, n);
    out[n] = 0;
    if (n > 1 && out[n - 1] == '.')
        out[n - 1] = 0;   /* "localhost." is localhost */
    return true;
}

static bool is_address(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Whether name is in list (names separated by commas or blanks). */
static bool listed(const char *list, const char *name, bool *any)
{
    size_t len = strlen(name);
    for (const char *c = list; *c;) {
        size_t n = strcspn(c, ", \t");
        if (n == 1 && c[0] == '*')
            *any = true;
        if (n == len && strncasecmp(c, name, n) == 0)
            return true;
        c += n;
        c += strspn(c, ", \t");
    }
    return false;
}

bool web_host_allowed(const config_http_t *cfg, const char *host)
{
    bool any = false;
    if (cfg->server_names[0])
        return listed(cfg->server_names, host, &any) || any;
    if (strcasecmp(host, "localhost") == 0 || strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0 ||
        strcmp(host, cfg->bind) == 0)
        return true;
    if (strcmp(cfg->bind, "0.0.0.0") == 0 && is_address(host))
        return true;
    char me[256];
    if (gethostname(me, sizeof me) == 0) {
        me[sizeof me - 1] = 0;
        if (strcasecmp(host, me) == 0)
            return true;
        char *dot = strchr(me, '.');
        if (dot) {
            *dot = 0;
            if (strcasecmp(host, me) == 0)
                return true;
        }
    }
    return false;
}

static bool refuse(struct evhttp_request *req, int code, const char *reason, const char *why)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    web_reply_error(req, code, reason, why);
    return false;
}

bool web_host_check(gw_t *gw, struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *host = NULL, *length = NULL;
    bool chunked = false;
    for (struct evkeyval *h = in->tqh_first; h; h = h->next.tqe_next) {
        chunked = chunked || strcasecmp(h->key, "Transfer-Encoding") == 0;
        if (strcasecmp(h->key, "Host") == 0) {
            if (host)
                return refuse(req, 400, "Bad Request", "more than one Host header");
            host = h->value;
        } else if (strcasecmp(h->key, "Content-Length") == 0) {
            if (length && strcmp(length, h->value) != 0)
                return refuse(req, 400, "Bad Request", "Content-Length headers that differ");
            length = h->value;
        }
    }
    if (chunked && length)
        return refuse(req, 400, "Bad Request", "Transfer-Encoding and Content-Length together");
    if (!host) {
        if (req->major == 1 && req->minor >= 1)
            return refuse(req, 400, "Bad Request", "an HTTP/1.1 request needs a Host header");
        return true;   /* HTTP/1.0: no Host to check (no browser sends one without) */
    }
    char name[256];
    if (!host_part(host, name, sizeof name) || !web_host_allowed(&gw_config(gw)->http, name)) {
        web_count(gw, misdirected);
        return refuse(req, 421, "Misdirected Request",
                      "this server does not answer to that Host name ([http] server_names)");
    }
    return true;
}
