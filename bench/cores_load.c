/*
 * bench/cores_load.c -- `rtugw bench cores`'s load: client threads, each an
 * epoll loop (level-triggered) over its share of non-blocking Modbus TCP
 * connections, each connection keeping its reads in flight, every answer
 * checked against the device's pattern (holding register a = 1000 + a). A
 * thread costs a few microseconds of CPU per answer, so one thread can load
 * a gateway on a 2-core box and still leave it a core (bench_cores.c
 * reports the threads' CPU beside the gateway's).
 */
#include "bench/cores.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

/* ---- one connection ------------------------------------------------------------ */

static int fail(cores_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cores_worker_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
    return -1;
}

static int watch(cores_worker_t *w, cores_conn_t *c, bool out)
{
    struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c };
    if (epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        return fail(w, "connection %u: epoll_ctl: %s", c->index, strerror(errno));
    c->want_out = out;
    return 0;
}

/* Hands the socket what it takes; the rest waits for EPOLLOUT. */
static int flush(cores_worker_t *w, cores_conn_t *c)
{
    while (c->out_len) {
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
        if (n > 0) {
            memmove(c->out, c->out + n, c->out_len - (size_t)n);
            c->out_len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return c->want_out ? 0 : watch(w, c, true);
        } else {
            return fail(w, "connection %u: send: %s", c->index, n < 0 ? strerror(errno) : "nothing taken");
        }
    }
    return c->want_out ? watch(w, c, false) : 0;
}

/* k more reads of holding registers 0-7 of unit 1. */
static int send_reads(cores_worker_t *w, cores_conn_t *c, unsigned k, uint64_t now)
{
    for (unsigned i = 0; i < k; i++) {
        uint16_t tid = c->next_tid++;
        uint8_t *p = c->out + c->out_len;
        c->tid[c->inflight] = tid;
        c->sent[c->inflight++] = now;
        const uint8_t req[CORES_REQ_LEN] = { (uint8_t)(tid >> 8), (uint8_t)tid, 0, 0, 0, 6, 1, 3, 0, 0, 0,
                                             CORES_REGS };
        memcpy(p, req, sizeof req);
        c->out_len += sizeof req;
    }
    w->inflight += k;
    return flush(w, c);
}

/* One whole MBAP frame p of 6 + len bytes: checked, taken off the slots. */
static int answer(cores_worker_t *w, cores_conn_t *c, const uint8_t *p, unsigned len, uint64_t now)
{
    unsigned tid = (unsigned)p[0] << 8 | p[1], s = 0;
    while (s < c->inflight && c->tid[s] != tid)
        s++;
    if (s == c->inflight)
        return fail(w, "connection %u: an answer with transaction id %u, not one in flight", c->index, tid);
    if (p[2] || p[3] || p[6] != 1)
        return fail(w, "connection %u: transaction %u: protocol id %u, unit %u (expected 0 and 1)", c->index,
                    tid, (unsigned)p[2] << 8 | p[3], p[6]);
    if (p[7] == 0x83 && len == 3)
        return fail(w, "connection %u: transaction %u: exception 0x%02x", c->index, tid, p[8]);
    if (p[7] != 3 || len != CORES_ANS_LEN - 6 || p[8] != 2 * CORES_REGS)
        return fail(w, "connection %u: transaction %u: function 0x%02x, length %u, byte count %u "
                       "(expected 3, %u, %u)", c->index, tid, p[7], len, len > 2 ? p[8] : 0,
                    CORES_ANS_LEN - 6, 2 * CORES_REGS);
    for (unsigned i = 0; i < CORES_REGS; i++) {
        unsigned v = (unsigned)p[9 + 2 * i] << 8 | p[10 + 2 * i];
        if (v != 1000 + i)
            return fail(w, "connection %u: transaction %u: register %u = %u, expected %u", c->index, tid, i, v,
                        1000 + i);
    }
    if (now < w->seg->deadline) {
        w->answers++;
        if (w->seg->measured)
            bench_samples_push(&w->lat, (double)(now - c->sent[s]) / 1000.0);
    }
    c->inflight--;
    c->tid[s] = c->tid[c->inflight];
    c->sent[s] = c->sent[c->inflight];
    w->inflight--;
    return 0;
}

/* What the socket has: whole answers checked; as many reads sent again
 * while the window is open. */
static int conn_read(cores_worker_t *w, cores_conn_t *c, uint64_t now)
{
    ssize_t n = recv(c->fd, c->in + c->have, sizeof c->in - c->have, 0);
    if (n == 0)
        return fail(w, "connection %u closed by the gateway (%u reads in flight)", c->index, c->inflight);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? 0
                   : fail(w, "connection %u: recv: %s", c->index, strerror(errno));
    c->have += (size_t)n;
    size_t off = 0;
    unsigned done = 0;
    while (c->have - off >= 6) {
        const uint8_t *p = c->in + off;
        unsigned len = (unsigned)p[4] << 8 | p[5];
        if (len < 2 || len > 254)
            return fail(w, "connection %u: an MBAP length of %u", c->index, len);
        if (c->have - off < 6 + (size_t)len)
            break;
        if (answer(w, c, p, len, now) != 0)
            return -1;
        off += 6 + (size_t)len;
        done++;
    }
    memmove(c->in, c->in + off, c->have - off);
    c->have -= off;
    return done && now < w->seg->deadline ? send_reads(w, c, done, now) : 0;
}

static int stall_scan(cores_worker_t *w, uint64_t now)
{
    for (unsigned i = 0; i < w->n; i++) {
        const cores_conn_t *c = &w->conn[i];
        for (unsigned s = 0; s < c->inflight; s++)
            if (now - c->sent[s] > CORES_STALL_NS)
                return fail(w, "connection %u: no answer for 5 s (transaction %u, %u reads in flight)", c->index,
                            c->tid[s], c->inflight);
    }
    return 0;
}

/* ---- a client thread: one segment ---------------------------------------------- */

void *cores_worker_main(void *arg)
{
    cores_worker_t *w = arg;
    cores_segment_t *seg = w->seg;
    struct epoll_event ev[256];
    int pin = w->pin ? pthread_setaffinity_np(pthread_self(), sizeof *w->pin, w->pin) : 0;

    pthread_barrier_wait(&seg->start);
    uint64_t cpu0 = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID), now = bench_now_ns();
    uint64_t next_scan = now + CORES_SCAN_NS;
    bool open = true;
    if (pin != 0) {
        fail(w, "cannot pin a client thread to --client-cpus %s: %s", w->pin_text, strerror(pin));
        goto failed;
    }
    for (unsigned i = 0; i < w->n; i++)
        if (send_reads(w, &w->conn[i], w->depth, now) != 0)
            goto failed;
    for (;;) {
        if (open && now >= seg->deadline) {
            open = false;
            w->cpu_ns = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        }
        if (!open && w->inflight == 0)
            return NULL;
        if (atomic_load_explicit(&seg->failed, memory_order_relaxed))
            return NULL;
        uint64_t left = open ? seg->deadline - now : CORES_SCAN_NS;
        int timeout = left >= 100000000ull ? 100 : (int)((left + 999999) / 1000000);
        int n = epoll_wait(w->ep, ev, (int)(sizeof ev / sizeof ev[0]), timeout);
        if (n < 0 && errno != EINTR) {
            fail(w, "epoll_wait: %s", strerror(errno));
            goto failed;
        }
        now = bench_now_ns();
        for (int i = 0; i < n; i++) {
            cores_conn_t *c = ev[i].data.ptr;
            if ((ev[i].events & EPOLLOUT) && flush(w, c) != 0)
                goto failed;
            if ((ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && conn_read(w, c, now) != 0)
                goto failed;
        }
        if (now >= next_scan) {
            if (stall_scan(w, now) != 0)
                goto failed;
            next_scan = now + CORES_SCAN_NS;
        }
    }
failed:
    atomic_store(&seg->failed, true);
    return NULL;
}

