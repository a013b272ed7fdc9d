/*
 * drivers/dialin_hub.c -- one listening socket per listen://ADDR:PORT,
 * shared by every dial-in bus configured on it, each told apart by its
 * registration (register = ...): a fleet of DTUs dials one port and says
 * who it is in its first bytes.
 *
 * Ownership. The hubs live in a registry (driver_dialin_ports_t) that the
 * gateway creates before its buses and frees after them; a bus's driver
 * finds its port's hub there when it is created (dialin_hub_join), and the
 * last driver to leave closes the hub. A driver made without a registry
 * (`rtugw check --open`, tests) has a hub of its own. A mutex per hub (and
 * one for the registry) makes join, leave, describe and the hub's work safe
 * from any thread: the members' ports run on one loop thread, but a driver
 * is created on the I/O thread and may be freed on an actor's.
 *
 * Readiness without a loop of its own. The hub is an epoll set: the
 * listening socket, the connections still registering, and a timerfd at
 * the earliest registration deadline. Each member's driver puts that set in
 * the fd its owner polls (dialin.c), so whichever member's owner wakes
 * first does the hub's work (dialin_hub_take), all of it non-blocking; the
 * others find nothing left. A connection that registers as member M waits
 * in M's slot and rings M's bell (an eventfd also in M's fd), so M's owner
 * wakes for it even when another member's owner did the work. While every
 * member's port is in its back-off (100 ms after a hang-up) nobody looks:
 * connections wait in the backlog that long.
 *
 * Why a connection's bytes can never reach another bus's line:
 *  1. A connection is in exactly one place at a time, each move made under
 *     the hub's lock: the hub's registering list (only the hub reads it),
 *     one member's slot (nobody reads it), or one member's stream (only
 *     that member's driver reads it, and it takes it from its own slot only).
 *     It leaves the hub's epoll set before it goes to a slot.
 *  2. The hub reads a registering connection at most up to the end of the
 *     shortest registration its bytes so far still fit, so it never reads
 *     a byte past a registration: every byte after it stays in the socket,
 *     for the stream of the member it goes to. No line byte is ever held
 *     by the hub, so none can be handed to the wrong member.
 *  3. It goes to member M only when its first bytes are exactly M's
 *     registration. On a port shared by several buses, each has one and
 *     none is a prefix of another (config/dialin.c refuses it, and join()
 *     checks it again, since this argument rests on it): so when one
 *     registration is complete no other can be, nor ever will be (its
 *     first bytes already differ) -- at most one member fits. A bus with no
 *     registration is alone on its port and takes every connection.
 * Anything else (bytes that fit no registration, the peer's close, no
 * registration within the deadline) closes the connection, counted.
 *
 * Reconnects. A connection registering as M while M's slot holds an older
 * one (not yet taken) replaces it (the older closed: a DTU dials again when
 * its link died); while M's stream is up, M's read sees the waiting one and
 * hangs up, so M's owner closes the old connection as a lost port and takes
 * the new one at its reopen (dialin.c). A DTU can only take its own bus
 * back, by point 3.
 *
 * Counting a rejection: on the bus to blame -- the only bus on the port, or
 * on a shared port the one bus whose registration the bytes received so far
 * begin (a DTU that stalled halfway) -- as dialin_rejected; otherwise (a
 * registration no bus has, or silence on a shared port) as dialin_unclaimed
 * on every bus of the port: one count per port, the same on each.
 *
 * Bounds: HUB_REGISTERING connections register at once; one more takes the
 * place of the oldest (closed, counted), so strangers that connect and say
 * nothing cannot hold the way in; each has the longest connect timeout of
 * the port's buses to register.
 */
#include "drivers/dialin_hub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define HUB_REGISTERING 16
#define HUB_ACCEPTS_PER_TURN 8   /* the rest in the next turn: the listening socket stays readable */
#define HUB_ACCEPT_PAUSE_NS 100000000ull   /* out of fds: the listening socket out of the set this long */

typedef struct registering {
    int fd;
    uint64_t deadline_ns;
    uint8_t got[DRIVER_DIALIN_BYTES_MAX];
    size_t got_len;
} registering_t;

typedef struct dialin_hub dialin_hub_t;

struct dialin_member {
    dialin_hub_t *hub;
    driver_t *d;                      /* its counters */
    uint8_t reg[DRIVER_DIALIN_BYTES_MAX];
    size_t reg_len;
    unsigned timeout_ms;
    int bell;                         /* eventfd: readable while slot >= 0 */
    int slot;                         /* a connection registered as this member's, not yet taken; -1 */
    dialin_member_t *next;
};

struct dialin_hub {
    driver_dialin_ports_t *ports;     /* NULL: a hub of one driver's own */
    dialin_hub_t *next;               /* in ports */
    char addr[INET_ADDRSTRLEN];
    unsigned port;
    pthread_mutex_t lock;
    int ep, lfd, tfd;
    uint64_t accept_paused_until;     /* accept failed (out of fds): 0, or when to watch lfd again */
    registering_t reg[HUB_REGISTERING];
    unsigned n_reg;
    dialin_member_t *members;
    unsigned n_members;
};

struct driver_dialin_ports {
    pthread_mutex_t lock;
    dialin_hub_t *hubs;
};

driver_dialin_ports_t *driver_dialin_ports_new(void)
{
    driver_dialin_ports_t *p = calloc(1, sizeof *p);
    if (p)
        pthread_mutex_init(&p->lock, NULL);
    return p;
}

void driver_dialin_ports_free(driver_dialin_ports_t *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);   /* its hubs went with their last members */
}

static void hub_free(dialin_hub_t *h)
{
    for (unsigned i = 0; i < h->n_reg; i++)
        close(h->reg[i].fd);
    if (h->lfd >= 0)
        close(h->lfd);
    if (h->tfd >= 0)
        close(h->tfd);
    if (h->ep >= 0)
        close(h->ep);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static dialin_hub_t *hub_new(const driver_dialin_config_t *cfg)
{
    dialin_hub_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->lock, NULL);
    h->lfd = -1;
    h->ep = epoll_create1(EPOLL_CLOEXEC);
    h->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = h->tfd };
    if (h->ep < 0 || h->tfd < 0 || epoll_ctl(h->ep, EPOLL_CTL_ADD, h->tfd, &ev) != 0) {
        hub_free(h);
        return NULL;
    }
    snprintf(h->addr, sizeof h->addr, "%s", cfg->addr);
    h->port = cfg->port;
    return h;
}

/* a's registration is a prefix of b's (or equal): a connection's first bytes could fit both */
static bool prefix_of(const dialin_member_t *a, const uint8_t *b, size_t b_len)
{
    return a->reg_len <= b_len && memcmp(a->reg, b, a->reg_len) == 0;
}

dialin_member_t *dialin_hub_join(driver_dialin_ports_t *ports, const driver_dialin_config_t *cfg, driver_t *d,
                                 char *err, size_t errcap)
{
    dialin_member_t *m = calloc(1, sizeof *m);
    if (!m || (m->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        free(m);
        snprintf(err, errcap, "listen: out of memory");
        return NULL;
    }
    m->d = d;
    m->slot = -1;
    m->reg_len = cfg->register_len;
    memcpy(m->reg, cfg->register_bytes, cfg->register_len);
    m->timeout_ms = cfg->register_timeout_ms;

    if (ports)
        pthread_mutex_lock(&ports->lock);
    dialin_hub_t *h = NULL;
    for (h = ports ? ports->hubs : NULL; h && (h->port != cfg->port || strcmp(h->addr, cfg->addr) != 0);)
        h = h->next;
    bool fresh = !h;
    if (fresh && (h = hub_new(cfg)) != NULL && ports) {
        h->ports = ports;
        h->next = ports->hubs;
        ports->hubs = h;
    }
    const char *why = !h ? "out of memory" : NULL;
    if (h) {
        pthread_mutex_lock(&h->lock);
        for (dialin_member_t *o = h->members; o && !why; o = o->next)
            if (!o->reg_len || !m->reg_len)
                why = "a bus sharing a listening port needs a registration (register = ...)";
            else if (prefix_of(o, m->reg, m->reg_len) || prefix_of(m, o->reg, o->reg_len))
                why = "two buses on one listening port with registrations one of which begins the other";
        if (!why) {
            m->hub = h;
            m->next = h->members;
            h->members = m;
            h->n_members++;
        }
        pthread_mutex_unlock(&h->lock);
    }
    if (ports)
        pthread_mutex_unlock(&ports->lock);
    if (why) {
        snprintf(err, errcap, "listen://%s:%u: %s", cfg->addr, cfg->port, why);
        if (h && fresh && !ports)
            hub_free(h);
        close(m->bell);
        free(m);
        return NULL;
    }
    return m;
}

/* The registering connection i closed and forgotten (the table stays packed). */
static void drop_registering(dialin_hub_t *h, unsigned i)
{
    epoll_ctl(h->ep, EPOLL_CTL_DEL, h->reg[i].fd, NULL);
    close(h->reg[i].fd);
    h->reg[i] = h->reg[--h->n_reg];
}

/* Whether the bytes received so far begin (or are) m's registration. */
static bool fits(const dialin_member_t *m, const registering_t *r)
{
    return r->got_len <= m->reg_len && memcmp(m->reg, r->got, r->got_len) == 0;
}

/* A connection that did not register, closed and counted where the file's
 * comment says. */
static void reject(dialin_hub_t *h, unsigned i)
{
    const registering_t *r = &h->reg[i];
    dialin_member_t *blamed = h->n_members == 1 ? h->members : NULL;
    unsigned fitting = 0;
    for (dialin_member_t *m = h->members; h->n_members > 1 && r->got_len && m; m = m->next)
        if (fits(m, r)) {
            blamed = m;
            fitting++;
        }
    if (fitting > 1)
        blamed = NULL;
    if (blamed)
        DRIVER_COUNT(blamed->d, dialin_rejected, 1);
    else
        for (dialin_member_t *m = h->members; m; m = m->next)
            DRIVER_COUNT(m->d, dialin_unclaimed, 1);
    drop_registering(h, i);
}

/* Registering connection i registered as m's: out of the hub's set, into
 * m's slot (replacing an older one not yet taken), m's bell rung. */
static void hand_over(dialin_hub_t *h, unsigned i, dialin_member_t *m)
{
    int fd = h->reg[i].fd;
    epoll_ctl(h->ep, EPOLL_CTL_DEL, fd, NULL);
    h->reg[i] = h->reg[--h->n_reg];
    if (m->slot >= 0) {
        close(m->slot);
        DRIVER_COUNT(m->d, dialin_takeovers, 1);
    }
    m->slot = fd;
    DRIVER_COUNT(m->d, dialin_accepted, 1);
    uint64_t one = 1;
    if (write(m->bell, &one, sizeof one) < 0) {
        /* the counter is at its maximum: the bell rings already */
    }
}

/* The member whose whole registration the bytes so far are; NULL: none yet. */
static dialin_member_t *registered_as(dialin_hub_t *h, const registering_t *r)
{
    for (dialin_member_t *m = h->members; m; m = m->next)
        if (r->got_len == m->reg_len && fits(m, r))
            return m;
    return NULL;
}

/* How many bytes the connection may still be read: up to the end of the
 * shortest registration its bytes still fit (point 2); 0: it fits none. */
static size_t may_read(dialin_hub_t *h, const registering_t *r)
{
    size_t least = 0;
    for (dialin_member_t *m = h->members; m; m = m->next)
        if (fits(m, r) && m->reg_len > r->got_len && (!least || m->reg_len - r->got_len < least))
            least = m->reg_len - r->got_len;
    return least;
}

/* Reads registering connection i: 1 it left the table (handed over or
 * rejected), 0 it waits for more. */
static int read_registration(dialin_hub_t *h, unsigned i, uint64_t now)
{
    registering_t *r = &h->reg[i];
    for (;;) {
        dialin_member_t *m = registered_as(h, r);
        if (m) {
            hand_over(h, i, m);
            return 1;
        }
        size_t want = may_read(h, r);
        if (!want) {
            reject(h, i);
            return 1;
        }
        ssize_t n = recv(r->fd, r->got + r->got_len, want, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (now < r->deadline_ns)
                return 0;
            n = 0;
        }
        if (n <= 0) {
            reject(h, i);
            return 1;
        }
        r->got_len += (size_t)n;
    }
}

static void accept_all(dialin_hub_t *h, uint64_t now)
{
    unsigned timeout_ms = 0;
    for (dialin_member_t *m = h->members; m; m = m->next)
        timeout_ms = m->timeout_ms > timeout_ms ? m->timeout_ms : timeout_ms;
    if (h->accept_paused_until && now >= h->accept_paused_until) {
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = h->lfd };
        if (epoll_ctl(h->ep, EPOLL_CTL_ADD, h->lfd, &ev) == 0)
            h->accept_paused_until = 0;
    }
    for (unsigned k = 0; h->lfd >= 0 && !h->accept_paused_until && k < HUB_ACCEPTS_PER_TURN; k++) {
        int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        /* A connection that cannot be taken (out of fds) stays in the
         * backlog, and the listening socket readable: out of the set for a
         * while, so that no member's loop spins on it. */
        if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
            epoll_ctl(h->ep, EPOLL_CTL_DEL, h->lfd, NULL);
            h->accept_paused_until = now + HUB_ACCEPT_PAUSE_NS;
        }
        if (fd < 0)
            return;
        if (h->n_reg == HUB_REGISTERING) {
            unsigned oldest = 0;
            for (unsigned i = 1; i < h->n_reg; i++)
                if (h->reg[i].deadline_ns < h->reg[oldest].deadline_ns)
                    oldest = i;
            reject(h, oldest);
        }
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
        if (epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        h->reg[h->n_reg++] = (registering_t){ .fd = fd, .deadline_ns = now + timeout_ms * 1000000ull };
    }
}

/* The hub's work, under its lock: accept, read what came, expire the slow,
 * and set the timer to the next deadline. */
static void hub_work(dialin_hub_t *h)
{
    uint64_t now = driver_now_ns(), expirations, next;
    if (read(h->tfd, &expirations, sizeof expirations) < 0) {
        /* not expired: nothing to clear */
    }
    accept_all(h, now);
    for (unsigned i = 0; i < h->n_reg;)
        if (read_registration(h, i, now) == 0)
            i++;
    next = h->accept_paused_until;
    for (unsigned i = 0; i < h->n_reg; i++)
        next = !next || h->reg[i].deadline_ns < next ? h->reg[i].deadline_ns : next;
    uint64_t wait = next > now ? next - now : next ? 1 : 0;
    struct itimerspec its = { .it_value = { (time_t)(wait / 1000000000u), (long)(wait % 1000000000u) } };
    timerfd_settime(h->tfd, 0, &its, NULL);
}

int dialin_hub_take(dialin_member_t *m)
{
    dialin_hub_t *h = m->hub;
    uint64_t rung;
    pthread_mutex_lock(&h->lock);
    hub_work(h);
    int fd = m->slot;
    m->slot = -1;
    if (read(m->bell, &rung, sizeof rung) < 0) {
        /* not rung */
    }
    pthread_mutex_unlock(&h->lock);
    return fd;
}

bool dialin_hub_waiting(dialin_member_t *m)
{
    dialin_hub_t *h = m->hub;
    pthread_mutex_lock(&h->lock);
    hub_work(h);
    bool waiting = m->slot >= 0;
    pthread_mutex_unlock(&h->lock);
    return waiting;
}

int dialin_hub_listen(dialin_member_t *m, char *err, size_t errcap)
{
    dialin_hub_t *h = m->hub;
    int rc = 0;
    pthread_mutex_lock(&h->lock);
    if (h->lfd < 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)h->port) };
        int one = 1;
        inet_pton(AF_INET, h->addr, &sa.sin_addr);
        h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = h->lfd };
        if (h->lfd < 0 || setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(h->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(h->lfd, 16) != 0 ||
            epoll_ctl(h->ep, EPOLL_CTL_ADD, h->lfd, &ev) != 0) {
            rc = -errno;
            snprintf(err, errcap, "listen://%s:%u: %s", h->addr, h->port, strerror(errno));
            if (h->lfd >= 0)
                close(h->lfd);
            h->lfd = -1;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

int dialin_hub_fd(const dialin_member_t *m)
{
    return m->hub->ep;
}

int dialin_member_bell(const dialin_member_t *m)
{
    return m->bell;
}

int dialin_hub_describe(const dialin_member_t *m, char *buf, size_t cap)
{
    dialin_hub_t *h = m->hub;
    pthread_mutex_lock(&h->lock);
    unsigned n = h->n_members;
    pthread_mutex_unlock(&h->lock);
    if (n > 1)
        return snprintf(buf, cap, "listen %s:%u (shared by %u buses)", h->addr, h->port, n);
    return snprintf(buf, cap, "listen %s:%u", h->addr, h->port);
}

void dialin_hub_leave(dialin_member_t *m)
{
    if (!m)
        return;
    dialin_hub_t *h = m->hub;
    driver_dialin_ports_t *ports = h->ports;
    if (ports)
        pthread_mutex_lock(&ports->lock);
    pthread_mutex_lock(&h->lock);
    for (dialin_member_t **p = &h->members; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    bool last = --h->n_members == 0;
    pthread_mutex_unlock(&h->lock);
    if (last && ports)
        for (dialin_hub_t **p = &ports->hubs; *p; p = &(*p)->next)
            if (*p == h) {
                *p = h->next;
                break;
            }
    if (ports)
        pthread_mutex_unlock(&ports->lock);
    if (last)
        hub_free(h);
    if (m->slot >= 0)
        close(m->slot);
    close(m->bell);
    free(m);
}
