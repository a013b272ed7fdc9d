/*
 * expr/engine.c -- the computed tags of one table: built once (compiled,
 * names resolved, cycles refused, put in dependency order), then evaluated
 * when an input is stored.
 *
 * Order: the computed tags are kept sorted so that each comes after every
 * computed tag it reads (a depth-first post-order; a back edge is a cycle,
 * named in full). A store marks the readers of the stored tag dirty; a run
 * walks the sorted list once, and evaluating one marks its own readers,
 * which come later in the list: so each is evaluated at most once a run,
 * after its inputs, however a read's values arrive.
 *
 * Quality: a computed tag is bad when an input is bad or stale at the
 * evaluation (reason "input", the note names it) or the expression fails
 * (reason "expression", the note says why: Lua's message, the step budget,
 * the memory cap, a result that is not a value of the tag's type). Its time
 * is its newest input's, and its interval the shortest of its inputs', so
 * that it goes stale when they stop coming, as a read tag does.
 */
#include "expr/internal.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct computed {
    unsigned tag;                /* its table index */
    int ref;                     /* the compiled chunk */
    unsigned n_in;
    unsigned in[EXPR_INPUTS_MAX];
    tags_value_t prev[EXPR_INPUTS_MAX];  /* the inputs at the last evaluation they were all good */
    bool have_prev;
    int64_t prev_ms;             /* the newest input's time then: dt's origin */
    bool have_last;
    tags_value_t last;           /* its own last good value */
    bool dirty;
    int inv_ref;                 /* its inverse's chunk, or LUA_NOREF */
    unsigned inv_target;         /* the input its inverse writes */
    unsigned inv_n;
    unsigned inv_in[EXPR_INPUTS_MAX];   /* the tags its inverse reads */
} computed_t;

struct expr_engine {
    tags_table_t *t;
    expr_lua_t *lua;
    expr_limits_t lim;
    computed_t *c;               /* in dependency order once built */
    size_t n;
    unsigned *pos;               /* table index -> its place in c, or UINT_MAX */
    unsigned *dep_start;         /* table index -> its readers: dep[dep_start[i] .. dep_start[i+1]) */
    unsigned *dep;
    bool any_dirty;
};

typedef struct builder {
    expr_engine_t *e;
    const char *source;
    expr_error_fn err;
    void *ctx;
    unsigned errors;
    const char *scope;           /* the device a template's computed tag looks names up in first */
} builder_t;

/* An error about tag i's expression ("expr") or its inverse ("inverse"). */
static void report_on(builder_t *b, size_t i, const char *part, const char *text, const char *fmt, const char *why)
{
    const tags_tag_t *g = tags_table_tag(b->e->t, i);
    const char *src = tags_table_source(b->e->t, i);
    char line[TAGS_EXPR_MAX + 640], what[512];
    snprintf(what, sizeof what, fmt, why);
    snprintf(line, sizeof line, "%s:%u: tag %s: %s '%s': %s", src ? src : b->source ? b->source : "?", g->line,
             g->name, part, text, what);
    b->errors++;
    if (b->err)
        b->err(b->ctx, line);
}

static void report(builder_t *b, size_t i, const char *fmt, const char *why)
{
    report_on(b, i, "expr", tags_table_expr(b->e->t, i), fmt, why);
}

static int lookup(void *ctx, const char *name)
{
    builder_t *b = ctx;
    char scoped[2 * TAGS_NAME_MAX];
    if (b->scope) {
        snprintf(scoped, sizeof scoped, "%s.%s", b->scope, name);
        int i = tags_table_find(b->e->t, scoped);
        if (i >= 0)
            return i;
    }
    return tags_table_find(b->e->t, name);
}

/*
 * A computed tag's inverse: its target resolved in the tag's own scope (a
 * template's DEVICE.NAME first), the expression's only input when none is
 * named. The target must be one of the expression's inputs (the write must
 * move what the tag is computed from, so the tag then shows it), a read tag
 * (not computed: one write, one register range, one confirmation) and
 * writable itself (an inverse does not make a read-only register
 * writable); the inverse's text is bound as an expression is.
 */
static void compile_inverse(builder_t *b, computed_t *c)
{
    expr_engine_t *e = b->e;
    const char *name = "", *text = tags_table_inverse(e->t, c->tag, &name);
    char msg[400], *chunk;
    size_t n = 0;
    int target = -1;
    if (!text)
        return;
    if (!*name && c->n_in != 1) {
        report_on(b, c->tag, "inverse", text, "%s", "the expression reads more than one tag: inverse_target names "
                  "the one written");
        return;
    }
    target = *name ? lookup(b, name) : (int)c->in[0];
    bool input = false;
    for (unsigned k = 0; target >= 0 && k < c->n_in; k++)
        input = input || c->in[k] == (unsigned)target;
    const tags_tag_t *tg = target >= 0 ? tags_table_tag(e->t, (size_t)target) : NULL;
    const char *why = !tg ? "inverse_target '%s' is no tag" : !input ? "inverse_target '%s' is not an input of the expression"
                      : tg->computed ? "inverse_target '%s' is computed: write the tag it is computed from"
                      : !tg->writable ? "inverse_target '%s' is not writable" : NULL;
    if (why) {
        report_on(b, c->tag, "inverse", text, why, *name ? name : tg ? tg->name : "");
        return;
    }
    if (!(chunk = malloc(EXPR_CHUNK_MAX))) {
        report_on(b, c->tag, "inverse", text, "%s", "out of memory");
        return;
    }
    if (expr_rewrite_inverse(text, lookup, b, chunk, EXPR_CHUNK_MAX, c->inv_in, &n, msg, sizeof msg) < 0 ||
        expr_lua_compile(e->lua, chunk, &c->inv_ref, msg, sizeof msg) < 0)
        report_on(b, c->tag, "inverse", text, "%s", msg);
    free(chunk);
    c->inv_n = (unsigned)n;
    c->inv_target = (unsigned)target;
}

/* One computed tag: rewritten, compiled, its inputs checked. */
static void compile_one(builder_t *b, computed_t *c)
{
    expr_engine_t *e = b->e;
    const tags_tag_t *g = tags_table_tag(e->t, c->tag);
    const char *dev = tags_table_device_name(e->t, g->device);
    size_t dl = strlen(dev), n_in = 0;
    char msg[400];
    char *chunk = malloc(EXPR_CHUNK_MAX);
    b->scope = strncmp(g->name, dev, dl) == 0 && g->name[dl] == '.' ? dev : NULL;
    if (!chunk) {
        report(b, c->tag, "%s", "out of memory");
        return;
    }
    if (expr_rewrite(tags_table_expr(e->t, c->tag), lookup, b, chunk, EXPR_CHUNK_MAX, c->in, &n_in, msg,
                     sizeof msg) < 0 ||
        expr_lua_compile(e->lua, chunk, &c->ref, msg, sizeof msg) < 0) {
        report(b, c->tag, "%s", msg);
        free(chunk);
        return;
    }
    free(chunk);
    c->n_in = (unsigned)n_in;
    for (unsigned k = 0; k < c->n_in; k++)
        if (tags_table_tag(e->t, c->in[k])->type == TAGS_RAW)
            report(b, c->tag, "input '%s' is raw words: no value an expression can use",
                   tags_table_tag(e->t, c->in[k])->name);
    compile_inverse(b, c);
}

/* Depth-first from computed k: post-order into order, a back edge is a cycle. */
static bool visit(builder_t *b, unsigned k, uint8_t *state, unsigned *stack, unsigned depth, unsigned *order,
                  size_t *n_order)
{
    expr_engine_t *e = b->e;
    if (state[k] == 2)
        return true;
    if (state[k] == 1) {                           /* on the stack: the cycle is stack[from..] */
        char path[1024] = "";
        size_t used = 0;
        unsigned from = depth;
        while (from > 0 && stack[from - 1] != k)
            from--;
        for (unsigned s = from > 0 ? from - 1 : 0; s < depth && used < sizeof path; s++)
            used += (size_t)snprintf(path + used, sizeof path - used, "%s -> ",
                                     tags_table_tag(e->t, e->c[stack[s]].tag)->name);
        if (used < sizeof path)
            snprintf(path + used, sizeof path - used, "%s", tags_table_tag(e->t, e->c[k].tag)->name);
        report(b, e->c[k].tag, "a cycle: %s", path);
        return false;
    }
    state[k] = 1;
    stack[depth] = k;
    bool ok = true;
    for (unsigned j = 0; j < e->c[k].n_in && ok; j++) {
        unsigned p = e->pos[e->c[k].in[j]];
        if (p != UINT_MAX)
            ok = visit(b, p, state, stack, depth + 1, order, n_order);
    }
    state[k] = ok ? 2 : 1;
    if (ok)
        order[(*n_order)++] = k;
    return ok;
}

/* The computed tags in dependency order, or an error per cycle. */
static int sort(builder_t *b)
{
    expr_engine_t *e = b->e;
    uint8_t *state = calloc(e->n + 1, 1);
    unsigned *stack = calloc(e->n + 1, sizeof *stack), *order = calloc(e->n + 1, sizeof *order);
    computed_t *sorted = calloc(e->n + 1, sizeof *sorted);
    size_t n_order = 0;
    int rc = state && stack && order && sorted ? 0 : -ENOMEM;
    for (unsigned k = 0; rc == 0 && k < e->n; k++)
        if (state[k] == 0 && !visit(b, k, state, stack, 0, order, &n_order))
            rc = -ELOOP;   /* one cycle reported; the others are reported at the next check */
    if (rc == 0) {
        for (size_t k = 0; k < e->n; k++)
            sorted[k] = e->c[order[k]];
        free(e->c);
        e->c = sorted;
        sorted = NULL;
        for (size_t k = 0; k < e->n; k++)
            e->pos[e->c[k].tag] = (unsigned)k;
    }
    free(state);
    free(stack);
    free(order);
    free(sorted);
    return rc;
}

/* Readers of each table tag, and each computed tag's interval. */
static int link(expr_engine_t *e)
{
    size_t n_tags = tags_table_count(e->t), total = 0;
    if (!(e->dep_start = calloc(n_tags + 2, sizeof *e->dep_start)))
        return -ENOMEM;
    for (size_t k = 0; k < e->n; k++) {
        unsigned interval = UINT_MAX;
        for (unsigned j = 0; j < e->c[k].n_in; j++) {
            e->dep_start[e->c[k].in[j] + 1]++;
            unsigned iv = tags_table_tag(e->t, e->c[k].in[j])->interval_ms;
            interval = iv < interval ? iv : interval;
        }
        tags_table_set_interval(e->t, e->c[k].tag, interval);
        total += e->c[k].n_in;
    }
    for (size_t i = 0; i < n_tags; i++)
        e->dep_start[i + 1] += e->dep_start[i];
    unsigned *fill = calloc(n_tags + 1, sizeof *fill);
    if (!fill || !(e->dep = calloc(total + 1, sizeof *e->dep))) {
        free(fill);
        return -ENOMEM;
    }
    for (size_t k = 0; k < e->n; k++)
        for (unsigned j = 0; j < e->c[k].n_in; j++) {
            unsigned i = e->c[k].in[j];
            e->dep[e->dep_start[i] + fill[i]++] = (unsigned)k;
        }
    free(fill);
    return 0;
}

static void on_store(void *ctx, size_t i)
{
    expr_engine_t *e = ctx;
    for (unsigned d = e->dep_start[i]; d < e->dep_start[i + 1]; d++)
        e->c[e->dep[d]].dirty = true;
    e->any_dirty = e->any_dirty || e->dep_start[i] != e->dep_start[i + 1];
}

expr_engine_t *expr_engine_new(tags_table_t *t, const expr_limits_t *lim, const char *source,
                               expr_error_fn err, void *ctx, unsigned *errors)
{
    expr_engine_t *e = calloc(1, sizeof *e);
    size_t n_tags = tags_table_count(t);
    builder_t b = { .e = e, .source = source, .err = err, .ctx = ctx };
    *errors = 0;
    if (!e)
        return NULL;
    e->t = t;
    e->lim = lim ? *lim : EXPR_LIMITS_DEFAULT;
    for (size_t i = 0; i < n_tags; i++)
        e->n += tags_table_tag(t, i)->computed;
    e->c = calloc(e->n + 1, sizeof *e->c);
    e->pos = malloc((n_tags + 1) * sizeof *e->pos);
    if (!e->c || !e->pos || !(e->lua = expr_lua_new())) {
        expr_engine_free(e);
        return NULL;
    }
    for (size_t i = 0, k = 0; i < n_tags; i++) {
        e->pos[i] = UINT_MAX;
        if (tags_table_tag(t, i)->computed) {
            e->c[k] = (computed_t){ .tag = (unsigned)i, .ref = LUA_NOREF, .inv_ref = LUA_NOREF };
            e->pos[i] = (unsigned)k++;
        }
    }
    for (size_t k = 0; k < e->n; k++)
        compile_one(&b, &e->c[k]);
    int rc = b.errors ? -EINVAL : sort(&b);
    if (rc == 0 && !b.errors)
        rc = link(e);
    if (rc < 0 || b.errors) {
        *errors = b.errors;
        expr_engine_free(e);
        return NULL;
    }
    tags_table_on_store(t, on_store, e);
    return e;
}

void expr_engine_free(expr_engine_t *e)
{
    if (!e)
        return;
    if (e->dep_start)   /* linked: it listens */
        tags_table_on_store(e->t, NULL, NULL);
    expr_lua_free(e->lua);
    free(e->c);
    free(e->pos);
    free(e->dep_start);
    free(e->dep);
    free(e);
}

size_t expr_engine_count(const expr_engine_t *e)
{
    return e->n;
}

/* An integer type read as written (no scale, no offset): exactly, as an integer. */
static bool exact_integer(const tags_tag_t *g)
{
    bool integer = (g->type >= TAGS_INT16 && g->type <= TAGS_UINT64) || g->type == TAGS_BCD16 ||
                   g->type == TAGS_BCD32 || (g->type >= TAGS_INT8H && g->type <= TAGS_UINT8L);
    return integer && g->scale == 1 && g->offset == 0;
}

static bool signed_type(tags_type_t type)
{
    return type == TAGS_INT16 || type == TAGS_INT32 || type == TAGS_INT64 || type == TAGS_INT8H ||
           type == TAGS_INT8L;
}

/* A value as Lua sees it: bool a boolean, an integer read as written an
 * integer (all 64 bits), a string its text, any other number its
 * engineering value. prev: a string's words are gone by then (nil). */
static void push_value(lua_State *L, const tags_tag_t *g, const tags_value_t *v, bool prev)
{
    if (g->type == TAGS_BOOL) {
        lua_pushboolean(L, v->raw.b);
    } else if (g->type == TAGS_STRING) {
        char text[2 * TAGS_MAX_REGISTERS + 1];
        if (prev || !v->words)
            lua_pushnil(L);
        else
            lua_pushlstring(L, text, tags_string_text(g, v, text, sizeof text));
    } else if (exact_integer(g) && signed_type(g->type)) {
        lua_pushinteger(L, (lua_Integer)v->raw.i);
    } else if (exact_integer(g) && v->raw.u <= (uint64_t)INT64_MAX) {
        lua_pushinteger(L, (lua_Integer)v->raw.u);
    } else {
        lua_pushnumber(L, v->eng);
    }
}

/* The result on the stack into out as the tag's type; why not in msg. */
static bool take_result(lua_State *L, const tags_tag_t *g, tags_value_t *out, char *msg, size_t cap)
{
    int type = lua_type(L, -1);
    lua_Integer i = 0;
    if (type == LUA_TBOOLEAN) {
        bool b = lua_toboolean(L, -1);
        out->raw.u = 0;
        if (g->type == TAGS_BOOL)
            out->raw.b = b;
        else if (g->type == TAGS_INT64)
            out->raw.i = b;
        else
            out->raw.f = b;
        out->eng = b;
        return true;
    }
    if (type != LUA_TNUMBER) {
        snprintf(msg, cap, "the result is %s, not a number or a boolean", luaL_typename(L, -1));
        return false;
    }
    double d = lua_tonumber(L, -1);
    if (!isfinite(d)) {
        snprintf(msg, cap, "the result is %s", isnan(d) ? "not a number" : "infinite");
        return false;
    }
    if (g->type == TAGS_BOOL) {
        out->raw.u = 0;
        out->raw.b = d != 0;
        out->eng = d != 0;
    } else if (g->type == TAGS_INT64) {
        if (!lua_isinteger(L, -1) && !lua_numbertointeger(d, &i)) {
            snprintf(msg, cap, "the result %.17g is not an integer (round() makes one)", d);
            return false;
        }
        out->raw.i = lua_isinteger(L, -1) ? (int64_t)lua_tointeger(L, -1) : (int64_t)i;
        out->eng = (double)out->raw.i;
    } else {
        out->raw.f = d;
        out->eng = d;
    }
    return true;
}

/* Lua names the chunk's arguments (local '__i2'): the note names the tag. */
static void readable_note(expr_engine_t *e, const computed_t *c, char *note, size_t cap)
{
    char out[TAGS_NOTE_MAX];
    size_t used = 0;
    for (const char *p = note; *p && used + 1 < sizeof out;) {
        unsigned k;
        int n = 0;
        char kind;
        if (p[0] == '_' && p[1] == '_' && sscanf(p + 2, "%c%u%n", &kind, &k, &n) == 2 && (kind == 'i' || kind == 'p') &&
            k >= 1 && k <= c->n_in) {
            const char *name = tags_table_tag(e->t, c->in[k - 1])->name;
            used += (size_t)snprintf(out + used, sizeof out - used, kind == 'p' ? "prev(%s)" : "%s", name);
            p += 2 + n;
            continue;
        }
        out[used++] = *p++;
    }
    out[used < sizeof out ? used : sizeof out - 1] = '\0';
    snprintf(note, cap, "%s", out);
}

static int evaluate(expr_engine_t *e, computed_t *c, int64_t now_ms)
{
    const tags_tag_t *g = tags_table_tag(e->t, c->tag);
    tags_value_t in[EXPR_INPUTS_MAX], v = { .quality = TAGS_GOOD };
    char note[TAGS_NOTE_MAX];
    int64_t newest = 0;
    for (unsigned k = 0; k < c->n_in; k++) {
        tags_table_value(e->t, c->in[k], now_ms, &in[k]);
        newest = in[k].time_ms > newest ? in[k].time_ms : newest;
        if (in[k].quality != TAGS_GOOD && v.quality == TAGS_GOOD) {
            v = (tags_value_t){ .quality = TAGS_BAD, .reason = TAGS_BAD_INPUT };
            snprintf(note, sizeof note, "input %s is %s%s%s", tags_table_tag(e->t, c->in[k])->name,
                     tags_quality_name(in[k].quality), in[k].quality == TAGS_BAD ? ": " : "",
                     in[k].quality == TAGS_BAD ? tags_reason_name(in[k].reason) : "");
        }
    }
    v.time_ms = newest ? newest : now_ms;
    if (v.quality == TAGS_GOOD) {
        lua_State *L = expr_lua_state(e->lua);
        expr_lua_push(e->lua, c->ref);
        for (unsigned k = 0; k < c->n_in; k++)
            push_value(L, tags_table_tag(e->t, c->in[k]), &in[k], false);
        for (unsigned k = 0; k < c->n_in; k++)
            if (c->have_prev)
                push_value(L, tags_table_tag(e->t, c->in[k]), &c->prev[k], true);
            else
                lua_pushnil(L);
        if (c->have_last)
            push_value(L, g, &c->last, true);
        else
            lua_pushnil(L);
        if (c->have_prev)
            lua_pushnumber(L, (double)(v.time_ms - c->prev_ms) / 1000.0);
        else
            lua_pushnil(L);
        bool ok = expr_lua_call(e->lua, (int)(2 * c->n_in + 2), &e->lim, note, sizeof note) == 0;
        if (ok) {
            ok = take_result(L, g, &v, note, sizeof note);
            lua_pop(L, 1);
        }
        /* prev(X) and dt are about the inputs: kept whether the expression
         * worked or not, so a rate is good from its second evaluation on */
        memcpy(c->prev, in, c->n_in * sizeof *in);
        c->have_prev = true;
        c->prev_ms = v.time_ms;
        if (!ok) {
            v = (tags_value_t){ .quality = TAGS_BAD, .reason = TAGS_BAD_EXPR, .time_ms = v.time_ms };
            readable_note(e, c, note, sizeof note);
        } else {
            c->last = v;
            c->have_last = true;
        }
    }
    if (v.quality != TAGS_GOOD) {   /* the last value stays, as a failed read leaves it */
        tags_value_t old;
        tags_table_value(e->t, c->tag, now_ms, &old);
        v.raw = old.raw;
        v.eng = old.eng;
    }
    return tags_table_store_computed(e->t, c->tag, &v, v.quality == TAGS_GOOD ? NULL : note);
}

size_t expr_engine_run(expr_engine_t *e, int64_t now_ms, unsigned *out, size_t cap)
{
    size_t done = 0;
    if (!e || !e->any_dirty)
        return 0;
    e->any_dirty = false;
    for (size_t k = 0; k < e->n; k++) {
        computed_t *c = &e->c[k];
        if (!c->dirty)
            continue;
        c->dirty = false;
        evaluate(e, c, now_ms);
        if (done < cap)
            out[done] = c->tag;
        done++;
        for (unsigned d = e->dep_start[c->tag]; d < e->dep_start[c->tag + 1]; d++)
            e->c[e->dep[d]].dirty = true;   /* later in the order: this same pass */
    }
    return done;
}

int expr_engine_eval(expr_engine_t *e, size_t index, int64_t now_ms)
{
    if (index >= tags_table_count(e->t) || e->pos[index] == UINT_MAX)
        return -ENOENT;
    return evaluate(e, &e->c[e->pos[index]], now_ms);
}

/*
 * A write to computed tag `index` (asked: the value written, of the tag's
 * type) into what to write to its inverse's target: the inverse run in the
 * same sandbox and under the same limits as an expression, with `value` the
 * value asked and the tags it reads as they are now. The result is the
 * target's value as expressions see it (its engineering value), given as
 * text so that the target's codec checks its range and keeps 64-bit
 * integers exact. The caller holds the table's lock.
 */
int expr_engine_inverse(expr_engine_t *e, size_t index, const tags_value_t *asked, int64_t now_ms, unsigned *target,
                        char *text, size_t cap, char *msg, size_t mcap)
{
    if (!e || index >= tags_table_count(e->t) || e->pos[index] == UINT_MAX ||
        e->c[e->pos[index]].inv_ref == LUA_NOREF) {
        snprintf(msg, mcap, "the tag is computed and declares no inverse");
        return -ENOENT;
    }
    computed_t *c = &e->c[e->pos[index]];
    lua_State *L = expr_lua_state(e->lua);
    tags_value_t in[EXPR_INPUTS_MAX];
    for (unsigned k = 0; k < c->inv_n; k++) {
        tags_table_value(e->t, c->inv_in[k], now_ms, &in[k]);
        if (in[k].quality != TAGS_GOOD) {
            snprintf(msg, mcap, "the inverse reads %s, which is %s", tags_table_tag(e->t, c->inv_in[k])->name,
                     tags_quality_name(in[k].quality));
            return -EAGAIN;
        }
    }
    expr_lua_push(e->lua, c->inv_ref);
    for (unsigned k = 0; k < c->inv_n; k++)
        push_value(L, tags_table_tag(e->t, c->inv_in[k]), &in[k], false);
    push_value(L, tags_table_tag(e->t, c->tag), asked, false);
    if (c->have_last)
        push_value(L, tags_table_tag(e->t, c->tag), &c->last, true);
    else
        lua_pushnil(L);
    if (expr_lua_call(e->lua, (int)c->inv_n + 2, &e->lim, msg, mcap) != 0)
        return -EINVAL;
    int type = lua_type(L, -1);
    int rc = 0;
    if (type == LUA_TBOOLEAN)
        snprintf(text, cap, "%d", lua_toboolean(L, -1));
    else if (lua_isinteger(L, -1))
        snprintf(text, cap, "%lld", (long long)lua_tointeger(L, -1));
    else if (type == LUA_TNUMBER && isfinite(lua_tonumber(L, -1)))
        snprintf(text, cap, "%.17g", lua_tonumber(L, -1));
    else
        rc = -EINVAL, snprintf(msg, mcap, "the inverse gave %s, not a finite number or a boolean",
                               type == LUA_TNUMBER ? "a number that is not finite" : luaL_typename(L, -1));
    lua_pop(L, 1);
    *target = c->inv_target;
    return rc;
}
