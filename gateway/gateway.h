/*
 * gateway/gateway.h -- the daemon's runtime, which the front ends (front/),
 * the web side (web/) and the wiring (daemon/) are built on. Owns the I/O
 * thread's loop and its command queue (loop.c), the ports (port.c), the bus
 * actors that host the line cores (bus.c), the one way into a bus
 * (submit.c), the one way a tag is written (tag_write.c), the poller and
 * its subscribers (poller.c; cache.c, tags.c, north.c: the register
 * cache, the live tag table, the MQTT glue; north_session.c its session's
 * life across reloads), the frame ring (frames.c),
 * scans of a bus from the API (scan.c),
 * systemd's notify socket (notify.c), the start-up trim (trim.c), the log
 * and the clocks (log.c, metrics.c), the actor scheduler and the router
 * (runtime.c), a serial slave's port and actor (slave_port.c), the table
 * of what each part shows in /status and /metrics (report.h: report.c,
 * and the buses', polls' and reload's parts, report_bus.c, report_polls.c,
 * report_reload.c), one reload's outcome as its parts build it
 * (reload_result.h: reload_result.c), and gw_t, the handle every part is given. May call parser/, routing/, actor/,
 * drivers/, tags/, expr/ (the computed tags, evaluated after each store),
 * north/ (the MQTT module's loader and interface, through
 * config/config.h), config/ and line/ (the core each bus hosts), libevent;
 * nothing above it.
 *
 * The front ends, the web side and the wiring are built on it; they
 * appear here only as opaque handles. gw_t is opaque here too: its fields
 * are the wiring's (wiring.h, which only gateway/ and daemon/ include);
 * front/ and web/ read what they need through the accessors below
 * (handles.c), each saying its thread.
 *
 * Inside gateway/ the calls go one way (docs/runtime.md has the
 * table, read from the objects): everything may call log.c and metrics.c;
 * loop.c, cache.c, frames.c, tags.c and trim.c call nothing else here;
 * port.c calls loop.c; slave_port.c calls port.c; runtime.c calls nothing
 * else here; bus.c calls port.c, cache.c (a write's bracket ends
 * as its answer leaves the line) and frames.c; submit.c calls cache.c and
 * bus.c; tag_write.c and the poller call submit.c (tag_write.c also
 * tags.c, a computed tag's inverse); north.c (with north_session.c and
 * north_write.c) calls submit.c, tag_write.c, tags.c and loop.c; vslave.c (the maps: [map NAME]) calls
 * tag_write.c, tags.c and loop.c; scan.c (scans from the API) calls
 * submit.c, loop.c, the poller (a bus's polling paused) and bus.c's counters;
 * the report parts (report*.c) read the counters of the files they show
 * (report_polls.c: cache.c's snapshot and the poller's reads).
 *
 * Threads and ownership:
 *   - the I/O thread (loop.c; front/, web/, MQTT and the poller on it) owns
 *     the client sockets, the TCP connections and their in-order reply slots;
 *   - the line thread (a second gw_loop_t, [gateway] line_thread, default
 *     on; else the I/O thread) owns the ports (port.c) and the bus actors;
 *   - a bus actor (bus.c) owns one line core (line/line.h: the request
 *     queue, the transaction in flight, the framer, retries, guards and
 *     the per-slave state) and feeds it its events;
 *   - the poller actor (poller.c) owns the read plan (tags/ planner over
 *     poll groups and tags) and its timers; its results go to its
 *     subscribers: the cache, which HTTP reads under the cache's own mutex,
 *     the tag values, under the tag table's own mutex (tags.c), MQTT.
 * Counters that HTTP reads are relaxed atomics with a single writer each.
 */
#ifndef RTUGW_GATEWAY_GATEWAY_H
#define RTUGW_GATEWAY_GATEWAY_H

#include "actor/actor.h"
#include "config/config.h"
#include "drivers/driver.h"
#include "line/line.h"
#include "parser/rtu.h"
#include "routing/router.h"
#include "tags/tags.h"

#include "gateway/reload_result.h"
#include "gateway/report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct bufferevent;
struct event_base;
struct evbuffer;
struct evhttp_request;
struct sockaddr;

typedef struct gw gw_t;   /* fields: wiring.h; accessors: "gw_t, as the front ends and the web side see it" */

typedef struct gw_options {
    const char *config_path;    /* for SIGHUP reload; NULL: no reload (demo) */
    bool status_line;           /* live one-line status on stderr (demo on a tty) */
    bool install_signals;       /* SIGINT/SIGTERM stop, SIGHUP reload */
    config_bus_rule_t bus_rule; /* drivers/' rules, as `rtugw check` applies them: reloads and
                                   the API validate with them too (one validation); NULL none */
} gw_options_t;

/* The serial driver's settings for a bus, as the daemon opens it (so that
 * `rtugw check` validates exactly what `rtugw run` would open). */
driver_serial_config_t gw_serial_config(const config_bus_t *bus);
/* A device or tcp:// bus's driver, its framing's layer included (not the
 * simulator's): what `rtugw run` opens and `rtugw check --open` tries. */
driver_t *gw_bus_driver_new(const config_bus_t *bus, char *err, size_t errcap);

/* runtime.c: the actor scheduler and the router (gw->actors, gw->router),
 * which daemon/ starts and stops through these and web/ reads through their
 * *_metrics_text. Start: from gw->cfg, actors sized to its buses and serial
 * slaves, the router from [router] and its state_file; 0 or -1. */
int gw_runtime_start(gw_t *gw);
unsigned gw_runtime_workers(const gw_t *gw);
/* The actors shut down: what is queued runs for at most grace_ns (no-op
 * before gw_runtime_start). */
void gw_runtime_drain(gw_t *gw, uint64_t grace_ns);
/* The router's table to [router] state_file, if set (a warning if it cannot). */
void gw_runtime_save(gw_t *gw);
void gw_runtime_free(gw_t *gw);
/* I/O thread, a reload: [router] as fresh says, live (the router rebuilt,
 * every bus restarted in place onto it, the old one freed by its last
 * bus). 1: rebuilt; 0: nothing to rebuild (at most state_file changed,
 * which the running copy takes); -1 with err: the running router is kept. */
int gw_router_reload(gw_t *gw, const config_router_t *fresh, char *err, size_t errcap);
/* I/O thread: the rtugw_router_* and rtugw_actor_* lines of /metrics. */
void gw_router_metrics_text(gw_t *gw, struct evbuffer *b);
void gw_actor_metrics_text(gw_t *gw, struct evbuffer *b);

/* Logging, to stderr with a timestamp or to syslog (log_target); level as
 * in config_log_t. Any thread. */
void gw_log(const gw_t *gw, config_log_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The start and every reload (I/O thread): the log's level and target from
 * cfg; lines logged meanwhile on other threads go whole to the old target or
 * the new one. */
void gw_log_configure(gw_t *gw, config_log_t level, bool to_syslog);


/* ---- the request path ------------------------------------------------------ */

/* The request, the origin interface, the gateway exception codes and the bus
 * counters are the line core's (line/line.h): every front end builds a
 * line_request_t, names itself as its origin, and gets its one answer there. */


/* metrics.c: the clocks (the counters' helpers are line/line.h's) */
uint64_t gw_now_ns(void);
/* The wall clock in ms (CLOCK_REALTIME): what tag values are stamped with. */
int64_t gw_wall_ms(void);

/* trim.c: drops this process's resident pages of its loaded objects'
 * read-only, never-written segments (they stay in the page cache; a touch
 * maps them back). Returns the KiB advised. Call once start-up is done. */
size_t gw_trim_resident(void);

/* notify.c: sd_notify(3) without libsystemd. Sends STATE ("READY=1", ...) to
 * $NOTIFY_SOCKET; 0 when sent or when unset (not under systemd), else -errno. */
int gw_notify(const char *state);
/* If systemd asked for a watchdog ($WATCHDOG_USEC, $WATCHDOG_PID), sends
 * WATCHDOG=1 every half of it from the I/O loop (call before loop_run). */
int gw_watchdog_start(gw_t *gw);

/* ---- the cache of polled values ----------------------------------------------- */

/* poller.c's, defined there: who hears poll reads, and what they hear */
typedef struct gw_poll_subscriber gw_poll_subscriber_t;
typedef struct gw_poll_result gw_poll_result_t;

typedef struct gw_cache gw_cache_t;   /* cache.c's: the entries and their lock */
#define GW_GROUP_ITEMS_MAX 2000   /* a poll group's count: 125 registers, or 2000 bits */
typedef struct gw_cache_entry {
    uint64_t t_ns;            /* 0: never polled */
    uint16_t count;
    uint8_t ok;
    uint8_t exception;        /* the slave's or the gateway's exception when !ok */
    uint64_t polls, failures, overruns;
    uint64_t t_req_ns;        /* when the poll that filled it was submitted */
    uint64_t written_ns;      /* when a write touching it was last answered */
    unsigned writes_pending;  /* writes touching it not yet answered */
    uint16_t values[GW_GROUP_ITEMS_MAX];   /* registers, or bits as 0/1 */
} gw_cache_entry_t;

/* cache.c: writes through the gateway keep serve_cached_ms reads coherent
 * (under the cache's lock, taken inside). */
/* The bracket of a write: gw_submit begins it, bus.c ends it as the answer leaves the line. */
void cache_write_begin(gw_t *gw, unsigned bus, unsigned slave, const uint8_t *pdu, size_t len);
void cache_write_end(gw_t *gw, unsigned bus, unsigned slave, const uint8_t *pdu, size_t len);

/* tag_write.c: the one way a tag's value is written (HTTP, MQTT, Sparkplug). */
typedef struct gw_tag_writes gw_tag_writes_t;
/* TAG_WRITE_COMPUTED: the tag is computed (expr/) and declares no inverse:
 * its value is its expression's, there is no register to write.
 * TAG_WRITE_INVERSE_INPUT: a tag its inverse reads is not good now;
 * TAG_WRITE_INVERSE_FAILED: its inverse failed (Lua's error, a budget, no
 * number); TAG_WRITE_INVERSE_RANGE: the inverse's result does not fit its
 * target's type. */
enum { TAG_WRITE_QUEUED = 0, TAG_WRITE_FULL, TAG_WRITE_OVERLAP, TAG_WRITE_UNAVAILABLE, TAG_WRITE_LISTEN_ONLY,
       TAG_WRITE_COMPUTED, TAG_WRITE_INVERSE_INPUT, TAG_WRITE_INVERSE_FAILED, TAG_WRITE_INVERSE_RANGE };
typedef struct tag_write_outcome {
    unsigned tag;                 /* the tag's index in the tag table: the one written */
    unsigned asked;               /* the tag the caller named: a computed tag written through its inverse, else tag */
    const tags_write_t *w;        /* what was written (after a read-modify-write's merge) */
    uint8_t exception;            /* 0: the slave confirmed; else its or the gateway's exception */
    bool malformed_read;          /* a read-modify-write's read came back malformed: nothing written */
    bool unwritten;               /* abandoned between a read-modify-write's read and its write: nothing written */
    bool abandoned;               /* its owner had abandoned it: count it, answer no one */
    const uint8_t *pdu;           /* the slave's answer to the write (NULL after a read-back) */
    size_t len;
    bool confirmed;               /* read back (confirm_write): read_words is what the slave holds */
    uint16_t read_words[TAGS_WRITE_MAX]; /* the tag's registers (coils: 0/1), w->count of them */
} tag_write_outcome_t;
typedef void (*tag_write_done_fn)(void *owner, uint64_t cookie, const tag_write_outcome_t *o);
#define GW_TAG_WRITES_MQTT 64   /* north's NORTH_WRITE_MAX_ITEMS: the writes one MQTT request may carry */
gw_tag_writes_t *tag_writes_new(gw_t *gw, unsigned slots);
void tag_writes_free(gw_tag_writes_t *tw);
/* I/O thread. TAG_WRITE_QUEUED: done(owner, cookie, outcome) comes once, on
 * the I/O thread; else refused (no slot, an overlapping write in flight,
 * the bus took nothing, the bus is listen-only, a computed tag's inverse
 * refused it: why says so) and done never comes. A computed tag's w is its
 * value encoded as the tag (tags_encode_*); bus and slave are then the
 * inverse target's device's, whatever the caller gives. */
int tag_write_begin(gw_tag_writes_t *tw, unsigned tag, unsigned bus, unsigned slave, const tags_write_t *w,
                    tag_write_done_fn done, void *owner, uint64_t cookie, char *why, size_t cap);
/* The first write of owner whose cookie matches: its outcome is marked
 * abandoned; *cookie gets it. False when none. */
bool tag_write_abandon(gw_tag_writes_t *tw, void *owner, bool (*match)(uint64_t cookie, const void *arg),
                       const void *arg, uint64_t *cookie);
/* A confirmed outcome's value read back, decoded as the tag (good quality):
 * each front end writes it as it writes the tag's values. */
void tag_write_read_value(const tags_tag_t *g, const tag_write_outcome_t *o, tags_value_t *v);
unsigned tag_writes_in_flight(const gw_tag_writes_t *tw);
unsigned tag_writes_capacity(const gw_tag_writes_t *tw);
/* I/O thread: confirm_write's read-backs so far, by result: the slave holds
 * what was written, something else (it clamped or refused part), or the
 * read-back got no good answer (the write then stands as echoed). */
enum { TAG_READBACK_SAME = 0, TAG_READBACK_DIFFERS, TAG_READBACK_FAILED };
uint64_t tag_writes_readbacks(const gw_tag_writes_t *tw, int result);

/* submit.c: the one way a request enters a bus (req->bus). 0: queued, and
 * its one answer will come to req->origin; else the exception code the
 * caller answers with (0x0A), nothing queued. */
int gw_submit(gw_t *gw, const line_request_t *req);
/* Called with the cache's lock held (cache.c). */
bool cache_servable(const gw_cache_entry_t *e, uint64_t now, uint64_t max_age_ns);
/* The table and its lock (cache.c names the lock; no other file does). */
int cache_init(gw_t *gw);     /* gw->cfg's groups; 0 or -1 (out of memory) */
void cache_fini(gw_t *gw);
/* A read the cache answers now (serve_cached_ms): the PDU's length, or 0. Any thread. */
size_t cache_answer(gw_t *gw, unsigned bus, unsigned slave, const rtu_request_t *req, uint8_t pdu[RTU_MAX_PDU]);
/* Groups whose last poll was answered. Any thread. */
unsigned cache_polls_ok(gw_t *gw);
/* A group's entry as it was when the snapshot was taken; values point into the snapshot. */
typedef struct gw_cache_view {
    uint64_t t_ns, polls, failures, overruns;
    uint16_t count;
    uint8_t ok, exception;
    const uint16_t *values;
} gw_cache_view_t;
/* Every group's entry, copied under the lock (*n of them; free() it; NULL: out of memory). */
gw_cache_view_t *cache_snapshot(gw_t *gw, unsigned *n);
/* A reload, on the I/O thread: the running devices, then the groups and
 * their entries (was: the devices before, to match groups by device). */
int cache_set_devices(gw_t *gw, const config_t *fresh);
int cache_swap_groups(gw_t *gw, const config_t *fresh, const config_t *was);
/* The poller's subscriber for the cache: each group's entry cut from its read. */
gw_poll_subscriber_t cache_poll_subscriber(gw_t *gw);

/* ---- tags.c: the live tag table --------------------------------------------- */

typedef struct gw_tags gw_tags_t;

/* The tags of cfg (its definitions, copied; values start "not read"). */
gw_tags_t *gw_tags_new(const config_t *cfg, char *err, size_t errcap);
void gw_tags_free(gw_tags_t *t);
/* Values are read and written only between these two (any thread). */
tags_table_t *gw_tags_lock(gw_tags_t *t);
void gw_tags_unlock(gw_tags_t *t);
/* The definitions, which change only in a reload on the I/O thread
 * (gw_tags_replace): no lock needed to read them there, within one callback. */
const tags_table_t *gw_tags_defs(const gw_tags_t *t);
/* A write to computed tag `tag` (asked: its value encoded as the tag) as
 * the write of its inverse's target (expr_engine_inverse, under the lock):
 * 0 with *target and w; -ENOENT no inverse, -EAGAIN a tag the inverse reads
 * is not good, -EINVAL the inverse failed, -ERANGE its result does not fit
 * the target; why says so. */
int gw_tags_inverse(gw_tags_t *t, unsigned tag, const tags_write_t *asked, unsigned *target, tags_write_t *w,
                   char *why, size_t cap);
/* How many tags the table holds (same thread rule as gw_tags_defs). */
size_t gw_tags_count(const gw_tags_t *t);
/* The index in cfg->devices of a tag's device. */
unsigned gw_tags_config_device(const gw_tags_t *t, const tags_tag_t *tag);
/* The answer (PDU, or a gateway exception) to read r of plan into its tags,
 * stamped now_ms; takes the lock. Returns how many values changed. */
/* The computed tags (expr/) the stores (gw_tags_apply, gw_tags_observe) have
 * evaluated since the last call, up to cap, and forgets them: what MQTT
 * publishes beside a read's own tags. */
#define GWTAGS_EVALUATED_MAX 256
size_t gw_tags_evaluated(gw_tags_t *t, unsigned *out, size_t cap);
/* The poller's subscriber for the tag table (gw_tags_apply). */
gw_poll_subscriber_t gw_tags_poll_subscriber(gw_tags_t *t);
int gw_tags_apply(gw_tags_t *t, const tags_plan_t *plan, size_t r, const uint8_t *pdu, size_t len,
                 int64_t now_ms);
/* Whether defs (a fresh configuration's) defines the same tags. */
bool gw_tags_same(const gw_tags_t *t, const tags_table_t *defs);
/* A reload: the table rebuilt from cfg (its tags and devices), values kept
 * for tags defined as before whose device answers at the bus and slave id
 * it answered at in was (the devices before; NULL: not compared), *kept of
 * them. On the I/O thread, with every user of the definitions there and no
 * tag write in flight (tags.c). */
int gw_tags_replace(gw_tags_t *t, const config_t *cfg, const config_t *was, size_t *kept, char *err,
                   size_t errcap);
/* +1 per replace: work naming tag indices carries it, and an older one is dropped. */
uint32_t gw_tags_generation(const gw_tags_t *t);
/* An answer overheard on a listen-only bus into the named device's tags (tags_table_observe);
 * takes the lock. Returns how many values changed; 0 for a device without tags. */
int gw_tags_observe(gw_tags_t *t, const char *device, tags_area_t area, uint16_t address, const uint16_t *words,
                   const uint8_t *packed, size_t n, int64_t now_ms);

/* ---- vslave.c: [map NAME], virtual slaves ------------------------------------------ */

typedef struct gw_maps gw_maps_t;
typedef struct gw_map_metrics {
    atomic_uint_fast64_t reads, writes, exceptions;
} gw_map_metrics_t;
/* The maps of gw->cfg over the running tag table (gw->tags); NULL with err. */
gw_maps_t *vslave_new(gw_t *gw, char *err, size_t errcap);
void vslave_free(gw_maps_t *m);
/* I/O thread, after a reload (the tags replaced, or the maps changed): the
 * maps of cfg over the running tag table, swapped in. 0 or -ENOMEM (the old kept). */
int vslave_rebuild(gw_maps_t *m, const config_t *cfg);
/* Any thread: is unit a map's? */
bool vslave_owns(gw_maps_t *m, uint8_t unit);
const gw_map_metrics_t *vslave_metrics(const gw_maps_t *m);
struct evbuffer;
void vslave_metrics_text(gw_maps_t *m, struct evbuffer *b);
/*
 * The one dispatch of a request by the unit id its client addressed, which
 * every Modbus front end calls before its own routes (after its role and
 * read_only checks; a role is asked with bus -1, the unit's grant):
 * GW_UNIT_ROUTE, not a map's unit: route it; GW_UNIT_ANSWERED, *len bytes
 * of answer PDU (data or an exception) to send now; GW_UNIT_PENDING, a
 * write begun: its one answer comes later through req->origin (on the I/O
 * thread, with req->bus 0xFF: no bus place was taken). Any thread.
 */
enum { GW_UNIT_ROUTE = 0, GW_UNIT_ANSWERED, GW_UNIT_PENDING };
#define GW_BUS_MAP 0xFF   /* a request's bus when a map answers it: no bus place taken */
int gw_unit_dispatch(gw_t *gw, uint8_t unit, const line_request_t *req, uint8_t answer[RTU_MAX_PDU], size_t *len);

/* ---- loop.c: the I/O thread -------------------------------------------------- */

typedef struct gw_loop gw_loop_t;
/* A command run on the I/O thread: a function and a copy of its bytes. */
typedef void (*loop_fn)(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len);

gw_loop_t *loop_new(gw_t *gw);
void loop_free(gw_loop_t *loop);
struct event_base *loop_base(gw_loop_t *loop);
/* Any thread: run fn(ctx, a, b, data, len) on the I/O thread, in post order. */
int loop_post(gw_loop_t *loop, loop_fn fn, void *ctx, uint64_t a, uint32_t b, const void *data, size_t len);
int loop_run(gw_loop_t *loop);        /* the loop, on the calling thread */
/* The loop on a thread of its own, named name; priority 1..99: SCHED_FIFO at
 * it, if the process may (else a warning, and normal priority). */
int loop_start_thread(gw_loop_t *loop, const char *name, unsigned priority);
/* line_thread_priority changed by a reload: the loop's thread applies it to itself. Any thread. */
int loop_set_priority(gw_loop_t *loop, unsigned priority);
/* Any thread: run fn(ctx) on the loop's own thread and return once it has
 * run (at once when called there, or when the loop has no thread of its
 * own). 0, or -ENOMEM (fn not run). */
int loop_call(gw_loop_t *loop, void (*fn)(void *ctx), void *ctx);
/* Any other thread: leave that loop and join its thread (no-op if none). */
void loop_stop_thread(gw_loop_t *loop);
void loop_exit(gw_loop_t *loop);      /* I/O thread: leave loop_run */
void loop_wake(gw_loop_t *loop);      /* any thread: run the loop's on_wake hook */
bool loop_is_current(const gw_loop_t *loop);   /* is the caller the loop's running thread? */
/* The actors pinned to the I/O thread (bus actors, unless configured off)
 * run on it between events: serial bytes, the bus's decision, the serial
 * write and the TCP answer then cost no thread hand-off. Release before
 * the actor system shuts down, so they drain on the workers. */
actor_host_t *loop_host(gw_loop_t *loop);
void loop_release_host(gw_loop_t *loop);
/* I/O thread hook, run after each batch of commands and on loop_wake. */
void loop_on_wake(gw_loop_t *loop, void (*fn)(void *ctx), void *ctx);

/* ---- port.c: a serial port on the I/O thread ----------------------------------- */

typedef struct gw_port gw_port_t;
/* Message types a port sends to its bus actor. */
enum { PORT_MSG_BYTES = 100, PORT_MSG_STATE };
typedef struct gw_bytes {
    uint64_t t_ns;
    uint16_t len;
    uint8_t data[512];
} gw_bytes_t;

/* Opens the driver now (or retries with back-off) and reports to sink:
 * PORT_MSG_STATE (uint8_t 1 up / 0 down) and PORT_MSG_BYTES (gw_bytes_t). */
gw_port_t *port_new(gw_t *gw, gw_loop_t *loop, driver_t *d, const char *name, actor_ref_t sink,
                    line_bus_metrics_t *m);
/* The same, with paced reads on an RTU line whose character takes char_ns
 * on the wire (port.c, "Paced reads"): after a write the port reads when
 * the answer can be complete, not per chunk. char_ns 0: port_new. */
gw_port_t *port_new_paced(gw_t *gw, gw_loop_t *loop, driver_t *d, const char *name, actor_ref_t sink,
                          line_bus_metrics_t *m, uint64_t char_ns);
void port_free(gw_port_t *p);
/* Any thread: queue a write of one ADU. */
int port_write(gw_port_t *p, const uint8_t *adu, size_t len);
/* Any thread: the port closes its driver, tells the sink it is down, sends
 * it (msg, &payload) and opens d instead, paced at char_ns (port.c says the
 * order and why). The sink frees the old driver. 0, or -1: nothing done. */
int port_swap(gw_port_t *p, driver_t *d, uint64_t char_ns, uint32_t msg, void *payload);
/* Any thread: when the port's last write went to its driver, and when the
 * reads after it first and last brought bytes (0: none yet). For the
 * timeline (timeline.c); relaxed atomics, a snapshot of the port's state. */
void port_stamps(const gw_port_t *p, uint64_t *written, uint64_t *first, uint64_t *last);

/* ---- timeline.c: a bus's stage stamps per transaction, when asked ------------------- */

typedef struct gw_timeline gw_timeline_t;
#define TIMELINE_STAMPS 6   /* accepted, line, written, first byte, last byte, queued */
/* NULL unless the environment has RTUGW_TIMELINE=PATH: then a ring in PATH.INDEX
 * (NULL and a warning logged when that file cannot be made). */
gw_timeline_t *timeline_open(gw_t *gw, unsigned bus_index);
/* The bus's own thread (one writer per ring). */
void timeline_record(gw_timeline_t *tl, const uint64_t t[TIMELINE_STAMPS]);
void timeline_close(gw_timeline_t *tl);

/* ---- slave_port.c: a front end's own serial port and its actor --------------------- */

/* For a serial slave (front/serial_slave.c): c's port opened as a bus's is,
 * an actor running behaviour(state) placed as a bus actor is, and the port
 * reporting to it (PORT_MSG_STATE, PORT_MSG_BYTES). NULL with err (the
 * driver's reason, else "out of memory"). */
typedef struct gw_slave_port gw_slave_port_t;
gw_slave_port_t *slave_port_new(gw_t *gw, const config_serial_slave_t *c, const char *name,
                                actor_behaviour_fn behaviour, void *state, line_bus_metrics_t *m, char *err,
                                size_t errcap);
/* The stop path (the loops stopped): the port, its driver and sp freed. */
void slave_port_free(gw_slave_port_t *sp);
/* A reload that retires a serial slave: its actor stops (it still gets
 * every message sent before, then ACTOR_STOPPED). Any thread; once. */
void slave_port_stop_actor(gw_slave_port_t *sp);
/* Its actor, on ACTOR_STOPPED: the port and its driver are freed on the
 * port's own thread (no byte read after), then done(ctx) runs there; sp stays
 * valid for slave_port_send (refused: the actor is gone) until
 * slave_port_free. */
void slave_port_close(gw_slave_port_t *sp, void (*done)(void *ctx), void *ctx);
/* Any thread: a message to its actor, now or after delay_ns. */
void slave_port_send(gw_slave_port_t *sp, uint32_t type, const void *data, size_t len);
void slave_port_send_after(gw_slave_port_t *sp, uint32_t type, const void *data, size_t len, uint64_t delay_ns);
/* Any thread: queue a write of one ADU on its port. */
int slave_port_write(gw_slave_port_t *sp, const uint8_t *adu, size_t len);

/* ---- bus.c: the bus actor ----------------------------------------------------- */

typedef struct gw_bus gw_bus_t;

gw_bus_t *bus_new(gw_t *gw, unsigned index, char *err, size_t errcap);
gw_bus_t *bus_new_from(gw_t *gw, const config_t *cfg, unsigned index, char *err, size_t errcap);
void bus_free(gw_bus_t *bus);
/* Spawns the bus actor, then opens its port on the loop (the I/O loop instead
 * for a Modbus TCP/UDP device bus with framing = tcp: bus.c's bus_loop_for). */
int bus_start(gw_bus_t *bus, gw_loop_t *loop);
/* Any thread: queue a request; exactly one answer comes to req->origin. 0,
 * or the exception to answer with: 0x0B while the bus retires, else 0x0A. */
int bus_submit(gw_bus_t *bus, const line_request_t *req);   /* submit.c's; front ends call gw_submit */
/* A bus restarted in place by a reload (bus_restart.c has the argument; I/O
 * thread): bus_start's twin that holds requests until the port, made on
 * the loop bus_start would choose, first says up or down; the retire (closed runs on the
 * port's loop once the port is closed); the driver dropped before the
 * successor opens its own. */
int bus_start_in_place(gw_bus_t *bus, gw_loop_t *loop);
void bus_retire(gw_bus_t *bus, void (*closed)(gw_bus_t *bus), bool removed);
bool bus_removed(const gw_bus_t *bus);   /* retired with no successor (I/O thread) */
void bus_drop_driver(gw_bus_t *bus);
bool bus_retiring(const gw_bus_t *bus);
uint64_t bus_refused(const gw_bus_t *bus);   /* refused 0x0B while it retired */
unsigned bus_slot(const gw_bus_t *bus);
gw_t *bus_gw(const gw_bus_t *bus);
gw_loop_t *bus_home(const gw_bus_t *bus);
/* Restart bus index in place at gw->cfg's settings for it (bus_restart.c).
 * 0, or -1 and err: the running bus is kept. */
int bus_restart(gw_t *gw, unsigned index, char *err, size_t errcap);
/* A bus added at a free slot from gw->cfg->buses[slot] (the running copy
 * has it) and the devices on it in fresh (the file reloaded, laid out by
 * slot), or one retired for good; whether a slot is free for a new bus
 * (config_buses_to_slots asks: ctx is the gw_t). bus_restart.c. */
int bus_add(gw_t *gw, const config_t *fresh, unsigned slot, char *err, size_t errcap);
void bus_remove(gw_t *gw, unsigned slot);
bool gw_bus_slot_free(void *ctx, unsigned slot);
/* A reload changed the bus's line keys or the devices on it: the keys that
 * apply live (line_keys_t: the bus's timeout, retries, gap, tcp_first,
 * priority_hold_us; each slave's timeout, dead_after, back-off, widening)
 * set from cfg, by a message to the bus actor. 0, or -1: not sent. */
int bus_set_keys(gw_bus_t *bus, const config_t *cfg);
/* A reload moved the bus to fresh's port or serial settings (line_port_change_ok),
 * on the I/O thread: the port reopens there (bus.c). 0, or -1 and err. */
int bus_port_change(gw_bus_t *bus, const config_t *fresh, char *err, size_t errcap);
/* Whether bus_port_change can move a bus from run to c (line_port_change_ok). */
bool bus_port_change_ok(const config_bus_t *run, const config_bus_t *c);
const config_bus_t *bus_config(const gw_bus_t *bus);
line_bus_metrics_t *bus_metrics(gw_bus_t *bus);
line_slave_metrics_t *bus_slave_metrics(gw_bus_t *bus, unsigned slave);
void bus_describe(const gw_bus_t *bus, char *buf, size_t cap);
/* The driver's counters; I/O thread only (port.c updates them there). */
void bus_driver_stats(const gw_bus_t *bus, driver_stats_t *st);
/* A listen-only bus's engine (mode = listen), NULL on a bus rtugw masters. */
typedef struct gw_listen gw_listen_t;
const gw_listen_t *bus_listen(const gw_bus_t *bus);

/* ---- listen.c: a listen-only bus (mode = listen), run by its bus actor ----------- */

typedef struct gw_listen_stats {
    uint64_t frames, tag_updates, duplicates, noise_bytes;
    uint64_t by_kind[RTU_PAIR_KIND_COUNT];   /* answered, unanswered, doubtful, unpaired, damaged */
    uint64_t late;   /* answers later than the master's timeout as heard (doubtful, never used) */
} gw_listen_stats_t;
gw_listen_t *listen_new(gw_t *gw, unsigned bus, router_thread_t *router, char *err, size_t errcap);
void listen_free(gw_listen_t *l);
/* Bus actor only. Each returns when it wants listen_idle next (0: not until bytes come). */
uint64_t listen_bytes(gw_listen_t *l, const uint8_t *bytes, size_t n, uint64_t t_ns, uint64_t now);
uint64_t listen_idle(gw_listen_t *l, uint64_t now);
/* Any thread. */
void listen_get_stats(const gw_listen_t *l, gw_listen_stats_t *st);
/* I/O thread (the driver's counters): /status's ,"mode":... of one bus (a listen-only
 * bus adds "listen":{...}), and /metrics's rtugw_listen_* lines for every listen-only bus. */
void listen_status_json(const gw_bus_t *bus, struct evbuffer *b);
void listen_metrics_text(gw_t *gw, struct evbuffer *b);

/* ---- what the layers above keep here, as opaque handles ------------------------ */

/* front/ and web/ own these; gw_t holds them for daemon/, and web/ reads them through gw_fronts. */
typedef struct gw_tcp gw_tcp_t;
typedef struct gw_udp gw_udp_t;
typedef struct gw_http gw_http_t;
typedef struct gw_serial_slave gw_serial_slave_t;
typedef struct gw_mbaps gw_mbaps_t;
typedef struct gw_poller gw_poller_t;

/* poller.c */

/* What one poll read brought, for the poller's subscribers. */
struct gw_poll_result {
    const tags_plan_t *plan;
    size_t read;                  /* the read's index in plan */
    const uint8_t *pdu;           /* the bus's answer to it */
    size_t len;
    bool good;                    /* data of the length asked for */
    bool exception;               /* an exception (pdu[1] its code) */
    bool on_demand;               /* asked out of its rhythm (a written tag's read back): not part of a poll */
    uint64_t t_req_ns, now_ns;    /* submitted, answered (CLOCK_MONOTONIC) */
    int64_t wall_ms;              /* answered (CLOCK_REALTIME): what values are stamped with */
};

/*
 * Who hears poll reads: the cache (cache.c), the tag table (tags.c), MQTT
 * (north.c), each through this, in the order gw.c lists them; the poller
 * names none of them. Called on the poller's thread: they must not block
 * (north posts to the loop). overrun (may be NULL): read `read` was due
 * again before its last request was answered, and skips this round.
 */
struct gw_poll_subscriber {
    void (*answer)(void *ctx, const gw_poll_result_t *r);
    void (*overrun)(void *ctx, const tags_plan_t *plan, size_t read);
    void *ctx;
};
#define GW_POLL_SUBSCRIBERS_MAX 4

/* Item i of a good answer: register i, or bit i as 0/1. */
uint16_t poll_item(const gw_poll_result_t *r, unsigned i);
gw_poller_t *poller_new(gw_t *gw, const gw_poll_subscriber_t *subs, unsigned n_subs, char *err, size_t errcap);
void poller_free(gw_poller_t *p);
/* Which read of the plan a poll group belongs to, and how many reads there are. */
unsigned poller_read_of(const gw_poller_t *p, unsigned group);
unsigned poller_read_count(const gw_poller_t *p);
/* Plans again from the tag table, cfg's devices' limits and (groups_changed)
 * cfg's poll groups as they are now, after a reload: a new generation, the old reads' ticks and
 * answers ignored. Only where the poller runs on the calling thread (the I/O
 * thread). On failure nothing is polled (the old plan named what is gone). */
int poller_replan(gw_poller_t *p, bool groups_changed, char *err, size_t errcap);
/* Reads divided after exception 02, and plans built since the first. */
uint64_t poller_splits(const gw_poller_t *p);
/* Any thread: pause a bus's polling (its reads skip their ticks) or resume
 * it (a scan with pause_polling, scan.c); how many reads of the plan poll
 * the bus (0: not polled). */
void poller_pause_bus(gw_poller_t *p, unsigned bus, bool paused);
unsigned poller_bus_reads(const gw_poller_t *p, unsigned bus);
/* Any thread: poll the read that holds tag `tag` now (after a write), so its
 * new value reaches the subscribers without waiting for its interval. */
void poller_poll_tag_now(gw_poller_t *p, unsigned tag);

/* ---- scan.c: a scan of a bus from the API (POST /api/scan) --------------------------- */

/* I/O thread only, all of it: the scans' state is the I/O thread's, and
 * their answers come to it by loop_post. */
typedef struct gw_scans gw_scans_t;
typedef struct gw_scan_params {
    unsigned bus, first_id, last_id;   /* ids 1..247, first <= last */
    bool pause_polling;                /* a polled bus: its polling pauses during the scan */
} gw_scan_params_t;
/* Why a scan was not started (scan_start's result, the index of its counter). */
enum { GW_SCAN_STARTED = 0, GW_SCAN_BUSY, GW_SCAN_POLLED, GW_SCAN_LISTEN, GW_SCAN_DOWN, GW_SCAN_INVALID,
       GW_SCAN_REFUSALS };
extern const char *const gw_scan_refusal_names[GW_SCAN_REFUSALS];
gw_scans_t *scans_new(gw_t *gw);
void scans_free(gw_scans_t *s);
/* GW_SCAN_STARTED, or why not (nothing started; counted and logged). */
int scan_start(gw_scans_t *s, const gw_scan_params_t *p);
/* A refusal decided above (a bad request): counted here with the rest. */
void scan_refused(gw_scans_t *s, int why);
/* A bus added live at index bus: no scan of a bus removed from there shows. */
void scan_bus_added(gw_scans_t *s, unsigned bus);
/* Whether bus has had a scan (running or ended) since start. */
bool scan_exists(const gw_scans_t *s, unsigned bus);
/* The scan of bus as a JSON object: state, ids, tried, found, elapsed_s, polling. */
void scan_json(const gw_scans_t *s, unsigned bus, struct evbuffer *b);
/* The rtugw_scans_* lines of /metrics. */
void scan_metrics_text(const gw_scans_t *s, struct evbuffer *b);

/* ---- frames.c: the last frames of each bus ------------------------------------------ */

typedef struct gw_frames gw_frames_t;

/* NULL when capacity is 0 (nothing kept) or out of memory. */
gw_frames_t *frames_new(unsigned buses, unsigned capacity);
void frames_free(gw_frames_t *f);
/* The bus's actor: one frame it sent (tx) or heard. A copy, under the ring's
 * mutex; decoded only when served. */
void frames_record(gw_frames_t *f, unsigned bus, bool tx, const uint8_t *adu, size_t len);
/* I/O thread: a bus added live at index bus gets an empty ring at the
 * capacity in force (f may be NULL). -1: out of memory, none for it. */
int frames_add_bus(gw_frames_t *f, unsigned bus);
unsigned frames_capacity(const gw_frames_t *f);
/* A reload's frame_ring, while the actors record: each ring's slots
 * replaced under its lock, the newest frames kept; f stays valid (0 frees
 * the slots, records then do nothing); rings up to `buses` (the buses
 * running) given slots. -1: out of memory, unchanged. */
int frames_resize(gw_frames_t *f, unsigned buses, unsigned capacity);
/* I/O thread: the bus's frames after `since` (at most limit, the newest) as
 * the fields of a JSON object, "last" (the seq to pass as since next), "frames"
 * and what was missed or skipped. */
void frames_json(gw_frames_t *f, unsigned bus, uint64_t since, unsigned limit, struct evbuffer *b);
/* I/O thread: the rtugw_frames_* lines of /metrics (f may be NULL). */
void frames_metrics_text(gw_frames_t *f, const config_t *cfg, struct evbuffer *b);

/* north.c: the MQTT client's adapter, for the daemon's life; its session
 * runs while [mqtt] is there (north_session.c). I/O thread. */
typedef struct gw_north gw_north_t;
gw_north_t *gw_north_new(gw_t *gw, char *err, size_t errcap);
void gw_north_free(gw_north_t *gn);
/* A reload whose [mqtt] differs: the session stops and one starts at want
 * (NULL: [mqtt] removed, none). 0; -1 with err: want cannot start, the
 * settings before run again where they can (gw_north_running says). */
int gw_north_reload(gw_north_t *gn, const north_config_t *want, char *err, size_t errcap);
bool gw_north_running(const gw_north_t *gn);
/* The poller's subscriber for MQTT (its groups' values, its tags' values). */
gw_poll_subscriber_t gw_north_poll_subscriber(gw_north_t *gn);
/* Any thread (the poller): one poll group's answer; never blocks. */
void gw_north_poll_answer(gw_north_t *gn, unsigned group, bool good, uint8_t exception, const uint16_t *values,
                         unsigned count, unsigned function);
/* The poller's thread: read r of plan was answered (or failed) and applied to
 * the tag table; its tags go out. Never blocks. */
void gw_north_tags_answer(gw_north_t *gn, const tags_plan_t *plan, size_t r, bool on_demand, int64_t wall_ms);
/* After gw_tags_replace or devices appended, on the I/O thread: the devices
 * and their tags announced again. */
int gw_north_tags_changed(gw_north_t *gn);
/* After a reload changed cfg->polls, on the I/O thread: values of the old groups in flight are dropped,
 * and the new groups' items are announced (a removed group leaves its device's set). */
void gw_north_polls_changed(gw_north_t *gn);
/* Any thread: tags of one device heard on a listen-only bus (listen.c); they go out at once. */
void gw_north_tags_heard(gw_north_t *gn, const unsigned *tags, size_t n, int64_t wall_ms);
struct evbuffer;
void gw_north_metrics_text(gw_north_t *gn, struct evbuffer *b);

/* ---- the gateway (gw.c), as its parts see it ------------------------------------- */

/* The last reload (SIGHUP or the API), as /status shows it (last_reload) and
 * /metrics counts it: daemon/control.c writes it, web/http.c reads it, both
 * on the I/O thread. */
enum gw_reload_result { GW_RELOAD_APPLIED, GW_RELOAD_RESTART_NEEDED, GW_RELOAD_QUEUED, GW_RELOAD_INVALID,
                        GW_RELOAD_RESULTS };
typedef struct gw_reload_report {
    int64_t wall_ms;             /* when (gw_wall_ms); 0: no reload yet */
    char revision[17];           /* of the file read: FNV-1a 64, as the API's revision */
    enum gw_reload_result result;
    char applied[192];           /* what it applied, by name */
    char waits[576];             /* what waits: for a restart, then what is queued behind tag writes */
    char error[384];             /* its first error (an invalid file's: FILE:LINE: ...); "" none */
    unsigned warnings;           /* what check warns of in the file (tags_lint), logged */
} gw_reload_report_t;
/* "applied", "restart_needed", "queued", "invalid": /status, /metrics, STATUS=. */
const char *gw_reload_result_name(enum gw_reload_result r);

/* ---- gw_t, as the front ends and the web side see it (handles.c) ------------------ */

/*
 * gw_t is the daemon's wiring: its fields are defined in gateway/wiring.h,
 * which only gateway/ and daemon/ include (scripts/check-includes holds
 * front/ and web/ to that). The parts above get what they use through these,
 * each read-only, so that who writes a field stays the wiring's business.
 * Thread: the I/O thread for all of them, unless said otherwise. A reload
 * (daemon/control.c, on the I/O thread) changes the configuration in place
 * and may start a listener (gw_fronts), so a caller reads them again in each
 * callback rather than keeping them.
 */
const config_t *gw_config(const gw_t *gw);           /* the running configuration */
const gw_options_t *gw_options(const gw_t *gw);      /* fixed from start */
gw_loop_t *gw_loop(const gw_t *gw);                  /* the I/O thread's loop; any thread, fixed from start */
/* The buses: count and the bus of index i (< count); any thread, fixed from start. */
unsigned gw_bus_count(const gw_t *gw);
gw_bus_t *gw_bus(const gw_t *gw, unsigned i);
/* The buses in the file's order (the slots are not: config/slots.c): *k the
 * slot of the next one listed after *i that has a bus; false past the last.
 * I/O thread (it reads the running copy). GW_FOR_EACH_BUS(gw, k) walks them. */
bool gw_bus_next(const gw_t *gw, unsigned *i, unsigned *k);
#define GW_FOR_EACH_BUS(gw, k) for (unsigned k##_at = 0, k = 0; gw_bus_next((gw), &k##_at, &k);)
gw_tags_t *gw_tags(const gw_t *gw);                  /* the live tag table; any thread (its own lock) */
gw_tag_writes_t *gw_tag_writes(const gw_t *gw);      /* tag writes in flight */
gw_maps_t *gw_maps(const gw_t *gw);                  /* [map NAME]; any thread (vslave_owns) */
gw_scans_t *gw_scans(const gw_t *gw);
gw_poller_t *gw_poller(const gw_t *gw);
gw_north_t *gw_north(const gw_t *gw);                /* never NULL once started; a session only with [mqtt] */
gw_http_t *gw_http(const gw_t *gw);                  /* NULL without [http] */
uint64_t gw_started_ns(const gw_t *gw);              /* gw_now_ns() at start */
/* The front ends running now, for /status and /metrics (NULL: not enabled;
 * a reload may start one). mbaps is fixed from start: the TCP front end
 * reads it through gw_mbaps, on the I/O thread. */
typedef struct gw_fronts {
    gw_tcp_t *tcp, *rtu_tcp;
    gw_udp_t *udp;
    gw_mbaps_t *mbaps;
    gw_serial_slave_t *const *serial_slaves;
    unsigned serial_slave_count;
} gw_fronts_t;
gw_fronts_t gw_fronts(const gw_t *gw);
gw_mbaps_t *gw_mbaps(const gw_t *gw);
/* The frame ring web_start makes ([http] frame_ring), published once the
 * buses run: their actors read it for every frame (gw_frame_seen, acquire). */
gw_frames_t *gw_frames(const gw_t *gw);
void gw_frames_publish(gw_t *gw, gw_frames_t *f);
/* The reload SIGHUP runs (daemon/control.c's), for the API after it wrote
 * the file: web/ cannot call daemon/. No-op before the daemon set it. */
void gw_reload(gw_t *gw);
/* What the last reload did: its report, what waits for a restart, what is
 * queued behind tag writes ("" none), and the reloads so far by result. */
const gw_reload_report_t *gw_last_reload(const gw_t *gw);
const char *gw_restart_needed(const gw_t *gw);
const char *gw_reload_queued(const gw_t *gw);
uint64_t gw_reloads(const gw_t *gw, enum gw_reload_result r);
/* The parts /status and /metrics show, in their order (report.h): built by
 * the daemon, iterated by web/. Fixed from start. */
const gw_report_t *gw_report(const gw_t *gw);

/* ---- the gateway's parts of the report table (report.h; ctx: gw) ---------------- */

gw_report_part_t gw_report_uptime(gw_t *gw);      /* report.c: uptime_s */
gw_report_part_t gw_report_buses(gw_t *gw);       /* report_bus.c: "buses", rtugw_bus_* */
gw_report_part_t gw_report_devices(gw_t *gw);     /* report_bus.c: rtugw_device_* */
gw_report_part_t gw_report_listen(gw_t *gw);      /* report.c: rtugw_listen_* (listen.c) */
gw_report_part_t gw_report_polls(gw_t *gw);       /* report_polls.c: "polls" (the cache's snapshot) */
gw_report_part_t gw_report_frame_ring(gw_t *gw);  /* report.c: "frame_ring" */
gw_report_part_t gw_report_frames(gw_t *gw);      /* report.c: rtugw_frames_* (frames.c) */
gw_report_part_t gw_report_router(gw_t *gw);      /* report.c: rtugw_router_* (runtime.c) */
gw_report_part_t gw_report_actors(gw_t *gw);      /* report.c: rtugw_actor_* (runtime.c) */
gw_report_part_t gw_report_north(gw_t *gw);       /* report.c: rtugw_mqtt_* (north.c) */
gw_report_part_t gw_report_maps(gw_t *gw);        /* report.c: rtugw_map_* (vslave.c) */
gw_report_part_t gw_report_scans(gw_t *gw);       /* report.c: rtugw_scans_* (scan.c) */
gw_report_part_t gw_report_reload(gw_t *gw);      /* report_reload.c: "last_reload", "restart_needed", its counts */

#endif
