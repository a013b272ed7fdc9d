/*
 * gateway/internal.h -- what the gateway's parts share. Not included outside
 * gateway/.
 *
 * Threads and ownership:
 *   - the I/O thread (io.c, tcp.c, http.c) owns every fd, the TCP
 *     connections and their in-order reply slots, and the serial ports;
 *   - a bus actor (bus.c) owns one line's request queue, the transaction in
 *     flight, the framer, retries and the per-slave dead-slave state;
 *   - the poller actor (poller.c) owns the poll schedule; its results go to
 *     the cache, which HTTP reads under the cache's own mutex.
 * Actors reach the I/O thread through its command queue (io_post); the I/O
 * thread reaches actors with actor_send. Counters that HTTP reads are
 * relaxed atomics with a single writer each.
 */
#ifndef RTUGW_GATEWAY_INTERNAL_H
#define RTUGW_GATEWAY_INTERNAL_H

#include "actor/actor.h"
#include "config/config.h"
#include "drivers/driver.h"
#include "gateway/gateway.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct event_base;

/* ---- messages between actors and the I/O thread --------------------------- */

enum gw_msg {
    MSG_REQUEST = 1, /* gw_request_t: to a bus actor */
    MSG_BYTES,       /* gw_bytes_t: serial chunk, to a bus actor */
    MSG_TIMEOUT,     /* uint64_t time it was armed to fire, to a bus actor */
    MSG_KICK,        /* start the next transaction (after the inter-frame gap) */
    MSG_RETRY,       /* uint32_t transaction: send the request in flight again */
    MSG_IDLE,        /* no payload: check for t3.5 silence */
    MSG_PORT,        /* uint8_t 1 up / 0 down, to a bus actor */
    MSG_POLL_TICK,   /* uint32_t poll index, to the poller */
    MSG_ANSWER,      /* gw_answer_t, to the poller */
};

typedef enum gw_origin { ORIGIN_TCP = 0, ORIGIN_POLL } gw_origin_t;

/* Gateway exception codes (Modbus application protocol, 7). */
#define MB_EX_ILLEGAL_FUNCTION 0x01
#define MB_EX_BUSY 0x06
#define MB_EX_PATH_UNAVAILABLE 0x0A
#define MB_EX_TARGET_FAILED 0x0B

typedef struct gw_request {
    uint8_t origin;      /* gw_origin_t */
    uint8_t slave;       /* 0: broadcast */
    uint16_t pdu_len;
    uint32_t conn_id;    /* TCP: the connection (index and generation) */
    uint32_t seq;        /* TCP: the connection's request number; poll: poll index */
    uint64_t t_accept_ns;
    uint8_t pdu[RTU_MAX_PDU];
} gw_request_t;

typedef struct gw_answer {
    uint32_t conn_id;
    uint32_t seq;
    uint16_t pdu_len;
    uint8_t pdu[RTU_MAX_PDU];
} gw_answer_t;

typedef struct gw_bytes {
    uint64_t t_ns;
    uint16_t len;
    uint8_t data[512];
} gw_bytes_t;

/* ---- counters --------------------------------------------------------------- */

#define GW_LATENCY_BUCKETS 12
extern const double gw_latency_edges_ms[GW_LATENCY_BUCKETS]; /* last is +Inf */

typedef struct gw_bus_metrics {
    atomic_uint_fast64_t requests, responses, exceptions, timeouts, retries;
    atomic_uint_fast64_t crc_errors, foreign_frames, noise_bytes, queue_full, dead_fast;
    atomic_uint_fast64_t broadcasts, unavailable, verify_mismatches, late_bytes_guarded;
    atomic_uint_fast64_t queue_depth, port_up, reopen_attempts;
    atomic_uint_fast64_t latency[GW_LATENCY_BUCKETS];
    atomic_uint_fast64_t latency_sum_us;
} gw_bus_metrics_t;

typedef struct gw_slave_metrics {
    atomic_uint_fast64_t requests, responses, timeouts, exceptions;
    atomic_uint_fast64_t dead;        /* 1 while backed off */
    atomic_uint_fast64_t last_ok_ns;  /* CLOCK_MONOTONIC of the last good answer */
} gw_slave_metrics_t;

typedef struct gw_tcp_metrics {
    atomic_uint_fast64_t accepted, refused_full, refused_allow, closed, active;
    atomic_uint_fast64_t requests, answers, bad_mbap, discarded, read_only_refused;
    atomic_uint_fast64_t slow_reader_closed, idle_closed, unrouted, cache_hits;
} gw_tcp_metrics_t;

/* ---- the cache of polled values ----------------------------------------------- */

typedef struct gw_cache_entry {
    uint64_t t_ns;            /* 0: never polled */
    uint16_t count;
    uint8_t ok;
    uint8_t exception;        /* the slave's or the gateway's exception when !ok */
    uint64_t polls, failures, overruns;
    uint16_t values[2000];    /* registers, or bits as 0/1 */
} gw_cache_entry_t;

/* ---- the gateway ----------------------------------------------------------------- */

typedef struct gw_bus gw_bus_t;
typedef struct gw_io gw_io_t;
typedef struct gw_tcp gw_tcp_t;
typedef struct gw_http gw_http_t;
typedef struct gw_poller gw_poller_t;

struct gw {
    config_t *cfg;
    gw_options_t opt;
    actor_system_t *actors;
    router_t *router;
    gw_io_t *io;
    gw_bus_t **buses;
    unsigned bus_count;
    gw_poller_t *poller;
    gw_tcp_t *tcp;
    gw_http_t *http;
    gw_tcp_metrics_t tcp_metrics;
    pthread_mutex_t cache_lock;
    gw_cache_entry_t *cache;  /* one per poll group */
    atomic_int stopping;
    uint64_t started_ns;
};

/* io.c: the I/O thread's loop and its command queue. */
gw_io_t *io_new(gw_t *gw);
void io_free(gw_io_t *io);
struct event_base *io_base(gw_io_t *io);
/* Queue a serial write (from a bus actor). */
int io_post_serial_write(gw_io_t *io, unsigned bus, const uint8_t *adu, size_t len);
/* Queue an answer for a TCP connection (from a bus actor). */
int io_post_tcp_answer(gw_io_t *io, uint32_t conn_id, uint32_t seq, const uint8_t *pdu, size_t len);
/* Start watching a bus's port (opens it; reopens with back-off on hang-up). */
int io_add_bus(gw_io_t *io, unsigned index, gw_bus_t *bus);
int io_run(gw_io_t *io);          /* the loop, on the calling thread */
void io_wake_stop(gw_io_t *io);   /* any thread */

/* bus.c */
gw_bus_t *bus_new(gw_t *gw, unsigned index, char *err, size_t errcap);
void bus_free(gw_bus_t *bus);
/* Spawns the bus actor (after the actor system exists). */
int bus_start(gw_bus_t *bus);
actor_ref_t poller_ref(const gw_poller_t *p);
/* Which merged read a poll group belongs to, and how many reads there are. */
unsigned poller_read_of(const gw_poller_t *p, unsigned group);
unsigned poller_read_count(const gw_poller_t *p);
actor_ref_t bus_ref(const gw_bus_t *bus);
driver_t *bus_driver(gw_bus_t *bus);
const config_bus_t *bus_config(const gw_bus_t *bus);
gw_bus_metrics_t *bus_metrics(gw_bus_t *bus);
gw_slave_metrics_t *bus_slave_metrics(gw_bus_t *bus, unsigned slave);
/* Answer a request at once with an exception, wherever it came from. */
void bus_answer_exception(gw_t *gw, const gw_request_t *req, uint8_t code);
/* Deliver an answer PDU to the request's origin. */
void gw_deliver(gw_t *gw, const gw_request_t *req, const uint8_t *pdu, size_t len);

/* tcp.c (I/O thread) */
gw_tcp_t *tcp_new(gw_t *gw, char *err, size_t errcap);
void tcp_free(gw_tcp_t *tcp);
void tcp_on_answer(gw_tcp_t *tcp, uint32_t conn_id, uint32_t seq, const uint8_t *pdu, size_t len);
void tcp_stop_accepting(gw_tcp_t *tcp);
unsigned tcp_in_flight(const gw_tcp_t *tcp);
void tcp_apply_config(gw_tcp_t *tcp, const config_tcp_t *cfg);

/* poller.c */
gw_poller_t *poller_new(gw_t *gw, char *err, size_t errcap);
void poller_free(gw_poller_t *p);

/* http.c (I/O thread) */
gw_http_t *http_new(gw_t *gw, char *err, size_t errcap);
void http_free(gw_http_t *h);

/* metrics.c */
void gw_observe_latency(gw_bus_metrics_t *m, uint64_t ns);
static inline void gw_count(atomic_uint_fast64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}
static inline uint64_t gw_read(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}
static inline void gw_set(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}
uint64_t gw_now_ns(void);
/* systemd notification ("READY=1", ...) when built with libsystemd; else nothing. */
void gw_notify(const char *state);

#endif
