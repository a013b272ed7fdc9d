/*
 * line/discipline.c -- the line discipline of the line core (line/line.h). It owns the line's
 * request queues, the one attempt on the wire, each slave's state (its
 * parked retry, back-off; its guard and adaptive timeout are kept by
 * slave.c), and the framer that turns the port's timestamped chunks into
 * frames.
 *
 * THE LINE DISCIPLINE. RTU carries no transaction id: an answer names its
 * slave and function (CRC-protected), and its shape (byte count, or the echo
 * of a write), never the address it answers. So the discipline is built on
 * one fact and keeps the invariants below (I7-I9, about another slave's
 * address, are argued in receive.c and foreign.c).
 *
 *   Fact F. A frame with a good CRC can only be taken for the answer to a
 *   request with the same slave, function and shape (frame_matches). Bytes
 *   with a bad CRC, cut frames and noise are never delivered.
 *
 *   I1 (one question per slave). At most one question is outstanding to a
 *   slave: asked and neither answered nor given up. A retry asks the same
 *   question again, so an answer to any of its attempts answers it. A slave
 *   is asked nothing new while it has a parked (waiting-to-retry) question.
 *
 *   I2 (guard). After anything that may leave an answer of slave S still to
 *   come -- an attempt that timed out, a question given up, an answer to a
 *   question asked more than once, a frame from S that answered nothing --
 *   S is asked nothing new (not even the retry) until S has been quiet for
 *   its guard: its current response timeout, measured from the last frame
 *   heard from S (or from the timeout, if S said nothing). Frames from S in
 *   that window answer nothing: they are dropped, counted, logged, and they
 *   restart the guard. By function: a guard set only by give-ups (nothing
 *   else held S) holds only questions of the functions given up since S's
 *   last answer, and one set only by I4's re-asks only questions of their
 *   functions, each until its own re-ask's guard has passed; by F their
 *   late answers cannot answer another function's question
 *   (line_on_timeout, line_guard_slave_function, line_queue_pick).
 *
 *   I3 (vouched answers). An answer is delivered only once the line has been
 *   quiet for the inter-frame gap after it. A second candidate in that window
 *   (a duplicate with different bytes, or bytes that fail their CRC), or a
 *   frame of another slave (two talkers: which one sent the answer?), makes
 *   it doubtful: the question is asked again if it may be, else refused
 *   (0x0B). A duplicate with the same bytes carries the same values and is
 *   delivered; S is then guarded (I2). The port lost before the quiet after
 *   it was heard vouches for nothing: 0x0A (line_pending_port_lost).
 *
 *   I4 (copies). A slave that repeats its answer (firmware, a repeater) can
 *   put a copy of answer n where answer n+1 is expected, after the window of
 *   I3, when answer n+1 is late or was never sent (a slave deaf while it
 *   repeats). Such a copy is equal, byte for byte, to the slave's last
 *   answer, while the question differs. I6 asks reads in a shape no copy of
 *   the slave's last answers has, so this is left to what I6 cannot shape:
 *   an exception (it has no shape), a write's echo, a read at its map's
 *   end. There, an answer equal to the slave's last one for another
 *   question is not delivered: the same question is asked again at once
 *   (after the line's rest, with no guard), and the re-ask's answer settles
 *   it. No guard is needed before it: the re-ask is the same question (I1),
 *   so the answer to either attempt carries its values; for equal bytes to
 *   be wrong, both would have to be frames that answer neither attempt
 *   (two copies of earlier equal answers, one after the other), with the
 *   real answers of both attempts heard in neither's I3 window -- a slave
 *   that is alive answers the first attempt during the re-ask, and that
 *   answer is the re-ask's (it matches the same question). What the re-ask
 *   may leave behind (the other attempt's answer) carries the question's
 *   function, so by F it can answer only a question of that function: only
 *   those wait for the guard after it (I2 by function); others go at once
 *   (libmodbus's suite asks each function twice for an illegal address:
 *   equal exceptions, each now one transaction more instead of a guard
 *   its 500 ms client gave up on). The same
 *   bytes again: this answer is real, and delivered (no verdict on the
 *   slave: one that answered equal values once may still repeat later, and
 *   a verdict that equal answers are real let a late copy through, the
 *   explorer's seed 1796177181515386). Other bytes: the slave sends copies
 *   (verdict SENT), and from then on it is asked nothing new for 3x the
 *   copy's delay after each answer, so its copies fall where they answer
 *   nothing. A copy seen where it answers nothing (in I3's window, or
 *   unasked) gives the same verdict. The hold is only a timing margin: a
 *   copy later than it (the slave stalled by its own load) is again equal
 *   to the last answer for another question, so a SENT slave's such answer
 *   is confirmed as after a give-up (I5): one re-ask would not do, its
 *   answer may be stale too (an always-late slave is SENT by its retries'
 *   answers). (A Modbus TCP device's transaction ids settle copies: GENUINE.)
 *
 *   I5 (after a give-up). A question given up may still be answered, later
 *   than any guard if the slave stalled (a busy PLC, a scheduler): that
 *   answer has the shape of the question given up, and so of the slave's
 *   next question of the same kind, unless I6 shapes it otherwise. So after
 *   a give-up, the slave's first answer is delivered at once only when I6
 *   vouches for it (its shape is none a stale frame of the slave can have,
 *   or its function none of the questions given up: line_shape_certifies;
 *   by function, the confirmation goes on for the functions given up, since
 *   a slave may answer out of order); else only when two attempts of one question, each
 *   asked after the slave's guard, are answered with the same bytes: a
 *   stale answer arrives once, or with its copy, which comes within
 *   COPY_WINDOW_TIMEOUTS of the slave's longest timeout (I3 sees an adjacent one;
 *   the re-ask waits out a later one, where a slave may repeat), and while
 *   the slave is confirming no frame is taken for a parked question. At
 *   most CONFIRM_MAX_ASKS re-asks, then 0x0B. The fallback costs one
 *   transaction and a guard (two timeouts where copies are not ruled out)
 *   after a give-up.
 *
 *   I7, I8, I9 (another slave's address: receive.c, foreign.c). F trusts a
 *   frame's address; a device server that mixes up its ports' frames puts
 *   slave T's address on S's answer, just before S's own (issue 40). While
 *   S's answer comes in its time nothing is lost: only S's attempt is on
 *   the line. So: a late answer to a parked question is taken only on a free
 *   line, and held for I3's quiet like any answer (I7); after a reconnect
 *   with answers owed, the line asks nothing until it has been quiet for the
 *   owed slaves' longest timeout (I8: a device server forwards its line to
 *   the next connection); and the shapes of answers owed after their time
 *   (a timeout, a give-up) are kept line-wide for a while: other slaves'
 *   reads avoid them (I6), and an answer they cannot shape away (an
 *   exception, an equal write's echo) is delivered when the same question,
 *   asked again at once, is answered alike (I9).
 *
 *   I6 (shapes, line/shapes.c). By F a frame can only answer a question of
 *   its shape. So a read whose answer would have the shape of one of the
 *   slave's last answers (a copy of it) or of its last questions given up
 *   (their late answers) is asked one register wider (coils: a byte wider),
 *   where the slave's map allows (learned: a widened read refused with 0x02
 *   or 0x03 is asked again as it came (I4 checks it), and no widened read
 *   reaches that end again), and its answer trimmed to what was asked. No
 *   stale frame of those can then be taken for its answer: equal values cost
 *   nothing (no re-ask, no guard), and after a give-up the next answer
 *   needs no confirmation. The attempts of a question are asked in one
 *   shape unless an answer heard between them changed the slave's state;
 *   then an earlier attempt's answer matches nothing and is dropped (F),
 *   but for a refusal, which has no shape: one after attempts in two shapes
 *   is not delivered, the question asked again as it came (asked_widened).
 *   A question answered after attempts it may still owe the answers of (one
 *   timed out, or copies are not ruled out) keeps their shapes as a
 *   give-up's (line_shape_owed), and where a refusal may be owed (attempts
 *   in two shapes, or a transient exception delivered) its slave's next
 *   answer of that function is confirmed (I5).

 * Why no wrong answer follows, scenario by scenario (docs/line.md has
 * the long form):
 *   - noise before a slow answer: bad bytes never end an attempt; the bus keeps
 *     listening until the deadline, so the real answer is taken, once;
 *   - a slave slower than its timeout: the attempt's question is parked and S
 *     guarded (I2); the late answer, heard in the guard, answers the parked
 *     question, its only outstanding one (I1). Heard after a give-up, it is
 *     dropped. Either way S's timeout widens to 1.5x the latency heard
 *     (bounded by 4x the configured timeout), so the next guard covers it;
 *   - a slave that queues requests and answers the retry too: an answer to a
 *     question asked twice guards S (I2), so the second answer is dropped;
 *   - a slave that answers twice: the copy is heard either in the vouching
 *     window (I3) or in a later transaction of S where, if it is not caught
 *     by I3 there, it is a frame that answers nothing and guards S (I2);
 *   - a slave that stalls past its guard after a question was given up: its
 *     stale answer is the first candidate after the give-up, and I5 asks
 *     again until two answers agree;
 *   - a slave that answers in another shape (a register short): by F its
 *     frame answers nothing; when no stale frame of it can have that shape
 *     (I6), the question is given up at its deadline, not asked again
 *     (line_on_timeout);
 *   - the remaining, documented limits: a frame from S later than S's guard
 *     after the last thing heard from S, with the same shape as S's next
 *     question, while no question of S was given up (every earlier one
 *     answered), cannot be told from its answer. The guard widens each time
 *     a late answer is heard, so a slave pays for this once, not forever.
 *     And an answer owed to the line later than I9's window (10 of its
 *     slave's timeouts), with another slave's address and the shape of that
 *     slave's question, cannot be told from that slave's answer. And a
 *     stale exception's copy later than COPY_WINDOW_TIMEOUTS (of the
 *     slave's longest timeout) after it, where
 *     I5's re-ask is answered, confirms it (a slave that repeats its frames
 *     that late is outside the model: a repeater's copy comes within ms).
 *     And F rests on CRC-16: a damaged frame that passes it (about one
 *     damaged frame in 65,536) is a frame no slave sent, which no master
 *     can tell from one (the explorer's simulator keeps such frames out).
 *
 * The guard holds one slave, not the line (RS-485 is half-duplex, but by
 * Fact F a late frame of S cannot be taken for another slave's answer): while
 * S is guarded, other slaves are served. A late answer of S that collides
 * with another slave's exchange garbles both; garbled bytes are never
 * delivered (F), and that exchange times out and is retried. The line as a
 * whole rests only for the inter-frame gap after the last byte heard.
 *
 * Isolation: a slave that failed its last transaction gets no retries (a
 * retry of a slave that keeps failing buys nothing and costs a timeout); after
 * `dead_after` failed transactions it is backed off for `dead_backoff_ms`
 * (answered 0x0B at once, no line time), and the first request after that is
 * one attempt, a probe.
 *
 * Every request gets exactly one answer: data, the slave's exception, or a
 * gateway exception (0x06 queue full, 0x0A port down, 0x0B no answer or a
 * doubtful one, 0x01 a broadcast that is not a write), in bounded time: its
 * attempts are bounded by retries, and its re-asks to confirm an answer
 * (I4, I5, I9 together) by REASKS_MAX.
 *
 * Every transport keeps F's side of the contract (drivers/driver.h): RTU on a
 * line or a TCP stream, ASCII and MBAP alike hand up RTU frames, and one that
 * is not what was asked for (damaged, a bad LRC, a transaction id not in
 * flight) fails its CRC. What differs is only the time a byte takes on the
 * wire, which the deadlines include: events.c sets it per transport.
 */
#include "line/state.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- answers and logging ------------------------------------------------- */

/* Every answer leaves the line here, and through the host's answered
 * operation first: data, the slave's exception, or the line's own. */
void line_deliver(line_t *l, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    if (req->t_sent_ns)
        gw_observe_causes(&l->m, req, l->now_ns);
    if (req->priority)
        line_priority_answered(l);
    if (l->env.answered)
        l->env.answered(l->env.ctx, req);
    req->origin->ops->answer(req->origin, req, pdu, len);
}

void line_answer_exception(line_t *l, const line_request_t *req, uint8_t code)
{
    uint8_t pdu[2] = { (uint8_t)(req->pdu[0] | 0x80), code };
    line_deliver(l, req, pdu, sizeof pdu);
}

static bool debug_on(const line_t *l)
{
    return l->p.log_level >= CONFIG_LOG_DEBUG;
}

void line_log(const line_t *l, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (level > l->p.log_level || !l->env.log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    l->env.log(l->env.ctx, level, msg);
}

/* At debug level, every frame on the line in hex: what an engineer with a
 * bus monitor would want to see, without a bus monitor. The web page's
 * monitor gets each one too, at any level, when [http] frame_ring is set. */
void line_log_frame(const line_t *l, const char *dir, const uint8_t *p, size_t n)
{
    char hex[3 * RTU_MAX_ADU + 1];
    if (l->env.frame)
        l->env.frame(l->env.ctx, dir[0] == 't', p, n);
    if (!debug_on(l))
        return;
    for (size_t i = 0; i < n && i < RTU_MAX_ADU; i++)
        snprintf(hex + 3 * i, 4, "%02x ", p[i]);
    hex[n ? 3 * (n < RTU_MAX_ADU ? n : RTU_MAX_ADU) - 1 : 0] = 0;
    line_log(l, CONFIG_LOG_DEBUG, "bus %s %s %s", l->cfg.name, dir, hex);
}

unsigned line_req_address(const line_request_t *r)
{
    return r->pdu_len >= 3 ? (unsigned)(r->pdu[1] << 8 | r->pdu[2]) : 0;
}

/* ---- wire time ------------------------------------------------------------- */

/* bus.c sets wire_bits per transport: two characters a byte in ASCII, none
 * for a Modbus TCP device, which has no serial line. */
uint64_t line_wire_ns(const line_t *l, size_t bytes)
{
    return (uint64_t)bytes * l->wire_bits * 1000000000ull / l->cfg.baud;
}

/* The length of the answer a request asks for; the longest frame when the
 * function has no known shape. The deadline must include it: at 9600 baud
 * 125 registers take 265 ms on the wire. */
static size_t answer_len(const line_request_t *r)
{
    unsigned qty = r->pdu_len >= 5 ? (unsigned)(r->pdu[3] << 8 | r->pdu[4]) : 0;
    switch (r->pdu[0]) {
    case 1: case 2: return 5 + (qty + 7) / 8;
    case 3: case 4: case 23: return 5 + 2u * qty;
    case 5: case 6: case 15: case 16: return 8;
    case 22: return 10;
    default: return RTU_MAX_ADU;
    }
}

/* ---- timers ------------------------------------------------------------------ */


void line_arm_timeout(line_t *l, uint64_t deadline)
{
    uint64_t now = l->now_ns;

    l->deadline_ns = deadline;
    if (l->timer_at_ns && l->timer_at_ns <= deadline)
        return;   /* the pending timer fires first and re-arms for this deadline */
    l->timer_at_ns = deadline;
    l->timer_id = 0;
    l->env.arm(l->env.ctx, LINE_TIMER_DEADLINE, deadline, now, &l->timer_id);
}

/* Not busy: no attempt has a deadline, and the timer armed for one would
 * wake the loop only for on_timer to find nothing to do. Under dense traffic
 * (the line idle for less than SPARSE_NS before this attempt) the next
 * request is likely to come before it fires and reuse it, where cancelling
 * and arming again would cost two timerfd syscalls per request against one
 * wake-up per timeout; under sparse traffic (a poll every few hundred ms)
 * each stale fire is a wake-up of its own, so it is cancelled. A cancel that
 * misses (the message is already in the mailbox) changes nothing: on_timer
 * clears timer_at_ns when it comes. */
#define SPARSE_NS 10000000ull

static void drop_deadline_timer(line_t *l, uint64_t now)
{
    if (l->busy)
        return;
    if (!l->idle_since_ns)
        l->idle_since_ns = now;
    if (!l->sparse || !l->timer_at_ns || !l->timer_id)
        return;
    if (l->env.cancel(l->env.ctx, l->timer_id) == 0)
        l->timer_at_ns = 0;
    l->timer_id = 0;
}

static void arm_kick(line_t *l, uint64_t at, uint64_t now)
{
    if (l->kick_pending && l->kick_at_ns <= at)
        return;
    l->kick_pending = true;
    l->kick_at_ns = at;
    l->env.arm(l->env.ctx, LINE_TIMER_KICK, at, now, NULL);
}


/* ---- transactions ------------------------------------------------------------ */

/* req waits for its slave's guard to be asked again (I1); the wait is its
 * guard time, or its confirmation's once an answer of it was held back. */
void line_park_attempt(line_t *l, const line_request_t *req, unsigned attempts)
{
    /* as its attempts were asked: a late answer has that shape (I6's
     * choice may differ by the time it comes, I9's owed answers) */
    bool asked = req == &l->cur && l->wire.pdu_len == 5 && l->wire.pdu[0] >= 1 && l->wire.pdu[0] <= 4;
    line_slave(l, req->slave)->parked_wire_qty = asked ? (uint16_t)(l->wire.pdu[3] << 8 | l->wire.pdu[4]) : 0;
    line_request_t r = *req;
    r.t_parked_ns = l->now_ns;
    line_park(l, &r, attempts);
}


static void send_broadcast(line_t *l, size_t n, uint64_t now)
{
    /* Nobody answers a broadcast. A write is acknowledged with what a slave
     * would have echoed: the whole request PDU for 5, 6 and 22, function,
     * address and quantity for 15 and 16. The line rests while slaves act. */
    const line_request_t *r = &l->cur;
    size_t echo_len = (r->pdu[0] == 15 || r->pdu[0] == 16) ? 5 : r->pdu_len;
    gw_count(&l->m.broadcasts);
    line_deliver(l, r, r->pdu, echo_len);
    l->busy = false;
    l->t_line_free_ns = now + line_wire_ns(l, n) + l->gap_ns + BROADCAST_TURNAROUND_NS;
}

static void send_current(line_t *l)
{
    uint8_t adu[RTU_MAX_ADU];
    if (line_shape_question(l, &l->cur, &l->wire))   /* I6 */
        gw_count(&l->m.shaped);
    int n = rtu_adu_from_pdu(l->wire.slave, l->wire.pdu, l->wire.pdu_len, adu, sizeof adu);
    uint64_t now = l->now_ns;

    if (n < 0) {   /* the front end validated the length: cannot happen, still answered */
        l->busy = false;
        line_refuse(l, &l->cur, now);
        return;
    }
    l->sparse = l->idle_since_ns && now - l->idle_since_ns >= SPARSE_NS;
    l->idle_since_ns = 0;
    rtu_framer_reset(l->framer);
    line_log_frame(l, "tx", adu, (size_t)n);
    l->env.write(l->env.ctx, adu, (size_t)n);
    l->busy = true;
    if (++l->attempts == 1)
        l->t_first_send_ns = now;
    if (!l->cur.t_sent_ns)
        l->cur.t_sent_ns = now;
    else
        gw_count(&l->m.retries);
    if (l->cur.slave == 0) {
        send_broadcast(l, (size_t)n, now);
        return;
    }
    slave_state_t *s = line_slave(l, l->cur.slave);
    /* I6: the shapes this question was asked in, each attempt's: given up,
     * each one's late answer may come (the explorer's seed 1796536010591987:
     * a first attempt asked a register wider than its retry) */
    uint16_t shape = line_shape_of_question(&l->wire);
    if (l->attempts == 1) {
        s->asked_shape[0] = s->asked_shape[1] = 0;
        s->timed_out_send_ns = 0;
    }
    if (s->asked_shape[0] != shape) {
        s->asked_shape[1] = s->asked_shape[0];
        s->asked_shape[0] = shape;
    }
    l->misshapen = false;
    l->guarded_other = false;
    l->hold_at_send_ns = s->hold_until_ns;
    s->last_send_ns = now + line_wire_ns(l, (size_t)n);
    s->last_fc = l->cur.pdu[0];
    line_arm_timeout(l, s->last_send_ns + line_guard_ns(s) + line_wire_ns(l, answer_len(&l->wire)));
}

/*
 * The answer to req's wire question goes out, trimmed to what req asked
 * (I6). A widened read refused (illegal address or value) says where the
 * slave's map ends: it is learned, nothing is delivered, and req is asked
 * again at once as it came (I1: its one question was answered, by the
 * refusal; no answer of it is outstanding). Parked with no attempt, it is
 * no question asked yet: no frame is taken for it (on_other_frame). It goes
 * at once, with no guard: the refusal is the slave's last answer now, so a
 * copy of it (an exception has no shape) answering the question as it came
 * is an answer equal to the last one for another question, which I4 checks.
 */
/*
 * An attempt asked in another shape than the last (a widened first attempt
 * timed out, its retry asked as it came: line_shape_question chose again)
 * may be the one a refusal answers: an exception has no shape, so the
 * widened attempt's late refusal matches the retry too (the explorer's
 * seed 1796601240790833: a read of 898..899 widened past the map end at
 * 900, its refusal stalled 400 ms and taken for the retry's answer, as
 * it came, whose answer is data). Which attempt it refused is unknown, so
 * nothing is learned and nothing delivered: req is asked again as it came,
 * as after a widened read refused (below). If the refusal was the retry's
 * own, the next one says so again; if it was the widened one's, the retry's
 * own answer, owed, is of req as it came and carries its values (I1).
 */
static bool asked_widened(const line_t *l, const line_request_t *req)
{
    slave_state_t tmp;
    const slave_state_t *s = line_slave_view(l, req->slave, &tmp);
    uint16_t own = line_shape_of_question(req);
    return (s->asked_shape[0] && s->asked_shape[0] != own) || (s->asked_shape[1] && s->asked_shape[1] != own);
}

void line_deliver_shaped(line_t *l, const line_request_t *req, const line_request_t *wire, const uint8_t *raw,
                           size_t len, uint64_t t_last)
{
    line_copies_delivered(l, wire, raw, len, t_last);
    bool exception = len == 2 && (raw[0] & 0x80);
    bool refusal = exception && (raw[1] == MB_EX_ILLEGAL_DATA_VALUE || raw[1] == 2);
    if (refusal && memcmp(wire->pdu, req->pdu, req->pdu_len) != 0) {
        line_shape_refused(l, wire);
        line_park_attempt(l, req, 0);
        return;
    }
    if (refusal && asked_widened(l, req)) {
        gw_count(&l->m.ambiguous);
        line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: a refusal after attempts in two shapes "
                 "(one widened); asking again as it came", l->cfg.name, req->slave, req->pdu[0],
                 line_req_address(req));
        line_park_attempt(l, req, 0);
        return;
    }
    /* I6, I5: the attempts it may still owe (line_shape_owed): one that
     * timed out; or any, where copies are not ruled out (a frame taken for
     * an attempt's answer may have been a copy of another's: the explorer's
     * seed 1796616093835754, a slave never seen repeating). Not after a
     * refusal of the question itself (illegal function, address or value)
     * from a slave not known to repeat: every attempt of the same question
     * is refused alike, so what is owed is that exception again, which has
     * no shape, and I4 checks it where it lands (libmodbus's suite re-asks
     * such equal exceptions; their shapes kept widened its next read of one
     * register to two, which its server answers a register short: 7 of its
     * 111 checks). A refusal has no shape, so where one may be owed the
     * slave's next answer of that function is confirmed, as after a
     * give-up: after attempts in two shapes (one widened past the map), or
     * after a transient exception (device failure, busy: the attempt it
     * did not answer may be refused; the explorer's seed 1796617584837882,
     * a widened read's refusal owed behind 83 04 and taken for the next
     * read). */
    slave_state_t *ss = req == &l->cur && l->attempts > 1 && req->slave && req->slave < N_SLAVES
                            ? line_slave(l, req->slave) : NULL;
    bool own_refusal = exception && raw[1] >= 1 && raw[1] <= 3;
    /* (asked_shape[1] is set only when the attempts' shapes differ) */
    bool refused_alike = own_refusal && ss && !ss->asked_shape[1];
    if (ss && (ss->timed_out_send_ns || ss->copies == COPIES_SENT ||
               (ss->copies != COPIES_GENUINE && !refused_alike))) {
        line_shape_owed(l, req->slave);
        if (ss->asked_shape[1] || (exception && !own_refusal))
            line_confirm_begin(l, req->slave, CONFIRM_GIVE_UP);
    }
    uint8_t pdu[RTU_MAX_PDU];
    size_t n = line_shape_trim(req, raw, len, pdu);
    line_deliver(l, req, pdu, n);
}

/* The question on the wire is given up, and its answer may still come,
 * late: I4's check of its slave is unsettled (the next equal answer is
 * checked again), I6 keeps its shape for the next question to avoid, and
 * I5 confirms the slave's next answer. Every give-up goes through here: a
 * timeout's, a refusal's, a lost port's. */
static void give_up_on_wire(line_t *l)
{
    slave_state_t *s = line_slave(l, l->cur.slave);
    line_owed_push(l, &l->wire, l->now_ns, OWED_WINDOW_TIMEOUTS);   /* I9 */
    s->verifying = false;
    uint16_t last = line_shape_of_question(&l->wire);
    unsigned earlier = 0;
    for (unsigned i = 2; i-- > 0;)   /* an earlier attempt asked in another shape: its late answer too */
        if (s->asked_shape[i] && s->asked_shape[i] != last) {
            line_shape_given_up_shape(l, l->cur.slave, s->asked_shape[i]);
            earlier++;
        }
    line_shape_given_up(l, &l->wire);
    s->stale_run += earlier;   /* (each shape one question given up: the run counts what is kept) */
    line_confirm_begin(l, l->cur.slave, CONFIRM_GIVE_UP);
}

/* I3: the answer held since the quiet after it began is now vouched for, or
 * (doubtful) asked again or refused. */
static void resolve_pending(line_t *l, uint64_t now)
{
    slave_state_t *s = line_slave(l, l->cur.slave);
    l->pending = false;
    bool unexplained = l->pending_unexplained > 0;
    if (!l->pending_doubtful && !unexplained && !l->pending_suspect && !l->pending_unconfirmed &&
        !l->pending_foreign) {
        line_deliver_shaped(l, &l->cur, &l->wire, l->pending_pdu, l->pending_len, l->pending_t_last_ns);
        return;
    }
    /*
     * Every request is answered in bounded time: each cause of a re-ask (I4's
     * copy check, I5's confirmation, I9's) is bounded, but their checks can
     * take turns on one question, each pass of one starting the other again:
     * two slaves, each asked a read past its map, each owing the other an
     * exception of the same bytes (I9), each equal to its own last answer
     * for another question (I4), re-asked for ever (the explorer's seed
     * 1796603157793903: 6 simulated hours, no answer). So a question asked
     * again to confirm its answer REASKS_MAX times, whatever the causes, is
     * refused (0x0B): never a wrong value, never an endless wait.
     */
    if ((l->pending_unconfirmed || l->pending_suspect || l->pending_foreign) && !l->pending_doubtful &&
        !unexplained && ++l->cur.reasks > REASKS_MAX) {
        gw_count(&l->m.ambiguous);
        line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: asked again %u times to confirm its answer; "
                 "refused (0x0B)", l->cfg.name, l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur),
                 (unsigned)REASKS_MAX);
        line_guard_slave(l, l->cur.slave, now);
        line_shape_answered(l, l->cur.slave, l->pending_pdu, l->pending_len);
        s->verifying = false;   /* this question's checks end with it; confirming stays: the next answer confirms */
        line_confirm_reset(s);
        s->foreign_hash = 0;
        s->foreign_asks = 0;
        line_refuse(l, &l->cur, now);
        return;
    }
    /* I4's and I9's re-asks go at once, with no guard: see below and foreign.c. */
    bool at_once = (l->pending_suspect || l->pending_foreign) && !l->pending_unconfirmed &&
                   !l->pending_doubtful && !unexplained;
    if (!at_once)
        line_guard_slave(l, l->cur.slave, now);
    if ((l->pending_unconfirmed || l->pending_suspect || l->pending_foreign) && !l->cur.t_confirm_ns)
        l->cur.t_confirm_ns = l->pending_t_last_ns;
    if (l->pending_unconfirmed && !l->pending_doubtful && !unexplained) {
        /* I5: after a give-up, asked again once the slave is quiet, until two
         * answers agree; a bounded number of times, then refused. */
        gw_count(&l->m.ambiguous);
        bool again = ++s->confirm_asks <= CONFIRM_MAX_ASKS;
        line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: %s%s; %s", l->cfg.name,
               l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur),
               s->confirm_cause == CONFIRM_COPY ? "a slave that repeats gave its last answer for another question"
                                                : "first answer since a question was given up",
               s->confirm_asks > 1 ? " and its re-ask's answer differs from the one before" : "",
               again ? "asking again after the guard to confirm it" : "refused (0x0B)");
        if (again) {
            /* The re-ask waits out the candidate's copy too: a stale answer
             * may come with its copy, up to COPY_WINDOW_TIMEOUTS of the
             * slave's timeouts after it, and a copy later than the guard
             * answered the re-ask and "confirmed" the stale answer (the
             * explorer's seed 1796605979803999: a give-up's exception, its
             * copy 73 ms later, the guard 44 ms). The slave's timeout here
             * is the longest it has had: one lowered by a reload says
             * nothing of when its copies come (seed 1796617202840155: a
             * copy 71 ms after, the timeout lowered to 30 ms). Frames in
             * the window are dropped and restart the guard (I2). Not where
             * no slave of the bus repeats (copies = none, or a transport
             * with ids). */
            unsigned t_ms = s->timeout_ms > s->longest_timeout_ms ? s->timeout_ms : s->longest_timeout_ms;
            if (s->copies != COPIES_GENUINE)
                line_guard_extend(l, l->cur.slave, l->wire.pdu[0],
                                  l->pending_t_last_ns + line_wire_ns(l, l->pending_len + 3u) +
                                      COPY_WINDOW_TIMEOUTS * (uint64_t)t_ms * 1000000ull);
            line_park_attempt(l, &l->cur, l->attempts);
        } else {
            line_confirm_reset(s);
            line_shape_answered(l, l->cur.slave, l->pending_pdu, l->pending_len);
            line_refuse(l, &l->cur, now);
        }
        return;
    }
    if (l->pending_foreign && !l->pending_suspect && !l->pending_doubtful && !unexplained) {
        line_foreign_resolve(l, now);   /* I9 */
        return;
    }
    if (l->pending_suspect) {
        /* I4: equal to the last answer, for another question. Asked again
         * at once (no guard, see I4 above), whatever the retry budget: it
         * is a verification, not a retry. */
        gw_count(&l->m.ambiguous);
        s->verifying = true;
        line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: the answer equals the slave's last one "
               "for another question; asking again at once to tell a copy from real data",
               l->cfg.name, l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur));
        line_park_attempt(l, &l->cur, l->attempts);
        return;
    }
    /* I6: doubtful, it is not delivered, but it was heard, and its copies
     * (late, out of order: seed 1796189904553820) have its shape: the next
     * question avoids it. (Not for an answer held to be compared with its
     * re-ask's, I4 and I5 above: the re-ask keeps its shape.) */
    line_shape_answered(l, l->cur.slave, l->pending_pdu, l->pending_len);
    gw_count(&l->m.ambiguous);
    bool again = l->attempts <= l->cfg.retries && !s->failures;
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: %s followed the answer; %s",
           l->cfg.name, l->cur.slave, l->cur.pdu[0], line_req_address(&l->cur),
           unexplained && !l->pending_doubtful ? "bytes no frame explains" : "a second, different candidate",
           again ? "asking again after the guard" : "refused (0x0B)");
    if (again) {
        line_park_attempt(l, &l->cur, l->attempts);
        return;
    }
    /* Refused, it is given up as a timeout gives up (line_on_timeout): the
     * doubtful frame may have been a stale one, or the answer to another of
     * its attempts, and the real answer of an attempt may still come later
     * than any guard (a slave that stalls): I5 confirms the slave's next
     * answer, I6 keeps the question's shape. Until the explorer's seed
     * 1796214496627458, a refusal here ended nothing: an attempt that had
     * timed out was answered, stalled, 113 ms later, and its exception was
     * taken for the next question of that function. */
    give_up_on_wire(l);
    line_refuse(l, &l->cur, now);
}

/*
 * The port went while an answer was held for its quiet (I3). Heard before
 * the port went, it is still the answer when the quiet after it was heard
 * too (the port's bytes before its loss have all been fed: a stream's end
 * comes after its data), and nothing doubts it: it goes out as any answer
 * does (trimmed, I6). One whose quiet was cut short by the loss is not
 * vouched for: what would have followed it in the window is unknown (a
 * device server that closed after another slave's address on an answer,
 * before the real one: issue 40). That one, and one doubtful, suspect (I4)
 * or unconfirmed (I5), cannot be asked again on a port that is gone: 0x0A,
 * never a value that may be another question's.
 */
void line_pending_port_lost(line_t *l)
{
    l->pending = false;
    bool quiet_heard = l->now_ns >= l->pending_t_last_ns + l->gap_ns;
    if (quiet_heard && !l->pending_doubtful && l->pending_unexplained <= 0 && !l->pending_suspect &&
        !l->pending_unconfirmed && !l->pending_foreign) {
        line_deliver_shaped(l, &l->cur, &l->wire, l->pending_pdu, l->pending_len, l->pending_t_last_ns);
        return;
    }
    gw_count(&l->m.unavailable);
    line_answer_exception(l, &l->cur, MB_EX_PATH_UNAVAILABLE);
}

/*
 * The port went with questions on the line: the attempt in flight (busy),
 * and questions parked for a retry after an attempt that timed out. They
 * are answered 0x0A, but what was asked was heard: a slave still answers
 * it, and its answer can arrive once the port is back (a converter that
 * held it, a slave that answered late). So each is given up as a timeout
 * gives up (I2's guard, I6's stale shape, I5's confirmation), or the next
 * question of that slave, of the same shape, would take that late answer
 * (the explorer's seed 1796193365564005: a port flap between an attempt
 * and its answer). A parked question's attempts were shaped when they were
 * sent and their wire forms are not kept: its shape is unknown, so nothing
 * is certified by shape or function for that slave (stale_run past
 * SHAPES_KEPT) and its next answer is confirmed. Not a failure of the
 * slave: no count toward dead_after.
 */
void line_port_lost_attempts(line_t *l, uint64_t now)
{
    if (l->busy && l->cur.slave) {
        line_guard_slave(l, l->cur.slave, now);
        give_up_on_wire(l);
    }
    for (unsigned s = 1; s < N_SLAVES && l->parked_count; s++)
        if (l->slaves[s].parked) {
            l->slaves[s].verifying = false;
            line_guard_slave(l, s, now);
            l->slaves[s].stale_run = SHAPES_KEPT + 1;
            line_confirm_begin(l, s, CONFIRM_GIVE_UP);
        }
}

void line_start_next(line_t *l)
{
    uint64_t now = l->now_ns, wake;
    unsigned attempts;

    if (l->busy)
        return;
    if (l->pending) {
        if (now < l->t_line_free_ns) {
            arm_kick(l, l->t_line_free_ns, now);
            return;
        }
        /*
         * The window has passed by the clock, but bytes may have arrived that
         * this actor has not seen: read by the I/O thread and queued behind
         * the timer's message, or still in the kernel. A message to itself
         * is a barrier (the mailbox is FIFO): when it comes back, every chunk
         * queued before it has been fed; line_on_resolve also asks the port
         * whether unread bytes wait. Only then is the answer vouched for.
         */
        if (!l->resolve_sent) {
            l->resolve_sent = true;
            if (l->env.barrier(l->env.ctx) != 0)
                l->resolve_sent = false;
            else
                return;
        }
        return;
    }
    if (!l->port_up) {
        line_queue_answer_all(l, MB_EX_PATH_UNAVAILABLE);
        gw_set(&l->m.queue_depth, 0);
        return;
    }
    if (l->reconnect_quiet_ns) {
        if (now < l->reconnect_quiet_ns) {   /* I8 */
            if (line_queued(l))
                arm_kick(l, l->reconnect_quiet_ns, now);
            return;
        }
        l->reconnect_quiet_ns = l->reconnect_len_ns = 0;
        gw_count(&l->m.reconnect_holds);
    }
    uint64_t hold = line_queued(l) ? line_priority_hold(l, now) : 0;
    if (line_queued(l) && now < l->t_line_free_ns) {
        arm_kick(l, l->t_line_free_ns, now);
    } else if (hold) {
        arm_kick(l, hold, now);   /* a priority master's next request is expected first */
    } else if (line_queue_pick(l, now, &attempts, &wake)) {
        l->attempts = attempts;
        if (l->cur.t_parked_ns && !l->cur.t_confirm_ns)
            l->cur.guard_ns += now - l->cur.t_parked_ns;
        l->cur.t_parked_ns = 0;
        send_current(l);
        if (!l->busy)        /* a broadcast: the line rests, then the next */
            arm_kick(l, l->t_line_free_ns, now);
    } else if (wake) {
        arm_kick(l, wake, now);
    }
    drop_deadline_timer(l, now);
    gw_set(&l->m.queue_depth, line_queued(l));
}

/*
 * I3: bytes the framer holds were heard after the answer (cut from the
 * answer's own chunk by its length rule, or come since) and are neither a
 * frame nor noise yet, so they vouch for nothing: the answer waits until
 * they are one or the other (the silence that ends them, on_idle, comes
 * back here through line_start_next; noise then makes it doubtful, a frame
 * is a second candidate). A head still waiting for the length its rule
 * predicts after the line's rest is a frame cut short: doubtful at once. The
 * explorer's seed 1796601939794267: an answer 01 04 02 c2 c1 29 c0 with its
 * function's top bit flipped begins with 01 84 02 c2 c1, whose CRC is good
 * (c2 c1 is the register's value and that prefix's CRC alike); framed by the
 * exception's length, it was delivered with 29 c0 still in the framer.
 */
static bool residue_settled(line_t *l)
{
    if (!rtu_framer_buffered(l->framer))
        return true;
    if (!rtu_framer_held(l->framer))
        return false;
    l->pending_doubtful = true;
    return true;
}

void line_on_resolve(line_t *l)
{
    l->resolve_sent = false;
    if (!l->pending)
        return;
    if (l->env.unread(l->env.ctx) > 0)
        return;   /* the host feeds them (line_bytes), and the next step comes back here */
    if (!residue_settled(l))
        return;
    resolve_pending(l, l->now_ns);
    line_start_next(l);
}

/* The attempt in flight had no answer by its deadline. */
void line_on_timeout(line_t *l, uint64_t now)
{
    unsigned slave = l->cur.slave;
    slave_state_t *s = line_slave(l, slave);

    l->busy = false;
    l->deadline_ns = 0;
    line_owed_push(l, &l->wire, now, OWED_WINDOW_TIMEOUTS);   /* I9: its answer may still come, with any address */
    gw_count(&l->m.timeouts);
    gw_count(&l->sm[slave].timeouts);
    line_slave_event(l, slave, EV_TIMEOUT, now);
    /*
     * A misshapen frame (receive.c): during the attempt the slave sent a
     * good frame of the question's function, not of its answer's shape, and
     * one no stale frame of the slave can be (I6's shapes: no copy of its
     * last answers, which would have one's shape and bytes; no late answer
     * of its last questions given up, which would have one's shape). So it
     * is the slave's own answer to this question, malformed (libmodbus's
     * test server answers every read of 2 registers with 1), and the
     * question is not asked again: the retry would get the same answer, and
     * it cost a timeout and a guard (1.6 s with the defaults, in which
     * libmodbus's client gave up on its next, healthy request, queued behind
     * it by I1). It is still given up as any timeout is (I5, I6 below: the
     * argument is the shapes kept, and a give-up costs a healthy slave
     * little). But what may still come of it -- the frame's copies, its
     * shape now kept (I6), or an answer to the question -- is of the
     * question's function, so when nothing else set the slave's guard during
     * the attempt, the give-up's guard holds only that function (I2 by
     * function, below), as it would have without the frame. A frame that
     * may be stale is no such sign: the real answer may still come, and the
     * retry goes as before.
     */
    bool misshapen = l->misshapen && !l->guarded_other;
    bool held_before = (misshapen ? l->hold_at_send_ns : s->hold_until_ns) > now;
    line_guard_slave(l, slave, now);
    /* A scan's probe (req.once) is asked once: a silent id is the common
     * case there, and a retry would double what a scan of 247 ids costs
     * while telling nothing the next id's probe does not. */
    bool retry = l->attempts <= l->cfg.retries && !s->failures && !misshapen && !l->cur.once;
    if (misshapen)
        gw_count(&l->m.misshapen);
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u fc %u addr %u: attempt %u timed out after %.1f ms; %s",
           l->cfg.name, slave, l->cur.pdu[0], line_req_address(&l->cur), l->attempts,
           (double)(now - l->t_first_send_ns) / 1e6,
           retry      ? "asking again once the slave has been quiet for its guard"
           : misshapen ? "answering 0x0B, not asked again: the slave answered it in another shape"
                       : "answering 0x0B");
    if (retry) {
        if (!s->timed_out_send_ns)
            s->timed_out_send_ns = s->last_send_ns;   /* its answer is owed: receive.c, guard_owed_attempts */
        line_park_attempt(l, &l->cur, l->attempts);
    } else {
        give_up_on_wire(l);   /* I4, I5, I6: its answer may still come, shaped like the next one's */
        /* I2 by function: what may still come of the questions given up
         * since the slave's last answer is their late answers, each of its
         * question's function (or its exception); by F none of them can be
         * taken for a question of another function, so this guard holds
         * only questions of those functions (line_queue_pick), when nothing
         * else guards the slave (held_before: an answer to a question asked
         * twice, a frame dropped; and any guard set after this one holds
         * all again). A late answer heard during such a question's attempt
         * answers nothing (dropped, and the slave guarded), or in I3's
         * window makes its answer doubtful. */
        s->hold_by_function = !held_before;
        s->failures++;
        if (s->dead_after && s->failures >= s->dead_after) {
            s->dead_until_ns = now + (uint64_t)s->backoff_ms * 1000000ull;
            gw_set(&l->sm[slave].dead, 1);
            line_log(l, CONFIG_LOG_WARN, "bus %s: slave %u unanswered in %u consecutive transactions; "
                   "answering 0x0B at once for %u ms, then one probe", l->cfg.name, slave, s->failures,
                   s->backoff_ms);
        }
        line_refuse(l, &l->cur, now);
    }
    line_start_next(l);
}
