/*
 * web/tag_json.c -- a tag as JSON ({"name", "device", "value", "text",
 * "unit", "quality", ...}) for GET /tags, /tags/NAME and a write's answer:
 * the one place that spells it.
 *
 * Why a writer of its own and not evbuffer_add_printf: a whole list of
 * 10,000 tags is 1 MB of JSON, and with a printf per field the I/O thread
 * spent 63 % of its time in this function under the full storm of issue 45
 * (perf: vsnprintf and evbuffer_add_vprintf were most of it). A tag is
 * written into a buffer on the stack, the integers and the age by hand,
 * strings through json_quote, and added to the evbuffer once. The bytes are
 * those the printf version wrote: strings are cut where add_str cut them
 * (QUOTE_CAP), and "age_s" is an integer count of milliseconds written with
 * three decimals, which is what "%.3f" printed for it (the division by 1e3
 * is within an ulp of a point on the 0.001 grid, never near a half).
 * I/O thread, under the tag table's lock where the value is read.
 */
#include "web/internal.h"
#include "json/json.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

/* A string is quoted into at most this many bytes (NUL included): the
 * longest value text, a string tag of TAGS_MAX_REGISTERS registers. */
#define QUOTE_CAP JSON_QUOTED_MAX(2 * TAGS_MAX_REGISTERS + 1)

typedef struct jw {
    struct evbuffer *b;
    size_t n;
    char s[4096];
} jw_t;

_Static_assert(QUOTE_CAP < sizeof ((jw_t *)0)->s, "a quoted string fits the writer's buffer");

static void jw_flush(jw_t *w)
{
    if (w->n)
        evbuffer_add(w->b, w->s, w->n);
    w->n = 0;
}

/* room bytes free, flushing first if need be (room < sizeof s) */
static char *jw_room(jw_t *w, size_t room)
{
    if (w->n + room > sizeof w->s)
        jw_flush(w);
    return w->s + w->n;
}

static void jw_mem(jw_t *w, const char *p, size_t n)
{
    if (n > sizeof w->s / 2) {
        jw_flush(w);
        evbuffer_add(w->b, p, n);
        return;
    }
    memcpy(jw_room(w, n), p, n);
    w->n += n;
}

#define JW_LIT(w, lit) jw_mem((w), (lit), sizeof (lit) - 1)

static void jw_cstr(jw_t *w, const char *s)
{
    jw_mem(w, s, strlen(s));
}

static void jw_str(jw_t *w, const char *s)
{
    char *d = jw_room(w, QUOTE_CAP);
    size_t n = json_quote(d, QUOTE_CAP, s);
    w->n += n < QUOTE_CAP ? n : strlen(d);   /* cut, as a smaller buffer would */
}

static void jw_u64(jw_t *w, uint64_t v)
{
    char t[20];
    size_t k = sizeof t;
    do
        t[--k] = (char)('0' + v % 10);
    while (v /= 10);
    jw_mem(w, t + k, sizeof t - k);
}

static void jw_i64(jw_t *w, int64_t v)
{
    if (v < 0)
        JW_LIT(w, "-");
    jw_u64(w, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* ms as seconds with three decimals: "%.3f" of ms / 1e3 */
static void jw_ms3(jw_t *w, int64_t ms)
{
    uint64_t a = ms < 0 ? 0 - (uint64_t)ms : (uint64_t)ms;
    char frac[4] = { '.', (char)('0' + a % 1000 / 100), (char)('0' + a % 100 / 10), (char)('0' + a % 10) };
    if (ms < 0)
        JW_LIT(w, "-");
    jw_u64(w, a / 1000);
    jw_mem(w, frac, sizeof frac);
}

/* Why a value is bad, as the JSON API spells it. */
static const char *reason_token(tags_reason_t r)
{
    static const char *const tokens[] = { "", "not_read", "exception", "timeout", "port_down", "short",
                                          "bad_data", "expr", "input" };
    return (unsigned)r < sizeof tokens / sizeof tokens[0] ? tokens[r] : "unknown";
}

void http_json_quality(const tags_tag_t *g, tags_value_t *v, char text[8])
{
    const char *why = v->quality == TAGS_BAD ? NULL : tags_nonfinite(g, v);
    if (!why)
        return;
    snprintf(text, 8, "%s", why);
    v->quality = TAGS_BAD;
    v->reason = TAGS_BAD_DATA;
}

static void jw_value(jw_t *w, const tags_tag_t *g, const tags_value_t *v)
{
    char text[6 * TAGS_MAX_REGISTERS + 8];
    bool number = tags_type_numeric(g->type);
    if (v->quality == TAGS_BAD || tags_format(g, v, text, sizeof text) < 0 || tags_nonfinite(g, v)) {
        JW_LIT(w, "null");
    } else if (!number) {
        if (g->type == TAGS_BOOL)
            jw_cstr(w, text);
        else
            jw_str(w, text);
    } else {
        jw_cstr(w, text);
        JW_LIT(w, ",\"text\":");
        jw_str(w, text);
    }
}

void http_json_str(struct evbuffer *b, const char *s)
{
    jw_t w = { .b = b };
    jw_str(&w, s);
    jw_flush(&w);
}

void http_json_value(struct evbuffer *b, const tags_tag_t *g, const tags_value_t *v)
{
    jw_t w = { .b = b };
    jw_value(&w, g, v);
    jw_flush(&w);
}

/* What a tag is (with `full`): rare, so printf. */
static void jw_definition(jw_t *w, const tags_tag_t *g)
{
    char t[512];
    if (!g->computed) {   /* a computed tag has no register */
        JW_LIT(w, ",\"table\":\"");
        jw_cstr(w, tags_area_name(g->area));
        JW_LIT(w, "\",\"address\":");
        jw_u64(w, g->address);
    }
    if (g->in_register) {
        JW_LIT(w, ",\"bit\":");
        jw_u64(w, g->bit);
    }
    if (g->point) {
        JW_LIT(w, ",\"point\":");
        jw_u64(w, g->point);
    }
    if (g->has_decimals) {
        JW_LIT(w, ",\"decimals\":");
        jw_u64(w, g->decimals);
    }
    int n = snprintf(t, sizeof t, ",\"type\":\"%s\",\"registers\":%u,\"order\":\"%s\",\"scale\":%.17g,"
                                  "\"offset\":%.17g,\"deadband\":%.17g,\"writable\":%s,\"interval_ms\":%u,"
                                  "\"description\":",
                     tags_type_name(g->type), g->count, tags_order_name(g->order, g->type), g->scale, g->offset,
                     g->deadband, g->writable ? "true" : "false", g->interval_ms);
    jw_mem(w, t, n > 0 && (size_t)n < sizeof t ? (size_t)n : 0);
    jw_str(w, g->description);
}

void http_tags_add_tag(struct evbuffer *b, const tags_table_t *t, size_t i, int64_t now_ms, bool full)
{
    const tags_tag_t *g = tags_table_tag(t, i);
    tags_value_t v;
    tags_table_value(t, i, now_ms, &v);
    char nonfinite[8] = "";
    http_json_quality(g, &v, nonfinite);
    jw_t w = { .b = b };
    JW_LIT(&w, "{\"name\":");
    jw_str(&w, g->name);
    JW_LIT(&w, ",\"device\":");
    jw_str(&w, tags_table_device_name(t, g->device));
    JW_LIT(&w, ",\"value\":");
    jw_value(&w, g, &v);
    if (nonfinite[0]) {
        JW_LIT(&w, ",\"text\":\"");
        jw_cstr(&w, nonfinite);
        JW_LIT(&w, "\"");
    }
    JW_LIT(&w, ",\"unit\":");
    jw_str(&w, g->unit);
    JW_LIT(&w, ",\"quality\":\"");
    jw_cstr(&w, tags_quality_name(v.quality));
    JW_LIT(&w, "\"");
    if (v.quality == TAGS_BAD) {
        JW_LIT(&w, ",\"reason\":\"");
        jw_cstr(&w, reason_token(v.reason));
        JW_LIT(&w, "\"");
    }
    if (v.reason == TAGS_BAD_EXCEPTION) {
        JW_LIT(&w, ",\"exception\":");
        jw_u64(&w, v.exception);
    }
    const char *note = v.quality == TAGS_BAD ? tags_table_note(t, i) : NULL;
    if (note) {   /* a computed tag's why: Lua's message, the budget, the input */
        JW_LIT(&w, ",\"error\":");
        jw_str(&w, note);
    }
    if (v.time_ms) {
        JW_LIT(&w, ",\"timestamp\":");
        jw_i64(&w, v.time_ms);
        JW_LIT(&w, ",\"age_s\":");
        jw_ms3(&w, now_ms - v.time_ms);
    } else {
        JW_LIT(&w, ",\"timestamp\":null,\"age_s\":null");
    }
    if (g->computed) {   /* in the list too: the page marks computed tags */
        JW_LIT(&w, ",\"expr\":");
        jw_str(&w, tags_table_expr(t, i));
        const char *target, *inverse = tags_table_inverse(t, i, &target);
        if (inverse) {   /* written through it: the page offers the edit */
            JW_LIT(&w, ",\"inverse\":");
            jw_str(&w, inverse);
        }
    }
    if (full)
        jw_definition(&w, g);
    JW_LIT(&w, "}");
    jw_flush(&w);
}
