/*
 * gateway/port.c -- one port on its loop's thread (a bus's or a serial
 * slave's: the line thread by default, else the I/O thread): a serial line,
 * or a TCP connection (a device server, a Modbus TCP device).
 *
 * It opens the driver (or retries with back-off: 100 ms doubling to 5 s),
 * reads whatever arrives, stamps each chunk with CLOCK_MONOTONIC as it
 * arrives (so RTU silence is judged from the wire, not from a worker's
 * latency) and sends it to its sink, a bus actor or a serial slave's. A
 * hang-up closes the port and tells the sink; writes come from the sink
 * through the loop's command queue. The port knows its sink only as an
 * actor reference: it does not know what a bus does with the bytes.
 *
 * An open may be in progress (a TCP connect): the port waits for the fd
 * to turn writable, at most until the driver's deadline (the connect
 * timeout), and stays down meanwhile, so the bus answers 0x0A at once
 * rather than let requests wait for a connection that may never come. A
 * connect that fails or times out takes the same back-off as a reopen.
 *
 * Paced reads (port_new_paced: an RTU line of known baud, the bus's). Read
 * per chunk, a 9600-baud answer of 10 registers woke the thread about 33
 * times, one small chunk each (docs/results.md, "Paced reads"). But
 * nothing needs its bytes before they can make a frame: the line frames an
 * answer by its length (parser/framer.c
 * by_length), whenever its bytes are read. So after a write the port stops
 * watching the fd until the earliest moment an answer can be complete (the
 * request's wire time and the 5 bytes of the shortest answer), then reads
 * what is there; while the bytes read since the write predict a longer
 * answer (rtu_response_length over its first bytes) it sleeps again for
 * the wire time of the bytes still missing, which cannot arrive sooner; a
 * first byte not yet come, an answer complete, or a function with no
 * length rule go back to reading every chunk as it comes (the line's quiet
 * check after an answer, copies, noise). A sleep is at most
 * PACE_MAX_SLEEP_NS, so an answer whose first bytes mislead (noise before
 * it) is read at most that late; a right prediction delays no answer at
 * all, as it wakes when the last byte can first be there. Stamps are the
 * read times, as always.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <stdatomic.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define PACE_MAX_SLEEP_NS 20000000ull   /* 20 ms: the most a misleading prediction delays bytes */
#define PACE_SHORTEST_ANSWER 5          /* an exception: slave, function, code, CRC */

struct gw_port {
    gw_t *gw;
    gw_loop_t *loop;
    driver_t *driver;
    char name[64];            /* as logs name it: "bus line", "serial_slave scada" */
    actor_ref_t sink;
    line_bus_metrics_t *m;
    struct event *ev_read;
    struct event *ev_reopen;
    struct event *ev_service;
    struct event *ev_connect;  /* an open in progress: the fd turning writable, or its deadline */
    driver_backoff_t backoff;
    bool logged_failure;       /* the first failed open is a warning, the rest debug */
    bool up;
    /* paced reads */
    uint64_t pace_char_ns;     /* 0: every chunk read as it comes */
    struct event *ev_pace;     /* the next read while ev_read is off: on pace_fd */
    int pace_fd;               /* a timerfd: epoll's millisecond timeouts woke the loop up to
                                  4 times early, 1 ms apart, per sleep; -1 when not paced */
    bool pacing;               /* between a write and its answer's predicted end */
    bool read_paused;          /* ev_read is off: ev_pace reads */
    uint8_t pace_head[3];      /* the answer's first bytes, for its length rule */
    size_t pace_have;          /* bytes read since the write */
    uint64_t pace_write_ns;    /* when the request was written */
    /* the timeline's stamps (port_stamps): the last write, the first and last read since */
    _Atomic uint64_t t_write_ns, t_first_ns, t_last_ns;
};

static void disarm_pace(gw_port_t *p);

static void arm_after(struct event *ev, uint64_t at)
{
    uint64_t now = gw_now_ns();
    uint64_t wait = at > now ? at - now : 0;
    struct timeval tv = { (time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000u) };
    evtimer_add(ev, &tv);
}

static void set_up(gw_port_t *p, bool up)
{
    uint8_t state = up;

    p->up = up;
    gw_set(&p->m->port_up, up);
    actor_send(p->gw->actors, p->sink, PORT_MSG_STATE, &state, sizeof state);
}

static void port_down(gw_port_t *p, const char *why)
{
    char desc[128];

    driver_describe(p->driver, desc, sizeof desc);
    gw_log(p->gw, CONFIG_LOG_WARN, "%s: %s (%s); reopening with back-off", p->name, why, desc);
    if (p->ev_read) {
        event_free(p->ev_read);
        p->ev_read = NULL;
    }
    disarm_pace(p);
    p->pacing = p->read_paused = false;
    driver_close(p->driver);
    set_up(p, false);
    p->logged_failure = true;   /* this warning is the one for the outage */
    arm_after(p->ev_reopen, driver_backoff_next(&p->backoff, gw_now_ns()));
}

/* Everything the driver has, to the sink; false when the port went down. */
static bool read_all(gw_port_t *p)
{
    gw_bytes_t chunk;

    for (;;) {
        uint64_t t;
        ssize_t n = driver_read(p->driver, chunk.data, sizeof chunk.data, &t);
        if (n > 0) {
            if (!atomic_load_explicit(&p->t_first_ns, memory_order_relaxed))
                atomic_store_explicit(&p->t_first_ns, t, memory_order_relaxed);
            atomic_store_explicit(&p->t_last_ns, t, memory_order_relaxed);
            for (size_t i = 0; p->pacing && i < (size_t)n && p->pace_have + i < sizeof p->pace_head; i++)
                p->pace_head[p->pace_have + i] = chunk.data[i];
            p->pace_have += (size_t)n;
            chunk.t_ns = t;
            chunk.len = (uint16_t)n;
            actor_send(p->gw->actors, p->sink, PORT_MSG_BYTES, &chunk, offsetof(gw_bytes_t, data) + (size_t)n);
            continue;
        }
        if (n == DRIVER_AGAIN)
            return true;
        port_down(p, n == DRIVER_HANGUP ? "line hung up" : strerror((int)-n));
        return false;
    }
}

static void resume_reads(gw_port_t *p)
{
    if (p->read_paused && p->ev_read)
        event_add(p->ev_read, NULL);
    p->read_paused = false;
}

/* Off the fd for `wait` ns (at most PACE_MAX_SLEEP_NS): then ev_pace reads. */
static void pause_reads(gw_port_t *p, uint64_t wait)
{
    if (wait > PACE_MAX_SLEEP_NS)
        wait = PACE_MAX_SLEEP_NS;
    if (!p->read_paused && p->ev_read)
        event_del(p->ev_read);
    p->read_paused = true;
    struct itimerspec its = { .it_value = { (time_t)(wait / 1000000000u), (long)(wait % 1000000000u) } };
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;   /* 0 would disarm it */
    timerfd_settime(p->pace_fd, 0, &its, NULL);
}

static void disarm_pace(gw_port_t *p)
{
    struct itimerspec off = { 0 };
    if (p->pace_fd >= 0)
        timerfd_settime(p->pace_fd, 0, &off, NULL);
}

/* After a read: sleep until the missing bytes of the answer can be in, or
 * read every chunk again (no byte yet, answer complete, no length rule). */
static void pace_next(gw_port_t *p)
{
    if (!p->pacing || p->pace_have == 0) {
        resume_reads(p);
        return;
    }
    size_t head = p->pace_have < sizeof p->pace_head ? p->pace_have : sizeof p->pace_head;
    int want = rtu_response_length(p->pace_head, head);
    if (want < 0 || want > RTU_MAX_ADU || (want > 0 && (size_t)want <= p->pace_have)) {
        p->pacing = false;
        resume_reads(p);
        return;
    }
    if (want == 0) {   /* its length not known yet: its first bytes cannot come sooner than this */
        pause_reads(p, (sizeof p->pace_head - p->pace_have) * p->pace_char_ns);
        return;
    }
    /* The answer alone takes want characters after the write on any medium
     * (a wire adds the request's own time; a pty hands it over at once),
     * so its last byte cannot be in before the write + want characters:
     * sleep until then, and after that read each chunk as it comes, so the
     * last byte is read when it lands, not a prediction's length after. (A
     * prediction from the bytes read so far, "missing x char from now",
     * overshoots by however far the reads lag the line: a UART's FIFO
     * delivers in bursts of up to 14 bytes.) A spin through the last
     * 150 us instead of a sleep, against the thread's 50-80 us late
     * wake-up, was measured not to pay: the last read came no earlier, as
     * the answer's bytes themselves came that late (docs/bench-wire.md). */
    uint64_t end = p->pace_write_ns + (uint64_t)want * p->pace_char_ns, now = gw_now_ns();
    if (end > now) {
        pause_reads(p, end - now);
        return;
    }
    p->pacing = false;
    resume_reads(p);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    gw_port_t *p = arg;

    (void)fd;
    (void)what;
    if (read_all(p))
        pace_next(p);
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    gw_port_t *p = arg;
    uint64_t expirations;

    (void)what;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    if (!p->ev_read || !p->read_paused)
        return;   /* the port went down meanwhile */
    if (read_all(p))
        pace_next(p);
}

static void arm_read(gw_port_t *p)
{
    p->ev_read = event_new(loop_base(p->loop), driver_fd(p->driver), EV_READ | EV_PERSIST, on_readable, p);
    event_add(p->ev_read, NULL);
}

static void open_done(gw_port_t *p, int rc, const char *err);

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
    gw_port_t *p = arg;
    char err[DRIVER_ERRLEN] = "";
    int rc;

    (void)fd;
    event_free(p->ev_connect);
    p->ev_connect = NULL;
    if (what & EV_TIMEOUT) {
        char desc[128];
        driver_describe(p->driver, desc, sizeof desc);
        snprintf(err, sizeof err, "%s: not connected within its connect timeout", desc);
        driver_close(p->driver);
        rc = -ETIMEDOUT;
    } else {
        rc = driver_open_finish(p->driver, err, sizeof err);
    }
    open_done(p, rc, err);
}

/* The open is in progress: wait for the fd to be writable (a connect) or
 * readable (a listener's connection, a resolver's answer), until the
 * driver's deadline; a driver with none (a dial-in port waiting for its
 * DTU) waits as long as it takes. */
static void wait_connect(gw_port_t *p)
{
    uint64_t now = gw_now_ns(), at = driver_next_deadline(p->driver), wait = at > now ? at - now : 0;
    struct timeval tv = { (time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000u) };
    p->ev_connect = event_new(loop_base(p->loop), driver_fd(p->driver), EV_WRITE | EV_READ, on_connect, p);
    if (!p->ev_connect) {
        driver_close(p->driver);
        open_done(p, -ENOMEM, "out of memory");
        return;
    }
    event_add(p->ev_connect, at ? &tv : NULL);
}

/* What an open (or its completion) came to: up, still in progress, or back-off. */
static void open_done(gw_port_t *p, int rc, const char *err)
{
    if (rc == DRIVER_INPROGRESS) {
        wait_connect(p);
        return;
    }
    if (rc != 0) {
        gw_log(p->gw, p->logged_failure ? CONFIG_LOG_DEBUG : CONFIG_LOG_WARN, "%s: %s; retrying with back-off",
               p->name, err);
        p->logged_failure = true;
        gw_set(&p->m->port_up, 0);
        arm_after(p->ev_reopen, driver_backoff_next(&p->backoff, gw_now_ns()));
        return;
    }
    driver_backoff_reset(&p->backoff);
    p->logged_failure = false;
    gw_log(p->gw, CONFIG_LOG_INFO, "%s: port open", p->name);
    arm_read(p);
    set_up(p, true);
}

static void try_open(gw_port_t *p)
{
    char err[DRIVER_ERRLEN];
    int rc = driver_open(p->driver, err, sizeof err);
    open_done(p, rc, err);
}

static void on_reopen(evutil_socket_t fd, short what, void *arg)
{
    gw_port_t *p = arg;
    (void)fd;
    (void)what;
    gw_count(&p->m->reopen_attempts);
    try_open(p);
}

/* Drivers with timed work (RTS release after a frame) ask for a deadline. */
static void arm_service(gw_port_t *p)
{
    uint64_t at = driver_next_deadline(p->driver);
    if (at)
        arm_after(p->ev_service, at);
}

static void on_service(evutil_socket_t fd, short what, void *arg)
{
    gw_port_t *p = arg;
    (void)fd;
    (void)what;
    driver_service(p->driver, gw_now_ns());
    arm_service(p);
}

/* The loop command behind port_write. */
static void do_write(void *ctx, uint64_t a, uint32_t b, const uint8_t *adu, size_t len)
{
    gw_port_t *p = ctx;
    (void)a;
    (void)b;
    if (!p->up)
        return;  /* the bus learns of the port state and times out */
    ssize_t n = driver_write(p->driver, adu, len);
    if (n < 0 && n != DRIVER_AGAIN) {
        port_down(p, strerror((int)-n));
        return;
    }
    atomic_store_explicit(&p->t_write_ns, gw_now_ns(), memory_order_relaxed);
    atomic_store_explicit(&p->t_first_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->t_last_ns, 0, memory_order_relaxed);
    arm_service(p);
    if (p->ev_pace && p->ev_read && p->pace_char_ns) {
        /* A new question: what was read before belongs to no answer of it
         * (the line reset its framer too). No answer can be complete
         * before the request and the shortest answer have crossed the wire. */
        p->pacing = true;
        p->pace_have = 0;
        p->pace_write_ns = atomic_load_explicit(&p->t_write_ns, memory_order_relaxed);
        pause_reads(p, (len + PACE_SHORTEST_ANSWER) * p->pace_char_ns);
    }
}

void port_stamps(const gw_port_t *p, uint64_t *written, uint64_t *first, uint64_t *last)
{
    *written = atomic_load_explicit(&p->t_write_ns, memory_order_relaxed);
    *first = atomic_load_explicit(&p->t_first_ns, memory_order_relaxed);
    *last = atomic_load_explicit(&p->t_last_ns, memory_order_relaxed);
}

int port_write(gw_port_t *p, const uint8_t *adu, size_t len)
{
    return loop_post(p->loop, do_write, p, 0, 0, adu, len);
}

/*
 * Another driver for the port (a reload moved its bus to another port or
 * serial setting), on the port's own thread, in an order the sink can
 * rely on: the old driver stops being read and is closed, the sink hears
 * the port go down (after every byte the old driver gave), then the
 * sink's own message (msg, carrying the pointer payload: what it must
 * change before the new port's first byte), then the new driver opens and
 * the sink hears it come up as for any open. The old driver is not freed
 * here: the sink may still name it until it has read its message (the
 * payload says which to free). A message the sink cannot take (out of
 * memory) leaves the port down, logged, rather than open at settings the
 * sink does not know.
 */
typedef struct port_swap {
    driver_t *driver;
    uint64_t char_ns;
    uint32_t msg;
    void *payload;
} port_swap_t;

static void do_swap(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_port_t *p = ctx;
    port_swap_t sw;
    (void)a;
    (void)b;
    if (len != sizeof sw)
        return;
    memcpy(&sw, data, sizeof sw);
    if (p->ev_read) {
        event_free(p->ev_read);
        p->ev_read = NULL;
    }
    if (p->ev_connect) {
        event_free(p->ev_connect);
        p->ev_connect = NULL;
    }
    event_del(p->ev_reopen);
    disarm_pace(p);
    p->pacing = p->read_paused = false;
    driver_close(p->driver);
    set_up(p, false);
    p->driver = sw.driver;
    p->pace_char_ns = p->ev_pace ? sw.char_ns : 0;   /* a port made unpaced stays so until a restart */
    if (actor_send(p->gw->actors, p->sink, sw.msg, &sw.payload, sizeof sw.payload) != 0) {
        gw_log(p->gw, CONFIG_LOG_ERROR, "%s: cannot tell the line its new port (out of memory); the port stays "
               "down until a restart", p->name);
        return;
    }
    gw_log(p->gw, CONFIG_LOG_INFO, "%s: reopening at its new settings", p->name);
    driver_backoff_reset(&p->backoff);
    p->logged_failure = false;
    try_open(p);
}

int port_swap(gw_port_t *p, driver_t *d, uint64_t char_ns, uint32_t msg, void *payload)
{
    port_swap_t sw = { d, char_ns, msg, payload };
    return loop_post(p->loop, do_swap, p, 0, 0, &sw, sizeof sw);
}

gw_port_t *port_new(gw_t *gw, gw_loop_t *loop, driver_t *d, const char *name, actor_ref_t sink,
                    line_bus_metrics_t *m)
{
    return port_new_paced(gw, loop, d, name, sink, m, 0);
}

gw_port_t *port_new_paced(gw_t *gw, gw_loop_t *loop, driver_t *d, const char *name, actor_ref_t sink,
                          line_bus_metrics_t *m, uint64_t char_ns)
{
    gw_port_t *p = calloc(1, sizeof *p);

    if (!p)
        return NULL;
    *p = (gw_port_t){ .gw = gw, .loop = loop, .driver = d, .sink = sink, .m = m, .pace_char_ns = char_ns,
                      .pace_fd = -1 };
    snprintf(p->name, sizeof p->name, "%s", name);
    driver_backoff_reset(&p->backoff);
    p->ev_reopen = evtimer_new(loop_base(loop), on_reopen, p);
    p->ev_service = evtimer_new(loop_base(loop), on_service, p);
    p->pace_fd = char_ns ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
    if (p->pace_fd >= 0 && (p->ev_pace = event_new(loop_base(loop), p->pace_fd, EV_READ | EV_PERSIST, on_pace, p)))
        event_add(p->ev_pace, NULL);
    if (!p->ev_reopen || !p->ev_service || (char_ns && !p->ev_pace)) {
        port_free(p);
        return NULL;
    }
    gw_set(&m->port_up, 0);
    try_open(p);
    return p;
}

void port_free(gw_port_t *p)
{
    if (!p)
        return;
    if (p->ev_read)
        event_free(p->ev_read);
    if (p->ev_reopen)
        event_free(p->ev_reopen);
    if (p->ev_service)
        event_free(p->ev_service);
    if (p->ev_pace)
        event_free(p->ev_pace);
    if (p->pace_fd >= 0)
        close(p->pace_fd);
    if (p->ev_connect)
        event_free(p->ev_connect);
    free(p);
}
