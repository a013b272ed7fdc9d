/*
 * tests/line/linesim.h -- a simulated RS-485 line around one line core
 * (line/line.h), in simulated time: a clock and an event heap, the host's
 * part (timers, the port's reads with their delay, the barrier, FIONREAD),
 * the wire (transmissions take their character time; two that overlap
 * garble each other, as on RS-485), and model slaves with faults. Nothing in
 * it reads a real clock or touches an fd, so a run is a pure function of
 * its seed.
 *
 * Used by tests/line/test_line_core.c (scripted scenarios and the seeded
 * explorer). Every answer the core gives goes to linesim's origin, which
 * checks it against the question it answers: the model slave's register
 * map is a function of (slave, function, address), so the right answer to
 * every question is known.
 */
#ifndef RTUGW_TESTS_LINESIM_H
#define RTUGW_TESTS_LINESIM_H

#include "line/line.h"

#include <stdbool.h>
#include <stdint.h>

#define SIM_MAX_SLAVES 8
#define SIM_MAX_CLIENTS 16
#define SIM_MS 1000000ull

/* What a model slave's registers hold: the right answer of every read. */
enum sim_values {
    SIM_VALUES_UNIQUE = 0,   /* per slave, function and address: no two reads alike */
    SIM_VALUES_ZERO,         /* all zero: the most common answer in a plant */
    SIM_VALUES_EQUAL,        /* all the same non-zero word */
    SIM_VALUES_ALTERNATE,    /* two values, alternating by address */
};

/* A model slave: how it answers, and its faults (probabilities per request). */
typedef struct sim_slave_model {
    uint64_t lat_min_ns, lat_max_ns;   /* the answer's delay after the request's last byte */
    double p_silent;                   /* no answer */
    double p_late;                     /* delay in [late_min_ns, late_max_ns] instead */
    uint64_t late_min_ns, late_max_ns;
    double p_double;                   /* the answer again, copy_gap after */
    uint64_t copy_gap_min_ns, copy_gap_max_ns;
    double p_noise;                    /* 1..6 random bytes just before the answer */
    double p_crc;                      /* the answer with one byte flipped */
    bool flip_function;                /* every answer's function byte with its top bit flipped
                                          (test_residue_after_answer: a CRC-good exception prefix) */
    double p_truncate;                 /* the answer cut short */
    double p_split;                    /* the answer in two pieces, split_gap apart */
    uint64_t split_gap_max_ns;
    double p_exception;                /* a slave exception (0x04) instead of data */
    double p_misshapen;                /* a read's answer one register short, CRC good (libmodbus's test server) */
    double p_stall;                    /* stalls (a busy PLC): the answer after [stall_min, stall_max], */
    uint64_t stall_min_ns, stall_max_ns;   /* later than any guard, deaf meanwhile */
    double p_foreign;                  /* another slave's frame first (on an answer in its
                                          time, unless sim_foreign_late): the next present
                                          slave's address on this answer (CRC good), then the
                                          answer (a device server that mixes up its frames) */
    double p_close;                    /* the transport (RTU over TCP) closes after half the
                                          answer; bytes on the line while it is down are lost,
                                          later ones reach the next connection, as a device
                                          server forwards its line to whatever is connected */
    uint64_t reconnect_min_ns, reconnect_max_ns;   /* how long the connection stays down */
    bool queueing;                     /* busy answering: a new request waits its turn */
    bool deaf_while_busy;              /* busy answering: a new request is not heard */
    enum sim_values values;
    unsigned map_start;                /* reads starting below it: exception 02 (libmodbus's server's map) */
} sim_slave_model_t;

typedef struct sim_counts {
    uint64_t submitted, answered, data, slave_exceptions, gateway_exceptions[256];
    uint64_t wrong, duplicate_answers, writes, collisions, events;
    uint64_t crc_escapes;   /* damaged answers whose bytes passed CRC-16 anyway, kept out (linesim_on_arrive) */
    uint64_t foreign_sent, closes, lost_bytes;   /* the transport's faults, as they happened */
    uint64_t worst_latency_ns;
    uint64_t port_changes_refused;   /* line_port_change said no (a test asserts 0) */
} sim_counts_t;

typedef struct sim sim_t;

/* A gateway line on a simulated bus of `baud` 8N1 with the INI text's
 * [bus line] settings (response_timeout_ms, retries, ...) and devices.
 * host_delay_max_ns: the port's reads lag the wire by up to this. */
sim_t *sim_new(uint64_t seed, const char *bus_ini, uint64_t host_delay_max_ns);
void sim_free(sim_t *s);
/* Stamp each chunk with the moment the port is read (a real host's clock,
 * gateway/port.c) rather than its arrival on the wire: a late read then
 * looks like silence inside an answer. */
void sim_stamp_at_read(sim_t *s, bool on);
/* p_foreign on late and stalled answers too, not only on answers in their
 * time: the fault I9 (line/foreign.c) is for. */
void sim_foreign_late(sim_t *s, bool on);
/* Slave `id` (1..247) answers on the line with this model. */
void sim_add_slave(sim_t *s, unsigned id, const sim_slave_model_t *m);
/* Slave `id` answers with this model from now on (it recovers, or fails). */
void sim_set_model(sim_t *s, unsigned id, const sim_slave_model_t *m);
/* One request now (time `at`): a read or write PDU to `slave`. Its answer is checked. */
void sim_submit_at(sim_t *s, uint64_t at, unsigned slave, const uint8_t *pdu, size_t len);
/* Random traffic: `clients` clients, each a request to a random slave, the
 * next after its answer and a think time; until `transactions` answers. */
void sim_clients(sim_t *s, unsigned clients, uint64_t transactions, uint64_t think_max_ns);
/* A priority master ([tcp] priority_clients) that reads slave `slave` in a
 * loop, `think_ns` after each answer (its round trip), until `until`; and
 * the answers it got. */
void sim_priority_master(sim_t *s, unsigned slave, uint64_t think_ns, uint64_t until);
uint64_t sim_priority_answers(const sim_t *s);
/* The port is lost at `at` and back `down_ns` later. */
void sim_port_flap_at(sim_t *s, uint64_t at, uint64_t down_ns);
/* A reload at `at`: the line takes the keys (line_keys_t) of bus_ini, the
 * same form as sim_new's, from then on. At most SIM_KEYS_MAX a run; 0 or -1. */
#define SIM_KEYS_MAX 8
int sim_keys_at(sim_t *s, uint64_t at, const char *bus_ini);
/* A reload at `at` that moves the line to the settings of bus_ini (its baud,
 * above all): the port goes down, the line takes them (line_port_change), the
 * wire's character time becomes theirs, and the port is up again down_ns
 * later. At most SIM_KEYS_MAX a run; 0 or -1. */
int sim_port_change_at(sim_t *s, uint64_t at, uint64_t down_ns, const char *bus_ini);
/* Runs until nothing is left to happen, or `until` (0: no limit). */
void sim_run(sim_t *s, uint64_t until);
uint64_t sim_now(const sim_t *s);
const sim_counts_t *sim_counts(const sim_t *s);
/* Requests submitted and not answered yet. */
uint64_t sim_outstanding(const sim_t *s);
line_bus_metrics_t *sim_metrics(sim_t *s);
line_slave_metrics_t *sim_slave_metrics_of(sim_t *s, unsigned slave);
/* The times the gateway wrote a frame to slave `slave` (up to cap); the count. */
unsigned sim_writes_to(const sim_t *s, unsigned slave, uint64_t *times, unsigned cap);
/* The answers, in order, of the requests submitted with sim_submit_at: the
 * PDU of the i-th (NULL past the count), its length and when it came. */
const uint8_t *sim_answer(const sim_t *s, unsigned i, size_t *len, uint64_t *at);
/* The first wrong answer, described (empty when none). */
const char *sim_first_wrong(const sim_t *s);
/* The right data answer of a read: its PDU (exception, data) into out. */
size_t sim_expected(const sim_t *s, unsigned slave, const uint8_t *q, size_t qlen, uint8_t *out);

#endif
