/*
 * north/north.h -- the MQTT northbound client: publishes named values of
 * named devices to a broker and takes write requests from it. Owns: the
 * client, Sparkplug B, the spool, all in the module rtugw-mqtt.so, and the
 * loader that finds it (north_module_load, the only part rtugw links). May
 * call: json/, module/ (the loader's search order), libmosquitto, libevent,
 * json-c and protobuf-c.
 *
 * It runs on an event_base it is given (the gateway's I/O thread) and has
 * no thread of its own: libmosquitto is driven through mosquitto_socket(),
 * mosquitto_loop_read/write/misc() and mosquitto_want_write(). Every call
 * below is made on that thread.
 *
 * What it promises (docs/mqtt.md has the details):
 *   - QoS 1 publications stay in a bounded buffer (and optionally a disk
 *     spool) until the broker's PUBACK for them arrives; after a reconnect
 *     they go out in order, before newer ones; when full, the oldest are
 *     dropped and counted;
 *   - every data message carries a sequence number that grows by one per
 *     message, per gateway (and, with a spool, across restarts);
 *   - a retained status with a will tells the fleet whether the gateway is
 *     online; connection failures are logged once per reason and retried
 *     with exponential back-off and jitter (0.5 s to 30 s);
 *   - writes from PREFIX/GATEWAY/write get exactly one answer on
 *     PREFIX/GATEWAY/write/response.
 *
 * The configuration is plain data (config/ fills it from [mqtt]); the rest
 * is opaque.
 */
#ifndef RTUGW_NORTH_NORTH_H
#define RTUGW_NORTH_NORTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define NORTH_HOST_MAX 256
#define NORTH_PATH_MAX 256
#define NORTH_ID_MAX 128          /* client id, user name */
#define NORTH_NAME_MAX 64         /* gateway, device and tag names */
#define NORTH_PREFIX_MAX 128
#define NORTH_BROKERS_MAX 8       /* brokers = a:1883, b:1883, ... */
#define NORTH_WRITE_MAX_VALUES 123   /* one FC 16 request */
#define NORTH_WRITE_MAX_ITEMS 64     /* writes one request may carry: the writes that can wait for answers */

typedef enum north_publish_mode {
    NORTH_PUBLISH_CHANGE = 0,     /* a value that moved beyond the deadband, or changed quality */
    NORTH_PUBLISH_POLL,           /* every value, every time it is handed over */
    NORTH_PUBLISH_INTERVAL,       /* the latest values, every interval_ms */
} north_publish_mode_t;

typedef enum north_format {
    NORTH_FORMAT_JSON = 0,        /* PREFIX/GATEWAY/DEVICE/data: one message per device and hand-over */
    NORTH_FORMAT_JSON_PER_TAG,    /* PREFIX/GATEWAY/DEVICE/TAG: one message per value */
    NORTH_FORMAT_SPARKPLUG,       /* Sparkplug B: spBv1.0/GROUP/DDATA/EDGE/DEVICE (docs/sparkplug.md) */
} north_format_t;

typedef struct north_config {
    char host[NORTH_HOST_MAX];
    unsigned port;
    char client_id[NORTH_ID_MAX];
    char username[NORTH_ID_MAX];
    char password_file[NORTH_PATH_MAX];  /* its first line is the password */
    bool tls;
    char ca_file[NORTH_PATH_MAX];        /* empty: the system's CA directory */
    char cert_file[NORTH_PATH_MAX];      /* client certificate (with key_file) */
    char key_file[NORTH_PATH_MAX];
    bool verify;                         /* the broker's certificate and name */
    unsigned keepalive_s;
    unsigned qos;                        /* data: 0 or 1 */
    unsigned status_qos;                 /* status and write responses: 0 or 1 */
    char topic_prefix[NORTH_PREFIX_MAX];
    char gateway[NORTH_NAME_MAX];
    north_publish_mode_t publish;
    double deadband;                     /* NORTH_PUBLISH_CHANGE: absolute, in the value's units */
    unsigned interval_ms;                /* NORTH_PUBLISH_INTERVAL */
    bool clean_session;
    north_format_t format;
    unsigned buffer_messages;            /* in memory, QoS 1 waiting for their PUBACK */
    unsigned buffer_bytes;
    char spool_dir[NORTH_PATH_MAX];      /* empty: no disk spool */
    unsigned spool_max_bytes;
    unsigned spool_fsync_ms;             /* 0: fsync after every message */
    unsigned max_write_bytes;            /* largest write request payload taken */
    unsigned max_write_items;            /* writes in one request (a JSON list, a Sparkplug command), 1..64 */
    bool read_only;                      /* writes are refused (NORTH_WRITE_READ_ONLY) */
    /* format = sparkplug: topic levels (no '/', '+', '#') */
    char group_id[NORTH_NAME_MAX];
    char edge_node_id[NORTH_NAME_MAX];   /* the gateway name unless set */
    char primary_host_id[NORTH_NAME_MAX];/* empty: no primary host; else publish while it is online */
    /* MQTT v5 (protocol = 5): what the session asks of the broker */
    unsigned protocol;                   /* 5: MQTT v5, 3.1.1 where the broker refuses it; 4: 3.1.1 only */
    unsigned session_expiry_s;           /* v5, clean_session = false: how long the broker keeps the session */
    unsigned message_expiry_s;           /* v5: data publications the broker may drop after this; 0: never */
    /* brokers = host:port, ...: tried in order (empty: host and port) */
    unsigned n_brokers;
    struct north_broker { char host[NORTH_HOST_MAX]; unsigned port; } brokers[NORTH_BROKERS_MAX];
    /* PREFIX/GATEWAY/config/set, /get, /result (remote_config = on) */
    bool remote_config;
    unsigned max_config_bytes;           /* largest config/set payload taken */
    /* Home Assistant MQTT discovery (ha_discovery = on) */
    bool ha_discovery;
    char ha_prefix[NORTH_PREFIX_MAX];
} north_config_t;

/* ---- values --------------------------------------------------------------------- */

typedef enum north_kind { NORTH_NUMBER = 0, NORTH_BOOL, NORTH_STRING } north_kind_t;

/*
 * What a value is, beyond its kind: a tag's type (tags/). JSON prints the
 * integer types exactly (64 bits included) from i or u; Sparkplug takes its
 * datatype from it. NORTH_TYPE_AUTO: from the kind (number -> double).
 */
typedef enum north_type {
    NORTH_TYPE_AUTO = 0,
    NORTH_TYPE_INT16,
    NORTH_TYPE_UINT16,
    NORTH_TYPE_INT32,
    NORTH_TYPE_UINT32,
    NORTH_TYPE_INT64,
    NORTH_TYPE_UINT64,
    NORTH_TYPE_FLOAT,
    NORTH_TYPE_DOUBLE,
    NORTH_TYPE_BOOL,
    NORTH_TYPE_STRING,
} north_type_t;

typedef struct north_value {
    const char *tag;         /* unique within its device; no '/', '+', '#' */
    north_kind_t kind;
    double number;
    bool flag;
    const char *text;
    const char *number_text; /* a number as the tag formatter wrote it (tags_format): JSON prints
                                it as it is, so HTTP, MQTT and the page agree; NULL: north's own */
    const char *unit;        /* NULL: none */
    const char *error;       /* NULL: good; else why there is no value ("timeout", "exception 02") */
    north_type_t type;       /* AUTO for untyped values (poll groups) */
    int64_t i;               /* INT16..INT64: the exact value (number holds it too) */
    uint64_t u;              /* UINT16..UINT64: the exact value */
    bool stale;              /* good, but older than twice its interval */
    bool has_deadband;       /* deadband below is the tag's own, not [mqtt] deadband */
    double deadband;
} north_value_t;

/*
 * A device's tags, announced once before its values (Sparkplug's DBIRTH
 * describes every metric before the first value; JSON uses the unit).
 * Tags handed over later that were not defined are still published.
 */
typedef struct north_metric_def {
    const char *tag;
    north_type_t type;
    const char *unit;        /* NULL: none */
    bool writable;
    bool poll_item;          /* a poll group's item (POLLNAME.N): part of the device's set (its DBIRTH, what a
                                reload drops) but no tag: never announced to Home Assistant */
} north_metric_def_t;

/* How one device's values go out, over the configuration's publish and
 * interval_ms (north_define_device with NULL: the configuration's). */
typedef struct north_device_opts {
    north_publish_mode_t publish;
    unsigned interval_ms;        /* NORTH_PUBLISH_INTERVAL: 100..86400000 */
} north_device_opts_t;

/* ---- writes ----------------------------------------------------------------------- */

/* Answer codes on PREFIX/GATEWAY/write/response: 0, a Modbus exception code
 * (1..255, from the slave or the gateway), or one of these. */
enum {
    NORTH_WRITE_OK = 0,
    NORTH_WRITE_MALFORMED = 1001,      /* not JSON, not an object or a list of them */
    NORTH_WRITE_BAD_FIELD = 1002,      /* uuid, device, tag or value missing or of the wrong type */
    NORTH_WRITE_UNKNOWN_DEVICE = 1003,
    NORTH_WRITE_UNKNOWN_TAG = 1004,
    NORTH_WRITE_BAD_VALUE = 1005,      /* out of range for the tag */
    NORTH_WRITE_READ_ONLY = 1006,
    NORTH_WRITE_BUSY = 1007,           /* too many writes waiting for their answer */
    NORTH_WRITE_TOO_LARGE = 1008,      /* payload over max_write_bytes, or too many items */
    NORTH_WRITE_NOT_WRITABLE = 1009,   /* an input: discrete input or input register */
    NORTH_WRITE_STOPPING = 1010,       /* the gateway stopped before the answer came */
};

typedef struct north_write {
    const char *uuid;
    const char *device;
    const char *tag;
    bool is_bool;                         /* value was true/false */
    bool is_string;                       /* value was a string (text holds it; values[0] is 0) */
    bool is_float32;                      /* value was a float32 (a Sparkplug Float): values[0] holds it
                                             and text is ""; the receiver writes it as text with the
                                             one number formatter (tags_format), in float32 digits */
    const char *text;                     /* one value as text: a number as written, true/false, or a
                                             string's characters; NULL for a list */
    size_t count;                         /* 1, or the length of a list */
    double values[NORTH_WRITE_MAX_VALUES];
} north_write_t;

/* ---- the client ------------------------------------------------------------------- */

typedef struct north_hooks {
    void *ctx;
    /* level: 0 error, 1 warning, 2 info, 3 debug. */
    void (*log)(void *ctx, int level, const char *msg);
    /* A write to carry out; north_write_done(token, ...) must follow exactly
     * once, now or later. NULL: every write is refused. */
    void (*write)(void *ctx, uint32_t token, const north_write_t *w);
    /* [mqtt] remote_config: a text from PREFIX/GATEWAY/config/set through the
     * configuration API's one write path (if_match the file's revision now;
     * check, atomic write, live reload). *answer: the JSON body PUT
     * /api/config answers (malloc'd). Returns its HTTP status (200 applied,
     * 409 stale revision, 422 refused by check...). NULL: refused. */
    int (*config_set)(void *ctx, const char *if_match, const char *text, size_t len, char **answer);
    /* The file's revision now and the last reload's restart_needed; text
     * not NULL: the file's text too (malloc'd, *len bytes). 0, or -1. */
    int (*config_get)(void *ctx, char revision[17], char *restart_needed, size_t cap, char **text, size_t *len);
} north_hooks_t;

typedef struct north_stats {
    uint64_t connected;          /* 1 while a session is up */
    uint64_t published;          /* publications handed to the connection, resends included */
    uint64_t acknowledged;       /* QoS 1 publications acknowledged (PUBACK) */
    uint64_t buffered;           /* messages in memory waiting for their PUBACK (or a connection) */
    uint64_t buffered_bytes;
    uint64_t spooled;            /* messages in the disk spool, not yet acknowledged */
    uint64_t spool_bytes;
    uint64_t dropped;            /* lost: buffer or spool full, or QoS 0 while away */
    uint64_t connects;           /* sessions established */
    uint64_t reconnects;         /* connection attempts after a failure or a loss */
    uint64_t connect_failures;
    uint64_t values;             /* values handed over */
    uint64_t seq;                /* the last data sequence number used */
    uint64_t write_requests;     /* items received on the write topic */
    uint64_t write_ok;
    uint64_t write_errors;       /* answered with an error, malformed ones included */
    uint64_t write_malformed;
    uint64_t spool_write_failures; /* publications the spool could not write (disk full, I/O error) */
    uint64_t spool_damaged;      /* damaged spool records passed, acked marks refused */
} north_stats_t;

typedef struct north north_t;

/* Checks the configuration (files readable, spool usable), calls
 * mosquitto_lib_init() and starts connecting. NULL with err filled. */
north_t *north_new(struct event_base *base, const north_config_t *cfg, const north_hooks_t *hooks, char *err,
                   size_t errcap);
/* Answers writes still open, publishes the offline status, disconnects
 * (waiting at most ~0.5 s for the broker), closes the spool. */
void north_free(north_t *n);
/*
 * A reload's new [mqtt] (north/replace.c has the argument): old stops as
 * north_free stops it (Sparkplug: NDEATH), then a client starts at cfg, on
 * old's event_base and hooks, taking over what carries: the data sequence
 * number, Sparkplug's next bdSeq, the write tokens' generation, the
 * counters, and the QoS 1 publications not yet acknowledged that memory
 * held (no spool) when the brokers, topic_prefix and gateway are the same
 * (else dropped and counted). When cfg cannot start (err says why), old's
 * settings start again with the same carry and *kept_old is set; NULL only
 * when neither can start (err filled).
 */
north_t *north_replace(north_t *old, const north_config_t *cfg, char *err, size_t errcap, bool *kept_old);

/*
 * The values of one device at one moment (wall clock, ms since 1970). What
 * is published follows cfg->publish and cfg->format. 0, or -EINVAL for a
 * name that cannot be part of a topic, -ENOMEM.
 */
int north_publish(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *values, size_t count);
/* The tags of a device (copied). 0, -EINVAL for a name that cannot be part
 * of a topic, -ENOMEM. Calling it again for a device replaces its list. */
int north_define_device(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                        const north_device_opts_t *opts);
/*
 * After a round of north_define_device calls (the start, or a reload): what
 * that round defined is the whole set. A tag defined in an earlier round and
 * not in this one (removed, or renamed: a new name is a new tag) is
 * forgotten (with its last value); poll-group items are defined like tags
 * (poll_item), so a group removed or renamed leaves too. Values handed over
 * without any definition are not touched. Sparkplug
 * (3.0: a DBIRTH is the whole metric set of its device): a device born
 * whose set changed gets DDEATH now and a DBIRTH of its current set with its
 * next values; one with no tags left stays dead.
 */
void north_define_done(north_t *n);
/* The configuration's revision (config_revision: 16 hex digits; "" none):
 * MQTT v5's user property "revision" on data messages from now on. */
void north_set_revision(north_t *n, const char *revision);
/* A device went online or offline (retained on PREFIX/GATEWAY/DEVICE/status). */
int north_device_status(north_t *n, const char *device, bool online, const char *reason, uint64_t timestamp_ms);
/* The answer to a write handed to hooks->write. A stale token is ignored. */
void north_write_done(north_t *n, uint32_t token, int error, const char *message);
/* The answer "ok" to a write whose value was read back after it (confirm_write):
 * the answer carries "value", what the device holds, written as data messages
 * write values. */
void north_write_done_value(north_t *n, uint32_t token, const north_value_t *read);

void north_get_stats(const north_t *n, north_stats_t *st);
/* The wall clock in ms (for timestamps). */
uint64_t north_now_ms(void);

/* ---- the module ------------------------------------------------------------------- */

/*
 * rtugw links none of the above: north/ is built as its own shared object,
 * rtugw-mqtt.so (with libmosquitto, and through it libssl), which the
 * daemon loads with dlopen() only when [mqtt] is present, so that a daemon
 * without MQTT never maps libssl. Its one exported symbol is
 * rtugw_mqtt_module, this table.
 */
#define NORTH_MODULE_ABI 8
typedef struct north_module {
    unsigned abi;                     /* NORTH_MODULE_ABI */
    north_t *(*create)(struct event_base *base, const north_config_t *cfg, const north_hooks_t *hooks, char *err,
                       size_t errcap);
    void (*destroy)(north_t *n);
    int (*publish)(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *values, size_t count);
    int (*device_status)(north_t *n, const char *device, bool online, const char *reason, uint64_t timestamp_ms);
    int (*define_device)(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                         const north_device_opts_t *opts);
    void (*write_done)(north_t *n, uint32_t token, int error, const char *message);
    void (*get_stats)(const north_t *n, north_stats_t *st);
    uint64_t (*now_ms)(void);
    void (*write_done_value)(north_t *n, uint32_t token, const north_value_t *read);
    void (*define_done)(north_t *n);
    void (*set_revision)(north_t *n, const char *revision);
    north_t *(*replace)(north_t *old, const north_config_t *cfg, char *err, size_t errcap, bool *kept_old);
} north_module_t;

/* north/load.c (linked into rtugw, no libmosquitto): the module, found beside
 * the rtugw binary in the build tree (north/rtugw-mqtt.so), else in moduledir.
 * NULL with err filled. Loaded once; never unloaded. */
const north_module_t *north_module_load(const char *moduledir, char *err, size_t errcap);

#endif
