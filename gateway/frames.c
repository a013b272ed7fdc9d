/*
 * gateway/frames.c -- the last frames sent and heard on each bus, for the web
 * page's frame monitor (GET /frames): a ring of [http] frame_ring frames per
 * bus, filled by the bus's actor from line_log_frame (line/discipline.c), read on the I/O
 * thread. With frame_ring = 0 nothing is allocated and a frame costs its bus
 * one load of a NULL pointer (gw_frame_seen).
 *
 * One writer per ring (its bus actor, one thread at a time) and one reader
 * (the I/O thread, about once a second per watching page): a mutex per ring,
 * held to copy one frame in, or to copy out at most FRAMES_REPLY_MAX frames,
 * never while decoding or formatting. With the bus actors on the I/O thread
 * ([gateway] buses_on_io_thread, the default) it is never contended; with
 * them on the workers a bus waits, at worst, for one reader's copy of 256
 * slots (70 KB). Either way a frame is never lost to a page.
 *
 * A frame is kept raw, with its CLOCK_MONOTONIC time; it is decoded (the
 * fields `rtugw decode` prints) only when served, so the line pays a copy,
 * not a decode. Frames are numbered from 1 on each bus; a reader asks for the
 * frames after the last number it saw, and is told how many of those the ring
 * had already overwritten (missed, also counted in /metrics).
 */
#include "gateway/gateway.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FRAMES_REPLY_MAX 256   /* frames in one reply: bounds its size (~1.5 KB a frame) */

typedef struct frame_slot {
    uint64_t seq;
    uint64_t t_ns;             /* CLOCK_MONOTONIC when recorded */
    uint16_t len;
    bool tx;
    uint8_t adu[RTU_MAX_ADU];
} frame_slot_t;

typedef struct frame_ring {
    pthread_mutex_t lock;
    uint64_t next_seq;         /* the number the next frame gets: frames recorded + 1 */
    uint64_t first;            /* the oldest number a resize kept (1 before any) */
    uint64_t missed;           /* frames asked for after the ring had overwritten them */
    unsigned capacity;         /* under lock: the frames_resize in force; 0: records nothing */
    frame_slot_t *slot;        /* capacity of them; slot[seq % capacity] */
} frame_ring_t;

/*
 * Rings for buses added live. ring[] has a header (its lock) for every bus
 * the daemon may run (CONFIG_MAX_BUSES, ~80 bytes each), made with the
 * struct; only the first `buses` have slots. A bus added after the rings
 * were made gets its slots from frames_add_bus, which swaps them in under
 * the ring's lock as frames_resize does, so the struct never moves under a
 * bus actor that loaded it. `buses` is read and written on the I/O thread
 * only (frames_add_bus, frames_resize, frames_json, the metrics); a
 * recording actor never reads it: any index below CONFIG_MAX_BUSES has a
 * lock, and a ring without slots has capacity 0 and records nothing.
 */
struct gw_frames {
    unsigned buses;            /* I/O thread: rings with slots (the buses made, or added, so far) */
    _Atomic unsigned capacity; /* for /status and /metrics; each ring holds its own under its lock */
    frame_ring_t ring[];
};

gw_frames_t *frames_new(unsigned buses, unsigned capacity)
{
    if (!capacity)
        return NULL;
    if (buses > CONFIG_MAX_BUSES)
        return NULL;
    gw_frames_t *f = calloc(1, sizeof *f + CONFIG_MAX_BUSES * sizeof f->ring[0]);
    if (!f)
        return NULL;
    f->buses = buses;
    f->capacity = capacity;
    for (unsigned k = 0; k < CONFIG_MAX_BUSES; k++) {
        frame_ring_t *r = &f->ring[k];
        pthread_mutex_init(&r->lock, NULL);
        r->next_seq = r->first = 1;
    }
    for (unsigned k = 0; k < buses; k++) {
        f->ring[k].capacity = capacity;
        if (!(f->ring[k].slot = calloc(capacity, sizeof *f->ring[k].slot))) {
            frames_free(f);
            return NULL;
        }
    }
    return f;
}

void frames_free(gw_frames_t *f)
{
    if (!f)
        return;
    for (unsigned k = 0; k < CONFIG_MAX_BUSES; k++) {
        pthread_mutex_destroy(&f->ring[k].lock);
        free(f->ring[k].slot);
    }
    free(f);
}

unsigned frames_capacity(const gw_frames_t *f)
{
    return f ? atomic_load(&((gw_frames_t *)f)->capacity) : 0;
}

/* The oldest frame still in r (under its lock). */
static uint64_t oldest_kept(const frame_ring_t *r)
{
    uint64_t o = r->next_seq > r->capacity ? r->next_seq - r->capacity : 1;
    return o > r->first ? o : r->first;
}

/*
 * [http] frame_ring changed by a reload, while the bus actors record (on
 * the workers, maybe this very instant). The gw_frames_t itself is never
 * freed or replaced while the daemon runs (web/http.c keeps the one it made,
 * also while frame_ring = 0 unpublishes it): an actor that loaded its
 * pointer before a change still holds valid memory. Only each ring's slots
 * are replaced, under the lock frames_record takes to write a slot, so a
 * record lands either in the old slots (then copied) or in the new ones.
 * The newest min(old, new) frames are kept with their numbers; a reader's
 * `since` stays valid. Capacity 0 frees the slots: a record then does
 * nothing. -1: out of memory, nothing changed (the slots are allocated
 * first, all buses, before any ring is touched).
 */
int frames_resize(gw_frames_t *f, unsigned buses, unsigned capacity)
{
    /* buses added while the rings were off (frame_ring = 0: bus_add found
     * none published) get theirs now, as at a fresh start */
    unsigned was = f->buses;
    if (buses > was && buses <= CONFIG_MAX_BUSES)
        f->buses = buses;
    frame_slot_t **fresh = calloc(f->buses + 1, sizeof *fresh);
    if (!fresh) {
        f->buses = was;
        return -1;
    }
    for (unsigned k = 0; capacity && k < f->buses; k++)
        if (!(fresh[k] = calloc(capacity, sizeof *fresh[k]))) {
            while (k--)
                free(fresh[k]);
            free(fresh);
            f->buses = was;
            return -1;
        }
    for (unsigned k = 0; k < f->buses; k++) {
        frame_ring_t *r = &f->ring[k];
        pthread_mutex_lock(&r->lock);
        frame_slot_t *old = r->slot;
        uint64_t from = oldest_kept(r), next = r->next_seq;
        if (capacity && next - from > capacity)
            from = next - capacity;
        for (uint64_t seq = from; capacity && seq < next; seq++)
            fresh[k][seq % capacity] = old[seq % r->capacity];
        r->slot = fresh[k];
        r->capacity = capacity;
        r->first = capacity ? from : next;
        pthread_mutex_unlock(&r->lock);
        free(old);
    }
    atomic_store(&f->capacity, capacity);
    free(fresh);
    return 0;
}

/*
 * A bus added live at index bus (bus_add, I/O thread, before its actor is
 * spawned): its ring gets slots at the capacity in force, numbered from 1,
 * as a fresh start would have it. A ring left by a bus removed from that
 * index is emptied the same way (its frames are not the new bus's). The
 * slots are allocated first, then swapped in under the ring's lock (the
 * resize's discipline): a retiring bus's actor still recording there
 * writes either into the old slots (then freed) or the new. -1: out of
 * memory, the ring unchanged (the bus then has no frames, as before).
 */
int frames_add_bus(gw_frames_t *f, unsigned bus)
{
    if (!f || bus >= CONFIG_MAX_BUSES)
        return 0;
    unsigned capacity = atomic_load(&f->capacity);
    frame_slot_t *fresh = capacity ? calloc(capacity, sizeof *fresh) : NULL;
    if (capacity && !fresh)
        return -1;
    frame_ring_t *r = &f->ring[bus];
    pthread_mutex_lock(&r->lock);
    frame_slot_t *old = r->slot;
    r->slot = fresh;
    r->capacity = capacity;
    r->next_seq = r->first = 1;
    r->missed = 0;
    pthread_mutex_unlock(&r->lock);
    free(old);
    if (bus >= f->buses)
        f->buses = bus + 1;
    return 0;
}

void frames_record(gw_frames_t *f, unsigned bus, bool tx, const uint8_t *adu, size_t len)
{
    if (bus >= CONFIG_MAX_BUSES)
        return;
    frame_ring_t *r = &f->ring[bus];
    uint64_t now = gw_now_ns();
    if (len > RTU_MAX_ADU)
        len = RTU_MAX_ADU;
    pthread_mutex_lock(&r->lock);
    if (!r->capacity) {   /* frame_ring = 0 by a reload: nothing kept */
        pthread_mutex_unlock(&r->lock);
        return;
    }
    frame_slot_t *s = &r->slot[r->next_seq % r->capacity];
    s->seq = r->next_seq++;
    s->t_ns = now;
    s->tx = tx;
    s->len = (uint16_t)len;
    memcpy(s->adu, adu, len);
    pthread_mutex_unlock(&r->lock);
}

/* What `rtugw decode` prints for the frame: a request when we sent it, a
 * response when we heard it (a bad CRC shows as "error":"crc"). */
static void add_decoded(struct evbuffer *b, const frame_slot_t *s)
{
    char json[8192];   /* the longest: 2000 bits as ",0" */
    int n;
    if (s->tx) {
        rtu_request_t req;
        rtu_status_t st = rtu_request_decode(s->adu, s->len, &req);
        n = rtu_request_json(&req, st, json, sizeof json);
    } else {
        rtu_envelope_t env;
        rtu_decode_reference(s->adu, s->len, &env);
        n = rtu_envelope_json(&env, NULL, json, sizeof json);
    }
    if (n < 0)
        evbuffer_add_printf(b, "{\"ok\":false,\"error\":\"internal\"}");
    else
        evbuffer_add(b, json, (size_t)n);
}

static void add_frame(struct evbuffer *b, const frame_slot_t *s, uint64_t mono_now, double wall_now)
{
    double age = (double)(mono_now - s->t_ns) / 1e9;
    char hex[3 * RTU_MAX_ADU] = "";
    size_t o = 0;
    for (unsigned i = 0; i < s->len; i++)
        o += (size_t)snprintf(hex + o, sizeof hex - o, i ? " %02x" : "%02x", s->adu[i]);
    evbuffer_add_printf(b, "{\"seq\":%llu,\"dir\":\"%s\",\"time\":%.3f,\"age_s\":%.3f,\"len\":%u,\"hex\":\"%s\","
                           "\"decoded\":",
                        (unsigned long long)s->seq, s->tx ? "tx" : "rx", wall_now - age, age, s->len, hex);
    add_decoded(b, s);
    evbuffer_add(b, "}", 1);
}

void frames_json(gw_frames_t *f, unsigned bus, uint64_t since, unsigned limit, struct evbuffer *b)
{
    if (bus >= f->buses) {   /* a bus added while no ring was made for it (out of memory) */
        evbuffer_add_printf(b, "\"last\":0,\"missed\":0,\"skipped\":0,\"reset\":false,\"frames\":[]");
        return;
    }
    frame_ring_t *r = &f->ring[bus];
    uint64_t missed = 0, skipped = 0;
    bool reset = false;
    if (limit == 0 || limit > FRAMES_REPLY_MAX)
        limit = FRAMES_REPLY_MAX;
    frame_slot_t *copy = malloc((size_t)limit * sizeof *copy);
    if (!copy) {
        evbuffer_add_printf(b, "\"error\":\"out of memory\",\"frames\":[]");
        return;
    }

    pthread_mutex_lock(&r->lock);
    uint64_t next = r->next_seq;
    uint64_t oldest = oldest_kept(r);
    if (since >= next) {   /* numbers from before a restart: start over */
        since = 0;
        reset = true;
    }
    uint64_t from = since + 1;
    if (from < oldest) {
        if (since)         /* a watcher fell behind; a first look misses nothing */
            missed = oldest - from;
        from = oldest;
    }
    if (next - from > limit) {
        skipped = next - from - limit;
        from = next - limit;
    }
    r->missed += missed;
    unsigned n = (unsigned)(next - from);
    for (unsigned i = 0; i < n; i++)
        copy[i] = r->slot[(from + i) % r->capacity];
    pthread_mutex_unlock(&r->lock);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* wall time for people, as the log has it */
    double wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    uint64_t mono = gw_now_ns();
    evbuffer_add_printf(b, "\"last\":%llu,\"missed\":%llu,\"skipped\":%llu,\"reset\":%s,\"frames\":[",
                        (unsigned long long)(next - 1), (unsigned long long)missed, (unsigned long long)skipped,
                        reset ? "true" : "false");
    for (unsigned i = 0; i < n; i++) {
        if (i)
            evbuffer_add(b, ",", 1);
        add_frame(b, &copy[i], mono, wall);
    }
    evbuffer_add(b, "]", 1);
    free(copy);
}

void frames_metrics_text(gw_frames_t *f, const config_t *cfg, struct evbuffer *b)
{
    static const char *const help[3][2] = {
        { "recorded", "Frames sent or heard on the bus, kept for GET /frames" },
        { "overwritten", "Frames pushed out of the ring by newer ones" },
        { "missed", "Frames a GET /frames asked for after the ring had overwritten them" },
    };
    evbuffer_add_printf(b, "# HELP rtugw_frames_capacity Frames kept per bus for GET /frames ([http] frame_ring; "
                           "0: off)\n# TYPE rtugw_frames_capacity gauge\nrtugw_frames_capacity %u\n",
                        frames_capacity(f));
    if (!f)
        return;
    for (int m = 0; m < 3; m++) {
        evbuffer_add_printf(b, "# HELP rtugw_frames_%s_total %s\n# TYPE rtugw_frames_%s_total counter\n", help[m][0],
                            help[m][1], help[m][0]);
        /* a bus removed live keeps its ring until one is added there: not listed */
        for (unsigned i = 0; i < config_bus_listed(cfg); i++) {
            unsigned k = config_bus_at(cfg, i);
            if (k >= f->buses)
                continue;
            frame_ring_t *r = &f->ring[k];
            pthread_mutex_lock(&r->lock);
            uint64_t recorded = r->next_seq - 1;
            uint64_t v = m == 0 ? recorded : m == 1 ? oldest_kept(r) - 1 : r->missed;
            pthread_mutex_unlock(&r->lock);
            evbuffer_add_printf(b, "rtugw_frames_%s_total{bus=\"%s\"} %llu\n", help[m][0], cfg->buses[k].name,
                                (unsigned long long)v);
        }
    }
}
