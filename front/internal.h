/*
 * front/internal.h -- what the front ends share among themselves: the
 * sessions' framing (tcp.c, rtu_tcp.c, rtu_tcp_frame.c) and what tcp.c's
 * TLS listener asks of mbaps.c and mbaps.c of the TLS module.
 */
#ifndef RTUGW_FRONT_INTERNAL_H
#define RTUGW_FRONT_INTERNAL_H

#include "front/front.h"

/*
 * tcp.c (I/O thread): connections and their sessions, shared by the Modbus
 * TCP front end ([tcp], MBAP) and RTU over TCP ([rtu_tcp], rtu_tcp.c). The
 * framing is all that differs: where a request ends in the stream, and how
 * an answer is written.
 */
typedef struct tcp_adu {
    size_t len;              /* bytes of the stream the request takes */
    uint16_t tid;            /* MBAP's transaction id; 0 for RTU */
    uint8_t unit;            /* MBAP's unit id, RTU's slave id: both route alike */
    uint8_t refuse;          /* non-zero: answer this exception, not the request (its end is unsure) */
    const uint8_t *pdu;
    size_t pdu_len;
} tcp_adu_t;

typedef struct tcp_framing {
    const char *section;     /* "tcp", "rtu_tcp": in logs and reload messages */
    size_t min_len;          /* fewer bytes cannot start telling a request */
    /* At the front of buf (what has arrived, at most MBAP_MAX_ADU bytes):
     * 1 and *adu (pdu points into buf) for a whole request, 0 when more
     * bytes are needed, 2 when it is whole only if nothing more arrives
     * within RTU_TCP_QUIET_MS (then asked again with quiet), -1 with why
     * when the stream cannot be framed (the connection is closed, counted
     * as bad_mbap). Pure. */
    int (*next)(const uint8_t *buf, size_t avail, bool quiet, tcp_adu_t *adu, char *why, size_t cap);
    /* The answer as written back: its length, or <= 0 to write nothing. */
    int (*encode)(uint16_t tid, uint8_t unit, const uint8_t *pdu, size_t len, uint8_t *out, size_t cap);
} tcp_framing_t;

/*
 * rtu_tcp_frame.c: where a request of a function without a length rule ends
 * in an RTU over TCP stream (buf: what has arrived). quiet: nothing has
 * arrived for RTU_TCP_QUIET_MS. FOUND sets *len; IF_QUIET: ask again once
 * quiet; MORE: wait for bytes; NONE: 256 bytes and no frame; AMBIGUOUS:
 * quiet, and more than one end is possible: refuse, never cut.
 */
#define RTU_TCP_QUIET_MS 5
typedef enum rtu_tcp_end {
    RTU_TCP_END_AMBIGUOUS = -2, RTU_TCP_END_NONE = -1, RTU_TCP_END_MORE = 0, RTU_TCP_END_FOUND = 1,
    RTU_TCP_END_IF_QUIET = 2
} rtu_tcp_end_t;
rtu_tcp_end_t rtu_tcp_frame_end(const uint8_t *buf, size_t avail, bool quiet, size_t *len);

/*
 * dispatch.c (any front end's thread): the checks and the route every
 * request goes through, in one order (the list is there). front_dispatch:
 * 0 when the request is for a bus (*r set: pdu, slave, bus, t_accept_ns;
 * the caller adds its origin, ids and class and submits it), else the
 * length of the answer already written in out (an exception or a cache
 * hit), counted in m. role: a TLS session's, or -1. A map's unit gives 0
 * with r->bus GW_BUS_MAP (r->pdu set): the caller sets r's origin and ids
 * and calls front_map_request.
 */
size_t front_dispatch(gw_t *gw, const config_tcp_t *cfg, gw_tcp_metrics_t *m, int role, const tcp_adu_t *h,
                      line_request_t *r, uint8_t out[RTU_MAX_PDU]);
/* A map's request (gateway/vslave.c): GW_UNIT_ANSWERED with *n bytes of
 * answer in out (data or an exception; 0x0A if the map went meanwhile), or
 * GW_UNIT_PENDING: a write whose answer comes through r's origin, bus
 * GW_BUS_MAP. */
int front_map_request(gw_t *gw, uint8_t unit, const line_request_t *r, uint8_t out[RTU_MAX_PDU], size_t *n);
/* unit -> bus and slave, per a section's routes. false: no path. */
bool front_route(const gw_t *gw, const config_tcp_t *cfg, uint8_t unit, unsigned *bus, unsigned *slave);

/* A listener on cfg's bind and port, its requests split by framing, counted in its own counters. */
gw_tcp_t *tcp_listen(gw_t *gw, const config_tcp_t *cfg, const tcp_framing_t *framing, char *err, size_t errcap);

/*
 * backpressure.c (I/O thread, but shares_answered): a listener's share of
 * each bus (bus_share requests in its queue and on its line at once), the
 * connections waiting for a place, per bus and class, served in turn.
 */
#define TCP_CLASSES 2
#define TCP_CLASS_NORMAL 0
#define TCP_CLASS_PRIORITY 1      /* [tcp] priority_clients */
#define TCP_STARVATION_BOUND 8    /* a waiting lower class is passed over at most this often in a row */
#define TCP_PRIORITY_PLACES 1     /* places of a bus beyond bus_share only the priority class takes */
typedef struct tcp_waiter {
    struct tcp_waiter *prev, *next;
    uint64_t since_ns;            /* when it began to wait */
    uint8_t bus, klass;
    bool linked;
} tcp_waiter_t;
typedef struct tcp_shares tcp_shares_t;
tcp_shares_t *shares_new(unsigned buses, unsigned share);
/* I/O thread: shares for buses 0..buses-1 (a bus a reload added); never shrinks. */
void shares_grow(tcp_shares_t *s, unsigned buses);
void shares_free(tcp_shares_t *s);
void shares_set(tcp_shares_t *s, unsigned share);   /* a reload's bus_share */
/* May a request of klass take a place in bus now? turn: its connection was
 * just given its turn (shares_next), so the list does not hold it back. */
bool shares_room(const tcp_shares_t *s, unsigned bus, unsigned klass, bool turn);
void shares_taken(tcp_shares_t *s, unsigned bus);      /* submitted */
void shares_answered(tcp_shares_t *s, unsigned bus);   /* its answer came: any thread */
/* w waits at the tail of bus's list for its class (no-op when waiting already). */
void shares_wait(tcp_shares_t *s, tcp_waiter_t *w, unsigned bus, unsigned klass, uint64_t now_ns);
void shares_leave(tcp_shares_t *s, tcp_waiter_t *w);   /* closed while waiting */
/* The waiter whose turn it is on bus, taken off its list, when bus has a
 * place free; else NULL. */
tcp_waiter_t *shares_next(tcp_shares_t *s, unsigned bus);
unsigned shares_buses(const tcp_shares_t *s);
unsigned shares_waiting(const tcp_shares_t *s, unsigned klass);

/* mbaps.c: what tcp.c's TLS listener asks of MB-TCP-Security. */
/* May one more socket begin a handshake, with in_handshake sockets in one
 * already, from_address of them from its address? A no is counted. */
bool mbaps_admit(gw_mbaps_t *t, unsigned in_handshake, unsigned from_address);
/* The number of sockets in a handshake now (the gauge). */
void mbaps_handshaking(gw_mbaps_t *t, unsigned in_handshake);
/* A bufferevent that runs a handshake on fd (counted); NULL: out of memory. */
struct bufferevent *mbaps_accept(gw_mbaps_t *t, int fd);
/* The handshake is done: the client's role index, or -1 when it is refused
 * (counted and logged, the caller closes). */
int mbaps_connected(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer);
/* The handshake failed, or did not finish in time: counted and logged. */
void mbaps_refused(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer, bool timed_out);
/* Before a TLS connection's bufferevent is freed. */
void mbaps_closed(gw_mbaps_t *t, struct bufferevent *bev);
/* Does role grant this request (its unit, the bus it routes to or -1)? Counted. */
bool mbaps_allows(gw_mbaps_t *t, int role, uint8_t unit, int bus, const uint8_t *pdu, size_t len);
/* Is role's [role NAME] priority set (its requests in the priority class)? */
bool mbaps_role_priority(gw_mbaps_t *t, int role);
/* After a reload: may this authenticated session go on (its certificate
 * verified again against the CAs and CRL now in force)? Logged when not. */
bool mbaps_still_trusted(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer);

/*
 * The TLS module's table (front/tls.c, built as rtugw-tls.so and loaded by
 * mbaps.c only when [tls] is enabled, so that a daemon without it never maps
 * libssl). The module calls nothing of the daemon's.
 */
#define GW_TLS_MODULE_ABI 2
typedef struct tls_env tls_env_t;
typedef struct tls_ctx tls_ctx_t;
typedef struct gw_tls_module {
    unsigned abi;   /* GW_TLS_MODULE_ABI */
    /* Initialises OpenSSL. A client certificate's role is looked up with
     * role_find in cfg; both must outlive the env, which outlives every
     * context and connection. NULL: out of memory. */
    tls_env_t *(*env_new)(const config_t *cfg, int (*role_find)(const config_t *cfg, const char *name));
    void (*env_free)(tls_env_t *env);
    /* A server context of tls's files and settings; NULL with err naming the file. */
    tls_ctx_t *(*ctx_new)(tls_env_t *env, const config_tls_t *tls, char *err, size_t cap);
    void (*ctx_free)(tls_ctx_t *ctx);   /* open connections keep theirs */
    void (*ctx_certificate)(const tls_ctx_t *ctx, char *subject, size_t cap, int64_t *not_after);
    struct bufferevent *(*accept)(tls_ctx_t *ctx, struct event_base *base, int fd);
    /* After BEV_EVENT_CONNECTED: the role index, or -1 (then refusal() says why);
     * detail: the subject, version and suite. */
    int (*peer)(struct bufferevent *bev, bool *resumed, char *detail, size_t cap);
    gw_tls_refusal_t (*refusal)(struct bufferevent *bev, char *detail, size_t cap);
    /* Before the bufferevent is freed: close_notify, once authenticated. */
    void (*close_notify)(struct bufferevent *bev);
    /* Does the session's client certificate still verify against ctx's CAs
     * and CRL (a context made by a reload)? */
    bool (*still_trusted)(tls_ctx_t *ctx, struct bufferevent *bev);
} gw_tls_module_t;

#endif
