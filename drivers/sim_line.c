/*
 * drivers/sim_line.c -- the simulator serving a line: requests framed off
 * the fd, each answered by the plan drivers/sim.c makes (delay, noise, the
 * answer in one or two parts, perhaps a copy), at wire speed with --pace.
 *
 * Requests are delimited by the parser's streaming framer in REQUEST mode
 * (length rule, CRC, resynchronisation, t3.5 for functions without a length
 * rule); a damaged frame is counted and not answered.
 *
 * One request at a time, in arrival order, in both modes. By default the
 * thread sleeps through each answer's plan and requests that come meanwhile
 * wait in the line's kernel buffer: that buffer is the queue. With
 * cfg.in_order the thread keeps reading while an answer is under way and
 * keeps requests in its own FIFO of DRIVER_SIM_QUEUE, as a PLC's receive
 * buffer does: the order is the same, but requests are stamped and framed
 * when they arrive, the waiting is counted (queued, queue_max) and a full
 * queue loses requests (queue_lost) instead of growing without bound.
 */
#include "drivers/sim_internal.h"
#include "parser/rtu.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* One stretch of bytes of an answer's plan, wait_ns after the previous ended. */
typedef struct plan_step {
    const uint8_t *p;
    size_t n;
    uint64_t wait_ns;
} plan_step_t;

typedef struct sim_line {
    driver_sim_t *sim;
    int fd;
    rtu_framer_t *fr;
    rtu_frame_t queue[DRIVER_SIM_QUEUE]; /* requests not yet answered, oldest first */
    unsigned q_head, q_len;
    bool answering;            /* a plan is under way */
    driver_sim_answer_t a;     /* its answer; the steps point into it */
    plan_step_t step[4];       /* noise, first part, second part, copy */
    unsigned n_steps, next;
    uint64_t prev_end_ns;      /* the request's time, then the end of each step */
    bool told_mismatch;        /* check_line: the first master not heard was named on cfg.notes */
} sim_line_t;

/* ---- writing ------------------------------------------------------------------------ */

/* Waits until the stop fd fires or `until_ns` passes. 1 when stopped. */
static int wait_until(driver_sim_t *sim, uint64_t until_ns)
{
    for (;;) {
        uint64_t now = driver_now_ns();
        if (now >= until_ns)
            return 0;
        uint64_t left = until_ns - now;
        struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
        struct pollfd p = { sim->stop_fd, POLLIN, 0 };
        int rc = ppoll(&p, 1, &ts, NULL);
        if (rc > 0)
            return 1;
    }
}

/* Writes everything, waiting for POLLOUT; -errno on failure or stop. */
static int write_all(driver_sim_t *sim, int fd, const uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        struct pollfd p[2] = { { fd, POLLOUT, 0 }, { sim->stop_fd, POLLIN, 0 } };
        int rc = poll(p, 2, 1000);
        if (rc == 0)
            return -ETIMEDOUT; /* nobody reads: drop the answer */
        if (p[1].revents)
            return -ECANCELED;
        if (p[0].revents & (POLLHUP | POLLERR))
            return -ENOTCONN;
    }
    return 0;
}

/* At wire speed: byte i leaves no earlier than start + i * char time, and the
 * call returns no earlier than start + len * char time (the last stop bit). */
static int write_paced(driver_sim_t *sim, int fd, const uint8_t *buf, size_t len)
{
    if (!sim->cfg.pace)
        return write_all(sim, fd, buf, len);
    uint64_t char_ns = (uint64_t)sim->cfg.char_bits * 1000000000ull / sim->cfg.baud;
    uint64_t start = driver_now_ns();
    size_t sent = 0;
    while (sent < len) {
        uint64_t now = driver_now_ns();
        size_t due = (size_t)((now - start) / char_ns) + 1;
        if (due > len)
            due = len;
        if (due > sent) {
            int rc = write_all(sim, fd, buf + sent, due - sent);
            if (rc)
                return rc;
            sent = due;
        }
        if (sent < len && wait_until(sim, start + sent * char_ns))
            return -ECANCELED;
    }
    if (wait_until(sim, start + len * char_ns))
        return -ECANCELED;
    return 0;
}

static void capture(driver_sim_t *sim, const uint8_t *p, size_t n)
{
    if (sim->capture && n)
        (void)driver_capture_write(sim->capture, 0, p, n);
}


/* The plan as steps in line order (see driver_sim_answer_t). */
static void plan_start(sim_line_t *l, uint64_t t_req)
{
    const driver_sim_answer_t *a = &l->a;
    unsigned k = 0;
    uint64_t wait = a->delay_ns;
    if (a->noise_len) {
        l->step[k++] = (plan_step_t){ a->noise, a->noise_len, wait };
        wait = a->noise_gap_ns;
    }
    if (a->len) {
        size_t first = a->split_at && a->split_at < a->len ? a->split_at : a->len;
        l->step[k++] = (plan_step_t){ a->adu, first, wait };
        if (first < a->len)
            l->step[k++] = (plan_step_t){ a->adu + first, a->len - first, a->split_gap_ns };
        if (a->twice)
            l->step[k++] = (plan_step_t){ a->adu, a->len, a->twice_gap_ns };
    }
    l->n_steps = k;
    l->next = 0;
    l->prev_end_ns = t_req;
    l->answering = k > 0;
}

static uint64_t step_due(const sim_line_t *l)
{
    return l->prev_end_ns + l->step[l->next].wait_ns;
}

/* Writes the next step. A line nobody reads drops the rest of the answer. */
static int step_write(sim_line_t *l)
{
    const plan_step_t *s = &l->step[l->next];
    capture(l->sim, s->p, s->n);
    int rc = write_paced(l->sim, l->fd, s->p, s->n);
    l->prev_end_ns = driver_now_ns();
    if (++l->next == l->n_steps || rc == -ETIMEDOUT) {
        l->answering = false;
        rc = rc == -ETIMEDOUT ? 0 : rc;
    }
    return rc;
}

/* The default: the whole plan now, sleeping through its gaps. */
static int answer_blocking(sim_line_t *l)
{
    int rc = 0;
    while (rc == 0 && l->answering)
        rc = wait_until(l->sim, step_due(l)) ? -ECANCELED : step_write(l);
    return rc;
}

/* ---- requests ---------------------------------------------------------------------------- */

static void count(driver_sim_t *sim, uint64_t *counter)
{
    pthread_mutex_lock(&sim->lock);
    (*counter)++;
    pthread_mutex_unlock(&sim->lock);
}

/* In order: a request just queued waits if an answer is under way or others
 * are ahead of it; how many wait now, the one about to be served aside. */
static void note_waiting(sim_line_t *l)
{
    unsigned waiting = l->q_len - (l->answering ? 0 : 1);
    if (!waiting)
        return;
    driver_sim_t *sim = l->sim;
    pthread_mutex_lock(&sim->lock);
    sim->stats.queued++;
    if (waiting > sim->stats.queue_max)
        sim->stats.queue_max = waiting;
    pthread_mutex_unlock(&sim->lock);
}

/* Takes what the framer has into the queue. By default only while there is
 * room (the framer keeps the rest, as the kernel did); in order, a request
 * that finds the queue full is lost, as in a PLC whose buffer is full. */
static void collect(sim_line_t *l)
{
    driver_sim_t *sim = l->sim;
    rtu_framer_stats_t fs;
    rtu_framer_get_stats(l->fr, &fs);
    pthread_mutex_lock(&sim->lock);
    sim->stats.noise_in = sim->noise_base + fs.noise_bytes;
    pthread_mutex_unlock(&sim->lock);
    rtu_frame_t *f;
    while (sim->cfg.in_order || l->q_len < DRIVER_SIM_QUEUE) {
        rtu_frame_t spare;
        bool full = l->q_len == DRIVER_SIM_QUEUE;
        f = full ? &spare : &l->queue[(l->q_head + l->q_len) % DRIVER_SIM_QUEUE];
        if (rtu_framer_next(l->fr, f) != 1)
            break;
        capture(sim, f->adu, f->len);
        if (!f->crc_ok) {
            count(sim, &sim->stats.bad_crc);
            continue;
        }
        if (full) {
            count(sim, &sim->stats.queue_lost);
            continue;
        }
        l->q_len++;
        if (sim->cfg.in_order)
            note_waiting(l);
    }
}

/*
 * Answers what is queued, oldest first, as far as it can now: by default to
 * the end (the thread sleeps through each plan), in order up to the first
 * step not yet due. 0, 1 when stopped, or DRIVER_HANGUP.
 */
static int progress(sim_line_t *l)
{
    for (;;) {
        collect(l);
        if (!l->answering) {
            if (!l->q_len)
                return 0;
            const rtu_frame_t *f = &l->queue[l->q_head];
            uint64_t now = driver_now_ns();
            if (driver_sim_handle(l->sim, f->adu, f->len, now, &l->a))
                plan_start(l, now);
            l->q_head = (l->q_head + 1) % DRIVER_SIM_QUEUE;
            l->q_len--;
            continue;
        }
        if (l->sim->cfg.in_order && driver_now_ns() < step_due(l))
            return 0;
        int rc = l->sim->cfg.in_order ? step_write(l) : answer_blocking(l);
        if (rc == -ECANCELED)
            return 1;
        if (rc == -ENOTCONN)
            return DRIVER_HANGUP;
    }
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int ms_until(uint64_t due)
{
    uint64_t now = driver_now_ns();
    return now >= due ? 0 : (int)((due - now + 999999) / 1000000);
}

/* check_line: whether the master set the pty to this slave's speed and
 * format. A pty carries bytes whatever either end asked for, so without this
 * a scan would find the slave at every speed; a real UART at another speed
 * or parity sees framing and parity errors, never a good frame, and the
 * slave stays silent: dropping the bytes is what the master observes. The
 * settings are read per chunk, since a scanning master changes them. */
static bool line_matches(sim_line_t *l)
{
    const driver_sim_config_t *c = &l->sim->cfg;
    unsigned baud, stop;
    char parity;
    if (driver_pty_peer_format(l->fd, &baud, &parity, &stop) != 0)
        return true; /* not a pty: the port's own UART does the checking */
    bool same = baud == c->baud && parity == c->parity && stop == c->stop_bits;
    /* once: a master that is neither rtugw nor libmodbus (mbpoll) cannot
     * declare a parity on a pty (pyserial, so pymodbus, clears INPCK), so an
     * 8E1 one looks 8N1 here; say so rather than leave its user with timeouts
     * and no reason */
    if (!same && !l->told_mismatch && c->notes) {
        l->told_mismatch = true;
        fprintf(c->notes, "rtugw sim: a master at %u 8%c%u is not heard: this line is %u 8%c%u (--pace models "
                "the line's speed and format; on a pty a master other than rtugw or libmodbus is seen as parity none: "
                "give the simulator --format 8N1 for it, or leave out --pace)\n",
                baud, parity, stop, c->baud, c->parity, c->stop_bits);
        fflush(c->notes);
    }
    return same;
}

/* Reads what the line has. 0, or DRIVER_HANGUP / -errno. */
static int line_read(sim_line_t *l, uint64_t now, uint64_t *idle_due, uint64_t quiet)
{
    uint8_t buf[RTU_MAX_ADU];
    ssize_t n = read(l->fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && (errno == EIO || errno == ENXIO || errno == ENODEV)))
        return DRIVER_HANGUP;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        return -errno;
    if (n > 0 && l->sim->cfg.check_line && !line_matches(l)) {
        driver_sim_t *sim = l->sim;
        pthread_mutex_lock(&sim->lock);
        sim->stats.line_mismatch += (uint64_t)n;
        pthread_mutex_unlock(&sim->lock);
        return 0;
    }
    if (n > 0) {
        rtu_framer_feed(l->fr, buf, (size_t)n, now);
        *idle_due = now + quiet;
    }
    return 0;
}

static int serve_loop(sim_line_t *l)
{
    driver_sim_t *sim = l->sim;
    /* A pseudo-terminal delivers in bursts whatever the baud: tell the framer
     * the line is quiet only after t3.5 and at least 2 ms. */
    uint64_t quiet = rtu_t35_ns(sim->cfg.baud, sim->cfg.char_bits);
    if (quiet < 2000000ull)
        quiet = 2000000ull;
    uint64_t idle_due = 0; /* 0: nothing waits for silence */
    for (;;) {
        int timeout = idle_due ? ms_until(idle_due) : -1;
        if (l->answering) { /* in order: the next step's time */
            int t = ms_until(step_due(l));
            timeout = timeout < 0 || t < timeout ? t : timeout;
        }
        struct pollfd p[2] = { { l->fd, POLLIN, 0 }, { sim->stop_fd, POLLIN, 0 } };
        int rc = poll(p, 2, timeout);
        if (rc < 0 && errno != EINTR)
            return -errno;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            (void)!read(sim->stop_fd, &v, sizeof v);
            return 0;
        }
        uint64_t now = driver_now_ns();
        if (rc > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            int r = line_read(l, now, &idle_due, quiet);
            if (r)
                return r;
        } else if (idle_due && now >= idle_due) {
            rtu_framer_idle(l->fr, now);
            idle_due = 0;
        }
        int d = progress(l);
        if (d == 1)
            return 0; /* stopped while answering */
        if (d < 0)
            return d;
        if (idle_due && rtu_framer_settled(l->fr))
            idle_due = 0; /* a request framed by its length: no silence to wait for */
    }
}

int driver_sim_serve(driver_sim_t *sim, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    rtu_framer_config_t fc = { .baud = sim->cfg.baud, .char_bits = sim->cfg.char_bits,
                               .dir = RTU_DIR_REQUEST };
    sim_line_t *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->sim = sim;
    l->fd = fd;
    l->fr = rtu_framer_new(&fc);
    if (!l->fr) {
        free(l);
        return -ENOMEM;
    }
    pthread_mutex_lock(&sim->lock);
    sim->noise_base = sim->stats.noise_in; /* a new framer counts from 0 */
    pthread_mutex_unlock(&sim->lock);
    int result = serve_loop(l);
    rtu_framer_free(l->fr);
    free(l);
    return result;
}

static void *serve_thread(void *arg)
{
    driver_sim_t *sim = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sim->thread_rc = driver_sim_serve(sim, sim->thread_fd);
    return NULL;
}

int driver_sim_start(driver_sim_t *sim, int fd)
{
    if (sim->thread_running)
        return -EBUSY;
    sim->thread_fd = fd;
    int rc = pthread_create(&sim->thread, NULL, serve_thread, sim);
    if (rc)
        return -rc;
    pthread_setname_np(sim->thread, "rtugw-sim");
    sim->thread_running = true;
    return 0;
}

void driver_sim_request_stop(driver_sim_t *sim)
{
    uint64_t one = 1;
    (void)!write(sim->stop_fd, &one, sizeof one);
}

void driver_sim_stop(driver_sim_t *sim)
{
    if (!sim->thread_running)
        return;
    driver_sim_request_stop(sim);
    pthread_join(sim->thread, NULL);
    sim->thread_running = false;
    uint64_t v;
    (void)!read(sim->stop_fd, &v, sizeof v); /* serve may have returned before reading it */
}

/* ---- pseudo-terminals -------------------------------------------------------------------- */

int driver_pty_open(int *master, int *slave, char *path, size_t pathcap)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -errno;
    char name[128];
    if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, sizeof name) != 0) {
        int e = errno;
        close(m);
        return -e;
    }
    int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0) {
        int e = errno;
        close(m);
        return -e;
    }
    struct termios t;
    if (tcgetattr(s, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(s, TCSANOW, &t);
    }
    if (tcgetattr(m, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(m, TCSANOW, &t);
    }
    if (path && pathcap)
        snprintf(path, pathcap, "%s", name);
    *master = m;
    *slave = s;
    return 0;
}
