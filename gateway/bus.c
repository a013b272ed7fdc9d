/*
 * gateway/bus.c -- the bus actor: one per serial line.
 *
 * It owns the line's request queues, the one transaction in flight, its
 * retries and timeout, the framer that turns the I/O thread's timestamped
 * chunks into frames, and each slave's dead-slave back-off. The rules that
 * make it better than a naive master:
 *   - a response must match the request's slave and function (or its
 *     exception); anything else is counted and dropped, never delivered, so a
 *     late answer can never be handed to the next request;
 *   - exceptions end the transaction as soon as their five bytes are in
 *     (the framer predicts the length), not after the timeout;
 *   - after `dead_after` consecutive timeouts a slave is answered with 0x0B
 *     at once for `dead_backoff_ms`, so one dead PLC cannot stall the line;
 *   - between transactions the line rests for the configured gap (t3.5 by
 *     default), never a fixed pause per transaction.
 * Every request gets exactly one answer: data, the slave's exception, or a
 * gateway exception (0x06 queue full, 0x0A port down, 0x0B no response).
 */
#include "gateway/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUS_QUEUES 2   /* 0: TCP (or everything), 1: background polls */
#define BROADCAST_TURNAROUND_NS 20000000ull  /* slaves act on a broadcast before the next frame */

typedef struct slave_state {
    unsigned consecutive_timeouts;
    uint64_t dead_until_ns;
    unsigned timeout_ms;
    unsigned dead_after;
    unsigned backoff_ms;
} slave_state_t;

typedef struct request_ring {
    gw_request_t *slot;
    unsigned head, len;
} request_ring_t;

struct gw_bus {
    gw_t *gw;
    unsigned index;
    config_bus_t cfg;
    driver_t *driver;
    actor_ref_t self;
    rtu_framer_t *framer;
    router_thread_t *router;
    uint64_t t35_ns;
    uint64_t gap_ns;
    unsigned char_bits;
    request_ring_t queue[BUS_QUEUES];
    bool busy;
    bool port_up;
    bool kick_pending;
    gw_request_t cur;
    unsigned attempts;
    uint32_t txn;            /* bumps on every send and finish: a stale retry sees a different one */
    /*
     * At most one timeout timer and one silence timer per bus are pending,
     * whatever the request rate: a timer that fires checks the deadline in
     * force *now* and re-arms itself if that is later. Arming one per
     * attempt (they cannot be cancelled cheaply) kept rate x timeout timers
     * alive, each a heap node and a wake-up.
     */
    uint64_t deadline_ns;    /* the attempt in flight times out then; 0: none */
    uint64_t timer_at_ns;    /* the pending timeout timer fires then; 0: none */
    uint64_t last_chunk_ns;  /* arrival stamp of the last serial chunk */
    bool idle_pending;       /* a silence check is scheduled */
    /*
     * A read answer carries slave, function and byte count, not the
     * address: an answer to an attempt that timed out, arriving while a
     * later request of the same shape is in flight, would be taken for its
     * answer. So after a transaction in which any attempt timed out, the
     * line must be silent for one response timeout before a new request
     * goes out; bytes in that window are dropped (counted) and restart it.
     * Answers later than that are the documented limit.
     */
    bool tainted;            /* an attempt of the transaction in flight timed out */
    bool quarantine;         /* waiting for that silence */
    uint64_t guard_ns;
    uint64_t t_first_send_ns;
    uint64_t t_bus_free_ns;  /* the line must rest until then */
    uint64_t verify_state;
    slave_state_t slaves[248];
    gw_bus_metrics_t m;
    gw_slave_metrics_t sm[248];
};

actor_ref_t bus_ref(const gw_bus_t *bus) { return bus->self; }
driver_t *bus_driver(gw_bus_t *bus) { return bus->driver; }
const config_bus_t *bus_config(const gw_bus_t *bus) { return &bus->cfg; }
gw_bus_metrics_t *bus_metrics(gw_bus_t *bus) { return &bus->m; }

gw_slave_metrics_t *bus_slave_metrics(gw_bus_t *bus, unsigned slave)
{
    return slave < 248 ? &bus->sm[slave] : NULL;
}

/* At debug level, every frame on the line in hex: what an engineer with a
 * bus monitor would want to see, without a bus monitor. */
static void log_frame(const gw_bus_t *bus, const char *dir, const uint8_t *p, size_t n)
{
    char hex[3 * RTU_MAX_ADU + 1];
    if (bus->gw->cfg->log_level < CONFIG_LOG_DEBUG)
        return;
    for (size_t i = 0; i < n && i < RTU_MAX_ADU; i++)
        snprintf(hex + 3 * i, 4, "%02x ", p[i]);
    hex[n ? 3 * (n < RTU_MAX_ADU ? n : RTU_MAX_ADU) - 1 : 0] = 0;
    gw_log(bus->gw, CONFIG_LOG_DEBUG, "bus %s %s %s", bus->cfg.name, dir, hex);
}

static uint64_t wire_ns(const gw_bus_t *bus, size_t bytes)
{
    return (uint64_t)bytes * bus->char_bits * 1000000000ull / bus->cfg.baud;
}

/* ---- answers ------------------------------------------------------------- */

void gw_deliver(gw_t *gw, const gw_request_t *req, const uint8_t *pdu, size_t len)
{
    if (req->origin == ORIGIN_TCP) {
        io_post_tcp_answer(gw->io, req->conn_id, req->seq, pdu, len);
        return;
    }
    gw_answer_t a = { .conn_id = req->conn_id, .seq = req->seq, .pdu_len = (uint16_t)len };
    memcpy(a.pdu, pdu, len);
    actor_send(gw->actors, poller_ref(gw->poller), MSG_ANSWER, &a, offsetof(gw_answer_t, pdu) + len);
}

void bus_answer_exception(gw_t *gw, const gw_request_t *req, uint8_t code)
{
    uint8_t pdu[2] = { (uint8_t)(req->pdu[0] | 0x80), code };
    gw_deliver(gw, req, pdu, sizeof pdu);
}

/* ---- the queue ------------------------------------------------------------- */

static unsigned queued(const gw_bus_t *bus)
{
    return bus->queue[0].len + bus->queue[1].len;
}

static bool ring_push(gw_bus_t *bus, unsigned qi, const gw_request_t *req)
{
    request_ring_t *r = &bus->queue[qi];
    if (r->len == bus->cfg.queue_depth)
        return false;
    r->slot[(r->head + r->len) % bus->cfg.queue_depth] = *req;
    r->len++;
    return true;
}

static bool ring_pop(gw_bus_t *bus, gw_request_t *out)
{
    for (unsigned qi = 0; qi < BUS_QUEUES; qi++) {
        request_ring_t *r = &bus->queue[qi];
        if (r->len) {
            *out = r->slot[r->head];
            r->head = (r->head + 1) % bus->cfg.queue_depth;
            r->len--;
            return true;
        }
    }
    return false;
}

static bool slave_dead(gw_bus_t *bus, unsigned slave, uint64_t now)
{
    return slave && slave < 248 && bus->slaves[slave].dead_until_ns > now;
}

/* ---- transactions ----------------------------------------------------------- */

static void start_next(gw_bus_t *bus);

/* How long past t3.5 the bus waits before it believes the line is quiet: the
 * silence is judged on a worker, and bytes the I/O thread has not handed over
 * yet must not make a frame look finished. */
#define IDLE_SLACK_NS 5000000ull

static void arm_timeout(gw_bus_t *bus, uint64_t deadline)
{
    uint64_t now = gw_now_ns();

    bus->deadline_ns = deadline;
    if (bus->timer_at_ns && bus->timer_at_ns <= deadline)
        return;   /* the pending timer fires first and re-arms for this deadline */
    bus->timer_at_ns = deadline;
    actor_send_after(bus->gw->actors, bus->self, MSG_TIMEOUT, &deadline, sizeof deadline,
                     deadline > now ? deadline - now : 0, NULL);
}

static void arm_idle(gw_bus_t *bus, uint64_t delay)
{
    if (bus->idle_pending)
        return;
    bus->idle_pending = true;
    actor_send_after(bus->gw->actors, bus->self, MSG_IDLE, NULL, 0, delay, NULL);
}

static void finish(gw_bus_t *bus, uint64_t t_last_ns)
{
    bus->busy = false;
    bus->deadline_ns = 0;
    bus->txn++;
    bus->t_bus_free_ns = t_last_ns + bus->gap_ns;
    if (bus->tainted) {
        bus->tainted = false;
        bus->quarantine = true;
        bus->guard_ns = (uint64_t)bus->slaves[bus->cur.slave].timeout_ms * 1000000ull;
        if (gw_now_ns() + bus->guard_ns > bus->t_bus_free_ns)
            bus->t_bus_free_ns = gw_now_ns() + bus->guard_ns;
    }
    rtu_framer_reset(bus->framer);
    start_next(bus);
}

static void send_current(gw_bus_t *bus)
{
    uint8_t adu[RTU_MAX_ADU];
    int n = rtu_adu_from_pdu(bus->cur.slave, bus->cur.pdu, bus->cur.pdu_len, adu, sizeof adu);
    uint64_t now = gw_now_ns();

    if (n < 0) {   /* the TCP side validated the length: cannot happen, still answered */
        bus_answer_exception(bus->gw, &bus->cur, MB_EX_TARGET_FAILED);
        finish(bus, now);
        return;
    }
    rtu_framer_reset(bus->framer);
    log_frame(bus, "tx", adu, (size_t)n);
    io_post_serial_write(bus->gw->io, bus->index, adu, (size_t)n);
    bus->attempts++;
    bus->txn++;
    if (bus->attempts == 1)
        bus->t_first_send_ns = now;

    if (bus->cur.slave == 0) {
        /* Broadcast: nobody answers. A write is acknowledged with what a
         * slave would have echoed; the line rests while slaves act on it. */
        gw_count(&bus->m.broadcasts);
        uint8_t echo[5];
        size_t echo_len = bus->cur.pdu_len < 5 ? bus->cur.pdu_len : 5;
        memcpy(echo, bus->cur.pdu, echo_len);
        gw_deliver(bus->gw, &bus->cur, echo, echo_len);
        bus->busy = false;
        bus->txn++;
        bus->t_bus_free_ns = now + wire_ns(bus, (size_t)n) + bus->gap_ns + BROADCAST_TURNAROUND_NS;
        start_next(bus);
        return;
    }
    unsigned timeout_ms = bus->slaves[bus->cur.slave].timeout_ms;
    arm_timeout(bus, now + (uint64_t)timeout_ms * 1000000ull + wire_ns(bus, (size_t)n));
}

static void start_next(gw_bus_t *bus)
{
    uint64_t now = gw_now_ns();

    while (!bus->busy && queued(bus)) {
        if (!bus->port_up) {
            gw_request_t req;
            while (ring_pop(bus, &req)) {
                gw_count(&bus->m.unavailable);
                bus_answer_exception(bus->gw, &req, MB_EX_PATH_UNAVAILABLE);
            }
            break;
        }
        if (now < bus->t_bus_free_ns) {
            if (!bus->kick_pending) {
                bus->kick_pending = true;
                actor_send_after(bus->gw->actors, bus->self, MSG_KICK, NULL, 0,
                                 bus->t_bus_free_ns - now, NULL);
            }
            break;
        }
        ring_pop(bus, &bus->cur);
        if (slave_dead(bus, bus->cur.slave, now)) {
            /* Died while this request waited: answer at once, take the next. */
            gw_count(&bus->m.dead_fast);
            bus_answer_exception(bus->gw, &bus->cur, MB_EX_TARGET_FAILED);
            continue;
        }
        bus->busy = true;
        bus->attempts = 0;
        bus->quarantine = false;
        send_current(bus);
    }
    gw_set(&bus->m.queue_depth, queued(bus));
}

static void retry_or_fail(gw_bus_t *bus, uint64_t now, bool timed_out)
{
    slave_state_t *s = &bus->slaves[bus->cur.slave];

    bus->txn++;
    bus->deadline_ns = 0;   /* no deadline while waiting to retry */
    if (bus->attempts <= bus->cfg.retries) {
        /* Same request again once the line has rested: it stays in flight,
         * so nothing queued behind it can overtake it. */
        gw_count(&bus->m.retries);
        actor_send_after(bus->gw->actors, bus->self, MSG_RETRY, &bus->txn, sizeof bus->txn,
                         bus->gap_ns, NULL);
        return;
    }
    if (timed_out && s->dead_after && ++s->consecutive_timeouts >= s->dead_after) {
        s->dead_until_ns = now + (uint64_t)s->backoff_ms * 1000000ull;
        gw_set(&bus->sm[bus->cur.slave].dead, 1);
        gw_log(bus->gw, CONFIG_LOG_WARN, "bus %s: slave %u silent %u times; answering 0x0B at once for %u ms",
               bus->cfg.name, bus->cur.slave, s->consecutive_timeouts, s->backoff_ms);
    }
    bus_answer_exception(bus->gw, &bus->cur, MB_EX_TARGET_FAILED);
    finish(bus, now);
}

/*
 * Is this the answer to the request in flight? Same slave and function (or
 * its exception), and the shape the request asks for: the byte count its
 * quantity implies, or the exact echo of a write. A late answer to an
 * earlier, different request fails one of these and is dropped.
 */
static bool frame_matches(const gw_request_t *req, const rtu_envelope_t *env, const rtu_frame_t *f)
{
    const uint8_t *q = req->pdu;
    uint8_t fc = q[0];

    if (env->slave != req->slave)
        return false;
    if (env->function == (fc | 0x80))
        return true;
    if (env->function != fc)
        return false;
    unsigned qty = req->pdu_len >= 5 ? (unsigned)(q[3] << 8 | q[4]) : 0;
    switch (fc) {
    case 1: case 2:
        return f->adu[2] == (qty + 7) / 8;
    case 3: case 4: case 23:
        return f->adu[2] == 2 * qty;
    case 5: case 6: case 22:
        return f->len == req->pdu_len + 3u && memcmp(f->adu + 1, q, req->pdu_len) == 0;
    case 15: case 16:
        return memcmp(f->adu + 2, q + 1, 4) == 0;
    default:
        return true;   /* no shape known: slave and function must do */
    }
}

static void verify(gw_bus_t *bus, const rtu_frame_t *f, const rtu_envelope_t *env)
{
    /* xorshift: a share of frames checked against the reference decoder */
    bus->verify_state ^= bus->verify_state << 13;
    bus->verify_state ^= bus->verify_state >> 7;
    bus->verify_state ^= bus->verify_state << 17;
    if ((double)(bus->verify_state >> 11) * 0x1.0p-53 >= bus->gw->cfg->router.verify_rate)
        return;
    rtu_envelope_t ref;
    rtu_decode_reference(f->adu, f->len, &ref);
    if (memcmp(&ref, env, sizeof ref) != 0) {
        gw_count(&bus->m.verify_mismatches);
        gw_log(bus->gw, CONFIG_LOG_ERROR, "bus %s: decoder mismatch against reference on a %u-byte frame",
               bus->cfg.name, f->len);
    }
}

static void on_frame(gw_bus_t *bus, const rtu_frame_t *f)
{
    rtu_envelope_t env;
    uint64_t now = gw_now_ns();

    log_frame(bus, f->crc_ok ? "rx" : "rx (bad crc)", f->adu, f->len);
    if (!bus->busy) {
        gw_count(&bus->m.foreign_frames);   /* late or unsolicited: never delivered */
        return;
    }
    router_decode(bus->router, f->adu, f->len, &env);
    if (bus->gw->cfg->router.verify_rate > 0)
        verify(bus, f, &env);
    if (env.status != RTU_OK) {
        gw_count(&bus->m.crc_errors);
        gw_log(bus->gw, CONFIG_LOG_DEBUG, "bus %s: bad frame (%s, %u bytes)", bus->cfg.name,
               rtu_status_name((rtu_status_t)env.status), f->len);
        retry_or_fail(bus, now, false);
        return;
    }
    if (!frame_matches(&bus->cur, &env, f)) {
        gw_count(&bus->m.foreign_frames);
        return;
    }
    unsigned slave = bus->cur.slave;
    gw_count(&bus->m.responses);
    gw_count(&bus->sm[slave].responses);
    if (env.function & 0x80) {
        gw_count(&bus->m.exceptions);
        gw_count(&bus->sm[slave].exceptions);
    }
    bus->slaves[slave].consecutive_timeouts = 0;
    bus->slaves[slave].dead_until_ns = 0;
    gw_set(&bus->sm[slave].dead, 0);
    gw_set(&bus->sm[slave].last_ok_ns, now);
    gw_observe_latency(&bus->m, now - bus->t_first_send_ns);
    gw_deliver(bus->gw, &bus->cur, f->adu + 1, f->len - 3u);
    finish(bus, f->t_last_ns);
}

static void drain_frames(gw_bus_t *bus)
{
    rtu_frame_t f;
    while (rtu_framer_next(bus->framer, &f))
        on_frame(bus, &f);
}

/* ---- the behaviour ------------------------------------------------------------- */

static void on_request(gw_bus_t *bus, const gw_request_t *req)
{
    uint64_t now = gw_now_ns();

    gw_count(&bus->m.requests);
    if (req->slave < 248)
        gw_count(&bus->sm[req->slave].requests);
    if (!bus->port_up) {
        gw_count(&bus->m.unavailable);
        bus_answer_exception(bus->gw, req, MB_EX_PATH_UNAVAILABLE);
        return;
    }
    if (slave_dead(bus, req->slave, now)) {
        gw_count(&bus->m.dead_fast);
        gw_count(&bus->sm[req->slave].timeouts);
        bus_answer_exception(bus->gw, req, MB_EX_TARGET_FAILED);
        return;
    }
    unsigned qi = (req->origin == ORIGIN_POLL && bus->cfg.tcp_first) ? 1 : 0;
    if (!ring_push(bus, qi, req)) {
        gw_count(&bus->m.queue_full);
        bus_answer_exception(bus->gw, req, MB_EX_BUSY);
        return;
    }
    start_next(bus);
}

static void bus_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                          const void *data, size_t len)
{
    gw_bus_t *bus = state;
    uint32_t txn;

    (void)sys;
    (void)self;
    switch (type) {
    case MSG_REQUEST: {
        /* Requests travel trimmed to their PDU; the queue keeps whole structs. */
        gw_request_t req;
        memset(&req, 0, sizeof req);
        memcpy(&req, data, len < sizeof req ? len : sizeof req);
        on_request(bus, &req);
        break;
    }
    case MSG_BYTES: {
        const gw_bytes_t *b = data;
        rtu_framer_stats_t before, after;
        rtu_framer_get_stats(bus->framer, &before);
        rtu_framer_feed(bus->framer, b->data, b->len, b->t_ns);
        drain_frames(bus);
        rtu_framer_get_stats(bus->framer, &after);
        atomic_fetch_add_explicit(&bus->m.noise_bytes, after.noise_bytes - before.noise_bytes,
                                  memory_order_relaxed);
        /* A frame without a length rule ends with t3.5 of silence. */
        bus->last_chunk_ns = b->t_ns;
        if (bus->quarantine && !bus->busy && b->t_ns + bus->guard_ns > bus->t_bus_free_ns) {
            gw_count(&bus->m.late_bytes_guarded);
            bus->t_bus_free_ns = b->t_ns + bus->guard_ns;   /* silence starts over */
        }
        if (bus->busy)
            arm_idle(bus, bus->t35_ns + IDLE_SLACK_NS);
        break;
    }
    case MSG_IDLE: {
        uint64_t now = gw_now_ns(), quiet_at = bus->last_chunk_ns + bus->t35_ns + IDLE_SLACK_NS;
        bus->idle_pending = false;
        if (!bus->busy)
            break;
        if (now < quiet_at) {
            arm_idle(bus, quiet_at - now);   /* bytes came since: look again later */
            break;
        }
        rtu_framer_idle(bus->framer, now - IDLE_SLACK_NS);
        drain_frames(bus);
        break;
    }
    case MSG_TIMEOUT: {
        uint64_t fired, now = gw_now_ns();
        memcpy(&fired, data, sizeof fired);
        if (fired == bus->timer_at_ns)
            bus->timer_at_ns = 0;
        if (!bus->busy || !bus->deadline_ns)
            break;
        if (now < bus->deadline_ns) {
            arm_timeout(bus, bus->deadline_ns);   /* a later attempt's deadline */
            break;
        }
        bus->deadline_ns = 0;
        bus->tainted = true;
        gw_count(&bus->m.timeouts);
        gw_count(&bus->sm[bus->cur.slave].timeouts);
        retry_or_fail(bus, now, true);
        break;
    }
    case MSG_RETRY:
        memcpy(&txn, data, sizeof txn);
        if (bus->busy && txn == bus->txn)
            send_current(bus);
        break;
    case MSG_KICK:
        bus->kick_pending = false;
        start_next(bus);
        break;
    case MSG_PORT:
        bus->port_up = *(const uint8_t *)data != 0;
        if (!bus->port_up && bus->busy) {
            gw_count(&bus->m.unavailable);
            bus_answer_exception(bus->gw, &bus->cur, MB_EX_PATH_UNAVAILABLE);
            bus->busy = false;
            bus->deadline_ns = 0;
            bus->txn++;
        }
        start_next(bus);
        break;
    default:
        break;
    }
}

/* ---- construction ---------------------------------------------------------------- */

static driver_t *open_driver(gw_bus_t *bus, char *err, size_t errcap)
{
    const config_t *cfg = bus->gw->cfg;

    /* "sim" or "sim-paced", optionally ":1,2,3": the built-in simulator, serving
     * the listed slaves, or else every device configured on this bus. */
    const char *port = bus->cfg.port;
    bool paced = strncmp(port, "sim-paced", 9) == 0;
    if (paced || (strncmp(port, "sim", 3) == 0 && (port[3] == 0 || port[3] == ':'))) {
        const char *list = strchr(port, ':');
        driver_sim_config_t sc;
        driver_sim_defaults(&sc);
        if (list) {
            if (driver_sim_parse_slaves(list + 1, &sc) != 0) {
                snprintf(err, errcap, "port = '%s': expected sim:SLAVE,SLAVE,...", port);
                return NULL;
            }
        } else {
            sc.n_slaves = 0;
            for (unsigned i = 0; i < cfg->device_count && sc.n_slaves < DRIVER_SIM_MAX_SLAVES; i++)
                if (cfg->devices[i].bus == bus->index)
                    sc.slaves[sc.n_slaves++] = (uint8_t)cfg->devices[i].slave;
            if (sc.n_slaves == 0)
                driver_sim_parse_slaves("1,2,3", &sc);
        }
        sc.baud = bus->cfg.baud;
        sc.char_bits = bus->char_bits;
        sc.pace = paced;
        sc.live = true;
        return driver_sim_driver_new(&sc, err, errcap);
    }
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    sc.path = bus->cfg.port;
    sc.baud = bus->cfg.baud;
    sc.data_bits = bus->cfg.data_bits;
    sc.parity = bus->cfg.parity;
    sc.stop_bits = bus->cfg.stop_bits;
    sc.rs485 = bus->cfg.rs485 == CONFIG_RS485_IOCTL ? DRIVER_RS485_KERNEL
             : bus->cfg.rs485 == CONFIG_RS485_RTS ? DRIVER_RS485_RTS_TOGGLE : DRIVER_RS485_OFF;
    sc.rts_on_send = !bus->cfg.rts_after_send;
    sc.delay_before_us = bus->cfg.rts_delay_before_us;
    sc.delay_after_us = bus->cfg.rts_delay_after_us;
    sc.rx_during_tx = bus->cfg.rx_during_tx;
    sc.echo_suppress = bus->cfg.echo_suppress;
    return driver_serial_new(&sc, err, errcap);
}

gw_bus_t *bus_new(gw_t *gw, unsigned index, char *err, size_t errcap)
{
    gw_bus_t *bus = calloc(1, sizeof *bus);
    if (!bus) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    bus->gw = gw;
    bus->index = index;
    bus->cfg = gw->cfg->buses[index];
    bus->char_bits = rtu_char_bits(bus->cfg.data_bits, bus->cfg.parity, bus->cfg.stop_bits);
    bus->t35_ns = rtu_t35_ns(bus->cfg.baud, bus->char_bits);
    bus->gap_ns = bus->cfg.gap_us ? (uint64_t)bus->cfg.gap_us * 1000u : bus->t35_ns;
    bus->verify_state = 0x9E3779B97F4A7C15ull + index;
    for (unsigned s = 0; s < 248; s++)
        bus->slaves[s] = (slave_state_t){ .timeout_ms = bus->cfg.response_timeout_ms,
                                          .dead_after = 3, .backoff_ms = 10000 };
    for (unsigned i = 0; i < gw->cfg->device_count; i++) {
        const config_device_t *d = &gw->cfg->devices[i];
        if (d->bus != index)
            continue;
        slave_state_t *s = &bus->slaves[d->slave];
        s->timeout_ms = d->timeout_ms ? d->timeout_ms : bus->cfg.response_timeout_ms;
        s->dead_after = d->dead_after;
        s->backoff_ms = d->dead_backoff_ms;
    }
    for (unsigned q = 0; q < BUS_QUEUES; q++)
        bus->queue[q].slot = calloc(bus->cfg.queue_depth, sizeof(gw_request_t));
    rtu_framer_config_t fc = { .baud = bus->cfg.baud, .char_bits = bus->char_bits, .dir = RTU_DIR_RESPONSE };
    bus->framer = rtu_framer_new(&fc);
    bus->router = router_thread_new(gw->router);
    bus->driver = open_driver(bus, err, errcap);
    if (!bus->queue[0].slot || !bus->queue[1].slot || !bus->framer || !bus->router || !bus->driver) {
        if (bus->driver || !*err)
            snprintf(err, errcap, "bus %s: out of memory", bus->cfg.name);
        bus_free(bus);
        return NULL;
    }
    return bus;
}

int bus_start(gw_bus_t *bus)
{
    bus->port_up = false;   /* the I/O thread reports the port's state */
    return actor_spawn(bus->gw->actors, bus_behaviour, bus, &bus->self);
}

void bus_free(gw_bus_t *bus)
{
    if (!bus)
        return;
    driver_free(bus->driver);
    if (bus->router)
        router_thread_free(bus->router);
    rtu_framer_free(bus->framer);
    for (unsigned q = 0; q < BUS_QUEUES; q++)
        free(bus->queue[q].slot);
    free(bus);
}
