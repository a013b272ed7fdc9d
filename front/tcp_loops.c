/*
 * front/tcp_loops.c -- a listener's loops ([tcp] loops, [rtu_tcp] loops):
 * the shards of tcp_session.h made, given their listening sockets, reloaded,
 * stopped and freed, each on its own thread. What daemon/ calls on a
 * listener (front.h's tcp_*) is called on the lead, on the I/O thread, and
 * reaches the other shards here, through loop_call (the caller waits while
 * the shard's thread runs it), never by touching their state from here.
 *
 * Why loops: one I/O thread carries every front end, and a front-end-bound
 * load (many clients, answers from the cache or a fast device bus) is then
 * bound by one core. With loops = N the listener's connections are spread
 * by the kernel (SO_REUSEPORT: one listening socket per loop on the same
 * address, a new connection hashed to one of them) over the I/O thread and
 * N - 1 threads of their own (rtugw-tcpK, rtugw-rtcpK). The buses, the line
 * thread and the line discipline are unchanged: a request goes to its bus
 * as an actor message from whichever loop read it, and its answer is
 * posted back to that loop (tcp_session.h: how an answer finds its
 * connection, and why it cannot reach another).
 *
 * One listener for all: max_clients and max_per_address count every
 * shard's connections (the admission lock), the counters are the lead's
 * (atomics), and bus_share is split between the loops (shard_share), so
 * the listener holds no more places in a bus than with one loop. [tls]
 * sessions are the lead's only: its TLS listener is not shared.
 *
 * The sockets of a (re)bind are all bound before any is used: a port in
 * use, or an address the host lacks, fails the bind of the first and
 * leaves every shard on the address it had (SO_REUSEPORT is set only with
 * loops > 1, so one rtugw with one loop still finds a port in use as it
 * did, and two listeners of other programs never share it with us).
 * loops itself needs a restart.
 */
#include "front/tcp_session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* count listening sockets on bind:port (SO_REUSEPORT when more than one),
 * all or none: 0 with fds set, or -1 with err. */
static int bind_sockets(const char *section, const char *addr, unsigned port, unsigned count, int *fds, char *err,
                        size_t errcap)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
        snprintf(err, errcap, "[%s] bind = '%s': not an IPv4 address", section, addr);
        return -1;
    }
    for (unsigned k = 0; k < count; k++) {
        int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        /* The backlog is the system's largest (SOMAXCONN, capped again by
         * net.core.somaxconn): thousands of clients reconnecting at once (a
         * restart, a switch back) would otherwise have their SYNs dropped
         * beyond 128 and retried by TCP only after 1, 3, 7 s. */
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            (count > 1 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
            bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, SOMAXCONN) != 0) {
            snprintf(err, errcap, "%s: cannot listen on %s:%u: %s", section, addr, port, strerror(errno));
            if (fd >= 0)
                close(fd);
            while (k > 0)
                close(fds[--k]);
            return -1;
        }
        fds[k] = fd;
    }
    return 0;
}

/* What one shard is asked on its thread. */
typedef struct shard_call {
    gw_tcp_t *t;
    int fd;                       /* a listening socket to take, or -1 */
    bool unlisten;                /* close its listener */
    const config_tcp_t *cfg;      /* keys to apply, or NULL */
    int rc;
} shard_call_t;

static void shard_command(void *ctx)
{
    shard_call_t *c = ctx;
    if (c->fd >= 0)
        c->rc = shard_listen(c->t, c->fd, false);
    if (c->unlisten)
        shard_unlisten(c->t, false);
    if (c->cfg)
        shard_apply(c->t, c->cfg);
}

static void stop_command(void *ctx)
{
    shard_stop_accepting(ctx);
}

/* fds[k] to shard k (or none), then the keys: each on its thread. 0, or
 * -1 if a shard could not take its socket (out of memory). */
static int shards_each(gw_tcp_t *lead, const int *fds, bool unlisten, const config_tcp_t *cfg)
{
    int rc = 0;
    for (unsigned k = 0; k < lead->loops; k++) {
        shard_call_t c = { .t = lead->shard[k], .fd = fds ? fds[k] : -1, .unlisten = unlisten, .cfg = cfg };
        if (loop_call(lead->shard[k]->loop, shard_command, &c) != 0) {
            if (c.fd >= 0)
                close(c.fd);
            c.rc = -1;
        }
        rc |= c.rc;
    }
    return rc;
}

/* The other loops' threads stopped and joined (idempotent): from then on
 * their state is the caller's, and nothing of theirs runs. */
void tcp_stop_loops(gw_tcp_t *tcp)
{
    for (unsigned k = 1; tcp && k < tcp->loops; k++)
        loop_stop_thread(tcp->shard[k]->loop);
}

/* cfg's listener when enabled, its requests split by framing, counted in its own counters. */
gw_tcp_t *tcp_listen(gw_t *gw, const config_tcp_t *cfg, const tcp_framing_t *framing, char *err, size_t errcap)
{
    gw_tcp_t *lead = shard_new(gw, gw_loop(gw), NULL, 0, cfg, framing);
    int fds[TCP_MAX_LOOPS];

    if (!lead) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    for (unsigned k = 1; k < cfg->loops; k++) {
        gw_loop_t *loop = loop_new(gw);
        gw_tcp_t *t = loop ? shard_new(gw, loop, lead, k, cfg, framing) : NULL;
        if (!t) {
            loop_free(loop);
            snprintf(err, errcap, "out of memory");
            tcp_free(lead);
            return NULL;
        }
        lead->shard[lead->loops++] = t;
    }
    if (cfg->enabled) {
        if (bind_sockets(framing->section, cfg->bind, cfg->port, lead->loops, fds, err, errcap) != 0) {
            tcp_free(lead);
            return NULL;
        }
        for (unsigned k = 0; k < lead->loops; k++)   /* no thread runs yet: taken here */
            if (shard_listen(lead->shard[k], fds[k], false) != 0) {
                while (++k < lead->loops)
                    close(fds[k]);
                snprintf(err, errcap, "out of memory");
                tcp_free(lead);
                return NULL;
            }
        fit_descriptors(lead);
    }
    for (unsigned k = 1; k < lead->loops; k++) {
        char name[24];   /* k < TCP_MAX_LOOPS: at most 15 characters, the kernel's limit */
        snprintf(name, sizeof name, "rtugw-%s%u", framing == &tcp_framing_mbap ? "tcp" : "rtcp", k % TCP_MAX_LOOPS);
        int rc = loop_start_thread(lead->shard[k]->loop, name, 0);
        if (rc != 0) {
            snprintf(err, errcap, "%s: cannot start the thread of loop %u: %s", framing->section, k, strerror(-rc));
            tcp_free(lead);
            return NULL;
        }
    }
    return lead;
}

/* [tcp]'s listener when enabled, [tls]'s when [tls] is enabled (mbaps_new made its context): both MBAP. */
gw_tcp_t *tcp_new(gw_t *gw, char *err, size_t errcap)
{
    const config_tls_t *tls = &gw_config(gw)->tls;
    gw_tcp_t *tcp = tcp_listen(gw, &gw_config(gw)->tcp, &tcp_framing_mbap, err, errcap);

    if (tcp && tcp->mbaps && tcp_tls_listen(tcp, tcp->mbaps, tls, err, errcap) != 0) {
        tcp_free(tcp);
        return NULL;
    }
    return tcp;
}

void tcp_stop_accepting(gw_tcp_t *tcp)
{
    for (unsigned k = 0; k < tcp->loops; k++)
        loop_call(tcp->shard[k]->loop, stop_command, tcp->shard[k]);
}

unsigned tcp_in_flight(const gw_tcp_t *tcp)
{
    unsigned n = 0;
    for (unsigned k = 0; tcp && k < tcp->loops; k++)
        n += atomic_load_explicit(&tcp->shard[k]->in_flight, memory_order_relaxed);
    return n;
}

void tcp_status_json(const gw_tcp_t *tcp, struct evbuffer *b)
{
    static const gw_tcp_metrics_t none;   /* a listener not enabled: its 0s */
    const gw_tcp_metrics_t *m = tcp ? &tcp->counters : &none;
    evbuffer_add_printf(b, ",\"tcp\":{\"active\":%llu,\"requests\":%llu,\"answers\":%llu,"
                           "\"classes\":{\"normal\":{\"waiting\":%llu,\"waits\":%llu,\"wait_us\":%llu},"
                           "\"priority\":{\"waiting\":%llu,\"waits\":%llu,\"wait_us\":%llu}},\"loops\":[",
                        (unsigned long long)gw_read(&m->active), (unsigned long long)gw_read(&m->requests),
                        (unsigned long long)gw_read(&m->answers), (unsigned long long)gw_read(&m->waiting),
                        (unsigned long long)gw_read(&m->waits), (unsigned long long)gw_read(&m->wait_us),
                        (unsigned long long)gw_read(&m->priority_waiting),
                        (unsigned long long)gw_read(&m->priority_waits),
                        (unsigned long long)gw_read(&m->priority_wait_us));
    for (unsigned k = 0; tcp && k < tcp->loops; k++)   /* the connections each loop serves now */
        evbuffer_add_printf(b, "%s%u", k ? "," : "", atomic_load_explicit(&tcp->shard[k]->open, memory_order_relaxed));
    evbuffer_add_printf(b, "]}");
}

/*
 * SIGHUP: every key of the section applies now, the listener included,
 * except loops (a restart, named in res's restart).
 *
 * The listener (enabled, bind, port): the new address is bound (a socket
 * for each loop) before the old listeners are closed, so a port in use (or
 * an address the host lacks) leaves the running listeners serving; that
 * key is then named in res's restart, with the system's reason in the log,
 * and the running copy keeps the old address, so the next reload tries
 * again. The connections accepted on the old listeners are not theirs:
 * they keep being served, answers and all, until their clients close them
 * (a client of an unchanged front end sees nothing). Disabled: no new
 * connections; those open stay.
 * max_pending sizes the reply ring of connections accepted from now on; a
 * live connection keeps the ring it has (tcp_conn_t.depth).
 * The rest applies to existing connections too: a connection from an
 * address no longer allowed is closed (counted), unit routes and
 * default_bus route the next request.
 */
void tcp_apply_config(gw_tcp_t *tcp, const config_tcp_t *cfg, reload_result_t *res)
{
    const char *section = tcp->framing->section;
    config_tcp_t next = *cfg;
    char key[32];
    int fds[TCP_MAX_LOOPS];
    bool bound = false, unlisten = false;

    if (cfg->loops != tcp->cfg.loops) {
        gw_log(tcp->gw, CONFIG_LOG_WARN, "%s: reload: loops = %u needs a restart; %u loops go on", section,
               cfg->loops, tcp->cfg.loops);
        snprintf(key, sizeof key, "%s.loops", section);
        reload_restart_add(res, key);
        next.loops = tcp->cfg.loops;
    }
    bool moved = cfg->enabled && (!tcp->listener || strcmp(cfg->bind, tcp->cfg.bind) != 0 ||
                                  cfg->port != tcp->cfg.port);
    if (moved) {
        char err[256];
        if (bind_sockets(section, cfg->bind, cfg->port, tcp->loops, fds, err, sizeof err) == 0) {
            bound = true;
            gw_log(tcp->gw, CONFIG_LOG_INFO, "%s: reload: listening on %s:%u now", section, cfg->bind, cfg->port);
        } else {
            gw_log(tcp->gw, CONFIG_LOG_ERROR, "%s: reload: %s; still listening on %s:%u", section, err,
                   tcp->cfg.bind, tcp->cfg.port);
            snprintf(key, sizeof key, "%s.port", section);
            reload_restart_add(res, key);
            next.enabled = tcp->cfg.enabled;
            memcpy(next.bind, tcp->cfg.bind, sizeof next.bind);
            next.port = tcp->cfg.port;
        }
    } else if (!cfg->enabled && tcp->listener) {
        unlisten = true;
        gw_log(tcp->gw, CONFIG_LOG_INFO, "%s: reload: off; no new connections (the open ones stay)", section);
    }
    bool grew = next.enabled && next.max_clients > tcp->cfg.max_clients;
    if (shards_each(tcp, bound ? fds : NULL, unlisten, &next) != 0)
        gw_log(tcp->gw, CONFIG_LOG_ERROR, "%s: reload: a loop could not take its new socket (out of memory)", section);
    if (grew)
        fit_descriptors(tcp);
}

/*
 * [tls] reloaded (daemon/control.c): its listener opened (turned on, with
 * the context mbaps made), moved, or closed (turned off), as
 * tcp_apply_config does [tcp]'s: the new address is bound before the old
 * listener closes, so a port in use leaves the running one serving (-1 with
 * err). The sessions accepted on it are not the listener's: they go on, with
 * the context they were accepted under, until their clients close them (a
 * [tls] turned off stops new sessions only; mbaps stays, as they use it).
 * The lead's alone, on the I/O thread.
 */
int tcp_tls_listen(gw_tcp_t *tcp, gw_mbaps_t *mbaps, const config_tls_t *want, char *err, size_t errcap)
{
    int fd;

    if (!want->enabled) {
        shard_unlisten(tcp, true);
        return 0;
    }
    if (bind_sockets("tls", want->bind, want->port, 1, &fd, err, errcap) != 0)
        return -1;
    tcp->mbaps = mbaps;
    if (shard_listen(tcp, fd, true) != 0) {
        snprintf(err, errcap, "tls: out of memory");
        return -1;
    }
    return 0;
}

/* The lead and its loops: each other loop's thread stopped and joined
 * (tcp_stop_loops, which the daemon calls as soon as the I/O loop has left:
 * no shard reads a client or submits a request while the runtime stops),
 * its connections closed, then the lead's. */
void tcp_free(gw_tcp_t *tcp)
{
    if (!tcp)
        return;
    tcp_stop_loops(tcp);
    for (unsigned k = tcp->loops; k-- > 1;) {   /* their connections closed before the lead's lock goes */
        gw_loop_t *loop = tcp->shard[k]->loop;
        shard_free(tcp->shard[k]);
        loop_free(loop);
    }
    shard_free(tcp);
}
