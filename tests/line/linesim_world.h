/*
 * tests/line/linesim_world.h -- the inside of tests/line/linesim.c's world,
 * shared with tests/line/linesim_slaves.c (the wire and the model slaves)
 * and nothing else: the tests see linesim.h only.
 */
#ifndef RTUGW_TESTS_LINESIM_WORLD_H
#define RTUGW_TESTS_LINESIM_WORLD_H

#include "tests/line/linesim.h"

#include "config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum ev_type { EV_TIMER = 1, EV_ARRIVE, EV_FEED, EV_BARRIER, EV_SLAVE_RX, EV_SLAVE_TX, EV_CLIENT, EV_SUBMIT,
               EV_PORT, EV_CLOSE, EV_CLOSED, EV_REOPEN, EV_KEYS, EV_PORT_CHANGE };

typedef struct ev {
    uint64_t t, seq;
    uint8_t type, kind;
    bool cancelled;
    uint16_t len;
    uint32_t tx, txgen;
    uint32_t frame;      /* a slave's answer this piece belongs to (1 + its ring index; 0: noise) */
    uint16_t off;        /* ... at this offset in it */
    uint64_t id, at;
    struct ev *next_free;
    uint8_t data[RTU_MAX_ADU + 8];
} ev_t;

/* A transmission on the wire: two that overlap garble each other. */
#define TX_RING 1024
typedef struct tx {
    uint64_t start, end;
    uint32_t gen;
    bool garbled;
} tx_t;

/* A slave's answer as the gateway's port receives it, piece by piece, so
 * that a damaged one is kept CRC-bad (linesim_on_arrive). */
#define FRAME_RING 64
typedef struct frame_rec {
    uint8_t got[RTU_MAX_ADU + 8];
    uint16_t len, have;
    bool garbled;
} frame_rec_t;

#define REQ_RING 4096
typedef struct req_info {
    uint64_t id, t_submit;
    int client;          /* -1: scripted */
    int script;          /* index of a scripted request's answer record; -1 none */
    bool answered;
    uint8_t slave;
    uint16_t len;
    uint8_t pdu[RTU_MAX_PDU];
} req_info_t;

typedef struct slave_rt {
    bool present;
    sim_slave_model_t m;
    uint64_t busy_until;   /* the end of its last transmission scheduled */
    uint64_t talk_from;    /* the start of its first transmission not over yet */
} slave_rt_t;

#define SCRIPT_MAX 256
typedef struct answer_rec {
    bool have;
    uint64_t at;
    uint16_t len;
    uint8_t pdu[RTU_MAX_PDU];
} answer_rec_t;

#define WRITES_MAX 4096
struct sim {
    line_origin_t origin;   /* first: the answers' way back */
    uint64_t rng, now, seq;
    config_t *cfg;
    line_t *line;
    line_keys_t *keys[SIM_KEYS_MAX];   /* reloads scheduled (sim_keys_at), applied by EV_KEYS */
    unsigned n_keys;
    config_bus_t ports[SIM_KEYS_MAX];  /* port changes scheduled (sim_port_change_at) */
    unsigned n_ports;
    uint64_t char_ns, host_delay_max_ns, last_feed_t;
    bool stamp_at_read;
    int unread;
    ev_t **heap;
    size_t heap_len, heap_cap;
    ev_t *free_evs;
    tx_t txs[TX_RING];
    uint32_t tx_next;
    frame_rec_t frames[FRAME_RING];
    uint32_t frame_next;
    uint64_t timer_seq;
    ev_t *deadline_timers[64];
    req_info_t reqs[REQ_RING];
    uint64_t next_req_id;
    slave_rt_t slaves[248];
    unsigned slave_ids[SIM_MAX_SLAVES], n_slaves;
    unsigned clients;
    uint64_t client_target, think_max_ns;
    struct { unsigned slave; uint64_t think_ns, until, answers; } prio;   /* sim_priority_master */
    answer_rec_t script[SCRIPT_MAX];
    unsigned n_script;
    struct { uint8_t slave; uint64_t t; } writes[WRITES_MAX];
    unsigned n_writes;
    sim_counts_t c;
    char first_wrong[512];
    bool trace;           /* RTUGW_LINESIM_TRACE: every event and the core's debug log on stderr */
    /* The transport's connection (p_close): while it is down, what the line
     * says is lost and what the gateway writes reaches nobody; the core
     * hears of the loss after the bytes read before it (EV_CLOSED). */
    bool conn_down, conn_loss_told;
    bool foreign_late;    /* sim_foreign_late */
    uint64_t conn_down_until;
};

static inline void hex(const char *what, uint64_t t, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%10.3f ms %s", (double)t / 1e6, what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %02x", p[i]);
    fputc('\n', stderr);
}

/* ---- randomness (xorshift64*: a run is its seed) ------------------------------- */

static inline uint64_t rnd(sim_t *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1Dull;
}

static inline double rnd01(sim_t *s) { return (double)(rnd(s) >> 11) * 0x1.0p-53; }
static inline bool chance(sim_t *s, double p) { return p > 0 && rnd01(s) < p; }

static inline uint64_t uniform(sim_t *s, uint64_t lo, uint64_t hi)
{
    return hi <= lo ? lo : lo + rnd(s) % (hi - lo + 1);
}

/* An event of `type` at t (never before now), pushed on the heap (linesim.c). */
ev_t *linesim_ev_new(sim_t *s, uint8_t type, uint64_t t);

/* linesim_slaves.c: a transmission of len bytes starting now (its index in
 * the wire's table: any other on the wire meanwhile garbles it); a chunk of
 * an answer reaching the port (EV_ARRIVE: queued for the port's read); a
 * request heard by the model slaves (EV_SLAVE_RX); a slave's answer put on
 * the wire in 1 to 3 pieces (EV_SLAVE_TX). */
uint32_t linesim_tx_begin(sim_t *s, size_t len);
void linesim_on_arrive(sim_t *s, ev_t *a);
void linesim_on_slave_rx(sim_t *s, ev_t *e);
void linesim_slave_transmit(sim_t *s, const ev_t *e);

#endif
