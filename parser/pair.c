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
 *   a copy of answer n where answer n+1 is expected, and the copy is byte-equal
 *   to the last answer-shaped frame heard from it while the request differs.
 *   The last frame heard, not the last one used: a copy repeats what the slave
 *   sent, whether the tap used it or not. So such an answer is DOUBTFUL unless
 *   the slave's verdict is GENUINE. The discipline settles the verdict by
 *   asking again; a tap cannot ask, so it waits for the master: an equal answer
 *   for another request that stood alone in its window twice in a row (a slave
 *   sending copies shows a second candidate or leaves a request unanswered, as
 *   its copy and its answer cannot both fit in one wait) makes it GENUINE (its
 *   equal answers are data: all-zero registers). A slave heard sending a frame
 *   nothing asked for, or a second answer in P3's window, sends copies: SENT,
 *   for good. Asked the same request again, any slave is believed when it
 *   answers with the same bytes: real, or a copy of an answer to that same
 *   request, they carry that request's values. The cost: two equal answers
 *   counted doubtful per slave with equal data, and all of a SENT slave's equal
 *   answers to different requests.
 *
 *   P5 (the discipline's I5: after a give-up). A request the master gave up
 *   on may still be answered late, while a later request to that slave is
 *   pending, and with the shape of the request given up. An RTU slave answers
 *   its questions one at a time, in the order asked; so the tap keeps, per
 *   slave, the requests heard whose answers are still owed, oldest first
 *   (owed[]): each request is added; each answer heard pays the oldest (a
 *   late answer comes before any answer to a later question); an answer that
 *   can only be the pending request's own pays them all. An answer X from S
 *   while S's request R is pending, with older requests still owed:
 *     - none of the older ones could be answered by X (P1: another function,
 *       byte count or echo): X is R's own, used; the older ones came before
 *       it or never will: all paid.
 *     - an older one other than R's bytes could be: X may be its late answer,
 *       DOUBTFUL; it pays the oldest, and R stays owed: if X was stale, R's
 *       own answer is still to come, late, in a later request's wait.
 *     - only older copies of R's bytes could be (the master's retries): X
 *       answers that same question, used; it pays the oldest, R stays owed.
 *       (The gap this closes: a slave later than the master's timeout on a
 *       question and on its retry had its retry's late answer paired with
 *       the master's next question of that shape, as was the answer after a
 *       doubted one.)
 *   A frame from S that nothing asked for pays the oldest. Copies pay
 *   nothing: a second candidate byte-equal to the first, or an answer P4
 *   takes for a copy (the request it stood in for stays owed, the debt
 *   before it is taken as paid: one debt per copy).
 *   An answer lost for good (CRC, a slave that never heard the question) is
 *   owed for ever by this count, and on a master that alternates one shape
 *   every later answer would be doubted. So, as the discipline's guard after
 *   a give-up (I2, bounded by 4x the timeout), the debt is forgiven once S has
 *   not been given up on for 4x the master's timeout as heard (its last
 *   unanswered request to its next request): a late answer is assumed to come
 *   within that. The cost: after a give-up, S's answers of a shape some owed
 *   request has are doubted for up to that long, on a master that never
 *   changes shape (the retries aside).
 *
 * What a tap can know of the master's timeout (issue 40), and why no answer
 * later than it is used:
 *
 *   T1 (the heard timeout). The master asks again only once it has an answer
 *   or its timeout has run out. A wait with nothing heard in it (no frame,
 *   no damaged frame, no noise) from a request's last byte to the master's
 *   next request is therefore at least the master's timeout; the shortest
 *   such wait heard is the heard timeout, an upper bound of the master's
 *   (a retry's wait is the tightest: its own timeout plus turnaround). A
 *   wait that held something proves nothing (the master may have stopped at
 *   a damaged answer) and is not counted. Nothing heard: no bound known.
 *   T2 (late answers are never used). An answer whose first byte comes later
 *   than the heard timeout after the pending request's last byte came after
 *   the master gave up on that request (T1), and after it gave up on every
 *   earlier one, which are older still. The master did not take it, for any
 *   request, so the tap does not either: DOUBTFUL, counted (st.late), and the
 *   pending request stays owed (P5; its own answer may be yet to come).
 *   So the answer of issue 40 (one queued for a question given up on, heard
 *   600 ms into a 100 ms master's next wait, after P5 forgave the debt) is
 *   refused by T2 whatever the debt says.
 *   The limit (what a tap cannot know): an answer inside the heard timeout of
 *   the pending request, of its shape, that a slave owed for an older
 *   question whose debt P5 forgave (a slave later than 4x the heard timeout
 *   on a question, or one that repeats old answers) cannot be told from the
 *   pending request's own answer; the master takes it too. The heard timeout
 *   is an upper bound: answers between the master's timeout and it are not
 *   refused. tests/test_pair_explore.c shows both in its model.
 *
 * Bounded: one pending request, one held answer, 256 slave records of
 * RTU_PAIR_OWED owed requests each (the oldest forgotten past that) and a
 * ring of RTU_PAIR_QUEUE events, all in the one allocation of rtu_pairer_new;
 * events the caller does not drain are dropped and counted.
 */
#include "parser/internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RTU_PAIR_QUEUE 16
#define RTU_PAIR_HOLD_DEFAULT_NS 20000000ull

/* P5: what is kept of an owed request: its first bytes (all P1 reads of a
 * request's shape: the echoed writes are at most 10 bytes), length and hash. */
#define RTU_PAIR_OWED 8
#define OWED_HEAD 12
typedef struct owed_req {
    uint8_t head[OWED_HEAD];
    uint16_t len;
    uint32_t hash;
} owed_req_t;

typedef struct pair_slave {
    uint8_t verdict;           /* P4: VERDICT_* */
    uint8_t genuine_streak;    /* P4: equal answers for other requests that stood alone */
    uint16_t heard_len;        /* P4: the last answer-shaped frame heard from it ... */
    int32_t heard_for;         /* ... the address of the request pending then, -1: none */
    uint8_t heard[RTU_MAX_ADU];
    owed_req_t owed[RTU_PAIR_OWED]; /* P5: requests whose answers are owed, oldest first */
    uint8_t owed_first, owed_n;
    uint64_t gave_up_ns;       /* P5: when the master last gave up on it ... */
    uint64_t master_timeout_ns;/* ... and after how long */
} pair_slave_t;

enum { VERDICT_UNKNOWN = 0, VERDICT_GENUINE, VERDICT_SENT };

struct rtu_pairer {
    bool ans_equal;            /* the held answer equals the slave's last frame, for another request */
    bool ans_alone;            /* ... and nothing but P4 doubted it */
    uint64_t hold_ns;
    bool have_req, have_ans, ans_doubtful, ans_dup, req_retry;
    bool ans_owed_later;       /* P5 for the held answer waits for P4's verdict */
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
    if (p)
        p->hold_ns = hold_ns ? hold_ns : RTU_PAIR_HOLD_DEFAULT_NS;
    return p;
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

static uint16_t req_address(const rtu_frame_t *r)
{
    return r->len >= 6 ? (uint16_t)(r->adu[2] << 8 | r->adu[3]) : 0;
}

static const char p4_why[] = "equal to what the slave said last, for another request (a copy?)";
static const char p4_late_why[] = "later than the master's timeout as heard";

static void owed_answer(rtu_pairer_t *p, pair_slave_t *s, const rtu_frame_t *x);
static void owed_keep_newest(pair_slave_t *s);

/* The held answer is settled: by the next request, by silence, or by the end. */
static void settle(rtu_pairer_t *p)
{
    if (!p->have_ans)
        return;
    pair_slave_t *s = &p->slaves[p->req.adu[0]];
    if (p->ans_equal && s->verdict == VERDICT_UNKNOWN) {   /* P4: did it stand alone? */
        bool alone = p->ans_alone;
        s->genuine_streak = alone ? (uint8_t)(s->genuine_streak + 1) : 0;
        if (s->genuine_streak >= 2)
            s->verdict = VERDICT_GENUINE;
    }
    if (p->ans_owed_later) {
        if (s->verdict == VERDICT_GENUINE) {
            /* P4's verdict: the equal answers it doubted stood alone, twice
             * in a row, as a slave owing late answers does not (its stale
             * answer and its own would both be heard, or a wait left empty):
             * they were the slave's own answers, all paid. */
            s->owed_n = 0;
        } else {
            /* A copy took the request's place: the request stays owed (P5),
             * its own answer may still come, late. What was owed before it
             * is taken as paid, as the copy stands for the slave's answers
             * so far (one debt per copy, not a growing count on a slave
             * that sends copies). */
            owed_keep_newest(s);
            s->gave_up_ns = p->ans.t_first_ns;
        }
    }
    bool doubtful = p->ans_doubtful;
    const char *why = p->ans_why;
    rtu_pair_event_t *ev = push(p, doubtful ? RTU_PAIR_DOUBTFUL : RTU_PAIR_ANSWERED);
    if (ev) {
        ev->request = p->req;
        ev->answer = p->ans;
        ev->retry = p->req_retry;
        ev->duplicate = p->ans_dup;
        ev->why = doubtful ? why : NULL;
        ev->latency_ns = p->ans.t_first_ns > p->req.t_last_ns ? p->ans.t_first_ns - p->req.t_last_ns : 0;
    }
    p->have_ans = false;
    p->have_req = false;   /* answered (or doubtfully): nothing is pending */
}

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

static owed_req_t *owed_at(pair_slave_t *s, unsigned i)
{
    return &s->owed[(s->owed_first + i) % RTU_PAIR_OWED];
}

static void owed_add(pair_slave_t *s, const rtu_frame_t *f)
{
    if (s->owed_n == RTU_PAIR_OWED) {   /* the oldest forgotten */
        s->owed_first = (uint8_t)((s->owed_first + 1) % RTU_PAIR_OWED);
        s->owed_n--;
    }
    owed_req_t *o = owed_at(s, s->owed_n++);
    size_t n = f->len < OWED_HEAD ? f->len : OWED_HEAD;
    memset(o->head, 0, sizeof o->head);
    memcpy(o->head, f->adu, n);
    o->len = f->len;
    o->hash = frame_hash(f->adu, f->len);
}

static void owed_pay_oldest(pair_slave_t *s)
{
    if (!s->owed_n)
        return;
    s->owed_first = (uint8_t)((s->owed_first + 1) % RTU_PAIR_OWED);
    s->owed_n--;
}

/* Everything older than the newest (the pending request) is paid. */
static void owed_keep_newest(pair_slave_t *s)
{
    if (s->owed_n > 1) {
        s->owed_first = (uint8_t)((s->owed_first + s->owed_n - 1) % RTU_PAIR_OWED);
        s->owed_n = 1;
    }
}

static bool owed_could_answer(const owed_req_t *o, const rtu_frame_t *ans)
{
    /* rtu_answer_matches reads no request byte past OWED_HEAD: the shapes it
     * reads (quantities, addresses, echoes of writes of at most 10 bytes) come
     * first; the rest of a longer request is zeros here and never read. */
    uint8_t req[RTU_MAX_ADU] = { 0 };
    memcpy(req, o->head, OWED_HEAD);
    return rtu_answer_matches(req, o->len, ans->adu, ans->len);
}

static bool owed_same(const owed_req_t *o, const rtu_frame_t *f)
{
    return o->len == f->len && o->hash == frame_hash(f->adu, f->len) &&
           memcmp(o->head, f->adu, f->len < OWED_HEAD ? f->len : OWED_HEAD) == 0;
}

/* The debt forgiven 4x the master's timeout after its last give-up on s
 * (a timeout not yet heard taken as 1 s, the common default of masters). */
static void owed_forgive(pair_slave_t *s, uint64_t now_ns)
{
    uint64_t horizon = 4 * (s->master_timeout_ns ? s->master_timeout_ns : 1000000000ull);
    if (s->owed_n > 1 && now_ns > s->gave_up_ns + horizon)
        owed_keep_newest(s);
}

/* X, an answer matching the pending request (the newest owed of its slave):
 * the cases of P5 above. */
static void owed_answer(rtu_pairer_t *p, pair_slave_t *s, const rtu_frame_t *x)
{
    owed_forgive(s, x->t_first_ns);
    bool stale_other = false, stale_retry = false;
    for (unsigned i = 0; i + 1 < s->owed_n; i++) {
        const owed_req_t *o = owed_at(s, i);
        if (!owed_could_answer(o, x))
            continue;
        if (owed_same(o, &p->req))
            stale_retry = true;
        else
            stale_other = true;
    }
    if (stale_other)
        doubt(p, "may be the late answer of an earlier request the master gave up on");
    if (stale_other || stale_retry || p->ans_doubtful)
        owed_pay_oldest(s);   /* the pending request stays owed (T2: its own may be yet to come) */
    else
        s->owed_n = 0;        /* its own answer: all paid */
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
        pair_slave_t *s = &p->slaves[p->req.adu[0]];   /* P5: its answer stays owed */
        s->gave_up_ns = f->t_first_ns;
        s->master_timeout_ns = timeout_ns;
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
    owed_add(&p->slaves[f->adu[0]], f);
}

/* P4: what the slave said last, and for which request. */
static void heard(rtu_pairer_t *p, const rtu_frame_t *f, int32_t for_address)
{
    pair_slave_t *s = &p->slaves[f->adu[0]];
    memcpy(s->heard, f->adu, f->len);
    s->heard_len = f->len;
    s->heard_for = for_address;
}

static void unpaired(rtu_pairer_t *p, const rtu_frame_t *f, const char *why)
{
    pair_slave_t *s = &p->slaves[f->adu[0]];
    s->verdict = VERDICT_SENT;   /* P4: it said something nothing asked for */
    heard(p, f, -1);
    owed_pay_oldest(s);          /* P5: a late answer has come */
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
        } else {
            doubt(p, "a second, different answer");
            heard(p, f, -1);
            owed_pay_oldest(&p->slaves[f->adu[0]]);   /* P5: it answered something */
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
    p->ans_alone = true;
    p->ans_why = NULL;
    p->ans_noise_mark = noise_bytes;
    pair_slave_t *s = &p->slaves[f->adu[0]];
    int32_t for_address = req_address(&p->req);
    p->ans_equal = s->heard_len == f->len && memcmp(s->heard, f->adu, f->len) == 0 &&
                   s->heard_for != for_address;
    if (p->ans_equal && s->verdict != VERDICT_GENUINE)
        doubt(p, p4_why);   /* P4 */
    /* T2: later than the master's timeout as heard after the pending request:
     * the master had given up on it, whichever request this answers. */
    uint64_t latency = f->t_first_ns > p->req.t_last_ns ? f->t_first_ns - p->req.t_last_ns : 0;
    if (p->heard_timeout_ns && latency > p->heard_timeout_ns) {
        p->st.late++;
        doubt(p, p4_late_why);
    }
    heard(p, f, for_address);
    /* P5; what P4 takes for a copy is settled with its verdict (settle) */
    p->ans_owed_later = p->ans_equal && s->verdict != VERDICT_GENUINE;
    if (!p->ans_owed_later)
        owed_answer(p, s, f);
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
