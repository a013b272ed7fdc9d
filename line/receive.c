/*
 * line/receive.c -- the frames the framer hands up (line/line.h): each one is
 * the answer to the attempt on the wire (take_answer, held for I3's quiet),
 * the late answer to a slave's parked question (I1), or a frame that answers
 * nothing, dropped with its slave guarded (I2). A frame that fails its CRC
 * is never delivered (F). The invariants and their argument are at the top
 * of line/discipline.c; this file applies them to what is heard.
 */
#include "line/state.h"

#include <string.h>

/*
 * Is this the answer to req? Same slave and function (or its exception),
 * and the shape the request asks for: the byte count its quantity implies,
 * or the exact echo of a write.
 */
static bool frame_matches(const line_request_t *req, const rtu_envelope_t *env, const rtu_frame_t *f)
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

static void verify(line_t *l, const rtu_frame_t *f, const rtu_envelope_t *env)
{
    /* xorshift: a share of frames checked against the reference decoder */
    l->verify_state ^= l->verify_state << 13;
    l->verify_state ^= l->verify_state >> 7;
    l->verify_state ^= l->verify_state << 17;
    if ((double)(l->verify_state >> 11) * 0x1.0p-53 >= l->p.verify_rate)
        return;
    rtu_envelope_t ref;
    rtu_decode_reference(f->adu, f->len, &ref);
    if (memcmp(&ref, env, sizeof ref) != 0) {
        gw_count(&l->m.verify_mismatches);
        line_log(l, CONFIG_LOG_ERROR, "bus %s: decoder mismatch against reference on a %u-byte frame",
               l->cfg.name, f->len);
    }
}

/*
 * The guard after an answer to a question asked again after an attempt
 * timed out (I2: the other attempts' answers may come too). The attempt
 * that timed out still owes its answer, and the answer heard now may be
 * that one, late: then the later attempts' answers are owed, each as late
 * after its own sending. So the guard is sized by that worst reading: with
 * d = this answer's first byte - the end of the first timed-out attempt's
 * sending, a later attempt (sent before now) answered d after it comes
 * before now + d, inside a hold of 1.5 d from this answer's last byte
 * (capped at 4 T, T the timeout in force: the retry went at least a
 * timeout and a guard, 2 T, after the first attempt, so d >= 2 T, and what
 * comes later than 4 T after this answer was over 3 T late; capped at 4x
 * the configured timeout instead, a slave whose timeout had widened was
 * held no longer than its guard: seed 1796604920803976, a retry's late
 * answer 110 ms after the one taken, the hold 52 ms). It is this guard's
 * length only: the slave's timeout does not widen (the same reading also
 * fits a request lost on the line and its retry answered at once, which is
 * no late answer; widening there made every later timeout of a noisy
 * line's slaves 4x longer, and the integrity test's faulty bus missed its
 * 150 s). The explorer's seed
 * 1796601068787067 (a device server): attempt 2 of a read past the map
 * timed out, its exception came 204 ms late and was taken for attempt 3's
 * answer; attempt 3's own came 96 ms after it (the guard was 83 ms) with a
 * copy 98 ms later, and the two were taken for the next read's answer and
 * its confirmation. Without a timed-out attempt (a first answer, a retry
 * after damage, I4's and I9's re-asks at once) the guard is as before.
 */
static void guard_owed_attempts(line_t *l, unsigned slave, const rtu_frame_t *f, uint8_t fc)
{
    slave_state_t *s = line_slave(l, slave);
    uint64_t first_byte = f->t_last_ns - line_wire_ns(l, f->len);
    if (!s->timed_out_send_ns || first_byte <= s->timed_out_send_ns)
        return;
    uint64_t d = first_byte - s->timed_out_send_ns, hold = d * 3 / 2;
    uint64_t cap = (uint64_t)s->timeout_ms * TIMEOUT_WIDEN_LIMIT * 1000000ull;   /* T: the timeout in force */
    line_guard_extend(l, slave, fc, f->t_last_ns + (hold < cap ? hold : cap));
}

/* The answer to l->cur (asked as l->wire, l->attempts times): held
 * until the quiet vouches for it (I3). */
static void hold_answer(line_t *l, const rtu_frame_t *f, const rtu_envelope_t *env, uint64_t now)
{
    unsigned slave = l->cur.slave;
    slave_state_t *s = line_slave(l, slave);

    l->busy = false;
    l->deadline_ns = 0;
    gw_count(&l->m.responses);
    gw_count(&l->sm[slave].responses);
    if (env->function & 0x80) {
        gw_count(&l->m.exceptions);
        gw_count(&l->sm[slave].exceptions);
    }
    s->failures = 0;
    s->dead_until_ns = 0;
    gw_set(&l->sm[slave].dead, 0);
    gw_set(&l->sm[slave].last_ok_ns, now);
    if (l->attempts > 1 && s->copies == COPIES_SENT)   /* I9: this may be a copy, a later attempt's answer owed */
        line_owed_push(l, &l->wire, now, OWED_ANSWERED_TIMEOUTS);
    if (l->attempts > 1 && s->verifying)
        line_guard_slave_function(l, slave, f->t_last_ns, l->wire.pdu[0]);   /* I2, I4's re-ask */
    else if (l->attempts > 1)
        line_guard_slave(l, slave, f->t_last_ns);   /* I2: the other attempt may answer too */
    if (l->attempts > 1)
        guard_owed_attempts(l, slave, f, l->wire.pdu[0]);
    l->pending = true;
    l->pending_doubtful = false;
    l->pending_unexplained = 0;
    l->pending_t_last_ns = f->t_last_ns;
    l->pending_noise_mark = f->noise_mark;
    l->pending_len = (uint16_t)(f->len - 3u);
    memcpy(l->pending_pdu, f->adu + 1, l->pending_len);
    line_copies_check(l, slave, f->t_last_ns);
    line_foreign_check(l, slave);   /* I9 */
}

/* The answer to the attempt in flight. */
static void take_answer(line_t *l, const rtu_frame_t *f, const rtu_envelope_t *env, uint64_t now)
{
    gw_observe_latency(&l->m, now - l->t_first_send_ns);
    hold_answer(l, f, env, now);
}

/*
 * I7: the late answer to a slave's parked question (I1) is taken only while
 * the line is free -- no attempt on the wire, no answer held -- and then it
 * is held for I3's quiet like any answer: it becomes the line's current
 * question again (unparked, asked as its attempts were, `wire`). Heard
 * during another slave's attempt or window, it is dropped and its slave
 * guarded (I2), and the parked question asked again after the guard: a
 * frame with its slave's address may be another slave's answer that a
 * device server put that address on, just before the real one (issue 40:
 * slave 2's exception, addressed to slave 3, taken for slave 3's parked
 * question); I3's window is where that shows, and one window at a time is
 * what the line core can watch.
 */
static void take_late_answer(line_t *l, const rtu_frame_t *f, const rtu_envelope_t *env,
                             const line_request_t *wire, uint64_t now)
{
    unsigned slave = env->slave;
    slave_state_t *s = line_slave(l, slave);
    uint64_t first_byte = f->t_last_ns - line_wire_ns(l, f->len);

    line_unpark(l, slave, &l->cur, &l->attempts);
    l->wire = *wire;
    gw_count(&l->m.late_answers);
    gw_count(&l->sm[slave].late_answers);
    line_slave_event(l, slave, EV_LATE, now);
    line_widen_timeout(l, slave, first_byte > s->last_send_ns ? first_byte - s->last_send_ns : 0);
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: late answer held for its parked question",
             l->cfg.name, slave, l->cur.pdu[0], line_req_address(&l->cur));
    hold_answer(l, f, env, now);
}

/* A good frame that is not the answer to the attempt on the wire. */
static void on_other_frame(line_t *l, const rtu_frame_t *f, const rtu_envelope_t *env, uint64_t now)
{
    unsigned slave = env->slave;
    slave_state_t *s = slave < N_SLAVES ? line_slave(l, slave) : NULL;
    uint64_t first_byte = f->t_last_ns - line_wire_ns(l, f->len);

    if (l->pending)
        l->pending_unexplained -= f->len;   /* a whole frame explains its bytes */
    if (l->pending && slave != l->cur.slave)
        l->pending_doubtful = true;   /* I3: two talkers in the window; which one's was the answer? */
    if (l->pending && slave == l->cur.slave) {
        /* I3: a second candidate in the vouching window. */
        if (f->len - 3u != l->pending_len || memcmp(f->adu + 1, l->pending_pdu, l->pending_len) != 0)
            l->pending_doubtful = true;
        else
            line_copies_sent(l, slave, f->t_last_ns - l->pending_t_last_ns);   /* I4 */
        gw_count(&l->m.foreign_frames);
        line_guard_slave(l, slave, f->t_last_ns);
        line_slave_event(l, slave, EV_DROPPED, now);
        return;
    }
    if (!s || !slave) {
        gw_count(&l->m.foreign_frames);
        return;
    }
    line_request_t wire;
    if (s->parked) {   /* as its attempts were asked (I6) */
        wire = *s->parked;
        if (s->parked_wire_qty) {
            wire.pdu[3] = (uint8_t)(s->parked_wire_qty >> 8);
            wire.pdu[4] = (uint8_t)s->parked_wire_qty;
        }
    }
    /*
     * I4 holds for a late answer too: one equal to the slave's last answer,
     * for another question, is not taken for the parked question (it may be
     * a copy, or an exception, which has no shape, answering an earlier
     * question later than its guard: the explorer's seed 1796189804553487).
     * It answers nothing: dropped and the slave guarded, and the parked
     * question is asked again after the guard.
     */
    bool suspect = s->parked && line_copies_suspect(l, slave, f->adu + 1, f->len - 3u, &wire);
    if (s->parked && s->parked_attempts && frame_matches(&wire, env, f) && !s->confirming && !suspect &&
        !l->busy && !l->pending) {
        /* The late answer to the slave's one outstanding question (I1), on a free line (I7). */
        take_late_answer(l, f, env, &wire, now);
        return;
    }
    /* Answers nothing: late to a question given up, a duplicate, or not
     * ours. Dropped, and the slave guarded (I2). */
    bool late = s->hold_until_ns > now;
    if (l->busy && slave == l->cur.slave) {
        if (env->function == l->wire.pdu[0] && !line_shape_may_be_stale(s, f->adu + 1, f->len - 3u)) {
            l->misshapen = true;   /* line_on_timeout: not asked again */
            line_shape_answered(l, slave, f->adu + 1, f->len - 3u);   /* I6: its copies have its shape */
        } else {
            l->guarded_other = true;
        }
    }
    gw_count(late ? &l->m.late_bytes_guarded : &l->m.foreign_frames);
    if (late && first_byte > s->last_send_ns)
        line_widen_timeout(l, slave, first_byte - s->last_send_ns);
    line_guard_slave(l, slave, f->t_last_ns);
    if (!suspect)   /* a suspect is no proof of copies: it may be real and late */
        line_copies_stray(l, slave, f);
    line_slave_event(l, slave, EV_DROPPED, now);
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u: frame dropped (%s); slave guarded %u ms",
           l->cfg.name, slave, env->function, late ? "late, in its guard" : "answers no question",
           s->timeout_ms);
}

/*
 * A frame that fails its CRC but starts with a slave's address and the
 * function last asked of it is most likely that slave's answer, damaged --
 * and a slave that sent a damaged answer may still send another (a copy, a
 * late one). It is never delivered (F), but it counts for the slave's guard
 * (I2) and widens its timeout like a late answer: both only make the bus
 * wait longer, never take a frame for an answer. Returns the slave (0: none).
 * The guard is not set when the damaged answer is to the attempt in flight
 * and that attempt is asked again at once (retry_after_damage): the guard
 * would only be lifted again, and a guard set earlier by another frame must
 * stay (it is not lowered).
 */
static bool retry_after_damage_allowed(const line_t *l, unsigned slave)
{
    return l->busy && slave == l->cur.slave && l->attempts <= l->cfg.retries &&
           !line_slave_view(l, slave, &(slave_state_t){ 0 })->failures;
}

static unsigned garbled_from(line_t *l, const rtu_frame_t *f)
{
    if (f->len < 2 || f->adu[0] == 0 || f->adu[0] >= N_SLAVES)
        return 0;
    unsigned slave = f->adu[0];
    slave_state_t *s = line_slave(l, slave);
    if (!s->last_fc || (f->adu[1] & 0x7F) != s->last_fc)
        return 0;
    uint64_t first_byte = f->t_last_ns - line_wire_ns(l, f->len);
    if (first_byte > s->last_send_ns)
        line_widen_timeout(l, slave, first_byte - s->last_send_ns);
    if (!retry_after_damage_allowed(l, slave)) {
        line_guard_slave(l, slave, f->t_last_ns);
        if (l->busy && slave == l->cur.slave)
            l->guarded_other = true;
    }
    return slave;
}

/*
 * The attempt in flight got a damaged answer from its own slave. Waiting
 * out the deadline and a guard cost ~420 ms per damaged answer, and three
 * in a row backed a healthy slave off. Asking again at once is safe by I1:
 * the retry is the same question, so the answer to either attempt answers
 * it, and an answer to a question asked twice guards the slave (I2), so the
 * other answer cannot reach the next question. Only while retries remain;
 * the last attempt still waits for its deadline (its answer may yet come).
 * No guard is added (garbled_from left it out: the line's own rest after the
 * last byte is enough), and none already set is lowered.
 */
static bool retry_after_damage(line_t *l)
{
    if (!retry_after_damage_allowed(l, l->cur.slave))
        return false;
    l->busy = false;
    l->deadline_ns = 0;
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: attempt %u answered damaged; asking again",
           l->cfg.name, l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur), l->attempts);
    line_park_attempt(l, &l->cur, l->attempts);
    return true;
}

static void on_frame(line_t *l, const rtu_frame_t *f)
{
    rtu_envelope_t env;
    uint64_t now = l->now_ns;

    line_log_frame(l, f->crc_ok ? "rx" : "rx (bad crc)", f->adu, f->len);
    if (l->p.router)
        router_decode(l->p.router, f->adu, f->len, &env);
    else
        rtu_decode_fallback(f->adu, f->len, &env);
    if (l->p.verify_rate > 0)
        verify(l, f, &env);
    if (env.status != RTU_OK) {
        /* Never delivered (F), and never the end of an attempt: the real
         * answer may still come. In the vouching window it makes the held
         * answer doubtful (I3). */
        gw_count(&l->m.crc_errors);
        if (l->pending)
            l->pending_doubtful = true;
        unsigned from = garbled_from(l, f);
        if (from && l->busy && from == l->cur.slave)
            retry_after_damage(l);
        line_log(l, CONFIG_LOG_DEBUG, "bus %s: bad frame (%s, %u bytes) dropped", l->cfg.name,
               rtu_status_name((rtu_status_t)env.status), f->len);
        return;
    }
    if (l->busy && frame_matches(&l->wire, &env, f))
        take_answer(l, f, &env, now);
    else
        on_other_frame(l, f, &env, now);
}

void line_drain_frames(line_t *l)
{
    rtu_frame_t f;
    while (rtu_framer_next(l->framer, &f))
        on_frame(l, &f);
}
