/*
 * drivers/dialin.c -- dial-in devices (port = listen://ADDR:PORT): a DTU
 * (a cellular or Ethernet serial server) connects *to* rtugw and then
 * carries its serial line's RTU frames on the TCP stream, as a serial device
 * server does for tcp://. Once a DTU is connected, the stream is tcp.c's own
 * (tcp_stream_new: the same reads, send queue, keep-alive and hang-up
 * rules), and the line above keeps the same discipline as on tcp://.
 *
 * One fd for the owner's loop: an epoll set holding the listening socket
 * and the DTU's connection, if any, so that a DTU reconnecting is seen at
 * once, even while its old connection looks alive (a cellular link that
 * died without a FIN).
 *
 * Connecting. open() listens (once: the listening socket lives as long as
 * the driver) and returns DRIVER_INPROGRESS with no deadline: the owner
 * waits for the set to be readable, and open_finish() accepts. With a
 * registration prefix configured (register = hex:... or text:...), the
 * DTU's first bytes must be exactly that prefix, within the register
 * timeout: each byte is compared as it comes, and a DTU that sends other
 * bytes, or too few in time, is closed and counted (dialin_rejected), and
 * the port listens on. So one bus listens on one port and the prefix tells
 * its DTU from a stranger (a DTU of another site dialling the wrong port);
 * several buses on one port, told apart by prefix, are not supported (the
 * configuration refuses a listen address given twice). Bytes after the
 * prefix in the same read are the line's.
 *
 * Taking the bus back. A connection accepted while a DTU is connected is a
 * DTU reconnecting (its old link may be dead without a FIN): read() returns
 * DRIVER_HANGUP, the owner closes the old connection as for a lost port
 * (every answer owed across it is given up, 0x0A, never paired with the
 * new one: the line's I8 holds the new connection quiet as after any
 * reconnect) and reopens, and open_finish() takes the new connection
 * (dialin_takeovers). So a DTU that reconnects takes its bus back within
 * the owner's back-off (100 ms after an open that succeeded).
 *
 * Heartbeat (heartbeat = hex:...): a DTU's keep-alive packet, discarded
 * where a frame could begin or has just ended: at the front of a chunk read
 * after the line has been quiet HEARTBEAT_QUIET_MS, as the whole of a
 * chunk, or at the end of a chunk whose bytes before it end with a good CRC
 * (an answer and a heartbeat read together). What the gateway cannot know:
 * a heartbeat glued to an answer any other way (inside a chunk of two
 * frames, or split) reaches the framer as bytes beside the answer, which
 * makes that answer doubtful (line I3: asked again), never wrong; and a
 * frame that begins with the heartbeat's bytes after a quiet loses them,
 * so its CRC fails (fact F: never delivered, asked again). Choose a
 * heartbeat that no slave id on the line starts an answer with.
 */
#include "drivers/internal.h"
#include "parser/rtu.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEARTBEAT_QUIET_MS 20

typedef enum { DIALIN_IDLE, DIALIN_REGISTERING, DIALIN_CONNECTED } dialin_state_t;

typedef struct dialin {
    driver_dialin_config_t cfg;       /* the byte strings copied in */
    char addr[INET_ADDRSTRLEN];
    uint8_t reg[DRIVER_DIALIN_BYTES_MAX], hb[DRIVER_DIALIN_BYTES_MAX];
    driver_t *stream;                 /* tcp.c's stream, holding the DTU's connection */
    int ep, lfd;                      /* the epoll set the owner polls; the listening socket */
    int cfd;                          /* the DTU's connection (registering or connected), or -1 */
    int next_fd;                      /* a connection accepted while one was connected: the takeover */
    dialin_state_t state;
    size_t reg_got;
    uint64_t reg_deadline_ns, last_in_ns;
    uint8_t carry[DRIVER_DIALIN_BYTES_MAX + 256];   /* line bytes read with the prefix */
    size_t carry_len;
} dialin_t;

static void drop_conn(dialin_t *x)
{
    if (x->cfd >= 0)
        epoll_ctl(x->ep, EPOLL_CTL_DEL, x->cfd, NULL);
    if (x->state == DIALIN_REGISTERING && x->cfd >= 0)
        close(x->cfd);           /* not the stream's yet */
    else
        driver_close(x->stream); /* closes cfd */
    x->cfd = -1;
    x->state = DIALIN_IDLE;
    x->carry_len = 0;
}

static void dialin_close(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    drop_conn(x);   /* the listening socket and a takeover's connection stay */
}

static int dialin_open_finish(driver_t *d, char *err, size_t errcap);

static int watch(dialin_t *x, int fd)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
    return epoll_ctl(x->ep, EPOLL_CTL_ADD, fd, &ev);
}

static int dialin_open(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
    if (x->state == DIALIN_CONNECTED)
        return 0;
    if (x->lfd < 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)x->cfg.port) };
        int one = 1;
        inet_pton(AF_INET, x->addr, &sa.sin_addr);
        x->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (x->lfd < 0 || setsockopt(x->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(x->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(x->lfd, 4) != 0 || watch(x, x->lfd) != 0) {
            int e = errno;
            snprintf(err, errcap, "listen://%s:%u: %s", x->addr, x->cfg.port, strerror(e));
            if (x->lfd >= 0)
                close(x->lfd);
            x->lfd = -1;
            return -e;
        }
    }
    /* A connection may be here already (a takeover's, or one in the
     * backlog): the owner's wait would not wake for it. */
    return dialin_open_finish(d, err, errcap);
}

/* A connection for the bus: registering (when a prefix is asked) or connected. */
static void take_conn(driver_t *d, int fd)
{
    dialin_t *x = driver_priv(d);
    x->cfd = fd;
    x->reg_got = 0;
    x->carry_len = 0;
    x->last_in_ns = 0;
    DRIVER_COUNT(d, dialin_accepted, 1);
    if (watch(x, fd) != 0) {
        close(fd);
        x->cfd = -1;
        return;
    }
    if (x->cfg.register_len) {
        x->state = DIALIN_REGISTERING;
        x->reg_deadline_ns = driver_now_ns() + (uint64_t)x->cfg.register_timeout_ms * 1000000ull;
    } else {
        tcp_stream_adopt(x->stream, fd);
        x->state = DIALIN_CONNECTED;
    }
}

/* The registration's bytes as they come: 1 done, 0 more to come, -1 rejected. */
static int registering(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    uint8_t buf[sizeof x->carry];
    ssize_t n = recv(x->cfd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    size_t i = 0;
    for (; i < (size_t)n && x->reg_got < x->cfg.register_len; i++, x->reg_got++)
        if (buf[i] != x->reg[x->reg_got])
            return -1;
    if (x->reg_got < x->cfg.register_len)
        return 0;
    memcpy(x->carry, buf + i, (size_t)n - i);
    x->carry_len = (size_t)n - i;
    tcp_stream_adopt(x->stream, x->cfd);
    x->state = DIALIN_CONNECTED;
    return 1;
}

static int dialin_open_finish(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
    for (;;) {
        if (x->state == DIALIN_CONNECTED)
            return 0;
        if (x->state == DIALIN_REGISTERING) {
            int rc = registering(d);
            if (rc > 0)
                return 0;
            if (rc == 0 && driver_now_ns() < x->reg_deadline_ns)
                return DRIVER_INPROGRESS;
            DRIVER_COUNT(d, dialin_rejected, 1);
            snprintf(err, errcap, "listen://%s:%u: a DTU connected without the registration asked for; closed",
                     x->addr, x->cfg.port);
            drop_conn(x);
        }
        int fd = x->next_fd;
        x->next_fd = -1;
        if (fd < 0)
            fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return DRIVER_INPROGRESS;
        take_conn(d, fd);
    }
}

static int dialin_fd(const driver_t *d)
{
    return ((const dialin_t *)driver_priv(d))->ep;
}

static ssize_t dialin_write(driver_t *d, const uint8_t *buf, size_t len)
{
    dialin_t *x = driver_priv(d);
    return x->state == DIALIN_CONNECTED ? driver_write(x->stream, buf, len) : DRIVER_AGAIN;
}

static bool crc_ends_frame(const uint8_t *p, size_t n)
{
    return rtu_crc16(p, n - 2) == (uint16_t)(p[n - 2] | p[n - 1] << 8);
}

/* A heartbeat at the front of buf[0..n) where a frame could begin, or
 * right behind a whole frame: its bytes dropped. */
static size_t strip_heartbeat(driver_t *d, dialin_t *x, uint8_t *buf, size_t n, uint64_t t_ns)
{
    bool quiet = !x->last_in_ns || t_ns - x->last_in_ns >= HEARTBEAT_QUIET_MS * 1000000ull;
    size_t hl = x->cfg.heartbeat_len;
    x->last_in_ns = t_ns;
    while (hl && n >= hl && memcmp(buf, x->hb, hl) == 0 && (quiet || n == hl)) {
        DRIVER_COUNT(d, heartbeats, 1);
        memmove(buf, buf + hl, n - hl);
        n -= hl;
    }
    /* Glued behind a whole frame (the DTU's heartbeat and an answer read
     * together, as after the port's back-off): the frame's CRC tells where
     * it ends, and the heartbeat is there. */
    while (hl && n >= hl + RTU_MIN_ADU && memcmp(buf + n - hl, x->hb, hl) == 0 && crc_ends_frame(buf, n - hl)) {
        DRIVER_COUNT(d, heartbeats, 1);
        n -= hl;
    }
    return n;
}

static ssize_t dialin_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    dialin_t *x = driver_priv(d);
    if (x->state != DIALIN_CONNECTED)
        return DRIVER_AGAIN;
    if (x->next_fd < 0)
        x->next_fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (x->next_fd >= 0) {
        DRIVER_COUNT(d, dialin_takeovers, 1);
        return DRIVER_HANGUP;   /* the DTU dialled again: this connection is over */
    }
    for (;;) {
        ssize_t n;
        if (x->carry_len) {
            n = (ssize_t)(x->carry_len < cap ? x->carry_len : cap);
            memcpy(buf, x->carry, (size_t)n);
            memmove(x->carry, x->carry + n, x->carry_len - (size_t)n);
            x->carry_len -= (size_t)n;
            *t_ns = driver_now_ns();
        } else {
            n = driver_read(x->stream, buf, cap, t_ns);
            if (n <= 0)
                return n;
        }
        size_t left = strip_heartbeat(d, x, buf, (size_t)n, *t_ns);
        if (left)
            return (ssize_t)left;
    }
}

static int dialin_describe(const driver_t *d, char *buf, size_t cap)
{
    const dialin_t *x = driver_priv(d);
    char inner[128] = "";
    if (x->state == DIALIN_CONNECTED)
        driver_describe(x->stream, inner, sizeof inner);
    return snprintf(buf, cap, "listen %s:%u%s%s", x->addr, x->cfg.port,
                    x->state == DIALIN_CONNECTED ? ", DTU " : x->state == DIALIN_REGISTERING ? ", DTU registering"
                                                                                             : ", waiting for a DTU",
                    inner);
}

static uint64_t dialin_next_deadline(const driver_t *d)
{
    const dialin_t *x = driver_priv(d);
    return x->state == DIALIN_REGISTERING ? x->reg_deadline_ns
         : x->state == DIALIN_CONNECTED  ? driver_next_deadline(x->stream) : 0;
}

static int dialin_service(driver_t *d, uint64_t now_ns)
{
    dialin_t *x = driver_priv(d);
    return x->state == DIALIN_CONNECTED ? driver_service(x->stream, now_ns) : 0;
}

static void dialin_destroy(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    drop_conn(x);
    if (x->next_fd >= 0)
        close(x->next_fd);
    if (x->lfd >= 0)
        close(x->lfd);
    if (x->ep >= 0)
        close(x->ep);
    driver_free(x->stream);
    free(x);
}

static const driver_backend_t dialin_backend = {
    .name = "listen",
    .open = dialin_open,
    .close = dialin_close,
    .fd = dialin_fd,
    .write = dialin_write,
    .read = dialin_read,
    .describe = dialin_describe,
    .next_deadline = dialin_next_deadline,
    .service = dialin_service,
    .destroy = dialin_destroy,
    .open_finish = dialin_open_finish,
};

driver_t *driver_dialin_new(const driver_dialin_config_t *cfg, char *err, size_t errcap)
{
    struct in_addr a;
    if (!cfg->addr || inet_pton(AF_INET, cfg->addr, &a) != 1 || cfg->port < 1 || cfg->port > 65535 ||
        cfg->register_len > DRIVER_DIALIN_BYTES_MAX || cfg->heartbeat_len > DRIVER_DIALIN_BYTES_MAX ||
        !cfg->register_timeout_ms) {
        snprintf(err, errcap, "listen://%s:%u: expected an IPv4 address, a port 1..65535 and byte strings of at "
                 "most %d bytes", cfg->addr ? cfg->addr : "", cfg->port, DRIVER_DIALIN_BYTES_MAX);
        return NULL;
    }
    dialin_t *x = calloc(1, sizeof *x);
    if (!x || !(x->stream = tcp_stream_new()) || (x->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        if (x)
            driver_free(x->stream);
        free(x);
        snprintf(err, errcap, "listen: out of memory");
        return NULL;
    }
    x->cfg = *cfg;
    snprintf(x->addr, sizeof x->addr, "%s", cfg->addr);
    memcpy(x->reg, cfg->register_bytes, cfg->register_len);
    memcpy(x->hb, cfg->heartbeat, cfg->heartbeat_len);
    x->cfg.addr = x->addr;
    x->cfg.register_bytes = x->reg;
    x->cfg.heartbeat = x->hb;
    x->lfd = x->cfd = x->next_fd = -1;
    driver_t *d = driver_new(&dialin_backend, x);
    if (!d) {
        x->state = DIALIN_IDLE;
        close(x->ep);
        driver_free(x->stream);
        free(x);
        snprintf(err, errcap, "listen: out of memory");
    }
    return d;
}
