/*
 * front/udp.c -- the Modbus UDP front end ([udp]), on the I/O thread:
 * clients that send Modbus Application Protocol ADUs in UDP datagrams,
 * one ADU per datagram (Telegraf, node-red-contrib-modbus, grid-x/modbus,
 * pymodbus' UDP client, serial servers that speak Modbus UDP).
 *
 * A datagram is a request only when it is exactly one well-formed MBAP ADU
 * (protocol 0, its length field equal to what the datagram holds); any
 * other datagram is dropped unanswered and counted (bad_mbap): with no
 * connection there is nothing to close, and an answer to a datagram that is
 * no request could only feed a reflection. A datagram from an address the
 * allow-list does not name is dropped and counted (refused_allow), never
 * answered, for the same reason.
 *
 * A request goes the way every front end's requests go (dispatch.c:
 * refusals, read_only, the unit routes and default_bus, the poll cache),
 * and its answer goes back in one datagram to the address and port it
 * came from, with its transaction id and unit id. Nothing orders answers:
 * a client tells them apart by transaction id, as Modbus UDP expects.
 *
 * Bounds. UDP has no flow control, so the bound is ours: at most
 * max_pending requests of one source address (IP and port) in flight at
 * once, and at most max_clients source addresses with requests in flight.
 * A request beyond either is answered at once with exception 0x06 (server
 * busy) and counted (refused_inflight, refused_sources); it costs no bus
 * time. Every request taken is answered exactly once (the line core's
 * contract), then its place is free. So the memory is fixed at start
 * (max_clients x max_pending places), and a flood from one address takes
 * at most max_pending of its bus's queue. A client retrying its lost
 * datagram sends a new request: the bus may then run the request twice
 * (the write done twice, as a serial master's retry would).
 *
 * Sources are not connections: an address has state only while it has
 * requests in flight, and nothing tells when a client has gone, so every
 * answer is sent (origin wanted() is not given).
 */
#include "front/internal.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UDP_READS_PER_WAKE 64         /* datagrams read per readiness, then the loop goes on */
#define UDP_INDEX_BITS 20             /* a place's index in conn_id; above it, its generation */

typedef struct udp_source {
    struct sockaddr_in addr;
    unsigned in_flight;               /* 0: the entry is free */
} udp_source_t;

typedef struct udp_place {
    uint64_t gen;                     /* bumped each time the place is taken */
    bool used;
    bool old;                         /* taken on the socket a reload retired: answered on it */
    uint16_t tid;
    uint8_t unit;
    unsigned source;
} udp_place_t;

struct gw_udp {
    line_origin_t origin;               /* first: the answers' way back */
    gw_t *gw;
    gw_loop_t *loop;                    /* the I/O thread's, taken at creation */
    config_tcp_t cfg;
    gw_udp_metrics_t *m;                /* &counters */
    gw_udp_metrics_t counters;
    int fd;                           /* -1: [udp] turned off by a reload */
    struct event *ev;
    int old_fd;                       /* the socket a reload moved from, until its answers are out */
    unsigned old_in_flight;
    udp_source_t *sources;            /* cfg.max_clients */
    udp_place_t *places;              /* cfg.max_clients * cfg.max_pending */
    unsigned n_places, place_hint, in_flight;
};

static bool allowed(const config_tcp_t *cfg, const struct sockaddr_in *from)
{
    if (cfg->allow_count == 0)
        return true;
    for (unsigned i = 0; i < cfg->allow_count; i++)
        if ((from->sin_addr.s_addr & cfg->allow[i].mask) == cfg->allow[i].addr)
            return true;
    return false;
}

static void send_on(gw_udp_t *u, int fd, const struct sockaddr_in *to, uint16_t tid, uint8_t unit,
                    const uint8_t *pdu, size_t len)
{
    uint8_t out[MBAP_MAX_ADU];
    int n = mbap_encode(tid, unit, pdu, len, out, sizeof out);
    if (n <= 0)
        return;
    if (sendto(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, sizeof *to) == n)
        gw_count(&u->m->common.answers);
    else
        gw_count(&u->m->send_errors);   /* the socket's buffer full, or the client's network gone */
}

static void send_answer(gw_udp_t *u, const struct sockaddr_in *to, uint16_t tid, uint8_t unit, const uint8_t *pdu,
                        size_t len)
{
    send_on(u, u->fd, to, tid, unit, pdu, len);
}

static void send_exception(gw_udp_t *u, const struct sockaddr_in *to, uint16_t tid, uint8_t unit, uint8_t fc,
                           uint8_t code)
{
    uint8_t pdu[2] = { (uint8_t)(fc | 0x80), code };
    send_answer(u, to, tid, unit, pdu, sizeof pdu);
}

/* The source entry of from: its own, or a free one; -1 when all are taken. */
static int source_of(gw_udp_t *u, const struct sockaddr_in *from)
{
    int free_one = -1;
    for (unsigned i = 0; i < u->cfg.max_clients; i++) {
        udp_source_t *s = &u->sources[i];
        if (s->in_flight && s->addr.sin_addr.s_addr == from->sin_addr.s_addr && s->addr.sin_port == from->sin_port)
            return (int)i;
        if (!s->in_flight && free_one < 0)
            free_one = (int)i;
    }
    if (free_one >= 0)
        u->sources[free_one].addr = *from;
    return free_one;
}

static unsigned take_place(gw_udp_t *u)
{
    /* There is always one: the sources' bounds keep the places in flight
     * below max_clients * max_pending. */
    for (unsigned k = 0; k < u->n_places; k++) {
        unsigned i = (u->place_hint + k) % u->n_places;
        if (!u->places[i].used) {
            u->place_hint = i + 1;
            return i;
        }
    }
    return 0;   /* not reached */
}

static void release(gw_udp_t *u, unsigned index)
{
    udp_place_t *p = &u->places[index];
    p->used = false;
    if (p->old && --u->old_in_flight == 0 && u->old_fd >= 0) {
        close(u->old_fd);   /* the retired socket's last answer is out */
        u->old_fd = -1;
    }
    u->sources[p->source].in_flight--;
    u->in_flight--;
    atomic_fetch_sub_explicit(&u->m->in_flight, 1, memory_order_relaxed);
}

static void on_datagram(gw_udp_t *u, const uint8_t *dgram, size_t n, const struct sockaddr_in *from)
{
    mbap_header_t h;
    size_t adu_len;
    uint8_t out[RTU_MAX_PDU];
    line_request_t r;

    if (!allowed(&u->cfg, from)) {
        gw_count(&u->m->common.refused_allow);
        return;
    }
    if (mbap_stream_next(dgram, n, &h, &adu_len) != 1 || adu_len != n) {
        gw_count(&u->m->common.bad_mbap);
        return;
    }
    tcp_adu_t adu = { .len = n, .tid = h.transaction, .unit = h.unit, .pdu = dgram + MBAP_HEADER_LEN,
                      .pdu_len = n - MBAP_HEADER_LEN };
    gw_count(&u->m->common.requests);
    int si = source_of(u, from);
    if (si < 0 || u->sources[si].in_flight >= u->cfg.max_pending) {
        gw_count(si < 0 ? &u->m->refused_sources : &u->m->refused_inflight);
        send_exception(u, from, adu.tid, adu.unit, adu.pdu[0], MB_EX_BUSY);
        return;
    }
    size_t len = front_dispatch(u->gw, &u->cfg, &u->m->common, -1, &adu, &r, out);
    if (len) {
        send_answer(u, from, adu.tid, adu.unit, out, len);
        return;
    }
    unsigned i = take_place(u);
    udp_place_t *p = &u->places[i];
    *p = (udp_place_t){ .gen = p->gen + 1, .used = true, .tid = adu.tid, .unit = adu.unit, .source = (unsigned)si };
    u->sources[si].in_flight++;
    u->in_flight++;
    atomic_fetch_add_explicit(&u->m->in_flight, 1, memory_order_relaxed);
    r.origin = &u->origin;
    r.conn_id = p->gen << UDP_INDEX_BITS | i;
    r.seq = adu.tid;
    if (r.bus == GW_BUS_MAP) {   /* a map's unit: answered now, or its write's answer through the origin */
        if (front_map_request(u->gw, adu.unit, &r, out, &len) == GW_UNIT_ANSWERED) {
            send_answer(u, from, adu.tid, adu.unit, out, len);
            release(u, i);
        }
        return;
    }
    int code = gw_submit(u->gw, &r);
    if (code) {
        release(u, i);
        send_exception(u, from, adu.tid, adu.unit, adu.pdu[0], (uint8_t)code);
    }
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    gw_udp_t *u = arg;
    uint8_t dgram[MBAP_MAX_ADU + 1];   /* one more: a longer datagram shows as such */
    (void)what;
    for (unsigned k = 0; k < UDP_READS_PER_WAKE; k++) {
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(fd, dgram, sizeof dgram, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &flen);
        if (n < 0)
            return;   /* EAGAIN, or an ICMP error for an answer sent earlier: nothing to read */
        if (flen != sizeof from || from.sin_family != AF_INET || (size_t)n > MBAP_MAX_ADU) {
            gw_count(&u->m->common.bad_mbap);
            continue;
        }
        on_datagram(u, dgram, (size_t)n, &from);
    }
}

/* The loop command behind the origin's answer(): on the I/O thread. */
static void on_answer(void *ctx, uint64_t conn_id, uint32_t seq, const uint8_t *pdu, size_t len)
{
    gw_udp_t *u = ctx;
    unsigned i = (unsigned)(conn_id & ((1u << UDP_INDEX_BITS) - 1));
    udp_place_t *p = i < u->n_places ? &u->places[i] : NULL;
    (void)seq;
    if (!p || !p->used || p->gen != conn_id >> UDP_INDEX_BITS) {
        gw_count(&u->m->common.discarded);
        return;
    }
    send_on(u, p->old ? u->old_fd : u->fd, &u->sources[p->source].addr, p->tid, p->unit, pdu, len);
    release(u, i);
}

/* origin: answer() runs on a bus worker; the socket is the I/O thread's. */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_udp_t *u = (gw_udp_t *)o;
    if (loop_post(u->loop, on_answer, u, req->conn_id, req->seq, pdu, len) != 0)
        gw_log(u->gw, CONFIG_LOG_ERROR, "udp: cannot queue an answer (out of memory)");
}

static const line_origin_ops_t udp_origin_ops = { "udp", origin_answer, NULL };

/* The socket in use stops reading and answers what it took (old_fd). */
static void retire(gw_udp_t *u)
{
    if (u->ev) {
        event_free(u->ev);
        u->ev = NULL;
    }
    if (u->fd < 0)
        return;
    u->old_in_flight = 0;
    for (unsigned i = 0; i < u->n_places; i++)
        if (u->places[i].used && !u->places[i].old) {
            u->places[i].old = true;
            u->old_in_flight++;
        }
    if (u->old_in_flight)
        u->old_fd = u->fd;
    else
        close(u->fd);
    u->fd = -1;
}

/* A socket bound to cfg's address, read from the loop; the one in use, if
 * any, retired first once the new one is bound. 0, or -1 and err. */
static int open_socket(gw_udp_t *u, const config_tcp_t *cfg, char *err, size_t errcap)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port) };
    inet_pton(AF_INET, cfg->bind, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(err, errcap, "udp: cannot listen on %s:%u: %s", cfg->bind, cfg->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct event *ev = event_new(loop_base(u->loop), fd, EV_READ | EV_PERSIST, on_readable, u);
    if (!ev || event_add(ev, NULL) != 0) {
        snprintf(err, errcap, "udp: out of memory");
        if (ev)
            event_free(ev);
        close(fd);
        return -1;
    }
    retire(u);
    u->fd = fd;
    u->ev = ev;
    return 0;
}

/* New bounds, with nothing in flight: the tables sized again. */
static int resize(gw_udp_t *u, const config_tcp_t *want)
{
    unsigned n = want->max_clients * want->max_pending;
    udp_source_t *sources = calloc(want->max_clients, sizeof *sources);
    udp_place_t *places = calloc(n, sizeof *places);
    if (!sources || !places) {
        free(sources);
        free(places);
        return -1;
    }
    free(u->sources);
    free(u->places);
    u->sources = sources;
    u->places = places;
    u->n_places = n;
    u->place_hint = 0;
    u->cfg.max_clients = want->max_clients;
    u->cfg.max_pending = want->max_pending;
    return 0;
}

gw_udp_t *udp_new(gw_t *gw, char *err, size_t errcap)
{
    const config_tcp_t *cfg = &gw_config(gw)->udp;
    gw_udp_t *u = calloc(1, sizeof *u);

    if (!u) {
        snprintf(err, errcap, "udp: out of memory");
        return NULL;
    }
    u->origin.ops = &udp_origin_ops;
    u->gw = gw;
    u->loop = gw_loop(gw);
    u->cfg = *cfg;
    u->m = &u->counters;
    u->fd = u->old_fd = -1;
    u->n_places = cfg->max_clients * cfg->max_pending;
    u->sources = calloc(cfg->max_clients, sizeof *u->sources);
    u->places = calloc(u->n_places, sizeof *u->places);
    if (!u->sources || !u->places) {
        snprintf(err, errcap, "udp: out of memory");
        udp_free(u);
        return NULL;
    }
    if (open_socket(u, cfg, err, errcap) != 0) {
        udp_free(u);
        return NULL;
    }
    gw_log(gw, CONFIG_LOG_INFO, "modbus udp %s:%u", cfg->bind, cfg->port);
    return u;
}

/*
 * A reload ([udp], on the I/O thread). What a datagram is checked against
 * (routes, default_bus, read_only, allow) applies from the next datagram;
 * requests already taken keep the route they went by. A new address
 * (bind, port) or enabled = true is a socket bound first: one that cannot
 * be bound leaves the running one and is named in res's restart (udp.port). The
 * socket it replaces (or that enabled = false retires) reads no more, but
 * the requests taken on it are answered on it, from the port their client
 * wrote to, and it closes with its last answer. One socket drains at a
 * time: a second move before it has is named in restart. max_clients and
 * max_pending size the tables: they apply when nothing is in flight, and
 * are otherwise named in restart, as the running bounds stay.
 */
void udp_apply_config(gw_udp_t *u, const config_tcp_t *want, reload_result_t *res)
{
    bool moved = !want->enabled || u->fd < 0 || strcmp(want->bind, u->cfg.bind) != 0 || want->port != u->cfg.port;
    if (moved && (u->fd >= 0 || want->enabled)) {
        char err[256] = "";
        if (u->old_fd >= 0 && u->fd >= 0) {
            reload_restart_add(res, "udp.port");
            gw_log(u->gw, CONFIG_LOG_WARN, "SIGHUP: [udp]: the socket moved from is still answering; the move waits");
        } else if (want->enabled && open_socket(u, want, err, sizeof err) != 0) {
            reload_restart_add(res, "udp.port");
            gw_log(u->gw, CONFIG_LOG_ERROR, "SIGHUP: [udp]: %s; the running socket stays", err);
        } else {
            if (!want->enabled)
                retire(u);
            u->cfg.enabled = want->enabled;
            snprintf(u->cfg.bind, sizeof u->cfg.bind, "%s", want->bind);
            u->cfg.port = want->port;
            gw_log(u->gw, CONFIG_LOG_INFO, "SIGHUP: [udp] %s%s:%u", want->enabled ? "on " : "off (was ", want->bind,
                   want->port);
        }
    }
    if (want->max_clients != u->cfg.max_clients || want->max_pending != u->cfg.max_pending) {
        if (u->in_flight || resize(u, want) != 0)
            reload_restart_add(res, "udp.max_pending");
    }
    config_tcp_t keep = u->cfg;
    u->cfg = *want;
    u->cfg.enabled = keep.enabled;
    snprintf(u->cfg.bind, sizeof u->cfg.bind, "%s", keep.bind);
    u->cfg.port = keep.port;
    u->cfg.max_clients = keep.max_clients;
    u->cfg.max_pending = keep.max_pending;
}

const config_tcp_t *udp_running_config(const gw_udp_t *u)
{
    return &u->cfg;
}

void udp_stop_accepting(gw_udp_t *u)
{
    if (u && u->ev)
        event_del(u->ev);
}

unsigned udp_in_flight(const gw_udp_t *u)
{
    return u ? u->in_flight : 0;
}

const gw_udp_metrics_t *udp_metrics(const gw_udp_t *u)
{
    return u ? &u->counters : NULL;
}

void udp_free(gw_udp_t *u)
{
    if (!u)
        return;
    if (u->ev)
        event_free(u->ev);
    if (u->fd >= 0)
        close(u->fd);
    if (u->old_fd >= 0)
        close(u->old_fd);
    free(u->sources);
    free(u->places);
    free(u);
}
