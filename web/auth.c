/*
 * web/auth.c -- who a request is, and what it may do: users with roles
 * ([user NAME]), logins (POST /login, /logout, GET /whoami), sessions, the
 * failed logins' slowdown, the cross-site check and the route guard every
 * request passes (web_auth_route), on the I/O thread.
 *
 * Without [user NAME] sections nothing changes from before users existed:
 * reads are open, and the write_token (Authorization: Bearer) is the one
 * credential, so it may do everything a write needs. With users, every
 * route but the page's files, the login and (with metrics_open) /metrics
 * needs a session: a login's cookie (HttpOnly, SameSite=Strict, Secure
 * under HTTPS) for the page, or the same token as "Authorization: Bearer"
 * for scripts. The write_token then stands for an operator: it writes tag
 * values and nothing else.
 *
 * Cross-site requests: a cookie goes with any request the browser makes, so
 * a write that a cookie authenticates must carry an Origin (or, without it,
 * a Referer) naming this very server; any request that carries an Origin
 * of another site is refused, whatever its credential. SameSite=Strict
 * already keeps the cookie off cross-site requests in current browsers;
 * the Origin check holds where it does not (older browsers, a sibling
 * subdomain counted as the same site). A bearer token is never sent by a
 * browser on its own, so it needs no such check.
 *
 * Bounds: sessions, max_sessions_per_user of one user and max_sessions in
 * all (the one nearest its expiry gives way, never an admin's to another
 * user's login); failed logins remembered per address and per user name,
 * in two tables of FAILS_MAX (fails.c: a record still slowing its key
 * down gives way last, a configured user's never), wrong bearer tokens
 * counted there too (bearer_gate); a password hashed at most
 * VERIFY_PER_SECOND times a second (each costs the I/O thread a few ms and
 * a few MiB for yescrypt's memory: a flood of logins from many addresses
 * is then answered 503 at once, and cannot starve Modbus TCP).
 */
#include "web/internal.h"
#include "json/json.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define TOKEN_BYTES 32                  /* 256 bits from getrandom() */
#define TOKEN_HEX (2 * TOKEN_BYTES)
#define COOKIE "rtugw_session"
#define LOGIN_BODY_MAX 1024
#define PASSWORD_MAX 256
#define FAILS_MAX 256                   /* addresses remembered; user names remembered (fails.c) */
#define VERIFY_PER_SECOND 8
#define BEARER_KEY "(bearer token)"     /* the identity bearer guesses count against: no user name can be it */

typedef struct session {
    char token[TOKEN_HEX + 1];          /* "" : free */
    char user[CONFIG_NAME_MAX];
    config_user_role_t role;
    uint64_t expires_ns;
} session_t;

struct web_auth {
    gw_t *gw;
    session_t *sessions;
    unsigned session_cap;
    fail_table_t *addr_fails, *user_fails;   /* apart: neither's keys push out the other's (fails.c) */
    uint64_t verify_second;             /* the second the budget is for */
    unsigned verify_used;
    uint64_t logins, login_failures, login_throttled, login_busy, refused, evicted, sessions_full;
    uint64_t bearer_failures, bearer_throttled;
};

/* ---- small helpers --------------------------------------------------------------------- */

/* Whether HTTPS runs now (a reload may turn it on or off): the cookie's
 * Secure flag and the origin a request's Origin must name follow it. */
static bool https_on(const web_auth_t *a)
{
    return http_tls(gw_http(a->gw)) != NULL;
}

static bool same_secret(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned diff = na != nb;
    for (size_t i = 0; i < na; i++)
        diff |= (unsigned)(uint8_t)a[i] ^ (uint8_t)b[i < nb ? i : 0];
    return diff == 0;
}

static bool is_hex_token(const char *s, size_t n)
{
    if (n != TOKEN_HEX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* The client's address, with ":PORT" when with_port. */
static void peer_of(struct evhttp_request *req, bool with_port, char *out, size_t cap)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    char *addr = NULL;
    ev_uint16_t port = 0;
    if (evcon)
        evhttp_connection_get_peer(evcon, &addr, &port);
    if (with_port)
        snprintf(out, cap, "%s:%u", addr ? addr : "?", (unsigned)port);
    else
        snprintf(out, cap, "%s", addr ? addr : "?");
}

static bool is_read(struct evhttp_request *req)
{
    enum evhttp_cmd_type c = evhttp_request_get_command(req);
    return c == EVHTTP_REQ_GET || c == EVHTTP_REQ_HEAD;
}

void web_reply_error(struct evhttp_request *req, int code, const char *reason, const char *why)
{
    char q[JSON_QUOTED_MAX(320)];
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    json_quote(q, sizeof q, why);
    evbuffer_add_printf(b, "{\"ok\":false,\"error\":%s}\n", q);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, reason, b);
    evbuffer_free(b);
}

/* ---- sessions -------------------------------------------------------------------------- */

static session_t *session_find(web_auth_t *a, const char *token, size_t n)
{
    uint64_t now = gw_now_ns();
    char t[TOKEN_HEX + 1];
    session_t *found = NULL;

    if (!is_hex_token(token, n))
        return NULL;
    memcpy(t, token, n);
    t[n] = 0;
    for (unsigned i = 0; i < a->session_cap; i++) {
        session_t *s = &a->sessions[i];
        if (!s->token[0])
            continue;
        if (s->expires_ns <= now) {
            explicit_bzero(s, sizeof *s);   /* expired: its slot is free again */
            continue;
        }
        if (same_secret(s->token, t))
            found = s;
    }
    return found;
}

/*
 * A new session for u. Bounds: at most max_sessions_per_user of one user
 * (its own session nearest its expiry gives way), and max_sessions in all:
 * when full, the session nearest its expiry of any user but an admin gives
 * way (u's own may), so no login of another user ends an admin's session
 * (issue 42: a viewer logging in 64 times logged the admins out). When
 * every other session is an admin's, *full and NULL.
 */
static session_t *session_new(web_auth_t *a, const config_user_t *u, bool *full)
{
    uint8_t raw[TOKEN_BYTES];
    uint64_t now = gw_now_ns();
    session_t *slot = NULL, *own = NULL, *other = NULL;
    unsigned mine = 0, per_user = gw_config(a->gw)->http.max_sessions_per_user;

    *full = false;
    for (unsigned i = 0; i < a->session_cap; i++) {
        session_t *s = &a->sessions[i];
        if (!s->token[0] || s->expires_ns <= now) {
            slot = slot ? slot : s;
            continue;
        }
        if (strcmp(s->user, u->name) == 0) {
            mine++;
            own = !own || s->expires_ns < own->expires_ns ? s : own;
        } else if (s->role != CONFIG_ROLE_ADMIN) {
            other = !other || s->expires_ns < other->expires_ns ? s : other;
        }
    }
    if (own && per_user && mine >= per_user)
        slot = own;   /* its own oldest gives way: max_sessions_per_user */
    else if (!slot)
        slot = own && (!other || own->expires_ns < other->expires_ns) ? own : other;
    if (!slot) {
        a->sessions_full++;
        *full = true;
        return NULL;
    }
    if (slot->token[0] && slot->expires_ns > now)
        a->evicted++;
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return NULL;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(slot->token + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    snprintf(slot->user, sizeof slot->user, "%s", u->name);
    slot->role = u->role;
    slot->expires_ns = now + (uint64_t)gw_config(a->gw)->http.session_timeout_s * 1000000000ull;
    return slot;
}

static unsigned sessions_active(const web_auth_t *a)
{
    uint64_t now = gw_now_ns();
    unsigned n = 0;
    for (unsigned i = 0; i < a->session_cap; i++)
        n += a->sessions[i].token[0] && a->sessions[i].expires_ns > now;
    return n;
}

/* The session cookie's token in the Cookie header: its start and length. */
static const char *cookie_token(const char *cookies, size_t *n)
{
    for (const char *p = cookies; p && *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        size_t len = strcspn(p, ";");
        if (strncmp(p, COOKIE "=", sizeof COOKIE) == 0) {
            *n = len - sizeof COOKIE;
            return p + sizeof COOKIE;
        }
        p += len;
    }
    return NULL;
}

/* ---- who a request is ------------------------------------------------------------------ */

/* Does the request come from a page of this server? Its Origin, else its
 * Referer, must be this server's own origin (the scheme and the Host it
 * was asked as). */
static bool same_origin(const web_auth_t *a, struct evhttp_request *req, bool need)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *origin = evhttp_find_header(in, "Origin"), *referer = evhttp_find_header(in, "Referer");
    const char *host = evhttp_find_header(in, "Host");
    char own[320];

    if (!origin && !referer)
        return !need;
    if (!host)
        return false;
    int n = snprintf(own, sizeof own, "%s://%s", https_on(a) ? "https" : "http", host);
    if (n < 0 || (size_t)n >= sizeof own)
        return false;
    if (origin)
        return strcmp(origin, own) == 0;
    return strncmp(referer, own, (size_t)n) == 0 && (referer[n] == '/' || referer[n] == 0);
}

config_user_role_t web_auth_who(web_auth_t *a, struct evhttp_request *req, web_who_t *who)
{
    const config_http_t *cfg = &gw_config(a->gw)->http;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *auth = evhttp_find_header(in, "Authorization");
    size_t n = 0;

    *who = (web_who_t){ .role = CONFIG_ROLE_NONE, .via = "none", .why = "log in first: POST /login" };
    if (!is_read(req) && !same_origin(a, req, false)) {
        who->why = "cross-site request refused: its Origin is not this server";
        who->cross_site = true;
        return who->role;
    }
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        const char *tok = auth + 7;
        session_t *s = cfg->user_count ? session_find(a, tok, strlen(tok)) : NULL;
        if (s) {
            who->role = s->role;
            snprintf(who->name, sizeof who->name, "%s", s->user);
            who->via = "bearer";
        } else if (cfg->write_token[0] && same_secret(tok, cfg->write_token)) {
            /* the shortcut: the only credential without users, an operator's with them */
            who->role = cfg->user_count ? CONFIG_ROLE_OPERATOR : CONFIG_ROLE_ADMIN;
            snprintf(who->name, sizeof who->name, "write_token");
            who->via = "write_token";
        } else {
            who->why = "unknown or expired bearer token";
        }
    } else if (cfg->user_count) {
        const char *tok = cookie_token(evhttp_find_header(in, "Cookie"), &n);
        session_t *s = tok ? session_find(a, tok, n) : NULL;
        if (tok && !s) {
            who->why = "the session is unknown or expired: log in again";
        } else if (s && !is_read(req) && !same_origin(a, req, true)) {
            who->why = "a write with the session cookie needs an Origin of this server (cross-site request refused)";
            who->cross_site = true;
        } else if (s) {
            who->role = s->role;
            snprintf(who->name, sizeof who->name, "%s", s->user);
            who->via = "cookie";
        }
    }
    if (!cfg->user_count && who->role == CONFIG_ROLE_NONE && !auth) {
        who->role = CONFIG_ROLE_VIEWER;   /* no users: reads open, as always */
        who->via = "open";
    }
    return who->role;
}

bool web_auth_require(gw_t *gw, struct evhttp_request *req, config_user_role_t need)
{
    web_auth_t *a = http_auth(gw_http(gw));
    web_who_t who;
    char why[320];

    if (web_auth_who(a, req, &who) >= need)
        return true;
    a->refused++;
    if (who.cross_site) {
        web_reply_error(req, 403, "Forbidden", who.why);
        return false;
    }
    if (who.role == CONFIG_ROLE_NONE) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer realm=\"rtugw\"");
        web_reply_error(req, 401, "Unauthorized", who.why);
        return false;
    }
    snprintf(why, sizeof why, "%s is %s %s: this needs %s", who.name[0] ? who.name : "the client",
             who.role == CONFIG_ROLE_OPERATOR || who.role == CONFIG_ROLE_ADMIN ? "an" : "a",
             config_user_role_name(who.role), config_user_role_name(need));
    if (!is_read(req))
        web_audit_refused(gw, req, "refused: %s", why);
    web_reply_error(req, 403, "Forbidden", why);
    return false;
}

/* The role each route needs once users exist; NONE: open to all. */
static config_user_role_t route_needs(const web_auth_t *a, struct evhttp_request *req, const char *path)
{
    static const char *const open[] = { "/", "/index.html", "/app.js", "/config.js", "/scan.js", "/style.css", "/login",
                                        "/logout", "/whoami" };
    for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
        if (strcmp(path, open[i]) == 0)
            return CONFIG_ROLE_NONE;
    if (strcmp(path, "/metrics") == 0 && gw_config(a->gw)->http.metrics_open)
        return CONFIG_ROLE_NONE;
    if (strcmp(path, "/audit") == 0 || (strncmp(path, "/api/", 5) == 0 && !is_read(req)))
        return CONFIG_ROLE_ADMIN;
    if (is_read(req))
        return CONFIG_ROLE_VIEWER;
    return strncmp(path, "/tags/", 6) == 0 ? CONFIG_ROLE_OPERATOR : CONFIG_ROLE_ADMIN;
}

/* Refused before a hash is computed: the wait in Retry-After. */
static void reply_wait(struct evhttp_request *req, int code, const char *reason, unsigned wait_s, const char *why)
{
    char s[16];
    snprintf(s, sizeof s, "%u", wait_s);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", s);
    web_reply_error(req, code, reason, why);
}

/*
 * Bearer tokens are guessed as passwords are (issue 42: a 4-digit
 * write_token found in 4,712 requests, under a second, unaudited), so a
 * bearer token that matches nothing is a failed login: noted in the same
 * two tables, against the client's address and against one identity,
 * BEARER_KEY (the guesser's target is any token; protected, so no flood
 * of other keys pushes it out), audited and counted. While either record
 * slows its key down, requests with a bearer token are refused unheard
 * (429, Retry-After): from that address every one; from any address
 * every one but a login's session token (256 random bits, not what is
 * being guessed), the right write_token too: heard during the wait, it
 * would tell the guesser it is right. The cost: whoever can reach the
 * port can delay the write_token's clients by up to FAIL_DELAY_MAX_S
 * (fails.c) at a time, as a user's logins; docs/security.md says so. A success clears nothing: one
 * client's good token must not reset another's guessing. Run once per
 * request, by web_auth_route, before anything reads the credential.
 */
static bool bearer_gate(web_auth_t *a, struct evhttp_request *req)
{
    const config_http_t *cfg = &gw_config(a->gw)->http;
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    char addr[64];

    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return true;
    const char *tok = auth + 7;
    uint64_t now = gw_now_ns();
    peer_of(req, false, addr, sizeof addr);
    unsigned wait = fail_wait_s(a->addr_fails, addr, now);
    if (!wait && cfg->user_count && session_find(a, tok, strlen(tok)))
        return true;   /* a login's token (256 random bits): not slowed by others' guessing */
    unsigned wait_id = fail_wait_s(a->user_fails, BEARER_KEY, now);
    if (wait || wait_id) {
        a->bearer_throttled++;
        reply_wait(req, 429, "Too Many Requests", wait > wait_id ? wait : wait_id,
                   "too many wrong bearer tokens: wait before the next try");
        return false;
    }
    if (cfg->write_token[0] && same_secret(tok, cfg->write_token))
        return true;
    a->bearer_failures++;
    fail_note(a->addr_fails, addr, false, now);
    fail_note(a->user_fails, BEARER_KEY, true, now);
    web_audit_refused(a->gw, req, "bearer token refused: unknown or expired");
    return true;   /* answered as before: a write 401, a read by its route's rule */
}

bool web_auth_route(web_auth_t *a, struct evhttp_request *req, const char *path)
{
    web_who_t who;
    if (!bearer_gate(a, req))
        return false;
    if (!gw_config(a->gw)->http.user_count) {
        /* no users: only the cross-site rule applies */
        if (!is_read(req) && !same_origin(a, req, false)) {
            a->refused++;
            web_reply_error(req, 403, "Forbidden", "cross-site request refused: its Origin is not this server");
            return false;
        }
        return true;
    }
    config_user_role_t need = route_needs(a, req, path ? path : "");
    if (need == CONFIG_ROLE_NONE) {
        if (!is_read(req) && web_auth_who(a, req, &who) == CONFIG_ROLE_NONE && who.cross_site) {
            a->refused++;
            web_reply_error(req, 403, "Forbidden", who.why);
            return false;
        }
        return true;
    }
    return web_auth_require(a->gw, req, need);
}

/* ---- /login, /logout, /whoami ---------------------------------------------------------- */

/* A name a [user NAME] section can have (config/'s rule for names). */
static bool name_ok(const char *n)
{
    size_t len = strlen(n);
    if (!len || len >= CONFIG_NAME_MAX)
        return false;
    for (; *n; n++)
        if (!(*n == '_' || *n == '-' || *n == '.' || (*n >= '0' && *n <= '9') || (*n >= 'a' && *n <= 'z') ||
              (*n >= 'A' && *n <= 'Z')))
            return false;
    return true;
}

/* user and password from a JSON object or a form; 0, or an HTTP status with why. */
static int login_fields(struct evhttp_request *req, const char *body, size_t len, char *user, size_t ucap,
                        char *password, size_t pcap, char *why, size_t cap)
{
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    const char *u = NULL, *p = NULL;
    struct json_object *root = NULL, *v;
    struct evkeyvalq q;
    bool form = false;

    if (memchr(body, 0, len)) {
        snprintf(why, cap, "the login body has a NUL byte");
        return 400;
    }
    if (type && strncasecmp(type, "application/json", 16) == 0) {
        if (!(root = json_parse_request(body, len, 2, 8, why, cap)))
            return 400;
        if (json_object_is_type(root, json_type_object)) {
            if (json_object_object_get_ex(root, "user", &v) && json_object_is_type(v, json_type_string))
                u = json_object_get_string(v);
            if (json_object_object_get_ex(root, "password", &v) && json_object_is_type(v, json_type_string))
                p = json_object_get_string(v);
        }
    } else if (evhttp_parse_query_str(body, &q) == 0) {   /* it initialises q */
        form = true;
        u = evhttp_find_header(&q, "user");
        p = evhttp_find_header(&q, "password");
    }
    const char *bad = !u || !p ? "expected {\"user\": NAME, \"password\": PASSWORD} or user=NAME&password=PASSWORD"
                      : !name_ok(u) ? "the user name must be 1 to 63 letters, digits, '_', '-' or '.'"
                      : !*p || strlen(p) >= pcap ? "the password must be 1 to 256 bytes" : NULL;
    if (bad) {
        snprintf(why, cap, "%s", bad);
    } else {
        snprintf(user, ucap, "%s", u);
        snprintf(password, pcap, "%s", p);
    }
    if (form)
        evhttp_clear_headers(&q);
    json_object_put(root);
    return bad ? 400 : 0;
}

static const config_user_t *user_find(const config_http_t *h, const char *name)
{
    for (unsigned i = 0; i < h->user_count; i++)
        if (strcmp(h->users[i].name, name) == 0)
            return &h->users[i];
    return NULL;
}

static void set_cookie(web_auth_t *a, struct evhttp_request *req, const char *token, unsigned max_age)
{
    char c[200];
    snprintf(c, sizeof c, COOKIE "=%s; Path=/; Max-Age=%u; HttpOnly; SameSite=Strict%s", token, max_age,
             https_on(a) ? "; Secure" : "");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie", c);
}

static void on_login(web_auth_t *a, struct evhttp_request *req)
{
    const config_http_t *cfg = &gw_config(a->gw)->http;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    char body[LOGIN_BODY_MAX + 1], user[CONFIG_NAME_MAX], password[PASSWORD_MAX + 1], why[320];
    char addr[64];

    if (!cfg->user_count) {
        web_reply_error(req, 404, "Not Found", "no users are configured ([user NAME]): nothing to log in to");
        return;
    }
    if (len > LOGIN_BODY_MAX) {
        web_reply_error(req, 413, "Payload Too Large", "the login body is larger than 1024 bytes");
        return;
    }
    evbuffer_copyout(in, body, len);
    body[len] = 0;
    int status = login_fields(req, body, len, user, sizeof user, password, sizeof password, why, sizeof why);
    explicit_bzero(body, sizeof body);
    if (status) {
        web_reply_error(req, status, "Bad Request", why);
        return;
    }
    peer_of(req, false, addr, sizeof addr);
    uint64_t now = gw_now_ns();
    unsigned wait = fail_wait_s(a->addr_fails, addr, now), wait_user = fail_wait_s(a->user_fails, user, now);
    if (wait || wait_user) {
        a->login_throttled++;
        explicit_bzero(password, sizeof password);
        reply_wait(req, 429, "Too Many Requests", wait > wait_user ? wait : wait_user,
                   "too many failed logins: wait before the next try");
        return;
    }
    uint64_t second = gw_now_ns() / 1000000000ull;
    if (second != a->verify_second)
        a->verify_second = second, a->verify_used = 0;
    if (a->verify_used >= VERIFY_PER_SECOND) {
        a->login_busy++;
        explicit_bzero(password, sizeof password);
        reply_wait(req, 503, "Service Unavailable", 1, "too many logins at once: try again in a second");
        return;
    }
    a->verify_used++;
    /* An unknown user costs a hash too (the first user's), so the time of
     * the answer does not tell which names exist. */
    const config_user_t *u = user_find(cfg, user);
    bool ok = web_password_matches(password, u ? u->password_hash : cfg->users[0].password_hash) && u;
    explicit_bzero(password, sizeof password);
    if (!ok) {
        a->login_failures++;
        fail_note(a->addr_fails, addr, false, now);
        fail_note(a->user_fails, user, u != NULL, now);   /* a real user's record is never pushed out */
        /* a name that is no user's is not logged: it may be a password typed in the wrong field */
        if (u)
            web_audit_refused(a->gw, req, "login failed for user '%s'", u->name);
        else
            web_audit_refused(a->gw, req, "login failed for an unknown user");
        web_reply_error(req, 401, "Unauthorized", "wrong user or password");
        return;
    }
    fail_clear(a->addr_fails, addr, now);
    fail_clear(a->user_fails, user, now);
    bool full = false;
    session_t *s = session_new(a, u, &full);
    struct evbuffer *b = evbuffer_new();
    if (!s || !b) {
        if (b)
            evbuffer_free(b);
        if (full)
            reply_wait(req, 503, "Service Unavailable", 60, "no session free: every session is an admin's");
        else
            web_reply_error(req, 500, "Internal Server Error", "no session: out of randomness or memory");
        return;
    }
    a->logins++;
    set_cookie(a, req, s->token, cfg->session_timeout_s);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evbuffer_add_printf(b, "{\"ok\":true,\"user\":\"%s\",\"role\":\"%s\",\"token\":\"%s\",\"expires_in\":%u}\n",
                        u->name, config_user_role_name(u->role), s->token, cfg->session_timeout_s);
    web_audit(a->gw, req, "login as %s (%s)", u->name, config_user_role_name(u->role));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void on_logout(web_auth_t *a, struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *auth = evhttp_find_header(in, "Authorization"), *tok = NULL;
    size_t n = 0;

    if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
        tok = auth + 7, n = strlen(tok);
    else
        tok = cookie_token(evhttp_find_header(in, "Cookie"), &n);
    session_t *s = tok ? session_find(a, tok, n) : NULL;
    if (s) {
        web_audit(a->gw, req, "logout of %s", s->user);
        explicit_bzero(s, sizeof *s);
    }
    set_cookie(a, req, "", 0);
    web_reply_error(req, s ? 200 : 401, s ? "OK" : "Unauthorized", s ? "logged out" : "no session to end");
}

static void on_whoami(web_auth_t *a, struct evhttp_request *req)
{
    web_who_t who;
    char q[JSON_QUOTED_MAX(CONFIG_NAME_MAX)];
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    web_auth_who(a, req, &who);
    json_quote(q, sizeof q, who.name);
    evbuffer_add_printf(b, "{\"login_required\":%s,\"user\":%s,\"role\":\"%s\",\"via\":\"%s\"}\n",
                        gw_config(a->gw)->http.user_count ? "true" : "false", who.name[0] ? q : "null",
                        config_user_role_name(who.role), who.via);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

bool web_auth_handle(web_auth_t *a, struct evhttp_request *req, const char *path)
{
    bool login = strcmp(path, "/login") == 0, logout = strcmp(path, "/logout") == 0;
    if (strcmp(path, "/whoami") == 0) {
        on_whoami(a, req);
        return true;
    }
    if (strcmp(path, "/audit") == 0) {
        if (is_read(req)) {
            web_audit_json(a->gw, req);
        } else {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
            web_reply_error(req, 405, "Method Not Allowed", "GET /audit");
        }
        return true;
    }
    if (!login && !logout)
        return false;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        web_reply_error(req, 405, "Method Not Allowed", login ? "POST /login with user and password" : "POST /logout");
    } else if (login) {
        on_login(a, req);
    } else {
        on_logout(a, req);
    }
    return true;
}

/* ---- life ------------------------------------------------------------------------------ */

web_auth_t *web_auth_new(gw_t *gw)
{
    web_auth_t *a = calloc(1, sizeof *a);
    const config_http_t *cfg = &gw_config(gw)->http;
    if (!a)
        return NULL;
    a->gw = gw;
    a->session_cap = cfg->user_count ? cfg->max_sessions : 0;
    a->addr_fails = fail_table_new(FAILS_MAX);
    a->user_fails = fail_table_new(FAILS_MAX);
    if ((a->session_cap && !(a->sessions = calloc(a->session_cap, sizeof *a->sessions))) || !a->addr_fails ||
        !a->user_fails) {
        web_auth_free(a);
        return NULL;
    }
    return a;
}

/*
 * The users changed on SIGHUP (http.c, http_reload): a session whose user
 * is gone, or whose role or password is not what it logged in with, ends
 * now (a password changed is how an admin takes a login back); the others
 * go on. Returns how many ended.
 */
unsigned web_auth_users_changed(web_auth_t *a, const config_http_t *run, const config_http_t *fresh)
{
    unsigned ended = 0;
    for (unsigned i = 0; i < a->session_cap; i++) {
        session_t *s = &a->sessions[i];
        if (!s->token[0])
            continue;
        const config_user_t *now = user_find(fresh, s->user), *then = user_find(run, s->user);
        if (now && then && now->role == then->role && strcmp(now->password_hash, then->password_hash) == 0)
            continue;
        gw_log(a->gw, CONFIG_LOG_INFO, "SIGHUP: the session of %s ends: %s", s->user,
               !now ? "the user is gone" : "its role or password changed");
        explicit_bzero(s, sizeof *s);
        ended++;
    }
    return ended;
}

/* Running sessions first, an admin's before the others' (as session_new,
 * no admin's session gives way to another's), then the one expiring last
 * first; free slots last. */
static int by_expiry_desc(const void *x, const void *y)
{
    const session_t *p = x, *q = y;
    int ra = p->token[0] && p->role == CONFIG_ROLE_ADMIN, rb = q->token[0] && q->role == CONFIG_ROLE_ADMIN;
    uint64_t a = p->token[0] ? p->expires_ns : 0, b = q->token[0] ? q->expires_ns : 0;
    return ra != rb ? rb - ra : a < b ? 1 : a > b ? -1 : 0;
}

/*
 * A reload turned users on or off, or changed max_sessions (http.c,
 * http_reload): the session table is made again at its new size
 * (max_sessions with users, none without), allocated before anything
 * changes. Users turned on or off: every session ends (from none there were
 * none; to none, reads are open again and writes go by the write_token, and
 * no session may outlive the users that backed it). Otherwise the running
 * sessions move to the new table; a smaller one keeps the admins' first,
 * then those that expire last, the others end (counted evicted, as
 * max_sessions counts them).
 */
int web_auth_resize(web_auth_t *a, const config_http_t *run, const config_http_t *fresh, unsigned *ended)
{
    bool flip = !run->user_count != !fresh->user_count;
    unsigned cap = fresh->user_count ? fresh->max_sessions : 0, kept = 0;
    uint64_t now = gw_now_ns();
    *ended = 0;
    if (!flip && cap == a->session_cap)
        return 0;
    session_t *next = cap ? calloc(cap, sizeof *next) : NULL;
    if (cap && !next)
        return -1;
    if (a->session_cap)
        qsort(a->sessions, a->session_cap, sizeof *a->sessions, by_expiry_desc);
    for (unsigned i = 0; i < a->session_cap; i++) {
        session_t *s = &a->sessions[i];
        if (!s->token[0] || s->expires_ns <= now)
            continue;
        if (!flip && kept < cap) {
            next[kept++] = *s;
            continue;
        }
        gw_log(a->gw, CONFIG_LOG_INFO, "SIGHUP: the session of %s ends: %s", s->user,
               flip ? "users were turned off" : "max_sessions is lower");
        (*ended)++;
        a->evicted += !flip;
    }
    if (a->sessions)
        explicit_bzero(a->sessions, a->session_cap * sizeof *a->sessions);
    free(a->sessions);
    a->sessions = next;
    a->session_cap = cap;
    return 0;
}

void web_auth_free(web_auth_t *a)
{
    if (!a)
        return;
    if (a->sessions)
        explicit_bzero(a->sessions, a->session_cap * sizeof *a->sessions);
    free(a->sessions);
    fail_table_free(a->addr_fails);
    fail_table_free(a->user_fails);
    free(a);
}

void web_auth_metrics(const web_auth_t *a, struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP rtugw_http_bearer_failures_total Bearer tokens that matched nothing (audited)\n"
                           "# TYPE rtugw_http_bearer_failures_total counter\nrtugw_http_bearer_failures_total %llu\n"
                           "# HELP rtugw_http_bearer_throttled_total Requests with a bearer token refused unheard "
                           "(429): too many wrong tokens from that address or in all\n"
                           "# TYPE rtugw_http_bearer_throttled_total counter\nrtugw_http_bearer_throttled_total "
                           "%llu\n", (unsigned long long)a->bearer_failures, (unsigned long long)a->bearer_throttled);
    if (!gw_config(a->gw)->http.user_count)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_http_logins_total Logins that opened a session\n"
                           "# TYPE rtugw_http_logins_total counter\nrtugw_http_logins_total %llu\n"
                           "# HELP rtugw_http_login_failures_total Logins refused: wrong user or password\n"
                           "# TYPE rtugw_http_login_failures_total counter\nrtugw_http_login_failures_total %llu\n"
                           "# HELP rtugw_http_login_throttled_total Logins refused unheard (429): too many failures "
                           "from that address or for that user\n"
                           "# TYPE rtugw_http_login_throttled_total counter\nrtugw_http_login_throttled_total %llu\n"
                           "# HELP rtugw_http_login_busy_total Logins refused unheard (503): the hashing budget of "
                           "the second spent\n"
                           "# TYPE rtugw_http_login_busy_total counter\nrtugw_http_login_busy_total %llu\n"
                           "# HELP rtugw_http_auth_refused_total Requests refused 401 or 403 (no session, role, "
                           "cross-site)\n"
                           "# TYPE rtugw_http_auth_refused_total counter\nrtugw_http_auth_refused_total %llu\n"
                           "# HELP rtugw_http_sessions Sessions open\n"
                           "# TYPE rtugw_http_sessions gauge\nrtugw_http_sessions %u\n"
                           "# HELP rtugw_http_sessions_evicted_total Sessions ended early: max_sessions or "
                           "max_sessions_per_user reached\n"
                           "# TYPE rtugw_http_sessions_evicted_total counter\nrtugw_http_sessions_evicted_total %llu\n"
                           "# HELP rtugw_http_sessions_full_total Logins refused (503): every other session an "
                           "admin's\n"
                           "# TYPE rtugw_http_sessions_full_total counter\nrtugw_http_sessions_full_total %llu\n",
                        (unsigned long long)a->logins, (unsigned long long)a->login_failures,
                        (unsigned long long)a->login_throttled, (unsigned long long)a->login_busy,
                        (unsigned long long)a->refused, sessions_active(a), (unsigned long long)a->evicted,
                        (unsigned long long)a->sessions_full);
    evbuffer_add_printf(b, "# HELP rtugw_http_login_records_evicted_total Failed-login records pushed out by new "
                           "keys (table: address or user; penalized: it was slowing its key down)\n"
                           "# TYPE rtugw_http_login_records_evicted_total counter\n");
    const fail_table_t *tables[2] = { a->addr_fails, a->user_fails };
    for (int k = 0; k < 2; k++) {
        uint64_t ev, pen;
        fail_evictions(tables[k], &ev, &pen);
        evbuffer_add_printf(b, "rtugw_http_login_records_evicted_total{table=\"%s\",penalized=\"false\"} %llu\n"
                               "rtugw_http_login_records_evicted_total{table=\"%s\",penalized=\"true\"} %llu\n",
                            k ? "user" : "address", (unsigned long long)(ev - pen), k ? "user" : "address",
                            (unsigned long long)pen);
    }
}

void web_auth_peer(struct evhttp_request *req, char *out, size_t cap)
{
    peer_of(req, true, out, cap);
}
