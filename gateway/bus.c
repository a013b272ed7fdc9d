/*
 * gateway/bus.c -- the bus actor: one per serial line. This file is the
 * actor (its messages), its construction, and the driver it opens; the
 * queues are bus_queue.c and the line discipline, with the argument for why
 * no answer reaches the wrong request, is line.c.
 */
#include "gateway/bus_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const config_bus_t *bus_config(const gw_bus_t *bus) { return &bus->cfg; }
gw_bus_metrics_t *bus_metrics(gw_bus_t *bus) { return &bus->m; }

gw_slave_metrics_t *bus_slave_metrics(gw_bus_t *bus, unsigned slave)
{
    return slave < N_SLAVES ? &bus->sm[slave] : NULL;
}

void bus_describe(const gw_bus_t *bus, char *buf, size_t cap)
{
    driver_describe(bus->driver, buf, cap);
}

void bus_driver_stats(const gw_bus_t *bus, driver_stats_t *st)
{
    driver_get_stats(bus->driver, st);
}

/* How long past t3.5 the bus waits before it believes the line is quiet: the
 * silence is judged on a worker, and bytes the I/O thread has not handed over
 * yet must not make a frame look finished. */
#define IDLE_SLACK_NS 5000000ull

static void arm_idle(gw_bus_t *bus, uint64_t delay)
{
    if (bus->idle_pending)
        return;
    bus->idle_pending = true;
    actor_send_after(bus->gw->actors, bus->self, BUS_MSG_IDLE, NULL, 0, delay, NULL);
}

/* ---- the behaviour ------------------------------------------------------------- */

static void on_request(gw_bus_t *bus, const gw_request_t *req)
{
    uint64_t now = gw_now_ns();
    uint8_t fc = req->pdu[0];

    gw_count(&bus->m.requests);
    if (req->slave < N_SLAVES)
        gw_count(&bus->sm[req->slave].requests);
    if (!bus->port_up || req->slave >= N_SLAVES) {
        gw_count(&bus->m.unavailable);
        gw_answer_exception(req, MB_EX_PATH_UNAVAILABLE);
        return;
    }
    if (req->slave == 0 && fc != 5 && fc != 6 && fc != 15 && fc != 16 && fc != 22) {
        /* Only writes are broadcast: nothing answers a broadcast read. */
        gw_count(&bus->m.broadcast_refused);
        gw_answer_exception(req, MB_EX_ILLEGAL_FUNCTION);
        return;
    }
    if (bus_slave_dead(bus, req->slave, now)) {
        gw_count(&bus->m.dead_fast);
        gw_answer_exception(req, MB_EX_TARGET_FAILED);
        return;
    }
    unsigned qi = (req->background && bus->cfg.tcp_first) ? 1 : 0;
    if (!bus_queue_push_or_purge(bus, qi, req, now)) {
        gw_count(&bus->m.queue_full);
        gw_answer_exception(req, MB_EX_BUSY);
        return;
    }
    line_start_next(bus);
}

static void on_bytes(gw_bus_t *bus, const gw_bytes_t *b)
{
    rtu_framer_stats_t before, after;

    /* The line is not free while anyone talks: it rests for the gap after
     * the last byte heard, whoever sent it. */
    if (b->t_ns + bus->gap_ns > bus->t_line_free_ns)
        bus->t_line_free_ns = b->t_ns + bus->gap_ns;
    if (bus->pending)
        line_pending_bytes(bus, b->len);
    rtu_framer_get_stats(bus->framer, &before);
    rtu_framer_feed(bus->framer, b->data, b->len, b->t_ns);
    if (bus->framed)   /* the chunk is one whole frame (ASCII, MBAP): its end is the frame's */
        rtu_framer_idle(bus->framer, b->t_ns + bus->t35_ns);
    line_drain_frames(bus);
    rtu_framer_get_stats(bus->framer, &after);
    uint64_t noise = after.noise_bytes - before.noise_bytes;
    atomic_fetch_add_explicit(&bus->m.noise_bytes, noise, memory_order_relaxed);
    if (noise && bus->pending)
        bus->pending_doubtful = true;
    bus->last_chunk_ns = b->t_ns;
    /* A frame without a length rule ends with t3.5 of silence; a framer that
     * holds nothing has no use for it (rtu_framer_settled), and a poll's
     * answer, framed by its length, then costs no wake-up for the silence. */
    if (!bus->framed && !rtu_framer_settled(bus->framer))
        arm_idle(bus, bus->t35_ns + IDLE_SLACK_NS);
    line_start_next(bus);
}

static void on_idle(gw_bus_t *bus)
{
    uint64_t now = gw_now_ns(), quiet_at = bus->last_chunk_ns + bus->t35_ns + IDLE_SLACK_NS;
    bus->idle_pending = false;
    if (now < quiet_at) {
        arm_idle(bus, quiet_at - now);   /* bytes came since: look again later */
        return;
    }
    rtu_framer_idle(bus->framer, now - IDLE_SLACK_NS);
    line_drain_frames(bus);
    line_start_next(bus);
}

static void on_timer(gw_bus_t *bus, uint64_t fired)
{
    uint64_t now = gw_now_ns();
    if (fired == bus->timer_at_ns)
        bus->timer_at_ns = 0;
    if (!bus->busy || !bus->deadline_ns)
        return;
    if (now < bus->deadline_ns) {
        line_arm_timeout(bus, bus->deadline_ns);   /* a later attempt's deadline */
        return;
    }
    line_on_timeout(bus, now);
}

static void on_port(gw_bus_t *bus, bool up)
{
    bus->port_up = up;
    if (!up) {
        if (bus->pending) {
            bus->pending = false;   /* heard before the port went: still the answer */
            line_deliver(bus, &bus->cur, bus->pending_pdu, bus->pending_len);
        } else if (bus->busy) {
            gw_count(&bus->m.unavailable);
            gw_answer_exception(&bus->cur, MB_EX_PATH_UNAVAILABLE);
        }
        bus->busy = false;
        bus->deadline_ns = 0;
    }
    line_start_next(bus);
}

static void bus_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                          const void *data, size_t len)
{
    gw_bus_t *bus = state;
    uint64_t at;

    (void)sys;
    (void)self;
    switch (type) {
    case BUS_MSG_REQUEST: {
        /* Requests travel trimmed to their PDU; the queue keeps whole structs. */
        gw_request_t req;
        memset(&req, 0, sizeof req);
        memcpy(&req, data, len < sizeof req ? len : sizeof req);
        on_request(bus, &req);
        break;
    }
    case PORT_MSG_BYTES:
        on_bytes(bus, data);
        break;
    case BUS_MSG_IDLE:
        on_idle(bus);
        break;
    case BUS_MSG_TIMEOUT:
        memcpy(&at, data, sizeof at);
        on_timer(bus, at);
        break;
    case BUS_MSG_RESOLVE:
        line_on_resolve(bus);
        break;
    case BUS_MSG_KICK:
        memcpy(&at, data, sizeof at);
        if (at == bus->kick_at_ns)
            bus->kick_pending = false;
        line_start_next(bus);
        break;
    case PORT_MSG_STATE:
        on_port(bus, *(const uint8_t *)data != 0);
        break;
    default:
        break;
    }
}

int bus_submit(gw_bus_t *bus, const gw_request_t *req)
{
    return actor_send(bus->gw->actors, bus->self, BUS_MSG_REQUEST, req, offsetof(gw_request_t, pdu) + req->pdu_len);
}

/* ---- construction ---------------------------------------------------------------- */

driver_serial_config_t gw_serial_config(const config_bus_t *bus)
{
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    sc.path = bus->port[0] ? bus->port : bus->name;   /* only named in messages until opened */
    sc.baud = bus->baud;
    sc.data_bits = bus->data_bits;
    sc.parity = bus->parity;
    sc.stop_bits = bus->stop_bits;
    sc.rs485 = bus->rs485 == CONFIG_RS485_IOCTL ? DRIVER_RS485_KERNEL
             : bus->rs485 == CONFIG_RS485_RTS ? DRIVER_RS485_RTS_TOGGLE : DRIVER_RS485_OFF;
    sc.rts_on_send = !bus->rts_after_send;
    sc.delay_before_us = bus->rts_delay_before_us;
    sc.delay_after_us = bus->rts_delay_after_us;
    sc.rx_during_tx = bus->rx_during_tx;
    sc.echo_suppress = bus->echo_suppress;
    return sc;
}

/*
 * A device or tcp:// port with its framing: the serial driver or a TCP
 * client, under the ASCII or MBAP layer when the framing asks for one.
 */
driver_t *gw_bus_driver_new(const config_bus_t *bus, char *err, size_t errcap)
{
    driver_t *d;

    if (bus->port_kind == CONFIG_PORT_TCP) {
        driver_tcp_config_t tc;
        driver_tcp_defaults(&tc);
        tc.host = bus->tcp_host;
        tc.port = bus->tcp_port;
        tc.connect_timeout_ms = bus->connect_timeout_ms;
        d = driver_tcp_new(&tc, err, errcap);
    } else {
        driver_serial_config_t sc = gw_serial_config(bus);
        d = driver_serial_new(&sc, err, errcap);
    }
    if (d && bus->framing == CONFIG_FRAMING_ASCII)
        return driver_ascii_new(d, bus->char_timeout_ms, err, errcap);
    if (d && bus->framing == CONFIG_FRAMING_TCP)
        return driver_mbap_new(d, err, errcap);
    return d;
}

static driver_t *open_driver(gw_bus_t *bus, char *err, size_t errcap)
{
    const config_t *cfg = bus->gw->cfg;

    /* "sim" or "sim-paced", optionally ":1,2,3" (config/ validated the list):
     * the built-in simulator, serving the listed slaves, or else every device
     * configured on this bus. */
    if (bus->cfg.port_kind == CONFIG_PORT_SIM || bus->cfg.port_kind == CONFIG_PORT_SIM_PACED) {
        const char *list = config_bus_sim_slaves(&bus->cfg);
        driver_sim_config_t sc;
        driver_sim_defaults(&sc);
        if (list) {
            if (driver_sim_parse_slaves(list, &sc) != 0) {
                snprintf(err, errcap, "port = '%s': expected sim:SLAVE,SLAVE,...", bus->cfg.port);
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
        sc.pace = bus->cfg.port_kind == CONFIG_PORT_SIM_PACED;
        sc.live = true;
        return driver_sim_driver_new(&sc, err, errcap);
    }
    return gw_bus_driver_new(&bus->cfg, err, errcap);
}

/*
 * Time on the line, per transport. A serial line: t3.5 ends a frame
 * without a length rule, a byte takes its character time, the line rests
 * t3.5 between frames. ASCII: two characters a byte. A device server (RTU
 * over TCP): the answer still crosses its serial line at the configured
 * baud, but the stream to rtugw keeps no character timing, so the framer's
 * silence is frame_silence_ms. A Modbus TCP device: no serial line at all
 * (no wire time, no rest between frames unless gap_us asks for one); ASCII
 * and MBAP frames end by their own delimiters (the driver is framed).
 */
static void init_timing(gw_bus_t *bus)
{
    const config_bus_t *c = &bus->cfg;
    bool stream = c->port_kind == CONFIG_PORT_TCP && c->framing == CONFIG_FRAMING_RTU;

    bus->char_bits = rtu_char_bits(c->data_bits, c->parity, c->stop_bits);
    bus->wire_bits = c->framing == CONFIG_FRAMING_ASCII ? 2 * bus->char_bits
                   : c->framing == CONFIG_FRAMING_TCP ? 0 : bus->char_bits;
    bus->t35_ns = stream ? (uint64_t)c->frame_silence_ms * 1000000ull : rtu_t35_ns(c->baud, bus->char_bits);
    bus->gap_ns = c->gap_us ? (uint64_t)c->gap_us * 1000u
                : c->framing == CONFIG_FRAMING_TCP ? 0 : rtu_t35_ns(c->baud, bus->char_bits);
}

static void init_slaves(gw_bus_t *bus)
{
    const config_t *cfg = bus->gw->cfg;
    for (unsigned s = 0; s < N_SLAVES; s++)
        bus->slaves[s] = (slave_state_t){ .timeout_ms = bus->cfg.response_timeout_ms, .dead_after = 3,
                                          .backoff_ms = 10000 };
    for (unsigned i = 0; i < cfg->device_count; i++) {
        const config_device_t *d = &cfg->devices[i];
        if (d->bus != bus->index)
            continue;
        slave_state_t *s = &bus->slaves[d->slave];
        s->timeout_ms = d->timeout_ms ? d->timeout_ms : bus->cfg.response_timeout_ms;
        s->dead_after = d->dead_after;
        s->backoff_ms = d->dead_backoff_ms;
    }
    /* I4 is settled by a Modbus TCP device's transport: a copy of an earlier
     * answer carries that answer's transaction id, no longer in flight, so
     * the MBAP layer hands it up failing its CRC. Equal answers are real. */
    bool ids = bus->cfg.framing == CONFIG_FRAMING_TCP;
    for (unsigned s = 0; s < N_SLAVES; s++) {
        bus->slaves[s].base_timeout_ms = bus->slaves[s].timeout_ms;
        bus->slaves[s].copies = ids ? COPIES_GENUINE : COPIES_UNKNOWN;
        gw_set(&bus->sm[s].timeout_ms, bus->slaves[s].timeout_ms);
    }
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
    init_timing(bus);
    bus->verify_state = 0x9E3779B97F4A7C15ull + index;
    init_slaves(bus);
    for (unsigned q = 0; q < BUS_QUEUES; q++)
        bus->queue[q].slot = calloc(bus->cfg.queue_depth, sizeof(gw_request_t));
    bus->driver = open_driver(bus, err, errcap);
    bus->framed = bus->driver && driver_frames_whole(bus->driver);
    bool stream = bus->cfg.port_kind == CONFIG_PORT_TCP && bus->cfg.framing == CONFIG_FRAMING_RTU;
    rtu_framer_config_t fc = { .baud = bus->cfg.baud, .char_bits = bus->char_bits, .dir = RTU_DIR_RESPONSE,
                               .silence_ns = stream ? bus->t35_ns : 0 };
    bus->framer = rtu_framer_new(&fc);
    bus->router = router_thread_new(gw->router);
    if (!bus->queue[0].slot || !bus->queue[1].slot || !bus->framer || !bus->router || !bus->driver) {
        if (bus->driver || !*err)
            snprintf(err, errcap, "bus %s: out of memory", bus->cfg.name);
        bus_free(bus);
        return NULL;
    }
    return bus;
}

int bus_start(gw_bus_t *bus, gw_loop_t *loop)
{
    bus->port_up = false;   /* the port reports its state */
    int rc = bus->gw->cfg->buses_on_io_thread
                 ? actor_spawn_on(bus->gw->actors, loop_host(loop), bus_behaviour, bus, &bus->self)
                 : actor_spawn(bus->gw->actors, bus_behaviour, bus, &bus->self);
    if (rc != 0)
        return -1;
    char name[CONFIG_NAME_MAX + 8];
    snprintf(name, sizeof name, "bus %s", bus->cfg.name);
    bus->port = port_new(bus->gw, loop, bus->driver, name, bus->self, &bus->m);
    return bus->port ? 0 : -1;
}

void bus_free(gw_bus_t *bus)
{
    if (!bus)
        return;
    port_free(bus->port);
    driver_free(bus->driver);
    if (bus->router)
        router_thread_free(bus->router);
    rtu_framer_free(bus->framer);
    for (unsigned q = 0; q < BUS_QUEUES; q++)
        free(bus->queue[q].slot);
    for (unsigned s = 0; s < N_SLAVES; s++)
        free(bus->slaves[s].parked);
    free(bus);
}
