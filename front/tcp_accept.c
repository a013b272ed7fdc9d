/*
 * front/tcp_accept.c -- the listeners of tcp.c's sessions: who is accepted
 * (allow-list, max_clients, max_per_address, TLS handshake slots, running
 * out of descriptors), each client's priority class, the sweep of
 * deadlines, SIGHUP, and teardown. The sessions themselves are tcp.c's.
 */
#include "front/tcp_session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static bool allowed(const gw_tcp_t *tcp, const struct sockaddr *sa)
{
    if (tcp->cfg.allow_count == 0)
        return true;
    if (sa->sa_family != AF_INET)
        return false;
    uint32_t a = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
    for (unsigned i = 0; i < tcp->cfg.allow_count; i++)
        if ((a & tcp->cfg.allow[i].mask) == tcp->cfg.allow[i].addr)
            return true;
    return false;
}

/* Its class: TCP_CLASS_PRIORITY when its address is in priority_clients. */
static uint8_t client_class(const gw_tcp_t *tcp, const struct sockaddr *sa)
{
    if (sa->sa_family != AF_INET)
        return TCP_CLASS_NORMAL;
    uint32_t a = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
    for (unsigned i = 0; i < tcp->cfg.priority_count; i++)
        if ((a & tcp->cfg.priority[i].mask) == tcp->cfg.priority[i].addr)
            return TCP_CLASS_PRIORITY;
    return TCP_CLASS_NORMAL;
}

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (b->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return false;
}

/*
 * Clients (plain connections, and TLS ones once authenticated) are held to
 * max_clients, and one address to max_per_address of them, so one
 * misbehaving host cannot lock every other client out. Sockets in a TLS
 * handshake are unauthenticated: they have slots of their own ([tls]
 * max_handshakes, max_handshakes_per_address) and never take a client's,
 * so a handshake flood (sockets opened on the TLS port that send nothing,
 * or half a ClientHello, until handshake_timeout_ms) can fill only those:
 * plain Modbus TCP goes on being accepted and answered.
 * The counter a new client would be refused under, or NULL; self: a
 * connection already in the table, not counted against itself.
 */
void admit_lock(const gw_tcp_t *tcp)
{
    pthread_mutex_lock(&tcp->lead->admit_lock);
}

void admit_unlock(const gw_tcp_t *tcp)
{
    pthread_mutex_unlock(&tcp->lead->admit_lock);
}

atomic_uint_fast64_t *clients_full(const gw_tcp_t *tcp, const struct sockaddr *sa, const tcp_conn_t *self)
{
    const gw_tcp_t *lead = tcp->lead;
    unsigned limit = tcp->cfg.max_per_address, clients = 0, here = 0;
    for (unsigned k = 0; k < lead->loops; k++) {
        const gw_tcp_t *t = lead->shard[k];
        for (unsigned i = 0; i < t->top; i++) {
            const tcp_conn_t *c = t->conns[i];
            if (!c || c == self || c->handshaking)
                continue;
            clients++;
            here += same_address(&c->peer, sa);
        }
    }
    if (limit && here >= limit)
        return &tcp->m->refused_address;
    if (clients >= tcp->cfg.max_clients)
        return &tcp->m->refused_full;
    return NULL;
}

/* May another socket from sa begin a TLS handshake? (mbaps.c counts a no.) */
static bool handshake_admitted(const gw_tcp_t *tcp, const struct sockaddr *sa)
{
    unsigned here = 0;
    for (unsigned i = 0; i < tcp->top; i++)
        if (tcp->conns[i] && tcp->conns[i]->handshaking && same_address(&tcp->conns[i]->peer, sa))
            here++;
    return mbaps_admit(tcp->mbaps, tcp->handshaking, here);
}

/*
 * Out of descriptors (EMFILE/ENFILE): libevent would retry accept() at once,
 * forever, logging each failure. Instead the listener pauses for 100 ms, the
 * log says so at most once a minute, and the spare descriptor kept for this
 * is spent to accept the waiting client and close it at once: it is refused
 * cleanly instead of left hanging in the backlog. Counted (accept_errors).
 */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    gw_tcp_t *tcp = arg;
    int err = EVUTIL_SOCKET_ERROR();
    uint64_t now = gw_now_ns();

    gw_count(&tcp->m->accept_errors);
    if (now >= tcp->accept_log_next_ns) {
        gw_log(tcp->gw, CONFIG_LOG_ERROR, "%s: accept: %s; pausing the listener (logged once a minute)",
               tcp->framing->section, strerror(err));
        tcp->accept_log_next_ns = now + 60000000000ull;
    }
    if ((err == EMFILE || err == ENFILE) && tcp->reserve_fd >= 0) {
        close(tcp->reserve_fd);
        int fd = accept(evconnlistener_get_fd(l), NULL, NULL);
        if (fd >= 0) {
            close(fd);
            gw_count(&tcp->m->refused_full);
        }
        tcp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    evconnlistener_disable(l);
    struct timeval tv = { 0, 100000 };
    evtimer_add(tcp->ev_accept_retry, &tv);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    gw_tcp_t *tcp = arg;
    (void)fd;
    (void)what;
    if (tcp->stopped)
        return;
    if (tcp->listener)
        evconnlistener_enable(tcp->listener);
    if (tcp->tls_listener)
        evconnlistener_enable(tcp->tls_listener);
}

static void sweep_arm(gw_tcp_t *tcp);

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    gw_tcp_t *tcp = arg;
    unsigned index = TCP_TABLE;
    bool tls = l == tcp->tls_listener;
    atomic_uint_fast64_t *refused = NULL;

    if (!allowed(tcp, sa)) {
        gw_count(&tcp->m->refused_allow);
        evutil_closesocket(fd);
        return;
    }
    /* Its reply ring (max_pending slots, 4 KiB at the default) comes with
     * its first request (conn_parse): an idle connection costs only this
     * and its bufferevent. */
    tcp_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        gw_count(&tcp->m->refused_full);
        evutil_closesocket(fd);
        return;
    }
    c->tcp = tcp;
    c->tls = c->handshaking = tls;
    c->role = -1;
    memcpy(&c->peer, sa, (size_t)salen < sizeof c->peer ? (size_t)salen : sizeof c->peer);
    /* The check and the insert under one hold of the admission lock, so
     * shards accepting at once cannot both take the last place. */
    admit_lock(tcp);
    if (tls ? !handshake_admitted(tcp, sa) : (refused = clients_full(tcp, sa, NULL)) != NULL) {
        admit_unlock(tcp);
        if (refused)
            gw_count(refused);
        free(c);
        evutil_closesocket(fd);
        return;
    }
    for (index = tcp->free_hint; index < TCP_TABLE && tcp->conns[index]; index++)
        ;
    if (index < TCP_TABLE) {   /* always, within the caps; kept as the table's own bound */
        tcp->conns[index] = c;
        if (index >= tcp->top)
            tcp->top = index + 1;
    }
    admit_unlock(tcp);
    struct bufferevent *bev = index >= TCP_TABLE ? NULL
                              : tls ? mbaps_accept(tcp->mbaps, fd)
                                    : bufferevent_socket_new(loop_base(tcp->loop), fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        if (index < TCP_TABLE) {
            admit_lock(tcp);
            tcp->conns[index] = NULL;
            admit_unlock(tcp);
        }
        free(c);
        evutil_closesocket(fd);
        gw_count(&tcp->m->refused_full);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->bev = bev;
    c->depth = tcp->cfg.max_pending;
    c->klass = client_class(tcp, sa);
    if (tls)
        mbaps_handshaking(tcp->mbaps, ++tcp->handshaking);
    /* Generation from 1, so no live id is ever 0. */
    c->id = (++tcp->generation[index] & 0xFFFFFFFFFFFFull) << 16 | index;
    c->last_activity_ns = gw_now_ns();
    tcp->free_hint = index + 1;
    atomic_store_explicit(&tcp->live[index], c->id, memory_order_relaxed);
    atomic_fetch_add_explicit(&tcp->open, 1, memory_order_relaxed);
    sweep_arm(tcp);
    gw_count(&tcp->m->accepted);
    atomic_fetch_add_explicit(&tcp->m->active, 1, memory_order_relaxed);
    bufferevent_setcb(bev, conn_read, conn_written, conn_event, c);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/*
 * Every 250 ms: a connection with nothing owed and nothing heard for
 * idle_timeout_s is closed; so is one whose ADU is still incomplete
 * adu_timeout_ms after its first byte (a client trickling a byte a second
 * would otherwise hold its slot forever: slowloris).
 */
/* The sweep (deadlines of handshakes, partial ADUs, idle connections) runs
 * every 250 ms while there is a connection, never without one, so an idle
 * gateway's I/O thread sleeps (docs/footprint.md). */
static void sweep_arm(gw_tcp_t *tcp)
{
    if (!evtimer_pending(tcp->ev_idle, NULL)) {
        struct timeval quarter = { 0, 250000 };
        event_add(tcp->ev_idle, &quarter);
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    gw_tcp_t *tcp = arg;
    unsigned left = 0;
    uint64_t now = gw_now_ns();
    uint64_t idle = (uint64_t)tcp->cfg.idle_timeout_s * 1000000000ull;
    uint64_t adu = (uint64_t)tcp->cfg.adu_timeout_ms * 1000000ull;
    /* The running [tls], which a reload writes on the I/O thread: read only
     * by the lead (the I/O thread's shard, the only one with handshakes). */
    uint64_t handshake = tcp->tls_listener || tcp->handshaking
                         ? (uint64_t)gw_config(tcp->gw)->tls.handshake_timeout_ms * 1000000ull : UINT64_MAX;
    (void)fd;
    (void)what;
    for (unsigned i = 0; i < tcp->top; i++) {
        tcp_conn_t *c = tcp->conns[i];
        if (!c)
            continue;
        if (c->handshaking && now - c->last_activity_ns > handshake) {
            mbaps_refused(tcp->mbaps, c->bev, (const struct sockaddr *)&c->peer, true);
            conn_close(c, NULL);
        } else if (c->partial_since_ns && now - c->partial_since_ns > adu) {
            gw_log(tcp->gw, CONFIG_LOG_INFO, "%s: an ADU incomplete after %u ms; closing that connection",
                   tcp->framing->section, tcp->cfg.adu_timeout_ms);
            conn_close(c, &tcp->m->adu_timeout_closed);
        } else if (idle && c->head_seq == c->next_seq && !c->wait.linked && now - c->last_activity_ns > idle) {
            conn_close(c, &tcp->m->idle_closed);
        }
        left += tcp->conns[i] != NULL;
    }
    if (left == 0)
        event_del(tcp->ev_idle);   /* sweep_arm() starts it again with the next connection */
}

/* A listening socket (fd) as shard t's listener, or its TLS one: on t's
 * loop thread, or before that thread runs. 0, or -1 (fd closed). */
int shard_listen(gw_tcp_t *t, int fd, bool tls)
{
    struct evconnlistener *l = evconnlistener_new(loop_base(t->loop), on_accept, t,
                                                  LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (!l) {
        close(fd);
        return -1;
    }
    evconnlistener_set_error_cb(l, on_accept_error);
    struct evconnlistener **slot = tls ? &t->tls_listener : &t->listener;
    if (*slot)
        evconnlistener_free(*slot);
    *slot = l;
    if (t->stopped)
        evconnlistener_disable(l);
    return 0;
}

void shard_unlisten(gw_tcp_t *t, bool tls)
{
    struct evconnlistener **slot = tls ? &t->tls_listener : &t->listener;
    if (*slot)
        evconnlistener_free(*slot);
    *slot = NULL;
}

/*
 * max_clients is kept only if the process may hold that many descriptors,
 * and RLIMIT_NOFILE's soft limit is often 1,024 while the hard one allows
 * far more: so, when the listener's clients, its TLS handshakes and
 * TCP_FD_HEADROOM for the rest of the daemon (buses, HTTP, MQTT, logs)
 * exceed the soft limit, it is raised to the hard one (which covers the
 * other listener too). A hard limit still short is said at start, with
 * what to change: the clients beyond it would be refused as descriptors
 * run out (on_accept_error), not when max_clients is reached.
 */
#define TCP_FD_HEADROOM 256

void fit_descriptors(gw_tcp_t *tcp)
{
    struct rlimit rl;
    const char *section = tcp->framing->section;
    rlim_t need = (rlim_t)tcp->cfg.max_clients + TCP_FD_HEADROOM +
                  (tcp->mbaps ? gw_config(tcp->gw)->tls.max_handshakes : 0);

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            gw_log(tcp->gw, CONFIG_LOG_INFO, "%s: max_clients = %u: descriptor limit (RLIMIT_NOFILE) raised from %llu "
                   "to %llu", section, tcp->cfg.max_clients, (unsigned long long)was, (unsigned long long)rl.rlim_cur);
        else
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        gw_log(tcp->gw, CONFIG_LOG_WARN, "%s: max_clients = %u needs about %llu descriptors but RLIMIT_NOFILE "
               "allows %llu (hard limit %llu): about %llu clients at most; raise the hard limit (ulimit -Hn, "
               "LimitNOFILE= in a systemd unit) or lower max_clients", section, tcp->cfg.max_clients,
               (unsigned long long)need, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
               (unsigned long long)(rl.rlim_cur > TCP_FD_HEADROOM ? rl.rlim_cur - TCP_FD_HEADROOM : 0));
}

/* Shard no of a listener ([tcp] loops), on loop, its connections counted in
 * lead's counters (NULL: it is the lead); no listening socket yet. */
gw_tcp_t *shard_new(gw_t *gw, gw_loop_t *loop, gw_tcp_t *lead, unsigned no, const config_tcp_t *cfg,
                    const tcp_framing_t *framing)
{
    gw_tcp_t *tcp = calloc(1, sizeof *tcp);

    if (!tcp)
        return NULL;
    tcp->origin.ops = &tcp_origin_ops;
    tcp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    tcp->gw = gw;
    tcp->lead = lead ? lead : tcp;
    tcp->shard_no = no;
    tcp->loop = loop;
    tcp->mbaps = lead ? NULL : gw_mbaps(gw);   /* TLS sessions are the lead's only */
    tcp->maps = gw_maps(gw);
    tcp->cfg = *cfg;
    tcp->framing = framing;
    tcp->m = &tcp->lead->counters;
    if (!lead) {
        tcp->shard[0] = tcp;
        tcp->loops = 1;
        pthread_mutex_init(&tcp->admit_lock, NULL);
    }
    tcp->shares = shares_new(gw_bus_count(gw), shard_share(cfg->bus_share, cfg->loops, no));
    tcp->ev_accept_retry = evtimer_new(loop_base(loop), on_accept_retry, tcp);
    tcp->ev_idle = event_new(loop_base(loop), -1, EV_PERSIST, on_sweep, tcp);
    tcp->ev_serve = event_new(loop_base(loop), -1, 0, on_serve, tcp);
    if (!tcp->shares || !tcp->ev_accept_retry || !tcp->ev_idle || !tcp->ev_serve) {
        shard_free(tcp);
        return NULL;
    }
    return tcp;
}

/* Stop taking connections (the graceful stop): on the shard's thread. */
void shard_stop_accepting(gw_tcp_t *tcp)
{
    tcp->stopped = true;
    if (tcp->listener)
        evconnlistener_disable(tcp->listener);
    if (tcp->tls_listener)
        evconnlistener_disable(tcp->tls_listener);
}

/* A reload's keys for one shard, on its thread (the listener is
 * tcp_loops.c's): max_pending for its connections from now on, its part
 * of bus_share, and a connection from an address no longer allowed
 * closed (counted), each one's class again. */
void shard_apply(gw_tcp_t *tcp, const config_tcp_t *next)
{
    tcp->cfg = *next;
    shares_set(tcp->shares, shard_share(next->bus_share, next->loops, tcp->shard_no));
    for (unsigned i = 0; i < tcp->top; i++) {
        tcp_conn_t *c = tcp->conns[i];
        if (c && !c->wait.linked)   /* a waiting one keeps its list until its turn */
            c->klass = client_class(tcp, (const struct sockaddr *)&c->peer);
        if (c && !allowed(tcp, (const struct sockaddr *)&c->peer)) {
            gw_log(tcp->gw, CONFIG_LOG_INFO, "%s: reload: a connection's address is no longer allowed; closing it",
                   tcp->framing->section);
            conn_close(c, &tcp->m->revoked_closed);
        }
    }
}

unsigned shard_share(unsigned bus_share, unsigned loops, unsigned no)
{
    unsigned part = bus_share / loops + (no < bus_share % loops);
    return part ? part : 1;
}

const gw_tcp_metrics_t *tcp_metrics(const gw_tcp_t *tcp)
{
    return tcp ? &tcp->counters : NULL;
}

const config_tcp_t *tcp_running_config(const gw_tcp_t *tcp)
{
    return &tcp->cfg;
}

void tcp_recheck_sessions(gw_tcp_t *tcp)
{
    for (unsigned i = 0; i < tcp->top; i++) {
        tcp_conn_t *c = tcp->conns[i];
        if (c && c->tls && !c->handshaking &&
            !mbaps_still_trusted(tcp->mbaps, c->bev, (const struct sockaddr *)&c->peer))
            conn_close(c, &tcp->m->revoked_closed);
    }
}

/*
 * The set of [role] names changed (daemon/control.c, before the running
 * copy takes the new roles): a session holds its role's index, which
 * map[old] turns into the new one. A session whose role is gone is closed
 * (counted revoked_closed: its certificate no longer names a role that
 * exists); a handshake still running gets its role from the new set.
 */
void tcp_roles_changed(gw_tcp_t *tcp, const int *map)
{
    for (unsigned i = 0; i < tcp->top; i++) {
        tcp_conn_t *c = tcp->conns[i];
        if (!c || !c->tls || c->handshaking || c->role < 0)
            continue;
        if (map[c->role] < 0) {
            gw_log(tcp->gw, CONFIG_LOG_INFO, "SIGHUP: tls: a session's role is gone; closing it");
            conn_close(c, &tcp->m->revoked_closed);
        } else {
            c->role = map[c->role];
        }
    }
}

/* On the shard's thread, or after it was joined. */
void shard_free(gw_tcp_t *tcp)
{
    if (!tcp)
        return;
    for (unsigned i = 0; i < tcp->top; i++)
        if (tcp->conns[i])
            conn_close(tcp->conns[i], NULL);
    if (tcp->ev_idle)
        event_free(tcp->ev_idle);
    if (tcp->ev_serve)
        event_free(tcp->ev_serve);
    if (tcp->ev_accept_retry)
        event_free(tcp->ev_accept_retry);
    if (tcp->reserve_fd >= 0)
        close(tcp->reserve_fd);
    if (tcp->listener)
        evconnlistener_free(tcp->listener);
    if (tcp->tls_listener)
        evconnlistener_free(tcp->tls_listener);
    shares_free(tcp->shares);
    if (tcp->lead == tcp)
        pthread_mutex_destroy(&tcp->admit_lock);
    free(tcp);
}
