/*
 * web/fails.c -- the failed logins' slowdown: a bounded table of records,
 * one per key (an address, or a user name), on the I/O thread (auth.c).
 *
 * After FAILS_FREE failures of a key each further one doubles its wait
 * (1 s, 2 s, 4 s ... 60 s); a try during the wait is refused unheard; a
 * success clears the record, and one with no failure for FAIL_FORGET_S is
 * forgotten. auth.c keeps two tables, addresses and user names, so that
 * the keys of one can never push out the other's (issue 42: one table of
 * 256 for both let a flood of failures with made-up names from many
 * addresses evict the record that slowed the guessing of a real user's
 * password).
 *
 * When a table is full a new key takes the place of the oldest record
 * that is not penalized (fewer than FAILS_FREE failures: it loses at most
 * a few free tries); only when every record is penalized does the oldest
 * penalized one give way, counted apart. A protected record (a configured
 * user's) never gives way: user names that no [user] has can only push
 * out each other.
 */
#include "web/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAILS_FREE 5                    /* failed logins before the slowdown */
#define FAIL_DELAY_MAX_S 60
#define FAIL_FORGET_S 900               /* a record with no failure for this long starts over */

typedef struct fail_record {
    char key[CONFIG_NAME_MAX + 8];      /* "" : free */
    unsigned fails;
    bool protect;                       /* never pushed out (a configured user's) */
    uint64_t last_ns, until_ns;         /* no try before until_ns */
} fail_record_t;

struct fail_table {
    unsigned cap;
    uint64_t evicted, evicted_penalized;   /* records pushed out by new keys; of them penalized */
    fail_record_t rec[];
};

fail_table_t *fail_table_new(unsigned cap)
{
    fail_table_t *t = calloc(1, sizeof *t + cap * sizeof t->rec[0]);
    if (t)
        t->cap = cap;
    return t;
}

void fail_table_free(fail_table_t *t)
{
    free(t);
}

static bool penalized(const fail_record_t *f)
{
    return f->fails >= FAILS_FREE;
}

static fail_record_t *find(fail_table_t *t, const char *key, bool make, bool protect, uint64_t now)
{
    fail_record_t *free_slot = NULL, *light = NULL, *heavy = NULL;
    for (unsigned i = 0; i < t->cap; i++) {
        fail_record_t *f = &t->rec[i];
        if (f->key[0] && now - f->last_ns > FAIL_FORGET_S * 1000000000ull)
            f->key[0] = 0;   /* forgotten */
        if (!f->key[0]) {
            free_slot = free_slot ? free_slot : f;
            continue;
        }
        if (strcmp(f->key, key) == 0)
            return f;
        if (f->protect)
            continue;
        fail_record_t **oldest = penalized(f) ? &heavy : &light;
        if (!*oldest || f->last_ns < (*oldest)->last_ns)
            *oldest = f;
    }
    if (!make)
        return NULL;
    fail_record_t *f = free_slot ? free_slot : light ? light : heavy;
    if (!f)
        return NULL;   /* every record protected: this key is not remembered */
    if (!free_slot) {
        t->evicted++;
        t->evicted_penalized += f == heavy;
    }
    *f = (fail_record_t){ .last_ns = now, .protect = protect };
    snprintf(f->key, sizeof f->key, "%s", key);
    return f;
}

unsigned fail_wait_s(fail_table_t *t, const char *key, uint64_t now)
{
    fail_record_t *f = find(t, key, false, false, now);
    return f && f->until_ns > now ? (unsigned)((f->until_ns - now + 999999999ull) / 1000000000ull) : 0;
}

void fail_note(fail_table_t *t, const char *key, bool protect, uint64_t now)
{
    fail_record_t *f = find(t, key, true, protect, now);
    if (!f)
        return;
    f->fails++;
    f->last_ns = now;
    if (f->fails >= FAILS_FREE) {
        unsigned shift = f->fails - FAILS_FREE, s = shift >= 6 ? FAIL_DELAY_MAX_S : 1u << shift;
        f->until_ns = now + (uint64_t)(s < FAIL_DELAY_MAX_S ? s : FAIL_DELAY_MAX_S) * 1000000000ull;
    }
}

void fail_clear(fail_table_t *t, const char *key, uint64_t now)
{
    fail_record_t *f = find(t, key, false, false, now);
    if (f)
        f->key[0] = 0;
}

void fail_evictions(const fail_table_t *t, uint64_t *evicted, uint64_t *evicted_penalized)
{
    *evicted = t->evicted;
    *evicted_penalized = t->evicted_penalized;
}
