/*
 * line/foreign.c -- the line discipline's answer to frames that carry
 * another slave's address (discipline.c: I7 is in receive.c, I8 and I9
 * here). Fact F trusts a frame's address: a frame of slave S is S's. A
 * device server (RTU over TCP) that mixes up its ports' frames breaks
 * that: it may put slave T's address on S's answer, just before S's answer
 * itself (issue 40: slave 2's registers delivered as slave 3's). While S's
 * answer comes in its question's time, nothing follows: no other question
 * is on the line then, and a frame that answers nothing is dropped (I2);
 * one that would answer a parked question of T is heard during S's
 * attempt, where I7 takes no late answer. What remains are the answers
 * owed to the line after their question's time: after a reconnect (I8),
 * after a timeout or a give-up (I9).
 */
#include "line/state.h"

#include <string.h>

#define MAX_U64(a, b) ((a) > (b) ? (a) : (b))

/*
 * I8 (after a reconnect). A device server forwards its serial line to
 * whatever connection is open, so the answers owed when the connection
 * went -- to the attempt on the wire, to parked questions, to slaves still
 * in their guard -- can arrive on the next one, and, from a server that
 * mixes up its ports' frames, with another slave's address (issue 40). A
 * guard by slave (I2) cannot hold them: the address is not the sender's.
 * So when the port goes with anything owed, the line asks nothing after it
 * is back until it has been quiet for the longest timeout of the slaves
 * owed, from the reconnect and from every byte heard; what is heard then
 * answers nothing on the line (no attempt is on it) and guards its slave.
 * The cost is one timeout per reconnect with answers owed.
 */
void line_reconnect_hold(line_t *l, uint64_t now)
{
    uint64_t ns = now < l->reconnect_quiet_ns ? l->reconnect_len_ns : 0;   /* a hold not over yet */
    if ((l->busy || l->pending) && l->cur.slave)
        ns = MAX_U64(ns, line_slave(l, l->cur.slave)->timeout_ms * 1000000ull);
    for (unsigned s = 1; s < N_SLAVES; s++) {
        const slave_state_t *st = &l->slaves[s];
        if (!st->used)
            continue;   /* fresh: nothing parked, no hold (events.c, line_slave) */
        if (st->parked || st->hold_until_ns > now)
            ns = MAX_U64(ns, st->timeout_ms * 1000000ull);
    }
    l->reconnect_len_ns = MAX_U64(l->reconnect_len_ns, ns);
}

/* The port is back: the hold begins (line_port). */
void line_reconnect_begin(line_t *l, uint64_t now)
{
    if (l->reconnect_len_ns)
        l->reconnect_quiet_ns = now + l->reconnect_len_ns;
}

/* A byte heard at t_ns while held: the quiet starts again from it. */
void line_reconnect_heard(line_t *l, uint64_t t_ns)
{
    if (l->now_ns < l->reconnect_quiet_ns && t_ns + l->reconnect_len_ns > l->reconnect_quiet_ns)
        l->reconnect_quiet_ns = t_ns + l->reconnect_len_ns;
}

/*
 * I9 (owed answers). An attempt that timed out, a question given up (a
 * refusal, a lost port), or one asked more than once of a slave that sends
 * copies (I4: the answer taken may be a copy of an earlier attempt's, a
 * later attempt's still to come) may still be answered, late, and that
 * answer may come with another slave's address. While it may (OWED_WINDOW_TIMEOUTS of
 * its slave's timeouts after a timeout or a give-up, which covers a late
 * answer, a retry's and a stall of the explorer's; OWED_ANSWERED_TIMEOUTS
 * after such a copy), the line keeps its shape (function and byte count;
 * the function alone for a question with no shape), line-wide:
 *   - a read of another slave is asked in a shape none of them has (I6's
 *     widening, line_shape_question), so by F such a frame cannot answer
 *     it, and equal values cost nothing;
 *   - where no shape is free (an exception, which answers any question of
 *     its function; a write's echo, equal only to the same write's; a read
 *     that may not be widened), an
 *     answer of another slave that one of them could be is delivered only
 *     when the same question, asked again at once, is answered with the
 *     same values (no guard: by I1 the answer to either attempt answers
 *     it; a stale frame comes once, so two answers that agree are the
 *     slave's own), at most CONFIRM_MAX_ASKS times, then 0x0B.
 * Healthy lines pay nothing: nothing is owed. A line with a dead slave
 * pays one transaction more per exception of that function.
 * The limit: an answer later than the window, with another slave's
 * address and the shape of that slave's question, cannot be told apart
 * (the window is a timing margin, like I4's hold).
 */
void line_owed_push(line_t *l, const line_request_t *wire, uint64_t now, unsigned timeouts)
{
    if (!wire->slave || wire->slave >= N_SLAVES)
        return;
    uint64_t until = now + timeouts * (uint64_t)line_slave(l, wire->slave)->timeout_ms * 1000000ull;
    line_owed_t *o = &l->owed[l->owed_next++ % OWED_KEPT];
    if (o->until > now && o->slave != wire->slave)
        gw_count(&l->m.owed_forgotten);   /* kept too few: counted, and the limit above */
    *o = (line_owed_t){ .slave = wire->slave, .shape = line_shape_of_question(wire), .until = until };
    uint8_t fc = wire->pdu[0];
    if ((fc == 5 || fc == 6 || fc == 22) && wire->pdu_len >= 5)
        o->echo = line_hash(wire->pdu, wire->pdu_len);
    else if ((fc == 15 || fc == 16) && wire->pdu_len >= 5)
        o->echo = line_hash(wire->pdu, 5);
}

/* Could an owed answer of a slave other than `slave` have this shape? */
bool line_owed_shape(const line_t *l, unsigned slave, uint16_t shape)
{
    for (unsigned i = 0; i < OWED_KEPT; i++) {
        const line_owed_t *o = &l->owed[i];
        if (o->until > l->now_ns && o->slave != slave && line_shape_stale_like(o->shape, shape))
            return true;
    }
    return false;
}

/* Could this answer of `slave` be an owed answer of another slave? */
static bool owed_answer(const line_t *l, unsigned slave, const uint8_t *pdu, size_t len)
{
    if (len < 2)
        return false;
    uint8_t fc = pdu[0] & 0x7f;
    uint16_t shape = line_shape_of_answer(pdu, len);
    for (unsigned i = 0; i < OWED_KEPT; i++) {
        const line_owed_t *o = &l->owed[i];
        if (o->until <= l->now_ns || o->slave == slave || o->shape >> 8 != fc)
            continue;
        if (pdu[0] & 0x80)
            return true;   /* an exception answers any question of its function */
        if (o->echo) {
            if (o->echo == line_hash(pdu, len))
                return true;   /* a write's echo: only the same write's */
            continue;
        }
        if (!shape || (o->shape & 0xff) == 0xff || line_shape_stale_like(o->shape, shape))
            return true;   /* a shapeless answer or question, or its shape (or a register short) */
    }
    return false;
}

/* The answer held (I3) for l->cur: must it be confirmed (I9)? */
void line_foreign_check(line_t *l, unsigned slave)
{
    slave_state_t *s = line_slave(l, slave);
    l->pending_foreign = false;
    if (!owed_answer(l, slave, l->pending_pdu, l->pending_len)) {
        s->foreign_hash = 0;
        s->foreign_asks = 0;
        return;
    }
    /* the same question as asked on the wire: an attempt asked in another
     * shape (I6 chose again) may have another answer (a widened read past
     * the map's end: 0x02), and a copy of it is no confirmation */
    uint64_t h = line_hash(l->pending_pdu, l->pending_len), q = line_hash(l->wire.pdu, l->wire.pdu_len);
    if (s->foreign_hash == h && s->foreign_question == q) {
        s->foreign_hash = 0;   /* two answers agree: the slave's own */
        s->foreign_asks = 0;
        return;
    }
    if (s->foreign_question != q)
        s->foreign_asks = 0;
    s->foreign_hash = h;
    s->foreign_question = q;
    l->pending_foreign = true;
}

/* resolve_pending (discipline.c): only I9 stands between the answer held
 * and its delivery. Asked again at once, or refused after CONFIRM_MAX_ASKS. */
void line_foreign_resolve(line_t *l, uint64_t now)
{
    slave_state_t *s = line_slave(l, l->cur.slave);
    gw_count(&l->m.ambiguous);
    gw_count(&l->m.foreign_confirms);
    bool again = ++s->foreign_asks <= CONFIRM_MAX_ASKS;
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: another slave owes an answer this one could "
             "be (I9)%s; %s", l->cfg.name, l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur),
             s->foreign_asks > 1 ? ", and the re-ask's answer differs" : "",
             again ? "asking again at once to confirm it" : "refused (0x0B)");
    if (again) {
        line_park_attempt(l, &l->cur, l->attempts);
        return;
    }
    s->foreign_hash = 0;
    s->foreign_asks = 0;
    line_refuse(l, &l->cur, now);
}
