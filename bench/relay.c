/*
 * bench/relay.c -- the floor under `rtugw bench gateway --relay`: the least
 * that any Modbus TCP to RTU gateway does for a request, in a process of its
 * own, so that rtugw's figures can be read against what this machine allows.
 *
 * One thread and poll(): a request's MBAP frame is read from its client, its
 * RTU frame (unit, PDU, CRC) written to the pseudo-terminal, the answer read
 * until the length its function code gives, its CRC checked, and the MBAP
 * reply written back; one request on the line at a time, the others wait in
 * arrival order. The request's wake-ups are the ones every gateway has: the
 * client's request, the slave's answer. Nothing else: no inter-frame gap, no
 * vouching, no guard, no timeout beyond one second, no metrics, no log.
 *
 * It is not a gateway anyone should run: it takes whatever bytes come next
 * for the answer (a late answer would go to the next request), which is what
 * line/discipline.c exists to refuse. It answers function codes 3 and 4 (and
 * their exceptions) only, which is all bench gateway asks.
 */
#include "bench/bench.h"
#include "bench/internal.h"
#include "parser/rtu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#define RELAY_CONNS 40         /* bench gateway opens at most 32 */
#define RELAY_ADU 260          /* an MBAP frame: 7-byte header + 253-byte PDU */
#define RELAY_TIMEOUT_MS 1000

typedef struct relay_conn {
    int fd;                    /* -1: free */
    uint8_t in[RELAY_ADU];
    size_t len;                /* bytes of the request so far */
    bool queued;               /* a whole request waits for the line (or is on it) */
} relay_conn_t;

typedef struct relay {
    int lfd, line;
    relay_conn_t conns[RELAY_CONNS];
    int queue[RELAY_CONNS];    /* connections in arrival order; queue[0] is on the line */
    unsigned queued;
    uint8_t ans[RELAY_ADU];
    size_t ans_len, ans_want;  /* want 0: the line is idle */
    uint64_t sent_ns;
} relay_t;

static size_t mbap_total(const uint8_t *in, size_t len)
{
    if (len < 7)
        return 0;
    size_t n = 6u + (size_t)(in[4] << 8 | in[5]);
    return n >= 8 && n <= RELAY_ADU ? n : (size_t)-1;
}

/* The head of the queue leaves it: answered, or dropped. */
static int relay_pop(relay_t *r)
{
    int i = r->queue[0];
    memmove(r->queue, r->queue + 1, --r->queued * sizeof r->queue[0]);
    return i;
}

static void relay_drop(relay_t *r, int i)
{
    close(r->conns[i].fd);
    r->conns[i].fd = -1;
    r->conns[i].len = 0;
    r->conns[i].queued = false;
}

/* Writes the head of the queue's request to the line. */
static void relay_ask(relay_t *r)
{
    while (r->queued && !r->ans_want) {
        relay_conn_t *c = &r->conns[r->queue[0]];
        size_t total = mbap_total(c->in, c->len);
        size_t pdu_len = total >= 8 && total <= RELAY_ADU ? total - 7 : 0;
        uint8_t adu[RELAY_ADU];
        adu[0] = c->in[6];
        memcpy(adu + 1, c->in + 7, pdu_len);   /* pdu_len <= 253: adu holds 256 */
        uint16_t crc = rtu_crc16_fallback(adu, 1 + pdu_len);
        adu[1 + pdu_len] = (uint8_t)(crc & 0xff);
        adu[2 + pdu_len] = (uint8_t)(crc >> 8);
        unsigned fc = c->in[7], qty = pdu_len >= 5 ? (unsigned)(c->in[10] << 8 | c->in[11]) : 0;
        if (pdu_len == 5 && (fc == 3 || fc == 4) && qty >= 1 && qty <= 125 &&
            write(r->line, adu, 3 + pdu_len) == (ssize_t)(3 + pdu_len)) {
            r->ans_want = 5 + 2u * qty;
            r->ans_len = 0;
            r->sent_ns = bench_now_ns();
            return;
        }
        relay_drop(r, relay_pop(r));   /* not what this relay answers: the client sees a hang-up */
    }
}

/* The answer is whole (or the line gave up): reply, and ask the next one. */
static void relay_answered(relay_t *r, bool ok)
{
    relay_conn_t *c = &r->conns[r->queue[0]];
    if (ok && rtu_crc16_fallback(r->ans, r->ans_len) == 0) {
        uint8_t out[RELAY_ADU];
        size_t pdu_len = r->ans_len - 3;
        memcpy(out, c->in, 4);   /* transaction and protocol id */
        out[4] = (uint8_t)((pdu_len + 1) >> 8);
        out[5] = (uint8_t)(pdu_len + 1);
        memcpy(out + 6, r->ans, 1 + pdu_len);   /* unit and PDU */
        if (write(c->fd, out, 7 + pdu_len) != (ssize_t)(7 + pdu_len))
            ok = false;
    } else {
        ok = false;
    }
    int i = relay_pop(r);
    r->ans_want = 0;
    if (ok) {
        c->len = 0;
        c->queued = false;
    } else {
        relay_drop(r, i);
    }
    relay_ask(r);
}

static void relay_read_line(relay_t *r)
{
    uint8_t buf[RELAY_ADU];
    ssize_t n = read(r->line, buf, sizeof buf);
    if (n <= 0 || !r->ans_want)
        return;   /* EAGAIN, or bytes nobody asked for */
    size_t take = (size_t)n < sizeof r->ans - r->ans_len ? (size_t)n : sizeof r->ans - r->ans_len;
    memcpy(r->ans + r->ans_len, buf, take);
    r->ans_len += take;
    if (r->ans_len >= 2 && (r->ans[1] & 0x80))
        r->ans_want = 5;   /* an exception */
    if (r->ans_len >= r->ans_want)
        relay_answered(r, r->ans_len == r->ans_want);
}

static void relay_read_conn(relay_t *r, int i)
{
    relay_conn_t *c = &r->conns[i];
    ssize_t n = read(c->fd, c->in + c->len, sizeof c->in - c->len);
    if (n <= 0) {
        /* Only a connection with no request queued is polled (relay_serve),
         * so one that goes is in no queue: a queued one is dropped when its
         * reply cannot be written. */
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            relay_drop(r, i);
        return;
    }
    c->len += (size_t)n;
    size_t total = mbap_total(c->in, c->len);
    if (total == (size_t)-1 || c->len > total) {
        relay_drop(r, i);   /* a bad header, or a second request before the answer: not for this relay */
        return;
    }
    if (total && c->len == total && !c->queued) {
        c->queued = true;
        r->queue[r->queued++] = i;
        relay_ask(r);
    }
}

static void relay_accept(relay_t *r)
{
    int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = 0; i < RELAY_CONNS; i++)
        if (r->conns[i].fd < 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            r->conns[i].fd = fd;
            return;
        }
    close(fd);
}

static void relay_serve(relay_t *r)
{
    struct pollfd p[2 + RELAY_CONNS];
    int who[2 + RELAY_CONNS];
    for (;;) {
        nfds_t n = 0;
        p[n] = (struct pollfd){ r->lfd, POLLIN, 0 }; who[n++] = -1;
        p[n] = (struct pollfd){ r->line, POLLIN, 0 }; who[n++] = -2;
        for (int i = 0; i < RELAY_CONNS; i++)
            if (r->conns[i].fd >= 0 && !r->conns[i].queued) {
                p[n] = (struct pollfd){ r->conns[i].fd, POLLIN, 0 };
                who[n++] = i;
            }
        if (poll(p, n, r->ans_want ? RELAY_TIMEOUT_MS : -1) < 0 && errno != EINTR)
            return;
        if (r->ans_want && bench_now_ns() - r->sent_ns > RELAY_TIMEOUT_MS * 1000000ull)
            relay_answered(r, false);
        for (nfds_t k = 0; k < n; k++) {
            if (!p[k].revents)
                continue;
            if (who[k] == -1)
                relay_accept(r);
            else if (who[k] == -2)
                relay_read_line(r);
            else if (r->conns[who[k]].fd >= 0)
                relay_read_conn(r, who[k]);
        }
    }
}

static int relay_line_open(const char *path)
{
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct termios t;
    if (fd < 0 || tcgetattr(fd, &t) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    cfmakeraw(&t);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    tcsetattr(fd, TCSANOW, &t);
    return fd;
}

static void relay_on_term(int sig)
{
    (void)sig;
    _exit(0);   /* bench_gw_stop's SIGTERM: a clean stop */
}

bench_gw_t *bench_relay_start(const char *pty_path)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 64) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "rtugw bench gateway: relay: listen: %s\n", strerror(errno));
        if (lfd >= 0)
            close(lfd);
        return NULL;
    }
    int line = relay_line_open(pty_path);
    if (line < 0) {
        fprintf(stderr, "rtugw bench gateway: relay: %s: %s\n", pty_path, strerror(errno));
        close(lfd);
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "rtugw bench gateway: relay: fork: %s\n", strerror(errno));
        close(lfd);
        close(line);
        return NULL;
    }
    if (pid == 0) {
        /* The child: only this thread, no allocation. */
        static relay_t r;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGTERM, relay_on_term);
        memset(&r, 0, sizeof r);
        r.lfd = lfd;
        r.line = line;
        for (int i = 0; i < RELAY_CONNS; i++)
            r.conns[i].fd = -1;
        relay_serve(&r);
        _exit(1);
    }
    close(lfd);
    close(line);
    bench_gw_t *gw = bench_gw_adopt(pid, ntohs(a.sin_port));
    if (!gw) {
        kill(pid, SIGKILL);
        return NULL;
    }
    return gw;
}
