/*
 * drivers/tcp.c -- the TCP client backend: a byte stream to a serial device
 * server (RTU over TCP) or to a Modbus TCP device (under the MBAP layer).
 *
 * Nothing blocks. open() starts a non-blocking connect and returns
 * DRIVER_INPROGRESS (or 0, when the kernel connects at once, as it may on
 * the loopback); the owner polls the fd for writing and calls
 * driver_open_finish(), and gives up at driver_next_deadline(), the connect
 * timeout. A reset, a refused connection or the peer's FIN is a hang-up:
 * the owner closes and reopens with the back-off, as for a serial line
 * whose adapter was pulled.
 *
 * Keep-alive probes (after 10 s idle, every 5 s, 3 of them) find a device
 * server that lost power without a FIN within about 25 s even when no
 * request is outstanding; TCP_NODELAY sends each request at once (a request
 * is one small write, and Nagle would hold it for the previous ACK).
 *
 * HOST is an IPv4 address or a name. A name is resolved (IPv4, getaddrinfo)
 * afresh on every open, so a device server that moved is found at its new
 * address on the next reconnect, and never on the caller's thread
 * (resolve.c). Meanwhile open() returns DRIVER_INPROGRESS and fd() is
 * resolve.c's pipe, which hangs up when the answer is there: the owner's
 * wait for "writable" wakes on it, and open_finish() takes the address and
 * starts the connect, which goes on as for an address. The connect timeout
 * covers both.
 */
#include "drivers/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCP_TXBUF 1024

typedef struct tcp_client {
    char host[DRIVER_TCP_HOST_MAX];
    unsigned port;
    unsigned connect_timeout_ms;
    struct sockaddr_in addr;
    bool by_name;                   /* host is a name: resolved on each open */
    bool adopted;                   /* tcp_stream_new: a connection accepted elsewhere, never dialled */
    driver_resolve_t *job;          /* the resolution under way, or NULL (resolve.c) */
    int resolve_fd;                 /* its pipe's read end, or -1 */
    char resolved[INET_ADDRSTRLEN]; /* what the name gave last */
    int fd;
    bool connecting;
    uint64_t connect_deadline_ns;
    uint8_t tx[TCP_TXBUF];          /* what the socket did not take at once */
    size_t tx_len;
} tcp_client_t;

void driver_tcp_defaults(driver_tcp_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->connect_timeout_ms = 3000;
}

/* Drops the resolution under way, if any (its thread finishes alone). */
static void tcp_resolve_drop(tcp_client_t *t)
{
    resolve_drop(t->job, t->resolve_fd);
    t->resolve_fd = -1;
    t->job = NULL;
}

/* Starts resolving t->host on a thread of its own. */
static int tcp_resolve_start(tcp_client_t *t, char *err, size_t errcap)
{
    int e = 0;
    t->job = resolve_start(t->host, t->port, SOCK_STREAM, &t->resolve_fd, &e);
    if (!t->job) {
        snprintf(err, errcap, "tcp://%s:%u: resolve: %s", t->host, t->port, strerror(e));
        return -e;
    }
    return 0;
}

static void tcp_close(driver_t *d)
{
    tcp_client_t *t = driver_priv(d);
    tcp_resolve_drop(t);
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    t->connecting = false;
    t->tx_len = 0;
}

static void set_options(int fd)
{
    int one = 1, idle = 10, interval = 5, count = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

static int connect_failed(driver_t *d, int e, char *err, size_t errcap)
{
    tcp_client_t *t = driver_priv(d);
    snprintf(err, errcap, "tcp://%s:%u: connect: %s", t->host, t->port, strerror(e));
    tcp_close(d);
    return -e;
}

/* The socket and its non-blocking connect to t->addr. */
static int start_connect(driver_t *d, char *err, size_t errcap)
{
    tcp_client_t *t = driver_priv(d);
    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->fd < 0) {
        int e = errno;
        snprintf(err, errcap, "tcp://%s:%u: socket: %s", t->host, t->port, strerror(e));
        return -e;
    }
    set_options(t->fd);
    if (connect(t->fd, (const struct sockaddr *)&t->addr, sizeof t->addr) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return connect_failed(d, errno, err, errcap);
    t->connecting = true;
    return DRIVER_INPROGRESS;
}

static int tcp_open(driver_t *d, char *err, size_t errcap)
{
    tcp_client_t *t = driver_priv(d);
    if (t->fd >= 0 || t->job)
        return t->connecting ? DRIVER_INPROGRESS : 0;
    if (t->adopted) {
        snprintf(err, errcap, "no connection accepted");
        return -ENOTCONN;
    }
    t->connect_deadline_ns = driver_now_ns() + (uint64_t)t->connect_timeout_ms * 1000000ull;
    if (!t->by_name)
        return start_connect(d, err, errcap);
    int rc = tcp_resolve_start(t, err, errcap);
    if (rc != 0)
        return rc;
    t->connecting = true;
    return DRIVER_INPROGRESS;
}

/* The name's answer, once its thread has it: then the connect starts. */
static int resolve_finish(driver_t *d, char *err, size_t errcap)
{
    tcp_client_t *t = driver_priv(d);
    if (!resolve_done(t->job))
        return DRIVER_INPROGRESS;
    int gai = resolve_result(t->job, &t->addr);
    tcp_resolve_drop(t);
    if (gai != 0) {
        snprintf(err, errcap, "tcp://%s:%u: cannot resolve %s: %s", t->host, t->port, t->host, gai_strerror(gai));
        t->connecting = false;
        return -EHOSTUNREACH;
    }
    inet_ntop(AF_INET, &t->addr.sin_addr, t->resolved, sizeof t->resolved);
    int rc = start_connect(d, err, errcap);
    return rc == 0 ? (t->connecting = false, 0) : rc;
}

static int tcp_open_finish(driver_t *d, char *err, size_t errcap)
{
    tcp_client_t *t = driver_priv(d);
    int e = 0;
    socklen_t len = sizeof e;

    if (t->job)
        return resolve_finish(d, err, errcap);
    if (t->fd < 0)
        return -EBADF;
    if (!t->connecting)
        return 0;
    if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        e = errno;
    if (e == EINPROGRESS || e == EALREADY)
        return DRIVER_INPROGRESS;
    if (e == 0) {
        /* SO_ERROR is 0 also before the handshake ends: ask the peer's name. */
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        if (getpeername(t->fd, (struct sockaddr *)&peer, &plen) != 0)
            return errno == ENOTCONN ? DRIVER_INPROGRESS : connect_failed(d, errno, err, errcap);
        t->connecting = false;
        return 0;
    }
    return connect_failed(d, e, err, errcap);
}

static int tcp_fd(const driver_t *d)
{
    const tcp_client_t *t = driver_priv(d);
    return t->job ? t->resolve_fd : t->fd;
}

static bool is_hangup(int e)
{
    return e == ECONNRESET || e == EPIPE || e == ENOTCONN || e == ECONNREFUSED || e == ETIMEDOUT ||
           e == EHOSTUNREACH || e == ENETUNREACH || e == ECONNABORTED;
}

/* Sends what is queued; 0, or DRIVER_HANGUP / -errno. */
static int flush_tx(tcp_client_t *t)
{
    while (t->tx_len) {
        ssize_t n = send(t->fd, t->tx, t->tx_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return is_hangup(errno) ? DRIVER_HANGUP : -errno;
        }
        memmove(t->tx, t->tx + n, t->tx_len - (size_t)n);
        t->tx_len -= (size_t)n;
    }
    return 0;
}

static ssize_t tcp_write(driver_t *d, const uint8_t *buf, size_t len)
{
    tcp_client_t *t = driver_priv(d);
    if (len == 0 || len > sizeof t->tx)
        return -EMSGSIZE;
    if (t->connecting)
        return DRIVER_AGAIN;
    if (t->tx_len + len > sizeof t->tx)
        return DRIVER_AGAIN;   /* the peer has not taken the last frames: it is not reading */
    memcpy(t->tx + t->tx_len, buf, len);
    t->tx_len += len;
    int rc = flush_tx(t);
    return rc < 0 ? rc : (ssize_t)len;
}

static ssize_t tcp_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    tcp_client_t *t = driver_priv(d);
    if (t->connecting)
        return DRIVER_AGAIN;
    ssize_t n = recv(t->fd, buf, cap, MSG_DONTWAIT);
    *t_ns = driver_now_ns();
    if (n > 0)
        return n;
    if (n == 0)
        return DRIVER_HANGUP;   /* the peer closed */
    if (errno == EAGAIN || errno == EINTR)
        return DRIVER_AGAIN;
    return is_hangup(errno) ? DRIVER_HANGUP : -errno;
}

static int tcp_describe(const driver_t *d, char *buf, size_t cap)
{
    const tcp_client_t *t = driver_priv(d);
    return snprintf(buf, cap, "tcp %s:%u%s%s%s%s", t->host, t->port, t->resolved[0] ? " (" : "", t->resolved,
                    t->resolved[0] ? ")" : "",
                    t->job ? " resolving" : t->fd < 0 ? " closed" : t->connecting ? " connecting" : "");
}

/* Connecting: when to give up. Else: when to send what the socket did not take. */
static uint64_t tcp_next_deadline(const driver_t *d)
{
    const tcp_client_t *t = driver_priv(d);
    if (t->job)
        return t->connect_deadline_ns;
    if (t->fd < 0)
        return 0;
    if (t->connecting)
        return t->connect_deadline_ns;
    return t->tx_len ? driver_now_ns() + 1000000ull : 0;
}

static int tcp_service(driver_t *d, uint64_t now_ns)
{
    tcp_client_t *t = driver_priv(d);
    (void)now_ns;
    return t->fd >= 0 && !t->connecting ? flush_tx(t) : 0;
}

static void tcp_destroy(driver_t *d)
{
    tcp_client_t *t = driver_priv(d);
    tcp_resolve_drop(t);
    free(t);
}

static const driver_backend_t tcp_backend = {
    .name = "tcp",
    .open = tcp_open,
    .close = tcp_close,
    .fd = tcp_fd,
    .write = tcp_write,
    .read = tcp_read,
    .describe = tcp_describe,
    .next_deadline = tcp_next_deadline,
    .service = tcp_service,
    .destroy = tcp_destroy,
    .open_finish = tcp_open_finish,
};

bool tcp_config_ok(const driver_tcp_config_t *cfg, const char *scheme, struct in_addr *a, bool *by_name, char *err,
                   size_t errcap)
{
    if (!cfg->host || !cfg->host[0] || strlen(cfg->host) >= DRIVER_TCP_HOST_MAX ||
        (inet_pton(AF_INET, cfg->host, a) != 1 && !driver_tcp_host_name_ok(cfg->host))) {
        snprintf(err, errcap, "%s://%s: expected an IPv4 address such as 10.0.0.5 or a host name", scheme,
                 cfg->host ? cfg->host : "");
        return false;
    }
    if (cfg->port < 1 || cfg->port > 65535 || cfg->connect_timeout_ms == 0) {
        snprintf(err, errcap, "%s://%s:%u: port 1..65535 and a connect timeout above 0 ms", scheme, cfg->host,
                 cfg->port);
        return false;
    }
    *by_name = inet_pton(AF_INET, cfg->host, a) != 1;
    return true;
}

driver_t *driver_tcp_new(const driver_tcp_config_t *cfg, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    struct in_addr a;

    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    bool by_name;
    if (!tcp_config_ok(cfg, "tcp", &a, &by_name, err, errcap))
        return NULL;
    tcp_client_t *t = calloc(1, sizeof *t);
    driver_t *d = t ? driver_new(&tcp_backend, t) : NULL;
    if (!d) {
        free(t);
        snprintf(err, errcap, "tcp: out of memory");
        return NULL;
    }
    snprintf(t->host, sizeof t->host, "%s", cfg->host);
    t->port = cfg->port;
    t->connect_timeout_ms = cfg->connect_timeout_ms;
    t->by_name = by_name;
    t->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port), .sin_addr = a };
    t->fd = -1;
    t->resolve_fd = -1;
    return d;
}

driver_t *tcp_stream_new(void)
{
    tcp_client_t *t = calloc(1, sizeof *t);
    driver_t *d = t ? driver_new(&tcp_backend, t) : NULL;
    if (!d) {
        free(t);
        return NULL;
    }
    snprintf(t->host, sizeof t->host, "none");
    t->adopted = true;
    t->fd = -1;
    t->resolve_fd = -1;
    return d;
}

void tcp_stream_adopt(driver_t *d, int fd)
{
    tcp_client_t *t = driver_priv(d);
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    tcp_close(d);
    t->fd = fd;
    set_options(fd);
    if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && peer.sin_family == AF_INET) {
        inet_ntop(AF_INET, &peer.sin_addr, t->host, sizeof t->host);
        t->port = ntohs(peer.sin_port);
    }
}

bool driver_tcp_host_name_ok(const char *host)
{
    /* letters, digits, hyphens and dots (RFC 1123), a label 1..63 long */
    size_t label = 0, n = strlen(host);
    if (n == 0 || n >= DRIVER_TCP_HOST_MAX || host[0] == '.' || host[0] == '-' || host[n - 1] == '.')
        return false;
    for (const char *p = host; *p; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (*p == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if (alnum || *p == '-') {
            if (++label > 63)
                return false;
        } else {
            return false;
        }
    }
    return true;
}
