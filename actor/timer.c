/*
 * actor/timer.c -- timers: one timer thread per system with a binary
 * min-heap ordered by (deadline, arming sequence), guarded by a mutex and a
 * CLOCK_MONOTONIC condition variable. Firing is an ordinary actor_send from
 * that thread (the inject path), so timer messages obey the mailbox
 * invariants and per-sender FIFO: timers aimed at one actor arrive in
 * deadline order. The mutex is the timer API's only; the send path never
 * takes it.
 *
 * A periodic timer is re-armed at deadline + period; if the thread fell
 * behind by a whole period it skips to now + period rather than firing a
 * burst. Cancel is O(number of pending timers) (a scan), which suits the
 * gateway's tens of timers.
 */
#include "actor/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct timer {
    uint64_t id;
    uint64_t deadline;
    uint64_t seq;
    uint64_t period; /* 0: one-shot */
    actor_ref_t to;
    uint32_t type;
    size_t len;
    unsigned char data[];
} atimer_t;

struct timer_wheel {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool running, stop;
    atimer_t **heap;
    size_t n, cap;
    uint64_t next_id, next_seq;
    uint64_t firing_id;    /* the timer being sent right now, 0 if none */
    bool firing_cancelled; /* cancelled while being sent: do not re-arm */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool before(const atimer_t *a, const atimer_t *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void sift_up(timer_wheel_t *tw, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(tw->heap[i], tw->heap[p]))
            break;
        atimer_t *t = tw->heap[i];
        tw->heap[i] = tw->heap[p];
        tw->heap[p] = t;
        i = p;
    }
}

static void sift_down(timer_wheel_t *tw, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < tw->n && before(tw->heap[l], tw->heap[m]))
            m = l;
        if (r < tw->n && before(tw->heap[r], tw->heap[m]))
            m = r;
        if (m == i)
            return;
        atimer_t *t = tw->heap[i];
        tw->heap[i] = tw->heap[m];
        tw->heap[m] = t;
        i = m;
    }
}

static atimer_t *heap_remove(timer_wheel_t *tw, size_t i)
{
    atimer_t *t = tw->heap[i];
    tw->heap[i] = tw->heap[--tw->n];
    if (i < tw->n) {
        sift_down(tw, i);
        sift_up(tw, i);
    }
    return t;
}

/* Under the lock. */
static int heap_insert(timer_wheel_t *tw, atimer_t *t)
{
    if (tw->n == tw->cap) {
        size_t cap = tw->cap ? 2 * tw->cap : 16;
        atimer_t **h = realloc(tw->heap, cap * sizeof *h);
        if (!h)
            return -ENOMEM;
        tw->heap = h;
        tw->cap = cap;
    }
    t->seq = tw->next_seq++;
    tw->heap[tw->n++] = t;
    sift_up(tw, tw->n - 1);
    return 0;
}

static void *timer_main(void *arg)
{
    actor_system_t *sys = arg;
    timer_wheel_t *tw = sys->timers;

    pthread_mutex_lock(&tw->lock);
    while (!tw->stop) {
        if (tw->n == 0) {
            pthread_cond_wait(&tw->cond, &tw->lock);
            continue;
        }
        uint64_t now = mono_ns();
        atimer_t *t = tw->heap[0];
        if (t->deadline > now) {
            struct timespec ts = { (time_t)(t->deadline / 1000000000ull),
                                   (long)(t->deadline % 1000000000ull) };
            pthread_cond_timedwait(&tw->cond, &tw->lock, &ts);
            continue;
        }
        heap_remove(tw, 0);
        tw->firing_id = t->id;
        tw->firing_cancelled = false;
        pthread_mutex_unlock(&tw->lock);
        int rc = actor_send(sys, t->to, t->type, t->len ? t->data : NULL, t->len);
        pthread_mutex_lock(&tw->lock);
        tw->firing_id = 0;
        if (rc == 0 && t->period && !tw->firing_cancelled && !tw->stop) {
            t->deadline += t->period;
            if (t->deadline < now)
                t->deadline = now + t->period;
            if (heap_insert(tw, t) == 0)
                continue;
        }
        free(t);
    }
    pthread_mutex_unlock(&tw->lock);
    return NULL;
}

int timers_start(actor_system_t *sys)
{
    timer_wheel_t *tw = calloc(1, sizeof *tw);
    pthread_condattr_t ca;

    if (!tw)
        return -ENOMEM;
    pthread_mutex_init(&tw->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tw->cond, &ca);
    pthread_condattr_destroy(&ca);
    tw->next_id = 1;
    sys->timers = tw;
    int rc = sched_thread_start(&tw->thread, timer_main, sys, "rtugw-timers");
    if (rc != 0)
        return rc;
    tw->running = true;
    return 0;
}

/* Joins the thread and drops pending timers. Idempotent. The wheel stays:
 * actors still draining may arm timers (refused, -ESHUTDOWN, under its
 * lock) until the workers have stopped, and only timers_free, after them,
 * frees it. */
void timers_stop(actor_system_t *sys)
{
    timer_wheel_t *tw = sys->timers;
    if (!tw)
        return;
    pthread_mutex_lock(&tw->lock);
    bool was_stopped = tw->stop;
    tw->stop = true;
    pthread_cond_signal(&tw->cond);
    pthread_mutex_unlock(&tw->lock);
    if (tw->running && !was_stopped)
        pthread_join(tw->thread, NULL);
    pthread_mutex_lock(&tw->lock);
    for (size_t i = 0; i < tw->n; i++)
        free(tw->heap[i]);
    tw->n = 0;
    pthread_mutex_unlock(&tw->lock);
}

/* After every worker has stopped: frees the wheel. */
void timers_free(actor_system_t *sys)
{
    timer_wheel_t *tw = sys->timers;
    if (!tw)
        return;
    timers_stop(sys);
    free(tw->heap);
    pthread_cond_destroy(&tw->cond);
    pthread_mutex_destroy(&tw->lock);
    free(tw);
    sys->timers = NULL;
}

static int arm(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data, size_t len,
               uint64_t delay_ns, uint64_t period_ns, actor_timer_t *out)
{
    if (len > ACTOR_MSG_MAX)
        return -EMSGSIZE;
    if (!sys || (len && !data) || type >= ACTOR_TYPE_RESERVED || to == ACTOR_REF_NONE)
        return -EINVAL;
    int host_rc;
    if (period_ns == 0 && host_timer_arm(sys, to, type, data, len, delay_ns, out, &host_rc))
        return host_rc;   /* H4 (host.c): fired by the host thread, no timer-thread wake-up */
    timer_wheel_t *tw = sys->timers;
    if (!tw)
        return -ESHUTDOWN;
    atimer_t *t = malloc(sizeof *t + len);
    if (!t)
        return -ENOMEM;
    t->deadline = mono_ns() + delay_ns;
    t->period = period_ns;
    t->to = to;
    t->type = type;
    t->len = len;
    if (len)
        memcpy(t->data, data, len);
    pthread_mutex_lock(&tw->lock);
    if (tw->stop) {
        pthread_mutex_unlock(&tw->lock);
        free(t);
        return -ESHUTDOWN;
    }
    t->id = tw->next_id++;
    int rc = heap_insert(tw, t);
    if (rc == 0) {
        if (tw->heap[0] == t)
            pthread_cond_signal(&tw->cond);
        if (out)
            *out = t->id;
    }
    pthread_mutex_unlock(&tw->lock);
    if (rc != 0)
        free(t);
    return rc;
}

int actor_send_after(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data,
                     size_t len, uint64_t delay_ns, actor_timer_t *out)
{
    return arm(sys, to, type, data, len, delay_ns, 0, out);
}

int actor_send_every(actor_system_t *sys, actor_ref_t to, uint32_t type, const void *data,
                     size_t len, uint64_t period_ns, actor_timer_t *out)
{
    if (period_ns == 0)
        return -EINVAL;
    return arm(sys, to, type, data, len, period_ns, period_ns, out);
}

int actor_timer_cancel(actor_system_t *sys, actor_timer_t id)
{
    if (!sys || id == 0)
        return -EINVAL;
    if (id & HOST_TIMER_ID_BIT)
        return host_timer_cancel(sys, id);
    timer_wheel_t *tw = sys->timers;
    if (!tw)
        return -ENOENT;
    int rc = -ENOENT;
    pthread_mutex_lock(&tw->lock);
    for (size_t i = 0; i < tw->n; i++) {
        if (tw->heap[i]->id == id) {
            free(heap_remove(tw, i));
            rc = 0;
            break;
        }
    }
    if (rc != 0 && tw->firing_id == id) {
        tw->firing_cancelled = true;
        rc = 0;
    }
    pthread_mutex_unlock(&tw->lock);
    return rc;
}
