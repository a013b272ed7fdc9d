/*
 * front/serial_slave.c -- a serial master in front of rtugw
 * ([serial_slave NAME]): on a port of its own, rtugw answers as the RTU
 * slaves its unitN routes name, forwarding each request to any bus (a
 * serial line, a device server, a Modbus TCP device).
 *
 * One actor per port, both gateway/slave_port.c's (the port is port.c's:
 * open, reopen with back-off, arrival stamps); its bytes go to this actor, which delimits requests with
 * the parser's framer in REQUEST mode (length rules, CRC, t3.5 for the
 * functions without a rule). A frame with a bad CRC, or for a slave id no
 * route names, is not answered: other slaves may share the line, and a
 * real slave stays silent on both.
 *
 * A serial master asks one question at a time and gives up after its own
 * timeout. So: the answer from the bus goes out if it comes within
 * answer_timeout_ms, else exception 0x0B (target failed to respond) goes
 * out at that moment and the bus's answer, when it comes, is dropped
 * (counted). A new request before the answer means the master gave up: the
 * old one is abandoned (its bus answer dropped, and `wanted` tells the bus
 * not to spend line time on it if it has not started). Broadcasts (slave 0)
 * are forwarded when unit0 routes them and never answered. Every answer
 * waits at least t3.5 after the request's last byte, as a slave on the line
 * must.
 *
 * Retired by a reload (serial_slave_retire; the section removed or changed):
 * the object lives while anything may still reach it, counted in refs: one
 * for its actor, one for each request a bus or a map owes an answer (the
 * line core's contract: exactly one answer per request it accepted). The
 * retire stops the actor (every message sent before is still handled), and
 * says no request of its own is wanted any more (live_seq 0: what is queued
 * costs no line time). On ACTOR_STOPPED the port is closed on its own
 * thread, and the actor's reference is dropped; an answer that comes after
 * is sent to a stopped actor (refused: -ESRCH) and drops its own. The last
 * reference frees the object. So no answer reaches freed memory, and none
 * reaches the new serial slave on the same port: it is another object with
 * another actor.
 */
#include "front/internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* t3.5 is judged on a worker: bytes the I/O thread holds must not make a frame look finished. */
#define SS_IDLE_SLACK_NS 5000000ull

enum { SS_MSG_ANSWER = 200, SS_MSG_DEADLINE, SS_MSG_IDLE, SS_MSG_SEND };

typedef struct ss_answer {
    uint32_t seq;
    uint8_t pdu[RTU_MAX_PDU];   /* sent trimmed: the message's length says the PDU's */
} ss_answer_t;

struct gw_serial_slave {
    line_origin_t origin;        /* first: the answers' way back */
    gw_t *gw;
    gw_maps_t *maps;             /* the wiring's, taken at creation (fixed from start) */
    const config_serial_slave_t *cfg;   /* &own: the running config's copy may be swapped by a reload */
    config_serial_slave_t own;
    char name[CONFIG_NAME_MAX + 16];
    gw_slave_port_t *port;     /* the port and this actor (gateway/slave_port.c) */
    rtu_framer_t *framer;
    uint64_t t35_ns;
    uint64_t last_chunk_ns;
    bool idle_pending;
    bool port_up;
    /* the question the master waits on */
    bool waiting;
    uint8_t slave;             /* as the master addressed it */
    uint8_t function;
    uint32_t seq;
    uint64_t asked_ns;         /* the request's last byte */
    _Atomic uint32_t live_seq; /* the request still wanted; 0: none (read on the bus's thread) */
    gw_serial_slave_metrics_t m;
    line_bus_metrics_t port_m;   /* port.c's counters: port_up, reopen_attempts */
    _Atomic unsigned refs;       /* the actor's one, and one per answer owed (above) */
    atomic_bool retired;         /* set by the reload; the actor takes no request after */
};

static void free_now(gw_serial_slave_t *s)
{
    slave_port_free(s->port);
    rtu_framer_free(s->framer);
    free(s);
}

/* Any thread: the last reference frees it (the argument above). */
static void unref(gw_serial_slave_t *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        free_now(s);
}

static void unref_ctx(void *ctx)
{
    unref(ctx);
}

/* A request is about to be handed to a bus or a map: its answer will hold a reference. */
static void owe(gw_serial_slave_t *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

const char *serial_slave_name(const gw_serial_slave_t *s) { return s->cfg->name; }
gw_serial_slave_metrics_t *serial_slave_metrics(gw_serial_slave_t *s) { return &s->m; }

/* ---- answering the master ------------------------------------------------------- */

/* An answer frame to the master, never sooner than t3.5 after its request. */
static void send_pdu(gw_serial_slave_t *s, const uint8_t *pdu, size_t len)
{
    uint8_t adu[RTU_MAX_ADU];
    int n = rtu_adu_from_pdu(s->slave, pdu, len, adu, sizeof adu);
    uint64_t now = gw_now_ns(), at = s->asked_ns + s->t35_ns;

    if (n < 0)
        return;
    gw_count(&s->m.answers);
    if (pdu[0] & 0x80)
        gw_count(&s->m.exceptions);
    if (now >= at)
        slave_port_write(s->port, adu, (size_t)n);
    else
        slave_port_send_after(s->port, SS_MSG_SEND, adu, (size_t)n, at - now);
}

static void finish(gw_serial_slave_t *s)
{
    s->waiting = false;
    atomic_store_explicit(&s->live_seq, 0, memory_order_relaxed);
}

static void send_exception(gw_serial_slave_t *s, uint8_t code)
{
    uint8_t pdu[2] = { (uint8_t)(s->function | 0x80), code };
    send_pdu(s, pdu, sizeof pdu);
    finish(s);
}

/* A bus's answer (an ss_answer_t trimmed to its PDU), for the question
 * the master waits on or for one it has given up. */
static void on_answer(gw_serial_slave_t *s, const uint8_t *msg, size_t len)
{
    uint32_t seq;
    memcpy(&seq, msg + offsetof(ss_answer_t, seq), sizeof seq);
    if (!s->waiting || seq != s->seq) {
        if (seq)   /* 0: a broadcast's acknowledgement, which nobody waits for */
            gw_count(&s->m.late_dropped);
        return;
    }
    send_pdu(s, msg + offsetof(ss_answer_t, pdu), len - offsetof(ss_answer_t, pdu));
    finish(s);
}

/* The answer_timeout_ms of request seq (the message's data) is up. */
static void on_deadline(gw_serial_slave_t *s, const void *msg)
{
    uint32_t seq;
    memcpy(&seq, msg, sizeof seq);
    if (!s->waiting || seq != s->seq)
        return;
    gw_count(&s->m.timeouts);
    send_exception(s, MB_EX_TARGET_FAILED);
}

/* ---- the master's requests ------------------------------------------------------- */

/* A broadcast from the master: forwarded when unit0 routes it, never answered. */
static void forward_broadcast(gw_serial_slave_t *s, const config_route_t *r, const uint8_t *pdu, size_t len)
{
    if (!(rtu_function_class(pdu, len) & RTU_FN_BROADCAST))
        return;   /* only writes are broadcast */
    line_request_t req = { .origin = &s->origin, .slave = (uint8_t)r->slave, .bus = (uint8_t)r->bus,
                         .pdu_len = (uint16_t)len, .t_accept_ns = gw_now_ns() };
    memcpy(req.pdu, pdu, len);
    owe(s);
    if (gw_submit(s->gw, &req) != 0)   /* refused or not, a broadcast is never answered */
        unref(s);   /* refused: no answer will come (not the last reference: the actor runs this) */
}

static void on_request(gw_serial_slave_t *s, const rtu_frame_t *f)
{
    const config_route_t *r = &s->cfg->unit[f->adu[0]];
    const uint8_t *pdu = f->adu + 1;
    size_t len = f->len - 3u;
    rtu_request_t decoded;

    if (atomic_load_explicit(&s->retired, memory_order_relaxed))
        return;   /* bytes read before the retire: the new serial slave on this port answers from now */
    bool mapped = f->adu[0] && vslave_owns(s->maps, f->adu[0]);   /* a map's unit (gateway/vslave.c) */
    if (!mapped && (!r->set || r->bus >= gw_bus_count(s->gw))) {
        gw_count(&s->m.ignored);   /* another slave's, or nobody's */
        return;
    }
    gw_count(&s->m.requests);
    if (s->waiting)
        gw_count(&s->m.abandoned);   /* the master asks anew: it gave up on the last one */
    finish(s);
    rtu_status_t st = rtu_request_decode_pdu(pdu, len, &decoded);
    if (f->adu[0] == 0) {
        if (st == RTU_OK)
            forward_broadcast(s, r, pdu, len);
        return;
    }
    s->slave = f->adu[0];
    s->function = pdu[0];
    s->asked_ns = f->t_last_ns;
    s->seq = s->seq + 1 ? s->seq + 1 : 1;   /* never 0 */
    s->waiting = true;
    if (st != RTU_OK) {
        send_exception(s, st == RTU_ERR_FUNCTION ? MB_EX_ILLEGAL_FUNCTION : MB_EX_ILLEGAL_DATA_VALUE);
        return;
    }
    line_request_t req = { .origin = &s->origin, .slave = (uint8_t)r->slave, .bus = (uint8_t)r->bus,
                         .pdu_len = (uint16_t)len, .seq = s->seq, .t_accept_ns = gw_now_ns() };
    memcpy(req.pdu, pdu, len);
    atomic_store_explicit(&s->live_seq, s->seq, memory_order_relaxed);
    if (mapped) {
        uint8_t answer[RTU_MAX_PDU];
        size_t n = 0;
        owe(s);
        int verdict = gw_unit_dispatch(s->gw, s->slave, &req, answer, &n);
        if (verdict != GW_UNIT_PENDING)
            unref(s);   /* answered here, or not the map's: nothing owed */
        if (verdict == GW_UNIT_ROUTE) {
            send_exception(s, MB_EX_PATH_UNAVAILABLE);   /* reloaded meanwhile */
            return;
        }
        if (verdict == GW_UNIT_ANSWERED) {
            send_pdu(s, answer, n);
            finish(s);
            return;
        }
    } else {
        owe(s);
        int code = gw_submit(s->gw, &req);
        if (code) {
            unref(s);
            send_exception(s, (uint8_t)code);
            return;
        }
    }
    uint32_t seq = s->seq;
    slave_port_send_after(s->port, SS_MSG_DEADLINE, &seq, sizeof seq,
                          (uint64_t)s->cfg->answer_timeout_ms * 1000000ull);
}

static void drain_frames(gw_serial_slave_t *s)
{
    rtu_frame_t f;
    while (rtu_framer_next(s->framer, &f)) {
        if (f.crc_ok)
            on_request(s, &f);
        else
            gw_count(&s->m.bad_frames);
    }
}

static void on_bytes(gw_serial_slave_t *s, const gw_bytes_t *b)
{
    rtu_framer_feed(s->framer, b->data, b->len, b->t_ns);
    s->last_chunk_ns = b->t_ns;
    drain_frames(s);
    if (!s->idle_pending) {
        s->idle_pending = true;
        slave_port_send_after(s->port, SS_MSG_IDLE, NULL, 0, s->t35_ns + SS_IDLE_SLACK_NS);
    }
}

/* A request of a function without a length rule ends at t3.5 of quiet. */
static void on_idle(gw_serial_slave_t *s)
{
    uint64_t now = gw_now_ns(), quiet_at = s->last_chunk_ns + s->t35_ns + SS_IDLE_SLACK_NS;
    s->idle_pending = now < quiet_at;
    if (s->idle_pending) {
        slave_port_send_after(s->port, SS_MSG_IDLE, NULL, 0, quiet_at - now);
        return;
    }
    rtu_framer_idle(s->framer, now - SS_IDLE_SLACK_NS);
    drain_frames(s);
}

static void behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type, const void *data,
                      size_t len)
{
    gw_serial_slave_t *s = state;
    (void)sys;
    (void)self;
    switch (type) {
    case PORT_MSG_BYTES:
        on_bytes(s, data);
        break;
    case PORT_MSG_STATE:
        s->port_up = *(const uint8_t *)data != 0;
        gw_set(&s->m.port_up, s->port_up);
        rtu_framer_reset(s->framer);
        break;
    case SS_MSG_ANSWER:
        if (len > offsetof(ss_answer_t, pdu))
            on_answer(s, data, len);
        break;
    case SS_MSG_DEADLINE:
        on_deadline(s, data);
        break;
    case SS_MSG_IDLE:
        on_idle(s);
        break;
    case SS_MSG_SEND:
        slave_port_write(s->port, data, len);
        break;
    case ACTOR_STOPPED:   /* retired: its port closes on its own thread, then the actor's reference goes */
        slave_port_close(s->port, unref_ctx, s);
        break;
    default:
        break;
    }
}

/* ---- the origin: answers come on the bus's thread -------------------------------- */

static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_serial_slave_t *s = (gw_serial_slave_t *)o;
    ss_answer_t a = { .seq = req->seq };
    memcpy(a.pdu, pdu, len);
    slave_port_send(s->port, SS_MSG_ANSWER, &a, offsetof(ss_answer_t, pdu) + len);   /* refused once retired */
    unref(s);
}

/* A request the master has given up on costs no line time. */
static bool origin_wanted(line_origin_t *o, const line_request_t *req)
{
    gw_serial_slave_t *s = (gw_serial_slave_t *)o;
    return req->seq == 0 || atomic_load_explicit(&s->live_seq, memory_order_relaxed) == req->seq;
}

static const line_origin_ops_t serial_slave_ops = { "serial_slave", origin_answer, origin_wanted };

/* ---- construction ------------------------------------------------------------------ */

gw_serial_slave_t *serial_slave_new(gw_t *gw, const config_serial_slave_t *c, char *err, size_t errcap)
{
    gw_serial_slave_t *s = calloc(1, sizeof *s);

    if (!s) {
        snprintf(err, errcap, "serial_slave %s: out of memory", c->name);
        return NULL;
    }
    s->origin.ops = &serial_slave_ops;
    s->gw = gw;
    s->maps = gw_maps(gw);
    s->own = *c;
    s->cfg = c = &s->own;
    atomic_init(&s->refs, 1);
    snprintf(s->name, sizeof s->name, "serial_slave %s", c->name);
    unsigned bits = rtu_char_bits(c->data_bits, c->parity, c->stop_bits);
    s->t35_ns = rtu_t35_ns(c->baud, bits);
    rtu_framer_config_t fc = { .baud = c->baud, .char_bits = bits, .dir = RTU_DIR_REQUEST };
    char why[DRIVER_ERRLEN] = "out of memory";
    /* Placed like a bus actor, its port beside it (gateway/slave_port.c says
     * where and why: t3.5 on the wire, issue 29). */
    if (!(s->framer = rtu_framer_new(&fc)) ||
        !(s->port = slave_port_new(gw, c, s->name, behaviour, s, &s->port_m, why, sizeof why))) {
        snprintf(err, errcap, "%s: %s", s->name, why);
        serial_slave_free(s);
        return NULL;
    }
    return s;
}

/* The stop path: the buses and the actors have stopped, nothing is owed. */
void serial_slave_free(gw_serial_slave_t *s)
{
    if (s)
        free_now(s);
}

void serial_slave_retire(gw_serial_slave_t *s)
{
    atomic_store_explicit(&s->retired, true, memory_order_relaxed);
    atomic_store_explicit(&s->live_seq, 0, memory_order_relaxed);
    slave_port_stop_actor(s->port);
}

const config_serial_slave_t *serial_slave_config(const gw_serial_slave_t *s)
{
    return s->cfg;
}
