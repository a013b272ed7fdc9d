/*
 * front/tcp_session.h -- tcp.c's connections and listener, shared with
 * tcp_accept.c (accepting, client limits, priority class, sweeps, reload,
 * teardown). Only these two files include it; every other file of front/
 * sees gw_tcp_t opaque through front/internal.h.
 */
#ifndef RTUGW_FRONT_TCP_SESSION_H
#define RTUGW_FRONT_TCP_SESSION_H

#include "front/internal.h"

#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

/* The largest max_clients the config allows, and beside it the TLS
 * handshakes' own slots (max_handshakes), which never take a client's.
 * A connection id keeps its index in 16 bits. The table is in the
 * listener's one allocation, large enough to be mapped, not copied: its
 * pages are touched only up to the highest index used (top), and every
 * walk of it stops there, so a listener that has had 30 clients costs
 * what 30 entries do, however large max_clients. */
#define TCP_TABLE (CONFIG_MAX_CLIENTS + CONFIG_MAX_HANDSHAKES)
_Static_assert(TCP_TABLE <= 65536, "a connection's index is 16 bits of its id");
#define TCP_OUT_LIMIT (64 * 1024) /* unread replies beyond this: slow reader, disconnect */
/* Exceptions 06 per connection (tcp.c busy_*): at once, then one for each
 * real answer it gets and one per interval. */
#define TCP_BUSY_BURST 4u
#define TCP_BUSY_INTERVAL_NS 1000000000ull

enum slot_state { SLOT_FREE = 0, SLOT_WAITING, SLOT_READY };

typedef struct tcp_slot {
    uint16_t tid;                   /* MBAP's; 0 for RTU */
    uint8_t unit;
    uint8_t state;
    uint16_t len;
    uint8_t pdu[RTU_MAX_PDU];
} tcp_slot_t;

typedef struct tcp_conn {
    struct gw_tcp *tcp;
    struct bufferevent *bev;
    uint64_t id;
    uint32_t head_seq, next_seq;   /* slots [head, next) are in use */
    tcp_slot_t *slots;
    unsigned depth;                 /* its ring's slots: [tcp] max_pending when it was accepted
                                       (a reload changes new connections' rings, never a live one's) */
    uint64_t last_activity_ns;
    uint64_t partial_since_ns;      /* first byte of an ADU not yet complete; 0: none */
    struct event *ev_quiet;         /* RTU: a request whose end waits for quiet; NULL until needed */
    struct sockaddr_storage peer;
    bool paused;                    /* reading stopped: ring full */
    bool half_closed;               /* the client sent EOF: close when answered */
    bool tls;                       /* from the [tls] listener */
    bool handshaking;               /* TLS, not yet authenticated */
    int role;                       /* TLS: its [role NAME] index; -1: plain, no role check */
    tcp_waiter_t wait;              /* linked: a request waits for a place in its bus (backpressure.c) */
    uint8_t klass;                  /* TCP_CLASS_*: its address in priority_clients or not */
    bool reserved;                  /* given its turn: a place in reserved_bus is held for its next request */
    uint8_t reserved_bus;
    bool throttled;                 /* its budget of exceptions 06 spent: not read until ev_throttle */
    uint64_t busy_tat_ns;           /* that budget (GCRA): when it is whole again; tcp.c busy_* */
    struct event *ev_throttle;      /* NULL until first throttled */
} tcp_conn_t;

/*
 * A listener's connections are served by [tcp] loops event loops (1 by
 * default: the I/O thread alone). Each loop has a gw_tcp_t of its own, a
 * shard: its listening socket (all of them bound to the one address with
 * SO_REUSEPORT, so the kernel spreads new connections over them), its
 * connection table, its places in the buses (its part of bus_share), its
 * timers and its origin. Shard 0 is the lead, on the I/O thread: the
 * handle daemon/ holds, the only one with a TLS listener, the owner of the
 * shared counters and of the others (their loops and threads).
 *
 * Who owns a connection: the shard that accepted it, for its whole life;
 * every field of tcp_conn_t and of the shard is written only on that
 * shard's loop thread (reload, stop and teardown reach a shard through
 * loop_call, which runs on that thread), except what is said here:
 *   - conns[] and top, which the admission (max_clients, max_per_address)
 *     of every shard reads: written by the owner under the lead's
 *     admit_lock, read by other shards only under it; a connection's peer
 *     is written before it enters the table, and its handshaking flag (the
 *     lead's TLS sessions) under the lock;
 *   - live[], in_flight and open: atomics, read from any thread.
 * How an answer finds its connection: a request carries its shard's
 * origin and the connection's id (index and generation in that shard's
 * table); the answer is posted to that origin's loop and looked up there,
 * in that shard's table only. So no answer can reach another shard's
 * connection, and within a shard the generation keeps an answer from a
 * later connection in the same index (above, tcp.c).
 */
#define TCP_MAX_LOOPS CONFIG_MAX_TCP_LOOPS

struct gw_tcp {
    line_origin_t origin;             /* first: the answers' way back */
    gw_t *gw;
    struct gw_tcp *lead;              /* shard 0 (itself on the lead); fixed */
    unsigned shard_no;                /* its index among the lead's shards; fixed */
    /* The lead only: its shards (shard[0] is itself), fixed from creation,
     * the others' loops, and the lock of the admission (above). */
    struct gw_tcp *shard[TCP_MAX_LOOPS];
    unsigned loops;
    pthread_mutex_t admit_lock;
    /* The wiring's handles it uses, taken at creation (each fixed from
     * start: the loop, the maps, [tls]): no accessor call on the request
     * path but the bus count, which a reload may change (gw_bus_count). */
    gw_loop_t *loop;
    gw_mbaps_t *mbaps;
    gw_maps_t *maps;
    config_tcp_t cfg;
    const tcp_framing_t *framing;
    tcp_shares_t *shares;           /* its places in each bus, and who waits for one */
    gw_tcp_metrics_t *m;                  /* this listener's counters: &counters */
    gw_tcp_metrics_t counters;
    struct evconnlistener *listener;      /* [tcp] or [rtu_tcp]; NULL when off */
    struct evconnlistener *tls_listener;  /* [tls]; NULL when off */
    struct event *ev_idle;
    struct event *ev_serve;         /* serve_waiters soon: a held place was given back outside it */
    struct event *ev_accept_retry;  /* accepting again after running out of descriptors */
    int reserve_fd;                 /* spare descriptor: refuse cleanly when there are none */
    bool stopped;
    unsigned handshaking;           /* connections in their TLS handshake: not max_clients' */
    uint64_t accept_log_next_ns;
    tcp_conn_t *conns[TCP_TABLE];
    uint64_t generation[TCP_TABLE];
    _Atomic uint64_t live[TCP_TABLE];   /* the id live in each index; 0: none */
    atomic_uint in_flight;          /* requests of its connections not yet answered */
    atomic_uint open;               /* its connections now (/status's tcp.loops) */
    unsigned top;                   /* indexes [0, top) have been used; the rest never */
    unsigned free_hint;             /* no free index below it */
};


/* tcp.c: the sessions. */
extern const line_origin_ops_t tcp_origin_ops;      /* answers back to a connection */
extern const tcp_framing_t tcp_framing_mbap;      /* [tcp] and [tls] */
void conn_close(tcp_conn_t *c, atomic_uint_fast64_t *reason);
void conn_read(struct bufferevent *bev, void *arg);
void conn_written(struct bufferevent *bev, void *arg);
void conn_event(struct bufferevent *bev, short what, void *arg);
void on_serve(evutil_socket_t fd, short what, void *arg);   /* ev_serve's */

/* tcp_accept.c: may one more client from sa be accepted (self: already in
 * a table)? The counter it would be refused under, or NULL. Every shard's
 * table is counted; the caller holds the lead's admit_lock. */
atomic_uint_fast64_t *clients_full(const gw_tcp_t *tcp, const struct sockaddr *sa, const tcp_conn_t *self);
/* The admission lock (the lead's): held while a table is written, and
 * across clients_full and the insert that follows it. */
void admit_lock(const gw_tcp_t *tcp);
void admit_unlock(const gw_tcp_t *tcp);

/* tcp_accept.c: one shard (above); each on the shard's own thread, or
 * before it runs or after it was joined (tcp_loops.c sees to it). */
gw_tcp_t *shard_new(gw_t *gw, gw_loop_t *loop, gw_tcp_t *lead, unsigned no, const config_tcp_t *cfg,
                    const tcp_framing_t *framing);
int shard_listen(gw_tcp_t *t, int fd, bool tls);     /* fd (listening) as its listener; -1: fd closed */
void shard_unlisten(gw_tcp_t *t, bool tls);
void shard_stop_accepting(gw_tcp_t *t);
void shard_apply(gw_tcp_t *t, const config_tcp_t *next);
void shard_free(gw_tcp_t *t);
/* Shard no's part of bus_share: together the loops hold bus_share places
 * of each bus (each at least one: the configuration refuses more loops
 * than bus_share). */
unsigned shard_share(unsigned bus_share, unsigned loops, unsigned no);
/* The lead: RLIMIT_NOFILE raised to what max_clients needs, or a warning. */
void fit_descriptors(gw_tcp_t *tcp);

#endif
