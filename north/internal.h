/*
 * north/internal.h -- what north's files share. Not included outside north/.
 *
 * The parts, top to bottom (calls go down, never up):
 *   north.c    north_new/free, publishing values, device status, stats
 *   values.c   the tag store: change and deadband, the interval timer, and
 *              the JSON payloads (json, json-per-tag)
 *   writes.c   PREFIX/GATEWAY/write: json-c parsing, the open writes, answers
 *   client.c   the session: libmosquitto on the event_base, DNS, TLS, will
 *              and status, back-off
 *   queue.c    every publication: QoS 1 held until its PUBACK, in order,
 *              bounded; the window handed to libmosquitto
 *   spool.c    the disk spool under the queue (segment files)
 *   map.c      a string-keyed hash table
 *   module.c   the table rtugw-mqtt.so exports; load.c, the loader, is the
 *              only file rtugw links
 * Everything runs on the event_base's thread.
 */
#ifndef RTUGW_NORTH_INTERNAL_H
#define RTUGW_NORTH_INTERNAL_H

#include "north/north.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event;
struct evbuffer;
struct evdns_base;
struct evdns_getaddrinfo_request;
struct mosquitto;

/* ---- map.c ------------------------------------------------------------------------ */

typedef struct north_map {
    struct map_slot *slots;
    size_t cap, count;       /* cap: a power of two, or 0 */
} north_map_t;

/* The value stored under key, or NULL. */
void *map_get(const north_map_t *m, const char *key);
/* Stores value under key (the map keeps a copy of key). 0 or -ENOMEM. */
int map_put(north_map_t *m, const char *key, void *value);
void map_free(north_map_t *m, void (*free_value)(void *));

/* ---- spool.c ------------------------------------------------------------------------ */

typedef struct north_msg {
    struct north_msg *next;
    uint64_t id;             /* spool record id; 0: not spooled */
    uint64_t seq;            /* data sequence number; 0: not a data message */
    int mid;                 /* libmosquitto's id while in flight on this session; 0: not sent */
    uint8_t qos;
    bool retain;
    bool acked;
    uint16_t topic_len;
    uint32_t payload_len;
    char data[];             /* topic, NUL, payload */
} north_msg_t;

static inline const char *msg_topic(const north_msg_t *m) { return m->data; }
static inline const char *msg_payload(const north_msg_t *m) { return m->data + m->topic_len + 1; }
/* A new message (malloc); NULL when out of memory. */
north_msg_t *msg_new(const char *topic, size_t topic_len, const void *payload, size_t len, int qos, bool retain,
                     uint64_t seq);

typedef struct north_spool north_spool_t;

typedef struct spool_stats {
    uint64_t records, bytes, dropped;
} spool_stats_t;

/* Opens (creating it) dir; reads what a previous run left. *next_seq: the
 * first data sequence number not used by it. 0, or -errno with err. */
int spool_open(const char *dir, unsigned max_bytes, north_spool_t **out, uint64_t *next_seq, char *err,
               size_t errcap);
/* Appends m, gives it its id. 0, or -errno (the message stays memory-only). */
int spool_append(north_spool_t *s, north_msg_t *m);
/* Records on disk not yet read back into memory. */
bool spool_behind(const north_spool_t *s);
/* The reader is at the end: what was just appended is also in memory. */
void spool_caught_up(north_spool_t *s);
/* The next unread record (malloc), NULL at the end or on a damaged record. */
north_msg_t *spool_read(north_spool_t *s);
/* Every record with an id <= id is acknowledged. */
void spool_ack(north_spool_t *s, uint64_t id);
/* fdatasync of what was appended since the last one. */
void spool_flush(north_spool_t *s);
/* fsync, the acknowledged mark (with next_seq), acknowledged segments removed. */
void spool_sync(north_spool_t *s, uint64_t next_seq);
void spool_get_stats(const north_spool_t *s, spool_stats_t *st);
const char *spool_last_error(const north_spool_t *s);
void spool_close(north_spool_t *s, uint64_t next_seq);

/* ---- the client's state (shared by its files) ----------------------------------------- */

typedef enum north_state {
    NS_WAITING = 0,          /* back-off timer pending */
    NS_RESOLVING,
    NS_CONNECTING,           /* socket open, no CONNACK yet */
    NS_CONNECTED,
    NS_STOPPED,
} north_state_t;

#define NORTH_WINDOW 64              /* QoS 1 publications in flight at once */
#define NORTH_PENDING_WRITES 64      /* writes waiting for their answer */
#define NORTH_MAX_TAGS (1u << 20)

typedef struct north_pending {
    uint32_t gen;                    /* 0: free */
    char uuid[72];
    bool has_uuid;
} north_pending_t;

typedef struct north_queue {
    north_msg_t *head, *tail;        /* oldest first */
    north_msg_t *next_send;          /* first not handed to this session */
    unsigned count, inflight;
    uint64_t bytes;
} north_queue_t;

typedef struct north_device north_device_t;

struct north {
    north_config_t cfg;
    north_hooks_t hooks;
    struct event_base *base;
    /* session */
    struct mosquitto *mosq;
    struct evdns_base *dns;
    struct evdns_getaddrinfo_request *dns_req;
    north_state_t state;
    int sock;
    struct event *ev_read, *ev_write, *ev_tick, *ev_retry, *ev_lost, *ev_pump;
    bool write_armed, lost, tcp_up;
    int lost_rc;
    unsigned attempt;                /* failures since the last lasting session */
    uint64_t attempt_ns, connected_ns;
    char password[256];
    char reason[512];                /* of the current attempt's failure, if known */
    char last_reason[512];           /* the last failure logged */
    char mosq_error[256];            /* libmosquitto's last error line, this attempt */
    char topic_status[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 16];
    char topic_write[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 16];
    char topic_response[NORTH_PREFIX_MAX + NORTH_NAME_MAX + 32];
    uint64_t rng;
    /* publications */
    north_queue_t q;
    north_spool_t *spool;
    struct event *ev_sync;
    /* values */
    north_map_t devices;
    north_device_t **device_list;
    size_t n_devices, cap_devices, n_tags;
    struct evbuffer *scratch;        /* one payload at a time */
    uint64_t seq;                    /* the last data sequence number used */
    bool warned_tags;
    /* writes */
    north_pending_t pending[NORTH_PENDING_WRITES];
    uint32_t next_gen;
    north_stats_t st;
};

/* north.c */
void north_log(north_t *n, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t north_mono_ns(void);

/* queue.c: every publication goes through queue_publish. */
int queue_publish(north_t *n, const char *topic, const void *payload, size_t len, int qos, bool retain,
                  uint64_t seq);
void queue_pump(north_t *n);
void queue_on_puback(north_t *n, int mid);
void queue_session_lost(north_t *n);
void queue_free(north_t *n);

/* client.c */
int client_start(north_t *n, char *err, size_t errcap);
void client_stop(north_t *n);     /* offline status, DISCONNECT, bounded flush */
bool client_connected(const north_t *n);
/* Hands one publication to libmosquitto; *mid its id. 0 or a MOSQ_ERR_*. */
int client_send(north_t *n, const char *topic, const void *payload, size_t len, int qos, bool retain, int *mid);
/* After sending outside libmosquitto's callbacks: arm the write event. */
void client_flush_later(north_t *n);
/* queue_pump() from the loop, after the current libmosquitto call. */
void client_pump_later(north_t *n);

/* values.c */
int values_start(north_t *n);
int values_define_device(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                         const north_device_opts_t *opts);
int values_publish(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *v, size_t count);
void values_free(north_t *n);
/* A JSON number ("null" for NaN and infinities) into buf (>= 32 bytes). */
void values_format_number(char *buf, size_t cap, double v);
/* buf gets the evbuffer's text; a json_quote'd string appended. */
void values_add_quoted(struct evbuffer *b, const char *s);

/* writes.c */
void writes_on_message(north_t *n, const void *payload, size_t len);
void writes_stop(north_t *n);

#endif
