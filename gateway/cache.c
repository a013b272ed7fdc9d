/*
 * gateway/cache.c -- coherence of the poll cache with writes through the
 * gateway (serve_cached_ms).
 *
 * A read answered from the cache must never return a value from before a
 * write that this gateway has already answered. So a write marks every
 * cache entry whose range it touches: while it is in flight the entry is
 * not served (writes_pending), and once answered the entry is served again
 * only from a poll *submitted* after the write's answer (t_req_ns >
 * written_ns). The bus executes a slave's requests in order, so such a poll
 * was executed after the write and carries its effect. Everything here runs
 * under the cache's lock.
 *
 * The lock is named only in this file. It guards the entries and, because
 * a cached read matches a request against the groups and their devices,
 * the running configuration's poll and device tables while a reload
 * replaces them (cache_set_devices, cache_swap_groups, on the I/O thread,
 * which alone writes them: readers on that thread need no lock for them).
 * Readers elsewhere take what they need under it and format after
 * (cache_snapshot; report_polls.c formats it), so no lock is held while
 * JSON is written.
 */
#include "gateway/wiring.h"

#include <stdlib.h>
#include <string.h>

/* The cache: its entries and the lock that guards them, which no other file
 * names (gw_t holds only this opaque handle). */
struct gw_cache {
    pthread_mutex_t lock;
    gw_cache_entry_t *entries;   /* one per poll group of gw->cfg */
};

/* The table a write changes (as the poll function that reads it) and its range. */
static bool write_range(const uint8_t *pdu, size_t len, unsigned *fn, unsigned *addr, unsigned *count)
{
    if (len < 5)
        return false;
    *addr = (unsigned)(pdu[1] << 8 | pdu[2]);
    switch (pdu[0]) {
    case 5: *fn = 1; *count = 1; return true;
    case 15: *fn = 1; *count = (unsigned)(pdu[3] << 8 | pdu[4]); return true;
    case 6: case 22: *fn = 3; *count = 1; return true;
    case 16: *fn = 3; *count = (unsigned)(pdu[3] << 8 | pdu[4]); return true;
    case 23:
        if (len < 9)
            return false;
        *fn = 3;
        *addr = (unsigned)(pdu[5] << 8 | pdu[6]);
        *count = (unsigned)(pdu[7] << 8 | pdu[8]);
        return true;
    default:
        return false;
    }
}

/* Marks every cache entry the write touches: in flight, or answered now. */
static void for_touched(gw_t *gw, unsigned bus, unsigned slave, const uint8_t *pdu, size_t len, bool done)
{
    unsigned fn, addr, count;
    if (!write_range(pdu, len, &fn, &addr, &count))
        return;
    uint64_t now = gw_now_ns();
    pthread_mutex_lock(&gw->cache->lock);
    for (unsigned i = 0; i < gw->cfg->poll_count; i++) {
        const config_poll_t *g = &gw->cfg->polls[i];
        const config_device_t *d = &gw->cfg->devices[g->device];
        if (d->bus != bus || d->slave != slave || g->function != fn || addr >= g->address + g->count ||
            addr + count <= g->address)
            continue;
        gw_cache_entry_t *e = &gw->cache->entries[i];
        if (!done) {
            e->writes_pending++;
        } else {
            if (e->writes_pending)
                e->writes_pending--;
            e->written_ns = now;
        }
    }
    pthread_mutex_unlock(&gw->cache->lock);
}

void cache_write_begin(gw_t *gw, unsigned bus, unsigned slave, const uint8_t *pdu, size_t len)
{
    for_touched(gw, bus, slave, pdu, len, false);
}

void cache_write_end(gw_t *gw, unsigned bus, unsigned slave, const uint8_t *pdu, size_t len)
{
    for_touched(gw, bus, slave, pdu, len, true);
}

bool cache_servable(const gw_cache_entry_t *e, uint64_t now, uint64_t max_age_ns)
{
    return e->ok && !e->writes_pending && e->t_req_ns > e->written_ns && now - e->t_ns <= max_age_ns;
}

/* ---- the poller's subscriber ---------------------------------------------------- */

/* Each group in the read gets its entry cut from the answer (or its failure). */
static void on_poll_answer(void *ctx, const gw_poll_result_t *r)
{
    gw_t *gw = ctx;
    const tags_read_t *read = tags_plan_read(r->plan, r->read);
    size_t n;
    const tags_member_t *m = tags_plan_members(r->plan, r->read, &n);

    pthread_mutex_lock(&gw->cache->lock);
    for (size_t k = 0; k < n; k++) {
        if (!m[k].is_group)
            continue;
        gw_cache_entry_t *e = &gw->cache->entries[m[k].index];
        e->polls++;
        if (!r->good) {
            e->ok = 0;
            e->exception = r->exception ? r->pdu[1] : 0;
            e->failures++;
        } else {
            for (unsigned i = 0; i < m[k].count; i++)
                e->values[i] = poll_item(r, m[k].address - read->address + i);
            e->ok = 1;
            e->count = m[k].count;
            e->t_ns = r->now_ns;
            e->t_req_ns = r->t_req_ns;
        }
    }
    pthread_mutex_unlock(&gw->cache->lock);
}

/* A read skipped a round: each of its groups counts an overrun. */
static void on_poll_overrun(void *ctx, const tags_plan_t *plan, size_t read)
{
    gw_t *gw = ctx;
    size_t n;
    const tags_member_t *m = tags_plan_members(plan, read, &n);
    pthread_mutex_lock(&gw->cache->lock);
    for (size_t k = 0; k < n; k++)
        if (m[k].is_group)
            gw->cache->entries[m[k].index].overruns++;
    pthread_mutex_unlock(&gw->cache->lock);
}

gw_poll_subscriber_t cache_poll_subscriber(gw_t *gw)
{
    return (gw_poll_subscriber_t){ .answer = on_poll_answer, .overrun = on_poll_overrun, .ctx = gw };
}

/* ---- the table and its lock ---------------------------------------------------- */

int cache_init(gw_t *gw)
{
    gw_cache_t *c = calloc(1, sizeof *c);
    if (!c || !(c->entries = calloc(gw->cfg->poll_count + 1, sizeof *c->entries))) {
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    gw->cache = c;
    return 0;
}

void cache_fini(gw_t *gw)
{
    if (!gw->cache)
        return;
    pthread_mutex_destroy(&gw->cache->lock);
    free(gw->cache->entries);
    free(gw->cache);
    gw->cache = NULL;
}

/* A read the cache answers now (serve_cached_ms): the PDU's length, or 0. */
size_t cache_answer(gw_t *gw, unsigned bus, unsigned slave, const rtu_request_t *req, uint8_t pdu[RTU_MAX_PDU])
{
    const config_t *cfg = gw->cfg;
    uint64_t now = gw_now_ns();
    bool hit = false;

    if (req->function < 1 || req->function > 4)
        return 0;
    pthread_mutex_lock(&gw->cache->lock);
    for (unsigned i = 0; i < cfg->poll_count && !hit; i++) {
        const config_poll_t *g = &cfg->polls[i];
        const config_device_t *d = &cfg->devices[g->device];
        const gw_cache_entry_t *e = &gw->cache->entries[i];
        if (!g->serve_cached_ms || d->bus != bus || d->slave != slave || g->function != req->function ||
            req->address < g->address || req->address + req->quantity > g->address + g->count ||
            !cache_servable(e, now, (uint64_t)g->serve_cached_ms * 1000000ull))
            continue;
        unsigned off = req->address - g->address;
        pdu[0] = req->function;
        if (req->function >= 3) {
            pdu[1] = (uint8_t)(2 * req->quantity);
            for (unsigned k = 0; k < req->quantity; k++) {
                pdu[2 + 2 * k] = (uint8_t)(e->values[off + k] >> 8);
                pdu[3 + 2 * k] = (uint8_t)e->values[off + k];
            }
        } else {
            pdu[1] = (uint8_t)((req->quantity + 7) / 8);
            memset(pdu + 2, 0, pdu[1]);
            for (unsigned k = 0; k < req->quantity; k++)
                pdu[2 + k / 8] |= (uint8_t)((e->values[off + k] & 1) << (k % 8));
        }
        hit = true;
    }
    pthread_mutex_unlock(&gw->cache->lock);
    return hit ? 2u + pdu[1] : 0;
}

unsigned cache_polls_ok(gw_t *gw)
{
    unsigned ok = 0;
    pthread_mutex_lock(&gw->cache->lock);
    for (unsigned i = 0; i < gw->cfg->poll_count; i++)
        ok += gw->cache->entries[i].ok;
    pthread_mutex_unlock(&gw->cache->lock);
    return ok;
}

gw_cache_view_t *cache_snapshot(gw_t *gw, unsigned *n)
{
    pthread_mutex_lock(&gw->cache->lock);
    size_t items = 0;
    *n = gw->cfg->poll_count;
    for (unsigned i = 0; i < *n; i++)
        items += gw->cache->entries[i].count;
    gw_cache_view_t *v = malloc((*n + 1) * sizeof *v + items * sizeof(uint16_t));
    uint16_t *values = v ? (uint16_t *)(v + *n + 1) : NULL;
    for (unsigned i = 0; v && i < *n; i++) {
        const gw_cache_entry_t *e = &gw->cache->entries[i];
        v[i] = (gw_cache_view_t){ .t_ns = e->t_ns, .polls = e->polls, .failures = e->failures,
                                  .overruns = e->overruns, .count = e->count, .ok = e->ok,
                                  .exception = e->exception, .values = values };
        memcpy(values, e->values, e->count * sizeof *values);
        values += e->count;
    }
    pthread_mutex_unlock(&gw->cache->lock);
    return v;
}

int cache_set_devices(gw_t *gw, const config_t *fresh)
{
    pthread_mutex_lock(&gw->cache->lock);
    int rc = config_set_devices(gw->cfg, fresh->devices, fresh->device_count);
    pthread_mutex_unlock(&gw->cache->lock);
    return rc;
}

/* Whether group a of ca and group b of cb read the same thing (their line in
 * the file aside): their devices compared by name, as a device removed
 * before them shifts their index, and by where the device answers (a device
 * moved to another bus or slave id reads other registers). */
static bool same_group(const config_t *ca, const config_poll_t *a, const config_t *cb, const config_poll_t *b)
{
    return strcmp(a->name, b->name) == 0 && a->device < ca->device_count && b->device < cb->device_count &&
           strcmp(ca->devices[a->device].name, cb->devices[b->device].name) == 0 &&
           ca->devices[a->device].bus == cb->devices[b->device].bus &&
           ca->devices[a->device].slave == cb->devices[b->device].slave && a->function == b->function &&
           a->address == b->address && a->count == b->count;
}

/* The poll groups and their entries, swapped under the lock (the front ends
 * serve cached reads under it): a group reading what it read before keeps
 * its entry (values, counters, writes pending); was holds the devices the
 * running groups name by index. */
int cache_swap_groups(gw_t *gw, const config_t *fresh, const config_t *was)
{
    gw_cache_entry_t *cache = calloc(fresh->poll_count + 1, sizeof *cache);
    if (!cache)
        return -1;
    pthread_mutex_lock(&gw->cache->lock);
    for (unsigned i = 0; i < fresh->poll_count; i++)
        for (unsigned j = 0; j < gw->cfg->poll_count; j++)
            if (same_group(fresh, &fresh->polls[i], was, &gw->cfg->polls[j])) {
                cache[i] = gw->cache->entries[j];
                break;
            }
    gw_cache_entry_t *old = gw->cache->entries;
    gw->cache->entries = cache;
    if (config_set_polls(gw->cfg, fresh->polls, fresh->poll_count) != 0) {
        gw->cache->entries = old;
        pthread_mutex_unlock(&gw->cache->lock);
        free(cache);
        return -1;
    }
    pthread_mutex_unlock(&gw->cache->lock);
    free(old);
    return 0;
}
