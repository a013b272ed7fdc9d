/*
 * gateway/poller.c -- the poller actor: poll groups (raw ranges) and tags
 * become reads on periodic timers; each answer goes to the subscribers gw.c
 * gave it (gw_poll_subscriber_t: the register cache by group, the tag
 * values, MQTT), whom it does not name.
 *
 * One planner plans both (tags/, tags_plan_build): by device, table and
 * interval, the fewest reads within the device's limits (max_read_registers,
 * max_read_bits) that read over no hole longer than max_gap. A group and a
 * tag on the same device, table and interval can share a read. Each group
 * keeps its own cache entry, cut from its read's answer.
 *
 * A read that spans holes may get exception 02 from a device that has no
 * registers there: tags_plan_split then remembers where to cut, the plan is
 * built again (a new generation: the old timers are cancelled, ticks and
 * answers of the old plan are ignored), and the next cycle reads good data.
 * Each split is counted (/metrics) and logged.
 *
 * The reads' first polls are spread over their interval (at most 1 s), not
 * all sent at once: 150 reads at the same instant would overflow the bus
 * queue (exception 06) every cycle, at the same phase.
 *
 * Where the buses run on the I/O thread (the default), the poller does too
 * (pinned to its host, actor/host.c): every message it sends or gets is the
 * bus's or its own timer's, so a poll costs no worker wake-up on the tick and
 * none on the answer, and its ticks are one-shot timers it arms for itself
 * (H4: kept by the host, no timer thread). Its work per answer is bounded: at
 * most 125 registers or 2000 bits cut into groups and tags.
 *
 * A read whose previous request has not been answered when its timer fires
 * skips that round (counted as an overrun on each of its groups; its tags
 * age, and turn stale past twice their interval) rather than queueing a
 * second copy: a slow slave gets fewer polls, never a growing backlog.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum poller_msg { POLLER_MSG_TICK = 1, POLLER_MSG_ANSWER, POLLER_MSG_NOW };

/* A tick names its plan's generation: ticks of a plan replaced are ignored,
 * and are not re-armed, so a replaced plan's timers end by themselves. Each
 * tick arms the next, one period after its own due time (start: the first,
 * due when it arrives), so the ticks do not drift with the time it took to
 * run them; one that finds itself a whole period late skips ahead rather
 * than firing a burst. */
typedef struct poll_tick {
    uint64_t due;          /* CLOCK_MONOTONIC ns this tick was due */
    uint32_t generation, read, start;
} poll_tick_t;

/* An answer on its way from a bus to the poller actor. */
typedef struct poll_answer {
    uint64_t t_req_ns;     /* when the read was submitted */
    uint32_t bus;          /* the bus it went to: its place there is free again */
    uint32_t generation;
    uint32_t seq;          /* the read's index */
    uint16_t pdu_len;
    uint8_t pdu[RTU_MAX_PDU];
} poll_answer_t;

typedef struct poll_read {
    unsigned device;       /* index into cfg->devices */
    bool outstanding;
    bool on_demand;        /* the outstanding read was asked out of its rhythm (poller_poll_tag_now) */
    bool waiting;          /* due, and waiting for a place on its bus (bus_wait_head's list) */
    unsigned next_waiting; /* the next read waiting on the same bus, or NO_READ */
    uint64_t next_due;     /* CLOCK_MONOTONIC ns of its next tick; 0: not armed yet */
} poll_read_t;

#define NO_READ UINT_MAX

struct gw_poller {
    line_origin_t origin;    /* first: the answers' way back */
    gw_t *gw;
    actor_ref_t self;
    tags_planner_t *planner;
    tags_group_t *groups;  /* the config's poll groups; id = index */
    char (*group_device)[CONFIG_NAME_MAX];   /* groups[i].device points here: the poller's own copy,
                                                since a reload frees the devices' table (issue 41) */
    tags_plan_t *plan;
    poll_read_t *reads;
    unsigned n_reads;
    uint32_t generation;
    atomic_uint *group_read;        /* per group: its read (read by HTTP) */
    unsigned n_groups;              /* group_read's length: cfg->poll_count when it was set up */
    atomic_uint read_count;
    atomic_uint_fast64_t splits;
    gw_poll_subscriber_t subs[GW_POLL_SUBSCRIBERS_MAX];
    unsigned n_subs;
    /*
     * Back-pressure on the poller's own reads: a bus takes at most half its
     * queue_depth of them at once, and a read due beyond that waits here, in
     * the order it fell due, for one of them to be answered. Why: the bus
     * queue refuses what it cannot hold with exception 06, and at start (or
     * on a slow or loaded line) a large plan falls due faster than the line
     * answers; those reads would come back 06, their tags bad for a whole
     * interval, though nothing is wrong but the gateway's own haste. The
     * other half of the queue stays for the front ends' clients. Counted per
     * bus by the answers that come back, whatever plan they were of.
     */
    unsigned n_buses;               /* CONFIG_MAX_BUSES (poller_new says why) */
    unsigned *bus_outstanding;      /* per bus: reads submitted and not answered */
    unsigned *bus_wait_head, *bus_wait_tail;   /* per bus: reads waiting (NO_READ: none) */
    /*
     * A bus's polling paused (a scan from the API with pause_polling,
     * gateway/scan.c): its reads' ticks go on, each one skipped at
     * poll_once, so the plan keeps its phase and the polls resume at their
     * next tick when the pause ends, with nothing queued meanwhile. Any
     * thread sets it; bus_reads (how many of the plan's reads poll the bus,
     * set at each plan) tells a scan whether the bus is polled at all.
     */
    atomic_bool *bus_paused;
    atomic_uint *bus_reads;
};

void poller_pause_bus(gw_poller_t *p, unsigned bus, bool paused)
{
    if (p && bus < p->n_buses)
        atomic_store(&p->bus_paused[bus], paused);
}

unsigned poller_bus_reads(const gw_poller_t *p, unsigned bus)
{
    return p && bus < p->n_buses ? atomic_load(&p->bus_reads[bus]) : 0;
}

unsigned poller_read_of(const gw_poller_t *p, unsigned group)
{
    return p && group < p->n_groups ? atomic_load(&p->group_read[group]) : 0;
}

unsigned poller_read_count(const gw_poller_t *p)
{
    return p ? atomic_load(&p->read_count) : 0;
}

uint64_t poller_splits(const gw_poller_t *p)
{
    return p ? gw_read(&p->splits) : 0;
}

/* ---- the plan ---------------------------------------------------------------- */

static void forget_waiting(gw_poller_t *p)
{
    for (unsigned b = 0; b <= p->n_buses && p->bus_wait_head; b++)
        p->bus_wait_head[b] = p->bus_wait_tail[b] = NO_READ;
}

static int device_index(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (strcmp(cfg->devices[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The config's poll groups as planner items, and where each is read (HTTP). */
static int setup_groups(gw_poller_t *p, char *err, size_t errcap)
{
    const config_t *cfg = p->gw->cfg;
    tags_group_t *groups = calloc(cfg->poll_count + 1, sizeof *groups);
    atomic_uint *group_read = calloc(cfg->poll_count + 1, sizeof *group_read);
    char (*group_device)[CONFIG_NAME_MAX] = calloc(cfg->poll_count + 1, sizeof *group_device);
    if (!groups || !group_read || !group_device) {
        free(groups);
        free((void *)group_read);
        free(group_device);
        snprintf(err, errcap, "poller: out of memory");
        return -1;
    }
    for (unsigned i = 0; i < cfg->poll_count; i++) {
        const config_poll_t *g = &cfg->polls[i];
        snprintf(group_device[i], sizeof group_device[i], "%s", cfg->devices[g->device].name);
        groups[i] = (tags_group_t){ .device = group_device[i],
                                    .area = (tags_area_t)(g->function - 1), .address = g->address,
                                    .count = g->count, .interval_ms = g->interval_ms, .id = i };
    }
    free(p->groups);
    free((void *)p->group_read);
    free(p->group_device);
    p->groups = groups;
    p->group_read = group_read;
    p->group_device = group_device;
    p->n_groups = cfg->poll_count;
    return 0;
}

/* Every device's limits into the planner (again after a reload: a name
 * already there gets its new limits). */
static int set_limits(gw_poller_t *p, char *err, size_t errcap)
{
    const config_t *cfg = p->gw->cfg;
    for (unsigned i = 0; i < cfg->device_count; i++) {
        const config_device_t *d = &cfg->devices[i];
        tags_limits_t lim = { d->max_read_registers, d->max_read_bits, d->max_gap };
        char msg[256];
        if (tags_planner_set_limits(p->planner, d->name, &lim, msg, sizeof msg) < 0) {
            snprintf(err, errcap, "poller: [device %s]: %s", d->name, msg);
            return -1;
        }
    }
    return 0;
}

/* The planner with every device's limits, and the groups as planner items. */
static int planner_setup(gw_poller_t *p, char *err, size_t errcap)
{
    p->planner = tags_planner_new(NULL);
    if (!p->planner) {
        snprintf(err, errcap, "poller: out of memory");
        return -1;
    }
    return set_limits(p, err, errcap) == 0 ? setup_groups(p, err, errcap) : -1;
}

/* The old plan's read that reads what new read r reads, or -1. */
static int same_read(const tags_plan_t *old, unsigned n_old, const tags_read_t *r)
{
    for (unsigned i = 0; old && i < n_old; i++) {
        const tags_read_t *o = tags_plan_read(old, i);
        if (o->function == r->function && o->address == r->address && o->count == r->count &&
            o->interval_ms == r->interval_ms && strcmp(o->device, r->device) == 0)
            return (int)i;
    }
    return -1;
}

/* Plans the groups and tags (again) and starts a timer per read. A read the
 * plan before had too (a reload that added a tag elsewhere) keeps its phase:
 * its first tick is when its next one was due, so its tags do not go stale
 * for a re-spread; a new read is spread as at start. */
static int replan(gw_poller_t *p, char *err, size_t errcap)
{
    gw_t *gw = p->gw;
    tags_plan_t *plan;
    char msg[320];

    tags_table_t *t = gw_tags_lock(gw->tags);
    int rc = tags_plan_build(p->planner, t, p->groups, p->n_groups, &plan, msg, sizeof msg);
    gw_tags_unlock(gw->tags);
    size_t n = rc == 0 ? tags_plan_read_count(plan) : 0;
    poll_read_t *reads = rc == 0 ? calloc(n + 1, sizeof *reads) : NULL;
    if (!reads) {
        snprintf(err, errcap, "poller: %s", rc < 0 ? msg : "out of memory");
        tags_plan_free(rc == 0 ? plan : NULL);
        return -1;
    }
    tags_plan_t *old = p->plan;
    poll_read_t *old_reads = p->reads;
    unsigned n_old = p->n_reads;
    uint64_t now = gw_now_ns();
    if ((uint64_t)n_old * n > 4000000u)
        n_old = 0;   /* the matching is quadratic: past ~2,000 reads each, spread as at start */
    p->plan = plan;
    p->reads = reads;
    forget_waiting(p);   /* they named reads of the old plan; the new one's ticks are armed below */
    p->n_reads = (unsigned)n;
    p->generation++;
    unsigned *per_bus = calloc(p->n_buses + 1, sizeof *per_bus);
    for (unsigned r = 0; r < p->n_reads; r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        size_t nm;
        const tags_member_t *m = tags_plan_members(plan, r, &nm);
        reads[r].device = (unsigned)device_index(gw->cfg, read->device);
        for (size_t k = 0; k < nm; k++)
            if (m[k].is_group)
                atomic_store(&p->group_read[m[k].index], r);
        if (gw->cfg->buses[gw->cfg->devices[reads[r].device].bus].listen)
            continue;   /* a listen-only bus: its tags take what the line's master reads */
        if (per_bus && gw->cfg->devices[reads[r].device].bus < p->n_buses)
            per_bus[gw->cfg->devices[reads[r].device].bus]++;
        int was = same_read(old, n_old, read);
        uint64_t due = was >= 0 ? old_reads[was].next_due : 0;
        poll_tick_t tick = { due, p->generation, r, due ? 0 : 1 };
        uint64_t spread = (read->interval_ms < 1000 ? read->interval_ms : 1000) * 1000000ull;
        reads[r].next_due = due;
        actor_send_after(gw->actors, p->self, POLLER_MSG_TICK, &tick, sizeof tick,
                         due ? (due > now ? due - now : 0) : spread * r / n, NULL);
    }
    tags_plan_free(old);
    free(old_reads);
    for (unsigned b = 0; b < p->n_buses; b++)
        atomic_store(&p->bus_reads[b], per_bus ? per_bus[b] : p->n_reads);   /* no memory: say polled */
    free(per_bus);
    atomic_store(&p->read_count, p->n_reads);
    return 0;
}

int poller_replan(gw_poller_t *p, bool groups_changed, char *err, size_t errcap)
{
    if (set_limits(p, err, errcap) == 0 && (!groups_changed || setup_groups(p, err, errcap) == 0) &&
        replan(p, err, errcap) == 0)
        return 0;
    /* The old plan names indices of the table replaced: it must not run on. */
    tags_plan_free(p->plan);
    free(p->reads);
    p->plan = NULL;
    p->reads = NULL;
    p->n_reads = 0;
    forget_waiting(p);
    p->generation++;
    for (unsigned b = 0; b < p->n_buses; b++)
        atomic_store(&p->bus_reads[b], 0);
    atomic_store(&p->read_count, 0);
    return -1;
}

/* ---- polls and answers -------------------------------------------------------------- */

/* How many of the poller's reads a bus takes at once: half its queue. */
static unsigned bus_places(const gw_t *gw, unsigned bus)
{
    unsigned depth = gw->cfg->buses[bus].queue_depth;
    return depth / 2 ? depth / 2 : 1;
}

static void poll_once(gw_poller_t *p, unsigned ri)
{
    gw_t *gw = p->gw;
    poll_read_t *r = &p->reads[ri];
    const config_device_t *dev = &gw->cfg->devices[r->device];

    if (r->outstanding) {
        for (unsigned k = 0; k < p->n_subs; k++)
            if (p->subs[k].overrun)
                p->subs[k].overrun(p->subs[k].ctx, p->plan, ri);
        return;
    }
    if (r->waiting)
        return;   /* due again while still waiting for a place: it goes once, when it has one */
    unsigned bus = dev->bus;
    if (bus < p->n_buses && atomic_load(&p->bus_paused[bus]))
        return;   /* a scan has the bus: this round is skipped, the next tick comes as planned */
    if (bus < p->n_buses && p->bus_outstanding[bus] >= bus_places(gw, bus)) {
        r->waiting = true;
        r->next_waiting = NO_READ;
        if (p->bus_wait_tail[bus] == NO_READ)
            p->bus_wait_head[bus] = ri;
        else
            p->reads[p->bus_wait_tail[bus]].next_waiting = ri;
        p->bus_wait_tail[bus] = ri;
        return;
    }
    line_request_t q = { .origin = &p->origin, .slave = (uint8_t)dev->slave, .pdu_len = 5, .background = 1,
                       .seq = ri, .conn_id = p->generation, .t_accept_ns = gw_now_ns(),
                       .bus = (uint8_t)dev->bus };
    tags_read_pdu(tags_plan_read(p->plan, ri), q.pdu);
    if (gw_submit(gw, &q) == 0) {
        r->outstanding = true;   /* else it is read again at its next tick */
        if (bus < p->n_buses)
            p->bus_outstanding[bus]++;
    }
}

/* A place on `bus` is free: the read waiting longest there goes. */
static void bus_place_freed(gw_poller_t *p, unsigned bus)
{
    if (bus >= p->n_buses)
        return;
    if (p->bus_outstanding[bus])
        p->bus_outstanding[bus]--;
    unsigned ri = p->bus_wait_head[bus];
    if (ri == NO_READ || ri >= p->n_reads)
        return;
    p->bus_wait_head[bus] = p->reads[ri].next_waiting;
    if (p->bus_wait_head[bus] == NO_READ)
        p->bus_wait_tail[bus] = NO_READ;
    p->reads[ri].waiting = false;
    poll_once(p, ri);
}

uint16_t poll_item(const gw_poll_result_t *r, unsigned i)
{
    if (tags_plan_read(r->plan, r->read)->function >= 3)
        return (uint16_t)(r->pdu[2 + 2 * i] << 8 | r->pdu[3 + 2 * i]);
    return (r->pdu[2 + i / 8] >> (i % 8)) & 1;
}

/* Exception 02 on read ri: cut it where the planner says, and plan again. */
static void split(gw_poller_t *p, unsigned ri)
{
    tags_split_t what;
    char err[320];

    if (tags_plan_split(p->planner, p->plan, ri, &what) < 0) {
        gw_log(p->gw, CONFIG_LOG_WARN, "poller: %s: exception 02, but the planner holds its most cuts",
               what.text);
        return;
    }
    if (what.kind == TAGS_SPLIT_NONE)
        return;   /* one item: its tags are bad with exception 02 */
    gw_count(&p->splits);
    if (replan(p, err, sizeof err) != 0) {
        gw_log(p->gw, CONFIG_LOG_ERROR, "%s", err);
        return;
    }
    gw_log(p->gw, CONFIG_LOG_WARN, "poller: exception 02 (illegal data address) on %s; %u reads now",
           what.text, p->n_reads);
}

static void on_answer(gw_poller_t *p, const poll_answer_t *a)
{
    if (a->generation != p->generation || a->seq >= p->n_reads) {
        bus_place_freed(p, a->bus);
        return;   /* a read of a plan since replaced */
    }
    const tags_read_t *r = tags_plan_read(p->plan, a->seq);
    unsigned want = r->function >= 3 ? 2u * r->count : (r->count + 7u) / 8u;
    bool exception = a->pdu_len >= 2 && (a->pdu[0] & 0x80);
    bool good = !exception && a->pdu_len == 2u + want && a->pdu[1] == want;

    gw_poll_result_t res = { .plan = p->plan, .read = a->seq, .pdu = a->pdu, .len = a->pdu_len, .good = good,
                             .exception = exception, .on_demand = p->reads[a->seq].on_demand,
                             .t_req_ns = a->t_req_ns, .now_ns = gw_now_ns(), .wall_ms = gw_wall_ms() };
    p->reads[a->seq].outstanding = false;
    p->reads[a->seq].on_demand = false;
    for (unsigned k = 0; k < p->n_subs; k++)
        p->subs[k].answer(p->subs[k].ctx, &res);
    bool split_it = exception && a->pdu[1] == 0x02 && r->members > 1;
    if (split_it)
        split(p, a->seq);   /* a new plan: the waiting lists start again */
    bus_place_freed(p, a->bus);
}

/* The read whose members include tag `tag`, polled now (a written tag's
 * new value published at once); the read's ticks go on as before. */
static void poll_tag(gw_poller_t *p, unsigned tag)
{
    for (unsigned ri = 0; ri < p->n_reads; ri++) {
        size_t n;
        const tags_member_t *m = tags_plan_members(p->plan, ri, &n);
        for (size_t k = 0; k < n; k++)
            if (!m[k].is_group && m[k].index == tag) {
                /* an outstanding read is not asked twice; its answer comes in its rhythm */
                if (!p->reads[ri].outstanding)
                    p->reads[ri].on_demand = true;
                poll_once(p, ri);
                return;
            }
    }
}

void poller_poll_tag_now(gw_poller_t *p, unsigned tag)
{
    if (p)
        actor_send(p->gw->actors, p->self, POLLER_MSG_NOW, &tag, sizeof tag);
}

static void poller_behaviour(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                             const void *data, size_t len)
{
    gw_poller_t *p = state;
    poll_tick_t tick;
    (void)sys;
    (void)self;
    if (type == POLLER_MSG_TICK && len == sizeof tick) {
        memcpy(&tick, data, sizeof tick);
        if (tick.generation != p->generation || tick.read >= p->n_reads)
            return;
        uint64_t now = gw_now_ns();
        uint64_t period = (uint64_t)tags_plan_read(p->plan, tick.read)->interval_ms * 1000000ull;
        poll_tick_t next = { tick.start ? now : tick.due, tick.generation, tick.read, 0 };
        next.due += period;
        if (next.due <= now)
            next.due = now + period;   /* a period or more late: skip ahead */
        p->reads[tick.read].next_due = next.due;
        int rc = actor_send_after(p->gw->actors, p->self, POLLER_MSG_TICK, &next, sizeof next, next.due - now, NULL);
        if (rc != 0 && rc != -ESHUTDOWN)   /* the chain of this read's ticks ends here: say so */
            gw_log(p->gw, CONFIG_LOG_ERROR, "poller: read %u: its next poll could not be armed (%s); it is polled no more",
                   tick.read, strerror(-rc));
        poll_once(p, tick.read);
    } else if (type == POLLER_MSG_NOW && len == sizeof(unsigned)) {
        unsigned tag;
        memcpy(&tag, data, sizeof tag);
        poll_tag(p, tag);
    } else if (type == POLLER_MSG_ANSWER) {
        /* answers travel trimmed to their PDU: copy what came */
        poll_answer_t a;
        memset(&a, 0, sizeof a);
        memcpy(&a, data, len < sizeof a ? len : sizeof a);
        on_answer(p, &a);
    }
}

/* origin: the bus hands the answer to the poller actor (a message: on the same host, no wake-up). */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_poller_t *p = (gw_poller_t *)o;
    poll_answer_t a = { .t_req_ns = req->t_accept_ns, .bus = req->bus, .generation = (uint32_t)req->conn_id,
                        .seq = req->seq, .pdu_len = (uint16_t)len };
    memcpy(a.pdu, pdu, len);
    actor_send(p->gw->actors, p->self, POLLER_MSG_ANSWER, &a, offsetof(poll_answer_t, pdu) + len);
}

static const line_origin_ops_t poller_origin_ops = { "poll", origin_answer, NULL };

gw_poller_t *poller_new(gw_t *gw, const gw_poll_subscriber_t *subs, unsigned n_subs, char *err, size_t errcap)
{
    gw_poller_t *p = calloc(1, sizeof *p);
    if (!p || n_subs > GW_POLL_SUBSCRIBERS_MAX) {
        snprintf(err, errcap, "%s", p ? "poller: too many subscribers" : "out of memory");
        free(p);
        return NULL;
    }
    p->origin.ops = &poller_origin_ops;
    p->gw = gw;
    /* Sized for every bus the daemon may ever run, not the ones at start: a
     * bus added live (bus_add, at the index after the last) is under the
     * same back-pressure and can be paused for a scan. The tables never
     * move, so the scan's pause (any thread) and the poller (its actor)
     * need no lock to agree on where an entry is; they cost ~4 KB. */
    p->n_buses = CONFIG_MAX_BUSES;
    p->bus_outstanding = calloc(p->n_buses + 1, sizeof *p->bus_outstanding);
    p->bus_wait_head = malloc((p->n_buses + 1) * sizeof *p->bus_wait_head);
    p->bus_wait_tail = malloc((p->n_buses + 1) * sizeof *p->bus_wait_tail);
    p->bus_paused = calloc(p->n_buses + 1, sizeof *p->bus_paused);
    p->bus_reads = calloc(p->n_buses + 1, sizeof *p->bus_reads);
    if (!p->bus_outstanding || !p->bus_wait_head || !p->bus_wait_tail || !p->bus_paused || !p->bus_reads) {
        snprintf(err, errcap, "out of memory");
        poller_free(p);
        return NULL;
    }
    for (unsigned b = 0; b <= p->n_buses; b++)
        p->bus_wait_head[b] = p->bus_wait_tail[b] = NO_READ;
    memcpy(p->subs, subs, n_subs * sizeof *subs);
    p->n_subs = n_subs;
    if (planner_setup(p, err, errcap) != 0) {
        poller_free(p);
        return NULL;
    }
    int rc = gw->cfg->buses_on_io_thread ? actor_spawn_on(gw->actors, loop_host(gw->loop), poller_behaviour, p, &p->self)
                                         : actor_spawn(gw->actors, poller_behaviour, p, &p->self);
    if (rc != 0) {
        snprintf(err, errcap, "poller: out of actors");
        poller_free(p);
        return NULL;
    }
    /* The actor has no message yet: planning here, before its first tick,
     * is the only time another thread touches its state (the ticks it sends
     * only read what was written before them). */
    if (replan(p, err, errcap) != 0) {
        poller_free(p);
        return NULL;
    }
    size_t n_tags = tags_table_count(gw_tags_defs(gw->tags));
    if (n_tags)
        gw_log(gw, CONFIG_LOG_INFO, "poller: %u poll groups and %zu tags in %u reads", gw->cfg->poll_count,
               n_tags, p->n_reads);
    else if (gw->cfg->poll_count)
        gw_log(gw, CONFIG_LOG_INFO, "poller: %u poll groups in %u reads", gw->cfg->poll_count, p->n_reads);
    return p;
}

void poller_free(gw_poller_t *p)
{
    if (!p)
        return;
    tags_plan_free(p->plan);
    tags_planner_free(p->planner);
    free(p->bus_outstanding);
    free(p->bus_wait_head);
    free(p->bus_wait_tail);
    free((void *)p->bus_paused);
    free((void *)p->bus_reads);
    free(p->groups);
    free((void *)p->group_read);
    free(p->group_device);
    free(p->reads);
    free(p);
}
