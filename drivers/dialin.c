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
 * Taking the bus back. A connection accepted while a DTU is connected is
 * registered the same way, beside the connected one (the newcomer); once
 * it has sent the prefix it is the DTU reconnecting (its old link may be
 * dead without a FIN), and a stranger that never sends it is closed
 * without costing the connected DTU its link. Then read() returns
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

/* A connection not yet the bus's: its registration so far, and the line
 * bytes that came with its last byte. */
typedef struct newcomer {
    int fd;                           /* -1: none */
    size_t reg_got;
    uint64_t deadline_ns;
    uint8_t carry[DRIVER_DIALIN_BYTES_MAX + 256];
    size_t carry_len;
} newcomer_t;

typedef struct dialin {
    driver_dialin_config_t cfg;       /* the byte strings copied in */
    char addr[INET_ADDRSTRLEN];
    uint8_t reg[DRIVER_DIALIN_BYTES_MAX], hb[DRIVER_DIALIN_BYTES_MAX];
    driver_t *stream;                 /* tcp.c's stream, holding the DTU's connection */
    int ep, lfd;                      /* the epoll set the owner polls; the listening socket */
    int cfd;                          /* the bus's DTU connection (the stream's), or -1 */
    newcomer_t nc;                    /* a connection registering: the first, or one that will take over */
    uint64_t last_in_ns;
    uint8_t carry[sizeof ((newcomer_t *)0)->carry];   /* line bytes read with the prefix */
    size_t carry_len;
} dialin_t;

static int watch(dialin_t *x, int fd)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
    return epoll_ctl(x->ep, EPOLL_CTL_ADD, fd, &ev);
}

static void forget(dialin_t *x, int fd)
{
    epoll_ctl(x->ep, EPOLL_CTL_DEL, fd, NULL);
}

static bool registered(const dialin_t *x)
{
    return x->nc.fd >= 0 && x->nc.reg_got == x->cfg.register_len;
}

static void reject(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    DRIVER_COUNT(d, dialin_rejected, 1);
    forget(x, x->nc.fd);
    close(x->nc.fd);
    x->nc.fd = -1;
}

/* The bus's connection closed (a hang-up, a takeover, the owner's close). A
 * newcomer that has registered stays: it takes the bus at the next open; one
 * still registering is closed when the bus has none (it was the one being
 * waited for, and its time is up). */
static void dialin_close(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    if (x->cfd >= 0) {
        forget(x, x->cfd);
        driver_close(x->stream);   /* closes cfd */
        x->cfd = -1;
    } else if (x->nc.fd >= 0 && !registered(x)) {
        reject(d);
    }
    x->carry_len = 0;
}

/* Accepts a waiting connection as the newcomer. One still registering is
 * replaced by a newer one (rejected): a stranger that connects and says
 * nothing cannot hold the way in, and a waiting connection is always taken
 * (the listening socket, level-triggered in the set, would wake the owner
 * again and again). A registered one waits for the next open. */
static void accept_newcomer(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    if (registered(x) || x->lfd < 0)
        return;
    int fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (x->nc.fd >= 0)
        reject(d);
    DRIVER_COUNT(d, dialin_accepted, 1);
    if (watch(x, fd) != 0) {
        close(fd);
        return;
    }
    x->nc = (newcomer_t){ .fd = fd, .deadline_ns = driver_now_ns() + (uint64_t)x->cfg.register_timeout_ms * 1000000ull };
}

/* The newcomer's registration as its bytes come: 1 registered, 0 more to
 * come, -1 rejected (closed, counted): other bytes, the peer's close, or
 * too slow. */
static int registering(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    newcomer_t *nc = &x->nc;
    uint8_t buf[sizeof nc->carry];
    if (registered(x))
        return 1;
    ssize_t n = recv(nc->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (driver_now_ns() < nc->deadline_ns)
            return 0;
        n = 0;
    }
    size_t i = 0;
    for (; n > 0 && i < (size_t)n && nc->reg_got < x->cfg.register_len; i++, nc->reg_got++)
        if (buf[i] != x->reg[nc->reg_got])
            n = 0;
    if (n <= 0) {
        reject(d);
        return -1;
    }
    if (nc->reg_got < x->cfg.register_len)
        return 0;
    memcpy(nc->carry, buf + i, (size_t)n - i);
    nc->carry_len = (size_t)n - i;
    return 1;
}

/* The registered newcomer becomes the bus's connection. */
static void take_newcomer(dialin_t *x)
{
    x->cfd = x->nc.fd;
    memcpy(x->carry, x->nc.carry, x->nc.carry_len);
    x->carry_len = x->nc.carry_len;
    x->last_in_ns = 0;
    x->nc.fd = -1;
    tcp_stream_adopt(x->stream, x->cfd);
}

static int dialin_open_finish(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
    (void)err;
    (void)errcap;
    if (x->cfd >= 0)
        return 0;
    for (;;) {
        accept_newcomer(d);
        if (x->nc.fd < 0)
            return DRIVER_INPROGRESS;
        int rc = registering(d);
        if (rc > 0) {
            take_newcomer(x);
            return 0;
        }
        if (rc == 0)
            return DRIVER_INPROGRESS;
    }
}

static int dialin_open(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
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

static int dialin_fd(const driver_t *d)
{
    return ((const dialin_t *)driver_priv(d))->ep;
}

static ssize_t dialin_write(driver_t *d, const uint8_t *buf, size_t len)
{
    dialin_t *x = driver_priv(d);
    return x->cfd >= 0 ? driver_write(x->stream, buf, len) : DRIVER_AGAIN;
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
    if (x->cfd < 0)
        return DRIVER_AGAIN;
    /* A DTU dialling in while one is connected takes the bus once it has
     * registered: a stranger never costs the connected DTU its link. */
    for (unsigned k = 0; k < 4; k++) {
        accept_newcomer(d);
        int rc = x->nc.fd >= 0 ? registering(d) : 0;
        if (rc > 0) {
            DRIVER_COUNT(d, dialin_takeovers, 1);
            return DRIVER_HANGUP;   /* this connection is over; the next open takes the newcomer */
        }
        if (rc == 0)
            break;
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
    if (x->cfd >= 0)
        driver_describe(x->stream, inner, sizeof inner);
    return snprintf(buf, cap, "listen %s:%u%s%s", x->addr, x->cfg.port,
                    x->cfd >= 0 ? ", DTU " : x->nc.fd >= 0 ? ", DTU registering" : ", waiting for a DTU", inner);
}

/* A newcomer's registration timeout; the stream's own timed work. */
static uint64_t dialin_next_deadline(const driver_t *d)
{
    const dialin_t *x = driver_priv(d);
    uint64_t s = x->cfd >= 0 ? driver_next_deadline(x->stream) : 0, n = x->nc.fd >= 0 && !registered(x) ?
                 x->nc.deadline_ns : 0;
    return !s ? n : !n ? s : s < n ? s : n;
}

static int dialin_service(driver_t *d, uint64_t now_ns)
{
    dialin_t *x = driver_priv(d);
    if (x->cfd >= 0 && x->nc.fd >= 0 && !registered(x) && now_ns >= x->nc.deadline_ns)
        registering(d);   /* too slow: rejected */
    return x->cfd >= 0 ? driver_service(x->stream, now_ns) : 0;
}

static void dialin_destroy(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    dialin_close(d);
    if (x->nc.fd >= 0)
        close(x->nc.fd);
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
    x->lfd = x->cfd = x->nc.fd = -1;
    driver_t *d = driver_new(&dialin_backend, x);
    if (!d) {
        close(x->ep);
        driver_free(x->stream);
        free(x);
        snprintf(err, errcap, "listen: out of memory");
    }
    return d;
}
