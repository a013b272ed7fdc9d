/*
 * actor/pool.c -- message cells: slab-allocated, recycled through per-thread
 * caches ("magazines") and a per-system depot.
 *
 * Three size classes (64, 320 and 1088 bytes with the 16-byte header). A
 * thread allocates from and frees to its own thread-local cache without any
 * lock; only when its cache runs dry or holds more than two magazines does it
 * take the depot mutex to move one magazine (POOL_MAG cells) at once, and
 * only when the depot is empty is a new slab of POOL_MAG cells malloc'd. So
 * the hot path is a pointer pop and push; the mutex is taken at most once
 * per POOL_MAG messages, and only where production and consumption are
 * unbalanced between threads. Slabs are freed with the system.
 *
 * A cache belongs to one system (keyed by its unique id): a thread that
 * switches systems drops its cached cells (still owned by that system's
 * slabs, freed with it) and starts afresh.
 */
#include "actor/internal.h"

#include <stdlib.h>
#include <string.h>

#define POOL_MAG 64

static const size_t class_size[POOL_CLASSES] = { 64, 320, 1088 };

static _Thread_local struct {
    uint64_t sys_id;
    amsg_t *free[POOL_CLASSES];
    unsigned n[POOL_CLASSES];
} tc;

static amsg_t *chain_next(amsg_t *chain)
{
    amsg_t *next;
    memcpy(&next, chain->data, sizeof next);
    return next;
}

static void chain_set_next(amsg_t *chain, amsg_t *next)
{
    memcpy(chain->data, &next, sizeof next);
}

static void own_cache(const actor_system_t *sys)
{
    if (tc.sys_id != sys->id) {
        memset(&tc, 0, sizeof tc);
        tc.sys_id = sys->id;
    }
}

/* Under pool_lock: a fresh slab of POOL_MAG linked cells, or NULL. */
static amsg_t *new_slab(actor_system_t *sys, unsigned cls)
{
    size_t sz = class_size[cls];
    if (sys->nslabs == sys->cap_slabs) {
        size_t cap = sys->cap_slabs ? 2 * sys->cap_slabs : 64;
        void **s = realloc(sys->slabs, cap * sizeof *s);
        if (!s)
            return NULL;
        sys->slabs = s;
        sys->cap_slabs = cap;
    }
    unsigned char *slab = aligned_alloc(CACHE_LINE, sz * POOL_MAG);
    if (!slab)
        return NULL;
    sys->slabs[sys->nslabs++] = slab;
    for (unsigned i = 0; i < POOL_MAG; i++) {
        amsg_t *m = (amsg_t *)(slab + i * sz);
        amsg_t *next = i + 1 < POOL_MAG ? (amsg_t *)(slab + (i + 1) * sz) : NULL;
        atomic_store_explicit(&m->next, next, memory_order_relaxed);
        m->cls = (uint8_t)cls;
    }
    return (amsg_t *)slab;
}

amsg_t *pool_alloc(actor_system_t *sys, size_t len)
{
    unsigned cls = len <= class_size[0] - sizeof(amsg_t)   ? 0
                   : len <= class_size[1] - sizeof(amsg_t) ? 1
                                                           : 2;
    own_cache(sys);
    amsg_t *m = tc.free[cls];
    if (!m) {
        pthread_mutex_lock(&sys->pool_lock);
        m = sys->depot[cls];
        if (m)
            sys->depot[cls] = chain_next(m);
        else
            m = new_slab(sys, cls);
        pthread_mutex_unlock(&sys->pool_lock);
        if (!m)
            return NULL;
        tc.n[cls] = POOL_MAG;
    }
    /* relaxed: the free list is private to this thread. */
    tc.free[cls] = atomic_load_explicit(&m->next, memory_order_relaxed);
    tc.n[cls]--;
    m->cls = (uint8_t)cls;
    return m;
}

void pool_free(actor_system_t *sys, amsg_t *m)
{
    unsigned cls = m->cls;
    own_cache(sys);
    atomic_store_explicit(&m->next, tc.free[cls], memory_order_relaxed);
    tc.free[cls] = m;
    if (++tc.n[cls] < 2 * POOL_MAG)
        return;
    /* Give one magazine back: the first POOL_MAG cells. */
    amsg_t *chain = tc.free[cls], *last = chain;
    for (unsigned i = 1; i < POOL_MAG; i++)
        last = atomic_load_explicit(&last->next, memory_order_relaxed);
    tc.free[cls] = atomic_load_explicit(&last->next, memory_order_relaxed);
    atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
    tc.n[cls] -= POOL_MAG;
    pthread_mutex_lock(&sys->pool_lock);
    chain_set_next(chain, sys->depot[cls]);
    sys->depot[cls] = chain;
    pthread_mutex_unlock(&sys->pool_lock);
}

void pool_destroy(actor_system_t *sys)
{
    for (size_t i = 0; i < sys->nslabs; i++)
        free(sys->slabs[i]);
    free(sys->slabs);
    sys->slabs = NULL;
    sys->nslabs = sys->cap_slabs = 0;
    for (unsigned c = 0; c < POOL_CLASSES; c++)
        sys->depot[c] = NULL;
    /* This thread's cache points into the freed slabs: forget it. */
    if (tc.sys_id == sys->id)
        memset(&tc, 0, sizeof tc);
}
