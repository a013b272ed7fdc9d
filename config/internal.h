/*
 * config/internal.h -- shared between config/'s own .c files only: the
 * loader's state, the key tables and the section kinds.
 *
 *   reader.c  reads the lines (counted, because inih does not tell its
 *             handler the line), sorts each one as inih will, and parses
 *             section headers itself (inih reports only keys);
 *   keys.c    the key tables and their values;
 *   config.c  sections, duplicates, references, the public functions;
 *   tags.c    [tag NAME] sections, the devices' tag keys and tags_file CSVs,
 *             built into cfg->tags once the file is read.
 *   security.c  MB-TCP-Security: [tls]'s own keys, [role NAME] and their checks.
 *   mqtt.c    [mqtt]: its keys, defaults and cross-checks.
 */
#ifndef RTUGW_CONFIG_INTERNAL_H
#define RTUGW_CONFIG_INTERNAL_H

#include "config/config.h"

#include <stdio.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* inih's line buffer (INI_MAX_LINE): a line and its newline fit in it. */
#define CONFIG_LINE_MAX 200
/* Keys one section can hold: tcp's table plus unit0..unit255. */
#define CONFIG_SECTION_KEYS_MAX 288

enum { S_NONE = -1, S_GATEWAY, S_BUS, S_DEVICE, S_POLL, S_TCP, S_HTTP, S_ROUTER, S_TAG, S_TLS, S_ROLE,
       S_RTU_TCP, S_SERIAL_SLAVE, S_MQTT, S_USER, S_TEMPLATE, S_UDP, S_MAP, S_COUNT };

typedef struct loader loader_t;
typedef struct config_map_place {
    char device[CONFIG_NAME_MAX];
    unsigned base, line;
} config_map_place_t;
typedef struct key_spec key_spec_t;
typedef struct config_tags config_tags_t;

typedef enum key_type {
    K_UINT, K_BOOL, K_DOUBLE, K_STRING, K_PARITY, K_RS485, K_LOG, K_LOGTARGET,
    K_PORT,     /* a device path, or sim[-paced][:LIST] */
    K_IPV4,     /* an address inet_pton takes */
    K_PATH,     /* a file or folder the daemon opens: a string, confined once the file is read (paths.c) */
    K_CUSTOM    /* set by the key's own function */
} key_type_t;

struct key_spec {
    const char *name;
    key_type_t type;
    size_t offset;       /* into the section's struct */
    double min, max;     /* numbers: inclusive range; strings: max = buffer size */
    unsigned numbered;   /* > 0: the key is NAME followed by 0..numbered (unitN) */
    bool (*set)(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
};

typedef struct section_kind {
    const char *prefix;
    bool named;                  /* "[bus NAME]" rather than "[tcp]" */
    const key_spec_t *keys;
    size_t nkeys;
} section_kind_t;

extern const section_kind_t config_section_kinds[S_COUNT];

/* Names that refer to other sections, resolved once the whole file is read. */
typedef struct pending_ref {
    char name[CONFIG_NAME_MAX];
    unsigned line;
} pending_ref_t;

/* References of the transports' sections ([rtu_tcp], [serial_slave NAME]),
 * resolved with the rest once the whole file is read (transports.c). */
typedef struct transports_pending {
    pending_ref_t rtu_tcp_default_bus;
    pending_ref_t rtu_tcp_unit[256];
    pending_ref_t (*slave_unit)[256];   /* one row per serial slave, grown with them */
    pending_ref_t udp_default_bus;      /* [udp] */
    pending_ref_t udp_unit[256];
} transports_pending_t;

/* A known key written in the section being read: duplicates are found here,
 * and a bus's keys are handed to the bus rule when its section ends. */
typedef struct seen_key {
    const key_spec_t *spec;
    unsigned number;             /* unitN: N */
    unsigned line;
    bool accepted;               /* its value passed config/'s own checks */
    char value[CONFIG_LINE_MAX]; /* as written, for the rule's message */
} seen_key_t;

/* Names the security keys refer to, resolved once the whole file is read. */
/* A K_PATH key as given: where, and the field that holds it (in cfg). */
#define CONFIG_PATH_KEYS_MAX 16
typedef struct path_note {
    char section[TAGS_NAME_MAX + 16];
    const char *key;
    unsigned line;
    char *field;
    size_t cap;
} path_note_t;

typedef struct security_pending {
    pending_ref_t default_role;
    char role_buses[CONFIG_MAX_ROLES][CONFIG_LINE_MAX];
    unsigned role_buses_line[CONFIG_MAX_ROLES];
} security_pending_t;

struct loader {
    config_t *cfg;
    config_errors_t *errs;
    const char *source;
    config_bus_rule_t bus_rule;
    unsigned line;               /* line the reader handed out last */
    unsigned header_line;        /* line of the last [section] header read */
    bool in_section;             /* a header has been read */
    char section[TAGS_NAME_MAX + 16];    /* "bus a", "tag NAME", for messages */
    void *target;                /* struct the current section fills, NULL: skip keys */
    int kind;                    /* S_*, or S_NONE */
    unsigned single_line[S_COUNT];  /* where [gateway], [tcp], ... were first given */
    seen_key_t seen[CONFIG_SECTION_KEYS_MAX];
    unsigned seen_count;
    /* What inih does with the line being read (reader.c mirrors it). */
    bool key_in_section;         /* inih's prev_name: an indented line continues a value */
    bool continuation;           /* this line is such a continuation */
    unsigned last_key_line;
    unsigned first_syntax_line;  /* the first line reader.c found broken */
    /* Room in cfg's tables; the pending references grow with them (one per
     * device, poll group). */
    unsigned bus_cap, device_cap, poll_cap, serial_slave_cap, map_cap;
    pending_ref_t *device_bus;
    pending_ref_t *poll_device;
    pending_ref_t default_bus;
    pending_ref_t unit_bus[256];
    config_tags_t *tags;         /* [tag NAME] sections and tags_file, until resolved */
    char *map_rows[CONFIG_MAX_MAPS];  /* [map NAME] entryN rows as a CSV (maps.c), until resolved */
    unsigned map_rows_lines[CONFIG_MAX_MAPS];
    security_pending_t security;
    path_note_t paths[CONFIG_PATH_KEYS_MAX];   /* the K_PATH keys given, checked by paths.c */
    unsigned path_count;
    transports_pending_t transports;
    unsigned mqtt_line;          /* [mqtt]: where it starts; keys whose default depends on others */
    unsigned bus_share_line[2];  /* [tcp], [rtu_tcp]: where bus_share is given; 0: default */
    bool mqtt_tls_set, mqtt_read_only_set, mqtt_gateway_set, mqtt_client_id_set, mqtt_edge_node_set,
        mqtt_session_expiry_set;
    const config_file_override_t *over;   /* a tag file's bytes in place of the disk's, or NULL */
    /* input */
    FILE *file;
    const char *text;
    size_t text_pos;
    /* [map NAME] deviceN = DEVICE, BASE: where each device's copy of the
     * map's device_registers rows goes (maps.c), until resolved */
    config_map_place_t *map_places[CONFIG_MAX_MAPS];
    unsigned n_map_places[CONFIG_MAX_MAPS];
};

/* config.c */
__attribute__((format(printf, 3, 4)))
void config_error_at(loader_t *ld, unsigned line, const char *fmt, ...);
/* An error as written, for one that names its own file and line (a CSV's). */
__attribute__((format(printf, 2, 3)))
void config_error_text(loader_t *ld, const char *fmt, ...);
/* A section header: the words inside the brackets (at most 3 given; more
 * than 2 is always an error), raw is the text between them. */
void config_open_section(loader_t *ld, const char *raw, char *const words[], unsigned nwords);
/* The section being read ends (another header, or the end of the file). */
void config_close_section(loader_t *ld);

/* reader.c: the ini_reader handed to ini_parse_stream (stream: the loader). */
char *config_read_line(char *str, int num, void *stream);

/* keys.c */
const key_spec_t *config_find_key(int kind, const char *key, unsigned *number);
/* Checks and stores a value; false (with the error reported) when it is wrong. */
bool config_set_key(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
void config_bad_value(loader_t *ld, const char *key, const char *value, const char *why);
bool config_valid_name(const char *name);
/* Room for one more entry in a table of n entries of size bytes (and in the
 * parallel table extra of extra_size bytes, when given): 0, or -ENOMEM with
 * the tables unchanged. */
int config_grow(void **table, size_t size, void **extra, size_t extra_size, unsigned n, unsigned *cap);
int config_parse_uint(const char *v, double min, double max, unsigned *out);

/* tags.c */
config_tags_t *config_tags_new(void);
void config_tags_free(config_tags_t *ct);
/* A [tag NAME] header: the section's target, or NULL (the error reported). */
void *config_tags_section(loader_t *ld, const char *name);
/* Setters of the [tag NAME] keys, and of [device NAME]'s order, tags_file and template. */
bool config_tags_set(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* addressing = protocol | modicon, of [gateway] (ld->target the config) or a [device]. */
bool config_tags_set_addressing(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool config_tags_set_device(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* A [template NAME] header (a new entry, or NULL with *first set when the
 * name was given before), and its tags_file and order. */
void *config_tags_new_template(loader_t *ld, const char *name, unsigned *first);
bool config_tags_set_template(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool config_mqtt_set_device_publish(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* After the file, the devices resolved: reads every tags_file, adds the
 * sections, checks the planner's limits, and sets cfg->tags (NULL when
 * there are no tags). Every problem is reported. */
void config_tags_resolve(loader_t *ld);
/* transports.c: framings, tcp:// ports, [rtu_tcp] and [serial_slave NAME] */
void transports_defaults(config_t *cfg);
void transports_bus_defaults(config_bus_t *bus);
bool transports_set_framing(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool transports_set_max_inflight(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool transports_set_slave_port(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* SCHEME://HOST:PORT (scheme_len: the length of "SCHEME://"): host (of
 * bus->tcp_host's size) and a port 1..65535; false when it is not. */
bool transports_split_port(const char *value, size_t scheme_len, config_bus_t *bus, char *host, unsigned *port);
/* [udp] listen = ADDR:PORT */
bool transports_set_udp_listen(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* port = tcp:// or udp://HOST:PORT (value starts with either). */
bool transports_set_tcp_port(loader_t *ld, const key_spec_t *k, const char *value, config_bus_t *bus);
/* [serial_slave NAME]: a new entry, or NULL with *first set when the name was given before. */
void *transports_new_serial_slave(loader_t *ld, const char *name, unsigned *first);
/* A [bus] section is complete: the keys that only some ports and framings take. */
void transports_check_bus(loader_t *ld, const config_bus_t *bus);
/* dialin.c: port = listen://ADDR:PORT, register, heartbeat */
bool dialin_set_port(loader_t *ld, const key_spec_t *k, const char *value, config_bus_t *bus);
bool dialin_set_bytes(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
void dialin_check_bus(loader_t *ld, const config_bus_t *bus);
/* listen.c: [bus] mode = master | listen */
bool listen_set_mode(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
void listen_check_bus(loader_t *ld, const config_bus_t *bus);
/* After the file: references, required keys, addresses and ports used twice. */
void transports_resolve(loader_t *ld);
/* unitN = BUS:SLAVE of section: each bus named in refs into routes. */
void config_resolve_units(loader_t *ld, const char *section, const pending_ref_t *refs, config_route_t *routes);

/* maps.c: [map NAME] */
void *config_maps_new(loader_t *ld, const char *name, unsigned *first);
bool config_maps_set(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* After the tags and the routes: each map's registers file read, its entries
 * checked against cfg->tags and each other, its unit against the routes. */
void config_maps_resolve(loader_t *ld);
/* security.c */
void security_defaults(config_t *cfg);
/* A new [role NAME]; NULL when there is no room (reported). */
config_role_t *security_new_role(loader_t *ld, const char *name);
/* paths.c: every K_PATH key under the configuration's folder or a [gateway]
 * data_dirs folder; a relative one made absolute (from the folder). */
void config_paths_resolve(loader_t *ld);
/* token.c: [http] write_token, refused under 128 bits. */
bool config_set_write_token(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool security_set_min_version(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool users_set_tls_min_version(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* [http] tls_ciphers and [tls] ciphers: a TLS 1.2 cipher list in OpenSSL's
 * syntax, its characters only (OpenSSL judges it when the context is made). */
bool users_set_ciphers(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* [http] server_names: host names and addresses, or '*'. */
bool users_set_server_names(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool security_set_default_role(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool security_set_functions(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* "read, write" (CONFIG_FN_* names, or all) -> bits; "1-3, 7" (or all) -> a
 * bitmap of units. false: a token that is neither (the value is left 0). */
bool config_parse_function_classes(const char *value, unsigned *functions);
bool config_parse_units(const char *value, uint8_t units[32]);
bool security_set_units(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool security_set_buses(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* Bus names, default_role, and what an enabled [tls] needs. */
void security_resolve(loader_t *ld);
/* users.c: [http] tls_cert and tls_key, [user NAME]; once all is read. */
void users_resolve(loader_t *ld);
/* A new [user NAME], or NULL with *first set when the name was given before. */
config_user_t *users_new(loader_t *ld, const char *name, unsigned *first);
bool users_set_password_hash(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
bool users_set_role(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
/* mqtt.c */
#define CONFIG_MQTT_KEYS 40
extern const key_spec_t config_mqtt_keys[CONFIG_MQTT_KEYS];
void config_mqtt_open(loader_t *ld);      /* the section's first header: its defaults */
void config_mqtt_resolve(loader_t *ld);   /* after the file */

#endif
