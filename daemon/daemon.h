/*
 * daemon/daemon.h -- the rtugw daemon as the command line starts it: build
 * it from a validated configuration, run it until a signal or gw_stop(),
 * free it. Owns the wiring (gw.c: which part starts when, who hears whom)
 * and the process's life (control.c: signals, SIGHUP reload, the graceful
 * stop). May call gateway/ (the runtime), front/ (the Modbus front ends),
 * web/ (HTTP, the page), config/.
 *
 * Only the command line includes this header.
 */
#ifndef RTUGW_DAEMON_DAEMON_H
#define RTUGW_DAEMON_DAEMON_H

#include "config/config.h"
#include "gateway/gateway.h"

/* Builds the gateway from a validated config (which it copies). NULL with a
 * message on stderr (naming the port, address or file) when something cannot
 * be opened. */
gw_t *gw_new(const config_t *cfg, const gw_options_t *opt);
/* Runs until gw_stop() or a signal. Returns the exit code (0 or 1). */
int gw_run(gw_t *gw);
/* Asks a running gateway to stop (any thread). */
void gw_stop(gw_t *gw);
void gw_free(gw_t *gw);

#endif
