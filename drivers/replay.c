/*
 * drivers/replay.c -- a capture file as a read-only driver.
 *
 * The fd is a timerfd. As fast as possible: it is armed to fire at once
 * whenever a record is pending. Original timing: it fires at the record's
 * capture time relative to the first record, divided by `speed`. read()
 * hands out one record (or the part of it that fits) with its capture
 * time in *t_ns.
 */
#include "drivers/driver.h"

#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

typedef struct replay {
    char *path;
    driver_capture_format_t format;
    bool original;
    double speed;
    driver_capture_t *cap;
    int tfd;
    driver_record_t rec;
    size_t rec_off;
    bool have_rec, eof, failed;
    uint64_t first_ts, start_ns;
    bool started;
    char err[DRIVER_ERRLEN];
} replay_t;

static void arm(replay_t *r)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    uint64_t due = 0;
    if (r->have_rec && r->original) {
        if (!r->started) {
            r->first_ts = r->rec.ts_ns;
            r->start_ns = driver_now_ns();
            r->started = true;
        }
        uint64_t rel = r->rec.ts_ns > r->first_ts ? r->rec.ts_ns - r->first_ts : 0;
        due = r->start_ns + (uint64_t)((double)rel / r->speed);
    }
    if (due == 0) {
        its.it_value.tv_nsec = 1; /* relative: at once */
        timerfd_settime(r->tfd, 0, &its, NULL);
        return;
    }
    its.it_value.tv_sec = (time_t)(due / 1000000000ull);
    its.it_value.tv_nsec = (long)(due % 1000000000ull);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;
    timerfd_settime(r->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void load(replay_t *r)
{
    int rc = driver_capture_next(r->cap, &r->rec, r->err, sizeof r->err);
    r->rec_off = 0;
    r->have_rec = rc == 1;
    if (rc == 0)
        r->eof = true;
    else if (rc < 0)
        r->failed = true;
    arm(r);
}

static void rp_close(driver_t *d)
{
    replay_t *r = driver_priv(d);
    driver_capture_close(r->cap);
    r->cap = NULL;
    if (r->tfd >= 0)
        close(r->tfd);
    r->tfd = -1;
}

static int rp_open(driver_t *d, char *err, size_t errcap)
{
    replay_t *r = driver_priv(d);
    if (r->cap)
        return 0;
    r->cap = driver_capture_open(r->path, r->format, err, errcap);
    if (!r->cap)
        return -EINVAL;
    r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (r->tfd < 0) {
        int e = errno;
        snprintf(err, errcap, "%s: timerfd: %s", r->path, strerror(e));
        rp_close(d);
        return -e;
    }
    r->eof = r->failed = r->started = false;
    r->err[0] = 0;
    load(r);
    return 0;
}

static int rp_fd(const driver_t *d)
{
    const replay_t *r = driver_priv(d);
    return r->tfd;
}

static ssize_t rp_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    replay_t *r = driver_priv(d);
    uint64_t expirations;
    if (!r->have_rec) {
        if (r->failed)
            return -EBADMSG;
        return DRIVER_EOF;
    }
    if (read(r->tfd, &expirations, sizeof expirations) < 0 && r->rec_off == 0)
        return DRIVER_AGAIN;
    size_t n = r->rec.len - r->rec_off;
    if (n > cap)
        n = cap;
    memcpy(buf, r->rec.data + r->rec_off, n);
    *t_ns = r->rec.ts_ns;
    r->rec_off += n;
    if (r->rec_off >= r->rec.len)
        load(r);
    else
        arm(r);
    return (ssize_t)n;
}

static int rp_describe(const driver_t *d, char *buf, size_t cap)
{
    const replay_t *r = driver_priv(d);
    return snprintf(buf, cap, "replay %s (%s, %s)%s%s", r->path,
                    driver_capture_format_name(r->cap ? driver_capture_format(r->cap) : r->format),
                    r->original ? "original timing" : "as fast as possible",
                    r->failed ? ": " : "", r->failed ? r->err : "");
}

static void rp_destroy(driver_t *d)
{
    replay_t *r = driver_priv(d);
    free(r->path);
    free(r);
}

static const driver_backend_t replay_backend = {
    .name = "replay",
    .open = rp_open,
    .close = rp_close,
    .fd = rp_fd,
    .write = NULL,
    .read = rp_read,
    .describe = rp_describe,
    .destroy = rp_destroy,
};

driver_t *driver_replay_new(const char *path, driver_capture_format_t format,
                            bool original_timing, double speed, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    if (!(speed > 0)) {
        snprintf(err, errcap, "replay: speed must be above 0");
        return NULL;
    }
    replay_t *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        snprintf(err, errcap, "replay: out of memory");
        return NULL;
    }
    r->format = format;
    r->original = original_timing;
    r->speed = speed;
    r->tfd = -1;
    driver_t *d = driver_new(&replay_backend, r);
    if (!d) {
        free(r->path);
        free(r);
    }
    return d;
}

const char *driver_replay_error(const driver_t *d)
{
    const replay_t *r = driver_priv(d);
    return r->failed ? r->err : NULL;
}
