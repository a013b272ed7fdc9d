/*
 * gateway/slave_port.c -- a serial port a front end answers on (front/
 * serial_slave.c, [serial_slave NAME]), with the actor that reads it: the
 * driver opened from the section's line settings, the port (port.c: open,
 * reopen with back-off, arrival stamps) and the actor it reports to, placed
 * as a bus actor is.
 *
 * Why a handle of gateway/ rather than the front end calling the actor
 * scheduler and the drivers itself: both are below gateway/ only (front/
 * may call gateway/, not actor/ or drivers/; make check-calls), and the
 * placement and the line-to-driver mapping are the buses' rules, kept in
 * one folder so a serial slave cannot drift from them: on the line thread
 * when there is one ([gateway] line_thread), else the I/O thread, unless
 * buses_on_io_thread is off; its port on the same loop. A master on this
 * port judges our answers by the wire as a bus judges a slave's: t3.5
 * after its request must not wait for a TLS handshake or a GET /tags on
 * the I/O thread (issue 29).
 */
#include "gateway/wiring.h"

#include <stdio.h>
#include <stdlib.h>

struct gw_slave_port {
    gw_t *gw;
    gw_loop_t *home;            /* the port's loop */
    driver_t *driver;           /* NULL once closed */
    gw_port_t *port;            /* NULL once closed */
    actor_ref_t self;
    void (*done)(void *ctx);    /* slave_port_close's */
    void *done_ctx;
};

/* The section's line through the one mapping from line settings to the
 * serial driver's (gw_serial_config, as a bus's). */
static driver_t *open_driver(const config_serial_slave_t *c, char *err, size_t errcap)
{
    config_bus_t line = { .baud = c->baud, .parity = c->parity, .data_bits = c->data_bits,
                          .stop_bits = c->stop_bits, .rs485 = c->rs485, .echo_suppress = c->echo_suppress };
    snprintf(line.port, sizeof line.port, "%s", c->port);
    driver_serial_config_t sc = gw_serial_config(&line);
    return driver_serial_new(&sc, err, errcap);
}

gw_slave_port_t *slave_port_new(gw_t *gw, const config_serial_slave_t *c, const char *name,
                                actor_behaviour_fn behaviour, void *state, line_bus_metrics_t *m, char *err,
                                size_t errcap)
{
    gw_slave_port_t *sp = calloc(1, sizeof *sp);
    gw_loop_t *home = gw->line_loop ? gw->line_loop : gw->loop;
    snprintf(err, errcap, "out of memory");
    if (!sp)
        return NULL;
    sp->gw = gw;
    sp->home = home;
    int spawned = !(sp->driver = open_driver(c, err, errcap)) ? -1
                : gw->cfg->buses_on_io_thread ? actor_spawn_on(gw->actors, loop_host(home), behaviour, state, &sp->self)
                                              : actor_spawn(gw->actors, behaviour, state, &sp->self);
    if (spawned != 0 || !(sp->port = port_new(gw, home, sp->driver, name, sp->self, m))) {
        slave_port_free(sp);
        return NULL;
    }
    return sp;
}

void slave_port_send(gw_slave_port_t *sp, uint32_t type, const void *data, size_t len)
{
    actor_send(sp->gw->actors, sp->self, type, data, len);
}

void slave_port_send_after(gw_slave_port_t *sp, uint32_t type, const void *data, size_t len, uint64_t delay_ns)
{
    actor_send_after(sp->gw->actors, sp->self, type, data, len, delay_ns, NULL);
}

int slave_port_write(gw_slave_port_t *sp, const uint8_t *adu, size_t len)
{
    return port_write(sp->port, adu, len);
}

void slave_port_free(gw_slave_port_t *sp)
{
    if (!sp)
        return;
    port_free(sp->port);
    driver_free(sp->driver);
    free(sp);
}

void slave_port_stop_actor(gw_slave_port_t *sp)
{
    actor_stop(sp->gw->actors, sp->self);
}

/* On the port's loop: its events are that loop's, so nothing reads or
 * writes the port while it is freed. */
static void close_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_slave_port_t *sp = ctx;
    (void)a, (void)b, (void)data, (void)len;
    port_free(sp->port);
    driver_free(sp->driver);
    sp->port = NULL;
    sp->driver = NULL;
    sp->done(sp->done_ctx);
}

void slave_port_close(gw_slave_port_t *sp, void (*done)(void *ctx), void *ctx)
{
    sp->done = done;
    sp->done_ctx = ctx;
    if (loop_post(sp->home, close_here, sp, 0, 0, NULL, 0) == 0)
        return;
    /* No memory for the post: freeing the port here could meet its own
     * thread in one of its callbacks, so it is left open (never read by
     * anyone: its actor has stopped) and never freed. Said, not hidden. */
    gw_log(sp->gw, CONFIG_LOG_ERROR, "a retired serial slave's port: out of memory; it stays open until a restart");
    sp->port = NULL;
    sp->driver = NULL;
    done(ctx);
}
