/*
 * gateway/io.c -- the I/O thread: one libevent loop that owns every fd and
 * timer of the daemon, so no actor ever blocks on I/O and no fd is touched
 * by two threads.
 *
 * Actors hand work to this thread through a command queue. The queue is a
 * mutex-protected list (actors post a few thousand commands a second at
 * most; the lock is held for two pointer writes), and the eventfd that wakes
 * the loop is written only when a post finds the queue empty: a burst of
 * answers costs one wake-up, not one per answer. The loop drains the whole
 * list under the lock in one swap, then works without it.
 */
#include "gateway/internal.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum io_cmd_kind { IO_SERIAL_WRITE, IO_TCP_ANSWER };

typedef struct io_cmd {
    struct io_cmd *next;
    uint8_t kind;
    uint32_t a;          /* bus index, or connection id */
    uint32_t b;          /* sequence (TCP) */
    uint16_t len;
    uint8_t data[RTU_MAX_ADU];
} io_cmd_t;

#define IO_FREE_MAX 256  /* cached command cells; more are freed */

typedef struct io_port {
    struct gw_io *io;
    gw_bus_t *bus;
    struct event *ev_read;
    struct event *ev_reopen;
    struct event *ev_service;
    driver_backoff_t backoff;
    bool up;
} io_port_t;

struct gw_io {
    gw_t *gw;
    struct event_base *base;
    int wake_fd;
    struct event *ev_wake;
    struct event *ev_drain;
    struct event *ev_signals[3];
    pthread_mutex_t lock;
    io_cmd_t *head, *tail;      /* pending commands, under lock */
    io_cmd_t *free_cells;       /* under lock */
    unsigned free_count;
    io_port_t ports[CONFIG_MAX_BUSES];
    uint64_t drain_deadline_ns;
    bool draining;
};

static io_cmd_t *cell_get(gw_io_t *io)
{
    io_cmd_t *c;

    pthread_mutex_lock(&io->lock);
    c = io->free_cells;
    if (c) {
        io->free_cells = c->next;
        io->free_count--;
    }
    pthread_mutex_unlock(&io->lock);
    return c ? c : malloc(sizeof *c);
}

static int post(gw_io_t *io, io_cmd_t *c)
{
    bool was_empty;

    c->next = NULL;
    pthread_mutex_lock(&io->lock);
    was_empty = io->head == NULL;
    if (io->tail)
        io->tail->next = c;
    else
        io->head = c;
    io->tail = c;
    pthread_mutex_unlock(&io->lock);
    if (was_empty) {
        uint64_t one = 1;
        /* EAGAIN means the counter is already non-zero: the loop will wake. */
        if (write(io->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
            return -errno;
    }
    return 0;
}

static int post_bytes(gw_io_t *io, uint8_t kind, uint32_t a, uint32_t b, const uint8_t *data,
                      size_t len)
{
    if (len > RTU_MAX_ADU)
        return -EMSGSIZE;
    io_cmd_t *c = cell_get(io);
    if (!c)
        return -ENOMEM;
    c->kind = kind;
    c->a = a;
    c->b = b;
    c->len = (uint16_t)len;
    memcpy(c->data, data, len);
    return post(io, c);
}

int io_post_serial_write(gw_io_t *io, unsigned bus, const uint8_t *adu, size_t len)
{
    return post_bytes(io, IO_SERIAL_WRITE, bus, 0, adu, len);
}

int io_post_tcp_answer(gw_io_t *io, uint32_t conn_id, uint32_t seq, const uint8_t *pdu, size_t len)
{
    return post_bytes(io, IO_TCP_ANSWER, conn_id, seq, pdu, len);
}

void io_wake_stop(gw_io_t *io)
{
    uint64_t one = 1;
    atomic_store(&io->gw->stopping, 1);
    if (write(io->wake_fd, &one, sizeof one) < 0) {
        /* counter already non-zero: the loop wakes anyway */
    }
}

/* ---- serial ports ------------------------------------------------------------- */

static void port_schedule_reopen(io_port_t *p)
{
    uint64_t now = gw_now_ns();
    uint64_t at = driver_backoff_next(&p->backoff, now);
    uint64_t wait = at > now ? at - now : 0;
    struct timeval tv = { (time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000u) };
    evtimer_add(p->ev_reopen, &tv);
}

static void port_set_up(gw_io_t *io, io_port_t *p, bool up)
{
    uint8_t state = up;

    p->up = up;
    gw_set(&bus_metrics(p->bus)->port_up, up);
    actor_send(io->gw->actors, bus_ref(p->bus), MSG_PORT, &state, sizeof state);
}

static void port_down(gw_io_t *io, io_port_t *p, const char *why)
{
    char desc[128];

    driver_describe(bus_driver(p->bus), desc, sizeof desc);
    gw_log(io->gw, CONFIG_LOG_WARN, "bus %s: %s (%s); reopening with back-off",
           bus_config(p->bus)->name, why, desc);
    if (p->ev_read) {
        event_free(p->ev_read);
        p->ev_read = NULL;
    }
    driver_close(bus_driver(p->bus));
    port_set_up(io, p, false);
    port_schedule_reopen(p);
}

static void serial_readable(evutil_socket_t fd, short what, void *arg)
{
    io_port_t *p = arg;
    gw_io_t *io = p->io;
    driver_t *d = bus_driver(p->bus);
    gw_bytes_t chunk;

    (void)fd;
    (void)what;
    for (;;) {
        uint64_t t;
        ssize_t n = driver_read(d, chunk.data, sizeof chunk.data, &t);
        if (n > 0) {
            chunk.t_ns = t;
            chunk.len = (uint16_t)n;
            actor_send(io->gw->actors, bus_ref(p->bus), MSG_BYTES, &chunk,
                       offsetof(gw_bytes_t, data) + (size_t)n);
            continue;
        }
        if (n == DRIVER_AGAIN)
            return;
        port_down(io, p, n == DRIVER_HANGUP ? "line hung up" : strerror((int)-n));
        return;
    }
}

static void port_arm(gw_io_t *io, io_port_t *p)
{
    p->ev_read = event_new(io->base, driver_fd(bus_driver(p->bus)), EV_READ | EV_PERSIST,
                           serial_readable, p);
    event_add(p->ev_read, NULL);
}

static void on_reopen(evutil_socket_t fd, short what, void *arg)
{
    io_port_t *p = arg;
    gw_io_t *io = p->io;
    char err[DRIVER_ERRLEN];

    (void)fd;
    (void)what;
    gw_count(&bus_metrics(p->bus)->reopen_attempts);
    if (driver_open(bus_driver(p->bus), err, sizeof err) != 0) {
        gw_log(io->gw, CONFIG_LOG_DEBUG, "bus %s: reopen failed: %s", bus_config(p->bus)->name, err);
        port_schedule_reopen(p);
        return;
    }
    driver_backoff_reset(&p->backoff);
    gw_log(io->gw, CONFIG_LOG_INFO, "bus %s: port open", bus_config(p->bus)->name);
    port_arm(io, p);
    port_set_up(io, p, true);
}

static void on_service(evutil_socket_t fd, short what, void *arg);

/* Drivers with timed work (RTS release after a frame) ask for a deadline. */
static void port_service_arm(gw_io_t *io, io_port_t *p)
{
    uint64_t at = driver_next_deadline(bus_driver(p->bus));

    (void)io;
    if (!at)
        return;
    uint64_t now = gw_now_ns();
    uint64_t wait = at > now ? at - now : 0;
    struct timeval tv = { (time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000u) };
    evtimer_add(p->ev_service, &tv);
}

static void on_service(evutil_socket_t fd, short what, void *arg)
{
    io_port_t *p = arg;
    (void)fd;
    (void)what;
    driver_service(bus_driver(p->bus), gw_now_ns());
    port_service_arm(p->io, p);
}

int io_add_bus(gw_io_t *io, unsigned index, gw_bus_t *bus)
{
    char err[DRIVER_ERRLEN];

    if (index >= CONFIG_MAX_BUSES || io->ports[index].bus)
        return -EINVAL;
    io_port_t *p = &io->ports[index];
    p->io = io;
    p->bus = bus;
    driver_backoff_reset(&p->backoff);
    p->ev_reopen = evtimer_new(io->base, on_reopen, p);
    p->ev_service = evtimer_new(io->base, on_service, p);
    if (driver_open(bus_driver(bus), err, sizeof err) != 0) {
        gw_log(io->gw, CONFIG_LOG_WARN, "bus %s: %s; retrying with back-off", bus_config(bus)->name, err);
        gw_set(&bus_metrics(bus)->port_up, 0);
        port_schedule_reopen(p);
        return 0;
    }
    port_arm(io, p);
    port_set_up(io, p, true);
    return 0;
}

static void serial_write(gw_io_t *io, unsigned bus, const uint8_t *adu, size_t len)
{
    io_port_t *p = &io->ports[bus];

    if (!p->bus || !p->up)
        return;  /* the bus actor learns of the port state and times out */
    ssize_t n = driver_write(bus_driver(p->bus), adu, len);
    if (n < 0 && n != DRIVER_AGAIN)
        port_down(io, p, strerror((int)-n));
    else
        port_service_arm(io, p);
}

/* ---- the loop ------------------------------------------------------------------ */

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    gw_io_t *io = arg;
    (void)fd;
    (void)what;
    if (tcp_in_flight(io->gw->tcp) == 0 || gw_now_ns() >= io->drain_deadline_ns) {
        if (tcp_in_flight(io->gw->tcp))
            gw_log(io->gw, CONFIG_LOG_WARN, "stopping with %u requests unanswered after 2 s",
                   tcp_in_flight(io->gw->tcp));
        event_base_loopexit(io->base, NULL);
        return;
    }
    struct timeval tv = { 0, 10000 };
    evtimer_add(io->ev_drain, &tv);
}

static void begin_drain(gw_io_t *io)
{
    if (io->draining)
        return;
    io->draining = true;
    gw_notify("STOPPING=1");
    gw_log(io->gw, CONFIG_LOG_INFO, "stopping: no new connections, answering what is in flight");
    if (io->gw->tcp)
        tcp_stop_accepting(io->gw->tcp);
    io->drain_deadline_ns = gw_now_ns() + 1800000000ull;  /* within the 2 s promise */
    drain_check(-1, 0, io);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    gw_io_t *io = arg;
    uint64_t count;
    io_cmd_t *list, *next;

    (void)what;
    if (read(fd, &count, sizeof count) < 0 && errno != EAGAIN)
        gw_log(io->gw, CONFIG_LOG_ERROR, "eventfd read: %s", strerror(errno));
    pthread_mutex_lock(&io->lock);
    list = io->head;
    io->head = io->tail = NULL;
    pthread_mutex_unlock(&io->lock);
    for (io_cmd_t *c = list; c; c = next) {
        next = c->next;
        if (c->kind == IO_SERIAL_WRITE)
            serial_write(io, c->a, c->data, c->len);
        else if (io->gw->tcp)
            tcp_on_answer(io->gw->tcp, c->a, c->b, c->data, c->len);
        pthread_mutex_lock(&io->lock);
        if (io->free_count < IO_FREE_MAX) {
            c->next = io->free_cells;
            io->free_cells = c;
            io->free_count++;
            c = NULL;
        }
        pthread_mutex_unlock(&io->lock);
        free(c);
    }
    if (atomic_load(&io->gw->stopping))
        begin_drain(io);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    gw_io_t *io = arg;
    (void)what;
    if (sig == SIGHUP) {
        gw_t *gw = io->gw;
        config_errors_t errs;
        if (!gw->opt.config_path) {
            gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: no configuration file to reload");
            return;
        }
        gw_notify("RELOADING=1");
        config_t *fresh = config_load_file(gw->opt.config_path, &errs);
        gw_notify("READY=1");
        if (!fresh) {
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s is not valid; keeping the running configuration:",
                   gw->opt.config_path);
            for (unsigned i = 0; i < errs.count; i++)
                gw_log(gw, CONFIG_LOG_ERROR, "  %s", errs.text[i]);
            return;
        }
        /* Applied live: logging and the TCP front end's policy. Buses,
         * devices and poll groups are owned by running actors; changing
         * them needs a restart, and the log says so rather than pretending. */
        bool structural = gw->cfg->bus_count != fresh->bus_count ||
                          gw->cfg->device_count != fresh->device_count ||
                          gw->cfg->poll_count != fresh->poll_count ||
                          memcmp(gw->cfg->buses, fresh->buses, sizeof fresh->buses) != 0 ||
                          memcmp(gw->cfg->devices, fresh->devices, sizeof fresh->devices) != 0 ||
                          memcmp(gw->cfg->polls, fresh->polls, sizeof fresh->polls) != 0;
        gw->cfg->log_level = fresh->log_level;
        if (gw->tcp)
            tcp_apply_config(gw->tcp, &fresh->tcp);
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: reloaded %s (log level, tcp policy)%s",
               gw->opt.config_path,
               structural ? "; bus/device/poll changes take effect after a restart" : "");
        config_free(fresh);
        return;
    }
    atomic_store(&io->gw->stopping, 1);
    begin_drain(io);
}

gw_io_t *io_new(gw_t *gw)
{
    gw_io_t *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->gw = gw;
    pthread_mutex_init(&io->lock, NULL);
    io->base = event_base_new();
    io->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!io->base || io->wake_fd < 0) {
        io_free(io);
        return NULL;
    }
    io->ev_wake = event_new(io->base, io->wake_fd, EV_READ | EV_PERSIST, on_wake, io);
    io->ev_drain = evtimer_new(io->base, drain_check, io);
    event_add(io->ev_wake, NULL);
    if (gw->opt.install_signals) {
        static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
        for (int i = 0; i < 3; i++) {
            io->ev_signals[i] = evsignal_new(io->base, sigs[i], on_signal, io);
            event_add(io->ev_signals[i], NULL);
        }
        signal(SIGPIPE, SIG_IGN);
    }
    return io;
}

struct event_base *io_base(gw_io_t *io)
{
    return io->base;
}

int io_run(gw_io_t *io)
{
    return event_base_dispatch(io->base) < 0 ? -EIO : 0;
}

void io_free(gw_io_t *io)
{
    if (!io)
        return;
    for (unsigned i = 0; i < CONFIG_MAX_BUSES; i++) {
        io_port_t *p = &io->ports[i];
        if (p->ev_read)
            event_free(p->ev_read);
        if (p->ev_reopen)
            event_free(p->ev_reopen);
        if (p->ev_service)
            event_free(p->ev_service);
    }
    for (int i = 0; i < 3; i++)
        if (io->ev_signals[i])
            event_free(io->ev_signals[i]);
    if (io->ev_wake)
        event_free(io->ev_wake);
    if (io->ev_drain)
        event_free(io->ev_drain);
    for (io_cmd_t *c = io->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    for (io_cmd_t *c = io->free_cells, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    if (io->wake_fd >= 0)
        close(io->wake_fd);
    if (io->base)
        event_base_free(io->base);
    pthread_mutex_destroy(&io->lock);
    free(io);
}
