/*
 * expr/scan.c -- an expression's text into a Lua chunk whose arguments are
 * the tags it names.
 *
 * Why rewrite rather than look names up at run time: the names must be
 * resolved when the configuration is loaded (an unknown tag, a cycle, are
 * configuration errors), and a tag name may hold dots ("plc1.temp", a
 * template's DEVICE.ROW) that Lua would read as a field. So the text is
 * tokenized here as Lua tokenizes it (strings, long brackets, comments,
 * numbers, names) and each name chain that is no Lua keyword, builtin or
 * name the expression declares (function parameters, locals, for
 * variables) is a tag: replaced by the chunk's argument __iN. tag("a-b")
 * names a tag whose name is no Lua name; prev(X) is X's value at the
 * previous evaluation (__pN); if(c, a, b) is the builtin __if. Everything
 * else is copied as written, so Lua's own parser has the last word.
 */
#include "expr/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
};
/* sandbox.c's whitelist, and the chunk's own locals last and dt */
static const char *const builtins[] = {
    "min", "max", "abs", "round", "floor", "ceil", "sqrt", "exp", "log", "sin", "cos", "tan", "atan",
    "tointeger", "pi", "huge", "last", "dt",
};

#define LOCALS_MAX 64

typedef struct scan {
    const char *s;
    size_t at;
    char *out;
    size_t used, cap;
    char locals[LOCALS_MAX][TAGS_NAME_MAX];
    unsigned n_locals;
    bool collecting;              /* first pass: declarations only */
    bool inverse;                 /* an inverse: `value` is its argument, prev() and dt are not there */
    expr_lookup_fn lookup;
    void *ctx;
    unsigned *inputs;
    size_t n_inputs;
    char *msg;
    size_t mcap;
} scan_t;

static bool in_list(const char *const *list, size_t n, const char *w)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], w) == 0)
            return true;
    return false;
}

static bool is_local(const scan_t *sc, const char *w)
{
    for (unsigned i = 0; i < sc->n_locals; i++)
        if (strcmp(sc->locals[i], w) == 0)
            return true;
    return false;
}

static int fail(scan_t *sc, const char *fmt, const char *arg)
{
    snprintf(sc->msg, sc->mcap, fmt, arg);
    return -EINVAL;
}

static int emit(scan_t *sc, const char *p, size_t n)
{
    if (sc->collecting)
        return 0;
    if (sc->used + n + 1 > sc->cap)
        return fail(sc, "%s", "the expression is too long once its names are bound");
    memcpy(sc->out + sc->used, p, n);
    sc->used += n;
    sc->out[sc->used] = '\0';
    return 0;
}

static bool name_start(int c)
{
    return isalpha(c) || c == '_';
}

static bool name_char(int c)
{
    return isalnum(c) || c == '_';
}

static size_t skip_space(const char *s, size_t at)
{
    while (s[at] == ' ' || s[at] == '\t' || s[at] == '\n' || s[at] == '\r')
        at++;
    return at;
}

/* A name at `at`: its length (0: none). */
static size_t name_len(const char *s, size_t at)
{
    size_t n = 0;
    if (!name_start((unsigned char)s[at]))
        return 0;
    while (name_char((unsigned char)s[at + n]))
        n++;
    return n;
}

/* [==[ at `at`: its level, or -1. */
static int long_bracket(const char *s, size_t at)
{
    if (s[at] != '[')
        return -1;
    int level = 0;
    while (s[at + 1 + (size_t)level] == '=')
        level++;
    return s[at + 1 + (size_t)level] == '[' ? level : -1;
}

/* Past the long bracket of `level` opened at `at`; 0 when never closed. */
static size_t long_end(const char *s, size_t at, int level)
{
    for (size_t i = at + (size_t)level + 2; s[i]; i++) {
        if (s[i] != ']')
            continue;
        size_t k = 0;
        while (s[i + 1 + k] == '=')
            k++;
        if (k == (size_t)level && s[i + 1 + k] == ']')
            return i + k + 2;
    }
    return 0;
}

/* Past a quoted string opened at `at`; 0 when never closed. */
static size_t quote_end(const char *s, size_t at)
{
    char q = s[at];
    for (size_t i = at + 1; s[i] && s[i] != '\n'; i++) {
        if (s[i] == '\\' && s[i + 1])
            i++;
        else if (s[i] == q)
            return i + 1;
    }
    return 0;
}

static void declare(scan_t *sc, const char *w, size_t n)
{
    if (n >= TAGS_NAME_MAX || sc->n_locals == LOCALS_MAX)
        return;
    char name[TAGS_NAME_MAX];
    memcpy(name, w, n);
    name[n] = '\0';
    if (!is_local(sc, name))
        strcpy(sc->locals[sc->n_locals++], name);
}

/* After `function`, `local` or `for`: the names they declare (a function's
 * name and parameters; a list of locals; the loop's variables). */
static void declarations(scan_t *sc, const char *kw)
{
    const char *s = sc->s;
    size_t at = skip_space(s, sc->at), n;
    if (strcmp(kw, "function") == 0) {
        while ((n = name_len(s, at)) > 0 || s[at] == '.' || s[at] == ':')   /* function a.b:c( */
            at = skip_space(s, at + (n ? n : 1));
        if (s[at] != '(')
            return;
        at = skip_space(s, at + 1);
    }
    while ((n = name_len(s, at)) > 0) {
        if (strncmp(s + at, "function", n) == 0 && n == 8)
            return;   /* local function f: the next turn declares f */
        declare(sc, s + at, n);
        at = skip_space(s, at + n);
        if (s[at] != ',')
            return;
        at = skip_space(s, at + 1);
    }
}

/* The input slot of tag index i, adding it when new. */
static int slot_of(scan_t *sc, unsigned i)
{
    for (size_t k = 0; k < sc->n_inputs; k++)
        if (sc->inputs[k] == i)
            return (int)k;
    if (sc->n_inputs == EXPR_INPUTS_MAX)
        return fail(sc, "more than %s distinct tags in one expression", "32");
    sc->inputs[sc->n_inputs] = i;
    return (int)sc->n_inputs++;
}

/* A tag by name into its argument (__iN, or __pN for prev). */
static int bind(scan_t *sc, const char *name, bool prev)
{
    if (sc->collecting)
        return 0;
    int i = sc->lookup(sc->ctx, name);
    if (i < 0)
        return fail(sc, "unknown tag '%s'", name);
    int k = slot_of(sc, (unsigned)i);
    if (k < 0)
        return k;
    char arg[16];
    int n = snprintf(arg, sizeof arg, "%s%d", prev ? "__p" : "__i", k + 1);
    return emit(sc, arg, (size_t)n);
}

/* A name chain a.b.c at sc->at (its first name not a keyword): into chain. */
static size_t chain_at(const char *s, size_t at, char *chain, size_t cap)
{
    size_t start = at, n = name_len(s, at);
    at += n;
    while (s[at] == '.' && s[at + 1] != '.' && (n = name_len(s, at + 1)) > 0)
        at += 1 + n;
    if (at - start >= cap)
        return 0;
    memcpy(chain, s + start, at - start);
    chain[at - start] = '\0';
    return at - start;
}

/* prev(X) or tag("name") at sc->at (after the word): the name inside, or
 * -EINVAL. *len gets the whole form's length from the word's start. */
static int call_form(scan_t *sc, size_t word, size_t wlen, bool quoted, char *name, size_t *len)
{
    const char *s = sc->s;
    size_t at = skip_space(s, word + wlen + 1), end, n;
    if (quoted) {
        if ((s[at] != '"' && s[at] != '\'') || !(end = quote_end(s, at)))
            return fail(sc, "%s", "tag(...) takes the tag's name in quotes");
        n = end - at - 2;
        if (n == 0 || n >= TAGS_NAME_MAX || memchr(s + at + 1, '\\', n))
            return fail(sc, "%s", "tag(\"...\"): 1..47 characters, no escapes");
        memcpy(name, s + at + 1, n);
        name[n] = '\0';
        at = end;
    } else {
        if (!(n = chain_at(s, at, name, TAGS_NAME_MAX)))
            return fail(sc, "%s", "prev(...) takes one tag's name");
        at += n;
    }
    at = skip_space(s, at);
    if (s[at] != ')')
        return fail(sc, "%s", quoted ? "tag(\"NAME\") takes one name" : "prev(NAME) takes one name");
    *len = at + 1 - word;
    return 0;
}

/* One name (and what follows it when it is a chain or a call form). */
static int word(scan_t *sc, bool after_dot)
{
    const char *s = sc->s;
    size_t n = name_len(s, sc->at), next = skip_space(s, sc->at + n), len;
    char w[TAGS_NAME_MAX], name[TAGS_NAME_MAX];
    if (n >= TAGS_NAME_MAX)
        return fail(sc, "a name longer than %s characters", "47");
    memcpy(w, s + sc->at, n);
    w[n] = '\0';
    if (after_dot || in_list(keywords, sizeof keywords / sizeof *keywords, w)) {
        if (!after_dot && (strcmp(w, "function") == 0 || strcmp(w, "local") == 0 || strcmp(w, "for") == 0)) {
            size_t keep = sc->at;
            sc->at += n;
            declarations(sc, w);
            sc->at = keep;
        }
        if (!after_dot && strcmp(w, "if") == 0 && s[next] == '(') {
            sc->at += n;
            return emit(sc, "__if", 4);   /* if(c, a, b): the function */
        }
        sc->at += n;
        return emit(sc, w, n);
    }
    if (strncmp(w, "__", 2) == 0)
        return fail(sc, "'%s': names beginning with __ are reserved", w);
    bool is_prev = strcmp(w, "prev") == 0, is_tag = strcmp(w, "tag") == 0;
    if (sc->inverse && !is_local(sc, w) && (is_prev || strcmp(w, "dt") == 0))
        return fail(sc, "'%s' has no meaning in an inverse (a write has no previous evaluation)", w);
    if (sc->inverse && strcmp(w, "value") == 0 && !is_local(sc, w)) {
        sc->at += n;
        return emit(sc, "value", 5);   /* the value written to the computed tag */
    }
    if ((is_prev || is_tag) && s[next] == '(' && !is_local(sc, w)) {
        int rc = call_form(sc, sc->at, next - sc->at, is_tag, name, &len);
        if (rc < 0)
            return rc;
        sc->at += len;
        return bind(sc, name, is_prev);
    }
    if (is_local(sc, w) || in_list(builtins, sizeof builtins / sizeof *builtins, w)) {
        sc->at += n;
        return emit(sc, w, n);
    }
    /* a tag: the longest chain that names one, the rest are fields */
    size_t clen = chain_at(s, sc->at, name, sizeof name);
    if (clen == 0)
        return fail(sc, "a name longer than %s characters", "47");
    while (clen > n && sc->lookup(sc->ctx, name) < 0) {
        char *dot = strrchr(name, '.');
        *dot = '\0';
        clen = (size_t)(dot - name);
    }
    sc->at += clen;
    return bind(sc, name, false);
}

/* One pass over the text: declarations only, or the rewrite. */
static int pass(scan_t *sc)
{
    const char *s = sc->s;
    bool after_dot = false;
    sc->at = 0;
    while (s[sc->at]) {
        size_t at = sc->at, end;
        unsigned char c = (unsigned char)s[at];
        int level, rc = 0;
        if (s[at] == '-' && s[at + 1] == '-') {            /* a comment */
            level = long_bracket(s, at + 2);
            if (level >= 0 && !(end = long_end(s, at + 2, level)))
                return fail(sc, "%s", "a comment --[[ that is never closed");
            if (level < 0)
                for (end = at; s[end] && s[end] != '\n'; end++)
                    ;
            sc->at = end;
            rc = emit(sc, " ", 1);
        } else if ((level = long_bracket(s, at)) >= 0 || c == '"' || c == '\'') {
            end = level >= 0 ? long_end(s, at, level) : quote_end(s, at);
            if (!end)
                return fail(sc, "%s", "a string that is never closed");
            sc->at = end;
            rc = emit(sc, s + at, end - at);
        } else if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[at + 1]))) {
            end = at;                                        /* a number, as Lua reads it */
            while (isalnum((unsigned char)s[end]) || s[end] == '.' ||
                   ((s[end] == '+' || s[end] == '-') && strchr("eEpP", s[end - 1])))
                end++;
            sc->at = end;
            rc = emit(sc, s + at, end - at);
        } else if (name_start(c)) {
            rc = word(sc, after_dot);
        } else {
            end = at + 1 + (c == '.' && s[at + 1] == '.');
            sc->at = end;
            rc = emit(sc, s + at, end - at);
        }
        if (rc < 0)
            return rc;
        /* a single '.' or ':' makes the next name a field or method */
        after_dot = (sc->at - at == 1 && (c == '.' || c == ':'));
    }
    return 0;
}

/* Both forms: an expression's chunk takes its inputs, their previous values,
 * last and dt; an inverse's its inputs (tags it reads, W_SF in
 * `value / 10^W_SF`), then value and last, and may name no tag at all. */
static int rewrite(const char *text, bool inverse, expr_lookup_fn lookup, void *ctx, char *chunk, size_t cap,
                   unsigned *inputs, size_t *n_inputs, char *msg, size_t mcap)
{
    scan_t sc = { .s = text, .inverse = inverse, .lookup = lookup, .ctx = ctx, .inputs = inputs, .msg = msg,
                  .mcap = mcap };
    char body[EXPR_CHUNK_MAX];
    sc.out = body;
    sc.cap = sizeof body;
    body[0] = '\0';
    sc.collecting = true;
    int rc = pass(&sc);
    sc.collecting = false;
    if (rc == 0)
        rc = pass(&sc);
    if (rc < 0)
        return rc;
    if (sc.n_inputs == 0 && !inverse)
        return fail(&sc, "%s", "names no tag (a computed tag is evaluated when one of its inputs is read)");
    /* the arguments on the first line, so Lua's line numbers are the text's
     * (comments are gone: the closing parenthesis cannot be commented out) */
    size_t used = (size_t)snprintf(chunk, cap, "local ");
    for (size_t k = 0; k < sc.n_inputs && used < cap; k++)
        used += (size_t)snprintf(chunk + used, cap - used, "__i%zu,", k + 1);
    for (size_t k = 0; k < sc.n_inputs && used < cap && !inverse; k++)
        used += (size_t)snprintf(chunk + used, cap - used, "__p%zu,", k + 1);
    if (used < cap)
        used += (size_t)snprintf(chunk + used, cap - used, "%s=... return (%s)", inverse ? "value,last" : "last,dt",
                                 body);
    if (used >= cap)
        return fail(&sc, "%s", "the expression is too long once its names are bound");
    *n_inputs = sc.n_inputs;
    return 0;
}

int expr_rewrite(const char *text, expr_lookup_fn lookup, void *ctx, char *chunk, size_t cap,
                 unsigned *inputs, size_t *n_inputs, char *msg, size_t mcap)
{
    return rewrite(text, false, lookup, ctx, chunk, cap, inputs, n_inputs, msg, mcap);
}

int expr_rewrite_inverse(const char *text, expr_lookup_fn lookup, void *ctx, char *chunk, size_t cap,
                         unsigned *inputs, size_t *n_inputs, char *msg, size_t mcap)
{
    return rewrite(text, true, lookup, ctx, chunk, cap, inputs, n_inputs, msg, mcap);
}
