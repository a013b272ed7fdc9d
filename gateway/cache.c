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
 * under cache_lock.
 */
#include "gateway/internal.h"

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
    pthread_mutex_lock(&gw->cache_lock);
    for (unsigned i = 0; i < gw->cfg->poll_count; i++) {
        const config_poll_t *g = &gw->cfg->polls[i];
        const config_device_t *d = &gw->cfg->devices[g->device];
        if (d->bus != bus || d->slave != slave || g->function != fn || addr >= g->address + g->count ||
            addr + count <= g->address)
            continue;
        gw_cache_entry_t *e = &gw->cache[i];
        if (!done) {
            e->writes_pending++;
        } else {
            if (e->writes_pending)
                e->writes_pending--;
            e->written_ns = now;
        }
    }
    pthread_mutex_unlock(&gw->cache_lock);
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
