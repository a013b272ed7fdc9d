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
 *   on may still be answered late, when the next request to that slave is
 *   pending, and with its shape. So after an UNANSWERED request to S, S's next
 *   answer is DOUBTFUL unless it answers a retry of that same request (then a
 *   late answer answers the same question); a frame from S that nothing asked
 *   for (the late answer, heard) clears the suspicion. A request whose answer
 *   P4 took for a copy is treated as given up: its own answer may still come.
 *
 * What remains, as for the discipline: a frame of S later than the master's
 * timeout, with the shape of S's next question, while no request of S was
 * given up, cannot be told from its answer. The master itself takes it too.
 *
 * Bounded: one pending request, one held answer, 256 slave records and a
 * ring of RTU_PAIR_QUEUE events, all in the one allocation of rtu_pairer_new;
 * events the caller does not drain are dropped and counted.
 */
#include "parser/internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RTU_PAIR_QUEUE 16
#define RTU_PAIR_HOLD_DEFAULT_NS 20000000ull

typedef struct pair_slave {
    uint8_t verdict;           /* P4: VERDICT_* */
    uint8_t genuine_streak;    /* P4: equal answers for other requests that stood alone */
    uint8_t gave_up;           /* P5: a request to it went unanswered (1), or a copy answered it (2) */
    uint16_t heard_len;        /* P4: the last answer-shaped frame heard from it ... */
    int32_t heard_for;         /* ... the address of the request pending then, -1: none */
    uint8_t heard[RTU_MAX_ADU];
    uint8_t gave_up_req[RTU_MAX_ADU];
    uint16_t gave_up_len;
} pair_slave_t;

enum { VERDICT_UNKNOWN = 0, VERDICT_GENUINE, VERDICT_SENT };

struct rtu_pairer {
    bool ans_equal;            /* the held answer equals the slave's last frame, for another request */
    bool ans_alone;            /* ... and nothing but P4 doubted it */
    uint64_t hold_ns;
    bool have_req, have_ans, ans_doubtful, ans_dup, req_retry;
    const char *ans_why;
    uint64_t ans_noise_mark;
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
static const char p5_copy_why[] = "first answer after a copy took the last request's place";

/* The held answer is settled: by the next request, by silence, or by the end. */
static void settle(rtu_pairer_t *p)
{
    if (!p->have_ans)
        return;
    bool doubtful = p->ans_doubtful;
    const char *why = p->ans_why;
    pair_slave_t *s = &p->slaves[p->req.adu[0]];
    if (p->ans_equal && s->verdict == VERDICT_UNKNOWN) {   /* P4: did it stand alone? */
        bool alone = p->ans_alone;
        s->genuine_streak = alone ? (uint8_t)(s->genuine_streak + 1) : 0;
        if (s->genuine_streak >= 2)
            s->verdict = VERDICT_GENUINE;
    }
    if (doubtful && why == p4_why && s->verdict != VERDICT_GENUINE) {
        /* A copy took the request's place: its own answer may still come, late,
         * in the next request's wait, as after a give-up (P5). */
        s->gave_up = 2;
        memcpy(s->gave_up_req, p->req.adu, p->req.len);
        s->gave_up_len = p->req.len;
    }
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
    if (why != p4_why && why != p5_copy_why)
        p->ans_alone = false;   /* P4's own doubts do not count against the verdict */
    if (!p->ans_doubtful)
        p->ans_why = why;
    p->ans_doubtful = true;
}

static void on_request(rtu_pairer_t *p, const rtu_frame_t *f)
{
    settle(p);
    p->st.requests++;
    bool retry = false;
    if (p->have_req) {   /* P2: the master gave up on the pending request */
        rtu_pair_event_t *ev = push(p, RTU_PAIR_UNANSWERED);
        if (ev) {
            ev->request = p->req;
            ev->retry = p->req_retry;
            /* the master's timeout as heard: its last byte to the next request */
            ev->latency_ns = f->t_first_ns > p->req.t_last_ns ? f->t_first_ns - p->req.t_last_ns : 0;
        }
        pair_slave_t *s = &p->slaves[p->req.adu[0]];
        s->gave_up = 1;
        memcpy(s->gave_up_req, p->req.adu, p->req.len);
        s->gave_up_len = p->req.len;
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
    s->gave_up = 0;        /* P5: the late answer has come */
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
    heard(p, f, for_address);
    if (s->gave_up) {   /* P5 */
        bool answers_retry = s->gave_up_len == p->req.len &&
                             memcmp(s->gave_up_req, p->req.adu, p->req.len) == 0;
        if (!answers_retry)
            doubt(p, s->gave_up == 2 ? p5_copy_why : "first answer after the master gave up on this slave");
        s->gave_up = 0;
    }
}

void rtu_pairer_frame(rtu_pairer_t *p, const rtu_frame_t *f, uint64_t noise_bytes)
{
    if (p->have_ans && noise_bytes > p->ans_noise_mark)
        doubt(p, "noise after the answer");
    if (!f->crc_ok) {
        if (p->have_ans)
            doubt(p, "a damaged frame after the answer");
        rtu_pair_event_t *ev = push(p, RTU_PAIR_DAMAGED);
        if (ev)
            ev->answer = *f;
        return;
    }
    if (f->is_request)
        on_request(p, f);
    else
        on_answer(p, f, noise_bytes);
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
}
