/*
 * drivers/driver.h -- byte sources and sinks behind one interface. This is
 * the one public header of drivers/. Owns: the backends below and the
 * layers over them. May call: parser/, libserialport, libmodbus (the
 * simulator's slaves) and pthreads; nothing above it.
 *
 * A driver_t is an opaque handle on a backend: a table of functions
 * (driver_backend_t, in the spirit of libmodbus's modbus_backend_t). Three
 * backends ship with it:
 *
 *   serial  -- a real port (libserialport opens and configures it) or a
 *              pseudo-terminal (plain termios: libserialport 0.1.1 refuses
 *              /dev/pts/N); exclusive open, RS-485, hang-up detection;
 *   sim     -- a simulated bus: a PLC simulator on a thread behind a
 *              pseudo-terminal pair, the driver holding the other end;
 *   replay  -- a capture file (pcap, pcapng, text hex log) read back as
 *              timed chunks.
 *
 * Drivers never block. Each exposes one non-blocking fd for the event loop
 * (the I/O thread) to poll; read/write return at once. Anything timed (the
 * RTS-toggle RS-485 fallback, replay's original timing) is a deadline the
 * loop asks for with driver_next_deadline() and honours by calling
 * driver_service().
 *
 * Errors: 0 or a count on success, a negative errno otherwise. Functions that
 * can fail for a reason a human must read also fill err[] with a message that
 * names the port or file.
 *
 * Transports beyond the serial line (docs/drivers.md, "Transports"):
 *
 *   tcp     -- a TCP client byte stream (RTU over TCP to a serial device
 *              server, or the carrier of the MBAP layer): non-blocking
 *              connect with a timeout (open returns DRIVER_INPROGRESS);
 *   ascii   -- a layer over any byte driver: Modbus ASCII frames on the
 *              line, RTU frames (with a computed CRC) above it;
 *   mbap    -- a layer over a tcp driver: rtugw is the Modbus TCP client
 *              of an Ethernet device; RTU frames above it, MBAP below,
 *              with rtugw's own transaction ids;
 *   udp     -- Modbus UDP: one MBAP ADU per datagram, transaction ids and
 *              the source address checked (udp.c);
 *   listen  -- dial-in devices: a DTU connects to rtugw and carries RTU
 *              frames, with an optional registration prefix and heartbeat
 *              (dialin.c).
 *
 * A layer hands its owner exactly what a serial line would: RTU frames
 * whose CRC is good exactly when the frame arrived intact (and, for MBAP,
 * answers the transaction asked). Whatever else arrives becomes a frame
 * whose CRC fails, never a good one, so the framer and decoders above see
 * one contract whatever the transport.
 */
#ifndef RTUGW_DRIVERS_DRIVER_H
#define RTUGW_DRIVERS_DRIVER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- results ------------------------------------------------------------- */

/* read/write: nothing can be done now; poll the fd. */
#define DRIVER_AGAIN (-EAGAIN)
/* read: the line hung up (USB adapter pulled, pseudo-terminal peer closed,
 * read returned 0, POLLHUP). The driver stays allocated; close it and
 * reopen with back-off (driver_reopen, driver_backoff_*). */
#define DRIVER_HANGUP (-ENOTCONN)
/* read: a finite source (replay) has no more data. */
#define DRIVER_EOF (-ENODATA)
/* open: a connection is under way (tcp). The fd is valid: poll it for
 * writing, then call driver_open_finish(); driver_next_deadline() is when
 * the attempt gives up (the caller closes the driver then). */
#define DRIVER_INPROGRESS (-EINPROGRESS)

/* Backend flags. DRIVER_FRAMED: each read returns at most one whole frame
 * (a layer that delimits frames itself: ascii, mbap), so the end of a chunk
 * is the end of a frame and no silence is needed to close it. */
#define DRIVER_FRAMED 1u

#define DRIVER_ERRLEN 256

/* ---- the backend table ----------------------------------------------------- */

typedef struct driver driver_t;

typedef struct driver_backend {
    const char *name; /* "serial", "sim", "replay" */
    /* Opens (or reopens) the source; fills err on failure. */
    int (*open)(driver_t *d, char *err, size_t errcap);
    /* Releases the fd; open may be called again. */
    void (*close)(driver_t *d);
    /* The fd to poll for reading, or -1 when closed. */
    int (*fd)(const driver_t *d);
    /* Queues/sends one frame; returns len, DRIVER_AGAIN or -errno. */
    ssize_t (*write)(driver_t *d, const uint8_t *buf, size_t len);
    /* Reads what is there: > 0 bytes, DRIVER_AGAIN, DRIVER_HANGUP, DRIVER_EOF
     * or -errno. *t_ns: the chunk's time (CLOCK_MONOTONIC at arrival, or the
     * capture's own time for replay). */
    ssize_t (*read)(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns);
    /* One line for logs: "serial /dev/ttyUSB0 19200 8E1 rs485=kernel". */
    int (*describe)(const driver_t *d, char *buf, size_t cap);
    /* Earliest CLOCK_MONOTONIC time at which service must run, or 0. */
    uint64_t (*next_deadline)(const driver_t *d);
    /* Timed work (RTS release, paced replay). Returns 0 or -errno. */
    int (*service)(driver_t *d, uint64_t now_ns);
    /* Frees the backend's private data. */
    void (*destroy)(driver_t *d);
    /* After open returned DRIVER_INPROGRESS and the fd turned writable: 0
     * (open), DRIVER_INPROGRESS (not yet) or -errno with err filled (the
     * driver is closed again). NULL: the backend never returns INPROGRESS. */
    int (*open_finish)(driver_t *d, char *err, size_t errcap);
    unsigned flags;   /* DRIVER_FRAMED */
} driver_backend_t;

/* Counters every backend keeps; read with driver_get_stats(). */
typedef struct driver_stats {
    uint64_t bytes_in, bytes_out;
    uint64_t frames_out;
    uint64_t hangups;         /* hang-ups detected */
    uint64_t opens, open_failures;
    uint64_t echo_bytes;      /* local echo removed (RS-485 echo suppression) */
    uint64_t echo_mismatches; /* echo expected but other bytes came */
    uint64_t frame_errors;    /* layers: frames passed up damaged (bad LRC or hex, cut
                                 short, a transaction id not asked for) */
    uint64_t noise_bytes;     /* layers: bytes outside any frame, dropped */
    uint64_t writes_refused;  /* writes refused on a read-only driver (driver_set_read_only) */
    uint64_t stale_answers;   /* udp: datagrams with a transaction id not in flight (late, duplicated), dropped */
    uint64_t foreign_datagrams; /* udp: datagrams from another address or port than the device's, dropped */
    uint64_t dialin_accepted;   /* listen: DTU connections accepted */
    uint64_t dialin_rejected;   /* listen: closed for a wrong or missing registration, this bus to blame */
    uint64_t dialin_unclaimed;  /* listen: closed on this bus's port with no bus to blame (a registration no
                                   bus there has, silence on a shared port): one count per port, on each bus */
    uint64_t dialin_takeovers;  /* listen: a DTU dialled again while connected: the old connection closed */
    uint64_t heartbeats;        /* listen: heartbeat packets dropped */
} driver_stats_t;

/* Generic construction, for a backend written outside drivers/ (tests).
 * priv belongs to the driver afterwards (freed by backend->destroy). */
driver_t *driver_new(const driver_backend_t *backend, void *priv);
void *driver_priv(const driver_t *d);
driver_stats_t *driver_stats_mut(driver_t *d);
/* Count n into a counter of driver_stats_t: relaxed atomic, since the
 * driver's own thread (the line thread) counts while another (/metrics)
 * reads them with driver_get_stats. */
#define DRIVER_COUNT(d, field, n) \
    ((void)__atomic_fetch_add(&driver_stats_mut(d)->field, (uint64_t)(n), __ATOMIC_RELAXED))

/* Dispatch. */
int driver_open(driver_t *d, char *err, size_t errcap);
void driver_close(driver_t *d);
/* Close and open again (after a hang-up). */
int driver_reopen(driver_t *d, char *err, size_t errcap);
/* After DRIVER_INPROGRESS: see open_finish in the backend table. */
int driver_open_finish(driver_t *d, char *err, size_t errcap);
/* Opens and, when the open is in progress, waits for it up to timeout_ms.
 * Blocks: for command-line tools (`rtugw check --open`) and tests, never
 * for the daemon's loop. 0 or -errno (-ETIMEDOUT) with err filled. */
int driver_open_wait(driver_t *d, unsigned timeout_ms, char *err, size_t errcap);
/* DRIVER_FRAMED: reads end at frame boundaries. */
bool driver_frames_whole(const driver_t *d);
int driver_fd(const driver_t *d);
bool driver_is_open(const driver_t *d);
/* From now on every write is refused (-EROFS) and counted: a listen-only bus. */
void driver_set_read_only(driver_t *d);
ssize_t driver_write(driver_t *d, const uint8_t *buf, size_t len);
ssize_t driver_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns);
int driver_describe(const driver_t *d, char *buf, size_t cap);
uint64_t driver_next_deadline(const driver_t *d);
int driver_service(driver_t *d, uint64_t now_ns);
void driver_get_stats(const driver_t *d, driver_stats_t *st);
const char *driver_backend_name(const driver_t *d);
/* Closes and frees; NULL is fine. */
void driver_free(driver_t *d);

uint64_t driver_now_ns(void); /* CLOCK_MONOTONIC */

/* ---- reopen back-off --------------------------------------------------------- */

/*
 * 100 ms, doubling to 5 s; reset on a successful open. The bus actor (or
 * whoever owns the port) drives it:
 *     on hang-up:  driver_close(d); at = driver_backoff_next(&b, now);
 *     at `at`:     if (driver_open(d, ...) == 0) driver_backoff_reset(&b);
 *                  else at = driver_backoff_next(&b, now);
 */
#define DRIVER_BACKOFF_MIN_NS 100000000ull
#define DRIVER_BACKOFF_MAX_NS 5000000000ull

typedef struct driver_backoff {
    uint64_t delay_ns; /* the delay the next failure will wait */
    unsigned attempts; /* failures since the last reset */
} driver_backoff_t;

void driver_backoff_reset(driver_backoff_t *b);
/* Records a failure at now_ns; returns the time of the next attempt. */
uint64_t driver_backoff_next(driver_backoff_t *b, uint64_t now_ns);

/* ---- serial --------------------------------------------------------------------- */

typedef enum driver_flow {
    DRIVER_FLOW_NONE = 0,
    DRIVER_FLOW_RTSCTS,
    DRIVER_FLOW_XONXOFF
} driver_flow_t;

typedef enum driver_rs485 {
    DRIVER_RS485_OFF = 0,   /* plain RS-232/TTL, or an adapter that switches itself */
    DRIVER_RS485_KERNEL,    /* TIOCSRS485; an error naming the port if unsupported */
    DRIVER_RS485_RTS_TOGGLE,/* the driver raises RTS around each frame itself */
    DRIVER_RS485_AUTO       /* kernel when supported, else RTS toggle */
} driver_rs485_t;

typedef struct driver_serial_config {
    const char *path;      /* /dev/ttyUSB0, /dev/pts/3, ... (copied) */
    unsigned baud;         /* default 19200 */
    unsigned data_bits;    /* 7 or 8; default 8 */
    char parity;           /* 'N', 'E', 'O'; default 'E' (Modbus default) */
    unsigned stop_bits;    /* 1 or 2; default 1 */
    driver_flow_t flow;
    bool shared;           /* true: skip the exclusive lock (not recommended) */
    /* RS-485 */
    driver_rs485_t rs485;
    bool rts_on_send;      /* RTS level while sending: true = high (default) */
    unsigned delay_before_us; /* RTS raised this long before the first bit */
    unsigned delay_after_us;  /* ... and held this long after the last */
    bool rx_during_tx;     /* kernel mode: keep the receiver on while sending */
    bool echo_suppress;    /* drop our own frame when the transceiver echoes it */
} driver_serial_config_t;

/* Fills the defaults above (path NULL). */
void driver_serial_defaults(driver_serial_config_t *cfg);
/* Creates (does not open) a serial driver. NULL on bad config (err says). */
driver_t *driver_serial_new(const driver_serial_config_t *cfg, char *err, size_t errcap);
/* Parses "8N1", "8E1", "7E2" into the config. 0 or -EINVAL. */
int driver_serial_parse_format(const char *text, driver_serial_config_t *cfg);
/* Inter-character (t1.5) and inter-frame (t3.5) silence for the port's format. */
uint64_t driver_serial_t15_ns(const driver_t *d);
uint64_t driver_serial_t35_ns(const driver_t *d);
/* Whether RS-485 ended up kernel, toggle or off after open. */
driver_rs485_t driver_serial_rs485_active(const driver_t *d);

/* Lists serial ports (libserialport enumeration). Returns the count or -errno. */
int driver_ports_list(FILE *out);

/* ---- simulator ---------------------------------------------------------------- */

#define DRIVER_SIM_MAX_SLAVES 32
#define DRIVER_SIM_QUEUE 16     /* in_order: requests the slave holds; more are lost */
#define DRIVER_SIM_DEFAULT_REGISTERS 1000
#define DRIVER_SIM_MAX_CLAMPS 8

typedef enum driver_sim_table {
    DRIVER_SIM_COILS = 0,
    DRIVER_SIM_DISCRETE,
    DRIVER_SIM_HOLDING,
    DRIVER_SIM_INPUT
} driver_sim_table_t;

/*
 * Faults. Each rate is a probability in [0, 1] drawn per answered request
 * from a seeded generator, so a run is reproducible. They apply in this
 * order: silent slave (no answer at all), exception (the exception code
 * instead of the answer; the request is not executed), late (the answer
 * waits late_ms more), noise (noise_bytes random bytes before the answer,
 * then a t3.5 gap, or noise_lead_ms of silence when that is set; the first
 * noise_first answers get it whatever the rate), CRC (the answer's last CRC
 * byte is corrupted), truncate (only the first half of the answer is sent),
 * split (the answer leaves in two halves split_ms apart), double (the whole
 * answer is sent again double_gap_ms after it ended). A rate of 0 draws
 * nothing, so a seed gives the same faults whatever later faults exist.
 */
typedef struct driver_sim_faults {
    uint8_t silent[DRIVER_SIM_MAX_SLAVES]; /* slave ids that never answer */
    size_t n_silent;
    double exception_rate;
    uint8_t exception_code;  /* default 4 (server device failure) */
    double late_rate;
    unsigned late_ms;        /* default 1500 */
    double noise_rate;
    unsigned noise_bytes;    /* default 8 */
    unsigned noise_first;    /* the first N answers get noise, rate or not */
    unsigned noise_lead_ms;  /* noise starts this long before the answer; 0: t3.5 before */
    double truncate_rate;
    double crc_rate;
    double split_rate;
    unsigned split_ms;       /* default 10 */
    double double_rate;
    unsigned double_gap_ms;  /* default 20 */
    uint64_t seed;           /* default 1 */
} driver_sim_faults_t;

typedef struct driver_sim_config {
    uint8_t slaves[DRIVER_SIM_MAX_SLAVES]; /* default 1, 2, 3 */
    size_t n_slaves;
    unsigned registers;    /* per table, addresses 0..registers-1; default 1000 */
    unsigned baud;         /* default 19200 */
    unsigned char_bits;    /* default 11 (8E1) */
    bool pace;             /* write at wire speed */
    unsigned turnaround_us;/* wait this long before answering */
    bool live;             /* input registers and discrete inputs change */
    unsigned live_period_ms; /* default 1000 */
    const char *load_path; /* initial values file, or NULL for the pattern */
    const char *capture_path; /* write every frame on the line here (pcap, DLT 147) */
    /* Serve from the simulator's own FIFO of DRIVER_SIM_QUEUE requests, read
     * while an answer is under way, instead of leaving them in the line's
     * kernel buffer: the same order (arrival), but the queue is bounded,
     * counted and stamped at arrival. See docs/drivers.md. */
    bool in_order;
    /* Model a line at baud/parity/stop_bits (`rtugw sim --pace` on its own
     * pseudo-terminal): a request whose sender set the pty to another speed
     * or format (driver_pty_peer_format) is garbage to this slave's UART, so
     * its bytes are dropped unanswered and counted (line_mismatch). */
    bool check_line;
    /* Holding registers that clamp what is written to them (every slave):
     * a write of 108 to one whose max is 100 is echoed as written and holds
     * 100, as a drive that limits a set point does (`--clamp ADDR=MAX`). */
    struct { uint16_t address, max; } clamp[DRIVER_SIM_MAX_CLAMPS];
    size_t n_clamps;
    char parity;           /* 'N', 'E', 'O'; default 'E' */
    unsigned stop_bits;    /* default 1 */
    FILE *notes;           /* check_line: the first master not heard is named here (NULL: nowhere) */
    driver_sim_faults_t faults;
} driver_sim_config_t;

typedef struct driver_sim_stats {
    uint64_t requests;        /* well-formed requests for a served slave */
    uint64_t replies;         /* answers sent (faulty ones included) */
    uint64_t exceptions;      /* exception answers (real and injected) */
    uint64_t ignored;         /* requests for slaves not served */
    uint64_t broadcasts;
    uint64_t bad_crc;         /* request frames with a bad CRC (not answered) */
    uint64_t noise_in;        /* bytes dropped while resynchronising */
    uint64_t f_silent, f_exception, f_late, f_noise, f_truncate, f_crc, f_split, f_double;
    uint64_t queued;          /* in_order: requests that waited behind an answer */
    uint64_t queue_max;       /* in_order: the most requests waiting at once */
    uint64_t queue_lost;      /* in_order: requests dropped, the queue being full */
    uint64_t line_mismatch;   /* check_line: bytes dropped, sent at another speed or format */
} driver_sim_stats_t;

typedef struct driver_sim driver_sim_t;

/* Fills the defaults documented above. */
void driver_sim_defaults(driver_sim_config_t *cfg);
/* Parses "1,2,3" into cfg->slaves. 0 or -EINVAL. */
int driver_sim_parse_slaves(const char *text, driver_sim_config_t *cfg);
driver_sim_t *driver_sim_new(const driver_sim_config_t *cfg, char *err, size_t errcap);
void driver_sim_free(driver_sim_t *sim);

/* The pattern: the initial value of one item (documented in docs/drivers.md). */
uint16_t driver_sim_pattern(uint8_t slave, driver_sim_table_t table, unsigned address);

/*
 * The core, with no I/O: one request ADU in; 1 and an answer plan out, or 0
 * when nothing is to be sent (foreign slave, broadcast, bad CRC, silent).
 * The plan, in line order: delay_ns after the request, the noise (if any);
 * then noise_gap_ns of silence and the answer's first split_at bytes (all of
 * it when split_at is 0); split_gap_ns later the rest; twice_gap_ns later,
 * when twice, the whole answer again. Without noise the answer itself waits
 * delay_ns. Each gap counts from the end of what went before.
 */
#define DRIVER_SIM_MAX_ADU 260
typedef struct driver_sim_answer {
    uint8_t noise[64];
    size_t noise_len;
    uint64_t noise_gap_ns;  /* noise end to answer: t3.5, or noise_lead_ms */
    uint8_t adu[DRIVER_SIM_MAX_ADU];
    size_t len;
    uint64_t delay_ns;      /* request to the first byte: turnaround + late (- lead) */
    size_t split_at;        /* 0, or the bytes sent before the split gap */
    uint64_t split_gap_ns;
    bool twice;             /* the answer is sent again */
    uint64_t twice_gap_ns;
} driver_sim_answer_t;
int driver_sim_handle(driver_sim_t *sim, const uint8_t *adu, size_t len, uint64_t now_ns,
                      driver_sim_answer_t *out);

/* Register access for tests and the demo (thread-safe). 0 or -ERANGE/-ENOENT. */
int driver_sim_get(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table,
                   unsigned address, uint16_t *value);
int driver_sim_set(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table,
                   unsigned address, uint16_t value);
void driver_sim_get_stats(driver_sim_t *sim, driver_sim_stats_t *st);

/*
 * Serves requests on fd (a pseudo-terminal master, or a port; made
 * non-blocking) until
 * driver_sim_stop() or a hang-up. Blocks: run it in its own process
 * (`rtugw sim`) or thread (driver_sim_start). Returns 0 on stop, -errno.
 */
int driver_sim_serve(driver_sim_t *sim, int fd);
/* Serves fd on a new thread. The fd stays the caller's. */
int driver_sim_start(driver_sim_t *sim, int fd);
/* Asks serve to return (any thread, async-signal-safe); joins a started thread. */
void driver_sim_stop(driver_sim_t *sim);
void driver_sim_request_stop(driver_sim_t *sim);

/* A pseudo-terminal pair in raw mode: *master for the simulator, *slave held
 * open so the master never sees a hang-up while clients come and go, and the
 * slave's path. 0 or -errno. */
int driver_pty_open(int *master, int *slave, char *path, size_t pathcap);

/* The line settings the master end of a pseudo-terminal pair was set to
 * (Linux answers TCGETS on a pty master with the slave end's termios): baud
 * (0 when not a standard rate), parity 'N'/'E'/'O' (from PARENB or, since a
 * pty clears PARENB, the CMSPAR rtugw's serial driver declares it in, or the
 * INPCK libmodbus sets with a parity) and
 * stop bits. Data bits cannot be told (a pty forces CS8). 0 or -errno. */
int driver_pty_peer_format(int master, unsigned *baud, char *parity, unsigned *stop_bits);

/* The simulator as a driver: a simulator thread on a fresh pty pair, the
 * driver reading and writing the other end (through the serial code). */
driver_t *driver_sim_driver_new(const driver_sim_config_t *cfg, char *err, size_t errcap);
driver_sim_t *driver_sim_of(driver_t *d);

/* ---- TCP client, Modbus ASCII, MBAP ---------------------------------------------------- */

#define DRIVER_TCP_HOST_MAX 64
/* A host name a tcp:// port may give instead of an IPv4 address: letters,
 * digits, hyphens and dots (RFC 1123), resolved afresh on each open without
 * blocking the caller (drivers/tcp.c). */
bool driver_tcp_host_name_ok(const char *host);

typedef struct driver_tcp_config {
    const char *host;               /* an IPv4 address (10.0.0.5) or a host name (copied) */
    unsigned port;                  /* 1..65535 */
    unsigned connect_timeout_ms;    /* default 3000 */
} driver_tcp_config_t;

void driver_tcp_defaults(driver_tcp_config_t *cfg);
/* Creates (does not connect) a TCP client. NULL with err on bad config. */
driver_t *driver_tcp_new(const driver_tcp_config_t *cfg, char *err, size_t errcap);

/* The Modbus ASCII layer over inner (which it owns from then on, also when
 * it fails): ':' + hex + LRC + CRLF on inner, RTU frames above. A frame
 * not complete char_timeout_ms after its previous character is abandoned
 * (0: the spec's 1000 ms). NULL with err. */
driver_t *driver_ascii_new(driver_t *inner, unsigned char_timeout_ms, char *err, size_t errcap);
/* LRC of Modbus ASCII: the two's complement of the byte sum. */
uint8_t driver_ascii_lrc(const uint8_t *p, size_t n);

/* The MBAP layer over inner (owned from then on, also when it fails): each
 * RTU request written goes out as an MBAP ADU with the next transaction id
 * of rtugw's own; an answer with that id comes back as an RTU frame of the
 * request's slave with a good CRC, anything else as a frame whose CRC
 * fails. A header that cannot be MBAP ends the connection (-EPROTO). */
driver_t *driver_mbap_new(driver_t *inner, char *err, size_t errcap);

/* Modbus UDP (udp.c): one MBAP ADU per datagram to host:port, rtugw's
 * own transaction id on each attempt; only the answer to the attempt in
 * flight, from that address and port, comes up (an RTU frame with a good
 * CRC, DRIVER_FRAMED); anything else is dropped and counted
 * (stale_answers, foreign_datagrams, frame_errors). connect_timeout_ms
 * bounds a host name's resolution. NULL with err on bad config. */
driver_t *driver_udp_new(const driver_tcp_config_t *cfg, char *err, size_t errcap);

/* Dial-in devices (dialin.c): rtugw listens on addr:port, a DTU connects
 * and carries RTU frames (tcp.c's stream once connected). register: the
 * bytes the DTU must send first (0 long: none), within register_timeout_ms;
 * heartbeat: a keep-alive packet dropped where a frame could begin. A DTU
 * connecting again takes the bus back (the old connection is a hang-up).
 * Several buses may share one addr:port, each with a registration none of
 * the others begins with: one listening socket, found in ports
 * (dialin_hub.c), hands each connection to the bus it registers as. */
#define DRIVER_DIALIN_BYTES_MAX 64
/* The listening sockets dial-in buses share, by address: the owner of the
 * buses (the gateway) creates it before their drivers and frees it after
 * the last of them is freed. */
typedef struct driver_dialin_ports driver_dialin_ports_t;
driver_dialin_ports_t *driver_dialin_ports_new(void);
void driver_dialin_ports_free(driver_dialin_ports_t *ports);
typedef struct driver_dialin_config {
    driver_dialin_ports_t *ports;     /* where a shared port is found; NULL: a listening socket of its own */
    const char *addr;                 /* IPv4 address to bind (0.0.0.0: all) */
    unsigned port;
    const uint8_t *register_bytes;
    size_t register_len;
    const uint8_t *heartbeat;
    size_t heartbeat_len;
    unsigned register_timeout_ms;
} driver_dialin_config_t;
driver_t *driver_dialin_new(const driver_dialin_config_t *cfg, char *err, size_t errcap);

/* ---- captures and replay ------------------------------------------------------------ */

typedef enum driver_capture_format {
    DRIVER_CAPTURE_AUTO = 0,
    DRIVER_CAPTURE_PCAP,
    DRIVER_CAPTURE_PCAPNG,
    DRIVER_CAPTURE_TEXT
} driver_capture_format_t;

typedef struct driver_capture driver_capture_t;

typedef struct driver_record {
    uint64_t ts_ns;        /* capture time (ns since the epoch, or since start for text) */
    uint8_t data[1024];    /* the Modbus RTU bytes (MBAP converted to RTU) */
    size_t len;
    int direction;         /* 1 request (master to slave), 0 response, -1 unknown */
    unsigned long number;  /* 1-based record number in the file */
    uint64_t offset;       /* byte offset (pcap/pcapng) or line number (text) */
} driver_record_t;

/* Opens a capture; format detected from the first bytes unless forced.
 * NULL with err ("FILE: not a capture ...") on failure. */
driver_capture_t *driver_capture_open(const char *path, driver_capture_format_t format,
                                      char *err, size_t errcap);
/* 1 and *rec, 0 at the end, or -EBADMSG/-EIO with err naming file and
 * record number and offset (what was read before stays valid). */
int driver_capture_next(driver_capture_t *cap, driver_record_t *rec, char *err, size_t errcap);
driver_capture_format_t driver_capture_format(const driver_capture_t *cap);
const char *driver_capture_format_name(driver_capture_format_t format);
int driver_capture_parse_format(const char *name, driver_capture_format_t *format);
/* Records skipped as not Modbus (other link types, other TCP ports, ...). */
unsigned long driver_capture_skipped(const driver_capture_t *cap);
void driver_capture_close(driver_capture_t *cap);

/* Capture writing: a pcap file (microsecond timestamps, link type 147,
 * USER0) with one record per frame as it went over the line, which
 * Wireshark's Modbus RTU dissector reads once DLT 147 is mapped to mbrtu. */
typedef struct driver_capture_writer driver_capture_writer_t;
driver_capture_writer_t *driver_capture_writer_open(const char *path, char *err, size_t errcap);
/* ts_ns: CLOCK_REALTIME nanoseconds, or 0 for now. 0 or -errno. */
int driver_capture_write(driver_capture_writer_t *w, uint64_t ts_ns, const uint8_t *p, size_t n);
/* Flushes and closes; 0 or -errno (a full disk shows here). NULL is fine. */
int driver_capture_writer_close(driver_capture_writer_t *w);

/* A capture as a read-only driver. original_timing: chunks become readable
 * at their recorded spacing (speed multiplies it); else as fast as the
 * reader takes them. */
driver_t *driver_replay_new(const char *path, driver_capture_format_t format,
                            bool original_timing, double speed, char *err, size_t errcap);
/* After read returned -EBADMSG: the reader's message (file, record, offset). */
const char *driver_replay_error(const driver_t *d);

#endif
