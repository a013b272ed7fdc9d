/*
 * parser/pair.c -- pairing requests with answers on a line someone else masters.
 *
 * A tap (rtugw sniff, a listen-only bus) hears the master's requests and the
 * slaves' answers and must say which answer belongs to which request, without
 * the one thing the line discipline has: knowing what it asked itself. It
 * uses the discipline's own rules (line/discipline.c), from the outside:
 *
 *   P1 (the discipline's Fact F). A CRC-good frame pairs only with a request
 *   of the same slave and function (or its exception) and the shape that
 *   request asks for: the byte count its quantity implies, or the exact echo
 *   of a write (rtu_answer_matches). Frames that fail their CRC are never used.
 *
 *   P2 (one question on the line). RS-485 is half-duplex and the master waits
 *   for an answer or its own timeout before it asks again, so at most one
 *   request is pending: the last one heard. A new request ends the one before;
 *   if nothing answered it, the master gave up on it (UNANSWERED), and a
 *   request with the same bytes is the master's retry. A broadcast (slave 0)
 *   expects no answer and leaves nothing pending.
 *
 *   P3 (the discipline's I3: vouched answers). An answer is used only once the
 *   line has been quiet for hold_ns after it, or the master's next request
 *   comes. A second candidate in that window with other bytes, a frame that
 *   fails its CRC, or noise bytes make it DOUBTFUL (counted, not used). The
 *   same bytes again carry the same values: used once, counted as duplicate.
 *
 *   P4 (the discipline's I4: copies). A slave that repeats its answer can put
 *   a copy of answer n where answer n+1 is expected, byte-equal to what it
 *   sent, whether the tap used it or not; under P5's bound, before W after the
 *   frame it copies. So the tap keeps, per slave, what it said (said[]: the
 *   last RTU_PAIR_SAID answer-shaped frames, each with the request pending
 *   when it came, and, once the tap used it, its vouch: since when those bytes
 *   are known as that request's answer).
 *     - An answer byte-equal to a frame its slave said within W while another
 *       request was pending (or none) is DOUBTFUL: it may be a copy. Unless
 *     - it is also byte-equal to an answer used for the pending request's own
 *       bytes, within W of that one's vouch: then its values are that
 *       question's, whichever frame it copies, and neither P4 nor a debt
 *       (P5) doubts it. It may still be a copy while the request's own answer
 *       is to come: the request owes (P5). Used so, it is vouched no later
 *       than what it equals (a chain of copies never extends a vouch).
 *     - The verdict. The discipline asks again to tell data from a copy; a
 *       tap cannot, so it waits for the master: an equal answer for another
 *       request that stood alone in its window twice in a row (a slave
 *       sending copies shows a second candidate or leaves a request
 *       unanswered, as its copy and its answer cannot both fit in one wait)
 *       makes the slave GENUINE: its equal answers are data (all zeros), P4
 *       no longer doubts them, and the debts only P4's doubt made are
 *       dropped. A slave heard sending a frame nothing asked for, or a second
 *       answer in P3's window, sends copies: SENT, for good.
 *   The cost: a slave with equal data answers doubtfully until GENUINE, all
 *   of a SENT slave's equal answers to different requests within W are
 *   doubted, and an overwritten said[] entry still within W doubts all of
 *   the slave's answers until it expires (with W unknown, the ring is what is
 *   checked).
 *
 *   P5 (debts, by time only: issue 40). A tap cannot know a slave's latency,
 *   so it states a bound and keeps to it: W = late_factor x Tm, where Tm is
 *   the master's timeout as heard (T1 below) and late_factor is
 *   `listen_late_factor` ([bus], 4 by default; `rtugw sniff --late-factor`).
 *   A slave is assumed to send every frame it sends for a request R (its
 *   answer, late or queued, and any copy of it) before R's last byte + W.
 *     - A request R to slave S that gets no answer the tap uses (the master
 *       moved on: UNANSWERED; or its answer was DOUBTFUL) makes S owe an
 *       answer of R's shape until R + W: a debt. The shape is P1's: function
 *       and byte count, the exact echo of a write, the function alone for
 *       functions of unknown shape; an exception of the function matches too.
 *     - An answer X from S for the pending request R that a live debt of a
 *       request with other bytes could also explain is DOUBTFUL: two
 *       outstanding requests could own it, and the tap refuses rather than
 *       guess. A live debt of R's own bytes (the master's retry, or the same
 *       question asked again) does not doubt X: the answer to either attempt
 *       answers the same question. But X may then be the older attempt's
 *       answer, and R's own still to come: R owes too, as if unanswered.
 *     - Nothing else pays or forgives a debt: not an answer, not a copy, not
 *       a frame nothing asked for. It expires at R + W, and only then. Debts
 *       of byte-identical requests are kept as one, with the latest time.
 *   The cost: after a give-up (or a doubtful answer), S's answers of that
 *   shape to other requests are doubted for W; a chain of answers that could
 *   each be one late (a retried request asked again within W) keeps the debt.
 *   More than RTU_PAIR_DEBTS requests owed at once: the oldest is dropped and
 *   S's answers are doubted until its expiry (the bound is kept, not guessed).
 *
 * What a tap can know of the master's timeout, and what it cannot:
 *
 *   T1 (the heard timeout). The master asks again only once it has an answer
 *   or its timeout has run out. A wait with nothing heard in it (no frame,
 *   no damaged frame, no noise) from a request's last byte to the master's
 *   next request is therefore at least the master's timeout; the shortest
 *   such wait heard is the heard timeout Tm, an upper bound of the master's
 *   (a retry's wait is the tightest: its own timeout plus turnaround). A
 *   wait that held something proves nothing (the master may have stopped at
 *   a damaged answer) and is not counted. Nothing heard: no bound known, and
 *   then no debt expires (W unknown) and T2 refuses nothing.
 *   T2 (late answers are never used). An answer whose first byte comes later
 *   than Tm after the pending request's last byte came after the master gave
 *   up on that request (T1), and on every earlier one. The master did not
 *   take it, for any request, so the tap does not either: DOUBTFUL, counted
 *   (st.late), and the pending request owes (P5).
 *   The limit (what a tap cannot know): an answer later than W after its
 *   request, of the same shape as a later request of that slave, can be taken
 *   for that request's own: W is the stated bound, and a slave past it breaks
 *   it. Tm is an upper bound of the master's timeout: answers between the
 *   master's timeout and Tm are not refused by T2.
 *   tests/line/test_pair_explore.c checks both against a model that keeps the bound.
 *
 * Bounded: one pending request, one held answer, 256 slave records of
 * RTU_PAIR_DEBTS debts each and a ring of RTU_PAIR_QUEUE events, all in the
 * one allocation of rtu_pairer_new; events the caller does not drain are
 * dropped and counted.
 */
#include "parser/internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RTU_PAIR_QUEUE 16
#define RTU_PAIR_HOLD_DEFAULT_NS 20000000ull
#define RTU_PAIR_LATE_FACTOR_DEFAULT 4

/* P5: what is kept of an owed request: its first bytes (all P1 reads of a
 * request's shape: the echoed writes are at most 10 bytes), length, hash and
 * the time of its last byte. */
#define RTU_PAIR_DEBTS 16
#define DEBT_HEAD 12
typedef struct debt {
    uint8_t head[DEBT_HEAD];
    uint16_t len;
    bool provisional;          /* P4's doubt alone made it: dropped if the slave is found GENUINE */
    uint32_t hash;
    uint64_t t_ns;
} debt_t;

/* P4: what a slave said (answer-shaped frames, used or not), for which question. */
#define RTU_PAIR_SAID 32
typedef struct said {
    uint32_t hash, question;   /* the frame's hash; the pending request's then (0: none) */
    bool vouched;              /* the tap used it, for that question ... */
    uint16_t len;
    uint64_t t_ns;             /* its first byte */
    uint64_t vouch_ns;         /* ... and since when these bytes are known as its answer */
} said_t;

typedef struct pair_slave {
    uint8_t verdict;           /* P4: VERDICT_* */
    uint8_t genuine_streak;    /* P4: equal answers for other requests that stood alone */
    uint8_t said_next, said_n; /* P4: a ring of what it said ... */
    bool said_lost;            /* ... one still within W was overwritten ... */
    uint64_t said_lost_t_ns;   /* ... heard then: doubt every answer until W after it */
    said_t said[RTU_PAIR_SAID];
    debt_t debts[RTU_PAIR_DEBTS]; /* P5: the requests it owes answers for, unordered */
    uint8_t ndebts;
    bool dropped;              /* P5: a debt was dropped for room ... */
    uint64_t dropped_t_ns;     /* ... the latest such debt's time: doubt all until it expires */
} pair_slave_t;


enum { VERDICT_UNKNOWN = 0, VERDICT_GENUINE, VERDICT_SENT };

struct rtu_pairer {
    bool ans_equal;            /* P4: the held answer equals one said for another request ... */
    bool ans_alone;            /* ... and nothing but P4 doubted it */
    bool ans_said_same;        /* P4: it equals one said for this request's bytes, within W */
    int ans_slot, dup_slot;    /* P4: where the held answer (and its duplicate) are in said[] */
    uint64_t ans_vouch_ns;     /* P4: with ans_said_same, the latest vouch of those equal ones */
    uint64_t hold_ns;
    uint64_t late_factor;      /* P5: W = late_factor x the heard timeout */
    bool have_req, have_ans, ans_doubtful, ans_dup, req_retry;
    bool ans_same_owed;        /* P5: a debt of the pending request's bytes could explain the held answer */
    const char *ans_why;
    uint64_t ans_noise_mark;
    bool req_quiet;            /* T1: nothing heard (frame, damaged frame, noise) since the pending request */
    uint64_t req_noise_mark;   /* ... the noise count when it came */
    uint64_t heard_timeout_ns; /* T1: the master's timeout as heard (0: none heard yet) */
    rtu_frame_t req, ans;
    rtu_pair_event_t q[RTU_PAIR_QUEUE];
    unsigned q_head, q_len;
    rtu_pair_stats_t st;
    pair_slave_t slaves[256];
};

const char *rtu_pair_kind_name(rtu_pair_kind_t kind)
{
    static const char *const names[RTU_PAIR_KIND_COUNT] = { "answered", "unanswered", "doubtful",
                                                            "unpaired", "damaged" };
    return kind < RTU_PAIR_KIND_COUNT ? names[kind] : "?";
}

bool rtu_answer_matches(const uint8_t *req, size_t req_len, const uint8_t *ans, size_t ans_len)
{
    if (req_len < 4 || ans_len < 4 || req[0] != ans[0])
        return false;
    uint8_t fc = req[1];
    if (ans[1] == (fc | 0x80))
        return ans_len == 5;
    if (ans[1] != fc)
        return false;
    const uint8_t *q = req + 1;          /* the request's PDU */
    size_t pdu_len = req_len - 3;
    unsigned qty = pdu_len >= 5 ? (unsigned)(q[3] << 8 | q[4]) : 0;
    switch (fc) {
    case 1: case 2:
        return ans_len >= 3 && ans[2] == (qty + 7) / 8;
    case 3: case 4: case 23:
        return ans_len >= 3 && ans[2] == 2 * qty;
    case 5: case 6: case 22:
        return ans_len == req_len && memcmp(ans + 1, q, pdu_len) == 0;
    case 15: case 16:
        return ans_len == 8 && pdu_len >= 5 && memcmp(ans + 2, q + 1, 4) == 0;
    default:
        return true;   /* no shape known: slave and function must do */
    }
}

rtu_pairer_t *rtu_pairer_new(uint64_t hold_ns)
{
    rtu_pairer_t *p = calloc(1, sizeof *p);
    if (p) {
        p->hold_ns = hold_ns ? hold_ns : RTU_PAIR_HOLD_DEFAULT_NS;
        p->late_factor = RTU_PAIR_LATE_FACTOR_DEFAULT;
    }
    return p;
}

void rtu_pairer_set_late_factor(rtu_pairer_t *p, unsigned factor)
{
    p->late_factor = factor ? factor : RTU_PAIR_LATE_FACTOR_DEFAULT;
}

void rtu_pairer_free(rtu_pairer_t *p)
{
    free(p);
}

static rtu_pair_event_t *push(rtu_pairer_t *p, rtu_pair_kind_t kind)
{
    p->st.by_kind[kind]++;
    if (p->q_len == RTU_PAIR_QUEUE) {
        p->st.dropped++;
        return NULL;
    }
    rtu_pair_event_t *ev = &p->q[(p->q_head + p->q_len++) % RTU_PAIR_QUEUE];
    memset(ev, 0, offsetof(rtu_pair_event_t, request));
    ev->kind = (uint8_t)kind;
    return ev;
}

static const char p4_why[] = "equal to what the slave said for another request (a copy?)";
static const char late_why[] = "later than the master's timeout as heard";
static const char owed_why[] = "another request of this slave may own it (owed, within the late bound)";

static void doubt(rtu_pairer_t *p, const char *why)
{
    if (why != p4_why)
        p->ans_alone = false;   /* P4's own doubts do not count against the verdict */
    if (!p->ans_doubtful)
        p->ans_why = why;
    p->ans_doubtful = true;
}

/* ---- P5: the answers a slave owes ---------------------------------------- */

static uint32_t frame_hash(const uint8_t *b, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Is a debt of the request at t_ns still live at now_ns? W unknown (no heard
 * timeout yet): every debt is. */
static bool live(const rtu_pairer_t *p, uint64_t t_ns, uint64_t now_ns)
{
    return !p->heard_timeout_ns || now_ns <= t_ns + p->late_factor * p->heard_timeout_ns;
}

static bool debt_same(const debt_t *d, const rtu_frame_t *f)
{
    return d->len == f->len && d->hash == frame_hash(f->adu, f->len) &&
           memcmp(d->head, f->adu, f->len < DEBT_HEAD ? f->len : DEBT_HEAD) == 0;
}

static bool debt_could_answer(const debt_t *d, const rtu_frame_t *ans)
{
    /* rtu_answer_matches reads no request byte past DEBT_HEAD: the shapes it
     * reads (quantities, addresses, echoes of writes of at most 10 bytes) come
     * first; the rest of a longer request is zeros here and never read. */
    uint8_t req[RTU_MAX_ADU] = { 0 };
    memcpy(req, d->head, DEBT_HEAD);
    return rtu_answer_matches(req, d->len, ans->adu, ans->len);
}

/* r (its slave's request) got no answer the tap used: its slave owes one until r + W. */
static void debt_add(rtu_pairer_t *p, const rtu_frame_t *r, bool provisional)
{
    pair_slave_t *s = &p->slaves[r->adu[0]];
    uint64_t now = r->t_last_ns;
    for (unsigned i = 0; i < s->ndebts; i++)
        if (debt_same(&s->debts[i], r)) {
            if (r->t_last_ns > s->debts[i].t_ns)
                s->debts[i].t_ns = r->t_last_ns;
            s->debts[i].provisional = s->debts[i].provisional && provisional;
            return;
        }
    for (unsigned i = 0; i < s->ndebts;)   /* the expired go */
        if (!live(p, s->debts[i].t_ns, now))
            s->debts[i] = s->debts[--s->ndebts];
        else
            i++;
    if (s->ndebts == RTU_PAIR_DEBTS) {     /* no room: the oldest is dropped, not forgiven */
        unsigned old = 0;
        for (unsigned i = 1; i < s->ndebts; i++)
            if (s->debts[i].t_ns < s->debts[old].t_ns)
                old = i;
        if (!s->dropped || s->debts[old].t_ns > s->dropped_t_ns)
            s->dropped_t_ns = s->debts[old].t_ns;
        s->dropped = true;
        s->debts[old] = s->debts[--s->ndebts];
    }
    debt_t *d = &s->debts[s->ndebts++];
    size_t n = r->len < DEBT_HEAD ? r->len : DEBT_HEAD;
    memset(d->head, 0, sizeof d->head);
    memcpy(d->head, r->adu, n);
    d->len = r->len;
    d->provisional = provisional;
    d->hash = frame_hash(r->adu, r->len);
    d->t_ns = r->t_last_ns;
}

/* X, an answer matching the pending request: can a live debt of another
 * request own it (doubtful), or one of the pending request's own bytes (it is
 * used, and the pending request owes in turn)? */
static void debt_check(rtu_pairer_t *p, const rtu_frame_t *x)
{
    pair_slave_t *s = &p->slaves[x->adu[0]];
    bool other = s->dropped && live(p, s->dropped_t_ns, x->t_first_ns);
    for (unsigned i = 0; i < s->ndebts; i++) {
        const debt_t *d = &s->debts[i];
        if (!live(p, d->t_ns, x->t_first_ns) || !debt_could_answer(d, x))
            continue;
        if (debt_same(d, &p->req))
            p->ans_same_owed = true;
        else
            other = true;
    }
    if (other && !p->ans_said_same) {
        p->st.owed++;
        doubt(p, owed_why);
    }
}

/* The held answer is settled: by the next request, by silence, or by the end. */
static void settle(rtu_pairer_t *p)
{
    if (!p->have_ans)
        return;
    pair_slave_t *s = &p->slaves[p->req.adu[0]];
    bool p4_only = p->ans_equal && p->ans_alone && s->verdict == VERDICT_UNKNOWN;
    if (p->ans_equal && s->verdict == VERDICT_UNKNOWN) {   /* P4: did it stand alone? */
        s->genuine_streak = p->ans_alone ? (uint8_t)(s->genuine_streak + 1) : 0;
        if (s->genuine_streak >= 2) {
            /* P4's verdict: the equal answers it doubted stood alone, twice in a
             * row, as a slave sending copies does not (its copy and its answer
             * would both be heard, or a wait left empty): they were its own
             * answers, and what P4's doubt alone made owed is not. */
            s->verdict = VERDICT_GENUINE;
            for (unsigned i = 0; i < s->ndebts;)
                if (s->debts[i].provisional)
                    s->debts[i] = s->debts[--s->ndebts];
                else
                    i++;
        }
    }
    bool doubtful = p->ans_doubtful;
    if (!doubtful) {   /* P4: what it said for this question, now that the tap uses it */
        /* equal to one used for this question: maybe its copy, vouched no later than it */
        uint64_t vouch = p->ans_said_same ? p->ans_vouch_ns : p->ans.t_first_ns;
        s->said[p->ans_slot].vouched = true;
        s->said[p->ans_slot].vouch_ns = vouch;
        if (p->dup_slot >= 0) {
            s->said[p->dup_slot].vouched = true;
            s->said[p->dup_slot].vouch_ns = vouch;
        }
    }
    /* P5: not used, or perhaps an older attempt's answer: the request owes */
    if ((doubtful || p->ans_same_owed) && !(p4_only && s->verdict == VERDICT_GENUINE))
        debt_add(p, &p->req, p4_only);
    rtu_pair_event_t *ev = push(p, doubtful ? RTU_PAIR_DOUBTFUL : RTU_PAIR_ANSWERED);
    if (ev) {
        ev->request = p->req;
        ev->answer = p->ans;
        ev->retry = p->req_retry;
        ev->duplicate = p->ans_dup;
        ev->why = doubtful ? p->ans_why : NULL;
        ev->latency_ns = p->ans.t_first_ns > p->req.t_last_ns ? p->ans.t_first_ns - p->req.t_last_ns : 0;
    }
    p->have_ans = false;
    p->have_req = false;   /* answered (or doubtfully): nothing is pending */
}

static void on_request(rtu_pairer_t *p, const rtu_frame_t *f, uint64_t noise_bytes)
{
    settle(p);
    p->st.requests++;
    bool retry = false;
    if (p->have_req) {   /* P2: the master gave up on the pending request */
        /* the master's timeout as heard: its last byte to the next request */
        uint64_t timeout_ns = f->t_first_ns > p->req.t_last_ns ? f->t_first_ns - p->req.t_last_ns : 0;
        /* T1: a wait with nothing in it is one the master sat out to its timeout */
        if (p->req_quiet && noise_bytes == p->req_noise_mark && timeout_ns &&
            (!p->heard_timeout_ns || timeout_ns < p->heard_timeout_ns))
            p->heard_timeout_ns = timeout_ns;
        rtu_pair_event_t *ev = push(p, RTU_PAIR_UNANSWERED);
        if (ev) {
            ev->request = p->req;
            ev->retry = p->req_retry;
            ev->latency_ns = timeout_ns;
        }
        debt_add(p, &p->req, false);   /* P5: its answer may still come, until its time + W */
        /* The same bytes right after a give-up: the master asks again. (A master that
         * polls one block without retries looks the same: its next poll is counted.) */
        retry = f->len == p->req.len && memcmp(f->adu, p->req.adu, f->len) == 0;
    }
    p->have_req = false;
    if (retry)
        p->st.retries++;
    if (f->adu[0] == 0) {
        p->st.broadcasts++;
        return;
    }
    p->req = *f;
    p->have_req = true;
    p->req_retry = retry;
    p->req_quiet = true;
    p->req_noise_mark = noise_bytes;
}

/* P4: what the slave said, while which request was pending (vouched once the tap uses it,
 * in settle). Returns its slot. */
static int heard(rtu_pairer_t *p, const rtu_frame_t *f, uint32_t question)
{
    pair_slave_t *s = &p->slaves[f->adu[0]];
    said_t *e = &s->said[s->said_next];
    if (s->said_n == RTU_PAIR_SAID) {   /* overwritten while a copy of it may still come */
        if (p->heard_timeout_ns && live(p, e->t_ns, f->t_first_ns) &&
            (!s->said_lost || e->t_ns > s->said_lost_t_ns)) {
            s->said_lost = true;
            s->said_lost_t_ns = e->t_ns;
        }
    } else {
        s->said_n++;
    }
    s->said_next = (uint8_t)((s->said_next + 1) % RTU_PAIR_SAID);
    e->hash = frame_hash(f->adu, f->len);
    e->question = question;
    e->vouched = false;
    e->len = f->len;
    e->t_ns = f->t_first_ns;
    return (int)(e - s->said);
}

/* P4: is f byte-equal to a frame its slave said for another question, a copy of
 * which may still come (within W of it; W unknown: any still in the ring)? One
 * said for this same question makes the pending request owe (P5): f may be its
 * copy, and the request's own answer still to come. */
static bool said_for_another(rtu_pairer_t *p, const rtu_frame_t *f, uint32_t question)
{
    const pair_slave_t *s = &p->slaves[f->adu[0]];
    bool another = s->said_lost && live(p, s->said_lost_t_ns, f->t_first_ns);
    uint32_t h = frame_hash(f->adu, f->len);
    for (unsigned i = 0; i < s->said_n; i++) {
        const said_t *e = &s->said[i];
        if (e->hash != h || e->len != f->len || !live(p, e->t_ns, f->t_first_ns))
            continue;
        if (e->question != question) {
            another = true;
            continue;
        }
        if (s->verdict != VERDICT_GENUINE)
            p->ans_same_owed = true;   /* f may be its copy */
        if (e->vouched && live(p, e->vouch_ns, f->t_first_ns)) {
            if (!p->ans_said_same || e->vouch_ns > p->ans_vouch_ns)
                p->ans_vouch_ns = e->vouch_ns;
            p->ans_said_same = true;
        }
    }
    return another;
}

static void unpaired(rtu_pairer_t *p, const rtu_frame_t *f, const char *why)
{
    p->slaves[f->adu[0]].verdict = VERDICT_SENT;   /* P4: it said something nothing asked for */
    heard(p, f, 0);                                /* (P5: it pays no debt) */
    rtu_pair_event_t *ev = push(p, RTU_PAIR_UNPAIRED);
    if (ev) {
        ev->answer = *f;
        ev->why = why;
    }
}

static void on_answer(rtu_pairer_t *p, const rtu_frame_t *f, uint64_t noise_bytes)
{
    if (p->have_ans) {   /* P3: a second candidate in the window */
        p->slaves[f->adu[0]].verdict = VERDICT_SENT;
        if (f->len == p->ans.len && memcmp(f->adu, p->ans.adu, f->len) == 0) {
            p->st.duplicates++;
            p->ans_dup = true;
            p->dup_slot = heard(p, f, frame_hash(p->req.adu, p->req.len));
        } else {
            doubt(p, "a second, different answer");
            heard(p, f, 0);
        }
        return;
    }
    if (!p->have_req || !rtu_answer_matches(p->req.adu, p->req.len, f->adu, f->len)) {
        unpaired(p, f, p->have_req ? "does not match the pending request" : "no request pending");
        return;
    }
    p->ans = *f;
    p->have_ans = true;
    p->ans_doubtful = false;
    p->ans_dup = false;
    p->ans_why = NULL;
    p->ans_noise_mark = noise_bytes;
    uint32_t question = frame_hash(p->req.adu, p->req.len);
    p->ans_same_owed = p->ans_said_same = false;
    p->ans_alone = true;
    pair_slave_t *s = &p->slaves[f->adu[0]];
    p->ans_equal = said_for_another(p, f, question);
    /* P4; equal to an answer used for this question within W of its vouch, the values
     * are that question's whichever frame this copies */
    if (p->ans_equal && s->verdict != VERDICT_GENUINE && !p->ans_said_same)
        doubt(p, p4_why);
    /* T2: later than the master's timeout as heard after the pending request:
     * the master had given up on it, whichever request this answers. */
    uint64_t latency = f->t_first_ns > p->req.t_last_ns ? f->t_first_ns - p->req.t_last_ns : 0;
    if (p->heard_timeout_ns && latency > p->heard_timeout_ns) {
        p->st.late++;
        doubt(p, late_why);
    }
    debt_check(p, f);   /* P5 */
    p->ans_slot = heard(p, f, question);
    p->dup_slot = -1;
}

void rtu_pairer_frame(rtu_pairer_t *p, const rtu_frame_t *f, uint64_t noise_bytes)
{
    if (p->have_ans && noise_bytes > p->ans_noise_mark)
        doubt(p, "noise after the answer");
    if (!f->crc_ok) {
        p->req_quiet = false;
        if (p->have_ans)
            doubt(p, "a damaged frame after the answer");
        rtu_pair_event_t *ev = push(p, RTU_PAIR_DAMAGED);
        if (ev)
            ev->answer = *f;
        return;
    }
    if (f->is_request) {
        on_request(p, f, noise_bytes);
    } else {
        p->req_quiet = false;   /* T1: the wait held something */
        on_answer(p, f, noise_bytes);
    }
}

void rtu_pairer_idle(rtu_pairer_t *p, uint64_t now_ns, uint64_t noise_bytes)
{
    if (!p->have_ans)
        return;
    if (noise_bytes > p->ans_noise_mark)
        doubt(p, "noise after the answer");
    if (now_ns >= p->ans.t_last_ns + p->hold_ns)
        settle(p);
}

bool rtu_pairer_holding(const rtu_pairer_t *p)
{
    return p->have_ans;
}

int rtu_pairer_next(rtu_pairer_t *p, rtu_pair_event_t *ev)
{
    if (!p->q_len)
        return 0;
    *ev = p->q[p->q_head];
    p->q_head = (p->q_head + 1) % RTU_PAIR_QUEUE;
    p->q_len--;
    return 1;
}

void rtu_pairer_get_stats(const rtu_pairer_t *p, rtu_pair_stats_t *st)
{
    *st = p->st;
    st->heard_timeout_ns = p->heard_timeout_ns;
}
