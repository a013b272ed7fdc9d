/*
 * expr/sandbox.c -- the one Lua state the expressions run in, and what
 * bounds them.
 *
 * The sandbox is built, not stripped: no standard library is opened into
 * the expressions' reach. Their only globals are a table of whitelisted
 * functions (math's min, max, abs, floor, ceil, sqrt, exp, log, sin, cos,
 * tan, atan, tointeger, pi, huge; round and __if of our own), behind a
 * proxy whose __newindex refuses, so one expression cannot change what
 * another sees. No string library means strings have no methods (no
 * ("x"):rep(1e9)); no base library means no load, dofile, require, print,
 * pcall, setmetatable, collectgarbage; chunks are text only (mode "t").
 *
 * Bounds, per evaluation: the count hook fires once after `steps` VM
 * instructions (lua_sethook resets the count on each call, so it costs
 * nothing until then) and raises an error, which stops loops and runaway
 * recursion alike; the allocator refuses any growth past the bytes held
 * at the call's start plus `memory`, which Lua turns into a memory error
 * (a string doubled in a loop, a table filled, the Lua stack of a deep
 * recursion: they all allocate). Outside a call the allocator is unbounded
 * (compiling, and what the engine pushes). What a stopped call left is
 * garbage that Lua's incremental collector takes back as later calls
 * allocate (the cap is counted from what is held at each call's start, so
 * garbage never fails an honest call); a full collection after each failure
 * would cost a hostile expression ~4 ms a read instead of ~0.02.
 */
#include "expr/internal.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct expr_lua {
    lua_State *L;
    size_t used;                 /* bytes Lua holds */
    size_t limit;                /* growth refused past this; SIZE_MAX outside a call */
    unsigned steps;              /* the budget of the call in progress, for its message */
    int env;                     /* registry ref of the proxy every chunk gets as _ENV */
};

static void *bounded_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    expr_lua_t *x = ud;
    size_t old = ptr ? osize : 0;   /* with ptr NULL, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        x->used -= old;
        return NULL;
    }
    if (nsize > old && x->used - old + nsize > x->limit)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p)
        x->used = x->used - old + nsize;
    return p;
}

static void budget_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    expr_lua_t *x = *(expr_lua_t **)lua_getextraspace(L);
    luaL_error(L, "step budget of %d instructions exceeded", (int)x->steps);
}

/* round(x): half away from zero, an integer where one holds it;
 * round(x, n): to n decimals (0..15). */
static int l_round(lua_State *L)
{
    if (lua_isinteger(L, 1) && lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        return 1;
    }
    double v = luaL_checknumber(L, 1);
    lua_Integer digits = luaL_optinteger(L, 2, 0);
    luaL_argcheck(L, digits >= 0 && digits <= 15, 2, "0..15 decimals");
    if (digits > 0) {
        double p = pow(10, (double)digits);
        lua_pushnumber(L, round(v * p) / p);
        return 1;
    }
    lua_Integer i;
    double r = round(v);
    if (lua_numbertointeger(r, &i))
        lua_pushinteger(L, i);
    else
        lua_pushnumber(L, r);
    return 1;
}

/* if(c, a, b): a when c is neither false nor nil, else b (both evaluated). */
static int l_if(lua_State *L)
{
    lua_settop(L, 3);
    lua_pushvalue(L, lua_toboolean(L, 1) ? 2 : 3);
    return 1;
}

static int l_refuse_global(lua_State *L)
{
    return luaL_error(L, "an expression cannot set a global ('%s')", luaL_optstring(L, 2, "?"));
}

/* The whitelist into a table, and the proxy over it (left on the stack). */
static void build_env(lua_State *L)
{
    static const char *const from_math[] = { "min", "max", "abs", "floor", "ceil", "sqrt", "exp", "log", "sin",
                                             "cos", "tan", "atan", "tointeger", "pi", "huge" };
    luaL_requiref(L, "math", luaopen_math, 0);     /* math, not a global: we copy from it */
    lua_newtable(L);                               /* the whitelist */
    for (size_t i = 0; i < sizeof from_math / sizeof *from_math; i++) {
        lua_getfield(L, -2, from_math[i]);
        lua_setfield(L, -2, from_math[i]);
    }
    lua_pushcfunction(L, l_round);
    lua_setfield(L, -2, "round");
    lua_pushcfunction(L, l_if);
    lua_setfield(L, -2, "__if");
    lua_newtable(L);                               /* the proxy */
    lua_newtable(L);                               /* its metatable */
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_refuse_global);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_replace(L, -3);                            /* proxy where math was */
    lua_pop(L, 1);                                 /* the whitelist lives on in __index */
}

/* Unprotected errors can only come from our own pushes out of memory. */
static int panic(lua_State *L)
{
    fprintf(stderr, "rtugw: expressions: %s\n", lua_tostring(L, -1));
    abort();
}

expr_lua_t *expr_lua_new(void)
{
    expr_lua_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->limit = SIZE_MAX;
    if (!(x->L = lua_newstate(bounded_alloc, x))) {
        free(x);
        return NULL;
    }
    lua_atpanic(x->L, panic);
    *(expr_lua_t **)lua_getextraspace(x->L) = x;
    build_env(x->L);
    x->env = luaL_ref(x->L, LUA_REGISTRYINDEX);
    return x;
}

void expr_lua_free(expr_lua_t *x)
{
    if (!x)
        return;
    lua_close(x->L);
    free(x);
}

lua_State *expr_lua_state(expr_lua_t *x)
{
    return x->L;
}

int expr_lua_compile(expr_lua_t *x, const char *chunk, int *ref, char *msg, size_t cap)
{
    lua_State *L = x->L;
    if (luaL_loadbufferx(L, chunk, strlen(chunk), "=expr", "t") != LUA_OK) {
        snprintf(msg, cap, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -EINVAL;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->env);
    lua_setupvalue(L, -2, 1);                      /* _ENV: the proxy */
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

void expr_lua_push(expr_lua_t *x, int ref)
{
    lua_rawgeti(x->L, LUA_REGISTRYINDEX, ref);
}

int expr_lua_call(expr_lua_t *x, int nargs, const expr_limits_t *lim, char *msg, size_t cap)
{
    lua_State *L = x->L;
    x->steps = lim->steps;
    x->limit = x->used + lim->memory;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, (int)lim->steps);
    int rc = lua_pcall(L, nargs, 1, 0);
    x->limit = SIZE_MAX;
    if (rc == LUA_OK)
        return 0;
    if (rc == LUA_ERRMEM)
        snprintf(msg, cap, "memory cap of %zu KiB exceeded", lim->memory / 1024);
    else
        snprintf(msg, cap, "%s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error");
    lua_pop(L, 1);
    return -1;
}
