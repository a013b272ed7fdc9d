/*
 * expr/expr.h -- computed tags: the expression engine that gives a tag of
 * tags/ (tags_tag_t.computed) its value from other tags' values. Owns: the
 * embedded Lua 5.4 (Debian's liblua5.4), its sandbox, the step budget and the
 * memory cap of one evaluation, the resolution of an expression's names to
 * tags, the dependency order and its cycles. May call: `tags/` (the table: the
 * inputs' values, the computed values and their notes), liblua5.4, libc.
 *
 * An expression is a Lua expression over tags by name, compiled once when
 * the engine is built (a configuration that does not compile is refused,
 * each error one line "FILE:LINE: tag NAME: expr 'TEXT': why"). It runs in
 * a sandbox of whitelisted functions (no I/O, no os/io/require/load, no
 * string library), for at most `steps` Lua instructions and `memory` bytes
 * of new allocation; past either it stops with an error and the tag is bad
 * with that reason. docs/tags.md has the language. A computed tag may
 * declare an inverse (tags_table_inverse): compiled with it, its target
 * checked (an input of the expression, writable, not computed), and run for
 * a write (expr_engine_inverse) under the same limits.
 *
 *   expr_engine_t *e = expr_engine_new(table, NULL, "gw.ini", errfn, ctx, &n_errors);
 *   ... a read stores input values (tags_table_apply): the table tells e ...
 *   n = expr_engine_run(e, now_ms, evaluated, cap);  // the computed tags now
 *
 * Evaluated when an input is stored, not on a timer: the table calls the
 * engine for every value a read stores (tags_table_on_store), the engine
 * marks the computed tags that read it, and expr_engine_run evaluates them
 * (and what depends on them) once each, in dependency order. Not
 * thread-safe: one engine per table, used under the table's lock.
 */
#ifndef RTUGW_EXPR_EXPR_H
#define RTUGW_EXPR_EXPR_H

#include <stddef.h>
#include <stdint.h>

#include "tags/tags.h"

typedef struct expr_limits {
    unsigned steps;                  /* Lua instructions one evaluation may run */
    size_t memory;                   /* bytes one evaluation may allocate beyond what the engine holds */
} expr_limits_t;
/* 100,000 steps are ~0.3 ms of Lua on one core: a runaway expression costs
 * the poller that much per read, not a stall. 256 KiB hold any honest
 * expression's temporaries a hundred times over. */
#define EXPR_LIMITS_DEFAULT ((expr_limits_t){ 100000, 256u * 1024u })

typedef struct expr_engine expr_engine_t;
typedef void (*expr_error_fn)(void *ctx, const char *line);

/*
 * The engine of table t's computed tags: each expression compiled, its names
 * resolved (a computed tag named DEVICE.X, a template's row, looks names up
 * as DEVICE.NAME first, then NAME), cycles refused (naming the cycle); each
 * computed tag's interval set to the shortest of its inputs'. source names
 * the file of tags with no CSV of their own ([tag] sections). Every error
 * goes to err; then NULL, with *errors their number. NULL with 0 errors:
 * out of memory. Becomes t's store listener; t must outlive it.
 */
expr_engine_t *expr_engine_new(tags_table_t *t, const expr_limits_t *lim, const char *source,
                               expr_error_fn err, void *ctx, unsigned *errors);
void expr_engine_free(expr_engine_t *e);
/* How many computed tags it evaluates. */
size_t expr_engine_count(const expr_engine_t *e);

/*
 * Evaluates every computed tag an input of which was stored since the last
 * run, and those that depend on them, once each, in dependency order, at
 * now_ms (the staleness of inputs is judged then). The table indices of
 * those evaluated go to out (up to cap); returns how many were evaluated.
 */
size_t expr_engine_run(expr_engine_t *e, int64_t now_ms, unsigned *out, size_t cap);

/* Evaluates computed tag `index` of the table now, whether its inputs were
 * stored or not (the benchmark). 1 when its value changed, 0 when not,
 * -ENOENT when it is no computed tag. */
int expr_engine_eval(expr_engine_t *e, size_t index, int64_t now_ms);

/*
 * A write to computed tag `index` through its inverse (tags_table_inverse):
 * the inverse evaluated with `value` = asked (a value of the tag's type),
 * under the same limits as an expression. 0 with *target the input tag to
 * write and text its value as text (for tags_encode_text); -ENOENT when the
 * tag declares no inverse, -EAGAIN when a tag the inverse reads is not good,
 * -EINVAL when the inverse fails or gives no number; msg says why. Under
 * the table's lock, as every other call.
 */
int expr_engine_inverse(expr_engine_t *e, size_t index, const tags_value_t *asked, int64_t now_ms, unsigned *target,
                        char *text, size_t cap, char *msg, size_t mcap);

#endif
