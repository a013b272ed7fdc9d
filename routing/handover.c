/*
 * routing/handover.c -- a router replaced while the old one still decodes:
 * the daemon's [router] reload builds a new router, hands it what the old
 * one learned, and lets go of the old one, which lives on until the last
 * thread decoding through it has closed its handle.
 *
 * Why the old router is freed by its last handle and not by its owner: the
 * handles are held by threads the owner does not run (a bus's line, on its
 * port's loop) and close when those threads retire them, in any order and
 * at any time after the swap. Every handle is in r->threads under r->lock;
 * router_release marks the router released under that lock, and
 * router_thread_free, under the same lock, sees whether it took the last
 * handle of a released router: exactly one of them sees "released and no
 * handle left", so the router is freed once, after every handle, and no
 * handle outlives it. Nothing but handles may reach a released router (the
 * owner drops its pointer when it calls router_release).
 */
#include "routing/internal.h"

#include <errno.h>

void router_release(router_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    bool none = r->n_threads == 0;
    r->released = true;
    pthread_mutex_unlock(&r->lock);
    if (none)
        router_free(r);
}

/* The merged table of from (what router_save would write) becomes to's
 * loaded table, as if saved and loaded, without the file. */
int router_inherit(router_t *to, router_t *from)
{
    pthread_mutex_lock(&to->lock);
    unsigned threads = to->n_threads;
    pthread_mutex_unlock(&to->lock);
    if (threads)
        return -EBUSY;
    if (to->nb != from->nb)
        return -EINVAL;
    for (unsigned b = 0; b < to->nb; b++)
        if (to->cfg.edges[b] != from->cfg.edges[b])
            return -EINVAL;
    router_merged_t m;
    router_merge(from, &m);
    bool learned = from->loaded;
    for (unsigned b = 0; b < to->nb; b++) {
        for (unsigned a = 0; a < ARMS; a++) {
            to->prior_est[b][a] = m.n_est[b][a] ? m.est[b][a] : 0.0;
            to->prior_n[b][a] = m.n_est[b][a];
            learned |= m.n_est[b][a] != 0;
        }
        to->prior_choice[b] = m.choice[b];
    }
    to->loaded = learned;   /* the report's "loaded": it starts from a table, not fresh */
    return 0;
}
