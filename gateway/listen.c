/*
 * gateway/listen.c -- a listen-only bus (`[bus NAME] mode = listen`): tag values
 * from a line another master polls, without sending a byte.
 *
 * The bus actor (bus.c) hands this file the port's stamped chunks instead of
 * giving them to its line core, and asks nothing of the line: no poller read,
 * tag write or Modbus TCP request reaches the wire (bus.c answers them 0x0A at
 * once, and the driver is read-only beneath, drivers/driver.c, so a write that
 * slipped through would be refused and counted, not sent).
 *
 * Bytes go through the SNIFF framer (both directions, resynchronised after
 * noise or a start mid-frame), frames through the pairer (parser/pair.c: the
 * line discipline's rules from the outside; its argument is there), and only a
 * vouched pair (RTU_PAIR_ANSWERED) feeds the tags: the device on this bus with
 * the answer's slave, the area of the request's function, the request's address,
 * the answer's words. A tag's value is then the last answer that covered all its
 * registers, stamped with when it was heard (the chunk's read time converted to
 * the wall clock), and its quality comes from that age (tags_table_value: stale
 * past twice the tag's interval). Doubtful, unpaired and damaged frames are
 * counted and never reach a tag.
 *
 * Every answer is decoded through the bus's router thread (native or fallback
 * per size), as on a bus rtugw masters, so the router's report in /status
 * counts the arms per bucket for a listen-only bus too. Requests and answers go
 * into the frame ring (/frames): on a listen-only bus `tx` marks the master's
 * requests.
 *
 * Bounded: the framer, the pairer and the learner are fixed allocations made
 * once; a chunk's work is bounded by its length. All of it runs on the bus
 * actor, one message at a time; the counters other threads read are atomics.
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_listen {
    gw_t *gw;
    unsigned bus;
    router_thread_t *router;
    /* the router that handle belongs to (gw->router when the bus was made):
     * a [router] reload swaps gw->router, and this bus, restarted, goes with
     * its handle's router until it is freed (gateway/runtime.c) */
    router_t *table;
    rtu_framer_t *framer;
    rtu_pairer_t *pairer;
    rtu_learn_t *learn;
    uint64_t hold_ns, silence_ns;
    unsigned heard[2000];         /* the tags one answer covers (at most 2000 bits), for MQTT */
    pthread_mutex_t learn_lock;   /* the learner: written by the bus actor, read by /status */
    atomic_uint_fast64_t frames, tag_updates, by_kind[RTU_PAIR_KIND_COUNT], duplicates, noise_bytes, late;
    /* answers decoded, per router bucket and the arm the router exploited for it
     * (router_choice: exploration pulls aside; /metrics has the router's own counts) */
    atomic_uint_fast64_t arm[ROUTER_MAX_BUCKETS][ROUTER_ARM_COUNT];
};

gw_listen_t *listen_new(gw_t *gw, unsigned bus, router_thread_t *router, char *err, size_t errcap)
{
    const config_bus_t *c = &gw->cfg->buses[bus];
    gw_listen_t *l = calloc(1, sizeof *l);
    unsigned char_bits = rtu_char_bits(c->data_bits, c->parity, c->stop_bits);
    rtu_framer_config_t fc = { .baud = c->baud, .char_bits = char_bits, .dir = RTU_DIR_SNIFF };
    /* A device server's stream carries no wire timing; a tap behind a relay has
     * more jitter than t3.5: frame_silence_ms then ends a frame (frames of known
     * length still end by their length and CRC). */
    if (c->port_kind == CONFIG_PORT_TCP || c->frame_silence_ms)
        fc.silence_ns = (uint64_t)(c->frame_silence_ms ? c->frame_silence_ms : 20) * 1000000ull;
    if (l) {
        l->gw = gw;
        l->bus = bus;
        l->router = router;
        l->table = gw->router;
        l->framer = rtu_framer_new(&fc);
        l->pairer = rtu_pairer_new(0);
        if (l->pairer)
            rtu_pairer_set_late_factor(l->pairer, c->listen_late_factor);
        l->learn = rtu_learn_new();
        pthread_mutex_init(&l->learn_lock, NULL);
        l->silence_ns = fc.silence_ns ? fc.silence_ns : rtu_t35_ns(c->baud, char_bits);
    }
    if (!l || !l->framer || !l->pairer || !l->learn) {
        snprintf(err, errcap, "bus %s: out of memory", c->name);
        listen_free(l);
        return NULL;
    }
    return l;
}

void listen_free(gw_listen_t *l)
{
    if (!l)
        return;
    rtu_framer_free(l->framer);
    rtu_pairer_free(l->pairer);
    rtu_learn_free(l->learn);
    pthread_mutex_destroy(&l->learn_lock);
    free(l);
}

static int device_of(const config_t *cfg, unsigned bus, uint8_t slave)
{
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (cfg->devices[i].bus == bus && cfg->devices[i].slave == slave)
            return (int)i;
    return -1;
}

/* A vouched answer into the tags of its device: the request says where, the
 * (router-decoded) answer what. */
static void observe(gw_listen_t *l, const rtu_pair_event_t *ev, const rtu_envelope_t *env, uint64_t now)
{
    const rtu_frame_t *q = &ev->request;
    uint8_t fc = q->adu[1];
    if (env->status != RTU_OK || q->len < 8 || fc < 1 || fc > 4 ||
        (env->kind != RTU_KIND_REGISTERS && env->kind != RTU_KIND_BITS))
        return;
    int d = device_of(l->gw->cfg, l->bus, q->adu[0]);
    if (d < 0)
        return;
    uint16_t address = (uint16_t)(q->adu[2] << 8 | q->adu[3]);
    uint16_t quantity = (uint16_t)(q->adu[4] << 8 | q->adu[5]);
    /* Heard at the chunk's read time, on the wall clock. */
    uint64_t age_ns = now > ev->answer.t_last_ns ? now - ev->answer.t_last_ns : 0;
    int64_t heard_ms = gw_wall_ms() - (int64_t)(age_ns / 1000000u);
    int moved;
    if (env->kind == RTU_KIND_BITS)
        moved = gw_tags_observe(l->gw->tags, l->gw->cfg->devices[d].name, (tags_area_t)(fc - 1), address, NULL,
                               env->data.bytes, quantity < env->count ? quantity : env->count, heard_ms);
    else
        moved = gw_tags_observe(l->gw->tags, l->gw->cfg->devices[d].name, (tags_area_t)(fc - 1), address,
                               env->data.regs, NULL, env->count, heard_ms);
    if (moved > 0)
        atomic_fetch_add(&l->tag_updates, (uint64_t)moved);
    /* MQTT json and Sparkplug publish what was heard, as a poll answer's tags
     * (north decides what changed). gw->north and gw->tags are set before the
     * loop runs, so before any byte reaches this actor. */
    if (l->gw->north) {
        const tags_table_t *defs = gw_tags_defs(l->gw->tags);
        int td = tags_table_find_device(defs, l->gw->cfg->devices[d].name);
        size_t n = td < 0 ? 0
                 : tags_table_covered(defs, (size_t)td, (tags_area_t)(fc - 1), address,
                                      env->kind == RTU_KIND_BITS ? (quantity < env->count ? quantity : env->count)
                                                                 : env->count,
                                      l->heard, sizeof l->heard / sizeof l->heard[0]);
        if (n > sizeof l->heard / sizeof l->heard[0])
            n = sizeof l->heard / sizeof l->heard[0];
        if (n)
            gw_north_tags_heard(l->gw->north, l->heard, n, heard_ms);
        /* and the computed tags what was heard re-evaluated, each with its device */
        n = gw_tags_evaluated(l->gw->tags, l->heard, sizeof l->heard / sizeof l->heard[0]);
        for (size_t k = 0; k < n; k++)
            gw_north_tags_heard(l->gw->north, &l->heard[k], 1, heard_ms);
    }
}

static void on_event(gw_listen_t *l, const rtu_pair_event_t *ev, uint64_t now)
{
    atomic_fetch_add(&l->by_kind[ev->kind < RTU_PAIR_KIND_COUNT ? ev->kind : RTU_PAIR_DAMAGED], 1);
    if (ev->duplicate)
        atomic_fetch_add(&l->duplicates, 1);
    pthread_mutex_lock(&l->learn_lock);
    rtu_learn_event(l->learn, ev);
    pthread_mutex_unlock(&l->learn_lock);
    if (ev->kind != RTU_PAIR_ANSWERED)
        return;
    rtu_envelope_t env;
    unsigned bucket = router_bucket_of(l->table, ev->answer.len);
    router_arm_t arm = router_choice(l->router, ev->answer.len);
    if (bucket < ROUTER_MAX_BUCKETS && (unsigned)arm < ROUTER_ARM_COUNT)
        atomic_fetch_add(&l->arm[bucket][arm], 1);
    router_decode(l->router, ev->answer.adu, ev->answer.len, &env);
    observe(l, ev, &env, now);
}

static void drain(gw_listen_t *l, uint64_t now)
{
    rtu_frame_t f;
    rtu_framer_stats_t fs;
    while (rtu_framer_next(l->framer, &f) == 1) {
        atomic_fetch_add(&l->frames, 1);
        gw_frame_seen(l->gw, l->bus, f.is_request && f.crc_ok, f.adu, f.len);
        rtu_framer_get_stats(l->framer, &fs);
        rtu_pairer_frame(l->pairer, &f, fs.noise_bytes);
    }
    rtu_framer_get_stats(l->framer, &fs);
    rtu_pairer_idle(l->pairer, now, fs.noise_bytes);
    atomic_store(&l->noise_bytes, fs.noise_bytes);
    rtu_pair_stats_t ps;
    rtu_pairer_get_stats(l->pairer, &ps);
    atomic_store(&l->late, ps.late);
    rtu_pair_event_t ev;
    while (rtu_pairer_next(l->pairer, &ev) == 1)
        on_event(l, &ev, now);
}

/* When the next look is due: t3.5 (or the stream's silence) closes a frame
 * that has no length rule, and the pairer's hold vouches for a held answer.
 * The hold is 20 ms (parser/pair.c); one look 25 ms on covers both. */
static uint64_t next_look(const gw_listen_t *l, uint64_t now)
{
    uint64_t wait = l->silence_ns + 5000000ull;
    return now + (wait > 25000000ull ? wait : 25000000ull);
}

uint64_t listen_bytes(gw_listen_t *l, const uint8_t *bytes, size_t n, uint64_t t_ns, uint64_t now)
{
    rtu_framer_feed(l->framer, bytes, n, t_ns);
    drain(l, now);
    return next_look(l, now);
}

uint64_t listen_idle(gw_listen_t *l, uint64_t now)
{
    rtu_framer_idle(l->framer, now);
    drain(l, now);
    return rtu_framer_settled(l->framer) && !rtu_pairer_holding(l->pairer) ? 0 : next_look(l, now);
}

void listen_get_stats(const gw_listen_t *l, gw_listen_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->frames = atomic_load(&l->frames);
    st->tag_updates = atomic_load(&l->tag_updates);
    st->duplicates = atomic_load(&l->duplicates);
    st->noise_bytes = atomic_load(&l->noise_bytes);
    st->late = atomic_load(&l->late);
    for (int k = 0; k < RTU_PAIR_KIND_COUNT; k++)
        st->by_kind[k] = atomic_load(&l->by_kind[k]);
}

/* What the master was heard to do (parser/learn.c): per slave its timeout and retries,
 * per poll its range and interval; at most RTU_LEARN_POLLS polls, so /status stays bounded. */
static void learned_json(const gw_listen_t *c, struct evbuffer *b)
{
    gw_listen_t *l = (gw_listen_t *)c;   /* the lock only */
    pthread_mutex_lock(&l->learn_lock);
    evbuffer_add_printf(b, ",\"slaves\":[");
    bool first = true;
    for (unsigned s = 1; s < 256; s++) {
        const rtu_learn_slave_t *ls = rtu_learn_slave(l->learn, (uint8_t)s);
        if (!ls)
            continue;
        evbuffer_add_printf(b, "%s{\"slave\":%u,\"requests\":%llu,\"answered\":%llu,\"unanswered\":%llu,"
                               "\"doubtful\":%llu,\"retries\":%llu,\"slowest_answer_ms\":%.3f",
                            first ? "" : ",", s, (unsigned long long)ls->requests, (unsigned long long)ls->answered,
                            (unsigned long long)ls->unanswered, (unsigned long long)ls->doubtful,
                            (unsigned long long)ls->retries, (double)ls->latency_max_ns / 1e6);
        if (ls->unanswered)
            evbuffer_add_printf(b, ",\"master_timeout_ms\":[%.1f,%.1f]", (double)ls->timeout_min_ns / 1e6,
                                (double)ls->timeout_max_ns / 1e6);
        evbuffer_add_printf(b, "}");
        first = false;
    }
    evbuffer_add_printf(b, "],\"polls\":[");
    rtu_learn_poll_t p;
    for (unsigned i = 0; rtu_learn_poll(l->learn, i, &p) == 1; i++) {
        evbuffer_add_printf(b, "%s{\"slave\":%u,\"function\":%u,\"address\":%u,\"quantity\":%u,\"count\":%llu,"
                               "\"answered\":%llu",
                            i ? "," : "", p.slave, p.function, p.address, p.quantity, (unsigned long long)p.count,
                            (unsigned long long)p.answered);
        if (p.intervals)
            evbuffer_add_printf(b, ",\"interval_ms\":%.1f,\"interval_min_ms\":%.1f,\"interval_max_ms\":%.1f",
                                (double)(p.last_ns - p.first_ns) / 1e6 / (double)p.intervals,
                                (double)p.interval_min_ns / 1e6, (double)p.interval_max_ns / 1e6);
        evbuffer_add_printf(b, "}");
    }
    evbuffer_add_printf(b, "],\"polls_not_tracked\":%llu", (unsigned long long)rtu_learn_polls_dropped(l->learn));
    pthread_mutex_unlock(&l->learn_lock);
}

void listen_status_json(const gw_bus_t *bus, struct evbuffer *b)
{
    const gw_listen_t *l = bus_listen(bus);
    evbuffer_add_printf(b, ",\"mode\":\"%s\"", l ? "listen" : "master");
    if (!l)
        return;
    gw_listen_stats_t st;
    driver_stats_t ds;
    listen_get_stats(l, &st);
    bus_driver_stats(bus, &ds);
    evbuffer_add_printf(b, ",\"listen\":{\"frames\":%llu,\"noise_bytes\":%llu,\"tag_updates\":%llu,"
                           "\"duplicates\":%llu,\"writes_refused\":%llu,\"late\":%llu",
                        (unsigned long long)st.frames, (unsigned long long)st.noise_bytes,
                        (unsigned long long)st.tag_updates, (unsigned long long)st.duplicates,
                        (unsigned long long)ds.writes_refused, (unsigned long long)st.late);
    for (int k = 0; k < RTU_PAIR_KIND_COUNT; k++)
        evbuffer_add_printf(b, ",\"%s\":%llu", rtu_pair_kind_name((rtu_pair_kind_t)k),
                            (unsigned long long)st.by_kind[k]);
    learned_json(l, b);
    router_report_t rep;
    evbuffer_add_printf(b, ",\"router\":[");
    if (router_report(l->table, &rep) == 0)
        for (unsigned i = 0; i < rep.n_buckets && i < ROUTER_MAX_BUCKETS; i++) {
            evbuffer_add_printf(b, "%s{\"lo\":%u,\"hi\":%u", i ? "," : "", rep.bucket[i].lo, rep.bucket[i].hi);
            for (int a = 0; a < ROUTER_ARM_COUNT; a++)
                evbuffer_add_printf(b, ",\"%s\":%llu", router_arm_name((router_arm_t)a),
                                    (unsigned long long)atomic_load(&l->arm[i][a]));
            evbuffer_add_printf(b, "}");
        }
    evbuffer_add_printf(b, "]}");
}

void listen_metrics_text(gw_t *gw, struct evbuffer *b)
{
    static const char *const help[][2] = {
        { "frames", "Frames heard on a listen-only bus" },
        { "tag_updates", "Tag values changed by answers heard on a listen-only bus" },
        { "writes_refused", "Writes refused by a listen-only bus's driver (rtugw never sends there)" },
        { "late_answers", "Answers heard later than the master's timeout as heard (doubtful, never used)" },
    };
    bool any = false;
    GW_FOR_EACH_BUS(gw, k)
        any |= bus_listen(gw->buses[k]) != NULL;
    if (!any)
        return;
    for (int m = 0; m < 4; m++) {
        evbuffer_add_printf(b, "# HELP rtugw_listen_%s_total %s\n# TYPE rtugw_listen_%s_total counter\n",
                            help[m][0], help[m][1], help[m][0]);
        GW_FOR_EACH_BUS(gw, k) {
            const gw_listen_t *l = bus_listen(gw->buses[k]);
            if (!l)
                continue;
            gw_listen_stats_t st;
            driver_stats_t ds;
            listen_get_stats(l, &st);
            bus_driver_stats(gw->buses[k], &ds);
            uint64_t v = m == 0 ? st.frames : m == 1 ? st.tag_updates : m == 2 ? ds.writes_refused : st.late;
            evbuffer_add_printf(b, "rtugw_listen_%s_total{bus=\"%s\"} %llu\n", help[m][0],
                                gw->cfg->buses[k].name, (unsigned long long)v);
        }
    }
    evbuffer_add_printf(b, "# HELP rtugw_listen_pairs_total Requests and answers heard, by how they paired "
                           "(only answered ones feed tags)\n# TYPE rtugw_listen_pairs_total counter\n");
    GW_FOR_EACH_BUS(gw, k) {
        const gw_listen_t *l = bus_listen(gw->buses[k]);
        if (!l)
            continue;
        gw_listen_stats_t st;
        listen_get_stats(l, &st);
        for (int i = 0; i < RTU_PAIR_KIND_COUNT; i++)
            evbuffer_add_printf(b, "rtugw_listen_pairs_total{bus=\"%s\",kind=\"%s\"} %llu\n", gw->cfg->buses[k].name,
                                rtu_pair_kind_name((rtu_pair_kind_t)i), (unsigned long long)st.by_kind[i]);
    }
}
