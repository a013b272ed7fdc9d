/*
 * web/api_section.c -- one section of the configuration file through the API
 * (docs/api.md), on the I/O thread: PUT (create or replace) and DELETE of
 * /api/devices|tags|templates|polls|buses/NAME, edited in the file's text
 * and written through api.c's one write path (api_commit_text).
 */
#include "web/internal.h"

#include "json/json.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one section: PUT (create or replace) and DELETE ----------------------------
 *
 * /api/devices/NAME, /api/tags/NAME, /api/templates/NAME, /api/polls/NAME and
 * /api/buses/NAME stand for the section [KIND NAME] of the file; a PUT's body
 * is a JSON object of its keys ({"slave": 2, "template": "meter"}). The rule
 * for the text, so that it stays the engineer's file: a PUT of a section that
 * is there replaces its lines in place (from its header to the next header,
 * the comment lines inside it included), a new one goes at the end, a DELETE
 * removes those lines; every other line, comments included, stays as it was.
 * Then the one write path (api_commit_text): check, atomic write, reload.
 */
static const struct { const char *path, *kind; } section_paths[] = {
    { "devices/", "device" }, { "tags/", "tag" }, { "templates/", "template" }, { "polls/", "poll" },
    { "buses/", "bus" },
};
#define API_SECTION_KEYS 64

/*
 * Whether the header at p ('[' first) is [kind name], read as config/reader.c
 * reads a header (so that every header check accepts can be edited): the
 * text up to the first ']' (a ';' after a space first: no header), split at
 * spaces, tabs, vertical tabs, form feeds and carriage returns, two words.
 * `[device m1 ]`, `[ device  m1]` and `[device\tm1]` are all [device m1].
 */
static bool header_is(const char *p, const char *end, const char *kind, const char *name)
{
    static const char spaces[] = " \t\v\f\r";
    const char *words[3] = { NULL, NULL, NULL };
    size_t lens[3] = { 0, 0, 0 };
    unsigned n = 0;
    bool was_space = false;
    const char *c = p + 1;
    while (c < end && *c != ']' && *c != '\n' && !(was_space && *c == ';')) {
        bool space = strchr(spaces, *c) != NULL;
        if (!space && !was_space && c > p + 1 && n) {
            lens[n - 1]++;
        } else if (!space) {
            if (n == 3)
                return false;
            words[n] = c;
            lens[n++] = 1;
        }
        was_space = space;
        c++;
    }
    return c < end && *c == ']' && n == 2 && lens[0] == strlen(kind) && strncmp(words[0], kind, lens[0]) == 0 &&
           lens[1] == strlen(name) && strncmp(words[1], name, lens[1]) == 0;
}

/* Where [kind name] is in text: *from its header line, *to the next header (or the end). */
static bool find_section(const char *text, const char *kind, const char *name, size_t *from, size_t *to)
{
    bool in = false;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
        const char *p = line;
        while (p < line + n && isspace((unsigned char)*p) && *p != '\n')
            p++;
        if (*p == '[') {
            if (in) {
                *to = (size_t)(line - text);
                return true;
            }
            if (header_is(p, line + n, kind, name)) {
                in = true;
                *from = (size_t)(line - text);
            }
        }
        line += n;
    }
    if (in)
        *to = strlen(text);
    return in;
}

/* A value as one INI line takes it: no line break, no NUL, no control
 * character but a tab, no comment start. The reader (config/reader.c, after
 * inih) takes a ';' after any space as a comment, a vertical tab and a form
 * feed included: "2\v;3" would be written raw and read as 2. */
static bool value_ok(const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (!n || isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1])) {
        snprintf(why, cap, "empty, or a space at its start or end");
        return false;
    }
    for (const char *c = v; *c; c++) {
        if ((unsigned char)*c < 0x20 && *c != '\t') {
            snprintf(why, cap, "a control character (0x%02x): a line break, vertical tab, form feed...",
                     (unsigned char)*c);
            return false;
        }
        if (*c == 0x7f) {
            snprintf(why, cap, "a control character (0x7f)");
            return false;
        }
        if ((*c == ';' || *c == '#') && c > v && isspace((unsigned char)c[-1])) {
            snprintf(why, cap, "' %c' starts a comment in the file", *c);
            return false;
        }
    }
    return true;
}

/* The section's lines from the JSON body, into out; false with why. */
static bool section_lines(const char *kind, const char *name, const char *body, size_t len, struct evbuffer *out,
                          char *why, size_t cap)
{
    struct json_object *root = json_parse_request(body, len, 2, 2 * API_SECTION_KEYS, why, cap);
    if (!root)
        return false;
    if (!json_object_is_type(root, json_type_object)) {
        /* json_object_object_foreach would walk an array's (NULL) table */
        snprintf(why, cap, "expected a JSON object of the section's keys, not %s",
                 json_type_to_name(json_object_get_type(root)));
        json_object_put(root);
        return false;
    }
    bool ok = true;
    char vwhy[128];
    evbuffer_add_printf(out, "[%s %s]\n", kind, name);
    json_object_object_foreach(root, key, val) {
        if (!ok)
            break;
        const char *v = json_object_get_string(val);
        bool key_ok = *key && strlen(key) <= 40;
        for (const char *c = key; key_ok && *c; c++)
            key_ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        enum json_type t = json_object_get_type(val);
        if (!key_ok) {
            snprintf(why, cap, "'%.40s': not a key name", key);
            ok = false;
        } else if ((t != json_type_string && t != json_type_int && t != json_type_double &&
                    t != json_type_boolean) || !v) {
            snprintf(why, cap, "%s: expected a string, number or boolean on one line, without ' ;' or ' #'", key);
            ok = false;
        } else if (!value_ok(v, vwhy, sizeof vwhy)) {
            snprintf(why, cap, "%s: %s (a value is one line of the file, without ' ;' or ' #')", key, vwhy);
            ok = false;
        } else {
            evbuffer_add_printf(out, "%s = %s\n", key, v);
        }
    }
    json_object_put(root);
    return ok;
}

void api_edit_section(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, const char *kind,
                         const char *name, bool delete)
{
    size_t len, from = 0, to = 0;
    char rev[17], why[320];
    bool name_ok = *name && strlen(name) < TAGS_NAME_MAX;
    for (const char *c = name; name_ok && *c; c++)
        name_ok = (unsigned char)*c > ' ' && *c != ']' && *c != '[' && *c != 0x7f;
    if (!name_ok) {
        api_reply_error(gw, req, 400, "Bad Request", "not a section name");
        return;
    }
    char *text = api_current(gw, req, &len, rev);
    if (!text)
        return;
    if (!api_revision_matches(gw, req, rev, b)) {
        free(text);
        return;
    }
    bool there = find_section(text, kind, name, &from, &to);
    if (delete && !there) {
        free(text);
        api_reply_error(gw, req, 404, "Not Found", "no such section in the file");
        return;
    }
    struct evbuffer *lines = evbuffer_new(), *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    char *body = delete ? NULL : malloc(blen + 1);
    if (!lines || (!delete && !body)) {
        api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
    } else if (!delete && (evbuffer_copyout(in, body, blen), body[blen] = 0,
                           !section_lines(kind, name, body, blen, lines, why, sizeof why))) {
        api_reply_error(gw, req, 400, "Bad Request", why);
    } else {
        if (!there) {
            from = to = len;
            if (len && text[len - 1] != '\n')
                evbuffer_prepend(lines, "\n", 1);
        }
        size_t n = evbuffer_get_length(lines);
        char *next = malloc(len - (to - from) + n + 1);
        if (!next) {
            api_reply_error(gw, req, 500, "Internal Server Error", "out of memory");
        } else {
            memcpy(next, text, from);
            evbuffer_copyout(lines, next + from, n);
            memcpy(next + from + n, text + to, len - to);
            next[len - (to - from) + n] = 0;
            api_commit_text(gw, req, b, next, len - (to - from) + n);
        }
    }
    if (lines)
        evbuffer_free(lines);
    free(body);
    free(text);
}

const char *api_section_kind(const char *what, const char **name)
{
    for (size_t i = 0; i < sizeof section_paths / sizeof section_paths[0]; i++)
        if (strncmp(what, section_paths[i].path, strlen(section_paths[i].path)) == 0) {
            *name = what + strlen(section_paths[i].path);
            return section_paths[i].kind;
        }
    return NULL;
}
