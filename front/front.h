/*
 * front/front.h -- the Modbus front ends: the clients and masters in front
 * of rtugw. Owns the Modbus TCP listener and its sessions (tcp.c), RTU over
 * TCP (rtu_tcp.c, rtu_tcp_frame.c: the same sessions, RTU framing),
 * Modbus UDP (udp.c), the one way every request goes in (dispatch.c),
 * Modbus/TCP Security (mbaps.c, and the TLS module tls.c, rtugw-tls.so),
 * and the serial slave (serial_slave.c: a master on a port of its own). Each
 * builds line_request_t's, names itself as their origin and hands them to
 * gw_submit(). May call gateway/ (the runtime: submit, loop, ports, the
 * cache, the counters), parser/, config/ and line/ (the request and the
 * origin), module/ (where the TLS module is found), libevent, and OpenSSL in
 * the TLS module.
 *
 * The wiring and the web side call what this header declares.
 */
#ifndef RTUGW_FRONT_FRONT_H
#define RTUGW_FRONT_FRONT_H

#include "gateway/gateway.h"

/* The front ends' counters, each block owned by its listener (tcp.c,
 * rtu_tcp.c, udp.c, mbaps.c), written on the I/O thread, read by /status
 * and /metrics through tcp_metrics, udp_metrics and mbaps_metrics: relaxed
 * atomics with a single writer each. A listener a reload starts starts at 0,
 * as its counters did before it existed. */
typedef struct gw_tcp_metrics {
    atomic_uint_fast64_t accepted, refused_full, refused_allow, closed, active;
    atomic_uint_fast64_t requests, answers, bad_mbap, discarded, read_only_refused;
    atomic_uint_fast64_t slow_reader_closed, idle_closed, unrouted, cache_hits;
    atomic_uint_fast64_t half_closed, refused_address, adu_timeout_closed, accept_errors, revoked_closed;
    atomic_uint_fast64_t ambiguous_refused;
    /* back-pressure (front/backpressure.c), per class: requests that waited
     * for a place in their bus, the time they waited, connections waiting now */
    atomic_uint_fast64_t waits, wait_us, waiting, priority_waits, priority_wait_us, priority_waiting;
    /* exceptions 06 answered for a full bus queue, and connections not read
     * for a while because their budget of them was spent (front/tcp.c) */
    atomic_uint_fast64_t busy_refused, busy_throttled;
} gw_tcp_metrics_t;

/* [udp] (front/udp.c): common holds what every front end counts (requests,
 * answers, bad_mbap: malformed datagrams, refused_allow, unrouted,
 * read_only_refused, cache_hits, discarded); the rest is UDP's own. */
typedef struct gw_udp_metrics {
    gw_tcp_metrics_t common;
    atomic_uint_fast64_t refused_inflight;  /* 0x06: max_pending of its source address in flight */
    atomic_uint_fast64_t refused_sources;   /* 0x06: max_clients addresses in flight already */
    atomic_uint_fast64_t send_errors;       /* answers the socket did not take */
    atomic_uint_fast64_t in_flight;         /* gauge */
} gw_udp_metrics_t;

/* Why a TLS client was refused (mbaps.c counts them by reason). */
typedef enum gw_tls_refusal {
    GW_TLS_NO_CERTIFICATE, GW_TLS_UNTRUSTED, GW_TLS_EXPIRED, GW_TLS_REVOKED, GW_TLS_NO_ROLE, GW_TLS_UNKNOWN_ROLE,
    GW_TLS_VERSION, GW_TLS_TIMEOUT, GW_TLS_CLOSED, GW_TLS_OTHER, GW_TLS_REFUSAL_COUNT
} gw_tls_refusal_t;
extern const char *const gw_tls_refusal_names[GW_TLS_REFUSAL_COUNT];

typedef struct gw_tls_metrics {
    atomic_uint_fast64_t accepted, handshakes, resumed, active, reloads, reload_failures;
    atomic_uint_fast64_t handshaking, handshakes_refused_full, handshakes_refused_address;
    atomic_uint_fast64_t refused[GW_TLS_REFUSAL_COUNT];
    atomic_uint_fast64_t role_requests[CONFIG_MAX_ROLES], role_refused[CONFIG_MAX_ROLES];
} gw_tls_metrics_t;

/* [tcp]: tcp_listen with MBAP framing. */
gw_tcp_t *tcp_new(gw_t *gw, char *err, size_t errcap);
/* [rtu_tcp] (rtu_tcp.c): tcp_listen with RTU framing. */
gw_tcp_t *rtu_tcp_new(gw_t *gw, char *err, size_t errcap);
/* The listener's own loops ([tcp] loops > 1) stopped and their threads
 * joined, their connections left open: call once the I/O loop has left,
 * before the runtime stops (idempotent; tcp_free does it too). */
void tcp_stop_loops(gw_tcp_t *tcp);
/* I/O thread, as all of these: each reaches the listener's other loops on
 * their own threads (front/tcp_loops.c). */
void tcp_free(gw_tcp_t *tcp);
void tcp_stop_accepting(gw_tcp_t *tcp);
unsigned tcp_in_flight(const gw_tcp_t *tcp);
/* Applies cfg, the listener's address included (bound before the old one
 * closes); res's restart gets the keys that could not apply (a port in use). */
void tcp_apply_config(gw_tcp_t *tcp, const config_tcp_t *cfg, reload_result_t *res);
/* What runs: cfg as applied, the old address where the new one failed. */
const config_tcp_t *tcp_running_config(const gw_tcp_t *tcp);
/* After [tls] reloaded: closes the sessions whose certificate no longer verifies. */
void tcp_recheck_sessions(gw_tcp_t *tcp);
/* [tls] reloaded: its listener opened, moved (bound before the old one
 * closes) or closed; -1 with err keeps the running one. Open sessions stay. */
int tcp_tls_listen(gw_tcp_t *tcp, gw_mbaps_t *mbaps, const config_tls_t *want, char *err, size_t errcap);
/* The roles' names changed: map[old index] is the new index, -1 gone
 * (that session closes). */
void tcp_roles_changed(gw_tcp_t *tcp, const int *map);
/* Its counters (NULL for tcp NULL: the listener is not enabled). */
const gw_tcp_metrics_t *tcp_metrics(const gw_tcp_t *tcp);
/* /status's ,"tcp":{...}: connections, requests, answers and the waits of
 * each class (0s for tcp NULL). I/O thread. */
struct evbuffer;
void tcp_status_json(const gw_tcp_t *tcp, struct evbuffer *b);


/* [udp] (udp.c, I/O thread): Modbus UDP requests routed as [tcp]'s, each
 * answered in one datagram; bounded per source address. */
gw_udp_t *udp_new(gw_t *gw, char *err, size_t errcap);
void udp_free(gw_udp_t *u);
/* A reload's [udp], on the I/O thread (udp.c says what applies when);
 * what waits is named in res's restart ("udp.port", "udp.max_pending"). */
void udp_apply_config(gw_udp_t *u, const config_tcp_t *want, reload_result_t *res);
const config_tcp_t *udp_running_config(const gw_udp_t *u);
void udp_stop_accepting(gw_udp_t *u);
unsigned udp_in_flight(const gw_udp_t *u);
const gw_udp_metrics_t *udp_metrics(const gw_udp_t *u);   /* NULL for u NULL */

/* mbaps.c (I/O thread): MB-TCP-Security for the TLS listener of tcp.c.
 * Loads the TLS module and makes a context of [tls]'s files; NULL with err. */
gw_mbaps_t *mbaps_new(gw_t *gw, char *err, size_t errcap);
void mbaps_free(gw_mbaps_t *t);
/* SIGHUP: a new context from fresh's files and settings for the next
 * connections; 0. A file that does not load keeps the old context: -1, logged. */
int mbaps_reload(gw_mbaps_t *t, const config_t *fresh);
/* The roles' names changed: the per-role counters follow map[old] (-1: dropped). */
void mbaps_roles_remap(gw_mbaps_t *t, const int *map, unsigned old_count);
const gw_tls_metrics_t *mbaps_metrics(const gw_mbaps_t *t);
/* The server certificate in force: subject and notAfter (s since the epoch). */
void mbaps_certificate(const gw_mbaps_t *t, const char **subject, int64_t *not_after);

/*
 * serial_slave.c: a serial master in front of rtugw, on a port of its own
 * ([serial_slave NAME]): an actor that frames the master's requests, answers
 * as the slaves its routes name through the buses, within answer_timeout_ms
 * or with exception 0x0B. Counters for /metrics.
 */
typedef struct gw_serial_slave_metrics {
    atomic_uint_fast64_t requests, answers, exceptions, timeouts, late_dropped, abandoned, ignored;
    atomic_uint_fast64_t bad_frames, port_up;
} gw_serial_slave_metrics_t;
/* I/O thread: a serial slave of section c (copied: it keeps its own). */
gw_serial_slave_t *serial_slave_new(gw_t *gw, const config_serial_slave_t *c, char *err, size_t errcap);
/* I/O thread, a reload: it stops taking requests and frees itself once
 * nothing can reach it (serial_slave.c says how); s is not the caller's after. */
void serial_slave_retire(gw_serial_slave_t *s);
/* Its section as it runs. */
const config_serial_slave_t *serial_slave_config(const gw_serial_slave_t *s);
void serial_slave_free(gw_serial_slave_t *s);
const char *serial_slave_name(const gw_serial_slave_t *s);
gw_serial_slave_metrics_t *serial_slave_metrics(gw_serial_slave_t *s);

/* report.c: the front ends' parts of the report table (gateway/report.h; ctx:
 * gw): [tcp]'s "tcp" and series, MB-TCP-Security's, [rtu_tcp]'s, [udp]'s and
 * the serial slaves' series, each read from the front ends running then. */
gw_report_part_t front_report_tcp(gw_t *gw);
gw_report_part_t front_report_mbaps(gw_t *gw);
gw_report_part_t front_report_rtu_tcp(gw_t *gw);
gw_report_part_t front_report_udp(gw_t *gw);
gw_report_part_t front_report_serial_slaves(gw_t *gw);

#endif
