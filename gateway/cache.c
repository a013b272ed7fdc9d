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
#include "gateway/gateway.h"

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

/* ---- the poller's subscriber ---------------------------------------------------- */

/* Each group in the read gets its entry cut from the answer (or its failure). */
static void on_poll_answer(void *ctx, const gw_poll_result_t *r)
{
    gw_t *gw = ctx;
    const tags_read_t *read = tags_plan_read(r->plan, r->read);
    size_t n;
    const tags_member_t *m = tags_plan_members(r->plan, r->read, &n);

    pthread_mutex_lock(&gw->cache_lock);
    for (size_t k = 0; k < n; k++) {
        if (!m[k].is_group)
            continue;
        gw_cache_entry_t *e = &gw->cache[m[k].index];
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
    pthread_mutex_unlock(&gw->cache_lock);
}

/* A read skipped a round: each of its groups counts an overrun. */
static void on_poll_overrun(void *ctx, const tags_plan_t *plan, size_t read)
{
    gw_t *gw = ctx;
    size_t n;
    const tags_member_t *m = tags_plan_members(plan, read, &n);
    pthread_mutex_lock(&gw->cache_lock);
    for (size_t k = 0; k < n; k++)
        if (m[k].is_group)
            gw->cache[m[k].index].overruns++;
    pthread_mutex_unlock(&gw->cache_lock);
}

gw_poll_subscriber_t cache_poll_subscriber(gw_t *gw)
{
    return (gw_poll_subscriber_t){ .answer = on_poll_answer, .overrun = on_poll_overrun, .ctx = gw };
}
