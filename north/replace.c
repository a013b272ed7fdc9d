/*
 * north/replace.c -- a reload's new [mqtt]: the client stops and a new one
 * starts at the new settings (north_replace), taking over what may carry.
 *
 * Why stop and start, not patch: every [mqtt] key ends up in the session
 * (the CONNECT's client id, will and credentials, the TLS context, the
 * topics subscribed, the spool, Sparkplug's node), and a client built
 * afresh is the one the daemon's start builds, so a reload cannot reach a
 * state a start would not. Stopping first: a broker given the same client
 * id twice would cut one of them (session take-over), and a spool_dir kept
 * is one directory that the old client must have closed before the new
 * one opens it.
 *
 * The argument for each publication, QoS 1 (the JSON formats):
 *   - acknowledged (PUBACK) before the stop: delivered, done;
 *   - in memory, not acknowledged (handed to libmosquitto or not), no
 *     spool: the new client takes it ahead of anything newer when the
 *     brokers (or host and port), topic_prefix and gateway are the same, so
 *     it goes out on the new session in its order, at least once (one the
 *     broker had taken but whose PUBACK had not come comes twice, with the
 *     same seq). Elsewhere it would land on another broker or topic than
 *     its subscribers': it is dropped and counted (rtugw_mqtt_dropped_total)
 *     and logged;
 *   - with a spool: it is on disk. The same spool_dir goes on from it (the
 *     old client closed it with its acked mark); another spool_dir, or none,
 *     leaves it there for the next client that names that directory (logged
 *     with the count);
 *   - values handed over after the stop and before the new client exists:
 *     none; both happen in one call on the I/O thread, where values arrive.
 * QoS 0 and Sparkplug (QoS 0 by the specification) carry nothing: what the
 * old session kept for a Sparkplug node (DDATA while it could not publish)
 * belongs to that node and is dropped and counted; the new node's births
 * carry the current values.
 *
 * The numbers go on: the data seq (a subscriber sees no seq go back),
 * Sparkplug's bdSeq (the new CONNECT takes the next: NDEATH k from the old
 * node, NBIRTH k+1 from the new), the write tokens' generation (a write
 * the old client answered "stopping" whose outcome comes later matches no
 * new write) and the counters of /metrics.
 */
#include "north/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the old client's publications went is where the new one's go. */
static bool same_place(const north_config_t *a, const north_config_t *b)
{
    if (strcmp(a->topic_prefix, b->topic_prefix) != 0 || strcmp(a->gateway, b->gateway) != 0 ||
        a->n_brokers != b->n_brokers)
        return false;
    if (a->n_brokers == 0)
        return strcmp(a->host, b->host) == 0 && a->port == b->port;
    for (unsigned i = 0; i < a->n_brokers; i++)
        if (strcmp(a->brokers[i].host, b->brokers[i].host) != 0 || a->brokers[i].port != b->brokers[i].port)
            return false;
    return true;
}

/* old's memory queue (no spool) into c, in order, acknowledged ones out;
 * or, elsewhere, dropped and counted. Returns how many were dropped. */
static unsigned take_queue(north_t *old, north_carry_t *c, bool keep)
{
    north_msg_t **tail = &c->head;
    unsigned dropped = 0;
    while (old->q.head) {
        north_msg_t *m = old->q.head;
        old->q.head = m->next;
        if (m->acked || !keep) {
            dropped += !m->acked;
            free(m);
            continue;
        }
        m->next = NULL;
        m->mid = 0;
        *tail = m;
        tail = &m->next;
    }
    old->q = (north_queue_t){ 0 };
    c->st.dropped += dropped;
    return dropped;
}

north_t *north_replace(north_t *old, const north_config_t *cfg, char *err, size_t errcap, bool *kept_old)
{
    struct event_base *base = old->base;
    north_hooks_t hooks = old->hooks;
    north_config_t was = old->cfg;
    *kept_old = false;
    err[0] = 0;

    /* The goodbye first (writes still open answered "stopping", NDEATH or
     * the offline status, DISCONNECT): what it sends is the old session's. */
    writes_stop(old);
    client_stop(old);
    north_carry_t c = { .seq = old->seq, .has_bdseq = old->sp != NULL, .next_gen = old->next_gen, .st = old->st };
    if (old->sp)
        c.bdseq_next = sparkplug_bdseq_next(old);
    unsigned dropped = old->spool ? 0 : take_queue(old, &c, same_place(&was, cfg));
    if (dropped)
        north_log(old, 1, "mqtt: reload: %u publications not acknowledged by %s were for another broker or topic "
                          "prefix: dropped (counted)", dropped, was.host);
    if (old->spool && strcmp(was.spool_dir, cfg->spool_dir) != 0) {
        north_stats_t st;
        north_get_stats(old, &st);
        if (st.spooled)
            north_log(old, 1, "mqtt: reload: %llu publications stay in the spool %s, for a client that names it again",
                      (unsigned long long)st.spooled, was.spool_dir);
    }
    north_free(old);   /* its spool closed with its acked mark; the session is already gone */

    north_t *n = north_start(base, cfg, &hooks, &c, err, errcap);
    if (!n) {
        char again[256] = "";
        *kept_old = true;
        n = north_start(base, &was, &hooks, &c, again, sizeof again);
    }
    while (c.head) {   /* copied into the new client's queue (or spool) */
        north_msg_t *m = c.head;
        c.head = m->next;
        free(m);
    }
    return n;
}
