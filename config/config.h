/*
 * config/config.h -- the rtugw configuration: an INI file read with libinih,
 * every value range-checked, every error reported as FILE:LINE with the
 * section, key and value that is wrong. Owns: the configuration's
 * structs, defaults, loading and validation. May call: libinih, libc and
 * tags/ (tag files and [tag NAME] sections are loaded and checked here, so
 * `rtugw check` reports them), expr/ (computed tags compiled at load) and
 * north/north.h (north_config_t, the [mqtt]
 * section's struct; no code of that folder); everything above it reads it.
 *
 * The loaded configuration is plain data (the structs below are its
 * contract, read-only for the rest of the program); how it is parsed and
 * validated stays inside config/.
 */
#ifndef RTUGW_CONFIG_CONFIG_H
#define RTUGW_CONFIG_CONFIG_H

#include "north/north.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tags/tags.h"

#define CONFIG_NAME_MAX 32
#define CONFIG_PATH_MAX 256
/* Buses, devices, poll groups and serial slaves are tables sized from the
 * file (allocated as their sections are read): the limits below only bound
 * what one file may ask for, far above any box (two 16-port device servers
 * are 32 buses), and name the limit in the error of a file past them. */
#define CONFIG_MAX_BUSES 256
#define CONFIG_MAX_DEVICES 8192
#define CONFIG_MAX_POLLS 16384
#define CONFIG_MAX_TEMPLATES 64
#define CONFIG_MAX_ALLOW 16
#define CONFIG_MAX_BUCKETS 16
#define CONFIG_MAX_ERRORS 32
#define CONFIG_MAX_TAGS 65536       /* tags in all: [tag NAME] sections and tags_file rows */
#define CONFIG_TOKEN_MAX 128
#define CONFIG_NAMES_MAX 512        /* [http] server_names */
#define CONFIG_CIPHERS_MAX 512      /* [http] tls_ciphers, [tls] ciphers */
#define CONFIG_MAX_ROLES 16
#define CONFIG_MAX_HANDSHAKES 256   /* [tls] max_handshakes: table slots beside max_clients' */
/* [tcp] max_clients: with the handshakes' slots, a listener's table fits the
 * 16 bits of a connection id's index (front/tcp_session.h). */
#define CONFIG_MAX_CLIENTS 65000
#define CONFIG_MAX_TCP_LOOPS 16    /* [tcp] loops, [rtu_tcp] loops */
#define CONFIG_MAX_CPU_LATENCY_US 1000000   /* [gateway] cpu_latency_us: a second */

typedef enum config_rs485 { CONFIG_RS485_OFF = 0, CONFIG_RS485_IOCTL, CONFIG_RS485_RTS } config_rs485_t;

/* What a bus's port names: a device, the built-in simulator ("sim",
 * "sim-paced": paced at the baud rate, optionally ":SLAVE,SLAVE,..."), or a
 * TCP peer ("tcp://HOST:PORT": a serial device server, or a Modbus TCP
 * device with framing = tcp). */
typedef enum config_port_kind {
    CONFIG_PORT_DEVICE = 0, CONFIG_PORT_SIM, CONFIG_PORT_SIM_PACED, CONFIG_PORT_TCP,
    CONFIG_PORT_UDP,      /* "udp://HOST:PORT": a Modbus UDP device (framing tcp: MBAP in datagrams) */
    CONFIG_PORT_LISTEN    /* "listen://ADDR:PORT": a dial-in DTU connects and carries the line (config/dialin.c) */
} config_port_kind_t;

/* How frames travel on a bus's port: RTU (binary, CRC), Modbus ASCII (':'
 * hex LRC CR LF), or MBAP to a Modbus TCP device. */
typedef enum config_framing { CONFIG_FRAMING_RTU = 0, CONFIG_FRAMING_ASCII, CONFIG_FRAMING_TCP } config_framing_t;

#define CONFIG_DIAL_BYTES 64

typedef struct config_bus {
    char name[CONFIG_NAME_MAX];
    char port[CONFIG_PATH_MAX];     /* device path, or "sim" for the built-in simulator */
    config_port_kind_t port_kind;
    unsigned baud;
    char parity;                    /* 'N', 'E', 'O' */
    unsigned data_bits;
    unsigned stop_bits;
    config_rs485_t rs485;
    bool rts_after_send;            /* RTS level after send (ioctl mode) */
    unsigned rts_delay_before_us;
    unsigned rts_delay_after_us;
    bool rx_during_tx;
    bool echo_suppress;
    unsigned response_timeout_ms;
    unsigned retries;
    unsigned gap_us;                /* 0: t3.5 from baud and framing */
    unsigned queue_depth;
    bool tcp_first;                 /* TCP requests ahead of background polls */
    unsigned poll_share;            /* with tcp_first: percent of transactions owed to polls
                                       that wait behind TCP requests (line/queue.c); 0: none */
    unsigned priority_hold_us;      /* after a priority answer, wait this long at most for its
                                       master's next request before a normal one (line/queue.c) */
    unsigned line;                  /* where the section starts, for messages */
    unsigned port_line;             /* where port is given; 0: it is not */
    unsigned queue_depth_line;      /* where queue_depth is given; 0: the default */
    /* transports (config/transports.c) */
    config_framing_t framing;
    char tcp_host[64];              /* port = tcp:// or udp://HOST:PORT: an IPv4 address or a name */
    unsigned tcp_port;
    unsigned connect_timeout_ms;    /* tcp:// ports */
    unsigned frame_silence_ms;      /* tcp:// with framing rtu: ends a frame without a length rule */
    unsigned char_timeout_ms;       /* framing ascii: inter-character timeout */
    unsigned max_inflight;          /* framing tcp: requests on the connection at once (1) */
    bool listen;                    /* mode = listen: rtugw never writes to this bus (config/listen.c) */
    unsigned listen_late_factor;    /* mode = listen: a slave sends what it sends for a request within
                                       this many times the master's heard timeout (parser/pair.c P5) */
    uint8_t dial_register[CONFIG_DIAL_BYTES];   /* listen://: register = the DTU's prefix */
    unsigned dial_register_len;                 /* 0: none asked */
    uint8_t dial_heartbeat[CONFIG_DIAL_BYTES];  /* listen://: heartbeat = its keep-alive packet */
    unsigned dial_heartbeat_len;
    bool no_copies;                 /* copies = none: the operator vouches no frame is repeated on the
                                       line (line I4 off until a copy is seen); default: detect */
} config_bus_t;

/* How a device's tags write their addresses: protocol addresses from 0 (the
 * default), or Modicon numbers (40101 is holding register 100). */
#define CONFIG_ADDRESSING_PROTOCOL 0
#define CONFIG_ADDRESSING_MODICON 1

typedef struct config_device {
    char name[CONFIG_NAME_MAX];
    unsigned bus;                   /* index into buses */
    unsigned slave;                 /* 1..247 */
    unsigned timeout_ms;            /* 0: the bus's */
    unsigned dead_after;            /* consecutive timeouts before back-off; 0: never */
    unsigned dead_backoff_ms;
    tags_order_t order;             /* word and byte order of its tags that name none */
    int addressing;                 /* CONFIG_ADDRESSING_*, or -1: [gateway] addressing */
    char tags_file[CONFIG_PATH_MAX];/* a tags CSV, as written (relative: to the config file's folder) */
    unsigned max_read_registers;    /* the read planner's limits for this device: 1..125 */
    unsigned max_read_bits;         /* 1..2000 */
    unsigned max_gap;               /* registers read over rather than split: 0..125 */
    int mqtt_publish;               /* a north_publish_mode_t, or -1: [mqtt] publish */
    unsigned mqtt_interval_ms;      /* mqtt_publish = interval: 0 is [mqtt] interval_ms */
    bool confirm_write;             /* a tag write is read back and answered with what was read */
    bool widen_reads;               /* line I6 may read a register or two more and trim (default true) */
    unsigned interval_ms;           /* its tags' default read interval; 0: the template's, else 1000 */
    bool order_set;                 /* order was written (it overrides the template's) */
    char template_name[CONFIG_NAME_MAX];  /* template = NAME, as written; "" none */
    int template_index;             /* index into templates, or -1 */
    unsigned line;
} config_device_t;

/* [template NAME]: a register list (a tags CSV whose rows name no device)
 * that any number of devices use with template = NAME; each device gets a
 * copy of every row, named DEVICE.ROW (docs/tags.md). */
typedef struct config_template {
    char name[CONFIG_NAME_MAX];
    char tags_file[CONFIG_PATH_MAX];/* as written (relative: to the config file's folder) */
    unsigned tags_file_line;        /* where tags_file is, for messages about the file */
    tags_order_t order;             /* default of its rows that name none, under the device's own */
    bool order_set;
    unsigned interval_ms;           /* default read interval, under the device's own; 0: 1000 */
    unsigned line;
} config_template_t;

typedef struct config_poll {
    char name[CONFIG_NAME_MAX];
    unsigned device;                /* index into devices */
    unsigned function;              /* 1, 2, 3 or 4 */
    unsigned address;
    unsigned count;
    unsigned interval_ms;
    unsigned serve_cached_ms;       /* TCP reads inside this group answered from the
                                       cache while younger than this; 0: never */
    unsigned line;
} config_poll_t;

typedef struct config_net {
    uint32_t addr;                  /* network byte order */
    uint32_t mask;
} config_net_t;

typedef struct config_route {
    bool set;
    bool broadcast;                 /* unit 0 only: send as broadcast */
    unsigned bus;
    unsigned slave;
} config_route_t;

typedef struct config_tcp {
    bool enabled;
    char bind[64];
    unsigned port;
    unsigned max_clients;
    unsigned idle_timeout_s;        /* 0: never */
    unsigned max_pending;           /* pipelined requests per connection */
    unsigned max_per_address;       /* connections from one client address; 0: max_clients */
    unsigned adu_timeout_ms;        /* an ADU must be complete this long after its first byte */
    bool read_only;
    unsigned default_bus;           /* unit N -> (default_bus, N) unless routed */
    config_route_t unit[256];       /* explicit unit routes, incl. 0 and 255 */
    config_net_t allow[CONFIG_MAX_ALLOW];
    unsigned allow_count;           /* 0: allow everyone */
    unsigned bus_share;             /* this listener's requests in one bus's queue and line at once */
    config_net_t priority[CONFIG_MAX_ALLOW];
    unsigned priority_count;        /* clients of these networks are served first (priority class) */
    uint8_t priority_units[32];     /* bit u: requests for unit u are in the priority class */
    unsigned priority_functions;    /* CONFIG_FN_*: requests of these function classes too */
    unsigned loops;                 /* event loops serving the connections ([tcp], [rtu_tcp]): 1 the I/O
                                       thread, more each on a thread of its own; restart to change;
                                       written 0, one per CPU, fixed by the loader (never 0 here) */
} config_tcp_t;

/*
 * [serial_slave NAME]: rtugw answers a serial master on a port of its own as
 * the RTU slaves its unit routes name, forwarding each request to its bus.
 */
#define CONFIG_MAX_SERIAL_SLAVES 64
typedef struct config_serial_slave {
    char name[CONFIG_NAME_MAX];
    char port[CONFIG_PATH_MAX];     /* a device path (a real port or a pty) */
    unsigned baud;
    char parity;
    unsigned data_bits;
    unsigned stop_bits;
    config_rs485_t rs485;
    bool echo_suppress;
    unsigned answer_timeout_ms;     /* no answer from the bus by then: exception 0x0B */
    config_route_t unit[256];       /* slave id on this port -> bus and slave */
    unsigned line;
    unsigned port_line;
} config_serial_slave_t;

/*
 * [map NAME] (config/maps.c): a virtual slave at its own unit id, whose
 * registers serve tags at addresses the integrator chooses (docs/tags.md,
 * "Maps"). Its entries come from a CSV in the tags' form (registers =),
 * sorted by table and address, never overlapping; each names a tag of
 * cfg->tags by name (the running table resolves it: gateway/vslave.c).
 */
#define CONFIG_MAX_MAPS 32
#define CONFIG_MAP_ENTRIES_MAX 65536
typedef struct config_map_entry {
    char tag[TAGS_NAME_MAX];        /* the tag served */
    uint16_t address;
    uint16_t count;                 /* registers (coils, discretes: 1) */
    uint8_t area;                   /* tags_area_t */
    uint8_t type;                   /* tags_type_t: how the tag's value is encoded here */
    uint8_t order;                  /* tags_order_t */
    uint8_t point;                  /* fixed-point digits */
    double scale, offset;           /* served raw = (tag's engineering value - offset) / scale */
    unsigned line;                  /* in the registers file */
    bool per_device;                /* a device_registers row placed at a deviceN's base (line: in that file) */
} config_map_entry_t;

typedef struct config_map {
    char name[CONFIG_NAME_MAX];
    unsigned unit;                  /* 1..255: the unit id it answers as, on every front end */
    char registers[CONFIG_PATH_MAX];/* the CSV, as written (confined like tags_file) */
    char device_registers[CONFIG_PATH_MAX]; /* rows naming a template's rows, one copy per deviceN (maps.c) */
    bool gaps_exception;            /* gaps = exception: a read over an unmapped register answers 02 */
    bool stale_last;                /* stale = last: a tag not good answers its last value, not 0B */
    int quality_register;           /* holding/input register of the count of its tags not good; -1 none */
    config_map_entry_t *entries;    /* owned; entry_count of them */
    unsigned entry_count;
    unsigned line;
} config_map_t;

/* The web side's users ([user NAME], config/users.c): a role each, a
 * password kept as a crypt(3) hash (yescrypt, `rtugw hash-password`). */
#define CONFIG_MAX_USERS 32
#define CONFIG_HASH_MAX 192
typedef enum config_user_role {
    CONFIG_ROLE_NONE = 0,           /* no credential: nothing but the page and /login */
    CONFIG_ROLE_VIEWER,             /* reads */
    CONFIG_ROLE_OPERATOR,           /* reads, and writes tag values */
    CONFIG_ROLE_ADMIN               /* everything, the configuration too */
} config_user_role_t;

typedef struct config_user {
    char name[CONFIG_NAME_MAX];
    char password_hash[CONFIG_HASH_MAX];
    config_user_role_t role;
    unsigned line;
} config_user_t;

typedef struct config_http {
    bool enabled;
    char bind[64];
    unsigned port;
    unsigned max_connections;       /* open HTTP connections at once */
    unsigned max_header_bytes;      /* request line and headers */
    unsigned max_body_bytes;
    unsigned request_timeout_ms;    /* a request must be complete this long after its first byte */
    unsigned idle_timeout_s;        /* a keep-alive connection with nothing to do is closed */
    bool tag_metrics;               /* a gauge per tag in /metrics */
    char write_token[CONFIG_TOKEN_MAX]; /* PUT /tags/NAME needs "Authorization: Bearer TOKEN"; empty: none */
    unsigned frame_ring;            /* frames kept per bus for GET /frames (the web page's
                                       monitor); 0: none kept, no memory taken */
    char tls_cert[CONFIG_PATH_MAX]; /* HTTPS: the server's certificate chain (PEM); "": plain HTTP */
    char tls_key[CONFIG_PATH_MAX];  /* its private key (PEM) */
    unsigned session_timeout_s;     /* a login's session lasts this long */
    unsigned max_sessions;          /* sessions open at once; the oldest gives way */
    unsigned max_sessions_per_user; /* of them one user's; its own oldest gives way */
    bool metrics_open;              /* with users: /metrics without a login */
    char server_names[CONFIG_NAMES_MAX];  /* Host values served (names, IPs; '*': any); "": the defaults */
    char tls_ciphers[CONFIG_CIPHERS_MAX]; /* TLS 1.2 suites (OpenSSL's syntax); "": Mozilla intermediate */
    unsigned tls_min_version;       /* 12: TLS 1.2, 13: TLS 1.3 */
    config_user_t users[CONFIG_MAX_USERS];
    unsigned user_count;            /* 0: no login, reads open, writes by write_token */
} config_http_t;

typedef struct config_router {
    double exploration;
    unsigned sample_every;          /* time 1 in k exploitation pulls */
    unsigned explore_run;           /* explorations in runs of this many pulls */
    double verify_rate;             /* shadow verification share */
    unsigned buckets[CONFIG_MAX_BUCKETS];
    unsigned bucket_count;
    char state_file[CONFIG_PATH_MAX];
    char policy[16];                /* "epsilon", "epsilon-greedy" or "thompson" */
} config_router_t;

/*
 * MB-TCP-Security (config/security.c): the [tls] listener and the [role NAME]
 * sections that grant rights to a client certificate's role.
 */
/* Function classes a role grants (its functions key); a code in no class is
 * granted to no role. */
#define CONFIG_FN_READ 0x01u        /* 1, 2, 3, 4, 24; 23 needs read and write */
#define CONFIG_FN_WRITE 0x02u       /* 5, 6, 15, 16, 22 */
#define CONFIG_FN_DIAGNOSTICS 0x04u /* 7, 8, 11, 12, 17, 43/14 */
#define CONFIG_FN_FILE 0x08u        /* 20, 21 */
#define CONFIG_FN_USER 0x10u        /* user-defined: 65..72, 100..110 */
#define CONFIG_FN_ALL 0x1Fu

typedef struct config_role {
    char name[CONFIG_NAME_MAX];     /* the certificate's role (OID 1.3.6.1.4.1.50316.802.1) */
    unsigned functions;             /* CONFIG_FN_* */
    uint8_t units[32];              /* bit u: MBAP unit u is granted */
    uint8_t buses[CONFIG_MAX_BUSES / 8];  /* bit b: every unit routed to bus b is granted */
    bool priority;                  /* its sessions' requests are in the priority class */
    unsigned line;
} config_role_t;

typedef struct config_tls {
    bool enabled;                   /* default false */
    char bind[64];
    unsigned port;                  /* 802 */
    char cert_file[CONFIG_PATH_MAX];  /* the server's certificate chain, PEM */
    char key_file[CONFIG_PATH_MAX];
    char ca_file[CONFIG_PATH_MAX];    /* client certificates must chain to these */
    char crl_file[CONFIG_PATH_MAX];   /* optional: "" checks no revocation */
    unsigned min_version;           /* 12: TLS 1.2, 13: TLS 1.3 */
    char ciphers[CONFIG_CIPHERS_MAX]; /* TLS 1.2 suites (OpenSSL's syntax); "": Mozilla intermediate */
    unsigned session_cache;         /* resumable sessions kept; 0: no resumption */
    unsigned handshake_timeout_ms;
    unsigned max_handshakes;        /* sockets in a handshake at once, apart from max_clients */
    unsigned max_handshakes_per_address;  /* of them from one address; 0: max_handshakes */
    int default_role;               /* index into roles for a certificate without a
                                       role; -1: such a certificate is refused */
    unsigned line;                  /* of the [tls] header; 0: no section */
} config_tls_t;

typedef enum config_log { CONFIG_LOG_ERROR, CONFIG_LOG_WARN, CONFIG_LOG_INFO, CONFIG_LOG_DEBUG } config_log_t;

typedef struct config {
    char source[CONFIG_PATH_MAX];   /* file name, or "<demo>" */
    unsigned workers;               /* 0: online cores */
    bool buses_on_io_thread;        /* bus actors run on the I/O thread (default), not a worker */
    int addressing;                 /* how devices' tags write addresses, unless a device says */
    bool line_thread;               /* ports and bus actors on a thread of their own (default) */
    unsigned line_thread_priority;  /* SCHED_FIFO priority of that thread, 1..99; 0: none */
    int cpu_latency_us;             /* a CPU latency QoS request held while running, us; -1: off */
    config_log_t log_level;
    bool log_syslog;                /* log_target = syslog (else stderr) */
    char data_dirs[CONFIG_PATH_MAX];/* folders files may be in besides the configuration's (paths.c) */
    /* Tables of bus_count, device_count, poll_count and serial_slave_count
     * entries, owned (config_free); NULL when empty. */
    config_bus_t *buses;
    unsigned bus_count;
    /* Where the table is a running copy whose indices are slots
     * (config_buses_to_slots, a reload): the buses in the file's order,
     * bus_order[i] the slot of the file's i-th [bus], bus_listed of them;
     * a slot no bus holds (one a reload removed) is a gap, its name empty.
     * A loaded file has no gaps and bus_slotted false: the order is the
     * table's. Read them through config_bus_listed and config_bus_at. */
    bool bus_slotted;
    unsigned bus_listed;
    uint8_t bus_order[CONFIG_MAX_BUSES];
    config_device_t *devices;
    unsigned device_count;
    config_template_t templates[CONFIG_MAX_TEMPLATES];
    unsigned template_count;
    config_poll_t *polls;
    unsigned poll_count;
    config_tcp_t tcp;
    config_tcp_t rtu_tcp;           /* [rtu_tcp]: the same keys, RTU frames instead of MBAP */
    config_tcp_t udp;               /* [udp] (Modbus UDP): listen, routes, read_only, allow;
                                       max_pending: requests in flight per source address,
                                       max_clients: source addresses with requests in flight */
    config_serial_slave_t *serial_slaves;
    unsigned serial_slave_count;
    config_http_t http;
    config_router_t router;
    /* Every tag, from [tag NAME] sections and the devices' tags_file: the
     * definitions only (their values are never updated here). Owned: freed
     * by config_free; NULL when there are none. */
    tags_table_t *tags;
    config_tls_t tls;
    config_role_t roles[CONFIG_MAX_ROLES];
    unsigned role_count;
    bool mqtt_enabled;              /* an [mqtt] section is present, without enabled = false */
    north_config_t mqtt;            /* [mqtt]: filled and checked here, used by north/ */
    config_map_t *maps;             /* [map NAME]: map_count of them, owned; NULL when none */
    unsigned map_count;
} config_t;

typedef struct config_errors {
    char text[CONFIG_MAX_ERRORS][384];
    unsigned count;                 /* messages kept */
    unsigned total;                 /* errors found, including those not kept */
} config_errors_t;

/*
 * Load and validate. Returns a new config (free with config_free) or NULL
 * with errs filled: every problem found, each "FILE:LINE: [section] key =
 * 'value': what is wrong". A file that cannot be opened is one error.
 */
config_t *config_load_file(const char *path, config_errors_t *errs);
config_t *config_load_string(const char *text, const char *name, config_errors_t *errs);

/*
 * A rule for a bus that config/ cannot decide, because it belongs to a layer
 * config/ does not depend on: which baud rates the serial driver can set,
 * which slave lists the simulator takes. The command line, above both,
 * passes drivers/' rules in, so that `rtugw check` and `rtugw run` refuse
 * the same files with the same messages. Called for each key written in a
 * [bus] section whose value config/ accepted, once the section is complete
 * (also in a file with other errors). Returns 0, or a negative errno with
 * why filled; the error reads "FILE:LINE: [bus NAME] key = 'value': why".
 */
typedef int (*config_bus_rule_t)(const config_bus_t *bus, const char *key, char *why, size_t cap);

config_t *config_load_file_with(const char *path, config_bus_rule_t rule, config_errors_t *errs);
config_t *config_load_string_with(const char *text, const char *name, config_bus_rule_t rule,
                                  config_errors_t *errs);

/*
 * One tag file's new bytes in place of those on disk, so that a change to
 * it is checked with the whole configuration before it is written (check,
 * then write: a kill -9 between the two leaves the old file, which starts;
 * web/api_csv.c). path names the file as the configuration resolves it
 * (config_resolve_path); text is NUL-terminated, len its length. The file's
 * confinement is checked as for a read from disk.
 */
typedef struct config_file_override {
    const char *path;
    const char *text;
    size_t len;
} config_file_override_t;

config_t *config_load_string_over(const char *text, const char *name, config_bus_rule_t rule,
                                  const config_file_override_t *over, config_errors_t *errs);

/* port = sim:LIST or sim-paced:LIST: the LIST (inside bus->port); else NULL. */
const char *config_bus_sim_slaves(const config_bus_t *bus);
void config_free(config_t *cfg);

/* A deep copy of cfg's tables and settings, without its tags (NULL in the
 * copy); NULL when out of memory. Free with config_free. */
config_t *config_copy(const config_t *cfg);

/* The running copy's devices or poll groups replaced by n of these (a
 * live reload): 0, or -ENOMEM with cfg unchanged. */
int config_set_devices(config_t *cfg, const config_device_t *devices, unsigned n);
int config_set_polls(config_t *cfg, const config_poll_t *polls, unsigned n);

/* Whether two sections (or two whole tables of them) say the same thing:
 * compared key by key, by value, without where they stand in the file (their
 * line numbers), so a section that only moved is the same (config/compare.c). */
bool config_same_route(const config_route_t *a, const config_route_t *b);
bool config_same_bus(const config_bus_t *a, const config_bus_t *b);
bool config_same_device(const config_device_t *a, const config_device_t *b);
bool config_same_template(const config_template_t *a, const config_template_t *b);
bool config_same_poll(const config_poll_t *a, const config_poll_t *b);
bool config_same_serial_slave(const config_serial_slave_t *a, const config_serial_slave_t *b);
bool config_same_buses(const config_t *a, const config_t *b);
bool config_same_devices(const config_t *a, const config_t *b);
bool config_same_templates(const config_t *a, const config_t *b);
bool config_same_polls(const config_t *a, const config_t *b);
bool config_same_serial_slaves(const config_t *a, const config_t *b);
bool config_same_maps(const config_t *a, const config_t *b);

/* How many buses the file lists, and the index (slot) of its i-th. */
static inline unsigned config_bus_listed(const config_t *cfg)
{
    return cfg->bus_slotted ? cfg->bus_listed : cfg->bus_count;
}
static inline unsigned config_bus_at(const config_t *cfg, unsigned i)
{
    return cfg->bus_slotted ? cfg->bus_order[i] : i;
}
/* The index (slot) of the bus named name, or -1: none, or name NULL or empty. */
int config_find_bus(const config_t *cfg, const char *name);
/* Whether index b holds a bus (not a gap of a running copy). */
static inline bool config_bus_live(const config_t *cfg, unsigned b)
{
    return b < cfg->bus_count && cfg->buses[b].name[0];
}

/*
 * A reload's file put in the running copy's slots (config/slots.c): each
 * bus of fresh that runs (same name in run) takes the slot it holds there;
 * a new one the lowest slot that holds no bus in run and that free(ctx,
 * slot) says is free (no retiring bus, no reader that could still name it);
 * fresh's table is laid out by slot, gaps empty, and every index into it
 * (devices, unit routes, default_bus, roles) renumbered. So a section that
 * did not change compares equal whatever moved around it in the file. 0,
 * or -1 with err set (out of memory, or no free slot) and fresh unchanged.
 */
int config_buses_to_slots(config_t *fresh, const config_t *run, bool (*free_slot)(void *ctx, unsigned slot),
                          void *ctx, char *err, size_t errcap);

/* True when role r grants bus b. */
static inline bool config_role_has_bus(const config_role_t *r, unsigned b)
{
    return b < CONFIG_MAX_BUSES && (r->buses[b / 8] >> (b % 8) & 1);
}

/* The embedded demo configuration (simulated PLCs, TCP 127.0.0.1:1502, HTTP 8502). */
const char *config_demo_text(void);
/* token.c: the most bits token can hold by its length and alphabet (digits,
 * hexadecimal, base64, printable; *alphabet names it); [http] write_token
 * needs 128. config_token_new: a new one, 264 random bits as 44 base64url
 * characters (cap >= 45); -1 when the kernel gives no randomness. */
unsigned config_token_bits(const char *token, const char **alphabet);
int config_token_new(char *out, size_t cap);

/* The role named name, or -1. */
int config_role_find(const config_t *cfg, const char *name);
/* "viewer", "operator", "admin", or "none". */
const char *config_user_role_name(config_user_role_t role);

/* tags.c: what `rtugw check` warns of beside its verdict in cfg's tags
 * (tags_lint: Modicon-looking addresses, overlapping tags), each line to
 * warn; how many. 0 when cfg has no tags. */
unsigned config_lint(const config_t *cfg, tags_lint_fn warn, void *ctx);

/* A tags_file as the loader opens it: relative to the configuration file's
 * (source's) folder, unless absolute or source has no folder. */
void config_resolve_path(const char *source, const char *path, char *out, size_t cap);

/* Files the configuration names stay under the folder of its file (source;
 * "." when it names none): config_confine gives value's name relative to
 * that folder, or -1 with why (an absolute path elsewhere, a '..' or a
 * symbolic link out); config_open_confined opens it relative to the folder
 * (openat2 RESOLVE_BENEATH, else openat O_NOFOLLOW), -1 with why and errno;
 * config_read_confined reads it whole (at most max bytes, NUL-terminated). */
int config_confine(const char *source, const char *value, char *rel, size_t relcap, char *why, size_t whycap);
int config_open_confined(const char *source, const char *value, int flags, char *why, size_t whycap);
/* paths.c: path (a K_PATH key's value, as loaded) opened as config_open_confined
 * does, under the configuration's folder or one of cfg's data_dirs. */
int config_open_path(const config_t *cfg, const char *path, int flags, char *why, size_t cap);
/* For a library that opens by name: path opened so (read only), *fd its
 * descriptor (the caller closes it) and name "/proc/self/fd/N"; -1 with
 * why. config_name_again: "'name'" in text (the library's message) becomes
 * "'path'" again. */
int config_open_for_name(const config_t *cfg, const char *path, int *fd, char *name, size_t namecap, char *why,
                         size_t cap);
void config_name_again(char *text, size_t cap, const char *name, const char *path);
char *config_read_confined(const char *source, const char *value, size_t max, size_t *len, char *why,
                           size_t whycap);

/* Whether dev's tag addresses are in Modicon form (its addressing, else the gateway's). */
bool config_device_modicon(const config_t *cfg, const config_device_t *dev);

/* One-line summary, e.g. "1 bus, 3 devices, 2 poll groups, tcp 127.0.0.1:1502". */
int config_summary(const config_t *cfg, char *buf, size_t cap);

/* A port whose transport is an RTU byte stream without the line's character
 * timing: a serial device server (tcp://) or a dial-in DTU (listen://), with
 * framing rtu. Frames without a length rule end after frame_silence_ms. */
static inline bool config_bus_stream(const config_bus_t *bus)
{
    return (bus->port_kind == CONFIG_PORT_TCP || bus->port_kind == CONFIG_PORT_LISTEN) &&
           bus->framing == CONFIG_FRAMING_RTU;
}

/* revision.c: a text's revision, as the API and /status name it: FNV-1a 64
 * of its bytes, 16 hex digits. config_file_revision: of a file's bytes; ""
 * when it cannot be read. */
void config_revision(const char *text, size_t len, char out[17]);
void config_file_revision(const char *path, char out[17]);

#endif
