/*
 * line/state.h -- the line core's state, shared by its files and by nothing
 * else: events.c (the events, construction, timing), queue.c (the request
 * queues and parked retries), discipline.c (the line discipline, whose
 * invariants are stated at its top) and copies.c (I4 and I5).
 */
#ifndef RTUGW_LINE_STATE_H
#define RTUGW_LINE_STATE_H

#include "line/line.h"

#define BUS_QUEUES 2   /* 0: interactive (or everything), 1: background polls */
#define BROADCAST_TURNAROUND_NS 20000000ull  /* slaves act on a broadcast before the next frame */
#define TIMEOUT_WIDEN_LIMIT 4                /* adaptive timeout: at most 4x the configured one */
#define COPY_WINDOW_TIMEOUTS 2               /* a copy comes at most this many of its slave's timeouts after its answer */
#define LOG_SUMMARY_NS 10000000000ull        /* info summaries per slave: at most one per 10 s */
#define N_SLAVES 248
#define REFUSED_KEPT 4                       /* refused widened reads a slave's map ends are learned from */
#define HOLD_FCS_KEPT 8                      /* functions an I4 re-ask's hold holds, each with its own end */
#define SHAPES_KEPT 2                        /* answers and give-ups a slave's question avoids the shape of */

/* What happened to a slave, for the rate-limited info summary. */
enum slave_event { EV_TIMEOUT, EV_LATE, EV_DROPPED, EV_REFUSED, EV_COUNT };

typedef struct slave_state {
    bool used;                    /* materialised (line_slave); false: it reads as line_slave_fresh */
    unsigned timeout_ms;          /* in force: widened by late answers */
    unsigned base_timeout_ms;     /* configured */
    unsigned longest_timeout_ms;  /* the longest configured since the slave was made (I5's copy window) */
    unsigned dead_after;
    unsigned backoff_ms;
    unsigned failures;            /* consecutive transactions without an answer */
    uint64_t dead_until_ns;
    uint64_t hold_until_ns;       /* I2: nothing is asked of it before this */
    uint64_t last_send_ns;        /* end of the wire time of the last attempt sent to it */
    uint64_t timed_out_send_ns;   /* ... of its question's first attempt that timed out (0: none): receive.c */
    uint8_t last_fc;              /* the function of the last attempt sent to it */
    line_request_t *parked;         /* I1: its outstanding question, waiting to be asked again */
    unsigned parked_attempts;
    uint64_t log_next_ns;
    unsigned events[EV_COUNT];    /* since the last summary */
    /* I4 (copies): the last answer delivered, to know a copy of it again. */
    uint64_t last_answer_hash;    /* 0: none yet */
    uint64_t last_question_hash;
    uint64_t last_answer_end_ns;
    uint64_t quiet_ns;            /* a slave that repeats: asked nothing new this long after an answer */
    uint64_t suspect_delay_ns;    /* a verification is running: how late the suspect copy came */
    uint8_t copies;               /* COPIES_UNKNOWN, _GENUINE (a transport with ids: equal answers are real), _SENT */
    bool verifying;               /* the question in flight re-asks a suspect answer's */
    /* I5 (after a give-up): answers must agree before one is delivered. */
    bool confirming;
    uint8_t confirm_cause;        /* CONFIRM_GIVE_UP, or CONFIRM_COPY (I4, a slave that repeats) */
    uint64_t confirm_hash;        /* the candidate answer waiting for its equal; 0: none */
    uint64_t confirm_question;    /* the question it answered */
    unsigned confirm_asks;        /* re-asks of the question in flight for it */
    /* Shapes (copies.c): what a stale frame of this slave can look like. */
    uint16_t answer_shape[SHAPES_KEPT];  /* its last answers' shapes (0: none) */
    uint64_t answer_hash[SHAPES_KEPT];   /* ... and their bytes' hashes (a copy has both) */
    uint16_t stale_shape[SHAPES_KEPT];   /* the last questions given up, as asked on the wire */
    unsigned stale_run;           /* questions given up since the last answer taken */
    uint32_t shape_refused_end[5][REFUSED_KEPT];  /* per fc 1..4: widened reads refused, their ends */
    bool widen;                   /* I6 may widen its reads ([device] widen_reads; never with ids) */
    bool hold_by_function;        /* I2: its hold is only a give-up's: it holds the functions given up */
    uint32_t hold_fcs;            /* I2: its hold is only verified re-asks': it holds these functions
                                     (bit fc, 1..31; 0: the hold holds all) */
    uint8_t hold_fc[HOLD_FCS_KEPT];        /* ... each until its own re-ask's guard has passed */
    uint64_t hold_fc_until_ns[HOLD_FCS_KEPT];
    /* I9 (foreign.c): an answer that may be another slave's owed one, to confirm. */
    uint64_t foreign_hash;        /* the candidate waiting for its equal; 0: none */
    uint64_t foreign_question;
    unsigned foreign_asks;
    uint16_t parked_wire_qty;     /* the parked question's read quantity as asked on the wire (0: as it came) */
    uint16_t asked_shape[2];      /* I6: the shapes the question in hand was asked in (its attempts'), newest first */
} slave_state_t;

#define CONFIRM_MAX_ASKS 3        /* I5: then 0x0B, and the next question confirms again */
#define REASKS_MAX (2 * CONFIRM_MAX_ASKS + 2)   /* one question's re-asks to confirm, all causes (discipline.c) */

enum { COPIES_UNKNOWN = 0, COPIES_GENUINE, COPIES_SENT };
enum { CONFIRM_GIVE_UP = 0, CONFIRM_COPY };

/* I9 (line/foreign.c): an answer owed to the line, which a device server may
 * put another slave's address on. */
#define OWED_KEPT 32
#define OWED_WINDOW_TIMEOUTS 10    /* an attempt timed out, a question given up: watched this many of its slave's timeouts */
#define OWED_ANSWERED_TIMEOUTS 3   /* a question asked more than once of a slave that repeats, answered */
typedef struct line_owed {
    uint8_t slave;
    uint16_t shape;      /* its question's answer shape (function, byte count; 0xff: none) */
    uint64_t echo;       /* a write's: the hash of the echo it is answered with; 0: none known */
    uint64_t until;      /* watched until then; 0: a free entry */
} line_owed_t;

/*
 * The keys a reload may change on a running line (events.c): the bus's
 * timing and retry keys and each slave's device keys. The line keeps the
 * ones in force: a slave never used is made from them (line_slave).
 */
struct line_keys {
    unsigned response_timeout_ms, retries, gap_us, priority_hold_us, poll_share;
    bool tcp_first;
    struct {
        unsigned timeout_ms, dead_after, backoff_ms;
        bool widen;
        bool named;   /* a [device] names it: its metrics are read (web/metrics.c, web/http.c) */
    } slave[N_SLAVES];
};

typedef struct request_ring {
    line_request_t *slot;
    unsigned head, len;
} request_ring_t;

struct line {
    size_t map_len;           /* the line lives in its own mapping (events.c, line_new) */
    config_bus_t cfg;
    line_env_t env;
    line_params_t p;
    uint64_t now_ns;          /* the time of the event being handled: the core's only clock */
    rtu_framer_t *framer;
    uint64_t t35_ns, gap_ns;  /* the silence that ends a frame; the rest between frames */
    unsigned wire_bits;       /* bits a byte takes on the wire (deadlines include them): a
                                 character's, two in ASCII, none on a Modbus TCP device */
    unsigned char_bits;
    bool framed;              /* the driver reads whole frames (ASCII, MBAP) */
    request_ring_t queue[BUS_QUEUES];
    bool port_up;
    bool kick_pending;
    unsigned parked_count;
    /* The attempt on the wire. */
    bool busy;
    line_request_t cur;
    line_request_t wire;       /* cur as asked on the wire: widened to a shape no stale frame has */
    unsigned attempts;
    uint64_t t_first_send_ns;
    uint64_t deadline_ns;    /* 0: none */
    bool misshapen;          /* its slave sent a frame of its function that only it can be (discipline.c) */
    bool guarded_other;      /* something else set its slave's guard while it was on the wire */
    uint64_t hold_at_send_ns;   /* its slave's hold as it was sent */
    /* I3: an answer waiting for the quiet that vouches for it. */
    bool pending;
    bool pending_doubtful;
    bool pending_suspect;      /* I4: equal to the slave's last answer, for another question */
    bool pending_unconfirmed;  /* I5: the first answer after a give-up, or one its re-ask did not repeat */
    int pending_unexplained;   /* bytes heard in the window that no whole frame accounts for */
    uint64_t pending_t_last_ns;
    uint64_t pending_noise_mark;   /* the framer's noise count as the held answer was framed */
    bool resolve_sent;         /* I3's barrier is in the mailbox (line_start_next) */
    uint16_t pending_len;
    uint8_t pending_pdu[RTU_MAX_PDU];
    uint64_t t_line_free_ns; /* the line rests until then: last byte heard + gap */
    /* I8: the port came back with answers still owed from before its loss:
     * nothing is asked until the line has been quiet this long (the owed
     * slaves' longest timeout), from the reconnect and from each byte heard. */
    uint64_t reconnect_len_ns;      /* set at the loss; 0: nothing was owed */
    uint64_t reconnect_quiet_ns;    /* the line is held until then; 0: not held */
    line_owed_t owed[OWED_KEPT];    /* I9: answers owed to the line, a ring */
    unsigned owed_next;
    bool pending_foreign;           /* I9: the held answer may be another slave's: confirm it */
    /*
     * At most one timeout timer and one silence timer per bus are pending,
     * whatever the request rate: a timer that fires checks the deadline in
     * force *now* and re-arms itself if that is later. Arming one per
     * attempt (they cannot be cancelled cheaply) kept rate x timeout timers
     * alive, each a heap node and a wake-up.
     */
    uint64_t timer_at_ns;
    /* ... and its id: when sparse traffic leaves the line idle, it is
     * cancelled (its host keeps it, actor/host.c H4: no wake-up) rather than
     * left to wake the loop for nothing; dense traffic keeps the one timer,
     * which serves the requests that follow it (line/discipline.c, drop_deadline_timer). */
    uint64_t timer_id;
    uint64_t idle_since_ns;    /* when the line last fell idle; 0: busy since */
    bool sparse;               /* the line had been idle 10 ms or more before this attempt */
    uint64_t kick_at_ns;
    uint64_t last_chunk_ns;
    bool idle_pending;
    uint64_t verify_state;
    /* The priority class's hold (queue.c): when its last answer went, and
     * how long its masters take to send the next request (learned). */
    uint64_t prio_answered_ns;
    uint64_t prio_return_ns, prio_return_dev_ns;
    uint64_t prio_held_since_ns;   /* a normal request has waited since (0: none waits) */
    unsigned prio_streak;          /* priority requests started in a row while normal ones waited */
    unsigned poll_streak;          /* interactive requests started in a row while polls waited (poll_share) */
    bool prio_hold_open;           /* its last answer went, and no request of it came since */
    /* The order below is the pages a bus makes resident (events.c,
     * line_new): what every bus writes first (the fields above, its
     * metrics, its keys), then the per-slave metrics (64 B each: the first
     * slaves' share those pages) and the slaves' state (384 B each), where
     * only the pages of slaves used are ever written. */
    line_bus_metrics_t m;
    line_keys_t keys;          /* in force: what a slave never used is made of */
    line_slave_metrics_t sm[N_SLAVES];
    /* Never read or written directly but through line_slave (or
     * line_slave_view where the line is const): a slave's state is written
     * when the slave is first used, so the pages of slaves never used stay
     * zero pages of the line's mapping, not resident (events.c). */
    slave_state_t slaves[N_SLAVES];
};

/* events.c: slave s's state, made fresh (line_slave_fresh) when first used;
 * in a const line, a fresh copy in *tmp for a slave never used. */
slave_state_t *line_slave(line_t *l, unsigned s);
const slave_state_t *line_slave_view(const line_t *l, unsigned s, slave_state_t *tmp);

/* queue.c: the two request queues and the parked retries (I1). */
bool line_queue_push(line_t *l, unsigned qi, const line_request_t *req);
bool line_queue_push_or_purge(line_t *l, unsigned qi, const line_request_t *req, uint64_t now);
bool line_queue_pick(line_t *l, uint64_t now, unsigned *attempts, uint64_t *wake);
void line_queue_answer_all(line_t *l, uint8_t code);
void line_park(line_t *l, const line_request_t *req, unsigned attempts);
void line_unpark(line_t *l, unsigned slave, line_request_t *out, unsigned *attempts);
bool line_slave_dead(const line_t *l, unsigned slave, uint64_t now);
void line_priority_answered(line_t *l);
void line_priority_submitted(line_t *l);
uint64_t line_priority_hold(line_t *l, uint64_t now);

/* discipline.c: the discipline. */
void line_start_next(line_t *l);
/* The port went with an answer held (I3): delivered if nothing doubts it, else 0x0A. */
void line_pending_port_lost(line_t *l);
void line_port_lost_attempts(line_t *l, uint64_t now);
/* foreign.c. I8: the port goes with answers owed (the hold to keep when it is back), and bytes heard meanwhile. */
void line_reconnect_hold(line_t *l, uint64_t now);
void line_reconnect_begin(line_t *l, uint64_t now);
void line_reconnect_heard(line_t *l, uint64_t t_ns);
/* I9: an attempt timed out or a question was given up: its answer is owed. */
void line_owed_push(line_t *l, const line_request_t *wire, uint64_t now, unsigned timeouts);
bool line_owed_shape(const line_t *l, unsigned slave, uint16_t shape);
void line_foreign_check(line_t *l, unsigned slave);
void line_foreign_resolve(line_t *l, uint64_t now);
/* shapes.c: a question's answer shape (function, byte count; 0xff: none), an answer's (0: none). */
uint16_t line_shape_of_question(const line_request_t *wire);
uint16_t line_shape_of_answer(const uint8_t *pdu, size_t len);
bool line_shape_stale_like(uint16_t stale, uint16_t shape);
/* I3's barrier came back: every byte read before it has been seen. */
void line_on_resolve(line_t *l);
/* The attempt in flight had no answer by its deadline. */
void line_on_timeout(line_t *l, uint64_t now);
void line_drain_frames(line_t *l);   /* receive.c */
/* For receive.c: the guards (I2) and the timeout a late answer widens
 * (slave.c); an attempt parked to be asked again (I1), an answer delivered
 * trimmed to what was asked (I6), and the frame log (discipline.c). */
void line_guard_slave(line_t *l, unsigned slave, uint64_t from);
void line_guard_slave_function(line_t *l, unsigned slave, uint64_t from, uint8_t fc);
uint64_t line_hold_end(const slave_state_t *s, uint8_t fc);
void line_guard_extend(line_t *l, unsigned slave, uint8_t fc, uint64_t until);
void line_widen_timeout(line_t *l, unsigned slave, uint64_t latency_ns);
void line_park_attempt(line_t *l, const line_request_t *req, unsigned attempts);
void line_deliver_shaped(line_t *l, const line_request_t *req, const line_request_t *wire, const uint8_t *raw,
                         size_t len, uint64_t t_last);
void line_log_frame(const line_t *l, const char *dir, const uint8_t *p, size_t n);
unsigned line_req_address(const line_request_t *r);
/* A log line, formatted only when its level is on. */
void line_log(const line_t *l, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* copies.c: I4. */
void line_pending_bytes(line_t *l, size_t n);
void line_confirm_reset(slave_state_t *s);
void line_copies_sent(line_t *l, unsigned slave, uint64_t delay_ns);
void line_copies_check(line_t *l, unsigned slave, uint64_t t_last);
/* I5: the slave's question was given up; what it sends may still answer it. */
void line_confirm_begin(line_t *l, unsigned slave, uint8_t cause);   /* CONFIRM_* */
void line_copies_delivered(line_t *l, const line_request_t *req, const uint8_t *pdu, size_t len,
                           uint64_t t_last);
void line_copies_stray(line_t *l, unsigned slave, const rtu_frame_t *f);
bool line_copies_suspect(const line_t *l, unsigned slave, const uint8_t *pdu, size_t len,
                         const line_request_t *wire);
/* Shapes: req as it goes on the wire (true: widened, and its answer trimmed). */
bool line_shape_question(const line_t *l, const line_request_t *req, line_request_t *wire);
/* The answer to req from the answer to its wire question: the registers asked for. */
size_t line_shape_trim(const line_request_t *req, const uint8_t *raw, size_t len, uint8_t *out);
/* The wire question was widened and answered with an exception: learn where the map ends. */
void line_shape_refused(line_t *l, const line_request_t *wire);
/* A question given up: its answer may still come, with its wire question's shape. */
void line_shape_given_up(line_t *l, const line_request_t *wire);
void line_shape_given_up_shape(line_t *l, unsigned slave, uint16_t shape);
void line_shape_owed(line_t *l, unsigned slave);
void line_shape_answered(line_t *l, unsigned slave, const uint8_t *pdu, size_t len);
/* I5 by construction: the held answer cannot be a stale frame of its slave. */
enum { CERTIFIED_NOT = 0, CERTIFIED_BY_SHAPE, CERTIFIED_BY_FUNCTION };
int line_shape_certifies(const line_t *l, unsigned slave);
/* No late answer of the questions given up since the slave's last answer has function fc. */
bool line_shape_may_be_stale(const slave_state_t *s, const uint8_t *pdu, size_t len);
uint64_t line_hash(const uint8_t *p, size_t n);
bool line_shape_function_free(const slave_state_t *s, uint8_t fc);
void line_deliver(line_t *l, const line_request_t *req, const uint8_t *pdu, size_t len);
void line_answer_exception(line_t *l, const line_request_t *req, uint8_t code);
/* A slave's guard: its response timeout in force. */
static inline uint64_t line_guard_ns(const slave_state_t *s)
{
    return (uint64_t)s->timeout_ms * 1000000ull;
}
/* slave.c: 0x0B for a request, counted; a slave's event, summarised at info. */
void line_refuse(line_t *l, const line_request_t *req, uint64_t now);
void line_slave_event(line_t *l, unsigned slave, enum slave_event ev, uint64_t now);
uint64_t line_wire_ns(const line_t *l, size_t bytes);
void line_arm_timeout(line_t *l, uint64_t deadline);

#endif
