/*
 * drivers/sim_driver.c -- the simulator as a driver: a simulator thread
 * serving the master side of a fresh pseudo-terminal pair, and a serial
 * driver (termios path) on the slave side. What the gateway sees is exactly
 * what it would see on a real line, minus the electrical part.
 */
#include "drivers/driver.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct sim_driver {
    driver_sim_t *sim;
    driver_t *serial;
    int master, slave_hold;
    char path[128];
} sim_driver_t;

static int sd_open(driver_t *d, char *err, size_t errcap)
{
    sim_driver_t *s = driver_priv(d);
    return driver_open(s->serial, err, errcap);
}

static void sd_close(driver_t *d)
{
    sim_driver_t *s = driver_priv(d);
    driver_close(s->serial);
}

static int sd_fd(const driver_t *d)
{
    const sim_driver_t *s = driver_priv(d);
    return driver_fd(s->serial);
}

static ssize_t sd_write(driver_t *d, const uint8_t *buf, size_t len)
{
    sim_driver_t *s = driver_priv(d);
    return driver_write(s->serial, buf, len);
}

static ssize_t sd_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    sim_driver_t *s = driver_priv(d);
    return driver_read(s->serial, buf, cap, t_ns);
}

static int sd_describe(const driver_t *d, char *buf, size_t cap)
{
    const sim_driver_t *s = driver_priv(d);
    return snprintf(buf, cap, "sim %s", s->path);
}

static uint64_t sd_next_deadline(const driver_t *d)
{
    const sim_driver_t *s = driver_priv(d);
    return driver_next_deadline(s->serial);
}

static int sd_service(driver_t *d, uint64_t now_ns)
{
    sim_driver_t *s = driver_priv(d);
    return driver_service(s->serial, now_ns);
}

static void sd_destroy(driver_t *d)
{
    sim_driver_t *s = driver_priv(d);
    if (s->sim)
        driver_sim_stop(s->sim);
    driver_free(s->serial);
    driver_sim_free(s->sim);
    if (s->master >= 0)
        close(s->master);
    if (s->slave_hold >= 0)
        close(s->slave_hold);
    free(s);
}

static const driver_backend_t sim_backend = {
    .name = "sim",
    .open = sd_open,
    .close = sd_close,
    .fd = sd_fd,
    .write = sd_write,
    .read = sd_read,
    .describe = sd_describe,
    .next_deadline = sd_next_deadline,
    .service = sd_service,
    .destroy = sd_destroy,
};

driver_t *driver_sim_driver_new(const driver_sim_config_t *cfg, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    sim_driver_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errcap, "sim: out of memory");
        return NULL;
    }
    s->master = s->slave_hold = -1;
    driver_t *d = driver_new(&sim_backend, s);
    if (!d) {
        free(s);
        snprintf(err, errcap, "sim: out of memory");
        return NULL;
    }
    int rc = driver_pty_open(&s->master, &s->slave_hold, s->path, sizeof s->path);
    if (rc) {
        snprintf(err, errcap, "sim: pseudo-terminal: %s", strerror(-rc));
        goto fail;
    }
    s->sim = driver_sim_new(cfg, err, errcap);
    if (!s->sim)
        goto fail;
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    sc.path = s->path;
    sc.baud = cfg->baud;
    sc.parity = 'N';
    s->serial = driver_serial_new(&sc, err, errcap);
    if (!s->serial)
        goto fail;
    rc = driver_sim_start(s->sim, s->master);
    if (rc) {
        snprintf(err, errcap, "sim: thread: %s", strerror(-rc));
        goto fail;
    }
    return d;
fail:
    driver_free(d);
    return NULL;
}

driver_sim_t *driver_sim_of(driver_t *d)
{
    return d && strcmp(driver_backend_name(d), "sim") == 0 ? ((sim_driver_t *)driver_priv(d))->sim
                                                           : NULL;
}
