/*
 * bench/crossover_layers.c -- the three forms of `rtugw bench crossover`
 * (fallback only, native only, routed through the live router) and the two
 * layers they are timed in.
 *
 * Direct layer: on one thread, a batch of frames (16 distinct frames cycled)
 * per form, timed as a whole; ns per frame = batch time / frames
 * (exploration pulls included).
 *
 * Actor layer: a driver actor keeps `concurrency` tasks in flight to a pool
 * of `concurrency` parse actors (1, 2, 4); a task carries one frame and the
 * send time, the reply carries it back; per-task end-to-end time = reply
 * handled - send. Per round and form: the median over the batch's tasks.
 */
#include "actor/actor.h"
#include "bench/crossover.h"

#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const crossover_form_names[FORMS] = { "fallback", "native", "routed" };
const char *const crossover_layer_names[2] = { "direct", "actors" };
const unsigned crossover_concurrencies[CONCS] = { 1, 2, 4 };

/* ---- decode by form -------------------------------------------------------- */

rtu_status_t crossover_decode_form(int form, router_thread_t *rt, const uint8_t *adu, size_t len,
                                   rtu_envelope_t *out)
{
    switch (form) {
    case F_FALLBACK: return rtu_decode_fallback(adu, len, out);
    case F_NATIVE: return rtu_decode_native(adu, len, out);
    default: return router_decode(rt, adu, len, out);
    }
}

static unsigned run_arm(rtu_decode_fn fn, const crossover_frames_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        fn(set->adu[i % DISTINCT], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

static unsigned run_routed(router_thread_t *t, const crossover_frames_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        router_decode(t, set->adu[i % DISTINCT], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

unsigned crossover_run_batch(int form, router_thread_t *rt, const crossover_frames_t *set,
                             unsigned n)
{
    if (form == F_FALLBACK)
        return run_arm(rtu_decode_fallback, set, n);
    if (form == F_NATIVE)
        return run_arm(rtu_decode_native, set, n);
    return run_routed(rt, set, n);
}

/* ---- the actor layer ------------------------------------------------------------ */

enum { M_START = 1, M_TASK, M_REPLY };

typedef struct task_hdr {
    uint64_t t_send;
    uint32_t seq;
    uint16_t len;
    uint8_t form;
    uint8_t check;
} task_hdr_t;

typedef struct reply_msg {
    uint64_t t_send;
    uint32_t seq;
    uint32_t actor;
} reply_msg_t;

typedef struct driver_state driver_state_t;

typedef struct parse_state {
    driver_state_t *d;
    router_thread_t *rt;
    actor_ref_t driver;
    unsigned index;
    unsigned sink;
} parse_state_t;

struct driver_state {
    actor_ref_t parse[MAX_CONC];
    /* one batch, set by the main thread before M_START */
    int form, check;
    unsigned conc, tasks;
    const crossover_frames_t *set;
    const crossover_gate_input_t *inputs;
    rtu_envelope_t *check_out;
    uint64_t *lat;
    /* progress */
    unsigned issued, done;
    uint64_t t_start, t_end;
    int failed;
    sem_t fin;
};

struct crossover_actors {
    actor_system_t *sys;
    actor_ref_t driver;
    driver_state_t d;
    parse_state_t ps[MAX_CONC];
    router_t *router;
    int sem_ok;
};

static void parse_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                     const void *data, size_t len)
{
    parse_state_t *p = state;
    task_hdr_t h;
    rtu_envelope_t env;
    (void)self;
    if (type != M_TASK || len < sizeof h)
        return;
    memcpy(&h, data, sizeof h);
    const uint8_t *adu = (const uint8_t *)data + sizeof h;
    rtu_envelope_t *out = h.check ? &p->d->check_out[h.seq] : &env;
    crossover_decode_form(h.form, p->rt, adu, h.len, out);
    p->sink += out->status + out->data.regs[0];
    reply_msg_t r = { .t_send = h.t_send, .seq = h.seq, .actor = p->index };
    actor_send(sys, p->driver, M_REPLY, &r, sizeof r);
}

static void driver_finish(driver_state_t *d)
{
    d->t_end = bench_now_ns();
    sem_post(&d->fin);
}

static void driver_issue(actor_system_t *sys, driver_state_t *d, unsigned actor)
{
    struct {
        task_hdr_t h;
        uint8_t adu[RTU_MAX_ADU];
    } m;
    const uint8_t *src;
    size_t len;
    if (d->check) {
        src = d->inputs[d->issued].adu;
        len = d->inputs[d->issued].len;
    } else {
        src = d->set->adu[d->issued % DISTINCT];
        len = d->set->len;
    }
    m.h = (task_hdr_t){ .seq = d->issued, .len = (uint16_t)len, .form = (uint8_t)d->form,
                        .check = (uint8_t)d->check };
    memcpy(m.adu, src, len);
    d->issued++;
    m.h.t_send = bench_now_ns();
    if (actor_send(sys, d->parse[actor], M_TASK, &m, sizeof m.h + len) != 0) {
        d->failed = 1;
        d->issued--;
        d->tasks = d->issued; /* stop issuing */
        if (d->done == d->issued)
            driver_finish(d);
    }
}

static void driver_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                      const void *data, size_t len)
{
    driver_state_t *d = state;
    (void)self;
    if (type == M_START) {
        d->t_start = bench_now_ns();
        if (d->tasks == 0) {
            driver_finish(d);
            return;
        }
        for (unsigned i = 0; i < d->conc && d->issued < d->tasks; i++)
            driver_issue(sys, d, i);
    } else if (type == M_REPLY && len == sizeof(reply_msg_t)) {
        reply_msg_t r;
        uint64_t now = bench_now_ns();
        memcpy(&r, data, sizeof r);
        d->lat[d->done++] = now - r.t_send;
        if (d->issued < d->tasks)
            driver_issue(sys, d, r.actor);
        else if (d->done == d->tasks)
            driver_finish(d);
    }
}

static int actors_start(crossover_actors_t *L, const router_config_t *cfg, unsigned max_tasks)
{
    if (sem_init(&L->d.fin, 0, 0) != 0)
        return -1;
    L->sem_ok = 1;
    L->d.lat = calloc(max_tasks > GATE_INPUTS ? max_tasks : GATE_INPUTS, sizeof *L->d.lat);
    if (!L->d.lat || router_new(cfg, &L->router) != 0)
        return -1;
    actor_config_t ac = { 0 };
    if (actor_system_create(&L->sys, &ac) != 0)
        return -1;
    if (actor_spawn(L->sys, driver_fn, &L->d, &L->driver) != 0)
        return -1;
    for (unsigned i = 0; i < MAX_CONC; i++) {
        L->ps[i] = (parse_state_t){ .d = &L->d, .driver = L->driver, .index = i };
        /* One router handle per parse actor: an actor never runs on two
         * threads at once, and its mailbox orders one run after the last. */
        L->ps[i].rt = router_thread_new(L->router);
        if (!L->ps[i].rt || actor_spawn(L->sys, parse_fn, &L->ps[i], &L->d.parse[i]) != 0)
            return -1;
    }
    return 0;
}

void crossover_actors_stop(crossover_actors_t *L)
{
    if (!L)
        return;
    if (L->sys) {
        actor_system_shutdown(L->sys, 2000000000ull);
        actor_system_destroy(L->sys);
    }
    router_free(L->router);
    free(L->d.lat);
    if (L->sem_ok)
        sem_destroy(&L->d.fin);
    free(L);
}

int crossover_actors_start(const router_config_t *cfg, unsigned max_tasks,
                           crossover_actors_t **out)
{
    crossover_actors_t *L = calloc(1, sizeof *L);
    *out = NULL;
    if (!L || actors_start(L, cfg, max_tasks) != 0) {
        crossover_actors_stop(L);
        return -1;
    }
    *out = L;
    return 0;
}

unsigned crossover_actors_workers(const crossover_actors_t *L)
{
    return actor_system_workers(L->sys);
}

router_t *crossover_actors_router(const crossover_actors_t *L)
{
    return L->router;
}

int crossover_actors_batch(crossover_actors_t *L, int form, unsigned conc, unsigned tasks,
                           const crossover_frames_t *set, const crossover_gate_input_t *inputs,
                           rtu_envelope_t *check)
{
    driver_state_t *d = &L->d;
    d->form = form;
    d->conc = conc;
    d->tasks = tasks;
    d->set = set;
    d->inputs = inputs;
    d->check = check != NULL;
    d->check_out = check;
    d->issued = d->done = 0;
    d->failed = 0;
    if (actor_send(L->sys, L->driver, M_START, NULL, 0) != 0)
        return -1;
    while (sem_wait(&d->fin) != 0 && errno == EINTR)
        ;
    return d->failed ? -1 : 0;
}

/* ---- rounds ------------------------------------------------------------------ */

static double median_u64(uint64_t *v, size_t n)
{
    double *tmp = malloc(n * sizeof *tmp);
    bench_spread_t s;
    if (!tmp)
        return 0;
    for (size_t i = 0; i < n; i++)
        tmp[i] = (double)v[i];
    bench_spread(tmp, n, &s);
    free(tmp);
    return s.median;
}

static uint64_t bucket_pulls(router_t *r, unsigned bucket, int arm)
{
    router_report_t rep;
    if (router_report(r, &rep) != 0)
        return 0;
    return rep.bucket[bucket].pulls[arm];
}

void crossover_direct_round(crossover_row_t *row, router_t *router, router_thread_t *rt,
                            const crossover_options_t *opt, unsigned round, int measured,
                            size_t m, double eps, volatile unsigned *sink)
{
    double x[FORMS];
    unsigned bucket = router_bucket_of(router, row->bytes);
    for (unsigned j = 0; j < FORMS; j++) {
        int f = (int)((j + round + row->bytes) % FORMS);
        uint64_t p0[2] = { 0, 0 };
        if (f == F_ROUTED) {
            p0[0] = bucket_pulls(router, bucket, ROUTER_ARM_NATIVE);
            p0[1] = bucket_pulls(router, bucket, ROUTER_ARM_FALLBACK);
        }
        uint64_t t0 = bench_now_ns();
        *sink += crossover_run_batch(f, rt, row->set, opt->frames);
        x[f] = (double)(bench_now_ns() - t0) / opt->frames;
        if (f == F_ROUTED && measured) {
            row->pulls[ROUTER_ARM_NATIVE] += bucket_pulls(router, bucket, ROUTER_ARM_NATIVE) - p0[0];
            row->pulls[ROUTER_ARM_FALLBACK] +=
                bucket_pulls(router, bucket, ROUTER_ARM_FALLBACK) - p0[1];
        }
    }
    if (!measured)
        return;
    for (int f = 0; f < FORMS; f++)
        row->ns[f][m] = x[f];
    double lo = x[F_NATIVE] < x[F_FALLBACK] ? x[F_NATIVE] : x[F_FALLBACK];
    double hi = x[F_NATIVE] < x[F_FALLBACK] ? x[F_FALLBACK] : x[F_NATIVE];
    row->bound[m] = x[F_ROUTED] / (lo + eps / 2.0 * (hi - lo));
}

int crossover_actor_round(crossover_row_t *row, crossover_actors_t *L,
                          const crossover_options_t *opt, unsigned round, int measured, size_t m)
{
    unsigned bucket = router_bucket_of(L->router, row->bytes);
    for (unsigned j = 0; j < FORMS; j++) {
        int f = (int)((j + round + row->conc) % FORMS);
        uint64_t p0[2] = { 0, 0 };
        if (f == F_ROUTED) {
            p0[0] = bucket_pulls(L->router, bucket, ROUTER_ARM_NATIVE);
            p0[1] = bucket_pulls(L->router, bucket, ROUTER_ARM_FALLBACK);
        }
        if (crossover_actors_batch(L, f, row->conc, opt->tasks, row->set, NULL, NULL) != 0) {
            fprintf(stderr, "rtugw bench crossover: the actor pool refused a task\n");
            return -1;
        }
        if (!measured)
            continue;
        if (f == F_ROUTED) {
            row->pulls[ROUTER_ARM_NATIVE] +=
                bucket_pulls(L->router, bucket, ROUTER_ARM_NATIVE) - p0[0];
            row->pulls[ROUTER_ARM_FALLBACK] +=
                bucket_pulls(L->router, bucket, ROUTER_ARM_FALLBACK) - p0[1];
        }
        row->ns[f][m] = median_u64(L->d.lat, opt->tasks);
        row->thr[f][m] = (double)(L->d.t_end - L->d.t_start) / opt->tasks;
    }
    return 0;
}
