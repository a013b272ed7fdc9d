/*
 * gateway/bus.c -- the bus actor: one per serial line, the host of its line
 * core (line/line.h). This file is the actor (its messages, turned into the
 * core's events with the clock's time), the core's operations carried out
 * (port writes, timers, the barrier, logging), and the driver it opens. The
 * line discipline, with the argument for why no answer reaches the wrong
 * request, is line/discipline.c.
 */
#include "gateway/wiring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/*
 * The bus's state: the line core and what hosts it. Its events come as
 * messages to the bus actor, stamped with the clock when they are handled;
 * its actions are carried out here (a write through the port, a timer as a
 * delayed message to itself, the barrier as a message to itself: the
 * mailbox is FIFO, so when it comes back every chunk the port sent before
 * it has been fed).
 */
struct gw_bus {
    gw_t *gw;
    unsigned index;
    driver_t *driver;             /* the I/O thread's (describe, stats): a reload sets it */
    driver_t *wire;               /* the bus actor's (env_unread): set by BUS_MSG_PORT */
    gw_port_t *port;
    actor_ref_t self;
    router_thread_t *router;
    line_t *line;
    gw_listen_t *listen;          /* mode = listen: the port's bytes go here, not to the line */
    uint64_t listen_due;          /* the listen look pending (lazy, like the line's timers); 0: none */
    gw_timeline_t *timeline;      /* NULL unless RTUGW_TIMELINE (timeline.c) */
    /* A bus restarted in place by a reload (bus_restart.c has the argument). */
    gw_loop_t *home;              /* its port's loop (bus_start) */
    atomic_bool retiring;         /* set by bus_retire (I/O thread); read where requests are sent */
    atomic_bool port_ready;       /* bus->port is set (release, on home); bus_port_change needs it */
    atomic_uint_fast64_t refused; /* requests refused 0x0B while it retired (any thread) */
    void (*closed)(gw_bus_t *bus);/* bus_retire's: its port closed, on home */
    bool removed;                 /* I/O thread: retired for good, no successor (bus_remove) */
    line_request_t *held;         /* a restarted bus's requests until its port says up or down */
    unsigned held_n, held_cap;    /* held_cap 0: nothing held (a bus made at the start) */
    bool holding;
};

enum bus_msg { BUS_MSG_REQUEST = 1, BUS_MSG_TIMER, BUS_MSG_RESOLVE, BUS_MSG_LISTEN, BUS_MSG_KEYS, BUS_MSG_PORT,
               BUS_MSG_HOLD_END };

typedef struct bus_timer_msg {
    uint64_t at;
    uint32_t kind;   /* enum line_timer */
} bus_timer_msg_t;

const config_bus_t *bus_config(const gw_bus_t *bus) { return line_config(bus->line); }
unsigned bus_slot(const gw_bus_t *bus) { return bus->index; }
gw_t *bus_gw(const gw_bus_t *bus) { return bus->gw; }
gw_loop_t *bus_home(const gw_bus_t *bus) { return bus->home; }
bool bus_retiring(const gw_bus_t *bus) { return atomic_load_explicit(&bus->retiring, memory_order_acquire); }
uint64_t bus_refused(const gw_bus_t *bus) { return gw_read(&bus->refused); }
const gw_listen_t *bus_listen(const gw_bus_t *bus) { return bus->listen; }
line_bus_metrics_t *bus_metrics(gw_bus_t *bus) { return line_metrics(bus->line); }

line_slave_metrics_t *bus_slave_metrics(gw_bus_t *bus, unsigned slave)
{
    return line_slave_metrics(bus->line, slave);
}

/* A retired bus whose successor could not be made has no driver (bus_drop_driver). */
void bus_describe(const gw_bus_t *bus, char *buf, size_t cap)
{
    if (bus->driver)
        driver_describe(bus->driver, buf, cap);
    else
        snprintf(buf, cap, "retired");
}

void bus_driver_stats(const gw_bus_t *bus, driver_stats_t *st)
{
    if (bus->driver)
        driver_get_stats(bus->driver, st);
    else
        memset(st, 0, sizeof *st);
}

/* ---- the line core's operations ----------------------------------------------- */

static void env_write(void *ctx, const uint8_t *adu, size_t len)
{
    gw_bus_t *bus = ctx;
    port_write(bus->port, adu, len);
}

static void env_arm(void *ctx, enum line_timer kind, uint64_t at, uint64_t now, uint64_t *id)
{
    gw_bus_t *bus = ctx;
    bus_timer_msg_t m = { .at = at, .kind = (uint32_t)kind };
    actor_timer_t t = 0;
    actor_send_after(bus->gw->actors, bus->self, BUS_MSG_TIMER, &m, sizeof m, at > now ? at - now : 0,
                     id ? &t : NULL);
    if (id)
        *id = t;
}

static int env_cancel(void *ctx, uint64_t id)
{
    gw_bus_t *bus = ctx;
    return id ? actor_timer_cancel(bus->gw->actors, id) : -1;
}

static int env_barrier(void *ctx)
{
    gw_bus_t *bus = ctx;
    return actor_send(bus->gw->actors, bus->self, BUS_MSG_RESOLVE, NULL, 0);
}

/* Bytes in the kernel that the port has not read yet: the port's read event
 * brings them, and the line looks again then. */
static int env_unread(void *ctx)
{
    gw_bus_t *bus = ctx;
    int unread = 0;
    return ioctl(driver_fd(bus->wire), FIONREAD, &unread) == 0 ? unread : 0;
}

static void env_log(void *ctx, int level, const char *msg)
{
    gw_bus_t *bus = ctx;
    gw_log(bus->gw, level, "%s", msg);
}

static void env_frame(void *ctx, bool tx, const uint8_t *adu, size_t len)
{
    gw_bus_t *bus = ctx;
    gw_frame_seen(bus->gw, bus->index, tx, adu, len);
}

/* The cache's bracket of a write (begun by gw_submit) ends as its answer
 * leaves the line, whatever the answer; a no-op for reads. */
static void env_answered(void *ctx, const line_request_t *req)
{
    gw_bus_t *bus = ctx;
    cache_write_end(bus->gw, bus->index, req->slave, req->pdu, req->pdu_len);
    if (bus->timeline && bus->port) {
        uint64_t t[TIMELINE_STAMPS] = { req->t_accept_ns, req->t_line_ns };
        port_stamps(bus->port, &t[2], &t[3], &t[4]);
        t[5] = gw_now_ns();
        timeline_record(bus->timeline, t);
    }
}

/* ---- the actor ------------------------------------------------------------------ */

/*
 * A listen-only bus (gateway/listen.c has the argument): the port's bytes go to
 * the listen engine, and its line core is never told the port is up, so every
 * request that reaches this bus (a Modbus TCP client's, a tag write) is answered
 * 0x0A (gateway path unavailable) at once by the line's own rule for a port that
 * is down, and counted there (unavailable); nothing is ever written. At most one
 * look is pending; one that comes early finds a later due time and waits again.
 */
static void listen_arm(gw_bus_t *bus, uint64_t at, uint64_t now)
{
    if (!at || (bus->listen_due && bus->listen_due <= at))
        return;
    bus->listen_due = at;
    actor_send_after(bus->gw->actors, bus->self, BUS_MSG_LISTEN, &at, sizeof at, at > now ? at - now : 0, NULL);
}

static bool listen_message(gw_bus_t *bus, uint32_t type, const void *data, uint64_t now)
{
    if (type == PORT_MSG_BYTES) {
        const gw_bytes_t *b = data;
        listen_arm(bus, listen_bytes(bus->listen, b->data, b->len, b->t_ns, now), now);
        return true;
    }
    if (type == BUS_MSG_LISTEN) {
        uint64_t at;
        memcpy(&at, data, sizeof at);
        if (at != bus->listen_due)
            return true;   /* superseded by an earlier look */
        bus->listen_due = 0;
        listen_arm(bus, listen_idle(bus->listen, now), now);
        return true;
    }
    return type == PORT_MSG_STATE;   /* the line stays down: requests get 0x0A */
}

/* BUS_MSG_PORT's payload (bus_port_change): the line's new settings, the
 * driver the port now reads, and the one it read before, to free. */
typedef struct bus_port {
    config_bus_t cfg;
    driver_t *wire, *old;
} bus_port_t;

/*
 * A restarted bus holds what comes before its port's first word (bus_restart.c):
 * then the line hears the port (up, or down: 0x0A, its rule for a port that is
 * down) and takes them in their order. At most queue_depth are held (the rest
 * go to the line at once, which answers 0x0A while its port is down);
 * BUS_MSG_HOLD_END bounds the wait. A listen-only bus holds nothing: its
 * line is never up.
 */
static void release_held(gw_bus_t *bus, uint64_t now)
{
    bus->holding = false;
    for (unsigned i = 0; i < bus->held_n; i++)
        line_submit(bus->line, &bus->held[i], now);
    bus->held_n = 0;
}

/* Retired (ACTOR_STOPPED: every request sent before the stop has reached
 * the line): the line hears its port go, so the question in flight and every
 * queued one are answered 0x0A by the line's rule (counted there as
 * unavailable), as on any port lost. None is left without its answer. */
static void retire_line(gw_bus_t *bus, uint64_t now)
{
    line_bus_metrics_t *m = line_metrics(bus->line);
    uint64_t before = gw_read(&m->unavailable);
    if (bus->holding)
        release_held(bus, now);
    line_port(bus->line, false, now);
    gw_log(bus->gw, CONFIG_LOG_INFO, "bus %s: retired by a reload: %llu requests in flight or queued answered 0x0A",
           bus_config(bus)->name, (unsigned long long)(gw_read(&m->unavailable) - before));
}

/* On the port's loop, after the actor stopped: nothing reads the port or
 * sends it a write any more (writes are posted to this loop, in order, before
 * this), so it is freed here; the driver stays for the I/O thread's readers
 * until the bus is replaced there (bus_restart.c). */
static void close_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_bus_t *bus = ctx;
    (void)a, (void)b, (void)data, (void)len;
    port_free(bus->port);
    bus->port = NULL;
    bus->closed(bus);
}

static void bus_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                          const void *data, size_t len)
{
    gw_bus_t *bus = state;
    uint64_t now = gw_now_ns();

    (void)sys;
    (void)self;
    if (bus->listen && listen_message(bus, type, data, now))
        return;
    switch (type) {
    case BUS_MSG_REQUEST: {
        /* Requests travel trimmed to their PDU; the queue keeps whole structs. */
        line_request_t req;
        memset(&req, 0, sizeof req);
        memcpy(&req, data, len < sizeof req ? len : sizeof req);
        if (bus->holding && bus->held_n < bus->held_cap)
            bus->held[bus->held_n++] = req;
        else
            line_submit(bus->line, &req, now);
        break;
    }
    case BUS_MSG_HOLD_END:
        if (bus->holding)
            release_held(bus, now);
        break;
    case ACTOR_STOPPED:   /* a stop: only a retired bus's (bus_retire) has more to do */
        if (!atomic_load_explicit(&bus->retiring, memory_order_relaxed))
            break;
        retire_line(bus, now);
        if (loop_post(bus->home, close_here, bus, 0, 0, NULL, 0) != 0)
            gw_log(bus->gw, CONFIG_LOG_ERROR, "bus %s: retired: out of memory; its port stays open until a restart",
                   bus_config(bus)->name);
        break;
    case PORT_MSG_BYTES: {
        const gw_bytes_t *b = data;
        line_bytes(bus->line, b->data, b->len, b->t_ns, now);
        break;
    }
    case BUS_MSG_TIMER: {
        bus_timer_msg_t m;
        memcpy(&m, data, sizeof m);
        line_timer(bus->line, (enum line_timer)m.kind, m.at, now);
        break;
    }
    case BUS_MSG_RESOLVE:
        line_resolved(bus->line, now);
        break;
    case PORT_MSG_STATE:
        line_port(bus->line, *(const uint8_t *)data != 0, now);
        if (bus->holding)
            release_held(bus, now);
        break;
    case BUS_MSG_PORT: {
        bus_port_t *c;
        if (len != sizeof c)
            break;
        memcpy(&c, data, sizeof c);
        if (line_port_change(bus->line, &c->cfg) != 0)
            gw_log(bus->gw, CONFIG_LOG_ERROR, "bus %s: the line cannot take its new port settings",
                   c->cfg.name);
        bus->wire = c->wire;
        driver_free(c->old);
        free(c);
        break;
    }
    case BUS_MSG_KEYS: {
        line_keys_t *k;
        if (len != sizeof k)
            break;
        memcpy(&k, data, sizeof k);
        line_keys_apply(bus->line, k);
        line_keys_free(k);
        break;
    }
    default:
        break;
    }
}

int bus_submit(gw_bus_t *bus, const line_request_t *req)
{
    if (actor_send(bus->gw->actors, bus->self, BUS_MSG_REQUEST, req, offsetof(line_request_t, pdu) + req->pdu_len) == 0)
        return 0;
    if (!atomic_load_explicit(&bus->retiring, memory_order_acquire))
        return MB_EX_PATH_UNAVAILABLE;
    gw_count(&bus->refused);   /* logged when the new bus takes its place */
    return MB_EX_TARGET_FAILED;
}

/*
 * The keys a reload may change on a running line (line/line.h,
 * line_keys_t): worked out here from cfg, on the reload's thread, and sent
 * to the bus actor as a message that carries the table, so the line's state
 * changes on the line's own thread, between questions. The actor frees the
 * table; so does this function when the message cannot be sent.
 */
int bus_set_keys(gw_bus_t *bus, const config_t *cfg)
{
    line_keys_t *k = line_keys_new(cfg, bus->index);
    if (!k)
        return -1;
    if (actor_send(bus->gw->actors, bus->self, BUS_MSG_KEYS, &k, sizeof k) != 0) {
        line_keys_free(k);
        return -1;
    }
    return 0;
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
 * client, under the ASCII or MBAP layer when the framing asks for one. A
 * udp:// port is Modbus UDP, its MBAP in its own driver (datagrams). A
 * listen:// port shares its listening socket with the other buses on its
 * address through ports (the gateway's; NULL: a socket of its own).
 */
static driver_t *bus_driver_new(const config_bus_t *bus, driver_dialin_ports_t *ports, char *err, size_t errcap)
{
    driver_t *d;

    if (bus->port_kind == CONFIG_PORT_UDP) {
        driver_tcp_config_t uc;
        driver_tcp_defaults(&uc);
        uc.host = bus->tcp_host;
        uc.port = bus->tcp_port;
        uc.connect_timeout_ms = bus->connect_timeout_ms;
        return driver_udp_new(&uc, err, errcap);
    }
    if (bus->port_kind == CONFIG_PORT_LISTEN) {
        driver_dialin_config_t dc = { .ports = ports, .addr = bus->tcp_host, .port = bus->tcp_port,
                                      .register_bytes = bus->dial_register, .register_len = bus->dial_register_len,
                                      .heartbeat = bus->dial_heartbeat, .heartbeat_len = bus->dial_heartbeat_len,
                                      .register_timeout_ms = bus->connect_timeout_ms };
        d = driver_dialin_new(&dc, err, errcap);
    } else if (bus->port_kind == CONFIG_PORT_TCP) {
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

driver_t *gw_bus_driver_new(const config_bus_t *bus, char *err, size_t errcap)
{
    return bus_driver_new(bus, NULL, err, errcap);
}

static driver_t *open_driver(gw_bus_t *bus, const config_t *cfg, char *err, size_t errcap)
{
    const config_bus_t *c = &cfg->buses[bus->index];

    /* "sim" or "sim-paced", optionally ":1,2,3" (config/ validated the list):
     * the built-in simulator, serving the listed slaves, or else every device
     * configured on this bus. */
    if (c->port_kind == CONFIG_PORT_SIM || c->port_kind == CONFIG_PORT_SIM_PACED) {
        const char *list = config_bus_sim_slaves(c);
        driver_sim_config_t sc;
        driver_sim_defaults(&sc);
        if (list) {
            if (driver_sim_parse_slaves(list, &sc) != 0) {
                snprintf(err, errcap, "port = '%s': expected sim:SLAVE,SLAVE,...", c->port);
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
        sc.baud = c->baud;
        sc.char_bits = rtu_char_bits(c->data_bits, c->parity, c->stop_bits);
        sc.pace = c->port_kind == CONFIG_PORT_SIM_PACED;
        sc.live = true;
        return driver_sim_driver_new(&sc, err, errcap);
    }
    return bus_driver_new(c, bus->gw->dialin_ports, err, errcap);
}

gw_bus_t *bus_new(gw_t *gw, unsigned index, char *err, size_t errcap)
{
    return bus_new_from(gw, gw->cfg, index, err, errcap);
}

/* cfg: the configuration the bus is made from, its section and the devices
 * on it (a simulator's slaves, the line's per-slave keys). gw->cfg but for
 * a bus added live (bus_add), which is made before the running copy takes
 * its devices: it takes them from the new file, as a fresh start would.
 * Only read here (the driver and the line copy what they keep). */
gw_bus_t *bus_new_from(gw_t *gw, const config_t *cfg, unsigned index, char *err, size_t errcap)
{
    gw_bus_t *bus = calloc(1, sizeof *bus);
    if (!bus) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    bus->gw = gw;
    bus->index = index;
    bus->driver = bus->wire = open_driver(bus, cfg, err, errcap);
    bus->router = router_thread_new(gw->router);
    if (!bus->driver || !bus->router) {
        if (bus->driver || !*err)
            snprintf(err, errcap, "bus %s: out of memory", gw->cfg->buses[index].name);
        bus_free(bus);
        return NULL;
    }
    line_params_t p = { .framed = driver_frames_whole(bus->driver), .log_level = gw->cfg->log_level,
                        .verify_rate = gw->cfg->router.verify_rate, .router = bus->router };
    line_env_t env = { .ctx = bus, .write = env_write, .arm = env_arm, .cancel = env_cancel,
                       .barrier = env_barrier, .unread = env_unread, .log = env_log, .frame = env_frame,
                       .answered = env_answered };
    if (!(bus->line = line_new(cfg, index, &p, &env, err, errcap))) {
        bus_free(bus);
        return NULL;
    }
    bus->timeline = timeline_open(gw, index);
    if (gw->cfg->buses[index].listen) {
        driver_set_read_only(bus->driver);
        if (!(bus->listen = listen_new(gw, index, bus->router, err, errcap))) {
            bus_free(bus);
            return NULL;
        }
    }
    return bus;
}

/*
 * Paced reads (port.c) where the wire sets the pace: an RTU line at its
 * baud (a device, or the simulator paced at it), whose reads bring the
 * answer alone. Not a device server (the network, not the baud, paces its
 * stream), nor ASCII or MBAP (framed by their own delimiters), nor a line
 * whose own request comes back to the port (rx_during_tx without
 * echo_suppress: the echo would be taken for the answer's first bytes).
 */
static uint64_t pace_char_ns(const config_bus_t *c)
{
    bool wire = c->port_kind == CONFIG_PORT_DEVICE || c->port_kind == CONFIG_PORT_SIM_PACED;
    if (!wire || c->framing != CONFIG_FRAMING_RTU || !c->baud || (c->rx_during_tx && !c->echo_suppress))
        return 0;
    return (uint64_t)rtu_char_bits(c->data_bits, c->parity, c->stop_bits) * 1000000000ull / c->baud;
}

/*
 * Which thread a bus lives on (issue 45). The line thread
 * (docs/decisions/line-thread.md) keeps front-end work from running in front
 * of a line's reads and timers, which matters where the wire has timing: t3.5
 * and the rest between frames, an RTU answer's bytes framed by their silence
 * (a serial port, RTU over TCP through a device server, a dial-in DTU). A
 * Modbus TCP or UDP device (port tcp:// or udp://, framing = tcp) has
 * none: its frames end by their own length, its gap is 0, and its only timer
 * is the response timeout (hundreds of ms), which a front end's stall of
 * milliseconds does not reach; nor does a late read split or corrupt an MBAP
 * frame. There the line thread bought nothing and cost two thread hand-offs
 * per request (I/O -> line -> I/O thread, two wake-ups): one client on a
 * Modbus TCP device got 0.79 of the build before the line thread (7e7f0d0),
 * and 0.99 with the bus back on the I/O thread, where every bus was before
 * (`rtugw bench hop`, docs/bench-wire.md). Its answer then reaches the
 * client's connection without leaving the thread (loop_post runs at once
 * there, from the host event, never inside another callback). A listen://
 * bus stays where it was even with framing = tcp: its listening socket is
 * shared with the other buses on its address (driver_dialin_ports_t), which
 * live on the line thread.
 */
static gw_loop_t *bus_loop_for(const gw_bus_t *bus, gw_loop_t *loop)
{
    const config_bus_t *c = bus_config(bus);
    bool no_wire = c->framing == CONFIG_FRAMING_TCP && (c->port_kind == CONFIG_PORT_TCP || c->port_kind == CONFIG_PORT_UDP);
    return no_wire ? bus->gw->loop : loop;
}

/* The bus actor, on loop's host or on the workers. */
static int bus_spawn(gw_bus_t *bus, gw_loop_t *loop)
{
    return bus->gw->cfg->buses_on_io_thread
               ? actor_spawn_on(bus->gw->actors, loop_host(loop), bus_behaviour, bus, &bus->self)
               : actor_spawn(bus->gw->actors, bus_behaviour, bus, &bus->self);
}

/* The bus's port on its home loop, published to bus_port_change (port_ready).
 * On home's thread, or before that thread runs. */
static bool bus_open_port(gw_bus_t *bus)
{
    char name[CONFIG_NAME_MAX + 8];
    snprintf(name, sizeof name, "bus %s", bus_config(bus)->name);
    bus->port = port_new_paced(bus->gw, bus->home, bus->driver, name, bus->self, line_metrics(bus->line),
                               pace_char_ns(bus_config(bus)));
    atomic_store_explicit(&bus->port_ready, bus->port != NULL, memory_order_release);
    return bus->port != NULL;
}

int bus_start(gw_bus_t *bus, gw_loop_t *loop)
{
    bus->home = bus_loop_for(bus, loop);
    if (bus_spawn(bus, bus->home) != 0)
        return -1;
    return bus_open_port(bus) ? 0 : -1;
}

/* bus_start_in_place's port, made on its own loop (its events are that
 * loop's: made from the I/O thread while the line thread runs, they would
 * race it). */
static void open_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_bus_t *bus = ctx;
    (void)a, (void)b, (void)data, (void)len;
    if (!bus_open_port(bus))
        gw_log(bus->gw, CONFIG_LOG_ERROR, "bus %s: cannot open its port (out of memory); it stays down until a "
               "restart", bus_config(bus)->name);
}

int bus_start_in_place(gw_bus_t *bus, gw_loop_t *loop)
{
    const config_bus_t *c = bus_config(bus);
    loop = bus_loop_for(bus, loop);   /* its new keys say where: a framing change may move it */
    bus->home = loop;
    bus->held_cap = c->listen ? 0 : c->queue_depth;
    if (bus->held_cap && !(bus->held = calloc(bus->held_cap, sizeof *bus->held)))
        return -1;
    bus->holding = bus->held_cap != 0;
    if (bus_spawn(bus, loop) != 0)
        return -1;
    if (bus->holding)
        actor_send_after(bus->gw->actors, bus->self, BUS_MSG_HOLD_END, NULL, 0,
                         (uint64_t)c->response_timeout_ms * 1000000ull, NULL);
    if (loop_post(loop, open_here, bus, 0, 0, NULL, 0) != 0)
        gw_log(bus->gw, CONFIG_LOG_ERROR, "bus %s: cannot open its port (out of memory); it stays down until a "
               "restart", c->name);
    return 0;
}

bool bus_removed(const gw_bus_t *bus) { return bus->removed; }

void bus_retire(gw_bus_t *bus, void (*closed)(gw_bus_t *bus), bool removed)
{
    bus->removed |= removed;
    if (bus_retiring(bus))
        return;   /* on its way already: closed stays the first one's */
    bus->closed = closed;
    atomic_store_explicit(&bus->retiring, true, memory_order_release);
    actor_stop(bus->gw->actors, bus->self);
}

/* Phase two of a restart (bus_restart.c), on the I/O thread: the port is
 * closed and the actor stopped, so nothing but this thread's readers
 * (bus_describe, bus_driver_stats) reaches the driver. A dial-in bus's
 * leaves its hub here, before the new bus joins it. */
void bus_drop_driver(gw_bus_t *bus)
{
    driver_free(bus->driver);
    bus->driver = bus->wire = NULL;
}

/*
 * A reload moved the bus to another port or serial setting
 * (line_port_change_ok: the same name, framing, mode and queue depth). On
 * the I/O thread: a driver for the new port, and the port told to swap to
 * it (port_swap): the line hears the port go down (its question in flight
 * answered 0x0A, as on any loss), takes the new settings (BUS_MSG_PORT,
 * before any byte of the new port), and hears it come up. Requests that
 * come meanwhile get 0x0A at once, as on any port that is down; nothing
 * waits on a port that may not open. The other buses are not touched.
 */
/* The line's rule, for daemon/'s reload, which asks it before it decides
 * what waits for a restart and may not call line/ itself. */
bool bus_port_change_ok(const config_bus_t *run, const config_bus_t *c)
{
    return line_port_change_ok(run, c);
}

int bus_port_change(gw_bus_t *bus, const config_t *fresh, char *err, size_t errcap)
{
    const config_bus_t *c = &fresh->buses[bus->index];
    if (!atomic_load_explicit(&bus->port_ready, memory_order_acquire) || bus_retiring(bus) || !bus->port ||
        bus->listen || !line_port_change_ok(&bus->gw->cfg->buses[bus->index], c)) {
        snprintf(err, errcap, "bus %s: not a change of port or serial settings alone", c->name);
        return -1;
    }
    bus_port_t *m = malloc(sizeof *m);
    driver_t *d = m ? open_driver(bus, fresh, err, errcap) : NULL;
    if (!d) {
        if (!m)
            snprintf(err, errcap, "bus %s: out of memory", c->name);
        free(m);
        return -1;
    }
    *m = (bus_port_t){ .cfg = *c, .wire = d, .old = bus->driver };
    if (port_swap(bus->port, d, pace_char_ns(c), BUS_MSG_PORT, m) != 0) {
        snprintf(err, errcap, "bus %s: out of memory", c->name);
        driver_free(d);
        free(m);
        return -1;
    }
    bus->driver = d;
    return 0;
}

void bus_free(gw_bus_t *bus)
{
    if (!bus)
        return;
    port_free(bus->port);
    timeline_close(bus->timeline);
    listen_free(bus->listen);
    line_free(bus->line);
    driver_free(bus->driver);
    if (bus->router)
        router_thread_free(bus->router);
    free(bus->held);
    free(bus);
}
