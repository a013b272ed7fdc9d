/*
 * bench/bench_actors.c -- `rtugw bench actors`: nanoseconds per message in
 * the message-pairs workload, for this scheduler (actor/) with one worker and
 * with all cores, and for a baseline mailbox built the prior way.
 *
 * Workload (the prior scheduler's measurement): a parent actor spawns 2N
 * children, hands each driver its peer, fires a start gun and waits; each
 * driver ping-pongs R rounds with its peer (one round = two messages); the
 * last pair to finish tells the parent, which stops the children and,
 * when every child has sent its last word from ACTOR_STOPPED, reports.
 * The time is taken from the start gun to the last pair's completion, on
 * the parent, and divided by the 2*N*R ping-pong messages.
 *
 * Arms, back to back inside every repetition, so machine noise hits them
 * alike: lockfree with 1 worker, lockfree with W workers (default: the
 * online cores, or $RTUGW_WORKERS, or --workers), and the mutex baseline.
 * Warm-up repetitions are dropped; reported are median and p10-p90 per arm
 * and the per-repetition paired ratios (W-worker speed-up over 1 worker,
 * and baseline over lockfree). Efficiency = median speed-up / W.
 *
 * Baseline ("mutex"): what the prior scheduler did per message: a thread per
 * actor blocking on its mailbox, a recursive pthread mutex and a condition
 * variable per actor, a malloc'd message per send. It runs R/10 rounds by
 * default (--mutex-rounds), as it is two orders of magnitude slower; ns per
 * message is normalised by its own message count.
 *
 * Counters: the scheduler's counters are read before and after each arm;
 * enqueue must equal dequeue (every accepted message handed to a behaviour
 * exactly once), else the run fails with exit status 1.
 */
#include "actor/actor.h"
#include "bench/bench.h"
#include "bench/options.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M_RUN = 1, M_PEER, M_GO, M_PING, M_PONG, M_DONE, M_GONE };

typedef struct bench_options {
    unsigned pairs;
    unsigned rounds;
    unsigned mutex_rounds;
    unsigned reps;
    unsigned warmup;
    unsigned workers;
    int json;
} bench_options_t;

/* CPU time of the whole process. The arms that are not running are parked
 * or blocked, so the difference over one arm's repetition is that arm's CPU
 * cost: unlike wall time, it does not grow when other processes take the
 * cores, which makes it the load-independent companion of ns per message. */
static uint64_t cpu_now_ns(void)
{
    return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* ---- the lockfree arm: actors on actor/ ---- */

/* One cache line each: children of different pairs run on different
 * workers, and `left` is written every round. */
typedef struct child {
    _Alignas(64) actor_ref_t parent, peer;
    unsigned left;
    int driver;
} child_t;

typedef struct parent {
    unsigned pairs, rounds;
    child_t *children; /* 2 * pairs: driver 2i, ponger 2i + 1 */
    actor_ref_t *refs;
    unsigned done, gone;
    uint64_t t0, t1;
    int failed;
    sem_t *finished;
} parent_t;

static void child_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                     const void *data, size_t len)
{
    child_t *c = state;
    (void)len;
    switch (type) {
    case M_PEER:
        memcpy(&c->peer, data, sizeof c->peer);
        break;
    case M_GO:
        actor_send(sys, c->peer, M_PING, &self, sizeof self);
        break;
    case M_PING:
        actor_send(sys, c->peer, M_PONG, NULL, 0);
        break;
    case M_PONG:
        if (--c->left == 0)
            actor_send(sys, c->parent, M_DONE, NULL, 0);
        else
            actor_send(sys, c->peer, M_PING, &self, sizeof self);
        break;
    case ACTOR_STOPPED: /* the parent waits for every child to be gone */
        actor_send(sys, c->parent, M_GONE, NULL, 0);
        break;
    default:
        break;
    }
}

static void parent_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                      const void *data, size_t len)
{
    parent_t *p = state;
    (void)data;
    (void)len;
    if (type == M_RUN) {
        unsigned n = 2 * p->pairs;
        for (unsigned i = 0; i < n; i++) {
            p->children[i] = (child_t){ .parent = self, .left = p->rounds, .driver = i % 2 == 0 };
            if (actor_spawn(sys, child_fn, &p->children[i], &p->refs[i]) != 0)
                p->failed = 1;
        }
        for (unsigned i = 0; i < n; i++) /* each driver gets its peer, and back */
            if (actor_send(sys, p->refs[i], M_PEER, &p->refs[i ^ 1], sizeof(actor_ref_t)) != 0)
                p->failed = 1;
        p->t0 = bench_now_ns();
        for (unsigned i = 0; i < n; i += 2) /* the start gun */
            if (actor_send(sys, p->refs[i], M_GO, NULL, 0) != 0)
                p->failed = 1;
        if (p->failed)
            sem_post(p->finished);
    } else if (type == M_DONE) {
        if (++p->done == p->pairs) {
            p->t1 = bench_now_ns();
            for (unsigned i = 0; i < 2 * p->pairs; i++)
                actor_stop(sys, p->refs[i]);
        }
    } else if (type == M_GONE) {
        /* Every child has run its last message: the next repetition may
         * reuse their state and slots. */
        if (++p->gone == 2 * p->pairs)
            sem_post(p->finished);
    }
}

typedef struct arm_result {
    double *ns;     /* per measured repetition */
    double *cpu;    /* CPU ns per message, per measured repetition */
    uint64_t messages, enqueue, dequeue;
    uint64_t steals, parks, wakeups; /* scheduler counters over the measured reps */
    unsigned workers;
} arm_result_t;

/* One repetition on `sys`: returns ns per message, or -1. */
static double lockfree_rep(actor_system_t *sys, const bench_options_t *opt, child_t *children,
                           actor_ref_t *refs, actor_stats_t *delta, double *cpu)
{
    sem_t finished;
    parent_t p = { .pairs = opt->pairs, .rounds = opt->rounds, .children = children,
                   .refs = refs, .finished = &finished };
    actor_ref_t pref;
    actor_stats_t before, after;

    sem_init(&finished, 0, 0);
    actor_system_stats(sys, &before);
    uint64_t c0 = cpu_now_ns();
    if (actor_spawn(sys, parent_fn, &p, &pref) != 0 || actor_send(sys, pref, M_RUN, NULL, 0) != 0)
        return -1;
    while (sem_wait(&finished) != 0 && errno == EINTR)
        ;
    *cpu = (double)(cpu_now_ns() - c0) / (2.0 * opt->pairs * opt->rounds);
    actor_system_stats(sys, &after);
    actor_stop(sys, pref);
    sem_destroy(&finished);
    if (p.failed)
        return -1;
    delta->enqueue = after.enqueue - before.enqueue;
    delta->dequeue = after.dequeue - before.dequeue;
    delta->steals = after.steals - before.steals;
    delta->parks = after.parks - before.parks;
    delta->wakeups = after.wakeups - before.wakeups;
    return (double)(p.t1 - p.t0) / (2.0 * opt->pairs * opt->rounds);
}

/* ---- the baseline: a thread per actor, mutex + condvar mailbox ---- */

typedef struct mmsg {
    struct mmsg *next;
    int type;
} mmsg_t;

typedef struct mbase mbase_t;

typedef struct mactor {
    pthread_mutex_t lock; /* recursive, as the prior scheduler's */
    pthread_cond_t cond;
    mmsg_t *head, *tail;
    pthread_t thread;
    struct mactor *peer;
    unsigned left;
    int driver;
    mbase_t *base;
} mactor_t;

struct mbase {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned done;
    uint64_t messages;
};

static int msend(mactor_t *to, int type)
{
    mmsg_t *m = malloc(sizeof *m);
    if (!m)
        return -1;
    m->next = NULL;
    m->type = type;
    pthread_mutex_lock(&to->lock);
    if (to->tail)
        to->tail->next = m;
    else
        to->head = m;
    to->tail = m;
    pthread_cond_signal(&to->cond);
    pthread_mutex_unlock(&to->lock);
    return 0;
}

static void *mactor_main(void *arg)
{
    mactor_t *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->lock);
        while (!a->head)
            pthread_cond_wait(&a->cond, &a->lock);
        mmsg_t *m = a->head;
        a->head = m->next;
        if (!a->head)
            a->tail = NULL;
        pthread_mutex_unlock(&a->lock);
        int type = m->type;
        free(m);
        if (type == M_DONE) /* quit */
            return NULL;
        if (type == M_GO || (type == M_PONG && --a->left > 0)) {
            msend(a->peer, M_PING);
        } else if (type == M_PING) {
            msend(a->peer, M_PONG);
        } else if (type == M_PONG) {
            pthread_mutex_lock(&a->base->lock);
            a->base->done++;
            pthread_cond_signal(&a->base->cond);
            pthread_mutex_unlock(&a->base->lock);
        }
    }
}

static int mutex_start(mactor_t *as, unsigned n, mbase_t *base)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&base->lock, NULL);
    pthread_cond_init(&base->cond, NULL);
    for (unsigned i = 0; i < n; i++) {
        mactor_t *a = &as[i];
        *a = (mactor_t){ .peer = &as[i ^ 1], .driver = i % 2 == 0, .base = base };
        pthread_mutex_init(&a->lock, &ma);
        pthread_cond_init(&a->cond, NULL);
    }
    pthread_mutexattr_destroy(&ma);
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&as[i].thread, NULL, mactor_main, &as[i]) != 0)
            return -1;
    return 0;
}

static double mutex_rep(mactor_t *as, mbase_t *base, const bench_options_t *opt, double *cpu)
{
    unsigned n = 2 * opt->pairs;
    pthread_mutex_lock(&base->lock);
    base->done = 0;
    pthread_mutex_unlock(&base->lock);
    for (unsigned i = 0; i < n; i += 2) {
        pthread_mutex_lock(&as[i].lock);
        as[i].left = opt->mutex_rounds;
        pthread_mutex_unlock(&as[i].lock);
    }
    uint64_t t0 = bench_now_ns(), c0 = cpu_now_ns();
    for (unsigned i = 0; i < n; i += 2)
        if (msend(&as[i], M_GO) != 0)
            return -1;
    pthread_mutex_lock(&base->lock);
    while (base->done < opt->pairs)
        pthread_cond_wait(&base->cond, &base->lock);
    pthread_mutex_unlock(&base->lock);
    uint64_t t1 = bench_now_ns();
    *cpu = (double)(cpu_now_ns() - c0) / (2.0 * opt->pairs * opt->mutex_rounds);
    return (double)(t1 - t0) / (2.0 * opt->pairs * opt->mutex_rounds);
}

static void mutex_stop(mactor_t *as, unsigned n, mbase_t *base)
{
    for (unsigned i = 0; i < n; i++)
        msend(&as[i], M_DONE);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(as[i].thread, NULL);
        pthread_mutex_destroy(&as[i].lock);
        pthread_cond_destroy(&as[i].cond);
    }
    pthread_mutex_destroy(&base->lock);
    pthread_cond_destroy(&base->cond);
}

/* ---- driver ---- */

static void print_arm(const bench_options_t *opt, const char *mailbox, const arm_result_t *r,
                      unsigned rounds, int first)
{
    bench_spread_t s, cs;
    double *copy = malloc(opt->reps * sizeof *copy);
    if (!copy)
        return;
    memcpy(copy, r->ns, opt->reps * sizeof *copy);
    bench_spread(copy, opt->reps, &s);
    memcpy(copy, r->cpu, opt->reps * sizeof *copy);
    bench_spread(copy, opt->reps, &cs);
    free(copy);
    if (opt->json)
        printf("%s{\"mailbox\": \"%s\", \"workers\": %u, \"pairs\": %u, \"rounds\": %u, "
               "\"ns_per_message\": %.1f, \"ns_p10\": %.1f, \"ns_p90\": %.1f, "
               "\"cpu_ns_per_message\": %.1f, \"cpu_ns_p10\": %.1f, \"cpu_ns_p90\": %.1f, "
               "\"messages\": %llu, \"enqueue\": %llu, \"dequeue\": %llu, \"steals\": %llu, "
               "\"parks\": %llu, \"wakeups\": %llu}",
               first ? "" : ", ", mailbox, r->workers, opt->pairs, rounds, s.median, s.p10,
               s.p90, cs.median, cs.p10, cs.p90, (unsigned long long)r->messages, (unsigned long long)r->enqueue,
               (unsigned long long)r->dequeue, (unsigned long long)r->steals,
               (unsigned long long)r->parks, (unsigned long long)r->wakeups);
    else
        printf("| %s | %u | %u | %u | %.1f | %.1f | %.1f | %.1f (%.1f-%.1f) | %llu | %llu | %llu "
               "| %llu | %llu | %llu |\n", mailbox, r->workers, opt->pairs, rounds, s.median, s.p10,
               s.p90, cs.median, cs.p10, cs.p90,
               (unsigned long long)r->messages, (unsigned long long)r->enqueue,
               (unsigned long long)r->dequeue, (unsigned long long)r->steals,
               (unsigned long long)r->parks, (unsigned long long)r->wakeups);
}

static int run(const bench_options_t *opt)
{
    unsigned total = opt->warmup + opt->reps, n = 2 * opt->pairs;
    actor_system_t *one = NULL, *all = NULL;
    actor_config_t c1 = { .workers = 1, .max_actors = 2 * n + 16 };
    actor_config_t cw = { .workers = opt->workers, .max_actors = 2 * n + 16 };
    arm_result_t r1 = { 0 }, rw = { 0 }, rm = { 0 };
    double *speedup = calloc(opt->reps, sizeof(double));
    double *vs_mutex = calloc(opt->reps, sizeof(double));
    double *vs_mutex_all = calloc(opt->reps, sizeof(double));
    child_t *children = aligned_alloc(64, n * sizeof *children);
    actor_ref_t *refs = calloc(n, sizeof *refs);
    mactor_t *mas = calloc(n, sizeof *mas);
    mbase_t base = { .done = 0 };
    int rc = 1;

    double *cpu_ratio = calloc(opt->reps, sizeof(double));
    r1.cpu = calloc(opt->reps, sizeof(double));
    rw.cpu = calloc(opt->reps, sizeof(double));
    rm.cpu = calloc(opt->reps, sizeof(double));
    r1.ns = calloc(opt->reps, sizeof(double));
    rw.ns = calloc(opt->reps, sizeof(double));
    rm.ns = calloc(opt->reps, sizeof(double));
    if (!speedup || !vs_mutex || !vs_mutex_all || !children || !refs || !mas || !r1.ns ||
        !rw.ns || !rm.ns || !cpu_ratio || !r1.cpu || !rw.cpu || !rm.cpu)
        goto out;
    if (actor_system_create(&one, &c1) != 0 || actor_system_create(&all, &cw) != 0) {
        fprintf(stderr, "rtugw bench actors: cannot create the actor systems\n");
        goto out;
    }
    if (mutex_start(mas, n, &base) != 0) {
        fprintf(stderr, "rtugw bench actors: cannot start %u baseline threads\n", n);
        goto out;
    }
    r1.workers = 1;
    rw.workers = actor_system_workers(all);
    rm.workers = n; /* one thread per actor */
    for (unsigned rep = 0; rep < total; rep++) {
        actor_stats_t s1, sw;
        double ca = 0, cb = 0, cm = 0;
        double a = lockfree_rep(one, opt, children, refs, &s1, &ca);
        double b = lockfree_rep(all, opt, children, refs, &sw, &cb);
        double m = mutex_rep(mas, &base, opt, &cm);
        if (a < 0 || b < 0 || m < 0) {
            fprintf(stderr, "rtugw bench actors: a repetition failed\n");
            mutex_stop(mas, n, &base);
            goto out;
        }
        if (rep < opt->warmup)
            continue;
        unsigned k = rep - opt->warmup;
        r1.ns[k] = a;
        rw.ns[k] = b;
        rm.ns[k] = m;
        r1.cpu[k] = ca;
        rw.cpu[k] = cb;
        rm.cpu[k] = cm;
        cpu_ratio[k] = ca / cb; /* 1.0: W workers spend no more CPU per message */
        speedup[k] = a / b;
        vs_mutex[k] = m / a;
        vs_mutex_all[k] = m / b;
        r1.enqueue += s1.enqueue;
        r1.dequeue += s1.dequeue;
        rw.enqueue += sw.enqueue;
        rw.dequeue += sw.dequeue;
        r1.steals += s1.steals;
        rw.steals += sw.steals;
        r1.parks += s1.parks;
        rw.parks += sw.parks;
        r1.wakeups += s1.wakeups;
        rw.wakeups += sw.wakeups;
        r1.messages += 2ull * opt->pairs * opt->rounds;
        rw.messages += 2ull * opt->pairs * opt->rounds;
        rm.messages += 2ull * opt->pairs * opt->mutex_rounds;
        rm.enqueue += 2ull * opt->pairs * opt->mutex_rounds; /* counted by construction */
        rm.dequeue += 2ull * opt->pairs * opt->mutex_rounds;
    }
    mutex_stop(mas, n, &base);

    bench_spread_t su, vm, vma, cr;
    bench_spread(cpu_ratio, opt->reps, &cr);
    bench_spread(speedup, opt->reps, &su);
    bench_spread(vs_mutex, opt->reps, &vm);
    bench_spread(vs_mutex_all, opt->reps, &vma);
    double efficiency = su.median / rw.workers;
    if (opt->json) {
        printf("{\"arms\": [");
        print_arm(opt, "lockfree", &r1, opt->rounds, 1);
        print_arm(opt, "lockfree", &rw, opt->rounds, 0);
        print_arm(opt, "mutex", &rm, opt->mutex_rounds, 0);
        printf("], \"efficiency\": %.3f, \"speedup_median\": %.3f, \"speedup_p10\": %.3f, "
               "\"speedup_p90\": %.3f, \"mutex_over_lockfree_1\": %.1f, "
               "\"mutex_over_lockfree_1_p10\": %.1f, \"mutex_over_lockfree_1_p90\": %.1f, "
               "\"mutex_over_lockfree_all\": %.1f, \"cpu_efficiency\": %.3f, "
               "\"cpu_efficiency_p10\": %.3f, \"cpu_efficiency_p90\": %.3f, "
               "\"repetitions\": %u, \"warmup\": %u}\n",
               efficiency, su.median, su.p10, su.p90, vm.median, vm.p10, vm.p90, vma.median,
               cr.median, cr.p10, cr.p90, opt->reps, opt->warmup);
    } else {
        printf("# rtugw bench actors\n\n%u pairs; %u measured repetitions (%u warm-up dropped); "
               "arms interleaved in each repetition.\n\n"
               "| mailbox | workers | pairs | rounds | ns/msg median | p10 | p90 | CPU ns/msg "
               "median (p10-p90) | messages | enqueue | dequeue | steals | parks | wakeups |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
               opt->pairs, opt->reps, opt->warmup);
        print_arm(opt, "lockfree", &r1, opt->rounds, 1);
        print_arm(opt, "lockfree", &rw, opt->rounds, 0);
        print_arm(opt, "mutex", &rm, opt->mutex_rounds, 0);
        printf("\n| paired ratio (per repetition) | median | p10 | p90 |\n|---|---:|---:|---:|\n"
               "| speed-up %u workers over 1 | %.2f | %.2f | %.2f |\n"
               "| mutex / lockfree 1 worker | %.1f | %.1f | %.1f |\n"
               "| mutex / lockfree %u workers | %.1f | %.1f | %.1f |\n\n"
               "| CPU per message, 1 worker / %u workers | %.2f | %.2f | %.2f |\n\n"
               "efficiency (speed-up / workers): %.1f %%\n",
               rw.workers, su.median, su.p10, su.p90, vm.median, vm.p10, vm.p90, rw.workers,
               vma.median, vma.p10, vma.p90, rw.workers, cr.median, cr.p10, cr.p90,
               100.0 * efficiency);
    }
    if (r1.enqueue != r1.dequeue || rw.enqueue != rw.dequeue) {
        fprintf(stderr, "rtugw bench actors: counters disagree: enqueue %llu/%llu, dequeue "
                "%llu/%llu\n", (unsigned long long)r1.enqueue, (unsigned long long)rw.enqueue,
                (unsigned long long)r1.dequeue, (unsigned long long)rw.dequeue);
        goto out;
    }
    rc = 0;
out:
    actor_system_destroy(one);
    actor_system_destroy(all);
    free(speedup);
    free(vs_mutex);
    free(vs_mutex_all);
    free(children);
    free(refs);
    free(mas);
    free(cpu_ratio);
    free(r1.cpu);
    free(rw.cpu);
    free(rm.cpu);
    free(r1.ns);
    free(rw.ns);
    free(rm.ns);
    return rc;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench actors [--pairs N] [--rounds R] [--json] [--reps N] [--warmup N]\n"
            "                          [--workers W] [--mutex-rounds R]\n"
            "\n"
            "Message pairs: N driver/ponger pairs each ping-pong R rounds (2 messages a round);\n"
            "ns per message for the lock-free scheduler on 1 and on W workers, and for a\n"
            "mutex + condition variable mailbox (thread per actor), median and p10-p90.\n"
            "  --pairs N         pairs (default 32)\n"
            "  --rounds R        rounds per pair per repetition (default 20000)\n"
            "  --mutex-rounds R  rounds for the baseline (default rounds / 10)\n"
            "  --reps N          measured repetitions (default 11)\n"
            "  --warmup N        warm-up repetitions, not reported (default 2)\n"
            "  --workers W       workers of the multi-worker arm (default: $RTUGW_WORKERS,\n"
            "                    else the online cores)\n"
            "  --json            JSON instead of Markdown\n");
}

int bench_actors_main(int argc, char **argv)
{
    bench_options_t opt = { .pairs = 32, .rounds = 20000, .reps = 11, .warmup = 2 };
    const bench_opt_t opts[] = {
        BENCH_UINT("pairs", &opt.pairs, 1, 100000),
        BENCH_UINT("rounds", &opt.rounds, 1, 100000000),
        BENCH_UINT("mutex-rounds", &opt.mutex_rounds, 1, 100000000),
        BENCH_UINT("reps", &opt.reps, 1, 10000),
        BENCH_UINT("warmup", &opt.warmup, 0, 10000),
        BENCH_UINT("workers", &opt.workers, 1, 1024),
        BENCH_FLAG("json", &opt.json),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "actors", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (opt.mutex_rounds == 0)
        opt.mutex_rounds = opt.rounds / 10 ? opt.rounds / 10 : 1;
    return run(&opt);
}
