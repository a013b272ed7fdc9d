/*
 * web/api.c -- the configuration API under /api/ (docs/api.md), on the I/O
 * thread.
 *
 * The INI file (and its CSVs) stays the source of truth: the API reads it,
 * validates a new text with the very loader `rtugw check` uses (config/ with
 * drivers/' rules, gw_options(gw)->bus_rule), writes it atomically and applies it
 * through the reload SIGHUP runs (gw_reload), so an API change and a hand
 * edit + SIGHUP are the same thing, applied live where the reload can, and
 * named in restart_needed where it cannot.
 *
 *   GET  /api/buses | devices | templates | tags | maps   the running configuration
 *   GET  /api/config                            the file's text and revision
 *   POST /api/config/validate                   dry run: check a text, change nothing
 *   PUT  /api/config (If-Match: REVISION)       check, write, apply
 *   PUT|DELETE /api/devices|tags|templates|polls|buses/NAME   one section
 *   GET  /api/openapi.json                      the OpenAPI description of these
 *
 * Revision: FNV-1a 64 of the file's bytes, in hex; a PUT whose If-Match is
 * not the file's revision now gets 409 (two editors cannot overwrite each
 * other; an edit by hand changes the revision too). Atomic: the text goes to
 * a temporary file in the same folder, fsync'd, renamed over the file, and
 * the folder fsync'd, so a crash leaves the old file or the new one, never a
 * mix. Writes and GET /api/config (the file holds secrets) need an admin
 * (web_auth_require: the write_token without [user]s, an admin's session
 * with them); the lists are open like /tags.
 * Bodies are bounded by [http] max_body_bytes (evhttp), and a text with a
 * NUL byte is refused.
 */
#include "web/internal.h"

#include "json/json.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <json-c/json.h>
#include <unistd.h>

#define API_FILE_MAX (16u << 20)   /* a configuration file larger than this is not served */

void api_add_str(struct evbuffer *b, const char *s)
{
    size_t n = strlen(s);
    char stack[512], *q = JSON_QUOTED_MAX(n) <= sizeof stack ? stack : malloc(JSON_QUOTED_MAX(n));
    if (!q) {
        evbuffer_add(b, "\"\"", 2);
        return;
    }
    json_quote(q, JSON_QUOTED_MAX(n), s);
    evbuffer_add(b, q, strlen(q));
    if (q != stack)
        free(q);
}

/* Every answer goes out here: a refusal (4xx) is counted (rtugw_http_api_refused_total). */
void api_reply_json(gw_t *gw, struct evhttp_request *req, int code, const char *reason, struct evbuffer *b)
{
    if (code >= 400 && code < 500)
        web_count(gw, api_refused);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, code, reason, b);
}

void api_reply_error(gw_t *gw, struct evhttp_request *req, int code, const char *reason, const char *why)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"error\":");
    api_add_str(b, why);
    evbuffer_add_printf(b, "}\n");
    api_reply_json(gw, req, code, reason, b);
    evbuffer_free(b);
}

void api_revision(const char *text, size_t len, char out[17])
{
    config_revision(text, len, out);   /* config/revision.c: one revision for the API, /status and MQTT */
}

/* The file's bytes (NUL-terminated, *len of them), or NULL with errno. */
char *api_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            if (cap >= API_FILE_MAX) {
                errno = EFBIG;
                break;
            }
            char *p = realloc(buf, cap = cap ? 2 * cap : 8192);
            if (!p)
                break;
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (!ferror(f)) {
                fclose(f);
                buf[n] = 0;
                *len = n;
                return buf;
            }
            break;
        }
    }
    int e = errno;
    fclose(f);
    free(buf);
    errno = e;
    return NULL;
}

/* ---- the lists --------------------------------------------------------------- */

static void list_buses(const config_t *cfg, struct evbuffer *b)
{
    evbuffer_add_printf(b, "{\"buses\":[");
    for (unsigned i = 0; i < config_bus_listed(cfg); i++) {
        const config_bus_t *bus = &cfg->buses[config_bus_at(cfg, i)];
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        api_add_str(b, bus->name);
        evbuffer_add_printf(b, ",\"port\":");
        api_add_str(b, bus->port);
        evbuffer_add_printf(b, ",\"baud\":%u,\"response_timeout_ms\":%u,\"retries\":%u,\"gap_us\":%u}", bus->baud,
                            bus->response_timeout_ms, bus->retries, bus->gap_us);
    }
    evbuffer_add_printf(b, "]}\n");
}

static void list_devices(gw_t *gw, struct evbuffer *b)
{
    const config_t *cfg = gw_config(gw);
    const tags_table_t *defs = gw_tags_defs(gw_tags(gw));
    evbuffer_add_printf(b, "{\"devices\":[");
    for (unsigned i = 0; i < cfg->device_count; i++) {
        const config_device_t *d = &cfg->devices[i];
        int td = tags_table_find_device(defs, d->name);
        size_t n = 0;
        if (td >= 0)
            tags_table_device_tags(defs, (size_t)td, &n);
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        api_add_str(b, d->name);
        evbuffer_add_printf(b, ",\"bus\":");
        api_add_str(b, cfg->buses[d->bus].name);
        evbuffer_add_printf(b, ",\"slave\":%u,\"template\":", d->slave);
        if (d->template_name[0])
            api_add_str(b, d->template_name);
        else
            evbuffer_add_printf(b, "null");
        evbuffer_add_printf(b, ",\"tags_file\":");
        if (d->tags_file[0])
            api_add_str(b, d->tags_file);
        else
            evbuffer_add_printf(b, "null");
        evbuffer_add_printf(b, ",\"order\":\"%s\",\"interval_ms\":%u,\"timeout_ms\":%u,\"dead_after\":%u,"
                               "\"dead_backoff_ms\":%u,\"tags\":%zu}",
                            tags_order_name(d->order, TAGS_UINT32), d->interval_ms, d->timeout_ms, d->dead_after,
                            d->dead_backoff_ms, n);
    }
    evbuffer_add_printf(b, "]}\n");
}

static void list_templates(const config_t *cfg, struct evbuffer *b)
{
    evbuffer_add_printf(b, "{\"templates\":[");
    for (unsigned i = 0; i < cfg->template_count; i++) {
        const config_template_t *tp = &cfg->templates[i];
        unsigned users = 0;
        for (unsigned d = 0; d < cfg->device_count; d++)
            users += cfg->devices[d].template_index == (int)i;
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        api_add_str(b, tp->name);
        evbuffer_add_printf(b, ",\"tags_file\":");
        api_add_str(b, tp->tags_file);
        evbuffer_add_printf(b, ",\"interval_ms\":%u,\"devices\":%u}", tp->interval_ms, users);
    }
    evbuffer_add_printf(b, "]}\n");
}

static void list_tags(gw_t *gw, struct evbuffer *b)
{
    const tags_table_t *defs = gw_tags_defs(gw_tags(gw));
    evbuffer_add_printf(b, "{\"tags\":[");
    for (size_t i = 0; i < tags_table_count(defs); i++) {
        const tags_tag_t *g = tags_table_tag(defs, i);
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        api_add_str(b, g->name);
        evbuffer_add_printf(b, ",\"device\":");
        api_add_str(b, tags_table_device_name(defs, g->device));
        evbuffer_add_printf(b, ",\"table\":\"%s\",\"address\":%u,\"type\":\"%s\",\"interval_ms\":%u}",
                            tags_area_name(g->area), g->address, tags_type_name(g->type), g->interval_ms);
    }
    evbuffer_add_printf(b, "]}\n");
}

/* ---- the file ------------------------------------------------------------------ */

/* The request's body as a NUL-terminated text, or NULL (answered). */
static char *body_text(gw_t *gw, struct evhttp_request *req, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    char *text = malloc(n + 1);
    if (!text) {
        api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
        return NULL;
    }
    evbuffer_copyout(in, text, n);
    text[n] = 0;
    if (memchr(text, 0, n)) {
        free(text);
        api_reply_error(gw, req, 400, "Bad Request", "the text holds a NUL byte");
        return NULL;
    }
    *len = n;
    return text;
}

/* Validates text as the configuration file (relative paths from its folder):
 * NULL and errs filled when check would refuse it. */
/* [gateway] data_dirs says where the files the configuration names may be
 * (config/paths.c); changed through the API it would let the API's caller
 * name any file again, so only a hand edit (and a reload) changes it. */
config_t *api_validate(gw_t *gw, const char *text, config_errors_t *errs)
{
    config_t *cfg = config_load_string_with(text, gw_options(gw)->config_path, gw_options(gw)->bus_rule, errs);
    if (cfg && strcmp(cfg->data_dirs, gw_config(gw)->data_dirs) != 0) {
        snprintf(errs->text[0], sizeof errs->text[0], "[gateway] data_dirs = '%s': not changed through the API "
                 "(it widens which files the configuration may name): edit the file by hand", cfg->data_dirs);
        errs->count = errs->total = 1;
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

void api_add_errors(struct evbuffer *b, const config_errors_t *errs)
{
    evbuffer_add_printf(b, "\"errors\":[");
    for (unsigned i = 0; i < errs->count; i++) {
        evbuffer_add_printf(b, "%s", i ? "," : "");
        api_add_str(b, errs->text[i]);
    }
    evbuffer_add_printf(b, "],\"error_count\":%u", errs->total);
}

/* What check says beside its verdict (tags_lint: Modicon-looking
 * addresses, one-based maps, overlapping tags), as ,"warnings":[...] with
 * the first API_WARNINGS_MAX lines and "warning_count": the API says what
 * `rtugw check` says, warnings included. */
#define API_WARNINGS_MAX 64
typedef struct warn_sink {
    struct evbuffer *b;
    unsigned n;
} warn_sink_t;

static void add_warning(void *ctx, const char *line)
{
    warn_sink_t *w = ctx;
    if (w->n < API_WARNINGS_MAX) {
        evbuffer_add_printf(w->b, "%s", w->n ? "," : "");
        api_add_str(w->b, line);
    }
    w->n++;
}

void api_add_warnings(struct evbuffer *b, const config_t *cfg)
{
    warn_sink_t w = { b, 0 };
    evbuffer_add_printf(b, ",\"warnings\":[");
    if (cfg->tags)
        tags_lint(cfg->tags, cfg->source, add_warning, &w);
    evbuffer_add_printf(b, "],\"warning_count\":%u", w.n);
}

void api_add_reload_result(gw_t *gw, struct evbuffer *b)
{
    evbuffer_add_printf(b, ",\"restart_needed\":");
    api_add_str(b, gw_restart_needed(gw));
    evbuffer_add_printf(b, ",\"queued\":");
    api_add_str(b, gw_reload_queued(gw));
}

/* POST /api/config/validate: what check says of the body; nothing written or applied. */
static void post_validate(gw_t *gw, struct evhttp_request *req, struct evbuffer *b)
{
    size_t len;
    char *text = body_text(gw, req, &len);
    if (!text)
        return;
    config_errors_t *errs = malloc(sizeof *errs);
    config_t *cfg = errs ? api_validate(gw, text, errs) : NULL;
    free(text);
    if (!errs) {
        api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
        return;
    }
    if (cfg) {
        char summary[256];
        config_summary(cfg, summary, sizeof summary);
        evbuffer_add_printf(b, "{\"valid\":true,\"summary\":");
        api_add_str(b, summary);
        api_add_warnings(b, cfg);
        evbuffer_add_printf(b, "}\n");
        api_reply_json(gw, req, 200, "OK", b);
    } else {
        evbuffer_add_printf(b, "{\"valid\":false,");
        api_add_errors(b, errs);
        evbuffer_add_printf(b, "}\n");
        api_reply_json(gw, req, 422, "Unprocessable Entity", b);
    }
    config_free(cfg);
    free(errs);
}

/* text over path: a temporary file beside it, fsync'd, renamed, the folder
 * fsync'd. A symbolic link is followed (its target is written), so a link in
 * /etc to a file elsewhere stays a link. */
int api_write_atomically(const char *link, const char *text, size_t len, char *why, size_t cap)
{
    char tmp[PATH_MAX], dir[PATH_MAX], real[PATH_MAX];
    const char *path = realpath(link, real) ? real : link;
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    if (snprintf(tmp, sizeof tmp, "%s.api-XXXXXX", path) >= (int)sizeof tmp) {
        snprintf(why, cap, "the file's name is too long");
        return -1;
    }
    /* mkstemp makes it 0600, and 0600 it stays while it is only a
     * temporary: the text may hold secrets (password hashes, the
     * write_token), and a temporary left by a kill -9 must not show them.
     * The file's own mode is given back after the rename. */
    struct stat st;
    bool had_mode = stat(path, &st) == 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, cap, "cannot create a file beside %s: %s", path, strerror(errno));
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    int e = done == len ? (fsync(fd) == 0 ? 0 : errno) : errno ? errno : EIO;
    if (e == 0 && rename(tmp, path) != 0)
        e = errno;
    if (e == 0 && had_mode)
        (void)fchmod(fd, st.st_mode & 07777);   /* the file keeps its permissions, once in place */
    close(fd);
    if (e) {
        unlink(tmp);
        snprintf(why, cap, "cannot write %s: %s", path, strerror(e));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);   /* the rename itself survives a power loss */
        close(dfd);
    }
    return 0;
}

/* The API's key: an admin (web/auth.c's one check: without [user]s, the
 * write_token is an admin's and no credential a viewer's; with users, an
 * admin's session). Answered (401 or 403) and counted when not. */
bool api_admin_ok(gw_t *gw, struct evhttp_request *req)
{
    if (web_auth_require(gw, req, ROLE_ADMIN))
        return true;
    web_count(gw, api_refused);
    return false;
}

/* GET /api/config: the text and its revision (also as ETag). */
static void get_config(gw_t *gw, struct evhttp_request *req, struct evbuffer *b)
{
    size_t len;
    char *text = api_read_file(gw_options(gw)->config_path, &len), rev[17];
    if (!text) {
        api_reply_error(gw, req, 500, "Internal Server Error", strerror(errno));
        return;
    }
    api_revision(text, len, rev);
    evbuffer_add_printf(b, "{\"path\":");
    api_add_str(b, gw_options(gw)->config_path);
    evbuffer_add_printf(b, ",\"revision\":\"%s\",\"text\":", rev);
    api_add_str(b, text);
    evbuffer_add_printf(b, "}\n");
    char etag[20];
    snprintf(etag, sizeof etag, "\"%s\"", rev);
    evhttp_add_header(evhttp_request_get_output_headers(req), "ETag", etag);
    api_reply_json(gw, req, 200, "OK", b);
    free(text);
}

/* The file now and its revision; NULL answered (500). */
char *api_current(gw_t *gw, struct evhttp_request *req, size_t *len, char rev[17])
{
    char *text = api_read_file(gw_options(gw)->config_path, len);
    if (!text) {
        api_reply_error(gw, req, 500, "Internal Server Error", strerror(errno));
        return NULL;
    }
    api_revision(text, *len, rev);
    return text;
}

/* If-Match names rev; else answered (428 without one, 409 with another). */
bool api_revision_matches(gw_t *gw, struct evhttp_request *req, const char *rev, struct evbuffer *b)
{
    const char *match = evhttp_find_header(evhttp_request_get_input_headers(req), "If-Match");
    char quoted[20];
    snprintf(quoted, sizeof quoted, "\"%s\"", rev);
    if (!match) {
        api_reply_error(gw, req, 428, "Precondition Required", "If-Match: the revision the change was made from "
                    "(GET /api/config)");
        return false;
    }
    if (strcmp(match, rev) != 0 && strcmp(match, quoted) != 0) {
        evbuffer_add_printf(b, "{\"error\":\"the file changed since that revision\",\"revision\":\"%s\"}\n", rev);
        api_reply_json(gw, req, 409, "Conflict", b);
        return false;
    }
    return true;
}

/* The one write path: text passes check (else 422, nothing written), is
 * written atomically, and applied as SIGHUP does. Takes text. The answer's
 * body goes into b; its HTTP status is returned (500: why in b as
 * {"error"}). req: the HTTP request (its audit entry), or NULL (the MQTT
 * module's config/set, web_config_put: logged instead). */
static int commit(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, char *text, size_t len)
{
    char rev[17], why[PATH_MAX + 128];
    config_errors_t *errs = malloc(sizeof *errs);
    config_t *cfg = errs ? api_validate(gw, text, errs) : NULL;
    if (!cfg) {
        int code = errs ? 422 : 500;
        if (errs) {
            evbuffer_add_printf(b, "{\"valid\":false,");
            api_add_errors(b, errs);
            evbuffer_add_printf(b, "}\n");
        } else {
            evbuffer_add_printf(b, "{\"error\":\"out of memory\"}\n");
        }
        free(errs);
        free(text);
        return code;
    }
    free(errs);
    int rc = api_write_atomically(gw_options(gw)->config_path, text, len, why, sizeof why);
    api_revision(text, len, rev);
    free(text);
    if (rc != 0) {
        config_free(cfg);
        evbuffer_add_printf(b, "{\"error\":");
        api_add_str(b, why);
        evbuffer_add_printf(b, "}\n");
        return 500;
    }
    gw_log(gw, CONFIG_LOG_INFO, "%s: %s written (revision %s); applying it", req ? "api" : "mqtt config/set",
           gw_options(gw)->config_path, rev);
    if (req)
        web_audit(gw, req, "%s %s: configuration written, revision %s",
                  evhttp_request_get_command(req) == EVHTTP_REQ_DELETE ? "DELETE" : "PUT", evhttp_request_get_uri(req),
                  rev);
    web_count(gw, api_changes);
    gw_reload(gw);
    evbuffer_add_printf(b, "{\"revision\":\"%s\"", rev);
    api_add_reload_result(gw, b);
    api_add_warnings(b, cfg);
    config_free(cfg);
    evbuffer_add_printf(b, "}\n");
    return 200;
}

void api_commit_text(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, char *text, size_t len)
{
    int code = commit(gw, req, b, text, len);
    api_reply_json(gw, req, code, code == 200 ? "OK" : code == 422 ? "Unprocessable Entity" : "Internal Server Error",
                   b);
}

int web_config_put(gw_t *gw, const char *if_match, char *text, size_t len, struct evbuffer *b)
{
    size_t old_len;
    char rev[17];
    char *old = api_read_file(gw_options(gw)->config_path, &old_len);
    if (!old) {
        free(text);
        evbuffer_add_printf(b, "{\"error\":");
        api_add_str(b, strerror(errno));
        evbuffer_add_printf(b, "}\n");
        return 500;
    }
    api_revision(old, old_len, rev);
    free(old);
    if (!if_match || strcmp(if_match, rev) != 0) {   /* as If-Match: the revision the change was made from */
        free(text);
        evbuffer_add_printf(b, "{\"error\":\"%s\",\"revision\":\"%s\"}\n",
                            if_match ? "the file changed since that revision" : "if_match: the revision the change "
                            "was made from is required", rev);
        return if_match ? 409 : 428;
    }
    if (memchr(text, 0, len)) {
        free(text);
        evbuffer_add_printf(b, "{\"error\":\"the text holds a NUL byte\"}\n");
        return 400;
    }
    return commit(gw, NULL, b, text, len);
}

/* PUT /api/config: If-Match the revision now, the body passes check: written, then applied. */
static void put_config(gw_t *gw, struct evhttp_request *req, struct evbuffer *b)
{
    size_t len, old_len;
    char rev[17];
    char *old = api_current(gw, req, &old_len, rev);
    if (!old)
        return;
    free(old);
    if (!api_revision_matches(gw, req, rev, b))
        return;
    char *text = body_text(gw, req, &len);
    if (text)
        api_commit_text(gw, req, b, text, len);
}


/* GET /api/openapi.json: this file's calls, for clients and generators
 * (OpenAPI 3.0). Static: it changes with the code, not the configuration. */
static const char openapi[] =
    "{\"openapi\":\"3.0.3\",\"info\":{\"title\":\"rtugw configuration API\",\"version\":\"1\","
    "\"description\":\"docs/api.md\"},"
    "\"components\":{\"securitySchemes\":{\"token\":{\"type\":\"http\",\"scheme\":\"bearer\"}},"
    "\"parameters\":{\"IfMatch\":{\"name\":\"If-Match\",\"in\":\"header\",\"required\":true,"
    "\"schema\":{\"type\":\"string\"}},\"Name\":{\"name\":\"name\",\"in\":\"path\",\"required\":true,"
    "\"schema\":{\"type\":\"string\"}}}},"
    "\"paths\":{"
    "\"/api/buses\":{\"get\":{\"summary\":\"the running buses\",\"responses\":{\"200\":{\"description\":\"{buses:[...]}\"}}}},"
    "\"/api/devices\":{\"get\":{\"summary\":\"the running devices\",\"responses\":{\"200\":{\"description\":\"{devices:[...]}\"}}}},"
    "\"/api/templates\":{\"get\":{\"summary\":\"the templates\",\"responses\":{\"200\":{\"description\":\"{templates:[...]}\"}}}},"
    "\"/api/tags\":{\"get\":{\"summary\":\"every tag's definition\",\"responses\":{\"200\":{\"description\":\"{tags:[...]}\"}}}},"
    "\"/api/maps\":{\"get\":{\"summary\":\"the [map] virtual slaves and their entries\",\"responses\":{\"200\":{\"description\":\"{maps:[...]}\"}}}},"
    "\"/api/config\":{\"get\":{\"summary\":\"the file and its revision\",\"security\":[{\"token\":[]}],"
    "\"responses\":{\"200\":{\"description\":\"{path,revision,text}\"},\"403\":{\"description\":\"no token\"}}},"
    "\"put\":{\"summary\":\"check, write atomically, apply\",\"security\":[{\"token\":[]}],"
    "\"parameters\":[{\"$ref\":\"#/components/parameters/IfMatch\"}],"
    "\"requestBody\":{\"content\":{\"text/plain\":{\"schema\":{\"type\":\"string\"}}}},"
    "\"responses\":{\"200\":{\"description\":\"{revision,restart_needed,queued}\"},\"409\":{\"description\":\"stale revision\"},"
    "\"422\":{\"description\":\"check refused it: {valid:false,errors}\"},\"428\":{\"description\":\"no If-Match\"}}}},"
    "\"/api/config/validate\":{\"post\":{\"summary\":\"dry run: check a text\",\"security\":[{\"token\":[]}],"
    "\"requestBody\":{\"content\":{\"text/plain\":{\"schema\":{\"type\":\"string\"}}}},"
    "\"responses\":{\"200\":{\"description\":\"{valid:true,summary}\"},\"422\":{\"description\":\"{valid:false,errors}\"}}}},"
    "\"/api/scan\":{\"get\":{\"summary\":\"every bus's scan\",\"responses\":{\"200\":{\"description\":\"{scans:[...]}\"}}},"
    "\"post\":{\"summary\":\"scan a bus (api_scan.c)\",\"security\":[{\"token\":[]}],"
    "\"requestBody\":{\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},"
    "\"responses\":{\"202\":{\"description\":\"{bus,state,...}\"},\"400\":{\"description\":\"a bad field, named\"},"
    "\"409\":{\"description\":\"busy, polled without pause_polling, listen-only, port down\"},"
    "\"413\":{\"description\":\"a body over 1024 bytes\"}}}},"
    "\"/api/scan/{name}\":{\"parameters\":[{\"$ref\":\"#/components/parameters/Name\"}],\"get\":{\"summary\":"
    "\"one bus's scan: progress, then results\",\"responses\":{\"200\":{\"description\":"
    "\"{bus,state,first_id,last_id,ids,tried,current_id,elapsed_s,polling_paused,error,found}\"},"
    "\"404\":{\"description\":\"no such bus\"}}}},"
#define SECTION_PATH(p)                                                                                        \
    "\"/api/" p "/{name}\":{\"parameters\":[{\"$ref\":\"#/components/parameters/Name\"},"                       \
    "{\"$ref\":\"#/components/parameters/IfMatch\"}],\"put\":{\"summary\":\"add or replace the section\","         \
    "\"security\":[{\"token\":[]}],\"requestBody\":{\"content\":{\"application/json\":{\"schema\":"            \
    "{\"type\":\"object\"}}}},\"responses\":{\"200\":{\"description\":\"{revision,restart_needed,queued}\"},"         \
    "\"400\":{\"description\":\"a bad body\"},\"409\":{\"description\":\"stale revision\"},"                   \
    "\"422\":{\"description\":\"check refused it\"}}},\"delete\":{\"summary\":\"remove the section\","          \
    "\"security\":[{\"token\":[]}],\"responses\":{\"200\":{\"description\":\"{revision,restart_needed,queued}\"},"     \
    "\"404\":{\"description\":\"no such section\"},\"409\":{\"description\":\"stale revision\"}}}}"
#define CSV_PATH(p, whose)                                                                                     \
    "\"/api/" p "/{name}/csv\":{\"parameters\":[{\"$ref\":\"#/components/parameters/Name\"}],"                    \
    "\"get\":{\"summary\":\"" whose " tag file\",\"responses\":{\"200\":{\"description\":\"text/csv, ETag\"}}},"  \
    "\"put\":{\"summary\":\"check (dry_run=1: only that), write atomically, apply\",\"security\":[{\"token\":[]}],"  \
    "\"parameters\":[{\"name\":\"dry_run\",\"in\":\"query\",\"schema\":{\"type\":\"string\"}},"                 \
    "{\"name\":\"If-Match\",\"in\":\"header\",\"schema\":{\"type\":\"string\"}}],"                               \
    "\"requestBody\":{\"content\":{\"text/csv\":{\"schema\":{\"type\":\"string\"}}}},"                             \
    "\"responses\":{\"200\":{\"description\":\"{revision,rows,restart_needed,queued} or {valid:true,rows}\"},"               \
    "\"409\":{\"description\":\"stale revision\"},\"413\":{\"description\":\"too many bytes or rows\"},"            \
    "\"422\":{\"description\":\"{valid:false,errors:[{line,column,message}]}\"}}}},"
    CSV_PATH("templates", "the template's") CSV_PATH("devices", "the device's own (tags_file)")
#undef CSV_PATH
    SECTION_PATH("devices") "," SECTION_PATH("tags") "," SECTION_PATH("templates") "," SECTION_PATH("polls") ","
    SECTION_PATH("buses")
#undef SECTION_PATH
    "}}\n";

bool api_request(gw_t *gw, struct evhttp_request *req, const char *path)
{
    if (strncmp(path, "/api/", 5) != 0)
        return false;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const char *what = path + 5;
    bool get = cmd == EVHTTP_REQ_GET, config = strcmp(what, "config") == 0;
    bool validate_path = strcmp(what, "config/validate") == 0;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return true;
    }
    if (api_scan_request(gw, req, what, b)) {   /* scan, scan/BUS (api_scan.c) */
        evbuffer_free(b);
        return true;
    }
    if (api_csv_request(gw, req, what, b)) {   /* templates/NAME/csv, devices/NAME/csv: before the sections */
        evbuffer_free(b);
        return true;
    }
    const char *name = NULL, *kind = api_section_kind(what, &name);
    if ((config || validate_path || kind) && !gw_options(gw)->config_path) {
        api_reply_error(gw, req, 404, "Not Found", "no configuration file (the built-in demo)");
    } else if (kind && (cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_DELETE)) {
        if (api_admin_ok(gw, req))
            api_edit_section(gw, req, b, kind, name, cmd == EVHTTP_REQ_DELETE);
    } else if (kind) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "PUT, DELETE");
        api_reply_error(gw, req, 405, "Method Not Allowed", "see docs/api.md");
    } else if (get && strcmp(what, "openapi.json") == 0) {
        evbuffer_add(b, openapi, sizeof openapi - 1);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (get && strcmp(what, "buses") == 0) {
        list_buses(gw_config(gw), b);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (get && strcmp(what, "devices") == 0) {
        list_devices(gw, b);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (get && strcmp(what, "templates") == 0) {
        list_templates(gw_config(gw), b);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (get && strcmp(what, "tags") == 0) {
        list_tags(gw, b);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (get && strcmp(what, "maps") == 0) {
        api_list_maps(gw, b);
        api_reply_json(gw, req, 200, "OK", b);
    } else if (config && get) {
        if (api_admin_ok(gw, req))
            get_config(gw, req, b);
    } else if (config && cmd == EVHTTP_REQ_PUT) {
        if (api_admin_ok(gw, req))
            put_config(gw, req, b);
    } else if (validate_path && cmd == EVHTTP_REQ_POST) {
        if (api_admin_ok(gw, req))
            post_validate(gw, req, b);
    } else if (config || validate_path || strcmp(what, "buses") == 0 || strcmp(what, "devices") == 0 ||
               strcmp(what, "templates") == 0 || strcmp(what, "tags") == 0 || strcmp(what, "maps") == 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          config ? "GET, PUT" : validate_path ? "POST" : "GET");
        api_reply_error(gw, req, 405, "Method Not Allowed", "see docs/api.md");
    } else {
        api_reply_error(gw, req, 404, "Not Found", "no such API path (docs/api.md)");
    }
    evbuffer_free(b);
    return true;
}
