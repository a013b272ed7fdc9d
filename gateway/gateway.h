/*
 * gateway/gateway.h -- the rtugw daemon: one I/O thread (libevent) that owns
 * every fd and timer, bus actors (one per serial line) and a poller actor on
 * the actor scheduler, a Modbus TCP front end and an HTTP status server.
 * This is gateway/'s public header, used by cli/ only. Owns the daemon.
 * May call: json/, parser/, routing/, actor/, drivers/, tags/, north/ (the
 * MQTT module's loader and interface), config/ and line/ (the core each bus
 * hosts), libevent, and OpenSSL in the TLS module; its own parts talk
 * through gateway/internal.h, which states their direction.
 */
#ifndef RTUGW_GATEWAY_GATEWAY_H
#define RTUGW_GATEWAY_GATEWAY_H

#include "config/config.h"
#include "drivers/driver.h"

#include <stdbool.h>

typedef struct gw gw_t;

typedef struct gw_options {
    const char *config_path;    /* for SIGHUP reload; NULL: no reload (demo) */
    bool status_line;           /* live one-line status on stderr (demo on a tty) */
    bool install_signals;       /* SIGINT/SIGTERM stop, SIGHUP reload */
} gw_options_t;

/* Builds the gateway from a validated config (which it copies). NULL with a
 * message on stderr (naming the port, address or file) when something cannot
 * be opened. */
gw_t *gw_new(const config_t *cfg, const gw_options_t *opt);
/* Runs until gw_stop() or a signal. Returns the exit code (0 or 1). */
int gw_run(gw_t *gw);
/* Asks a running gateway to stop (any thread). */
void gw_stop(gw_t *gw);
void gw_free(gw_t *gw);

/* The serial driver's settings for a bus, as the daemon opens it (so that
 * `rtugw check` validates exactly what `rtugw run` would open). */
driver_serial_config_t gw_serial_config(const config_bus_t *bus);
/* A device or tcp:// bus's driver, its framing's layer included (not the
 * simulator's): what `rtugw run` opens and `rtugw check --open` tries. */
driver_t *gw_bus_driver_new(const config_bus_t *bus, char *err, size_t errcap);

/* Logging, to stderr with a timestamp; level as in config_log_t. */
void gw_log(const gw_t *gw, config_log_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
