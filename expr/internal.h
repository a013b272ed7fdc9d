/*
 * expr/internal.h -- shared between expr/'s own files only.
 */
#ifndef RTUGW_EXPR_INTERNAL_H
#define RTUGW_EXPR_INTERNAL_H

#include "expr/expr.h"

#include <lua.h>
#include <stdbool.h>

#define EXPR_INPUTS_MAX 32           /* distinct tags one expression may name */
#define EXPR_CHUNK_MAX (8 * TAGS_EXPR_MAX + 64 * EXPR_INPUTS_MAX)

/* scan.c: an expression's text into a Lua chunk. lookup gives the table
 * index of a tag name as the expression writes it (scoped by the caller), or
 * -1. inputs gets the distinct tags named, in order of first use; the chunk
 * takes them as its arguments, then their previous values, then last and dt:
 * "local __i1,..,__p1,..,last,dt=... return (TEXT)". 0, or -EINVAL with why. */
typedef int (*expr_lookup_fn)(void *ctx, const char *name);
int expr_rewrite(const char *text, expr_lookup_fn lookup, void *ctx, char *chunk, size_t cap,
                 unsigned *inputs, size_t *n_inputs, char *msg, size_t mcap);
/* An inverse's text: `value` is the value written, prev() and dt refused,
 * no tag needed; "local __i1,..,value,last=... return (TEXT)". */
int expr_rewrite_inverse(const char *text, expr_lookup_fn lookup, void *ctx, char *chunk, size_t cap,
                         unsigned *inputs, size_t *n_inputs, char *msg, size_t mcap);

/* sandbox.c: one Lua state with the whitelisted functions, its allocator
 * (which enforces the memory cap) and its step hook. */
typedef struct expr_lua expr_lua_t;
expr_lua_t *expr_lua_new(void);
void expr_lua_free(expr_lua_t *x);
lua_State *expr_lua_state(expr_lua_t *x);
/* Compiles a chunk in the sandbox; *ref names it. 0, or -EINVAL with Lua's message. */
int expr_lua_compile(expr_lua_t *x, const char *chunk, int *ref, char *msg, size_t cap);
/* Pushes chunk ref; the caller pushes nargs arguments, then calls expr_lua_call. */
void expr_lua_push(expr_lua_t *x, int ref);
/* Runs it under the limits: 0 with its one result on the stack (the caller
 * pops it), or -1 with why in msg and nothing on the stack. */
int expr_lua_call(expr_lua_t *x, int nargs, const expr_limits_t *lim, char *msg, size_t cap);

#endif
