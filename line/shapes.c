/*
 * line/shapes.c -- the line discipline's I6 (discipline.c): certainty by
 * construction. A question is asked on the wire in a shape no stale frame
 * of its slave can have, where the slave's map allows, so that by F such a
 * frame cannot be taken for its answer, and neither a guard nor a re-ask
 * is needed to tell them apart.
 *
 * The shape of a read's answer is its function and byte count. What a
 * stale frame of slave S can be: a copy of one of S's answers (I4), or the
 * late answer to a question of S given up (I5). S's state keeps the shapes
 * of its last SHAPES_KEPT answers and of its last SHAPES_KEPT questions
 * given up (as they were asked on the wire). A read whose answer would have
 * one of those shapes is widened: one register more (coils: up to the next
 * byte more), up to 2 x SHAPES_KEPT times, until its answer's shape is none
 * of them; the answer is trimmed to the registers asked for. Widening reads
 * registers the slave was not asked for, so a map that ends (or has a hole)
 * there answers 0x02 or 0x03: that answer is not delivered, the slave's
 * map end for the function is learned (no widened read reaches it again),
 * and the question is asked again as it came. A device can forbid it
 * ([device] widen_reads = false: registers with side effects when read).
 * Where no shape is free
 * (a write, a read at its map's end, a question of another function), the
 * question goes as it came and I4's and I5's checks remain the fallback.
 *
 * The shape chosen is a pure function of S's state, and that state changes
 * only when S answers (an answer delivered, or held and not delivered: its
 * copies have its shape too), S's question is given up, or a widened read
 * is refused. When it changes between two attempts of one question (an
 * answer held, found doubtful, and the question asked again), the next
 * attempt may be asked in another shape: the earlier attempt's answer then
 * matches no question and is dropped, never taken for another (F). So no
 * wrong answer follows; at worst an answer is asked for again.
 */
#include "line/state.h"

#include <string.h>

/* The answer's shape: function and byte count; 0 when the function has none known. */
static uint16_t read_shape(uint8_t fc, unsigned qty)
{
    if (fc == 1 || fc == 2)
        return (uint16_t)(fc << 8 | (((qty + 7) / 8) & 0xff));
    if (fc == 3 || fc == 4)
        return (uint16_t)(fc << 8 | ((2 * qty) & 0xff));
    return 0;
}

/* A read's answer's shape (function and byte count); 0 for anything else. */
static uint16_t answer_shape_of(const uint8_t *pdu, size_t len)
{
    return len >= 2 && pdu[0] >= 1 && pdu[0] <= 4 && (size_t)pdu[1] + 2 == len ? (uint16_t)(pdu[0] << 8 | pdu[1]) : 0;
}

static bool is_read(const line_request_t *r)
{
    return r->pdu_len == 5 && r->pdu[0] >= 1 && r->pdu[0] <= 4;
}

static unsigned read_addr(const line_request_t *r) { return (unsigned)(r->pdu[1] << 8 | r->pdu[2]); }
static unsigned read_qty(const line_request_t *r) { return (unsigned)(r->pdu[3] << 8 | r->pdu[4]); }

uint16_t line_shape_of_answer(const uint8_t *pdu, size_t len)
{
    return answer_shape_of(pdu, len);
}

/* A question's answer shape; function alone (byte count 0xff, which no read's
 * answer has: 250 at most) for one with no known shape. */
uint16_t line_shape_of_question(const line_request_t *wire)
{
    return is_read(wire) ? read_shape(wire->pdu[0], read_qty(wire)) : (uint16_t)(wire->pdu[0] << 8 | 0xff);
}

/*
 * Could the late answer of a question given up, of shape `stale`, have
 * this shape? Its own, or a register short: a slave that answers reads a
 * register short (libmodbus's test server; discipline.c, a misshapen frame)
 * does so late too, and its short answer of a question given up has the
 * shape of a read one register smaller (the explorer's seed
 * 1796535911591602: a read of 1 register after one of 2 was given up).
 */
bool line_shape_stale_like(uint16_t stale, uint16_t shape)
{
    unsigned fc = stale >> 8, bytes = stale & 0xff;
    return stale == shape || ((fc == 3 || fc == 4) && bytes != 0xff && bytes >= 4 && shape == stale - 2);
}

/* Could a stale frame of the slave have this shape? */
static bool shape_taken(const slave_state_t *s, uint16_t shape)
{
    for (unsigned i = 0; i < SHAPES_KEPT; i++)
        if (s->answer_shape[i] == shape || (s->stale_shape[i] && line_shape_stale_like(s->stale_shape[i], shape)))
            return true;
    return false;
}

/* ... or an owed answer of another slave, with this slave's address (I9)? */
static bool taken(const line_t *l, unsigned slave, uint16_t shape)
{
    slave_state_t tmp;
    return shape_taken(line_slave_view(l, slave, &tmp), shape) || line_owed_shape(l, slave, shape);
}

/*
 * Would this widened read reach a register where a widened read was
 * refused? A refused read [a, end) says the map has a hole in it, most
 * likely at end - 1, the register widening added; a read that starts past
 * it says nothing about it (a refusal at address 0, as libmodbus's suite
 * asks, stopped every widening above it). Only a cost is at stake: a
 * widened read refused is asked again as it came (deliver_shaped).
 */
static bool past_refused_end(const slave_state_t *s, uint8_t fc, unsigned addr, unsigned wide)
{
    for (unsigned i = 0; i < REFUSED_KEPT; i++) {
        uint32_t end = s->shape_refused_end[fc][i];
        if (end && addr < end && addr + wide >= end)
            return true;
    }
    return false;
}

bool line_shape_question(const line_t *l, const line_request_t *req, line_request_t *wire)
{
    *wire = *req;
#ifdef LINE_BREAK_I2
    /* tests/line/test_line_broken only: with I2's guard, I6's shapes go too, the
     * other defence that needs no re-ask, so that the explorer shows it
     * finds the stale answers they are for. */
    return false;
#endif
    if (!req->slave || req->slave >= N_SLAVES || !is_read(req))
        return false;
    slave_state_t tmp;
    const slave_state_t *s = line_slave_view(l, req->slave, &tmp);
    /* a device whose registers have side effects when read (a FIFO, a
     * clear-on-read counter) must not be read past what was asked:
     * [device] widen_reads = false leaves I4 and I5's checks to it */
    if (!s->widen)
        return false;
    uint8_t fc = req->pdu[0];
    unsigned addr = read_addr(req), qty = read_qty(req), wide = qty;
    unsigned max = fc <= 2 ? 2000 : 125;
    if (!qty || qty > max || !taken(l, req->slave, read_shape(fc, qty)))
        return false;
    for (unsigned k = 0; k < 2 * SHAPES_KEPT; k++) {
        wide = fc <= 2 ? (wide + 7) / 8 * 8 + 1 : wide + 1;
        if (wide > max || addr + wide > 65536u || past_refused_end(s, fc, addr, wide))
            return false;
        if (!taken(l, req->slave, read_shape(fc, wide))) {
            wire->pdu[3] = (uint8_t)(wide >> 8);
            wire->pdu[4] = (uint8_t)wide;
            return true;
        }
    }
    return false;
}

size_t line_shape_trim(const line_request_t *req, const uint8_t *raw, size_t len, uint8_t *out)
{
    memcpy(out, raw, len);
    if (!is_read(req) || len < 2 || raw[0] != req->pdu[0])
        return len;
    unsigned qty = read_qty(req), fc = req->pdu[0];
    unsigned want = fc <= 2 ? (qty + 7) / 8 : 2 * qty;
    if (raw[1] <= want || (size_t)raw[1] + 2 != len)
        return len;
    out[1] = (uint8_t)want;
    if (fc <= 2 && qty % 8)   /* the coils past the last one asked for read as 0 (Modbus: padding) */
        out[1 + want] &= (uint8_t)((1u << (qty % 8)) - 1);
    return 2 + want;
}

void line_shape_refused(line_t *l, const line_request_t *wire)
{
    slave_state_t *s = line_slave(l, wire->slave);
    uint8_t fc = wire->pdu[0];
    uint32_t end = read_addr(wire) + read_qty(wire);
    uint32_t *ends = s->shape_refused_end[fc];
    memmove(ends + 1, ends, (REFUSED_KEPT - 1) * sizeof *ends);   /* the oldest is forgotten */
    ends[0] = end;
    gw_count(&l->m.shape_refused);
    line_log(l, CONFIG_LOG_INFO, "bus %s slave %u fc %u: a read widened to end at %u was refused; "
             "reads are no longer widened to end there or past", l->cfg.name, wire->slave, fc, end);
}

static void push_shape(uint16_t *ring, uint16_t shape)
{
    memmove(ring + 1, ring, (SHAPES_KEPT - 1) * sizeof *ring);
    ring[0] = shape;
}

static void push_hash(uint64_t *ring, uint64_t hash)
{
    memmove(ring + 1, ring, (SHAPES_KEPT - 1) * sizeof *ring);
    ring[0] = hash;
}

void line_shape_given_up(line_t *l, const line_request_t *wire)
{
    line_shape_given_up_shape(l, wire->slave, line_shape_of_question(wire));
}

void line_shape_given_up_shape(line_t *l, unsigned slave, uint16_t shape)
{
    slave_state_t *s = line_slave(l, slave);
    /* The run of questions given up (or attempts owed: line_shape_owed)
     * since an answer was taken: past SHAPES_KEPT, an older one's late
     * answer may have any shape kept. An answer delivered while the slave
     * is not confirming ends the run (line_copies_delivered). */
    s->stale_run++;
    /* a question with no known shape is kept by its function alone (byte
     * count 0xff, which no read's answer has: 250 at most), for
     * line_shape_certifies */
    push_shape(s->stale_shape, shape);
}

/*
 * A question answered after several attempts may still owe the other
 * attempts' answers, later than every guard (a slave that stalls; one whose
 * timeout a reload lowered). Their shapes are kept as a give-up's are, so
 * the next read avoids them: an owed answer in a shape the answer did not
 * have (the explorer's seed 1796605979805936: attempt 1 answered 83 04, its
 * copy taken for I9's re-ask, the re-ask's own answer stalled 200 ms and
 * taken for the next read widened to its shape), and one in the answer's
 * shape but a register short, which the answers' shapes do not cover (seed
 * 1796616480843818: a retried read's owed answer, short, taken for the next
 * read of three registers). A shape already kept is not pushed again. Each
 * counts in the run of shapes kept (stale_run), so that certification by
 * function (line_shape_function_free) sees its function too.
 */
void line_shape_owed(line_t *l, unsigned slave)
{
    slave_state_t *s = line_slave(l, slave);
    for (unsigned i = 2; i-- > 0;) {
        uint16_t shape = s->asked_shape[i];
        bool kept = false;
        for (unsigned k = 0; k < SHAPES_KEPT; k++)
            kept |= s->stale_shape[k] == shape;
        if (shape && !kept) {
            push_shape(s->stale_shape, shape);
            s->stale_run++;
        }
    }
}

/* An answer was heard (delivered or not): its copies have its shape. */
void line_shape_answered(line_t *l, unsigned slave, const uint8_t *pdu, size_t len)
{
    slave_state_t *s = line_slave(l, slave);
    uint16_t shape = answer_shape_of(pdu, len);
    if (shape) {
        push_shape(s->answer_shape, shape);
        push_hash(s->answer_hash, line_hash(pdu, len));
    }
}

/*
 * Could this frame of the slave be stale: a copy of one of its last
 * answers (their shape and bytes), or the late answer of one of its last
 * questions given up (their shape, any bytes)? Only a read's answer has a
 * shape that can say it cannot; an exception, a write's echo, anything
 * else may be (discipline.c: a misshapen frame).
 */
bool line_shape_may_be_stale(const slave_state_t *s, const uint8_t *pdu, size_t len)
{
    if (s->stale_run > SHAPES_KEPT)
        return true;
    uint16_t shape = answer_shape_of(pdu, len);
    if (!shape)
        return true;
    uint64_t h = line_hash(pdu, len);
    for (unsigned i = 0; i < SHAPES_KEPT; i++)
        if ((s->stale_shape[i] && line_shape_stale_like(s->stale_shape[i], shape)) ||
            (s->answer_shape[i] == shape && s->answer_hash[i] == h))
            return true;
    return false;
}

/*
 * I5 by construction: the held answer, the first since a question was
 * given up, has a shape that no late answer of the last questions given up
 * and no copy of the last answers can have (the wire question was shaped so,
 * or its own shape was free). By F it answers the question asked.
 * An exception has no shape (it answers any question of its function), so
 * it is confirmed as before.
 */
/*
 * And by function: a late answer of a question given up carries that
 * question's function (its data, or its exception: function | 0x80), so by
 * F a held answer of another function is none of them, whatever its shape
 * (an exception, a report of slave id, a write's echo). After a read timed
 * out, the next question of another function needs no confirmation: the
 * copy check (I4) still applies to it. Only while every question given up
 * since the slave's last answer is kept (stale_run <= SHAPES_KEPT); a
 * question whose function is not kept (0, from before this rule) blocks.
 * Such an answer is no sign that the late answers have all come (a slave
 * may answer out of order: the explorer's busy slave that still hears), so
 * it ends no confirmation: the slave stays confirming, with its questions
 * given up kept (copies.c), and its next answer of a function given up is
 * still certified by shape or confirmed (I5).
 */
bool line_shape_function_free(const slave_state_t *s, uint8_t fc)
{
    if (!s->stale_run || s->stale_run > SHAPES_KEPT)
        return false;
    for (unsigned i = 0; i < SHAPES_KEPT && i < s->stale_run; i++)
        if (!s->stale_shape[i] || s->stale_shape[i] >> 8 == fc)
            return false;
    return true;
}

int line_shape_certifies(const line_t *l, unsigned slave)
{
    slave_state_t tmp;
    const slave_state_t *s = line_slave_view(l, slave, &tmp);
    const uint8_t *p = l->pending_pdu;
    if (s->stale_run > SHAPES_KEPT || l->pending_len < 2)
        return CERTIFIED_NOT;
    /* (after a give-up only: a slave that repeats is confirmed because its
     * answer equals its last one, which no function tells apart) */
    uint16_t shape = answer_shape_of(p, l->pending_len);
    if (shape && !shape_taken(s, shape))
        return CERTIFIED_BY_SHAPE;
    if (s->confirm_cause == CONFIRM_GIVE_UP && line_shape_function_free(s, p[0] & 0x7f))
        return CERTIFIED_BY_FUNCTION;
    return CERTIFIED_NOT;
}
