/*
 * north/internal.h -- what north's files share. Not included outside north/.
 *
 * The parts, top to bottom (calls go down, never up):
 *   north.c    north_new/free, publishing values, device status, stats
 *   values.c   the tag store: change and deadband, the interval timer, and
 *              the JSON payloads (json, json-per-tag)
 *   sparkplug.c  format = sparkplug: the Sparkplug B edge node session
 *              (births, deaths, seq and bdSeq, rebirth, primary host STATE,
 *              NCMD/DCMD); values.c hands it what is to be published
 *   sparkplug_cmd.c  NCMD and DCMD in: a rebirth asked for, DCMD metrics
 *              as writes (through hooks->write)
 *   sparkplug_codec.c  the protobuf-c encoding and decoding of Sparkplug
 *              payloads, the only file that includes the generated header
 *   writes.c   PREFIX/GATEWAY/write: json-c parsing, the open writes, answers
 *   discovery.c  Home Assistant MQTT discovery documents (ha_discovery)
 *   remote.c   the configuration through the broker (remote_config):
 *              config/set, /get, /result, through hooks->config_set
 *   client.c   the session: libmosquitto on the event_base, DNS, TLS, will
 *              and status, back-off
 *   queue.c    every publication: QoS 1 held until its PUBACK, in order,
 *              bounded; the window handed to libmosquitto
 *   spool.c    the disk spool under the queue (segment files)
 *   spool_mark.c  the spool's acked mark (its file, written in place)
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
    uint64_t damaged;        /* damaged stretches passed, acked marks refused */
} spool_stats_t;

/* Opens (creating it) dir; reads what a previous run left, logging to
 * owner what it finds damaged. *next_seq: the first data sequence number
 * not used by it. 0, or -errno with err. */
int spool_open(north_t *owner, const char *dir, unsigned max_bytes, north_spool_t **out, uint64_t *next_seq,
               char *err, size_t errcap);
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

/* ---- spool_mark.c ------------------------------------------------------------------- */

/* Sequence numbers and record ids are JSON numbers: past 2^53 a subscriber
 * in JavaScript can no longer tell consecutive ones apart, and at a million
 * messages a second the gateway takes 285 years to get there. A mark or a
 * record holding more is damage, not history. */
#define SPOOL_LIMIT (1ull << 53)
#define SPOOL_FNV_BASIS 2166136261u

/* FNV-1a of data, continuing from h (SPOOL_FNV_BASIS to start): the check
 * of a record and of a slot of the mark. */
uint32_t spool_fnv1a(const void *data, size_t len, uint32_t h);

/* The acked mark: "every record <= acked is acknowledged; seq is above every
 * data sequence number ever assigned", in the file dir/acked. */
typedef struct spool_mark {
    char path[NORTH_PATH_MAX + 16];
    int fd;                  /* -1 until the first write in place */
    uint64_t gen;            /* of the newest slot written or read */
    bool dirty;              /* a slot written since the last fdatasync */
} spool_mark_t;

void spool_mark_init(spool_mark_t *m, const char *dir);
/* The newest valid slot: 1 with *acked and *seq; 0: no mark (no file, or
 * empty); -1: refused (no slot parses, or a value past SPOOL_LIMIT), with
 * the file's first line (printable) in text and the reason in *why. */
int spool_mark_read(spool_mark_t *m, uint64_t *acked, uint64_t *seq, char *text, size_t cap, const char **why);
/* A fresh file, both slots, through a temporary file and rename. 0 or -errno. */
int spool_mark_reset(spool_mark_t *m, uint64_t acked, uint64_t seq);
/* In place into the slot after the newest; durable: fdatasync too. 0 or
 * -errno (errno set); m->gen moves once the slot is written, even if the
 * fdatasync then fails. */
int spool_mark_write(spool_mark_t *m, uint64_t acked, uint64_t seq, bool durable);
void spool_mark_close(spool_mark_t *m);

/* ---- the client's state (shared by its files) ----------------------------------------- */

typedef enum north_state {
    NS_WAITING = 0,          /* back-off timer pending */
    NS_RESOLVING,
    NS_CONNECTING,           /* socket open, no CONNACK yet */
    NS_CONNECTED,
    NS_STOPPED,
} north_state_t;

#define NORTH_WINDOW 64              /* QoS 1 publications in flight at once */
#define NORTH_PENDING_WRITES NORTH_WRITE_MAX_ITEMS   /* writes waiting for their answer */
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

/* The tag store (values.c keeps it; sparkplug.c reads it and keeps its
 * own fields here). */
typedef struct north_tag {
    char *name;
    char *unit;
    north_kind_t kind;
    north_type_t type;
    double number;
    int64_t i;                   /* exact, for the integer types */
    uint64_t u;
    bool flag;
    bool stale;
    bool has_deadband;           /* the tag's own deadband, else [mqtt] deadband */
    double deadband;
    bool writable;               /* as north_define_device said */
    bool poll_item;              /* defined as a poll group's item: never announced (discovery.c) */
    char *text;                  /* a string's value; a number's text (north_value_t.number_text) */
    char error[48];
    bool published;              /* p_* hold what went out last */
    north_kind_t p_kind;
    double p_number;
    int64_t p_i;
    uint64_t p_u;
    bool p_flag;
    bool p_stale;
    char *p_text;
    char p_error[48];
    bool fresh;                  /* handed over since the last interval tick */
    bool force;                  /* goes out with the next hand-over, changed or not (after a DCMD) */
    uint64_t alias;              /* Sparkplug: a number of its own over the node, from 1 */
    uint32_t sp_datatype;        /* Sparkplug: the datatype its device's last DBIRTH declared; 0: none */
    unsigned def_round;          /* the define round that last named it (north->def_round); 0: never defined */
} north_tag_t;

typedef struct north_device {
    char name[NORTH_NAME_MAX];
    north_t *north;
    north_publish_mode_t publish;
    unsigned interval_ms;
    struct event *ev_interval;   /* interval mode only */
    north_map_t tags;
    north_tag_t **list;          /* in order of first arrival */
    size_t n, cap;
    north_tag_t **pick;          /* scratch: the tags one message carries */
    bool fresh;
    uint64_t timestamp_ms;
    signed char sp_up;           /* Sparkplug: -1 not told, 0 down, 1 up (north_device_status) */
    bool sp_born;                /* Sparkplug: its DBIRTH went out in this birth of the node */
    bool sp_has_values;          /* Sparkplug: values were handed over */
    bool set_changed;            /* a tag defined in this define round was new to it */
} north_device_t;

typedef struct north_sparkplug north_sparkplug_t;
typedef struct north_remote north_remote_t;

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
    /* the broker of this attempt (brokers = ..., else host and port) */
    const char *host;
    unsigned port;
    unsigned broker;                 /* its index in cfg.brokers */
    bool v5;                         /* this attempt speaks MQTT v5 */
    bool v3_only[NORTH_BROKERS_MAX]; /* the broker refused v5: 3.1.1 from now on */
    bool fallback;                   /* the attempt failed for v5 only: again at once, in 3.1.1 */
    bool moving;                     /* leaving this broker on purpose (the primary host went offline) */
    char revision[17];               /* the configuration's (user property "revision"); "" unknown */
    uint32_t puback_refused;         /* v5 PUBACK reason codes >= 0x80 logged: one bit per code & 31 */
    /* publications */
    north_queue_t q;
    north_spool_t *spool;
    struct event *ev_sync;
    uint64_t spool_failing;          /* publications the spool failed since it last wrote one */
    uint64_t spool_failing_dropped;  /* of them, dropped (older ones wait on disk) */
    uint64_t spool_failing_logged_ns;
    /* values */
    north_map_t devices;
    north_device_t **device_list;
    size_t n_devices, cap_devices, n_tags;
    struct evbuffer *scratch;        /* one payload at a time */
    uint64_t seq;                    /* the last data sequence number used */
    bool warned_tags;
    uint64_t next_alias;             /* Sparkplug: the alias of the next new tag */
    unsigned def_round;              /* the current define round (north_define_done ends one), from 1 */
    north_sparkplug_t *sp;           /* format = sparkplug: the edge node's session */
    north_remote_t *remote;          /* remote_config: config/set, get, result */
    /* writes */
    north_pending_t pending[NORTH_PENDING_WRITES];
    uint32_t next_gen;
    north_stats_t st;
};

/* What a client hands its successor (north_replace, replace.c). */
typedef struct north_carry {
    north_msg_t *head;               /* QoS 1 publications not acknowledged, oldest first */
    uint64_t seq;                    /* the last data sequence number used */
    bool has_bdseq;                  /* Sparkplug: bdseq_next is the next CONNECT's */
    uint64_t bdseq_next;
    uint32_t next_gen;               /* write tokens: no answer meant for old reaches a new write */
    north_stats_t st;                /* counters go on */
} north_carry_t;

/* north.c */
/* north_new, taking over carry (NULL: nothing) before it connects. */
north_t *north_start(struct event_base *base, const north_config_t *cfg, const north_hooks_t *hooks,
                     const north_carry_t *carry, char *err, size_t errcap);
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
/* Hands one publication to libmosquitto; *mid its id. 0 or a MOSQ_ERR_*.
 * seq: a data message's (v5: message expiry and user properties), else 0. */
int client_send(north_t *n, const char *topic, const void *payload, size_t len, int qos, bool retain, uint64_t seq,
                int *mid);
/* Leaves this broker for the next of the list (Sparkplug: the primary host
 * went offline here): NDEATH and DISCONNECT, then the next one at once. */
void client_move_on(north_t *n, const char *why);
/* After sending outside libmosquitto's callbacks: arm the write event. */
void client_flush_later(north_t *n);
/* queue_pump() from the loop, after the current libmosquitto call. */
void client_pump_later(north_t *n);
/* A QoS 1 subscription on the current session. */
void client_subscribe(north_t *n, const char *topic);

/* values.c */
int values_start(north_t *n);
int values_define_device(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                         const north_device_opts_t *opts);
int values_publish(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *v, size_t count);
void values_free(north_t *n);
/* north_define_done: tags not named in this round leave their devices. */
void values_define_done(north_t *n);
/* A JSON number ("null" for NaN and infinities) into buf (>= 32 bytes). */
void values_format_number(char *buf, size_t cap, double v);
/* buf gets the evbuffer's text; a json_quote'd string appended. */
void values_add_quoted(struct evbuffer *b, const char *s);
/* One value as a data message writes it (a write's answer carries the value read back). */
void values_add_one(struct evbuffer *b, const north_value_t *v);

/* The device of that name, or NULL. */
north_device_t *values_find_device(north_t *n, const char *name);
/* The tag of d with that name or (name NULL) that alias, or NULL. */
north_tag_t *values_find_tag(north_device_t *d, const char *name, uint64_t alias);
/* Marks t published (what went out last is what it holds now). */
void values_mark_published(north_tag_t *t);

/* writes.c */
void writes_on_message(north_t *n, const void *payload, size_t len);
void writes_stop(north_t *n);
/* A slot for a write handed to hooks->write (note: what the answer is
 * logged with). 0, or -1 when every slot is taken. */
int writes_take_slot(north_t *n, const char *note, uint32_t *token);

/* remote.c (cfg.remote_config): PREFIX/GATEWAY/config/... */
int remote_start(north_t *n, char *err, size_t errcap);
void remote_free(north_t *n);
/* CONNACK: the subscriptions and the {"op": "start"} result. */
void remote_on_connect(north_t *n);
/* config/set or config/get: true when it was one of them. */
bool remote_on_message(north_t *n, const char *topic, const void *payload, size_t len);

/* discovery.c (cfg.ha_discovery): Home Assistant's documents */
void discovery_announce(north_t *n);
/* t (defined) leaves d: its entity is removed (empty retained document). */
void discovery_remove(north_t *n, const north_device_t *d, const north_tag_t *t);
/* HA_PREFIX/status: true when it was that topic. */
bool discovery_on_message(north_t *n, const char *topic, const void *payload, size_t len);
void discovery_subscribe(north_t *n);

/* sparkplug.c (cfg.format == NORTH_FORMAT_SPARKPLUG only) */
int sparkplug_start(north_t *n, char *err, size_t errcap);
void sparkplug_free(north_t *n);
/* The will of the next CONNECT: NDEATH with the next bdSeq (attempt: a real
 * CONNECT; else the current bdSeq: a check of the options, or the NDEATH a
 * clean stop publishes before DISCONNECT). */
int sparkplug_will(north_t *n, bool attempt, char *topic, size_t topic_cap, void *payload, size_t cap,
                   size_t *len);
/* The TCP connection is up: the CONNECT with this will is on its way, so
 * the next will takes the next bdSeq. */
void sparkplug_connect_sent(north_t *n);
/* CONNACK: the subscriptions, and the births unless a primary host is away. */
void sparkplug_on_connect(north_t *n);
void sparkplug_session_lost(north_t *n);
/* A message on a subscribed topic; true when it was Sparkplug's. */
bool sparkplug_on_message(north_t *n, const char *topic, const void *payload, size_t len);
/* values.c: k tags of d that changed (or all, poll/interval), at ts. */
void sparkplug_emit(north_t *n, north_device_t *d, north_tag_t **tags, size_t k, uint64_t ts);
int sparkplug_device_status(north_t *n, const char *device, bool online, uint64_t ts);
/* d's metric set changed: DDEATH if it is born, its kept DDATA dropped (it
 * names aliases the next DBIRTH may not have); born again with its next values. */
void sparkplug_device_reset(north_t *n, north_device_t *d);
uint64_t sparkplug_seq(const north_t *n);
/* The bdSeq the next CONNECT takes, and setting it (north_replace's carry). */
uint64_t sparkplug_bdseq_next(const north_t *n);
void sparkplug_set_bdseq_next(north_t *n, uint64_t v);
/* The Sparkplug datatype of a tag's metric (its type, else its kind). */
uint32_t sparkplug_datatype(const north_tag_t *t);
#define SP_REBIRTH "Node Control/Rebirth"

/* sparkplug_cmd.c: an NCMD, or a DCMD to device d (NULL: no such device,
 * which is counted and ignored). True when the NCMD asks for the births. */
bool sparkplug_command(north_t *n, bool ncmd, north_device_t *d, const void *payload, size_t len);
/* A DCMD write's answer (hooks->write's): counted and logged. */
void sparkplug_write_done(north_t *n, const char *note, int error, const char *message);

/* sparkplug_codec.c */
enum {
    SP_INT8 = 1, SP_INT16, SP_INT32, SP_INT64, SP_UINT8, SP_UINT16, SP_UINT32, SP_UINT64, SP_FLOAT, SP_DOUBLE,
    SP_BOOLEAN, SP_STRING, SP_DATETIME, SP_TEXT,
};
typedef enum sp_vtype { SPV_NONE = 0, SPV_INT, SPV_LONG, SPV_FLOAT, SPV_DOUBLE, SPV_BOOL, SPV_STRING } sp_vtype_t;

/* One metric, out or in. */
typedef struct sp_metric {
    const char *name;        /* NULL: by alias only */
    bool has_alias;
    uint64_t alias;
    bool has_timestamp;
    uint64_t timestamp;
    uint32_t datatype;       /* 0: left out */
    bool is_historical;
    bool is_null;
    int quality;             /* out: < 0 no "Quality" property, else its Int32 value */
    const char *error;       /* out: NULL, or a "Reason" String property (why there is no value) */
    sp_vtype_t vtype;
    uint32_t int_value;
    uint64_t long_value;
    float float_value;
    double double_value;
    bool boolean_value;
    const char *string_value;
    const char *refused;     /* in: why the metric is refused whatever its name says (a NUL in it), or NULL */
} sp_metric_t;

/* Encodes {timestamp, metrics} (no seq: the session appends it when the
 * message goes out) into b. 0, or -ENOMEM. */
int spc_encode(struct evbuffer *b, uint64_t timestamp, const sp_metric_t *m, size_t count);
/* Appends field 3 (seq) to an encoded payload in b. */
void spc_append_seq(struct evbuffer *b, uint64_t seq);
/* Decodes a command payload; each metric to fn (its strings live until
 * the return). 0; -EINVAL for a payload that is not one, -E2BIG for one of
 * more than max_metrics metrics (then fn sees none). */
int spc_decode(const void *payload, size_t len, size_t max_metrics, void (*fn)(void *ctx, const sp_metric_t *m),
               void *ctx);

#endif
