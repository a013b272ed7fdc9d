/*
 * drivers/driver.c -- the generic driver handle: dispatch through the
 * backend table, counters, and the reopen back-off.
 */
#include "drivers/driver.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct driver {
    const driver_backend_t *backend;
    void *priv;
    driver_stats_t stats;
    bool read_only;
};

uint64_t driver_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

driver_t *driver_new(const driver_backend_t *backend, void *priv)
{
    driver_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->backend = backend;
    d->priv = priv;
    return d;
}

void *driver_priv(const driver_t *d)
{
    return d->priv;
}

driver_stats_t *driver_stats_mut(driver_t *d)
{
    return &d->stats;
}

int driver_open(driver_t *d, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || errcap == 0) {
        err = dummy;
        errcap = sizeof dummy;
    }
    err[0] = 0;
    int rc = d->backend->open(d, err, errcap);
    if (rc == 0)
        DRIVER_COUNT(d, opens, 1);
    else if (rc != DRIVER_INPROGRESS)
        DRIVER_COUNT(d, open_failures, 1);
    return rc;
}

void driver_close(driver_t *d)
{
    if (d)
        d->backend->close(d);
}

int driver_reopen(driver_t *d, char *err, size_t errcap)
{
    driver_close(d);
    return driver_open(d, err, errcap);
}

int driver_open_finish(driver_t *d, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || errcap == 0) {
        err = dummy;
        errcap = sizeof dummy;
    }
    err[0] = 0;
    if (!d->backend->open_finish)
        return 0;
    int rc = d->backend->open_finish(d, err, errcap);
    if (rc == 0)
        DRIVER_COUNT(d, opens, 1);
    else if (rc != DRIVER_INPROGRESS)
        DRIVER_COUNT(d, open_failures, 1);
    return rc;
}

int driver_open_wait(driver_t *d, unsigned timeout_ms, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || errcap == 0) {
        err = dummy;
        errcap = sizeof dummy;
    }
    int rc = driver_open(d, err, errcap);
    uint64_t until = driver_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (rc == DRIVER_INPROGRESS) {
        uint64_t now = driver_now_ns();
        if (now >= until) {
            char desc[128];
            driver_describe(d, desc, sizeof desc);
            driver_close(d);
            snprintf(err, errcap, "%s: not connected within %u ms", desc, timeout_ms);
            return -ETIMEDOUT;
        }
        struct pollfd p = { driver_fd(d), POLLOUT, 0 };
        poll(&p, 1, (int)((until - now + 999999) / 1000000));
        rc = driver_open_finish(d, err, errcap);
    }
    return rc;
}

bool driver_frames_whole(const driver_t *d)
{
    return (d->backend->flags & DRIVER_FRAMED) != 0;
}

int driver_fd(const driver_t *d)
{
    return d->backend->fd(d);
}

bool driver_is_open(const driver_t *d)
{
    return d->backend->fd(d) >= 0;
}

/* A listen-only bus taps a line another master owns: a byte from us would
 * collide with its traffic, so the refusal sits here, below every caller,
 * and each refused write is counted (a caller that tried is a bug to see). */
void driver_set_read_only(driver_t *d)
{
    d->read_only = true;
}

ssize_t driver_write(driver_t *d, const uint8_t *buf, size_t len)
{
    if (d->read_only) {
        d->stats.writes_refused++;
        return -EROFS;
    }
    if (!d->backend->write)
        return -EROFS;
    if (driver_fd(d) < 0)
        return -EBADF;
    ssize_t n = d->backend->write(d, buf, len);
    if (n > 0) {
        DRIVER_COUNT(d, bytes_out, (uint64_t)n);
        DRIVER_COUNT(d, frames_out, 1);
    }
    return n;
}

ssize_t driver_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    uint64_t dummy;
    if (driver_fd(d) < 0)
        return -EBADF;
    ssize_t n = d->backend->read(d, buf, cap, t_ns ? t_ns : &dummy);
    if (n > 0)
        DRIVER_COUNT(d, bytes_in, (uint64_t)n);
    else if (n == DRIVER_HANGUP)
        DRIVER_COUNT(d, hangups, 1);
    return n;
}

int driver_describe(const driver_t *d, char *buf, size_t cap)
{
    return d->backend->describe(d, buf, cap);
}

uint64_t driver_next_deadline(const driver_t *d)
{
    return d->backend->next_deadline ? d->backend->next_deadline(d) : 0;
}

int driver_service(driver_t *d, uint64_t now_ns)
{
    return d->backend->service ? d->backend->service(d, now_ns) : 0;
}

/* Each counter loaded atomically (DRIVER_COUNT): every field is a uint64_t. */
void driver_get_stats(const driver_t *d, driver_stats_t *st)
{
    const uint64_t *from = (const uint64_t *)&d->stats;
    uint64_t *to = (uint64_t *)st;
    for (size_t i = 0; i < sizeof *st / sizeof(uint64_t); i++)
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

const char *driver_backend_name(const driver_t *d)
{
    return d->backend->name;
}

void driver_free(driver_t *d)
{
    if (!d)
        return;
    d->backend->close(d);
    if (d->backend->destroy)
        d->backend->destroy(d);
    free(d);
}

void driver_backoff_reset(driver_backoff_t *b)
{
    b->delay_ns = DRIVER_BACKOFF_MIN_NS;
    b->attempts = 0;
}

uint64_t driver_backoff_next(driver_backoff_t *b, uint64_t now_ns)
{
    if (b->delay_ns < DRIVER_BACKOFF_MIN_NS)
        b->delay_ns = DRIVER_BACKOFF_MIN_NS;
    uint64_t wait = b->delay_ns;
    b->attempts++;
    b->delay_ns = wait * 2 > DRIVER_BACKOFF_MAX_NS ? DRIVER_BACKOFF_MAX_NS : wait * 2;
    return now_ns + wait;
}
