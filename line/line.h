/*
 * line/line.h -- the line core: one bus's line discipline as a state machine
 * with no I/O and no clock of its own. It owns: the request queues, the one
 * attempt on the wire, retries and guards, the invariants F and I1-I9
 * (stated above the code in line/discipline.c; frames heard are applied to
 * them in line/receive.c, copies in copies.c, shapes in shapes.c, frames
 * with another slave's address in foreign.c), each slave's state
 * (adaptive timeout, back-off, copies), the framer that turns timestamped
 * bytes into frames, and the bus's counters. It may call: parser/
 * (framing, decoding), routing/ (the decode path per frame size, when the
 * host gives it a router) and config/ (the bus's and its devices'
 * settings).
 *
 * Events go in (a request submitted, bytes heard with the time they were
 * heard, a timer fired, a barrier back, the port lost or back), each with
 * the time it happens; actions come out through the host's operations
 * (line_env_t: write these bytes, arm or cancel a timer for T, ask for a
 * barrier, log this, show this frame) and answers through each request's
 * own origin.
 *
 * It calls nothing else: no fd, no thread, no clock, no allocation after
 * line_new but a parked retry's copy. So the same code runs in the daemon
 * (gateway/bus.c is its host: an actor, its port and timers) and in
 * simulated time (tests/line/test_line_core.c: scripted scenarios and a seeded
 * explorer with model slaves and faults).
 *
 * Threads: a line is one thread's at a time (its host's); the counters are
 * relaxed atomics with that thread as their single writer, read by anyone.
 */
#ifndef RTUGW_LINE_LINE_H
#define RTUGW_LINE_LINE_H

#include "config/config.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


typedef struct line_request line_request_t;
typedef struct line_origin line_origin_t;

/*
 * Where an answer goes. A front end embeds a line_origin_t in its own state
 * and names it in every request it submits. The contract, which the line
 * core keeps for every request it accepts:
 *   - answer() is called exactly once per request: data, the slave's
 *     exception, or a gateway exception; on the thread that feeds the line its
 *     events (the line thread by default), so it must not block (post to the loop or send to an actor);
 *   - wanted() (may be NULL: always) is asked, on that thread, just before a
 *     request would go on the line; false means its asker has gone, and
 *     the request is answered (and so accounted for) without line time.
 */
typedef struct line_origin_ops {
    const char *name;
    void (*answer)(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len);
    bool (*wanted)(line_origin_t *o, const line_request_t *req);
} line_origin_ops_t;

struct line_origin {
    const line_origin_ops_t *ops;
};

struct line_request {
    line_origin_t *origin;
    uint64_t conn_id;    /* the origin's own: TCP connection (index and generation) */
    uint64_t t_accept_ns;
    uint32_t seq;        /* the origin's own: TCP request number, poll read index */
    uint8_t slave;       /* 0: broadcast */
    uint8_t background;  /* queued behind interactive requests when tcp_first */
    uint8_t bus;         /* the bus it was submitted to (for the origin's bookkeeping) */
    uint8_t priority;    /* 1: a priority client's, queued before others (line/queue.c) */
    uint8_t once;        /* 1: one attempt, no retry after a timeout (a scan's probe, gateway/scan.c) */
    uint16_t pdu_len;
    /* The line's own (line_submit sets them): where the request's time went,
     * for the latency by cause in /metrics (line/metrics.c). */
    uint64_t t_line_ns;     /* submitted to the line */
    uint64_t t_sent_ns;     /* its first attempt on the wire; 0: not yet */
    uint64_t t_parked_ns;   /* parked since, for its slave's guard; 0: not parked */
    uint64_t guard_ns;      /* parked for guards between its attempts */
    uint64_t t_confirm_ns;  /* its first answer held back (I4 copy check, I5 confirmation); 0: none */
    uint8_t reasks;         /* asked again to confirm an answer, for any cause (discipline.c, REASKS_MAX) */
    uint8_t pdu[RTU_MAX_PDU];
};


/* ---- counters --------------------------------------------------------------- */

#define GW_LATENCY_BUCKETS 12
extern const double gw_latency_edges_ms[GW_LATENCY_BUCKETS]; /* last is +Inf */

typedef struct line_bus_metrics {
    atomic_uint_fast64_t requests, responses, exceptions, timeouts, retries;
    atomic_uint_fast64_t crc_errors, foreign_frames, noise_bytes, queue_full, dead_fast;
    atomic_uint_fast64_t broadcasts, unavailable, verify_mismatches, late_bytes_guarded;
    atomic_uint_fast64_t late_answers, ambiguous, gone_dropped, broadcast_refused;
    atomic_uint_fast64_t queue_depth, port_up, reopen_attempts;
    atomic_uint_fast64_t shaped, shape_refused, certified, misshapen;
    atomic_uint_fast64_t priority_holds, priority_hold_us;   /* line/queue.c: held for a priority master */
    atomic_uint_fast64_t poll_turns;   /* line/queue.c: a waiting poll went ahead of TCP requests (poll_share) */
    atomic_uint_fast64_t reconnect_holds;   /* I8: the line held quiet after a reconnect with answers owed */
    atomic_uint_fast64_t foreign_confirms, owed_forgotten;   /* I9 (line/foreign.c) */
    atomic_uint_fast64_t latency[GW_LATENCY_BUCKETS];
    atomic_uint_fast64_t latency_sum_us;
    /* Requests answered after going on the line, and their time by cause
     * (summed us): queued before the first attempt, parked for guards
     * between attempts, held for a confirmation (I4, I5), and the rest:
     * on the wire, waiting for answers and I3's quiet. */
    atomic_uint_fast64_t caused, queue_us, guard_us, confirm_us, wire_us;
} line_bus_metrics_t;

typedef struct line_slave_metrics {
    atomic_uint_fast64_t requests, responses, timeouts, exceptions, late_answers;
    atomic_uint_fast64_t dead;        /* 1 while backed off */
    atomic_uint_fast64_t last_ok_ns;  /* CLOCK_MONOTONIC of the last good answer */
    atomic_uint_fast64_t timeout_ms;  /* the response timeout in force (adaptive) */
} line_slave_metrics_t;

void gw_observe_latency(line_bus_metrics_t *m, uint64_t ns);
/* req, which went on the line, is answered now: its time by cause. */
void gw_observe_causes(line_bus_metrics_t *m, const line_request_t *req, uint64_t now);
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

/* ---- the core ------------------------------------------------------------------ */

typedef struct line line_t;

/* The timers a line asks its host for. */
enum line_timer {
    LINE_TIMER_DEADLINE = 0,   /* the attempt on the wire may time out (cancellable) */
    LINE_TIMER_KICK,           /* the line or a slave's guard is free again: start the next */
    LINE_TIMER_IDLE,           /* t3.5 after the last byte: a frame without a length rule ends */
};

/* What the core asks of its host. Every operation is called on the line's
 * own thread, from inside one of the event calls below. */
typedef struct line_env {
    void *ctx;
    /* Put one ADU on the wire now. */
    void (*write)(void *ctx, const uint8_t *adu, size_t len);
    /* A one-shot timer for time `at`: when it fires, the host calls
     * line_timer(line, kind, at, now). *id (may be NULL) gets a handle. */
    void (*arm)(void *ctx, enum line_timer kind, uint64_t at, uint64_t now, uint64_t *id);
    /* 0: the timer will not fire; else it may still (and is then ignored). */
    int (*cancel)(void *ctx, uint64_t id);
    /* 0: the host will call line_resolved once every byte heard before this
     * call has been fed to line_bytes; else no barrier could be sent. */
    int (*barrier)(void *ctx);
    /* Bytes heard (in the kernel, say) but not fed yet; 0 when none. */
    int (*unread)(void *ctx);
    /* A log line at CONFIG_LOG_* level (the core checks the level first). */
    void (*log)(void *ctx, int level, const char *msg);
    /* Every frame on the line, sent (tx) or heard; may be NULL. */
    void (*frame)(void *ctx, bool tx, const uint8_t *adu, size_t len);
    /* req's one answer is about to go to its origin; may be NULL. (The
     * daemon ends the cache's bracket of a write here.) */
    void (*answered)(void *ctx, const line_request_t *req);
} line_env_t;

/* What the core needs besides the configuration. */
typedef struct line_params {
    bool framed;               /* the transport hands up whole frames (ASCII, MBAP) */
    int log_level;             /* CONFIG_LOG_*: lines above it are not even formatted */
    double verify_rate;        /* share of frames checked against the reference decoder */
    router_thread_t *router;   /* the decode path per frame size; NULL: the fallback decoder */
} line_params_t;

/* The line of cfg->buses[index], its slaves set from cfg's devices on it. */
line_t *line_new(const config_t *cfg, unsigned index, const line_params_t *p, const line_env_t *env,
                 char *err, size_t errcap);
/* Frees what is left; requests still held are not answered (the daemon's
 * stop answers them first with line_port(false)). */
void line_free(line_t *l);

/* ---- events: each with the time it happens (CLOCK_MONOTONIC in the daemon) -- */

/* A request: exactly one answer comes to req->origin (maybe at once). */
void line_submit(line_t *l, const line_request_t *req, uint64_t now);
/* Bytes heard, the last of them at t_ns (t_ns <= now). */
void line_bytes(line_t *l, const uint8_t *data, size_t len, uint64_t t_ns, uint64_t now);
/* A timer armed through env->arm fired (or was late, or was cancelled too late). */
void line_timer(line_t *l, enum line_timer kind, uint64_t at, uint64_t now);
/* The barrier asked through env->barrier is back. */
void line_resolved(line_t *l, uint64_t now);
/* The port opened (up) or was lost. */
void line_port(line_t *l, bool up, uint64_t now);
/* A reload's keys for a running line: [bus] response_timeout_ms, retries,
 * gap_us, tcp_first, priority_hold_us and each slave's [device] timeout_ms,
 * dead_after, dead_backoff_ms and widen_reads. line_keys_new works them out
 * of cfg's bus index (any thread; NULL: out of memory); line_keys_apply
 * takes them on the line's thread, from the next question on (events.c says
 * what the question in flight keeps). */
/* A reload moved the line to another port or serial setting: while the
 * port is down, the line takes c (its name aside) for its framer and
 * timing. line_port_change_ok says whether c is such a change of run (the
 * same name, framing, mode, queue depth and copies; no listen:// port);
 * line_port_change refuses (-1) otherwise, or while the port is up. */
bool line_port_change_ok(const config_bus_t *run, const config_bus_t *c);
int line_port_change(line_t *l, const config_bus_t *c);
typedef struct line_keys line_keys_t;
line_keys_t *line_keys_new(const config_t *cfg, unsigned index);
void line_keys_apply(line_t *l, const line_keys_t *k);
void line_keys_free(line_keys_t *k);

/* ---- reading (any thread: relaxed counters) ------------------------------------ */

const config_bus_t *line_config(const line_t *l);
line_bus_metrics_t *line_metrics(line_t *l);
line_slave_metrics_t *line_slave_metrics(line_t *l, unsigned slave);   /* NULL past 247 */
/* The line's thread: requests queued or parked. */
unsigned line_queued(const line_t *l);

#endif
