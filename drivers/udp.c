/*
 * drivers/udp.c -- Modbus UDP: rtugw as the client of a device (or serial
 * server) that takes Modbus Application Protocol ADUs in UDP datagrams,
 * one ADU per datagram, usually on port 502.
 *
 * Above it the bus sees what the MBAP layer (mbap.c) gives it: write()
 * takes an RTU request and sends its PDU in one datagram whose MBAP unit id
 * is the slave and whose transaction id is the next of rtugw's own, a new
 * one for every attempt (a retry too); read() returns at most one RTU frame
 * (DRIVER_FRAMED) with a CRC computed here, good, since a frame is handed
 * up only when it is the answer asked for.
 *
 * THE INTEGRITY ARGUMENT. UDP may lose, duplicate, delay and reorder
 * datagrams, and anyone may send one to our socket. A datagram is handed
 * up only when all of these hold:
 *   - it comes from the address and port the request went to (the socket
 *     is not connect()ed, so the kernel does not filter: a datagram from
 *     anywhere else is dropped and counted, foreign_datagrams);
 *   - it is exactly one well-formed MBAP ADU (protocol 0, its length field
 *     equal to what the datagram holds; else frame_errors);
 *   - its transaction id is that of the attempt in flight, and that
 *     attempt has not been answered yet (else stale_answers).
 * Then it is that attempt's answer: the device wrote the id of the one
 * datagram it answers, and the id names one attempt (16 bits, one attempt
 * in flight at a time: an id comes back only after 65535 others were
 * asked, far beyond any datagram's life on a LAN or in a modem's buffer).
 * Its slave is the request's, whatever unit id the device wrote.
 * What a duplicated or late datagram can do: nothing but be counted. A
 * duplicate of the answer just taken finds its attempt answered; a late
 * answer to an attempt the line gave up (a timeout, then a retry with a new
 * id) carries the old id. Neither is handed up, so neither can be taken
 * for another request's answer, nor make the line doubt a good one (they
 * never reach the line as frames; line I4's copies are settled by the ids,
 * as for MBAP). What the gateway cannot know: whether a lost request was
 * executed (a write whose answer was lost may have been done; its retry
 * does it again, as on a serial line), and whether a device that stopped
 * answering is gone or the path drops everything: both are timeouts, and
 * the line's retries and back-off handle them as for a silent slave.
 *
 * A loss costs the attempt's timeout and then the line's normal retry.
 * UDP has no connection: the port is up once the socket exists. A send
 * error that says the path is gone (no route, network down) is a hang-up:
 * the owner reopens with its back-off, and a host name is resolved again
 * then (resolve.c: never on the caller's thread; open() returns
 * DRIVER_INPROGRESS meanwhile, as tcp.c's does).
 */
#include "drivers/internal.h"
#include "parser/rtu.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UDP_READS_PER_CALL 32   /* datagrams dropped per read() before it yields */

typedef struct udp_client {
    char host[DRIVER_TCP_HOST_MAX];
    unsigned port;
    unsigned resolve_timeout_ms;
    struct sockaddr_in addr;
    bool by_name;
    driver_resolve_t *job;
    int resolve_fd;
    char resolved[INET_ADDRSTRLEN];
    uint64_t deadline_ns;
    int fd;
    uint16_t next_tid, asked_tid;
    uint8_t asked_unit;
    bool asking;
} udp_client_t;

static void udp_close(driver_t *d)
{
    udp_client_t *u = driver_priv(d);
    resolve_drop(u->job, u->resolve_fd);
    u->job = NULL;
    u->resolve_fd = -1;
    if (u->fd >= 0)
        close(u->fd);
    u->fd = -1;
    u->asking = false;
}

static int open_socket(udp_client_t *u, char *err, size_t errcap)
{
    u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (u->fd < 0) {
        int e = errno;
        snprintf(err, errcap, "udp://%s:%u: socket: %s", u->host, u->port, strerror(e));
        return -e;
    }
    return 0;
}

static int udp_open(driver_t *d, char *err, size_t errcap)
{
    udp_client_t *u = driver_priv(d);
    int e = 0;
    if (u->fd >= 0)
        return 0;
    if (u->job)
        return DRIVER_INPROGRESS;
    if (!u->by_name)
        return open_socket(u, err, errcap);
    u->deadline_ns = driver_now_ns() + (uint64_t)u->resolve_timeout_ms * 1000000ull;
    u->job = resolve_start(u->host, u->port, SOCK_DGRAM, &u->resolve_fd, &e);
    if (!u->job) {
        snprintf(err, errcap, "udp://%s:%u: resolve: %s", u->host, u->port, strerror(e));
        return -e;
    }
    return DRIVER_INPROGRESS;
}

static int udp_open_finish(driver_t *d, char *err, size_t errcap)
{
    udp_client_t *u = driver_priv(d);
    if (!u->job)
        return u->fd >= 0 ? 0 : -EBADF;
    if (!resolve_done(u->job))
        return DRIVER_INPROGRESS;
    int gai = resolve_result(u->job, &u->addr);
    resolve_drop(u->job, u->resolve_fd);
    u->job = NULL;
    u->resolve_fd = -1;
    if (gai != 0) {
        snprintf(err, errcap, "udp://%s:%u: cannot resolve %s: %s", u->host, u->port, u->host, gai_strerror(gai));
        return -EHOSTUNREACH;
    }
    inet_ntop(AF_INET, &u->addr.sin_addr, u->resolved, sizeof u->resolved);
    return open_socket(u, err, errcap);
}

static int udp_fd(const driver_t *d)
{
    const udp_client_t *u = driver_priv(d);
    return u->job ? u->resolve_fd : u->fd;
}

static bool path_gone(int e)
{
    return e == ENETUNREACH || e == EHOSTUNREACH || e == ENETDOWN || e == EADDRNOTAVAIL;
}

static ssize_t udp_write(driver_t *d, const uint8_t *adu, size_t len)
{
    udp_client_t *u = driver_priv(d);
    uint8_t out[MBAP_MAX_ADU];

    if (len < RTU_MIN_ADU || len > RTU_MAX_ADU)
        return -EMSGSIZE;
    if (u->fd < 0)
        return DRIVER_AGAIN;
    uint16_t tid = ++u->next_tid;
    int n = mbap_encode(tid, adu[0], adu + 1, len - 3, out, sizeof out);
    if (n < 0)
        return n;
    if (sendto(u->fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&u->addr,
               sizeof u->addr) != n) {
        if (errno == EAGAIN || errno == EINTR)
            return DRIVER_AGAIN;
        return path_gone(errno) ? DRIVER_HANGUP : -errno;
    }
    /* A new attempt: the one before it (answered or not) is over. */
    u->asked_tid = tid;
    u->asked_unit = adu[0];
    u->asking = true;
    return (ssize_t)len;
}

static bool from_peer(const udp_client_t *u, const struct sockaddr_in *from, socklen_t len)
{
    return len == sizeof *from && from->sin_family == AF_INET && from->sin_port == u->addr.sin_port &&
           from->sin_addr.s_addr == u->addr.sin_addr.s_addr;
}

/* The datagram in p (n bytes) as the answer asked for, into buf: its length, or 0 (dropped, counted). */
static size_t take(driver_t *d, udp_client_t *u, const uint8_t *p, size_t n, uint8_t *buf, size_t cap)
{
    mbap_header_t h;
    size_t adu_len;
    if (mbap_stream_next(p, n, &h, &adu_len) != 1 || adu_len != n || n < MBAP_HEADER_LEN + 1) {
        DRIVER_COUNT(d, frame_errors, 1);
        return 0;
    }
    if (!u->asking || h.transaction != u->asked_tid) {
        DRIVER_COUNT(d, stale_answers, 1);
        return 0;
    }
    size_t pdu_len = n - MBAP_HEADER_LEN;
    if (pdu_len + 3 > cap)
        return 0;
    buf[0] = u->asked_unit;
    memcpy(buf + 1, p + MBAP_HEADER_LEN, pdu_len);
    uint16_t crc = rtu_crc16(buf, pdu_len + 1);
    buf[pdu_len + 1] = (uint8_t)crc;
    buf[pdu_len + 2] = (uint8_t)(crc >> 8);
    u->asking = false;
    return pdu_len + 3;
}

static ssize_t udp_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    udp_client_t *u = driver_priv(d);
    uint8_t dgram[MBAP_MAX_ADU + 1];   /* one more: a longer datagram shows as such */

    if (u->fd < 0)
        return DRIVER_AGAIN;
    for (unsigned i = 0; i < UDP_READS_PER_CALL; i++) {
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(u->fd, dgram, sizeof dgram, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &flen);
        *t_ns = driver_now_ns();
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return DRIVER_AGAIN;
            if (errno == ECONNREFUSED)
                continue;   /* an ICMP error for an earlier datagram: the answer is lost, the line times out */
            return path_gone(errno) ? DRIVER_HANGUP : -errno;
        }
        if (!from_peer(u, &from, flen)) {
            DRIVER_COUNT(d, foreign_datagrams, 1);
            continue;
        }
        size_t got = take(d, u, dgram, (size_t)n > sizeof dgram ? sizeof dgram : (size_t)n, buf, cap);
        if (got)
            return (ssize_t)got;
    }
    return DRIVER_AGAIN;
}

static int udp_describe(const driver_t *d, char *buf, size_t cap)
{
    const udp_client_t *u = driver_priv(d);
    return snprintf(buf, cap, "modbus-udp device, udp %s:%u%s%s%s%s", u->host, u->port, u->resolved[0] ? " (" : "",
                    u->resolved, u->resolved[0] ? ")" : "", u->job ? " resolving" : u->fd < 0 ? " closed" : "");
}

static uint64_t udp_next_deadline(const driver_t *d)
{
    const udp_client_t *u = driver_priv(d);
    return u->job ? u->deadline_ns : 0;
}

static int udp_service(driver_t *d, uint64_t now_ns)
{
    (void)d;
    (void)now_ns;
    return 0;
}

static void udp_destroy(driver_t *d)
{
    udp_close(d);
    free(driver_priv(d));
}

static const driver_backend_t udp_backend = {
    .name = "udp",
    .open = udp_open,
    .close = udp_close,
    .fd = udp_fd,
    .write = udp_write,
    .read = udp_read,
    .describe = udp_describe,
    .next_deadline = udp_next_deadline,
    .service = udp_service,
    .destroy = udp_destroy,
    .open_finish = udp_open_finish,
    .flags = DRIVER_FRAMED,
};

driver_t *driver_udp_new(const driver_tcp_config_t *cfg, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    struct in_addr a;
    bool by_name;

    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    if (!tcp_config_ok(cfg, "udp", &a, &by_name, err, errcap))
        return NULL;
    udp_client_t *u = calloc(1, sizeof *u);
    driver_t *d = u ? driver_new(&udp_backend, u) : NULL;
    if (!d) {
        free(u);
        snprintf(err, errcap, "udp: out of memory");
        return NULL;
    }
    snprintf(u->host, sizeof u->host, "%s", cfg->host);
    u->port = cfg->port;
    u->resolve_timeout_ms = cfg->connect_timeout_ms;
    u->by_name = by_name;
    u->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port), .sin_addr = a };
    u->fd = -1;
    u->resolve_fd = -1;
    return d;
}
