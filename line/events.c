/*
 * line/events.c -- the line core's way in: the events (line/line.h), each
 * stamping the core's clock with the time it brings, its construction, and
 * the time a byte and a frame take on each transport. The discipline they
 * drive, and why no answer reaches the wrong request, is discipline.c.
 */
#include "line/state.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* How long past t3.5 the line waits before it believes the wire is quiet: the
 * host may judge the silence on another thread than the one that reads the
 * port, and bytes it has not handed over yet must not make a frame look
 * finished. */
#define IDLE_SLACK_NS 5000000ull

const config_bus_t *line_config(const line_t *l) { return &l->cfg; }
line_bus_metrics_t *line_metrics(line_t *l) { return &l->m; }

line_slave_metrics_t *line_slave_metrics(line_t *l, unsigned slave)
{
    return slave < N_SLAVES ? &l->sm[slave] : NULL;
}

static void arm_idle(line_t *l, uint64_t at)
{
    if (l->idle_pending)
        return;
    l->idle_pending = true;
    l->env.arm(l->env.ctx, LINE_TIMER_IDLE, at, l->now_ns, NULL);
}

/*
 * I3: bytes discarded as noise after the held answer make it doubtful. Only
 * after it: a turnaround glitch just before an answer, in the same chunk,
 * is discarded before the answer is framed (the frame's noise_mark counts
 * it), and once made the answer doubtful, so that every such answer was
 * asked again and, with the glitch again, refused (tests/line/test_line_core.c,
 * test_noise_before_answer: 0x0B after two attempts before this).
 */
static void noise_after_answer(line_t *l, const rtu_framer_stats_t *st)
{
    if (l->pending && st->noise_bytes > l->pending_noise_mark)
        l->pending_doubtful = true;
}

/* ---- events --------------------------------------------------------------------- */

void line_submit(line_t *l, const line_request_t *req, uint64_t now)
{
    l->now_ns = now;
    gw_count(&l->m.requests);
    if (req->slave < N_SLAVES)
        gw_count(&l->sm[req->slave].requests);
    if (!l->port_up || req->slave >= N_SLAVES) {
        gw_count(&l->m.unavailable);
        line_answer_exception(l, req, MB_EX_PATH_UNAVAILABLE);
        return;
    }
    if (req->slave == 0 && !(rtu_function_class(req->pdu, req->pdu_len) & RTU_FN_BROADCAST)) {
        /* Only writes are broadcast: nothing answers a broadcast read. */
        gw_count(&l->m.broadcast_refused);
        line_answer_exception(l, req, MB_EX_ILLEGAL_FUNCTION);
        return;
    }
    if (line_slave_dead(l, req->slave, now)) {
        gw_count(&l->m.dead_fast);
        line_answer_exception(l, req, MB_EX_TARGET_FAILED);
        return;
    }
    if (req->priority)
        line_priority_submitted(l);
    unsigned qi = (req->background && l->cfg.tcp_first) ? 1 : 0;
    line_request_t r = *req;
    r.t_line_ns = now;
    r.t_sent_ns = r.t_parked_ns = r.guard_ns = r.t_confirm_ns = 0;
    r.reasks = 0;
    if (!line_queue_push_or_purge(l, qi, &r, now)) {
        gw_count(&l->m.queue_full);
        line_answer_exception(l, req, MB_EX_BUSY);
        return;
    }
    line_start_next(l);
}

void line_bytes(line_t *l, const uint8_t *data, size_t len, uint64_t t_ns, uint64_t now)
{
    rtu_framer_stats_t before, after;

    l->now_ns = now;
    /* The line is not free while anyone talks: it rests for the gap after
     * the last byte heard, whoever sent it. */
    if (t_ns + l->gap_ns > l->t_line_free_ns)
        l->t_line_free_ns = t_ns + l->gap_ns;
    line_reconnect_heard(l, t_ns);
    if (l->pending)
        line_pending_bytes(l, len);
    rtu_framer_get_stats(l->framer, &before);
    rtu_framer_feed(l->framer, data, len, t_ns);
    if (l->p.framed)   /* the chunk is one whole frame (ASCII, MBAP): its end is the frame's */
        rtu_framer_idle(l->framer, t_ns + l->t35_ns);
    line_drain_frames(l);
    rtu_framer_get_stats(l->framer, &after);
    atomic_fetch_add_explicit(&l->m.noise_bytes, after.noise_bytes - before.noise_bytes, memory_order_relaxed);
    noise_after_answer(l, &after);
    l->last_chunk_ns = t_ns;
    /* A frame without a length rule ends with t3.5 of silence; a framer that
     * holds nothing has no use for it (rtu_framer_settled), nor one that waits
     * for the rest of an answer no silence can end (rtu_framer_held), and a
     * poll's answer, framed by its length, then costs no wake-up for the silence. */
    if (!l->p.framed && !rtu_framer_settled(l->framer) && !rtu_framer_held(l->framer))
        arm_idle(l, now + l->t35_ns + IDLE_SLACK_NS);
    line_start_next(l);
}

static void on_idle(line_t *l, uint64_t now)
{
    uint64_t quiet_at = l->last_chunk_ns + l->t35_ns + IDLE_SLACK_NS;
    l->idle_pending = false;
    if (now < quiet_at) {
        arm_idle(l, quiet_at);   /* bytes came since: look again later */
        return;
    }
    rtu_framer_stats_t before, after;
    rtu_framer_get_stats(l->framer, &before);
    rtu_framer_idle(l->framer, now - IDLE_SLACK_NS);
    line_drain_frames(l);
    rtu_framer_get_stats(l->framer, &after);
    atomic_fetch_add_explicit(&l->m.noise_bytes, after.noise_bytes - before.noise_bytes, memory_order_relaxed);
    noise_after_answer(l, &after);
    line_start_next(l);
}

static void on_deadline(line_t *l, uint64_t fired, uint64_t now)
{
    if (fired == l->timer_at_ns)
        l->timer_at_ns = 0;
    if (!l->busy || !l->deadline_ns)
        return;
    if (now < l->deadline_ns) {
        line_arm_timeout(l, l->deadline_ns);   /* a later attempt's deadline */
        return;
    }
    line_on_timeout(l, now);
}

void line_timer(line_t *l, enum line_timer kind, uint64_t at, uint64_t now)
{
    l->now_ns = now;
    switch (kind) {
    case LINE_TIMER_DEADLINE:
        on_deadline(l, at, now);
        break;
    case LINE_TIMER_KICK:
        if (at == l->kick_at_ns)
            l->kick_pending = false;
        line_start_next(l);
        break;
    case LINE_TIMER_IDLE:
        on_idle(l, now);
        break;
    }
}

void line_resolved(line_t *l, uint64_t now)
{
    l->now_ns = now;
    line_on_resolve(l);
}

void line_port(line_t *l, bool up, uint64_t now)
{
    l->now_ns = now;
    l->port_up = up;
    if (up)
        line_reconnect_begin(l, now);   /* I8 */
    if (!up) {
        line_reconnect_hold(l, now);
        line_port_lost_attempts(l, now);
        if (l->pending) {
            line_pending_port_lost(l);
        } else if (l->busy) {
            gw_count(&l->m.unavailable);
            line_answer_exception(l, &l->cur, MB_EX_PATH_UNAVAILABLE);
        }
        l->busy = false;
        l->deadline_ns = 0;
    }
    line_start_next(l);
}

/* ---- construction ---------------------------------------------------------------- */

/*
 * Time on the line, per transport. A serial line: t3.5 ends a frame
 * without a length rule, a byte takes its character time, the line rests
 * t3.5 between frames. ASCII: two characters a byte. A device server (RTU
 * over TCP): the answer still crosses its serial line at the configured
 * baud, but the stream to rtugw keeps no character timing, so the framer's
 * silence is frame_silence_ms. A Modbus TCP device: no serial line at all
 * (no wire time, no rest between frames unless gap_us asks for one); ASCII
 * and MBAP frames end by their own delimiters (the transport is framed).
 */
static void init_timing(line_t *l)
{
    const config_bus_t *c = &l->cfg;
    bool stream = config_bus_stream(c);

    l->char_bits = rtu_char_bits(c->data_bits, c->parity, c->stop_bits);
    l->wire_bits = c->framing == CONFIG_FRAMING_ASCII ? 2 * l->char_bits
                   : c->framing == CONFIG_FRAMING_TCP ? 0 : l->char_bits;
    l->t35_ns = stream ? (uint64_t)c->frame_silence_ms * 1000000ull : rtu_t35_ns(c->baud, l->char_bits);
    l->gap_ns = c->gap_us ? (uint64_t)c->gap_us * 1000u
                : c->framing == CONFIG_FRAMING_TCP ? 0 : rtu_t35_ns(c->baud, l->char_bits);
}

/*
 * The keys a reload may change on a running line (struct line_keys,
 * state.h), worked out from a configuration on any thread (line_keys_new: a
 * slave no device names gets the bus's timeout, dead_after 3, a 10 s
 * back-off and widening; two devices on one slave: the last), applied on
 * the line's own thread between two events (line_keys_apply), so no event
 * sees half of a change.
 */
static void keys_from(line_keys_t *k, const config_t *cfg, unsigned index)
{
    const config_bus_t *c = &cfg->buses[index];
    k->response_timeout_ms = c->response_timeout_ms;
    k->retries = c->retries;
    k->gap_us = c->gap_us;
    k->priority_hold_us = c->priority_hold_us;
    k->tcp_first = c->tcp_first;
    k->poll_share = c->poll_share;
    for (unsigned s = 0; s < N_SLAVES; s++) {
        k->slave[s].timeout_ms = c->response_timeout_ms;
        k->slave[s].dead_after = 3;
        k->slave[s].backoff_ms = 10000;
        k->slave[s].widen = true;
        k->slave[s].named = false;
    }
    for (unsigned i = 0; i < cfg->device_count; i++) {
        const config_device_t *d = &cfg->devices[i];
        if (d->bus != index || d->slave >= N_SLAVES)
            continue;
        k->slave[d->slave].timeout_ms = d->timeout_ms ? d->timeout_ms : c->response_timeout_ms;
        k->slave[d->slave].dead_after = d->dead_after;
        k->slave[d->slave].backoff_ms = d->dead_backoff_ms;
        k->slave[d->slave].widen = d->widen_reads;
        k->slave[d->slave].named = true;
    }
    /* a transport with transaction ids: no stale frame can match, nothing for I6 to do */
    if (c->framing == CONFIG_FRAMING_TCP)
        for (unsigned s = 0; s < N_SLAVES; s++)
            k->slave[s].widen = false;
}

line_keys_t *line_keys_new(const config_t *cfg, unsigned index)
{
    line_keys_t *k = index < cfg->bus_count ? malloc(sizeof *k) : NULL;
    if (k)
        keys_from(k, cfg, index);
    return k;
}

void line_keys_free(line_keys_t *k)
{
    free(k);
}

/*
 * Lazy slave state. The line used to write all 248 slaves' state at its
 * construction (95 KB a bus, most of it for slaves that never exist). Now
 * a slave's state is written when the line first touches it (line_slave),
 * and a slave never used is all zero bytes: the zero pages of the line's
 * own mapping (line_new), never resident.
 *
 * Why this is the old line, byte for byte, as the discipline sees it: let
 * fresh(s) be the state the old construction wrote for slave s under the
 * keys in force (line_slave_fresh below: the keys' timeout as timeout and
 * base, dead_after, back-off, widen; copies GENUINE on a transport with ids
 * or with copies = none, else UNKNOWN; everything else zero). Claim: a slave
 * whose `used` is false is, in the old code, in state fresh(s). At
 * construction the old code wrote exactly fresh(s). Every event writes a
 * slave's state only through line_slave, which first makes it fresh(s)
 * (and sets used), so an unused slave is written by nothing but the two
 * bulk changes, which keep it fresh: line_keys_apply set timeout and base
 * to the new key where the base differed (where it did not, timeout was
 * the base already: only a late answer widens it, and that is a use),
 * and dead_after, back-off and widen to the new keys, which is fresh(s)
 * under the new keys, now the line's; line_port_change zeroed failures and
 * dead_until, zero in fresh(s) already, and cannot change the framing or
 * copies (line_port_change_ok). Readers on the line's thread that cannot
 * write (const) read line_slave_view, fresh(s) itself for an unused slave;
 * the loops over all slaves look only at slaves with a question parked or
 * a hold (both zero when fresh), so they may skip unused ones.
 *
 * The per-slave metric timeout_ms (read by other threads) was also written
 * for every slave: it is now written for a slave a [device] names (the
 * only ones web/metrics.c and web/http.c read) and for every slave used,
 * with the value the old code had there.
 */
static void line_slave_fresh(const line_t *l, unsigned s, slave_state_t *out)
{
    const line_keys_t *k = &l->keys;
    bool ids = l->cfg.framing == CONFIG_FRAMING_TCP;
    *out = (slave_state_t){ .used = true,
                            .timeout_ms = k->slave[s].timeout_ms,
                            .base_timeout_ms = k->slave[s].timeout_ms,
                            .longest_timeout_ms = k->slave[s].timeout_ms,
                            .dead_after = k->slave[s].dead_after,
                            .backoff_ms = k->slave[s].backoff_ms,
                            .widen = k->slave[s].widen,
                            .copies = ids || l->cfg.no_copies ? COPIES_GENUINE : COPIES_UNKNOWN };
}

slave_state_t *line_slave(line_t *l, unsigned s)
{
    slave_state_t *st = &l->slaves[s];
    if (!st->used) {
        line_slave_fresh(l, s, st);
        gw_set(&l->sm[s].timeout_ms, st->timeout_ms);
    }
    return st;
}

const slave_state_t *line_slave_view(const line_t *l, unsigned s, slave_state_t *tmp)
{
    if (l->slaves[s].used)
        return &l->slaves[s];
    line_slave_fresh(l, s, tmp);
    return tmp;
}

/*
 * A reload's keys, on the line's thread. The question in flight keeps what
 * it was asked under (its timer is armed; its retry is decided by the
 * retries in force when it times out); the next question takes the new
 * keys. A slave whose configured timeout changed starts from it again (the
 * widening a late answer earned, slave.c, was above the old figure; it is
 * learned again above the new one); one whose timeout did not change keeps
 * its widening. A back-off running ends when it was due; dead_after counts
 * the failures already seen. None of this moves an answer to another
 * question: the discipline's rules (discipline.c) hold for any timeout.
 * A slave never used takes the new keys by being made from them when it
 * is (line_slave, above).
 */
void line_keys_apply(line_t *l, const line_keys_t *k)
{
    l->cfg.response_timeout_ms = k->response_timeout_ms;
    l->cfg.retries = k->retries;
    l->cfg.priority_hold_us = k->priority_hold_us;
    l->cfg.tcp_first = k->tcp_first;
    l->cfg.poll_share = k->poll_share;
    if (l->cfg.gap_us != k->gap_us) {
        l->cfg.gap_us = k->gap_us;
        init_timing(l);
    }
    l->keys = *k;
    for (unsigned s = 0; s < N_SLAVES; s++) {
        slave_state_t *st = &l->slaves[s];
        if (!st->used) {
            if (k->slave[s].named)
                gw_set(&l->sm[s].timeout_ms, k->slave[s].timeout_ms);
            continue;
        }
        if (st->base_timeout_ms != k->slave[s].timeout_ms) {
            st->base_timeout_ms = st->timeout_ms = k->slave[s].timeout_ms;
            gw_set(&l->sm[s].timeout_ms, st->timeout_ms);
        }
        if (st->base_timeout_ms > st->longest_timeout_ms)
            st->longest_timeout_ms = st->base_timeout_ms;
        st->dead_after = k->slave[s].dead_after;
        st->backoff_ms = k->slave[s].backoff_ms;
        st->widen = k->slave[s].widen;
    }
}

/* I4 is settled by a Modbus TCP device's transport: a copy of an earlier
 * answer carries that answer's transaction id, no longer in flight, so
 * the MBAP layer hands it up failing its CRC. Equal answers are real.
 * [bus] copies = none: the operator vouches that nothing on the line
 * repeats a frame (no repeater, no echoing converter, no slave that
 * sends an answer twice). Then a frame of S is the answer to one
 * attempt sent to S, heard once; an answer equal to S's last one for
 * another question cannot be a copy of it (I4's only doubt), and I4's
 * guard and re-ask are not paid. Late answers of questions given up or
 * asked twice stay with I2, I5 and I6, which do not rest on the vouch.
 * The vouch is not blind: a copy seen where it answers nothing (I3's
 * window, a stray frame equal to the last answer) makes the slave SENT
 * (copies.c), as on a bus left to detect. (Both in line_slave_fresh.)
 * The slaves themselves are made when first used (line_slave). */
static void init_slaves(line_t *l, const config_t *cfg, unsigned index)
{
    keys_from(&l->keys, cfg, index);
    for (unsigned s = 0; s < N_SLAVES; s++)
        if (l->keys.slave[s].named)
            gw_set(&l->sm[s].timeout_ms, l->keys.slave[s].timeout_ms);
}

static rtu_framer_t *framer_for(const line_t *l)
{
    /* RTU answers end by the length their request and byte count give, not
     * by the moment this thread got round to reading the port (by_length:
     * parser/framer.c, docs/decisions/frames-by-length.md). */
    rtu_framer_config_t fc = { .baud = l->cfg.baud, .char_bits = l->char_bits, .dir = RTU_DIR_RESPONSE,
                               .silence_ns = config_bus_stream(&l->cfg) ? l->t35_ns : 0,
                               .by_length = l->cfg.framing == CONFIG_FRAMING_RTU };
    return rtu_framer_new(&fc);
}

/*
 * A reload moved the line to another port or serial setting (the same
 * framing, mode and queue depth: line_port_change_ok). Only while the port
 * is down (the port told the line before it closed the old driver, so
 * every byte of the old port was fed before this and none of the new one
 * comes until the port is up again): the question in flight was answered
 * then (0x0A), and the framer, the character and silence times and the
 * gap are the new port's from its first byte. The bus's name stays as it
 * is (other threads read it; the port and the rest may change).
 */
int line_port_change(line_t *l, const config_bus_t *c)
{
    if (l->port_up || !line_port_change_ok(&l->cfg, c))
        return -1;
    config_bus_t was = l->cfg;
    _Static_assert(offsetof(config_bus_t, name) == 0, "the name is the struct's first field");
    memcpy((char *)&l->cfg + sizeof l->cfg.name, (const char *)c + sizeof c->name,
           sizeof *c - sizeof c->name);
    init_timing(l);
    rtu_framer_t *f = framer_for(l);
    if (!f) {
        memcpy((char *)&l->cfg + sizeof l->cfg.name, (const char *)&was + sizeof was.name,
               sizeof was - sizeof was.name);
        init_timing(l);
        return -1;
    }
    rtu_framer_free(l->framer);
    l->framer = f;
    /* A slave backed off for failing at the old settings (a line it could
     * not hear) is asked again at the new ones: its back-off was earned by
     * the port, not by it. Its guards (I2's holds) stay: they concern
     * frames already on the wire, not the settings. */
    for (unsigned s = 0; s < N_SLAVES; s++) {
        if (!l->slaves[s].used)
            continue;   /* fresh: no failures, no back-off, its metric never set */
        l->slaves[s].failures = 0;
        l->slaves[s].dead_until_ns = 0;
        gw_set(&l->sm[s].dead, 0);
    }
    return 0;
}

bool line_port_change_ok(const config_bus_t *run, const config_bus_t *c)
{
    return strcmp(run->name, c->name) == 0 && run->framing == c->framing && run->listen == c->listen &&
           run->queue_depth == c->queue_depth && run->no_copies == c->no_copies &&
           run->port_kind != CONFIG_PORT_LISTEN && c->port_kind != CONFIG_PORT_LISTEN;
}

/*
 * The line and its two queues live in one anonymous mapping of their own.
 * Not calloc: the line is 114 KB, under glibc's mmap threshold (128 KiB,
 * and raised to the size of any mapped chunk freed since, e.g. the
 * configuration's), so calloc would take it from the heap, where it clears
 * reused memory and so makes every page resident. A fresh mapping is zero
 * without a write: the pages of slaves never used (line_slave) and of queue
 * slots never filled (the rings start at slot 0 and never move their head,
 * queue.c) stay unbacked zero pages, whatever malloc did before.
 */
line_t *line_new(const config_t *cfg, unsigned index, const line_params_t *p, const line_env_t *env,
                 char *err, size_t errcap)
{
    unsigned depth = cfg->buses[index].queue_depth;
    size_t qoff = (sizeof(struct line) + _Alignof(line_request_t) - 1) / _Alignof(line_request_t) *
                  _Alignof(line_request_t);
    size_t len = qoff + (size_t)BUS_QUEUES * depth * sizeof(line_request_t);
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    line_t *l = map;
    l->map_len = len;
    l->cfg = cfg->buses[index];
    l->env = *env;
    l->p = *p;
    init_timing(l);
    l->verify_state = 0x9E3779B97F4A7C15ull + index;
    init_slaves(l, cfg, index);
    for (unsigned q = 0; q < BUS_QUEUES; q++)
        l->queue[q].slot = (line_request_t *)((char *)map + qoff) + (size_t)q * depth;
    l->framer = framer_for(l);
    if (!l->framer) {
        snprintf(err, errcap, "bus %s: out of memory", l->cfg.name);
        line_free(l);
        return NULL;
    }
    return l;
}

void line_free(line_t *l)
{
    if (!l)
        return;
    rtu_framer_free(l->framer);
    for (unsigned s = 0; s < N_SLAVES; s++)
        if (l->slaves[s].used)
            free(l->slaves[s].parked);
    munmap(l, l->map_len);
}
