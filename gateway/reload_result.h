/*
 * gateway/reload_result.h -- one reload's outcome, as its parts build it:
 * what each part applied, what waits for a restart, what is queued behind
 * tag writes, and the first error. Included by gateway/gateway.h; the
 * daemon's parts (daemon/reload_parts.c), the front ends' and the web
 * side's reloads (tcp_apply_config, udp_apply_config, http_reload) add to
 * it, and daemon/control.c reports it (the log line, /status last_reload,
 * STATUS=).
 *
 * Each list holds keys ("buses", "http.port", "serial_slaves.s1"), one
 * space between two, each whole: a key that does not fit is never cut.
 * Bounded: the last four bytes of each list are kept for " ...", which
 * ends a list that a key did not fit in (once), and the key is counted in
 * dropped; the add returns -1. A key already in the list is not added again.
 * Fields are read directly; they are written only through these functions.
 * Any thread that owns the value (the reload runs on the I/O thread).
 */
#ifndef RTUGW_GATEWAY_RELOAD_RESULT_H
#define RTUGW_GATEWAY_RELOAD_RESULT_H

#include <stdbool.h>

typedef struct reload_result {
    char restart[512];   /* what waits for a restart: "tcp.port buses.b2" */
    char applied[192];   /* the parts applied: "log_level tcp buses router" */
    char queued[64];     /* queued behind tag writes in flight: "devices tags" */
    char error[384];     /* the first error a part met ("" none) */
    unsigned dropped;    /* keys that did not fit in their list (each list then ends " ...") */
} reload_result_t;

/* Appends key to that list. 0: added or there already; -1: did not fit. */
int reload_restart_add(reload_result_t *res, const char *key);
int reload_applied_add(reload_result_t *res, const char *key);
int reload_queued_add(reload_result_t *res, const char *key);
/* Keeps err as the reload's error unless a part's came first (cut to fit:
 * it is a sentence for a person, the full text is in the log). */
void reload_error(reload_result_t *res, const char *err);
/* Whether the list holds key, as a whole word. */
bool reload_applied_has(const reload_result_t *res, const char *key);
bool reload_restart_has(const reload_result_t *res, const char *key);

#endif
