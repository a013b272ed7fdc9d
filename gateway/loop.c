/*
 * gateway/loop.c -- the I/O thread: one libevent loop that owns every fd and
 * timer of the daemon, so no actor ever blocks on I/O and no fd is touched
 * by two threads.
 *
 * Other threads hand work to this thread through a command queue: each
 * command is a function to run here and a copy of its bytes, so the loop
 * knows nothing of what it runs (serial writes, TCP answers, ...). The
 * queue is a mutex-protected list (actors post a few thousand commands a
 * second at most; the lock is held for two pointer writes), and the eventfd
 * that wakes the loop is written only when a post finds the queue empty: a
 * burst of answers costs one wake-up, not one per answer. The loop drains
 * the whole list under the lock in one swap, then works without it.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct loop_cmd {
    struct loop_cmd *next;
    loop_fn fn;
    void *ctx;
    uint64_t a;
    uint32_t b;
    uint16_t len;
    uint8_t data[RTU_MAX_ADU];
} loop_cmd_t;

#define LOOP_FREE_MAX 256  /* cached command cells; more are freed */

struct gw_loop {
    gw_t *gw;
    struct event_base *base;
    int wake_fd;
    struct event *ev_wake;
    struct event *ev_host;        /* runs the actors pinned to this thread */
    actor_host_t *host;
    int timer_fd;                  /* a timerfd at the host's earliest timer (H4) */
    struct event *ev_host_timer;   /* its read event */
    uint64_t host_timer_at;        /* the deadline it is armed for; 0: none */
    pthread_t thread;             /* set by loop_run */
    _Atomic bool running;
    pthread_t own_thread;         /* loop_start_thread's */
    bool has_own_thread;
    char thread_name[16];
    unsigned priority;
    void (*on_wake)(void *ctx);
    void *on_wake_ctx;
    pthread_mutex_t lock;
    loop_cmd_t *head, *tail;      /* pending commands, under lock */
    loop_cmd_t *free_cells;       /* under lock */
    unsigned free_count;
};

static loop_cmd_t *cell_get(gw_loop_t *loop)
{
    loop_cmd_t *c;

    pthread_mutex_lock(&loop->lock);
    c = loop->free_cells;
    if (c) {
        loop->free_cells = c->next;
        loop->free_count--;
    }
    pthread_mutex_unlock(&loop->lock);
    return c ? c : malloc(sizeof *c);
}

static void cell_put(gw_loop_t *loop, loop_cmd_t *c)
{
    pthread_mutex_lock(&loop->lock);
    if (loop->free_count < LOOP_FREE_MAX) {
        c->next = loop->free_cells;
        loop->free_cells = c;
        loop->free_count++;
        c = NULL;
    }
    pthread_mutex_unlock(&loop->lock);
    free(c);
}

static void wake(gw_loop_t *loop)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the loop will wake. */
    if (write(loop->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        gw_log(loop->gw, CONFIG_LOG_ERROR, "eventfd write: %s", strerror(errno));
}

static bool on_loop_thread(const gw_loop_t *loop)
{
    return atomic_load_explicit(&loop->running, memory_order_acquire) && pthread_equal(pthread_self(), loop->thread);
}

bool loop_is_current(const gw_loop_t *loop)
{
    return on_loop_thread(loop);
}

int loop_post(gw_loop_t *loop, loop_fn fn, void *ctx, uint64_t a, uint32_t b, const void *data, size_t len)
{
    bool was_empty;

    if (len > RTU_MAX_ADU)
        return -EMSGSIZE;
    /* Already on the I/O thread (a pinned bus actor): run it now. Pinned
     * actors run only from the host event, never inside another callback,
     * so this cannot re-enter a connection's or a port's own callback. */
    if (on_loop_thread(loop)) {
        fn(ctx, a, b, data, len);
        return 0;
    }
    loop_cmd_t *c = cell_get(loop);
    if (!c)
        return -ENOMEM;
    *c = (loop_cmd_t){ .fn = fn, .ctx = ctx, .a = a, .b = b, .len = (uint16_t)len };
    if (len)
        memcpy(c->data, data, len);
    pthread_mutex_lock(&loop->lock);
    was_empty = loop->head == NULL;
    if (loop->tail)
        loop->tail->next = c;
    else
        loop->head = c;
    loop->tail = c;
    pthread_mutex_unlock(&loop->lock);
    if (was_empty)
        wake(loop);
    return 0;
}

void loop_wake(gw_loop_t *loop)
{
    wake(loop);
}

void loop_on_wake(gw_loop_t *loop, void (*fn)(void *ctx), void *ctx)
{
    loop->on_wake = fn;
    loop->on_wake_ctx = ctx;
}

/* The host's wake(): from the I/O thread itself, activate the host event
 * (it runs after the current callback, in this loop iteration, no syscall);
 * from any other thread, the eventfd. */
static void host_wake(void *ctx)
{
    gw_loop_t *loop = ctx;
    if (on_loop_thread(loop))
        event_active(loop->ev_host, EV_TIMEOUT, 0);
    else
        wake(loop);
}

/* Pinned actors run in bounded slices, so sockets and ports are served
 * between them. */
#define HOST_SLICE 64

/* The host keeps the timers its actors arm for themselves (actor/host.c,
 * H4), every delay, a fraction of a millisecond too: the loop arms one
 * timerfd, at an absolute CLOCK_MONOTONIC deadline (the host's clock), for
 * the earliest of them, so a bus's deadline and its inter-frame rest cost no
 * timer thread and no wake-up of another thread. epoll's own timeout is in
 * whole milliseconds and would stretch a rest; libevent's precise mode would
 * re-arm a timerfd on every loop iteration (two syscalls per pass, ~8 us per
 * forwarded request, docs/footprint.md). This one is re-armed only when the
 * earliest deadline changes (armed, cancelled, fired). */
static void arm_host_timer(gw_loop_t *loop)
{
    uint64_t d = actor_host_next_deadline(loop->host);
    if (d == loop->host_timer_at)
        return;   /* armed for the earliest already (or none held, none armed) */
    if (d == 0) {   /* the armed one was cancelled or sent: disarm rather than wake for nothing */
        struct itimerspec off = { { 0, 0 }, { 0, 0 } };
        (void)timerfd_settime(loop->timer_fd, 0, &off, NULL);
        loop->host_timer_at = 0;
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (d <= now) {
        event_active(loop->ev_host, EV_TIMEOUT, 0);
        d = 0;   /* due: runs now; asked again after */
    } else {
        struct itimerspec its = { .it_value = { (time_t)(d / 1000000000ull), (long)(d % 1000000000ull) } };
        if (timerfd_settime(loop->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) != 0) {
            gw_log(loop->gw, CONFIG_LOG_ERROR, "timerfd_settime: %s", strerror(errno));
            event_active(loop->ev_host, EV_TIMEOUT, 0);   /* run the host now rather than never */
            d = 0;
        }
    }
    loop->host_timer_at = d;
}

static void run_host(gw_loop_t *loop)
{
    actor_host_run(loop->host, HOST_SLICE);
    if (actor_host_pending(loop->host))
        event_active(loop->ev_host, EV_TIMEOUT, 0);
    arm_host_timer(loop);
}

static void on_host_timer(evutil_socket_t fd, short what, void *arg)
{
    gw_loop_t *loop = arg;
    uint64_t expirations;
    (void)what;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        gw_log(loop->gw, CONFIG_LOG_ERROR, "timerfd read: %s", strerror(errno));
    loop->host_timer_at = 0;
    run_host(loop);
}

static void on_host(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    run_host(arg);
}

actor_host_t *loop_host(gw_loop_t *loop)
{
    return loop->host;
}

void loop_release_host(gw_loop_t *loop)
{
    actor_host_release(loop->host);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    gw_loop_t *loop = arg;
    uint64_t count;
    loop_cmd_t *list, *next;

    (void)what;
    if (read(fd, &count, sizeof count) < 0 && errno != EAGAIN)
        gw_log(loop->gw, CONFIG_LOG_ERROR, "eventfd read: %s", strerror(errno));
    pthread_mutex_lock(&loop->lock);
    list = loop->head;
    loop->head = loop->tail = NULL;
    pthread_mutex_unlock(&loop->lock);
    for (loop_cmd_t *c = list; c; c = next) {
        next = c->next;
        c->fn(c->ctx, c->a, c->b, c->data, c->len);
        cell_put(loop, c);
    }
    run_host(loop);
    if (loop->on_wake)
        loop->on_wake(loop->on_wake_ctx);
}

gw_loop_t *loop_new(gw_t *gw)
{
    gw_loop_t *loop = calloc(1, sizeof *loop);
    if (!loop)
        return NULL;
    loop->gw = gw;
    pthread_mutex_init(&loop->lock, NULL);
    /* Millisecond timeouts (plain epoll) for the loop's own events; the
     * host's timers have their timerfd (arm_host_timer). */
    loop->base = event_base_new();
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    loop->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (!loop->base || loop->wake_fd < 0 || loop->timer_fd < 0) {
        loop_free(loop);
        return NULL;
    }
    loop->ev_wake = event_new(loop->base, loop->wake_fd, EV_READ | EV_PERSIST, on_wake, loop);
    loop->ev_host = event_new(loop->base, -1, 0, on_host, loop);
    loop->ev_host_timer = event_new(loop->base, loop->timer_fd, EV_READ | EV_PERSIST, on_host_timer, loop);
    if (!loop->ev_wake || !loop->ev_host || !loop->ev_host_timer || actor_host_create(gw->actors, host_wake, loop, &loop->host) != 0) {
        loop_free(loop);
        return NULL;
    }
    actor_host_set_timer_floor(loop->host, 0);   /* the timerfd wakes at the deadline */
    event_add(loop->ev_wake, NULL);
    event_add(loop->ev_host_timer, NULL);
    return loop;
}

struct event_base *loop_base(gw_loop_t *loop)
{
    return loop->base;
}

int loop_run(gw_loop_t *loop)
{
    loop->thread = pthread_self();
    atomic_store_explicit(&loop->running, true, memory_order_release);
    run_host(loop);   /* anything made runnable before the loop ran */
    int rc = event_base_dispatch(loop->base);
    atomic_store_explicit(&loop->running, false, memory_order_release);
    return rc < 0 ? -EIO : 0;
}

void loop_exit(gw_loop_t *loop)
{
    event_base_loopexit(loop->base, NULL);
}

/*
 * The line thread (daemon/gw.c): a loop of its own for the ports and the
 * bus actors, so that no TLS handshake, HTTP page, MQTT burst or client
 * socket of the I/O thread ever runs in front of a port read or a line
 * timer. Everything between the two goes through what was already safe
 * across threads: actor messages (requests in, the port's bytes to its
 * bus), loop_post (answers to the front ends' loop, writes to the port's),
 * atomics (metrics, driver counters) and the cache's lock.
 *
 * Real-time priority (line_thread_priority): SCHED_FIFO needs CAP_SYS_NICE
 * or an RLIMIT_RTPRIO at least that high (systemd: LimitRTPRIO=, or
 * AmbientCapabilities=CAP_SYS_NICE). Without it the thread runs at normal
 * priority and says so once: it still has the core to itself whenever the
 * I/O thread is busy, which is what removes the gateway's own load from the
 * lines; the priority only also puts it ahead of other processes.
 */
/*
 * Timer slack: a thread at normal priority has its timers (the paced read's
 * timerfd, epoll_wait's timeouts, the line's deadlines and t3.5) rounded up
 * by up to 50 us (the kernel's default slack), to batch wake-ups. A paced
 * transaction waits on two or three of them, so that slack came straight
 * onto every answer. The line thread asks for 1 ns: a line wakes a few
 * thousand times a second at most, so the batching gives nothing back worth
 * its latency. (A SCHED_FIFO thread has no slack at all.) On the 2-core
 * test VM a 1.5 ms timerfd woke 49-56 us late (median) at the default
 * slack and 47-49 us at 1 ns: there the VM's own wake-up is most of it.
 */
/* The loop's own thread: loop->priority applied to itself (0: back to the
 * normal policy), said in the log either way. */
static void apply_priority(gw_loop_t *loop, bool changed)
{
    if (!loop->priority) {
        struct sched_param sp = { .sched_priority = 0 };
        if (changed && pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp) == 0)
            gw_log(loop->gw, CONFIG_LOG_INFO, "%s: normal priority", loop->thread_name);
        return;
    }
    struct sched_param sp = { .sched_priority = (int)loop->priority };
    int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (rc != 0)
        gw_log(loop->gw, CONFIG_LOG_WARN, "%s: line_thread_priority = %u not applied (%s): it needs "
               "CAP_SYS_NICE or RLIMIT_RTPRIO >= %u; running at normal priority", loop->thread_name,
               loop->priority, strerror(rc), loop->priority);
    else
        gw_log(loop->gw, CONFIG_LOG_INFO, "%s: SCHED_FIFO priority %u", loop->thread_name, loop->priority);
}

static void *loop_thread_main(void *arg)
{
    gw_loop_t *loop = arg;

    pthread_setname_np(pthread_self(), loop->thread_name);
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    apply_priority(loop, false);
    loop_run(loop);
    return NULL;
}

static void priority_command(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_loop_t *loop = ctx;
    (void)b, (void)data, (void)len;
    loop->priority = (unsigned)a;   /* written and read on this thread only, once started */
    apply_priority(loop, true);
}

/* A reload's line_thread_priority: applied by the loop's thread to itself
 * (a command, so no other thread names it or writes loop->priority while it
 * runs). Any thread; a loop without a thread of its own has nothing to set. */
int loop_set_priority(gw_loop_t *loop, unsigned priority)
{
    if (!loop->has_own_thread)
        return 0;
    return loop_post(loop, priority_command, loop, priority, 0, NULL, 0);
}

int loop_start_thread(gw_loop_t *loop, const char *name, unsigned priority)
{
    snprintf(loop->thread_name, sizeof loop->thread_name, "%s", name);
    loop->priority = priority;
    int rc = pthread_create(&loop->own_thread, NULL, loop_thread_main, loop);
    if (rc != 0)
        return -rc;
    loop->has_own_thread = true;
    return 0;
}

static void exit_command(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    (void)a;
    (void)b;
    (void)data;
    (void)len;
    loop_exit(ctx);
}

void loop_stop_thread(gw_loop_t *loop)
{
    if (!loop || !loop->has_own_thread)
        return;
    /* A command, not event_base_loopexit from here: the base is the
     * thread's own (libevent's locking is not on). Retried while out of
     * memory: the join must not wait forever. */
    while (loop_post(loop, exit_command, loop, 0, 0, NULL, 0) != 0)
        usleep(1000);
    pthread_join(loop->own_thread, NULL);
    loop->has_own_thread = false;
}

/*
 * loop_call: the caller waits on a condition variable until the loop's own
 * thread has run fn as a command (in post order, between its events), so
 * what fn touches is the loop's alone while it runs, and what it wrote is
 * seen by the caller after (the mutex orders both). A loop without a thread
 * of its own running, or the loop's own thread calling, runs fn at once.
 * The caller must not be a thread the loop's commands wait for (none do:
 * a loop's commands take only their own loop's state and the atomics).
 */
typedef struct loop_call {
    void (*fn)(void *ctx);
    void *ctx;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    bool done;
} loop_call_t;

static void call_command(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    loop_call_t *call = ctx;
    (void)a, (void)b, (void)data, (void)len;
    call->fn(call->ctx);
    pthread_mutex_lock(&call->lock);
    call->done = true;
    pthread_cond_signal(&call->done_cv);
    pthread_mutex_unlock(&call->lock);
}

int loop_call(gw_loop_t *loop, void (*fn)(void *ctx), void *ctx)
{
    if (!loop->has_own_thread || on_loop_thread(loop)) {
        fn(ctx);
        return 0;
    }
    loop_call_t call = { .fn = fn, .ctx = ctx };
    pthread_mutex_init(&call.lock, NULL);
    pthread_cond_init(&call.done_cv, NULL);
    int rc = loop_post(loop, call_command, &call, 0, 0, NULL, 0);
    pthread_mutex_lock(&call.lock);
    while (rc == 0 && !call.done)
        pthread_cond_wait(&call.done_cv, &call.lock);
    pthread_mutex_unlock(&call.lock);
    pthread_cond_destroy(&call.done_cv);
    pthread_mutex_destroy(&call.lock);
    return rc;
}

void loop_free(gw_loop_t *loop)
{
    if (!loop)
        return;
    if (loop->ev_wake)
        event_free(loop->ev_wake);
    if (loop->ev_host)
        event_free(loop->ev_host);
    if (loop->ev_host_timer)
        event_free(loop->ev_host_timer);
    actor_host_destroy(loop->host);
    for (loop_cmd_t *c = loop->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    for (loop_cmd_t *c = loop->free_cells, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    if (loop->timer_fd >= 0)
        close(loop->timer_fd);
    if (loop->base)
        event_base_free(loop->base);
    pthread_mutex_destroy(&loop->lock);
    free(loop);
}
