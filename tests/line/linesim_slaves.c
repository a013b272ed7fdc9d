/*
 * tests/line/linesim_slaves.c -- the wire and the model slaves of
 * tests/line/linesim.c's world: transmissions that garble each other, bytes
 * arriving at the far end, and slaves that answer as their model says (late,
 * doubled, split, noisy, damaged, cut, queued, deaf while busy, exceptions).
 */
#include "tests/line/linesim_world.h"

/* ---- the wire ------------------------------------------------------------------ */

/* A transmission from now for `len` bytes; any other still on the wire
 * garbles it and is garbled by it. */
uint32_t linesim_tx_begin(sim_t *s, size_t len)
{
    uint32_t i = s->tx_next++ % TX_RING;
    tx_t *t = &s->txs[i];
    *t = (tx_t){ .start = s->now, .end = s->now + len * s->char_ns, .gen = t->gen + 1 };
    for (uint32_t k = 0; k < TX_RING; k++) {
        tx_t *o = &s->txs[k];
        if (k != i && o->gen && o->end > t->start && o->start < t->end) {
            if (!o->garbled || !t->garbled)
                s->c.collisions++;
            o->garbled = t->garbled = true;
        }
    }
    return i;
}

static bool tx_garbled(const sim_t *s, uint32_t i, uint32_t gen)
{
    return s->txs[i].gen != gen || s->txs[i].garbled;
}

/* A slave puts bytes on the wire now: they reach the gateway's port in
 * one to three chunks, each when its last byte is complete. */
void linesim_slave_transmit(sim_t *s, const ev_t *tx)
{
    const uint8_t *p = tx->data;
    size_t n = tx->len;
    uint32_t t = linesim_tx_begin(s, n);
    size_t done = 0;
    unsigned pieces = 1 + (unsigned)(rnd(s) % 3);
    while (done < n) {
        size_t k = pieces > 1 ? 1 + rnd(s) % (n - done) : n - done;
        pieces = pieces > 1 ? pieces - 1 : 1;
        ev_t *e = linesim_ev_new(s, EV_ARRIVE, s->now + (done + k) * s->char_ns);
        e->tx = t;
        e->txgen = s->txs[t].gen;
        e->frame = tx->frame;
        e->off = (uint16_t)(tx->off + done);
        e->len = (uint16_t)k;
        memcpy(e->data, p + done, k);
        done += k;
    }
}

/*
 * Fact F (line/discipline.c) rests on CRC-16: a damaged frame that passes
 * it is a frame no slave sent, and no master can tell it from one. On a
 * real line that is about one damaged frame in 65,536; here a collision's
 * garbling is a fixed pattern, which with the model's own bit flips made
 * such frames (the explorer's seed 1796617987838581: an answer with a bit
 * flipped, then garbled by a collision, CRC-good, delivered as slave 1's).
 * The explorer tests the discipline, not CRC-16: an answer garbled on its
 * way that comes out CRC-good gets one more bit flipped in its last piece,
 * before the port reads it, and is counted (crc_escapes). Only then: the
 * runs' course is otherwise unchanged.
 */
static void keep_damage_detectable(sim_t *s, ev_t *a)
{
    if (!a->frame)
        return;
    frame_rec_t *f = &s->frames[(a->frame - 1) % FRAME_RING];
    if ((size_t)a->off + a->len > f->len)
        return;
    memcpy(f->got + a->off, a->data, a->len);
    f->have = (uint16_t)(f->have + a->len);
    f->garbled |= tx_garbled(s, a->tx, a->txgen);
    if (f->have != f->len || !f->garbled || f->len < 4 || rtu_crc16(f->got, f->len) != 0)
        return;
    a->data[a->len - 1] ^= 0x01;
    s->c.crc_escapes++;
    if (s->trace)
        fprintf(stderr, "%11.3f ms a garbled answer passed CRC-16: one more bit flipped\n", s->now / 1e6);
}

void linesim_on_arrive(sim_t *s, ev_t *a)
{
    if (s->conn_down) {
        s->c.lost_bytes += a->len;
        if (s->trace)
            hex("arrive (connection down: lost)", s->now, a->data, a->len);
        return;
    }
    if (tx_garbled(s, a->tx, a->txgen))
        for (unsigned i = 0; i < a->len; i++)
            a->data[i] ^= (uint8_t)(0x5A + 17 * i);
    keep_damage_detectable(s, a);
    if (s->trace)
        hex(tx_garbled(s, a->tx, a->txgen) ? "arrive (garbled)" : "arrive", s->now, a->data, a->len);
    s->unread += a->len;
    /* the port reads in order, up to host_delay_max late */
    uint64_t t = s->now + (s->host_delay_max_ns ? rnd(s) % (s->host_delay_max_ns + 1) : 0);
    if (t < s->last_feed_t)
        t = s->last_feed_t;
    s->last_feed_t = t;
    ev_t *f = linesim_ev_new(s, EV_FEED, t);
    f->at = s->now;   /* stamped with its arrival */
    f->len = a->len;
    memcpy(f->data, a->data, a->len);
}

/* ---- the model slaves ---------------------------------------------------------- */

static uint16_t reg_value(const sim_slave_model_t *m, unsigned slave, unsigned fc, unsigned addr)
{
    switch (m->values) {
    case SIM_VALUES_ZERO: return 0;
    case SIM_VALUES_EQUAL: return 0x2A2A;
    case SIM_VALUES_ALTERNATE: return (addr & 1) ? 0x00FF : 0xFF00;
    default: return (uint16_t)(slave * 7919u + fc * 4099u + addr * 31u + 0x1111u);
    }
}

#define EXCEPTION_ADDR 900   /* reads at or past it: exception 02 (illegal data address) */

size_t sim_expected(const sim_t *s, unsigned slave, const uint8_t *q, size_t qlen, uint8_t *out)
{
    const sim_slave_model_t *m = &s->slaves[slave < 248 ? slave : 0].m;
    unsigned fc = q[0], addr = qlen >= 3 ? (unsigned)(q[1] << 8 | q[2]) : 0;
    unsigned qty = qlen >= 5 ? (unsigned)(q[3] << 8 | q[4]) : 0;
    switch (fc) {
    case 3: case 4:
        if (addr + qty > EXCEPTION_ADDR || addr < m->map_start) {
            out[0] = (uint8_t)(fc | 0x80);
            out[1] = 2;
            return 2;
        }
        out[0] = (uint8_t)fc;
        out[1] = (uint8_t)(2 * qty);
        for (unsigned i = 0; i < qty; i++) {
            uint16_t v = reg_value(m, slave, fc, addr + i);
            out[2 + 2 * i] = (uint8_t)(v >> 8);
            out[3 + 2 * i] = (uint8_t)v;
        }
        return 2 + 2 * qty;
    case 16:
        memcpy(out, q, 5);
        return 5;
    default:   /* 6: the echo */
        memcpy(out, q, qlen);
        return qlen;
    }
}

static size_t adu_of(unsigned slave, const uint8_t *pdu, size_t len, uint8_t *adu)
{
    int n = rtu_adu_from_pdu((uint8_t)slave, pdu, len, adu, RTU_MAX_ADU);
    if (n < 0)
        abort();
    return (size_t)n;
}

/* Bytes on the wire at t; `frame` names the answer they are (a piece) of,
 * from offset `off` (0: noise, no answer). */
static void schedule_tx(sim_t *s, uint64_t t, const uint8_t *p, size_t n, uint32_t frame, size_t off)
{
    ev_t *e = linesim_ev_new(s, EV_SLAVE_TX, t);
    e->len = (uint16_t)n;
    e->frame = frame;
    e->off = (uint16_t)off;
    memcpy(e->data, p, n);
}

/* A new answer record of n bytes (keep_damage_detectable); its id. */
static uint32_t frame_new(sim_t *s, size_t n)
{
    uint32_t id = s->frame_next++ % FRAME_RING;
    s->frames[id] = (frame_rec_t){ .len = (uint16_t)n };
    return id + 1;
}

/* A slave heard a request ending now: its answer, with its faults, goes on the wire later. */
static void slave_answer(sim_t *s, unsigned id, const uint8_t *pdu, size_t len)
{
    slave_rt_t *sl = &s->slaves[id];
    const sim_slave_model_t *m = &sl->m;
    if (s->now < sl->busy_until && (m->deaf_while_busy || (!m->queueing && s->now >= sl->talk_from))) {
        if (s->trace)
            fprintf(stderr, "%11.3f ms slave %u: deaf (busy until %.3f ms)\n", s->now / 1e6, id, sl->busy_until / 1e6);
        return;   /* deaf while busy, or not hearing while it talks (half duplex, no buffering) */
    }
    uint8_t ans[RTU_MAX_PDU], adu[RTU_MAX_ADU + 8];
    size_t alen;
    if (chance(s, m->p_exception)) {
        ans[0] = (uint8_t)(pdu[0] | 0x80);
        ans[1] = 4;
        alen = 2;
    } else {
        alen = sim_expected(s, id, pdu, len, ans);
        /* (drawn only where set: runs without it keep their course, and
         * test_line_broken its seeds) */
        if ((ans[0] == 3 || ans[0] == 4) && alen >= 4 && m->p_misshapen > 0 && chance(s, m->p_misshapen)) {
            ans[1] = (uint8_t)(ans[1] - 2);
            alen -= 2;
        }
    }
    if (chance(s, m->p_silent)) {
        if (s->trace)
            fprintf(stderr, "%11.3f ms slave %u: silent\n", s->now / 1e6, id);
        return;
    }
    bool late = chance(s, m->p_late);
    uint64_t delay = late ? uniform(s, m->late_min_ns, m->late_max_ns) : uniform(s, m->lat_min_ns, m->lat_max_ns);
    bool stall = chance(s, m->p_stall);
    if (stall)
        delay = uniform(s, m->stall_min_ns, m->stall_max_ns);
    uint64_t start = s->now + delay;
    if (start < sl->busy_until)
        start = sl->busy_until;   /* a slave never talks over itself */
    size_t n = adu_of(id, ans, alen, adu);
    if (m->flip_function)   /* (drawn from nothing: the other runs keep their course) */
        adu[1] ^= 0x80;
    if (chance(s, m->p_crc))
        adu[rnd(s) % n] ^= (uint8_t)(1u << (rnd(s) % 8));
    else if (chance(s, m->p_truncate))
        n -= 1 + rnd(s) % 3;
    /* (a device server's mix-up, on an answer in its time; with
     * sim_foreign_late on late and stalled ones too) */
    bool timely = s->foreign_late || (!late && !stall && start == s->now + delay);
    if (m->p_foreign > 0 && chance(s, m->p_foreign) && timely) {
        /* the next present slave's address on this answer, then the answer
         * after the line's rest */
        unsigned other = id + 1, k = 0;
        while (k < s->n_slaves && s->slave_ids[k] != id)
            k++;
        if (s->n_slaves > 1)
            other = s->slave_ids[(k + 1) % s->n_slaves];
        uint8_t fadu[RTU_MAX_ADU + 8];
        size_t fn = adu_of(other, ans, alen, fadu);
        schedule_tx(s, start, fadu, fn, frame_new(s, fn), 0);
        start += fn * s->char_ns + uniform(s, 4 * s->char_ns, 6 * s->char_ns);
        s->c.foreign_sent++;
    }
    if (m->p_close > 0 && chance(s, m->p_close)) {
        ev_t *c = linesim_ev_new(s, EV_CLOSE, start + (n / 2) * s->char_ns);
        c->at = uniform(s, m->reconnect_min_ns, m->reconnect_max_ns);
    }
    if (chance(s, m->p_noise)) {
        uint8_t noise[6];
        size_t k = 1 + rnd(s) % 6;
        for (size_t i = 0; i < k; i++)
            noise[i] = (uint8_t)rnd(s);
        uint64_t lead = k * s->char_ns + uniform(s, 0, 2 * s->char_ns);
        if (start > s->now + lead)
            schedule_tx(s, start - lead, noise, k, 0, 0);
    }
    uint64_t end = start + n * s->char_ns;
    if (chance(s, m->p_split) && n > 2) {
        size_t cut = 1 + rnd(s) % (n - 1);
        uint32_t fr = frame_new(s, n);
        schedule_tx(s, start, adu, cut, fr, 0);
        uint64_t gap = uniform(s, 0, m->split_gap_max_ns);
        schedule_tx(s, start + cut * s->char_ns + gap, adu + cut, n - cut, fr, cut);
        end += gap;
    } else {
        schedule_tx(s, start, adu, n, frame_new(s, n), 0);
    }
    if (chance(s, m->p_double)) {
        uint64_t t2 = end + uniform(s, m->copy_gap_min_ns, m->copy_gap_max_ns);
        schedule_tx(s, t2, adu, n, frame_new(s, n), 0);
        end = t2 + n * s->char_ns;
    }
    if (s->trace)
        fprintf(stderr, "%11.3f ms slave %u: answers at %.3f ms%s%s%s (%zu bytes, ends %.3f ms)\n", s->now / 1e6, id,
                start / 1e6, late ? ", late" : "", stall ? ", stalled" : "",
                end > start + n * s->char_ns ? ", with a copy or a split" : "", n, end / 1e6);
    if (sl->busy_until <= s->now)
        sl->talk_from = stall ? s->now : start;   /* a stalled slave hears nothing until it has answered */
    if (end > sl->busy_until)
        sl->busy_until = end;
}

void linesim_on_slave_rx(sim_t *s, ev_t *e)
{
    if (tx_garbled(s, e->tx, e->txgen))
        return;   /* nobody hears a garbled request */
    rtu_request_t rq;
    if (rtu_request_decode(e->data, e->len, &rq) != RTU_OK && rtu_crc16(e->data, e->len) != 0)
        return;
    unsigned id = e->data[0];
    if (id == 0 || !s->slaves[id].present)
        return;   /* a broadcast is acted on, never answered */
    slave_answer(s, id, e->data + 1, e->len - 3u);
}

