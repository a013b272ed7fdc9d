/*
 * line/copies.c -- the line discipline's invariant I4 (discipline.c):
 * slaves that repeat their answers. What the slave answered last is kept as
 * a hash (8 bytes a slave, not its 256-byte answer), so a copy of it is
 * known; the first answer equal to the last one for another question is
 * verified by asking again, and a slave found to repeat is asked nothing
 * new for 3x its copy's delay after each answer, and its answers equal to
 * the last one for another question are confirmed as after a give-up (I5).
 */
#include "line/state.h"

#include <string.h>

uint64_t line_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h | 1;   /* never 0: 0 means none */
}

void line_copies_sent(line_t *l, unsigned slave, uint64_t delay_ns)
{
    slave_state_t *s = line_slave(l, slave);
    /* 3x the copy's delay: the hold is a timing margin against a slave's own
     * jitter (CI's ASan run saw a Python test slave's "5 ms" copy arrive past
     * 1.5x, and taken as the next answer: the documented limit of line/discipline.c) */
    uint64_t q = delay_ns * 3 + l->gap_ns;
    uint64_t guard = (uint64_t)s->timeout_ms * 1000000ull;
    if (q > guard)
        q = guard;
    if (s->copies != COPIES_SENT || q > s->quiet_ns)
        line_log(l, CONFIG_LOG_INFO, "bus %s slave %u repeats its answers (a copy %.1f ms after); "
               "asked nothing new for %.1f ms after each answer", l->cfg.name, slave,
               (double)delay_ns / 1e6, (double)q / 1e6);
    s->copies = COPIES_SENT;
    if (q > s->quiet_ns)
        s->quiet_ns = q;
}

/* I5's comparison starts afresh: no answer held to compare, no re-ask counted. */
void line_confirm_reset(slave_state_t *s)
{
    s->confirm_hash = 0;
    s->confirm_asks = 0;
}

void line_confirm_begin(line_t *l, unsigned slave, uint8_t cause)
{
    slave_state_t *s = line_slave(l, slave);
    s->confirming = true;
    s->confirm_cause = cause;
    line_confirm_reset(s);
}

/*
 * I5: after a give-up, the held answer is delivered only when an answer to
 * another attempt of the same question, asked after the guard, has the
 * same bytes. Returns true when it must wait for that (pending_unconfirmed).
 */
static bool confirm_check(line_t *l, slave_state_t *s, uint64_t h, uint64_t q)
{
    if (!s->confirming)
        return false;
    if (s->confirm_hash == h && s->confirm_question == q) {
        s->confirming = false;   /* two attempts agree: the slave answers this question again */
        line_confirm_reset(s);
        return false;
    }
    if (s->confirm_question != q)
        s->confirm_asks = 0;
    s->confirm_hash = h;
    s->confirm_question = q;
    l->pending_unconfirmed = true;
    return true;
}

/* The held answer: is it equal to the slave's last one, for another question
 * (I4)? And after a give-up, has it been confirmed (I5)? */
void line_copies_check(line_t *l, unsigned slave, uint64_t t_last)
{
    slave_state_t *s = line_slave(l, slave);
    uint64_t h = line_hash(l->pending_pdu, l->pending_len);
    uint64_t q = line_hash(l->wire.pdu, l->wire.pdu_len);
    uint64_t asked = line_hash(l->cur.pdu, l->cur.pdu_len);   /* I5 counts re-asks per question asked */
    l->pending_suspect = false;
    l->pending_unconfirmed = false;
    int certified = s->confirming ? line_shape_certifies(l, slave) : CERTIFIED_NOT;
    if (certified) {
        /* I6: no stale frame has this shape, or this function; the copy
         * check (I4) still applies. By function, the confirmation goes on
         * for the functions given up (shapes.c). */
        gw_count(&l->m.certified);
        line_confirm_reset(s);
        if (certified == CERTIFIED_BY_SHAPE) {
            s->confirming = false;
            s->verifying = false;
        }   /* (by function, a verification under way goes on: its re-ask
             * is certified again, and clearing it re-asked for ever) */
    }
    if (s->confirming && !certified) {
        if (!confirm_check(l, s, h, asked))
            s->verifying = false;   /* two fresh answers agree: no copy check (I4) needed */
        return;
    }
    if (s->verifying) {
        /* The answer to the re-ask, asked once the slave was quiet for its
         * guard, settles this answer: the same bytes, this one is real.
         * It is no verdict on the slave: a slave whose equal answers were
         * real once may still repeat later (a copy later than I3's window
         * that lands in its next transaction, or a copy of an exception,
         * which has no shape for I6 to avoid), so the next equal answer
         * that I6 could not shape away is checked again. Other bytes: the
         * slave sends copies (verdict SENT). */
        s->verifying = false;
        if (h != s->last_answer_hash)
            line_copies_sent(l, slave, s->suspect_delay_ns);
        return;
    }
    if (s->last_answer_hash != h || s->last_question_hash == q)
        return;
    if (s->copies == COPIES_UNKNOWN) {   /* (GENUINE: a transport with ids, events.c) */
        l->pending_suspect = true;
        s->suspect_delay_ns = t_last - s->last_answer_end_ns;
    } else if (s->copies == COPIES_SENT) {
        /* A slave known to repeat, equal to its last answer for another
         * question: maybe a copy later than its hold (a slave stalled by its
         * own load). One re-ask cannot settle it, since its answer may be
         * stale too; so it is confirmed as after a give-up (I5): delivered
         * when two attempts, each asked after the guard, agree. It costs
         * two transactions when such a slave really answers two questions
         * with the same bytes. */
        line_confirm_begin(l, slave, CONFIRM_COPY);
        confirm_check(l, s, h, asked);
    }
}

/* An answer goes out: remember it (I4), and keep a repeating slave quiet. */
void line_copies_delivered(line_t *l, const line_request_t *req, const uint8_t *pdu, size_t len,
                             uint64_t t_last)
{
    slave_state_t *s = line_slave(l, req->slave);
    s->last_answer_hash = line_hash(pdu, len);
    s->last_question_hash = line_hash(req->pdu, req->pdu_len);
    s->last_answer_end_ns = t_last;
    if (!s->confirming)   /* still confirming (an answer certified by function): they may still come */
        s->stale_run = 0;
    line_shape_answered(l, req->slave, pdu, len);
    if (s->quiet_ns && t_last + s->quiet_ns > s->hold_until_ns) {
        s->hold_until_ns = t_last + s->quiet_ns;
        s->hold_by_function = false;   /* a repeating slave's quiet holds every question */
    }
}

/* I4 for a late answer: a frame equal to the slave's last answer, for
 * another question than the one it would answer, may be a copy (or, an
 * exception having no shape, the late answer of another question). */
bool line_copies_suspect(const line_t *l, unsigned slave, const uint8_t *pdu, size_t len,
                         const line_request_t *wire)
{
    slave_state_t tmp;
    const slave_state_t *s = line_slave_view(l, slave, &tmp);
    return s->copies != COPIES_GENUINE && s->last_answer_hash && line_hash(pdu, len) == s->last_answer_hash &&
           line_hash(wire->pdu, wire->pdu_len) != s->last_question_hash;
}

/* A frame of the slave that answers nothing: a copy of its last answer? */
void line_copies_stray(line_t *l, unsigned slave, const rtu_frame_t *f)
{
    slave_state_t *s = line_slave(l, slave);
    if (s->last_answer_hash && line_hash(f->adu + 1, f->len - 3u) == s->last_answer_hash &&
        f->t_last_ns > s->last_answer_end_ns)
        line_copies_sent(l, slave, f->t_last_ns - s->last_answer_end_ns);
}

void line_pending_bytes(line_t *l, size_t n)
{
    l->pending_unexplained += (int)n;
}

