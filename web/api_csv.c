/*
 * web/api_csv.c -- a tag file as CSV through the API (docs/api.md), on the
 * I/O thread: a template's register list, or a device's own tags_file.
 *
 *   GET /api/templates/NAME/csv                  the file's bytes, ETag its revision
 *   PUT /api/templates/NAME/csv?dry_run=1        the errors as JSON; nothing written
 *   PUT /api/templates/NAME/csv (If-Match)       checked, written atomically, applied
 *   (the same three for /api/devices/NAME/csv, a device with a tags_file)
 *
 * One loader: the body is read by tags/csv.c's tags_load_csv_string, the
 * reader `rtugw check` and the reload use, so its errors are theirs
 * ("FILE:LINE:COLUMN: column 'value': reason", every bad value of the file in
 * one pass), given back as {line, column, message} for the page to show by
 * row; a template's read once per addressing among its devices (the one
 * default that changes which rows are errors), a device's file once with
 * every device that names it (its device column picks among them), as
 * config/tags.c reads them. Then the whole configuration is checked with the
 * new bytes in place of the file's (config_load_string_over: a template's
 * rows times its devices against the tag limits, names), before anything is
 * written; only a change check accepts is written (api.c's one atomic
 * write), so the file on disk is at every instant one that check passes. A change that passes is applied by the reload SIGHUP
 * runs, as every API change is.
 *
 * Bounds, before the loader sees a byte: the body as [http] max_body_bytes
 * lets through (evhttp, 413), at most API_CSV_MAX_BYTES and API_CSV_MAX_ROWS
 * physical lines (413 with the figure: the table is sized from the rows, so
 * the rows bound the memory), no NUL (422, its line and column: the loader
 * takes a C string, and a NUL would cut the file short silently).
 */
#include "web/internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_CSV_MAX_BYTES (4u << 20)   /* a tag file's body: 4 MiB */
#define API_CSV_MAX_ROWS 10000u        /* physical lines of one tag file */
#define API_FILE_READ_MAX (64u << 20)  /* a tag file served or replaced: as check reads at most */

/* The file a CSV call is about: a template's, or a device's own (the
 * devices that read it, each with its defaults, in readings). */
typedef struct csv_target {
    const char *tags_file;                   /* as the configuration writes it */
    char path[2 * CONFIG_PATH_MAX];          /* resolved */
    tags_device_defaults_t defs[CONFIG_MAX_DEVICES];
    size_t n_defs[2];                        /* per reading: how many of defs */
    unsigned readings;                       /* 1 or 2 (a template read per addressing) */
    const char *device;                      /* a template's: the device of reading 2, when both */
} csv_target_t;

/* The name in what ("templates/NAME/csv", "devices/NAME/csv") into name, and
 * whether it is a device's; false when what is not such a path. */
static bool csv_path(const char *what, char *name, size_t cap, bool *device)
{
    static const char suffix[] = "/csv";
    static const char *const prefixes[] = { "templates/", "devices/" };
    size_t n = strlen(what);
    for (int k = 0; k < 2; k++) {
        size_t pl = strlen(prefixes[k]);
        if (strncmp(what, prefixes[k], pl) != 0 || n < pl + sizeof suffix - 1 ||
            strcmp(what + n - (sizeof suffix - 1), suffix) != 0)
            continue;
        size_t len = n - pl - (sizeof suffix - 1);
        if (len >= cap)
            len = cap - 1;
        memcpy(name, what + pl, len);
        name[len] = 0;
        *device = k == 1;
        return true;
    }
    return false;
}

/* ?dry_run=1 (or true) on the request's URI. */
static bool dry_run(struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q = { 0 };
    bool yes = false;
    if (query && evhttp_parse_query_str(query, &q) == 0) {
        const char *v = evhttp_find_header(&q, "dry_run");
        yes = v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
    }
    evhttp_clear_headers(&q);
    return yes;
}

/* One loader message as {"line":L,"column":C,"message":"..."}: the loader
 * writes "NAME:LINE:COLUMN: text" with NAME the file as the template writes it. */
static void add_csv_error(struct evbuffer *b, const char *name, const char *text)
{
    size_t n = strlen(name);
    unsigned long line = 0, col = 0;
    const char *msg = text;
    if (strncmp(text, name, n) == 0 && text[n] == ':') {
        char *end;
        line = strtoul(text + n + 1, &end, 10);
        if (*end == ':') {
            col = strtoul(end + 1, &end, 10);
            if (*end == ':')
                msg = end + 1 + (end[1] == ' ');
        }
    }
    evbuffer_add_printf(b, "{\"line\":%lu,\"column\":%lu,\"message\":", line, col);
    api_add_str(b, msg);
    evbuffer_add_printf(b, "}");
}

/* A device's defaults for the template's rows, as config/tags.c's
 * load_template makes them (the device's order and interval over the
 * template's, its addressing). */
static tags_device_defaults_t defaults_for(const config_t *cfg, const config_template_t *tp,
                                           const config_device_t *dev)
{
    return (tags_device_defaults_t){
        .name = dev ? dev->name : tp->name,
        .order = dev && (dev->order_set || !tp->order_set) ? dev->order : tp->order,
        .interval_ms = dev && dev->interval_ms ? dev->interval_ms : tp->interval_ms,
        .scoped = true,
        .modicon = dev && config_device_modicon(cfg, dev),
    };
}

/* The body against the loader, as check reads it (the target's readings).
 * True with *rows when clean, else answered 422 with every error kept and
 * their total (and, for a template read both ways, the device whose
 * reading failed). */
static bool csv_check(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, const csv_target_t *tg,
                      const char *text, size_t len, unsigned lines, size_t *rows)
{
    /* a NUL: where it is, as the loader would say it (it stops a CSV load) */
    const char *nul = memchr(text, 0, len);
    tags_errors_t *errs = calloc(1, sizeof *errs);
    int rc = -ENOMEM;
    const char *device = NULL;   /* the device whose reading failed, when it matters */
    if (errs && nul) {
        unsigned line = 1, col = 1;
        for (const char *c = text; c < nul; c++, col++)
            if (*c == '\n')
                line++, col = 0;
        snprintf(errs->text[0], sizeof errs->text[0], "%s:%u:%u: a NUL byte (a tag file is text)", tg->tags_file,
                 line, col);
        errs->count = errs->total = 1;
        rc = -EINVAL;
    } else if (errs) {
        const tags_device_defaults_t *defs = tg->defs;
        for (unsigned m = 0; m < tg->readings; m++) {
            tags_table_t *t = tags_table_new(lines + 1);
            rc = t ? tags_load_csv_string(t, text, tg->tags_file, defs, tg->n_defs[m], errs) : -ENOMEM;
            tags_table_free(t);
            if (rc < 0) {
                device = tg->readings == 2 ? defs->name : NULL;
                break;
            }
            defs += tg->n_defs[m];
        }
    }
    if (rc >= 0)
        *rows = (size_t)rc;
    if (rc == -ENOMEM && (!errs || !errs->total)) {
        free(errs);
        api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
        return false;
    }
    if (rc >= 0) {
        free(errs);
        return true;
    }
    evbuffer_add_printf(b, "{\"valid\":false,\"errors\":[");
    for (unsigned i = 0; i < errs->count; i++) {
        evbuffer_add_printf(b, "%s", i ? "," : "");
        add_csv_error(b, tg->tags_file, errs->text[i]);
    }
    evbuffer_add_printf(b, "],\"error_count\":%u", errs->total);
    if (device) {
        evbuffer_add_printf(b, ",\"device\":");
        api_add_str(b, device);
    }
    evbuffer_add_printf(b, "}\n");
    free(errs);
    api_reply_json(gw, req, 422, "Unprocessable Entity", b);
    return false;
}

/* The file's bytes, read beneath the configuration's folder (as check
 * reads it: config/confine.c); NULL answered (403 for a file that lies
 * outside, a link out swapped in since check; else 500). */
static char *read_confined(gw_t *gw, struct evhttp_request *req, const csv_target_t *tg, size_t *len)
{
    char why[2 * PATH_MAX + 64], msg[sizeof why + CONFIG_PATH_MAX + 32];
    char *text = config_read_confined(gw_options(gw)->config_path, tg->tags_file, API_FILE_READ_MAX, len, why, sizeof why);
    if (text)
        return text;
    snprintf(msg, sizeof msg, "tags_file = '%s': %s", tg->tags_file, why);
    if (errno == EXDEV || errno == ELOOP)
        api_reply_error(gw, req, 403, "Forbidden", msg);
    else
        api_reply_error(gw, req, 500, "Internal Server Error", msg);
    return NULL;
}

/* GET: the file's bytes as they are on disk (comments, quoting, order kept). */
static void get_csv(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, const csv_target_t *tg)
{
    size_t len;
    char rev[17], etag[20], *text = read_confined(gw, req, tg, &len);
    if (!text)
        return;
    api_revision(text, len, rev);
    snprintf(etag, sizeof etag, "\"%s\"", rev);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Content-Type", "text/csv; charset=utf-8");
    evhttp_add_header(out, "Cache-Control", "no-store");
    evbuffer_add(b, text, len);
    evhttp_send_reply(req, 200, "OK", b);
    free(text);
}

/* PUT: bounds, the loader, then (not a dry run) If-Match, the atomic write,
 * the whole configuration's check with the new bytes, the atomic write and
 * the reload. */
static void put_csv(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, const csv_target_t *tg)
{
    const char *path = tg->path;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in), rows = 0;
    char why[PATH_MAX + 160];
    if (len > API_CSV_MAX_BYTES) {
        snprintf(why, sizeof why, "%zu bytes: a tag file takes at most %u", len, API_CSV_MAX_BYTES);
        api_reply_error(gw, req, 413, "Payload Too Large", why);
        return;
    }
    char *text = malloc(len + 1);
    if (!text) {
        api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
        return;
    }
    evbuffer_copyout(in, text, len);
    text[len] = 0;
    unsigned lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    lines += len && text[len - 1] != '\n';
    if (lines > API_CSV_MAX_ROWS) {
        snprintf(why, sizeof why, "%u lines: a tag file takes at most %u", lines, API_CSV_MAX_ROWS);
        api_reply_error(gw, req, 413, "Payload Too Large", why);
        free(text);
        return;
    }
    if (!csv_check(gw, req, b, tg, text, len, lines, &rows)) {
        free(text);
        return;
    }
    if (dry_run(req)) {
        evbuffer_add_printf(b, "{\"valid\":true,\"rows\":%zu,\"errors\":[],\"error_count\":0}\n", rows);
        api_reply_json(gw, req, 200, "OK", b);
        free(text);
        return;
    }
    size_t old_len, cfg_len;
    char rev[17], *old = read_confined(gw, req, tg, &old_len);
    if (!old) {
        free(text);
        return;
    }
    api_revision(old, old_len, rev);
    char *cfg_text = NULL;
    config_errors_t *errs = NULL;
    config_t *cfg = NULL;
    if (!api_revision_matches(gw, req, rev, b))
        goto out;
    /* the configuration with the new rows, checked before a byte is written:
     * a kill -9 (or a power cut) at any instant leaves the old file or the
     * new one, and each of them passes check (issue 41, fault 6) */
    cfg_text = api_read_file(gw_options(gw)->config_path, &cfg_len);
    errs = malloc(sizeof *errs);
    if (cfg_text && errs) {
        config_file_override_t over = { .path = path, .text = text, .len = len };
        cfg = config_load_string_over(cfg_text, gw_options(gw)->config_path, gw_options(gw)->bus_rule, &over, errs);
    }
    if (!cfg) {
        if (cfg_text && errs) {
            evbuffer_add_printf(b, "{\"valid\":false,");
            api_add_errors(b, errs);
            evbuffer_add_printf(b, "}\n");
            api_reply_json(gw, req, 422, "Unprocessable Entity", b);
        } else {
            api_reply_error(gw, req, 500, "Internal Server Error", cfg_text ? "out of memory" : strerror(errno));
        }
        goto out;
    }
    if (api_write_atomically(path, text, len, why, sizeof why) != 0) {
        api_reply_error(gw, req, 500, "Internal Server Error", why);
        goto out;
    }
    api_revision(text, len, rev);
    gw_log(gw, CONFIG_LOG_INFO, "api: %s written (%zu rows, revision %s); applying it", path, rows, rev);
    web_audit(gw, req, "PUT %s: tag file %s written, %zu rows, revision %s", evhttp_request_get_uri(req), path,
              rows, rev);
    web_count(gw, api_changes);
    gw_reload(gw);
    evbuffer_add_printf(b, "{\"revision\":\"%s\",\"rows\":%zu", rev, rows);
    api_add_reload_result(gw, b);
    api_add_warnings(b, cfg);
    evbuffer_add_printf(b, "}\n");
    api_reply_json(gw, req, 200, "OK", b);
out:
    config_free(cfg);
    free(errs);
    free(cfg_text);
    free(old);
    free(text);
}

/* A template's file: read once per addressing among its devices (a plain
 * reading first; none at all: the template alone, plain). */
static void template_target(const config_t *cfg, int ti, csv_target_t *tg)
{
    const config_template_t *tp = &cfg->templates[ti];
    const config_device_t *by_addressing[2] = { NULL, NULL };   /* plain, Modicon */
    for (unsigned d = 0; d < cfg->device_count; d++)
        if (cfg->devices[d].template_index == ti && !by_addressing[config_device_modicon(cfg, &cfg->devices[d])])
            by_addressing[config_device_modicon(cfg, &cfg->devices[d])] = &cfg->devices[d];
    tg->tags_file = tp->tags_file;
    tg->readings = 0;
    for (int m = 0; m < 2; m++) {
        if (!by_addressing[m] && (m == 1 || by_addressing[1]))
            continue;
        tg->defs[tg->readings] = defaults_for(cfg, tp, by_addressing[m]);
        tg->n_defs[tg->readings++] = 1;
    }
}

/* A device's own file: read once with every device whose tags_file is the
 * same file, each unscoped with its order, interval and addressing. */
static void device_target(const config_t *cfg, const char *config_path, unsigned di, csv_target_t *tg)
{
    char other[2 * CONFIG_PATH_MAX];
    tg->tags_file = cfg->devices[di].tags_file;
    tg->readings = 1;
    tg->n_defs[0] = 0;
    for (unsigned j = 0; j < cfg->device_count && tg->n_defs[0] < CONFIG_MAX_DEVICES; j++) {
        const config_device_t *dev = &cfg->devices[j];
        if (!dev->tags_file[0])
            continue;
        config_resolve_path(config_path, dev->tags_file, other, sizeof other);
        if (j != di && strcmp(other, tg->path) != 0)
            continue;
        tg->defs[tg->n_defs[0]++] = (tags_device_defaults_t){ dev->name, dev->order, dev->interval_ms, false,
                                                              config_device_modicon(cfg, dev) };
    }
}

bool api_csv_request(gw_t *gw, struct evhttp_request *req, const char *what, struct evbuffer *b)
{
    char name[CONFIG_NAME_MAX + 1];
    bool of_device;
    if (!csv_path(what, name, sizeof name, &of_device))
        return false;
    /* a tag file is the configuration's, as GET /api/config is: an admin's
     * (with users; without, reads stay open as every read), asked before
     * anything is said of the name (the route x role matrix's rule) */
    if (gw_config(gw)->http.user_count && !api_admin_ok(gw, req))
        return true;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const config_t *cfg = gw_config(gw);
    int ti = -1, di = -1;
    for (unsigned i = 0; !of_device && i < cfg->template_count && ti < 0; i++)
        if (strcmp(cfg->templates[i].name, name) == 0)
            ti = (int)i;
    for (unsigned i = 0; of_device && i < cfg->device_count && di < 0; i++)
        if (strcmp(cfg->devices[i].name, name) == 0)
            di = (int)i;
    if (!gw_options(gw)->config_path) {
        api_reply_error(gw, req, 404, "Not Found", "no configuration file (the built-in demo)");
    } else if (!of_device && ti < 0) {
        api_reply_error(gw, req, 404, "Not Found", "no such template (GET /api/templates)");
    } else if (of_device && di < 0) {
        api_reply_error(gw, req, 404, "Not Found", "no such device (GET /api/devices)");
    } else if (of_device && !cfg->devices[di].tags_file[0]) {
        api_reply_error(gw, req, 404, "Not Found",
                        "the device has no tags_file of its own (a template's: /api/templates/NAME/csv)");
    } else if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_PUT) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, PUT");
        api_reply_error(gw, req, 405, "Method Not Allowed", "see docs/api.md");
    } else {
        csv_target_t *tg = calloc(1, sizeof *tg);
        if (!tg) {
            api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
            return true;
        }
        const char *file = of_device ? cfg->devices[di].tags_file : cfg->templates[ti].tags_file;
        config_resolve_path(gw_options(gw)->config_path, file, tg->path, sizeof tg->path);
        if (of_device)
            device_target(cfg, gw_options(gw)->config_path, (unsigned)di, tg);
        else
            template_target(cfg, ti, tg);
        if (cmd == EVHTTP_REQ_GET)
            get_csv(gw, req, b, tg);
        else if (cmd == EVHTTP_REQ_PUT && api_admin_ok(gw, req))
            put_csv(gw, req, b, tg);
        free(tg);
    }
    return true;
}
