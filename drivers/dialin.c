/*
 * drivers/dialin.c -- dial-in devices (port = listen://ADDR:PORT): a DTU
 * (a cellular or Ethernet serial server) connects *to* rtugw and then
 * carries its serial line's RTU frames on the TCP stream, as a serial device
 * server does for tcp://. Once a DTU is connected, the stream is tcp.c's own
 * (tcp_stream_new: the same reads, send queue, keep-alive and hang-up
 * rules), and the line above keeps the same discipline as on tcp://.
 *
 * One fd for the owner's loop: an epoll set holding the port's hub (the
 * listening socket and the connections registering, dialin_hub.c), this
 * bus's bell (rung when a connection registered as its DTU's) and the
 * DTU's connection, if any, so that a DTU reconnecting is seen at once,
 * even while its old connection looks alive (a cellular link that died
 * without a FIN).
 *
 * Connecting. The driver joins its port's hub when it is made (one
 * listening socket per ADDR:PORT, shared by every bus configured there,
 * each told apart by its registration: register = hex:... or text:...;
 * the hub's comment argues why a connection's bytes reach one bus's line
 * only). open() has the hub listen and returns DRIVER_INPROGRESS with no
 * deadline: the owner waits for the set to be readable, and open_finish()
 * takes the connection registered as this bus's, if one is there. Bytes
 * after the registration are the line's: the hub never reads past it.
 *
 * Taking the bus back. A connection that registers as this bus's while its
 * DTU is connected is the DTU reconnecting (its old link may be dead
 * without a FIN): read() returns DRIVER_HANGUP, the owner closes the old
 * connection as for a lost port (every answer owed across it is given up,
 * 0x0A, never paired with the new one: the line's I8 holds the new
 * connection quiet as after any reconnect) and reopens, and open_finish()
 * takes the new connection (dialin_takeovers). So a DTU that reconnects
 * takes its bus back within the owner's back-off (100 ms after an open
 * that succeeded); a stranger, or another bus's DTU, never costs this
 * bus's DTU its link.
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
#include "drivers/dialin_hub.h"
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

typedef struct dialin {
    driver_dialin_config_t cfg;       /* the byte strings copied in */
    char addr[INET_ADDRSTRLEN];
    uint8_t reg[DRIVER_DIALIN_BYTES_MAX], hb[DRIVER_DIALIN_BYTES_MAX];
    driver_dialin_ports_t *ports;     /* where the port's hub is found; NULL: one of its own */
    dialin_member_t *member;          /* this bus on its port's hub (dialin_hub.c); NULL until opened */
    driver_t *stream;                 /* tcp.c's stream, holding the DTU's connection */
    int ep;                           /* the epoll set the owner polls: the hub's, the bell, cfd */
    int cfd;                          /* the bus's DTU connection (the stream's), or -1 */
    uint64_t last_in_ns;
} dialin_t;

static int watch(dialin_t *x, int fd)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
    return epoll_ctl(x->ep, EPOLL_CTL_ADD, fd, &ev);
}

/* The bus's connection closed (a hang-up, a takeover, the owner's close). A
 * connection registered as this bus's meanwhile stays in its slot on the
 * hub: it takes the bus at the next open. */
static void dialin_close(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    if (x->cfd >= 0) {
        epoll_ctl(x->ep, EPOLL_CTL_DEL, x->cfd, NULL);
        driver_close(x->stream);   /* closes cfd */
        __atomic_store_n(&x->cfd, -1, __ATOMIC_RELAXED);
    }
}

static int dialin_open_finish(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
    (void)err;
    (void)errcap;
    if (x->cfd >= 0)
        return 0;
    int fd = dialin_hub_take(x->member);
    if (fd < 0)
        return DRIVER_INPROGRESS;
    if (watch(x, fd) != 0) {
        close(fd);
        return DRIVER_INPROGRESS;
    }
    x->last_in_ns = 0;
    tcp_stream_adopt(x->stream, fd);
    __atomic_store_n(&x->cfd, fd, __ATOMIC_RELAXED);
    return 0;
}

/* Listens (the hub does, at its first member's open, so a port in use is
 * an open that fails and is retried with back-off), then waits for a
 * connection registered as this bus's: the owner waits for the set to be
 * readable, with no deadline (the hub keeps its own, in its set). */
static int dialin_open(driver_t *d, char *err, size_t errcap)
{
    dialin_t *x = driver_priv(d);
    int rc = dialin_hub_listen(x->member, err, errcap);
    if (rc != 0)
        return rc;
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
    if (dialin_hub_waiting(x->member)) {
        DRIVER_COUNT(d, dialin_takeovers, 1);
        return DRIVER_HANGUP;   /* this connection is over; the next open takes the new one */
    }
    for (;;) {
        ssize_t n = driver_read(x->stream, buf, cap, t_ns);
        if (n <= 0)
            return n;
        size_t left = strip_heartbeat(d, x, buf, (size_t)n, *t_ns);
        if (left)
            return (ssize_t)left;
    }
}

static int dialin_describe(const driver_t *d, char *buf, size_t cap)
{
    const dialin_t *x = driver_priv(d);
    char inner[128] = "";
    bool up = __atomic_load_n(&x->cfd, __ATOMIC_RELAXED) >= 0;
    int n = dialin_hub_describe(x->member, buf, cap);
    if (up)
        driver_describe(x->stream, inner, sizeof inner);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", up ? ", DTU " : ", waiting for a DTU", inner);
    return n;
}

/* The stream's own timed work (the hub's deadlines are a timer in its set). */
static uint64_t dialin_next_deadline(const driver_t *d)
{
    const dialin_t *x = driver_priv(d);
    return x->cfd >= 0 ? driver_next_deadline(x->stream) : 0;
}

static int dialin_service(driver_t *d, uint64_t now_ns)
{
    dialin_t *x = driver_priv(d);
    return x->cfd >= 0 ? driver_service(x->stream, now_ns) : 0;
}

static void dialin_destroy(driver_t *d)
{
    dialin_t *x = driver_priv(d);
    dialin_close(d);
    dialin_hub_leave(x->member);
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
    x->cfd = -1;
    driver_t *d = driver_new(&dialin_backend, x);
    if (!d) {
        close(x->ep);
        driver_free(x->stream);
        free(x);
        snprintf(err, errcap, "listen: out of memory");
        return NULL;
    }
    /* The bus joins its port at once: every bus of a port is a member
     * before any of them can be handed a connection. */
    if (!(x->member = dialin_hub_join(cfg->ports, &x->cfg, d, err, errcap)) ||
        watch(x, dialin_hub_fd(x->member)) != 0 || watch(x, dialin_member_bell(x->member)) != 0) {
        if (x->member)
            snprintf(err, errcap, "listen://%s:%u: %s", x->addr, x->cfg.port, strerror(errno));
        driver_free(d);   /* leaves the hub */
        return NULL;
    }
    return d;
}
