/*
 * gateway/notify.c -- the systemd notification protocol (sd_notify(3)),
 * spoken directly, and the watchdog keep-alive.
 *
 * The protocol is one datagram of "KEY=VALUE\n..." text to the AF_UNIX
 * socket named by $NOTIFY_SOCKET: a path, or "@name" for an abstract socket.
 * libsystemd did exactly that for us, but linking it mapped about 1 MiB
 * (libsystemd, libgcrypt, libgpg-error, libzstd, liblz4, liblzma, libcap) into
 * every gateway for one sendto(); see docs/bench-gateway.md, "Footprint".
 *
 * The watchdog (WatchdogSec= in the unit): systemd passes $WATCHDOG_USEC and
 * expects "WATCHDOG=1" within that time, or it kills and restarts the
 * service. The keep-alive runs on the I/O thread's event loop, which owns
 * every fd and timer of the daemon, so it stops exactly when that loop stops
 * turning. It does not claim that the buses answer: a dead slave or a pulled
 * cable is not something a restart mends.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* The keep-alive interval is clamped: a tiny $WATCHDOG_USEC must not spin the
 * loop, and a huge one must not overflow a 32-bit time_t (armhf). Sending
 * more often than systemd asks is always safe. */
#define NOTIFY_KEEPALIVE_MIN_US 1000ull
#define NOTIFY_KEEPALIVE_MAX_US 3600000000ull

/* Fills *sa from $NOTIFY_SOCKET; returns its length, 0 when unset, or -errno. */
static int notify_address(struct sockaddr_un *sa)
{
    const char *path = getenv("NOTIFY_SOCKET");
    size_t len;

    if (!path || !*path)
        return 0;
    if (path[0] != '/' && path[0] != '@')
        return -EAFNOSUPPORT;   /* e.g. "vsock:..." (systemd >= 254, VMs only) */
    len = strlen(path);
    if (len >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, len);
    if (path[0] == '@')
        sa->sun_path[0] = '\0';  /* abstract: the name is exactly len bytes, no terminator */
    return (int)(offsetof(struct sockaddr_un, sun_path) + len);
}

int gw_notify(const char *state)
{
    struct sockaddr_un sa;
    int salen = notify_address(&sa);
    int fd, rc = 0;

    if (salen <= 0)
        return salen;   /* not under systemd: nothing to tell */
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&sa, (socklen_t)salen) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* Parses a whole decimal number; -EINVAL for anything else or overflow. */
static int parse_u64(const char *text, uint64_t *out)
{
    char *end;
    if (!text || *text < '0' || *text > '9')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

/* The keep-alive interval in us (half of $WATCHDOG_USEC, as sd_watchdog_enabled(3)
 * advises), or 0 when systemd asked for none or asked another process. */
static uint64_t keepalive_interval_us(void)
{
    uint64_t usec, pid;

    if (parse_u64(getenv("WATCHDOG_USEC"), &usec) != 0 || usec == 0)
        return 0;
    if (getenv("WATCHDOG_PID") &&
        (parse_u64(getenv("WATCHDOG_PID"), &pid) != 0 || pid != (uint64_t)getpid()))
        return 0;
    usec /= 2;
    if (usec < NOTIFY_KEEPALIVE_MIN_US)
        usec = NOTIFY_KEEPALIVE_MIN_US;
    if (usec > NOTIFY_KEEPALIVE_MAX_US)
        usec = NOTIFY_KEEPALIVE_MAX_US;
    return usec;
}

/* Arms one keep-alive tick. A one-shot event (event_base_once) that re-arms
 * itself holds no state of its own, and event_base_free frees a pending one,
 * so gw_free needs to know nothing about it. The environment is read again
 * each tick for the same reason: that costs microseconds once a period. */
static int keepalive_arm(gw_t *gw, uint64_t us);

static void keepalive_tick(evutil_socket_t fd, short what, void *arg)
{
    gw_t *gw = arg;
    uint64_t us = keepalive_interval_us();
    (void)fd;
    (void)what;
    int rc = gw_notify("WATCHDOG=1");
    if (rc < 0)
        gw_log(gw, CONFIG_LOG_WARN, "systemd watchdog: cannot notify $NOTIFY_SOCKET: %s", strerror(-rc));
    if (us && keepalive_arm(gw, us) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "systemd watchdog: cannot re-arm the keep-alive timer");
}

static int keepalive_arm(gw_t *gw, uint64_t us)
{
    struct timeval tv = { .tv_sec = (time_t)(us / 1000000u), .tv_usec = (suseconds_t)(us % 1000000u) };
    return event_base_once(loop_base(gw->loop), -1, EV_TIMEOUT, keepalive_tick, gw, &tv);
}

int gw_watchdog_start(gw_t *gw)
{
    uint64_t us = keepalive_interval_us();

    if (us == 0)
        return 0;
    if (keepalive_arm(gw, us) != 0) {
        gw_log(gw, CONFIG_LOG_ERROR, "systemd watchdog: cannot arm the keep-alive timer");
        return -ENOMEM;
    }
    gw_log(gw, CONFIG_LOG_INFO, "systemd watchdog: keep-alive every %llu ms (WATCHDOG_USEC=%s)",
           (unsigned long long)(us / 1000u), getenv("WATCHDOG_USEC"));
    return 0;
}
