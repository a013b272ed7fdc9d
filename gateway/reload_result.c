/*
 * gateway/reload_result.c -- one reload's outcome (reload_result.h).
 *
 * One way to append a key to a space-separated list, where control.c,
 * web/http.c and the front ends each wrote their own snprintf at an offset:
 * a key goes in whole or not at all, and a list that runs out of room says
 * so with " ..." (room for it is kept from the start, so it always fits),
 * so /status never shows a cut key as if it were a real one.
 */
#include "gateway/reload_result.h"

#include <stdio.h>
#include <string.h>

#define MORE " ..."

static bool has(const char *list, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = list; n && (p = strstr(p, key)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return true;
    return false;
}

static int add(char *list, size_t cap, unsigned *dropped, const char *key)
{
    size_t used = strlen(list), n = strlen(key);
    if (!n || has(list, key))
        return 0;
    if (strcmp(list, &MORE[1]) == 0 || (used >= sizeof MORE - 1 && strcmp(list + used - (sizeof MORE - 1), MORE) == 0)) {
        (*dropped)++;   /* full already: the marker is there */
        return -1;
    }
    if (used + (used ? 1 : 0) + n + sizeof MORE > cap) {
        snprintf(list + used, cap - used, "%s", used ? MORE : &MORE[1]);
        (*dropped)++;
        return -1;
    }
    snprintf(list + used, cap - used, "%s%s", used ? " " : "", key);
    return 0;
}

int reload_restart_add(reload_result_t *res, const char *key)
{
    return add(res->restart, sizeof res->restart, &res->dropped, key);
}

int reload_applied_add(reload_result_t *res, const char *key)
{
    return add(res->applied, sizeof res->applied, &res->dropped, key);
}

int reload_queued_add(reload_result_t *res, const char *key)
{
    return add(res->queued, sizeof res->queued, &res->dropped, key);
}

void reload_error(reload_result_t *res, const char *err)
{
    if (!res->error[0])
        snprintf(res->error, sizeof res->error, "%s", err);
}

bool reload_applied_has(const reload_result_t *res, const char *key)
{
    return has(res->applied, key);
}

bool reload_restart_has(const reload_result_t *res, const char *key)
{
    return has(res->restart, key);
}
