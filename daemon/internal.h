/*
 * daemon/internal.h -- what gw.c, control.c and reload_parts.c share, and
 * nothing else.
 */
#ifndef RTUGW_DAEMON_INTERNAL_H
#define RTUGW_DAEMON_INTERNAL_H

#include "daemon/daemon.h"
#include "front/front.h"
#include "gateway/wiring.h"
#include "web/web.h"

/* control.c: signals, reload, graceful stop (I/O thread) */
int control_start(gw_t *gw);
void control_stop(gw_t *gw);
/* gw.c: [http] on a reload, enabled turned on or off included; what could
 * not apply is named in res's restart (http.port ...), its first reason in
 * res's error */
void gw_http_reload(gw_t *gw, const config_t *fresh, reload_result_t *res);

/* reload_parts.c: one part's reload. run is the running copy (gw->cfg),
 * which the part brings to what runs; fresh the file just loaded (freed
 * after the walk; a part may swap an array out of it); res what the part
 * applied, what waits, what is queued, its error. I/O thread. */
typedef void reload_part_fn(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res);
typedef struct reload_part {
    const char *name;
    reload_part_fn *fn;
} reload_part_t;
/* reload_buses.c: the buses' part, compared slot by slot (fresh laid out
 * in run's slots first: config_buses_to_slots); whether run's slots hold
 * the buses fresh's do (else the devices on them wait with the buses). */
reload_part_fn buses_reload;
bool buses_follow(const config_t *run, const config_t *fresh);
/* Every running line takes the running copy's keys (bus_set_keys). */
void buses_send_keys(gw_t *gw);
/* cpu_latency.c: [gateway] cpu_latency_us's request held (us >= 0) or
 * dropped (us < 0), the one held before replaced; -1 with err when the
 * device cannot be written (the one held before stays). I/O thread. */
int cpu_latency_hold(gw_t *gw, int us, char *err, size_t errcap);
void cpu_latency_drop(gw_t *gw);
/* Its /status member and /metrics gauge: the request in force. */
gw_report_part_t cpu_latency_report(gw_t *gw);
/* The parts in the order a reload applies them; *count of them. */
const reload_part_t *reload_parts(size_t *count);

#endif
