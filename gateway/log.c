/*
 * gateway/log.c -- the daemon's log: stderr with a UTC timestamp, or syslog.
 * Wall time here only, for people; everything else uses CLOCK_MONOTONIC.
 *
 * The level and the target live in the running configuration and change on
 * a reload (gw_log_configure, I/O thread) while any thread logs: each is one
 * atomic word, read once per line, so a line goes whole to one target, and
 * syslog is opened before the first line can go there.
 */
#include "gateway/wiring.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

void gw_log(const gw_t *gw, config_log_t level, const char *fmt, ...)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    char stamp[32];
    struct timespec ts;
    struct tm tm;
    va_list ap;

    if (gw && level > __atomic_load_n(&gw->cfg->log_level, __ATOMIC_RELAXED))
        return;
    if (gw && __atomic_load_n(&gw->cfg->log_syslog, __ATOMIC_ACQUIRE)) {
        static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
        va_start(ap, fmt);
        vsyslog(LOG_DAEMON | prio[level], fmt, ap);
        va_end(ap);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    flockfile(stderr);
    fprintf(stderr, "%s%s.%03ldZ rtugw %s: ", gw && gw->opt.status_line ? "\r\033[K" : "", stamp,
            ts.tv_nsec / 1000000, names[level]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}

void gw_log_configure(gw_t *gw, config_log_t level, bool to_syslog)
{
    if (to_syslog && !__atomic_load_n(&gw->cfg->log_syslog, __ATOMIC_RELAXED))
        openlog("rtugw", LOG_PID, LOG_DAEMON);
    __atomic_store_n(&gw->cfg->log_level, level, __ATOMIC_RELAXED);
    __atomic_store_n(&gw->cfg->log_syslog, to_syslog, __ATOMIC_RELEASE);
}
