/*
 * front/tcp.c -- the Modbus TCP front end, on the I/O thread (and on the
 * loops of its own that [tcp] loops adds: tcp_session.h).
 *
 * Each connection keeps a ring of reply slots, one per request it has sent
 * and not yet been answered, numbered by a per-connection sequence. Answers
 * from the buses arrive in any order; a slot is written when its answer
 * comes and the ring is flushed from its head, so pipelined requests are
 * answered in the order they were asked, each with its own transaction id.
 * When the ring is full the connection simply stops being read: TCP flow
 * control pushes back on the client and nothing is dropped.
 *
 * A connection id is its table index plus a 48-bit generation of that
 * index, so an answer that comes back after its connection closed (and the
 * index was reused) is recognised, counted and discarded, never written to
 * a stranger: at a million connections a second the generation would take
 * nine years to wrap. The buses ask, before a request goes on the line,
 * whether its connection is still the one live in its index (`live`, read
 * from the workers): a request of a connection that has gone costs no line
 * time.
 *
 * Half-close: a client that sends its requests and then shuts down its
 * sending side (nc -N, batch tools) still gets every answer; the
 * connection closes once the last one is written.
 *
 * Connections are sessions without an actor of their own: all their state
 * is the socket's, which only its loop's thread may touch, and an actor hop
 * per request would add latency without taking work off that thread. With
 * [tcp] loops > 1 a listener's connections are spread over several loops,
 * each its own shard of this code (tcp_session.h says who owns what).
 *
 * Two listeners, one session code: [tcp]'s plain one and [tls]'s
 * MB-TCP-Security one (port 802), which differ only in the bufferevent the
 * listener makes (a socket, or an OpenSSL session through mbaps.c) and in a
 * TLS connection's role, which every one of its requests is checked
 * against. MBAP framing, slots, bounds, routes, the allow-list and
 * max_clients are the same code for both. A TLS connection reads nothing
 * until its handshake is done, and must finish it in handshake_timeout_ms.
 *
 * Two framings, one session code: each gw_tcp_t has its section's config,
 * its counters and a tcp_framing_t, which says where a request ends in the
 * byte stream and how an answer is written. [tcp] and [tls] are MBAP
 * (below); [rtu_tcp] is RTU over TCP (rtu_tcp.c). Slots, bounds, routes,
 * read_only, the cache, the allow-list and the sweeps are the same code.
 */
#include "front/tcp_session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tcp_conn_t *conn_of_waiter(tcp_waiter_t *w)
{
    return (tcp_conn_t *)(void *)((char *)w - offsetof(tcp_conn_t, wait));
}

static tcp_conn_t *conn_by_id(gw_tcp_t *tcp, uint64_t id)
{
    unsigned index = (unsigned)(id & 0xFFFF);
    if (index >= TCP_TABLE || !tcp->conns[index] || tcp->conns[index]->id != id)
        return NULL;
    return tcp->conns[index];
}

/* A TLS connection leaves its handshake (done, refused or closed): its
 * handshake slot is free again. */
static void handshake_over(tcp_conn_t *c)
{
    admit_lock(c->tcp);
    c->handshaking = false;   /* a client from now on, for every shard's admission */
    admit_unlock(c->tcp);
    c->tcp->handshaking--;
    mbaps_handshaking(c->tcp->mbaps, c->tcp->handshaking);
}

void conn_close(tcp_conn_t *c, atomic_uint_fast64_t *reason)
{
    gw_tcp_t *tcp = c->tcp;
    unsigned index = (unsigned)(c->id & 0xFFFF);
    unsigned waiting = 0;

    for (uint32_t s = c->head_seq; s != c->next_seq; s++)
        waiting++;
    atomic_fetch_sub_explicit(&tcp->in_flight, waiting, memory_order_relaxed);
    if (c->handshaking)
        handshake_over(c);
    if (c->reserved) {   /* the place held for it goes to the next waiter */
        shares_answered(tcp->shares, c->reserved_bus);
        event_active(tcp->ev_serve, EV_TIMEOUT, 0);
    }
    if (c->wait.linked) {
        shares_leave(tcp->shares, &c->wait);
        atomic_fetch_sub_explicit(c->wait.klass ? &tcp->m->priority_waiting : &tcp->m->waiting, 1,
                                  memory_order_relaxed);
    }
    if (c->ev_quiet)
        event_free(c->ev_quiet);
    if (c->ev_throttle)
        event_free(c->ev_throttle);
    if (c->tls)
        mbaps_closed(tcp->mbaps, c->bev);
    if (reason)
        gw_count(reason);
    gw_count(&tcp->m->closed);
    atomic_fetch_sub_explicit(&tcp->m->active, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&tcp->open, 1, memory_order_relaxed);
    admit_lock(tcp);
    tcp->conns[index] = NULL;
    admit_unlock(tcp);
    if (index < tcp->free_hint)
        tcp->free_hint = index;
    atomic_store_explicit(&tcp->live[index], 0, memory_order_relaxed);
    bufferevent_free(c->bev);
    free(c->slots);
    free(c);
}

/* One send() when nothing waits before it and the socket is plain (not TLS),
 * instead of the bufferevent's epoll_ctl, epoll_wait, writev, epoll_ctl
 * (docs/footprint.md). What the socket does not take, and every error, go to
 * the bufferevent, which keeps the order and reports the error as before. */
static void conn_write(tcp_conn_t *c, const uint8_t *frame, size_t n)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evutil_socket_t fd = c->tls ? -1 : bufferevent_getfd(c->bev);
    size_t sent = 0;

    if (fd >= 0 && evbuffer_get_length(out) == 0) {
        ssize_t w = send(fd, frame, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0)
            sent = (size_t)w;
    }
    if (sent < n)
        bufferevent_write(c->bev, frame + sent, n - sent);
}

/* Writes every answered slot from the head of the ring, in order. */
static void conn_flush(tcp_conn_t *c)
{
    gw_tcp_t *tcp = c->tcp;
    unsigned depth = c->depth;
    uint8_t frame[MBAP_MAX_ADU];

    while (c->head_seq != c->next_seq) {
        tcp_slot_t *s = &c->slots[c->head_seq % depth];
        if (s->state != SLOT_READY)
            break;
        int n = tcp->framing->encode(s->tid, s->unit, s->pdu, s->len, frame, sizeof frame);
        if (n > 0) {   /* RTU writes nothing for a broadcast */
            conn_write(c, frame, (size_t)n);
            gw_count(&tcp->m->answers);
        }
        s->state = SLOT_FREE;
        c->head_seq++;
        atomic_fetch_sub_explicit(&tcp->in_flight, 1, memory_order_relaxed);
    }
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) > TCP_OUT_LIMIT) {
        gw_log(tcp->gw, CONFIG_LOG_WARN, "%s: client does not read its answers; disconnecting", tcp->framing->section);
        conn_close(c, &tcp->m->slow_reader_closed);
        return;
    }
    if (c->half_closed && c->head_seq == c->next_seq &&
        evbuffer_get_length(bufferevent_get_input(c->bev)) < tcp->framing->min_len) {
        /* Everything asked is answered: once the answers are written out
         * (conn_written), close. */
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
            conn_close(c, &tcp->m->half_closed);
    }
}

static void slot_answer(tcp_slot_t *s, const uint8_t *pdu, size_t len)
{
    memcpy(s->pdu, pdu, len);
    s->len = (uint16_t)len;
    s->state = SLOT_READY;
}

/*
 * The exceptions 06 that remain (a bus queue full although each listener
 * keeps to its share: docs/frontends.md, Overload) are rate-limited per
 * connection, so that refusals never cost more than the answers they
 * replace: a connection may be refused TCP_BUSY_BURST times at once, then
 * once more for each real answer it gets and once per interval. A generic
 * cell rate algorithm in one word: busy_tat_ns is when the budget is whole
 * again; a 06 moves it an interval on, a real answer an interval back.
 * A connection whose budget is spent is not read (busy_throttle) until an
 * interval's worth has come back: its next request waits unread, TCP flow
 * control holds the client, and a looping master cannot turn the gateway
 * into a refusal loop. Its ADU deadline does not run meanwhile (the wait
 * is the gateway's).
 */
static void busy_refused(tcp_conn_t *c)
{
    uint64_t now = gw_now_ns();
    c->busy_tat_ns = (c->busy_tat_ns > now ? c->busy_tat_ns : now) + TCP_BUSY_INTERVAL_NS;
    gw_count(&c->tcp->m->busy_refused);
}

static void busy_answered(tcp_conn_t *c)
{
    uint64_t now = gw_now_ns();
    if (c->busy_tat_ns > now)
        c->busy_tat_ns = c->busy_tat_ns - now > TCP_BUSY_INTERVAL_NS ? c->busy_tat_ns - TCP_BUSY_INTERVAL_NS : now;
}

static void on_throttle_end(evutil_socket_t fd, short what, void *arg);

/* Budget spent, or still being waited for: stop reading; true. */
static bool busy_throttle(tcp_conn_t *c)
{
    const uint64_t slack = (TCP_BUSY_BURST - 1) * TCP_BUSY_INTERVAL_NS;
    uint64_t now = gw_now_ns();

    if (!c->throttled) {
        if (c->busy_tat_ns <= now + slack)
            return false;
        if (!c->ev_throttle)
            c->ev_throttle = evtimer_new(loop_base(c->tcp->loop), on_throttle_end, c);
        if (!c->ev_throttle)
            return false;   /* out of memory: unthrottled rather than never read again */
        uint64_t wait_ns = c->busy_tat_ns - slack - now;
        struct timeval tv = { (time_t)(wait_ns / 1000000000u), (suseconds_t)(wait_ns % 1000000000u / 1000) + 1 };
        evtimer_add(c->ev_throttle, &tv);
        c->throttled = true;
        gw_count(&c->tcp->m->busy_throttled);
    }
    bufferevent_disable(c->bev, EV_READ);
    c->partial_since_ns = 0;
    return true;
}

static void slot_exception(tcp_slot_t *s, uint8_t fc, uint8_t code)
{
    uint8_t pdu[2] = { (uint8_t)(fc | 0x80), code };
    slot_answer(s, pdu, sizeof pdu);
}

/* A request's class: the priority one when its client (priority_clients),
 * its TLS session's role ([role NAME] priority), its unit (priority_units)
 * or its function's class (priority_functions: parser/'s one classifier,
 * as for roles) is named there; the classes are ordered and bounded in
 * backpressure.c and line/queue.c. */
static uint8_t request_class(const tcp_conn_t *c, uint8_t unit, const uint8_t *pdu, size_t len)
{
    const config_tcp_t *cfg = &c->tcp->cfg;
    bool high = c->klass == TCP_CLASS_PRIORITY || (cfg->priority_units[unit / 8] >> (unit % 8) & 1) ||
                (cfg->priority_functions && (rtu_function_class(pdu, len) & cfg->priority_functions)) ||
                (c->role >= 0 && mbaps_role_priority(c->tcp->mbaps, c->role));
    return high ? TCP_CLASS_PRIORITY : TCP_CLASS_NORMAL;
}

/* A request for a map's unit (gateway/vslave.c, through front_map_request):
 * answered now, or its write's answer comes through the origin like a bus's. */
static void map_request(tcp_conn_t *c, uint8_t unit, line_request_t *r, tcp_slot_t *s)
{
    gw_tcp_t *tcp = c->tcp;
    uint8_t answer[RTU_MAX_PDU];
    size_t n = 0;

    if (front_map_request(tcp->gw, unit, r, answer, &n) == GW_UNIT_PENDING)
        shares_taken(tcp->shares, GW_BUS_MAP);   /* the origin gives back bus 0xFF's place: none */
    else
        slot_answer(s, answer, n);
}

/* One complete request: through front_dispatch (dispatch.c, the way every
 * front end's requests go), and a slot for its answer. */
static void conn_request(tcp_conn_t *c, const tcp_adu_t *h)
{
    gw_tcp_t *tcp = c->tcp;
    gw_t *gw = tcp->gw;
    tcp_slot_t *s = &c->slots[c->next_seq % c->depth];
    uint32_t seq = c->next_seq++;
    uint8_t out[RTU_MAX_PDU];
    line_request_t r;

    atomic_fetch_add_explicit(&tcp->in_flight, 1, memory_order_relaxed);
    gw_count(&tcp->m->requests);
    *s = (tcp_slot_t){ .tid = h->tid, .unit = h->unit, .state = SLOT_WAITING };
    size_t n = front_dispatch(gw, &tcp->cfg, tcp->m, c->role, h, &r, out);
    if (n) {
        slot_answer(s, out, n);
    } else if (r.bus == GW_BUS_MAP) {
        r.origin = &tcp->origin;
        r.conn_id = c->id;
        r.seq = seq;
        map_request(c, h->unit, &r, s);
    } else {
        unsigned bus = r.bus;
        r.origin = &tcp->origin;
        r.conn_id = c->id;
        r.seq = seq;
        r.priority = request_class(c, h->unit, h->pdu, h->pdu_len);
        /* The place: the one held for its turn, or one taken now (before
         * the submit: its answer may come back on a worker at once). */
        if (c->reserved && c->reserved_bus == bus)
            c->reserved = false;
        else
            shares_taken(tcp->shares, bus);
        int code = gw_submit(gw, &r);
        if (code) {
            shares_answered(tcp->shares, bus);
            event_active(tcp->ev_serve, EV_TIMEOUT, 0);
            if (code == MB_EX_BUSY)
                busy_refused(c);
            slot_exception(s, h->pdu[0], (uint8_t)code);
        }
    }
    conn_flush(c);
}

/*
 * MBAP (tcp_framing_mbap). A header whose protocol or length can never be
 * valid is refused on the bytes that show it (4 and 6 of the 7), not held
 * until the rest arrives: a client announcing a length of 0 or 60000 gets
 * nothing to wait for. Otherwise mbap_stream_next says whether a whole ADU
 * is there.
 */
static int mbap_next(const uint8_t *buf, size_t avail, bool quiet, tcp_adu_t *adu, char *why, size_t cap)
{
    mbap_header_t h;
    size_t adu_len;

    (void)quiet;   /* MBAP's length field always tells */
    if (avail >= 4) {
        unsigned protocol = (unsigned)(buf[2] << 8 | buf[3]), length = avail >= 6 ? (unsigned)(buf[4] << 8 | buf[5]) : 2;
        if (protocol != 0 || length < 2 || length > RTU_MAX_PDU + 1) {
            snprintf(why, cap, "%s MBAP header (protocol %u, length %u)", protocol ? "non-Modbus" : "impossible",
                     protocol, length);
            return -1;
        }
    }
    int rc = mbap_stream_next(buf, avail, &h, &adu_len);
    if (rc < 0) {
        snprintf(why, cap, "%s MBAP header (protocol %u, length %u)", rc == -EPROTO ? "non-Modbus" : "oversized",
                 h.protocol, h.length);
        return -1;
    }
    if (rc == 0)
        return 0;
    *adu = (tcp_adu_t){ .len = adu_len, .tid = h.transaction, .unit = h.unit, .pdu = buf + MBAP_HEADER_LEN,
                        .pdu_len = adu_len - MBAP_HEADER_LEN };
    return 1;
}

const tcp_framing_t tcp_framing_mbap = { "tcp", MBAP_HEADER_LEN, mbap_next, mbap_encode };

static void on_quiet(evutil_socket_t fd, short what, void *arg);
static void conn_release_unused(tcp_conn_t *c);

/*
 * Back-pressure (backpressure.c): a whole request bound for a bus where
 * this listener's share is taken, or where others wait before it, is left
 * in the buffer, unparsed, and the connection waits in its class's list
 * for that bus. The socket is still read, but only up to WAIT_READ_LIMIT
 * bytes (a read watermark; TCP flow control holds the client beyond it):
 * so a client that resets or closes while it waits is seen at once and its
 * place in the list and in max_clients freed, instead of its request being
 * sent on the line for nobody. A looping client sends nothing more while
 * it waits and costs no read at all. The ADU deadline does not run
 * meanwhile: the request is whole, the wait is the gateway's. true: it waits.
 */
#define WAIT_READ_LIMIT (2 * MBAP_MAX_ADU)

static bool conn_waits_its_turn(tcp_conn_t *c, const tcp_adu_t *adu)
{
    gw_tcp_t *tcp = c->tcp;
    unsigned bus, slave;

    if (adu->refuse || vslave_owns(tcp->maps, adu->unit) ||
        !front_route(tcp->gw, &tcp->cfg, adu->unit, &bus, &slave) || bus >= gw_bus_count(tcp->gw))
        return false;   /* answered here (a map's unit too), no place taken */
    shares_grow(tcp->shares, bus + 1);   /* a bus a reload added: its share from its first request */
    unsigned klass = request_class(c, adu->unit, adu->pdu, adu->pdu_len);
    if ((c->reserved && c->reserved_bus == bus) || shares_room(tcp->shares, bus, klass, false))
        return false;
    /* A read the poll cache answers (serve_cached_ms) takes no place in the
     * bus: it does not wait for one either, however busy the bus is. */
    rtu_request_t req;
    uint8_t pdu[RTU_MAX_PDU];
    if (rtu_request_decode_pdu(adu->pdu, adu->pdu_len, &req) == RTU_OK && cache_answer(tcp->gw, bus, slave, &req, pdu))
        return false;
    bufferevent_setwatermark(c->bev, EV_READ, 0, WAIT_READ_LIMIT);
    c->partial_since_ns = 0;
    shares_wait(tcp->shares, &c->wait, bus, klass, gw_now_ns());
    gw_count(klass ? &tcp->m->priority_waits : &tcp->m->waits);
    atomic_fetch_add_explicit(klass ? &tcp->m->priority_waiting : &tcp->m->waiting, 1, memory_order_relaxed);
    return true;
}

/*
 * Splits what has arrived into requests (the framing's next()) and hands
 * each to conn_request. A partial request stays in the buffer for the next
 * read; bytes that cannot be framed close the connection, as nothing after
 * them can be. With the ring full, reading stops once a request's worth of
 * bytes is waiting (min_len), even before it is whole. quiet: nothing has
 * arrived for RTU_TCP_QUIET_MS (or the client sent EOF), for the RTU
 * requests whose end only that decides (rtu_tcp_frame.c).
 *
 * The ADU deadline (adu_timeout_ms, against slowloris) measures how long
 * the request at the head of the buffer has stayed incomplete while this
 * connection was being read: it restarts whenever a request is taken off
 * (what is left began arriving with it, or after), and it does not run
 * while the ring is full and reading is stopped, since the bytes the
 * gateway is not reading are not the client's delay. A client pipelining
 * faster than the line answers is therefore never cut; one trickling the
 * bytes of a request while it is read still is, after adu_timeout_ms.
 */
static void conn_parse(tcp_conn_t *c, bool quiet)
{
    gw_tcp_t *tcp = c->tcp;
    const tcp_framing_t *f = tcp->framing;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    uint8_t frame[MBAP_MAX_ADU];
    char why[128];
    tcp_adu_t adu;
    uint64_t id = c->id;   /* c may be freed by a flush below; the id tells */
    bool took = false;

    if (c->ev_quiet)
        event_del(c->ev_quiet);   /* armed again below if still needed */
    for (;;) {
        /* No request is longer than the frame, so this much always holds a whole one. */
        ev_ssize_t got = evbuffer_copyout(in, frame, sizeof frame);
        int rc = f->next(frame, got > 0 ? (size_t)got : 0, quiet, &adu, why, sizeof why);
        if (rc < 0) {
            gw_log(tcp->gw, CONFIG_LOG_WARN, "%s: %s; closing that connection", f->section, why);
            conn_close(c, &tcp->m->bad_mbap);
            return;
        }
        if (got < (ev_ssize_t)f->min_len)
            break;
        if (c->next_seq - c->head_seq == c->depth) {
            /* Ring full: stop reading until answers free a slot; the ADU
             * deadline waits with it. */
            bufferevent_disable(c->bev, EV_READ);
            c->paused = true;
            c->partial_since_ns = 0;
            return;
        }
        if (rc == 2) {
            struct timeval q = { 0, RTU_TCP_QUIET_MS * 1000 };
            if (!c->ev_quiet)
                c->ev_quiet = evtimer_new(loop_base(tcp->loop), on_quiet, c);
            if (c->ev_quiet)
                evtimer_add(c->ev_quiet, &q);
            break;
        }
        if (rc == 0)
            break;    /* the rest of this request has not arrived yet */
        if (busy_throttle(c))
            return;
        if (conn_waits_its_turn(c, &adu))
            return;
        if (!c->slots && !(c->slots = calloc(c->depth, sizeof *c->slots))) {
            gw_log(tcp->gw, CONFIG_LOG_ERROR, "%s: out of memory for a connection's replies; closing it",
                   f->section);
            conn_close(c, NULL);
            return;
        }
        evbuffer_drain(in, adu.len);
        conn_request(c, &adu);
        if (!conn_by_id(tcp, id))
            return;   /* closed while flushing (slow reader) */
        took = true;
    }
    if (evbuffer_get_length(in) == 0)
        c->partial_since_ns = 0;
    else if (!c->partial_since_ns || took)
        c->partial_since_ns = gw_now_ns();
}

void conn_read(struct bufferevent *bev, void *arg)
{
    tcp_conn_t *c = arg;
    (void)bev;
    gw_tcp_t *tcp = c->tcp;
    uint64_t id = c->id;
    c->last_activity_ns = gw_now_ns();
    if (c->wait.linked)
        return;   /* waiting: parsed at its turn */
    conn_parse(c, false);
    if ((c = conn_by_id(tcp, id)) != NULL && c->reserved) {
        conn_release_unused(c);
        if (!c->reserved)
            event_active(tcp->ev_serve, EV_TIMEOUT, 0);
    }
}

/* After a parse that reading had put off (a quiet timer, a throttle's end):
 * the connection, if it is still there, gives back a place it reserved and
 * did not use (the next waiting connection's turn), and a half-closed one
 * flushes what it owes. */
static void after_deferred_parse(gw_tcp_t *tcp, uint64_t id)
{
    tcp_conn_t *c = conn_by_id(tcp, id);
    if (!c)
        return;
    if (c->reserved) {
        conn_release_unused(c);
        if (!c->reserved)
            event_active(tcp->ev_serve, EV_TIMEOUT, 0);
    }
    if (c->half_closed)
        conn_flush(c);
}

/* RTU_TCP_QUIET_MS without a byte after a request whose end needed it. */
static void on_quiet(evutil_socket_t fd, short what, void *arg)
{
    tcp_conn_t *c = arg;
    gw_tcp_t *tcp = c->tcp;
    uint64_t id = c->id;
    (void)fd;
    (void)what;
    if (c->paused || c->wait.linked)
        return;   /* asked again when reading resumes */
    conn_parse(c, true);
    after_deferred_parse(tcp, id);
}

/* A throttled connection's budget has an exception 06 again: read it again
 * (unless something else stopped its reading meanwhile). */
static void on_throttle_end(evutil_socket_t fd, short what, void *arg)
{
    tcp_conn_t *c = arg;
    gw_tcp_t *tcp = c->tcp;
    uint64_t id = c->id;
    (void)fd;
    (void)what;
    c->throttled = false;
    if (c->paused || c->wait.linked)
        return;   /* parsed when its ring has room or its turn comes */
    if (!c->half_closed)
        bufferevent_enable(c->bev, EV_READ);
    conn_parse(c, c->half_closed);
    after_deferred_parse(tcp, id);
}

/* The output buffer ran empty: a half-closed connection may now close. */
void conn_written(struct bufferevent *bev, void *arg)
{
    tcp_conn_t *c = arg;
    (void)bev;
    if (c->half_closed && c->head_seq == c->next_seq)
        conn_close(c, &c->tcp->m->half_closed);
}

void conn_event(struct bufferevent *bev, short what, void *arg)
{
    tcp_conn_t *c = arg;
    gw_tcp_t *tcp = c->tcp;
    uint64_t id = c->id;
    if (c->handshaking) {
        /* TLS: authenticated, with a role, or refused (counted and logged).
         * Authenticated, it becomes a client like a plain one, within
         * max_clients and max_per_address, or is refused as one would be. */
        handshake_over(c);
        if ((what & BEV_EVENT_CONNECTED) &&
            (c->role = mbaps_connected(tcp->mbaps, bev, (const struct sockaddr *)&c->peer)) >= 0) {
            admit_lock(tcp);
            atomic_uint_fast64_t *refused = clients_full(tcp, (const struct sockaddr *)&c->peer, c);
            admit_unlock(tcp);
            if (refused)
                conn_close(c, refused);
            return;
        }
        if (!(what & BEV_EVENT_CONNECTED))
            mbaps_refused(tcp->mbaps, bev, (const struct sockaddr *)&c->peer, false);
        conn_close(c, NULL);
        return;
    }
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
        /* Half-close: what was asked is still answered, then we close. */
        c->half_closed = true;
        if (!c->paused && !c->wait.linked)
            conn_parse(c, true);   /* complete requests still buffered; EOF: nothing more comes */
        if ((c = conn_by_id(tcp, id)) != NULL)
            conn_flush(c);
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_close(c, NULL);
}

/*
 * A place held for a connection's turn and not used by what its turn
 * parsed (a cache hit, a refusal) is given back, unless the request it
 * waited with is still being completed: an RTU request without a length
 * rule ends only after RTU_TCP_QUIET_MS of quiet (on_quiet), and must not
 * lose its turn for that, or a client of such requests could be sent to
 * the tail of the list at every turn, forever.
 */
static void conn_release_unused(tcp_conn_t *c)
{
    if (!c->reserved || (c->ev_quiet && evtimer_pending(c->ev_quiet, NULL)))
        return;
    c->reserved = false;
    shares_answered(c->tcp->shares, c->reserved_bus);
}

/*
 * Places freed in the buses go to the connections waiting for them, in
 * turn (backpressure.c): the place is held for the one whose turn it is
 * (taken here), which is read again and submits the request it left
 * unparsed into it; one with another request for a bus still full goes
 * back to the tail of that bus's list.
 */
static void serve_waiters(gw_tcp_t *tcp)
{
    for (unsigned bus = 0; bus < shares_buses(tcp->shares); bus++) {
        tcp_waiter_t *w;
        while ((w = shares_next(tcp->shares, bus)) != NULL) {
            /* the clock read for each: a connection served here may wait
             * again (conn_parse) and be served later in this loop, its wait
             * begun after a clock read once before the loop (that wait,
             * negative, wrapped: wait_us_total 4.6e17 under load) */
            uint64_t now = gw_now_ns();
            tcp_conn_t *c = conn_of_waiter(w);
            uint64_t id = c->id, waited_us = (now > w->since_ns ? now - w->since_ns : 0) / 1000;
            atomic_fetch_sub_explicit(w->klass ? &tcp->m->priority_waiting : &tcp->m->waiting, 1,
                                      memory_order_relaxed);
            atomic_fetch_add_explicit(w->klass ? &tcp->m->priority_wait_us : &tcp->m->wait_us, waited_us,
                                      memory_order_relaxed);
            shares_taken(tcp->shares, bus);
            c->reserved = true;
            c->reserved_bus = (uint8_t)bus;
            bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
            conn_parse(c, c->half_closed);
            if ((c = conn_by_id(tcp, id)) != NULL) {
                conn_release_unused(c);
                if (c->half_closed)
                    conn_flush(c);
            }
        }
    }
}

void on_serve(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    serve_waiters(arg);
}

/* The loop command behind the origin's answer(): on the shard's loop thread. */
static void on_answer(void *ctx, uint64_t conn_id, uint32_t seq, const uint8_t *pdu, size_t len)
{
    gw_tcp_t *tcp = ctx;
    tcp_conn_t *c = conn_by_id(tcp, conn_id);

    if (!c || seq - c->head_seq >= c->next_seq - c->head_seq) {
        gw_count(&tcp->m->discarded);   /* its client left */
        serve_waiters(tcp);
        return;
    }
    if (len >= 2 && pdu[0] & 0x80 && pdu[1] == MB_EX_BUSY)
        busy_refused(c);   /* the bus queue full (line/queue.c), or the slave busy */
    else if (len && !(pdu[0] & 0x80))
        busy_answered(c);
    slot_answer(&c->slots[seq % c->depth], pdu, len);
    conn_flush(c);
    c = conn_by_id(tcp, conn_id);
    if (c && c->paused && c->next_seq - c->head_seq < c->depth) {
        c->paused = false;
        if (!c->half_closed)
            bufferevent_enable(c->bev, EV_READ);
        conn_parse(c, c->half_closed);   /* requests already buffered */
        if ((c = conn_by_id(tcp, conn_id)) != NULL && c->half_closed)
            conn_flush(c);
    }
    serve_waiters(tcp);
}

/* origin: answer() runs on the bus's thread (the line thread by default); the
 * socket is its shard's loop's, where the answer is posted. */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_tcp_t *tcp = (gw_tcp_t *)o;
    shares_answered(tcp->shares, req->bus);   /* before the post: serve_waiters sees the place free */
    if (loop_post(tcp->loop, on_answer, tcp, req->conn_id, req->seq, pdu, len) != 0)
        gw_log(tcp->gw, CONFIG_LOG_ERROR, "%s: cannot queue an answer (out of memory)", tcp->framing->section);
}

static bool origin_wanted(line_origin_t *o, const line_request_t *req)
{
    gw_tcp_t *tcp = (gw_tcp_t *)o;
    return atomic_load_explicit(&tcp->live[req->conn_id & 0xFFFF], memory_order_relaxed) == req->conn_id;
}

const line_origin_ops_t tcp_origin_ops = { "tcp", origin_answer, origin_wanted };
