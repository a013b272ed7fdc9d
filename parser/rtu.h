/*
 * parser/rtu.h -- Modbus RTU and Modbus TCP (MBAP) framing, CRC-16/MODBUS,
 * request and response ADU decode/encode. This is the one public header of
 * parser/. Owns: framing (the streaming framer too), CRC, decode and
 * encode. May call: libc only; every other folder may call it.
 *
 * Three implementations of the response decoder exist (reference,
 * fallback, native); for every input they produce byte-identical envelopes,
 * which is what the tests and the equivalence gate check with memcmp().
 *
 * Errors: functions return rtu_status_t (RTU_OK == 0) or a negative errno.
 */
#ifndef RTUGW_PARSER_RTU_H
#define RTUGW_PARSER_RTU_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <strings.h>

#define RTU_MIN_ADU 4      /* slave + function + CRC */
#define RTU_MAX_ADU 256    /* Modbus over serial line, 2.5.1.1 */
#define RTU_MAX_PDU 253
#define RTU_MAX_BYTECOUNT 250
#define RTU_MAX_REGISTERS 125
#define MBAP_HEADER_LEN 7
#define MBAP_MAX_ADU (MBAP_HEADER_LEN + RTU_MAX_PDU)

/* Modbus exception codes (Modbus application protocol, 7): those a slave or
 * the gateway answers with. */
#define MB_EX_ILLEGAL_FUNCTION 0x01
#define MB_EX_ILLEGAL_DATA_ADDRESS 0x02
#define MB_EX_ILLEGAL_DATA_VALUE 0x03
#define MB_EX_SLAVE_FAILURE 0x04
#define MB_EX_BUSY 0x06
#define MB_EX_PATH_UNAVAILABLE 0x0A
#define MB_EX_TARGET_FAILED 0x0B

/* ---- the four tables' names ---------------------------------------------------- */

/*
 * The one parser of a Modbus table's name, for a tag CSV, [tag] sections,
 * `rtugw read` (tags/) and the simulator's --load file (drivers/), which
 * disagreed (the CSV refused the `hr` the simulator took). Any case; the
 * singular, the plural and the short form: coil(s)/co, discrete/di,
 * holding/hr, input/ir. Returns 0 coils, 1 discrete inputs, 2 holding
 * registers, 3 input registers (the order of tags_area_t and
 * driver_sim_table_t), or -1. Inline, so that tags/ takes no library.
 */
#define RTU_TABLE_NAMES "coil, discrete, holding or input (or co, di, hr, ir)"
static inline int rtu_table_parse(const char *name)
{
    static const char *const names[4][3] = {
        { "coil", "coils", "co" }, { "discrete", "discretes", "di" },
        { "holding", "holdings", "hr" }, { "input", "inputs", "ir" },
    };
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 3; k++)
            if (strcasecmp(name, names[t][k]) == 0)
                return t;
    return -1;
}

/* ---- status ----------------------------------------------------------- */

typedef enum rtu_status {
    RTU_OK = 0,
    RTU_ERR_SHORT,      /* fewer than 4 bytes, or fewer than the function needs */
    RTU_ERR_LONG,       /* more than 256 bytes */
    RTU_ERR_CRC,        /* CRC-16/MODBUS does not match */
    RTU_ERR_LENGTH,     /* fixed-length PDU (exception, echo) of the wrong size */
    RTU_ERR_BYTECOUNT,  /* byte count disagrees with the frame, is odd for
                           registers, zero, or above 250 */
    RTU_ERR_FUNCTION,   /* function code 0, or a request we cannot forward */
    RTU_ERR_VALUE,      /* a field out of its range (request quantity, ...) */
    RTU_STATUS_COUNT
} rtu_status_t;

/* Stable lower-case name ("ok", "crc", "short", ...) used in JSON output. */
const char *rtu_status_name(rtu_status_t status);

/* ---- CRC-16/MODBUS (poly 0xA001 reflected, init 0xFFFF) ---------------- */

uint16_t rtu_crc16_reference(const uint8_t *buf, size_t len);
uint16_t rtu_crc16_fallback(const uint8_t *buf, size_t len);
uint16_t rtu_crc16_native(const uint8_t *buf, size_t len);
/* Libmodbus's approach (two 256-entry byte tables); only for benchmarks. */
uint16_t rtu_crc16_bytetable(const uint8_t *buf, size_t len);
/* The fastest of the above on this CPU. */
uint16_t rtu_crc16(const uint8_t *buf, size_t len);

/* ---- response envelope ------------------------------------------------- */

typedef enum rtu_kind {
    RTU_KIND_NONE = 0,  /* decode failed; only status is set */
    RTU_KIND_BITS,      /* fc 1, 2: data.bytes holds the packed bits, count = bits */
    RTU_KIND_REGISTERS, /* fc 3, 4, 23: data.regs in host order, count = registers */
    RTU_KIND_SINGLE,    /* fc 5, 6: address, value */
    RTU_KIND_MULTIPLE,  /* fc 15, 16: address, value = quantity */
    RTU_KIND_MASK,      /* fc 22: address, value = and mask, or_mask */
    RTU_KIND_EXCEPTION, /* 0x80 | fc: exception */
    RTU_KIND_RAW        /* any other function: data.bytes = PDU after the function code */
} rtu_kind_t;

/*
 * The canonical, fixed-size result of a response decode. Every decoder
 * zero-fills it first and sets only what the kind defines, so two envelopes
 * are equal exactly when memcmp() says so. On error only status is set.
 * No padding: sizeof == 16 + 256.
 */
typedef struct rtu_envelope {
    uint8_t status;    /* rtu_status_t */
    uint8_t kind;      /* rtu_kind_t */
    uint8_t slave;
    uint8_t function;  /* as on the wire, high bit set for exceptions */
    uint8_t exception;
    uint8_t reserved[3];
    uint16_t address;
    uint16_t value;    /* fc 5/6 value, fc 15/16 quantity, fc 22 and mask */
    uint16_t or_mask;
    uint16_t count;    /* bits, registers or raw bytes held in data */
    union {
        uint16_t regs[128];
        uint8_t bytes[256];
    } data;
} rtu_envelope_t;

typedef enum rtu_path {
    RTU_PATH_REFERENCE = 0,
    RTU_PATH_FALLBACK,
    RTU_PATH_NATIVE,
    RTU_PATH_COUNT
} rtu_path_t;

typedef rtu_status_t (*rtu_decode_fn)(const uint8_t *adu, size_t len, rtu_envelope_t *out);

/* Response decode, one per path. Each returns out->status. */
rtu_status_t rtu_decode_reference(const uint8_t *adu, size_t len, rtu_envelope_t *out);
rtu_status_t rtu_decode_fallback(const uint8_t *adu, size_t len, rtu_envelope_t *out);
rtu_status_t rtu_decode_native(const uint8_t *adu, size_t len, rtu_envelope_t *out);
/* Libmodbus-style form for benchmarks: byte-table CRC, scalar swap. */
rtu_status_t rtu_decode_bytetable(const uint8_t *adu, size_t len, rtu_envelope_t *out);

rtu_decode_fn rtu_decoder(rtu_path_t path);
const char *rtu_path_name(rtu_path_t path);
/* Returns 0 and sets *path, or -EINVAL for an unknown name. */
int rtu_path_parse(const char *name, rtu_path_t *path);

/* What the native path uses on this CPU, e.g. "pclmul+avx2", or "none"
 * when native equals fallback. */
const char *rtu_native_features(void);
bool rtu_native_accelerated(void);

/*
 * Writes the envelope as one JSON object with exactly the fields that
 * shared/frames/README.md lists, plus "error" when not ok, "data" (hex) for
 * functions without a decoder and "path" unless path is NULL. Returns the
 * length written (like snprintf), or a negative value on overflow.
 */
int rtu_envelope_json(const rtu_envelope_t *env, const char *path, char *buf, size_t cap);

/* ---- requests ---------------------------------------------------------- */

typedef struct rtu_request {
    uint8_t slave;
    uint8_t function;
    uint16_t address;      /* read address (fc 23: read address) */
    uint16_t quantity;     /* read quantity, fc 5/6 value, fc 22 and mask */
    uint16_t or_mask;      /* fc 22 */
    uint16_t write_address;/* fc 23 */
    uint16_t write_quantity; /* fc 15, 16, 23 */
    uint8_t byte_count;    /* fc 15, 16, 23: bytes in data */
    uint8_t data[RTU_MAX_PDU]; /* write payload as on the wire; raw PDU tail for other fc */
    uint16_t data_len;
} rtu_request_t;

/* What a request does to a slave (parser/function.c): one classifier for
 * read-only mode, TLS roles and broadcasts. The classes a role is granted
 * (READ .. USER) have the values of config/'s CONFIG_FN_*. */
#define RTU_FN_READ 0x01u         /* reads data: 1, 2, 3, 4, 24 (and 23) */
#define RTU_FN_WRITE 0x02u        /* writes data: 5, 6, 15, 16, 22 (and 23) */
#define RTU_FN_DIAGNOSTICS 0x04u  /* 7, 8, 11, 12, 17, 43/14 */
#define RTU_FN_FILE 0x08u         /* 20, 21 */
#define RTU_FN_USER 0x10u         /* user-defined: 65..72, 100..110 */
#define RTU_FN_CHANGES 0x20u      /* may change the slave: what read-only mode refuses */
#define RTU_FN_BROADCAST 0x40u    /* may go to unit 0: a write every slave acts on unasked */
unsigned rtu_function_class(const uint8_t *pdu, size_t len);

/* Decode a request PDU (function code first, no slave, no CRC). */
rtu_status_t rtu_request_decode_pdu(const uint8_t *pdu, size_t len, rtu_request_t *req);
/* Decode a request RTU ADU (slave, PDU, CRC): checks length and CRC first. */
rtu_status_t rtu_request_decode(const uint8_t *adu, size_t len, rtu_request_t *req);
/* Encode a request as an RTU ADU with CRC. Returns the length or -ENOSPC/-EINVAL. */
int rtu_request_encode(const rtu_request_t *req, uint8_t *adu, size_t cap);
int rtu_request_json(const rtu_request_t *req, rtu_status_t status, char *buf, size_t cap);

/* Wrap a PDU into an RTU ADU (slave + PDU + CRC). Returns length or -ENOSPC/-EMSGSIZE. */
int rtu_adu_from_pdu(uint8_t slave, const uint8_t *pdu, size_t pdu_len, uint8_t *adu, size_t cap);

/* ---- Modbus TCP (MBAP) -------------------------------------------------- */

typedef struct mbap_header {
    uint16_t transaction;
    uint16_t protocol;
    uint16_t length;  /* unit id + PDU */
    uint8_t unit;
} mbap_header_t;

/*
 * Decode the 7-byte MBAP header at the front of buf. Returns 0, -EAGAIN when
 * fewer than 7 bytes are there, -EPROTO for a protocol id other than 0, and
 * -EMSGSIZE for a length outside 2..254.
 */
int mbap_decode_header(const uint8_t *buf, size_t len, mbap_header_t *hdr);

/*
 * Split a Modbus TCP byte stream into ADUs: looks at the first avail bytes
 * of a receive buffer (what has arrived and not yet been consumed; buf may
 * be NULL when avail is 0) and says whether a whole ADU is at its front.
 *
 *   1          a whole ADU is there: *hdr is filled and *adu_len is its size,
 *              6 + hdr->length (header + PDU), at most MBAP_MAX_ADU. The
 *              caller consumes exactly *adu_len bytes and calls again, so
 *              pipelined ADUs come out one at a time, in order.
 *   0          more bytes are needed: fewer than 7, or a valid header whose
 *              PDU has not all arrived. Nothing is consumed; call again with
 *              the same front and more bytes behind it.
 *   -EPROTO    protocol id not 0 (the rules of mbap_decode_header);
 *   -EMSGSIZE  length outside 2..254. The stream cannot be resynchronised
 *              after either (MBAP has no delimiter but the length), so the
 *              connection must be closed. *hdr is filled, so the caller can
 *              log the protocol and length it refuses.
 *
 * *adu_len is written only when 1 is returned. Only the 7 header bytes are
 * read (never the PDU, never a byte past avail), so the answer for a given
 * front does not depend on how the stream was cut into reads, and the
 * caller may pass a copy of just the first MBAP_MAX_ADU bytes. A header is
 * judged as soon as its 7 bytes are there, before its PDU, so a bad one is
 * refused without waiting for bytes that may never come. Pure: no state,
 * no allocation.
 */
int mbap_stream_next(const uint8_t *buf, size_t avail, mbap_header_t *hdr, size_t *adu_len);
/* Writes MBAP header + PDU. Returns the length or -ENOSPC/-EMSGSIZE. */
int mbap_encode(uint16_t transaction, uint8_t unit, const uint8_t *pdu, size_t pdu_len,
                uint8_t *out, size_t cap);

/* ---- length prediction -------------------------------------------------- */

/*
 * From the first `have` bytes of a response (or request) ADU, the length of
 * the whole ADU: > 0 when known, 0 when more bytes are needed to tell, and
 * -1 when the function has no length rule (delimit by silence).
 */
int rtu_response_length(const uint8_t *buf, size_t have);
int rtu_request_length(const uint8_t *buf, size_t have);

/* ---- timing -------------------------------------------------------------- */

/* Bits per character: start + data + parity + stop. */
unsigned rtu_char_bits(unsigned data_bits, char parity, unsigned stop_bits);
/* t1.5 and t3.5 in nanoseconds; fixed 750 us and 1750 us above 19200 baud. */
uint64_t rtu_t15_ns(unsigned baud, unsigned char_bits);
uint64_t rtu_t35_ns(unsigned baud, unsigned char_bits);

/* ---- streaming framer ---------------------------------------------------- */

typedef enum rtu_frame_dir {
    RTU_DIR_RESPONSE = 0, /* master side: frames are responses */
    RTU_DIR_REQUEST,      /* slave side: frames are requests */
    RTU_DIR_SNIFF         /* both, as on a captured bus: request then response */
} rtu_frame_dir_t;

typedef struct rtu_framer_config {
    unsigned baud;        /* 0: silence delimiting off */
    unsigned char_bits;   /* from rtu_char_bits(); 0 means 11 */
    rtu_frame_dir_t dir;
    /* 0: the silence that ends a segment is t3.5 at baud, net of each
     * chunk's wire time. Else a byte stream without wire timing (RTU over
     * TCP): this silence ends a segment, and chunks carry no wire time.
     * Needs baud != 0 (silence on). */
    uint64_t silence_ns;
    /* RESPONSE or REQUEST: a frame whose length its rule predicts, at a
     * boundary (after a frame, a silence or a reset), ends by that length
     * alone; a silence inside it does not close it (a late read of the
     * port, not the wire, made it). Silence still ends frames of unknown
     * length and resynchronises after noise. parser/framer.c, "Length
     * over silence". */
    bool by_length;
} rtu_framer_config_t;

typedef struct rtu_frame {
    uint8_t adu[RTU_MAX_ADU];
    uint16_t len;
    uint8_t is_request;   /* RTU_DIR_SNIFF: which side this frame was judged to be */
    uint8_t crc_ok;
    uint64_t t_first_ns;  /* arrival stamp of the first byte */
    uint64_t t_last_ns;   /* arrival stamp of the last byte */
    uint64_t noise_mark;  /* the framer's noise_bytes as this frame was emitted: a count that
                             grows past it later means bytes discarded after this frame */
} rtu_frame_t;

typedef struct rtu_framer_stats {
    uint64_t frames;
    uint64_t noise_bytes;   /* discarded while resynchronising */
    uint64_t silence_splits;/* frames delimited by t3.5 rather than by length */
    uint64_t overflows;     /* more than 256 bytes without a frame boundary */
} rtu_framer_stats_t;

typedef struct rtu_framer rtu_framer_t;

rtu_framer_t *rtu_framer_new(const rtu_framer_config_t *cfg);
void rtu_framer_free(rtu_framer_t *fr);
/* Feed a chunk of bytes that arrived together at monotonic time t_ns. */
void rtu_framer_feed(rtu_framer_t *fr, const uint8_t *bytes, size_t n, uint64_t t_ns);
/* Tell the framer the line has been quiet up to now_ns (t3.5 delimiting). */
void rtu_framer_idle(rtu_framer_t *fr, uint64_t now_ns);
/* True when the framer holds no byte and has discarded none since its last
 * frame or silence: rtu_framer_idle would then only note the silence, which nothing
 * uses (a segment's own first byte is never asked whether silence came
 * before it), so a caller may leave its silence timer unarmed. */
bool rtu_framer_settled(const rtu_framer_t *fr);
/* by_length: true while the head waits for the rest of the frame its rule
 * predicts, which no silence can end: a caller need not arm its silence
 * timer for it (the bytes that complete it, or fail its CRC, come by feed). */
bool rtu_framer_held(const rtu_framer_t *fr);
/* Bytes held: fed, and neither framed nor discarded yet (0 after a frame cut
 * from its chunk by its length means nothing came behind it). */
size_t rtu_framer_buffered(const rtu_framer_t *fr);
/* Next complete frame: 1 and *out filled, or 0 when none is ready. */
int rtu_framer_next(rtu_framer_t *fr, rtu_frame_t *out);
/* Drop buffered bytes (after a reopen, a timeout). */
void rtu_framer_reset(rtu_framer_t *fr);
void rtu_framer_get_stats(const rtu_framer_t *fr, rtu_framer_stats_t *st);

/* ---- hex ------------------------------------------------------------------ */

/*
 * Parse hex with optional space, colon or dash separators between bytes.
 * Returns the byte count, -EINVAL on a non-hex character or odd digit
 * count (and *bad_col = 1-based column), -ENOSPC when it does not fit.
 */
int rtu_hex_parse(const char *text, uint8_t *out, size_t cap, size_t *bad_col);

/* ---- pairing on an overheard line (parser/pair.c) ----------------------------------------- */

/*
 * Is the RTU answer ans (CRC already checked) the answer to the RTU request req? Same slave
 * and function (or its exception), and the shape the request asks for: the byte count its
 * quantity implies, or the exact echo of a write. The line discipline's Fact F on ADUs.
 */
bool rtu_answer_matches(const uint8_t *req, size_t req_len, const uint8_t *ans, size_t ans_len);

typedef enum rtu_pair_kind {
    RTU_PAIR_ANSWERED = 0, /* request and the answer vouched for it: usable */
    RTU_PAIR_UNANSWERED,   /* request the master gave up on (its next request came first) */
    RTU_PAIR_DOUBTFUL,     /* request and an answer that may not be its own: not usable */
    RTU_PAIR_UNPAIRED,     /* a CRC-good answer no pending request explains */
    RTU_PAIR_DAMAGED,      /* a frame that failed its CRC (cut, garbled) */
    RTU_PAIR_KIND_COUNT
} rtu_pair_kind_t;

typedef struct rtu_pair_event {
    uint8_t kind;          /* rtu_pair_kind_t */
    uint8_t retry;         /* the request repeats, byte for byte, one the master gave up on */
    uint8_t duplicate;     /* ANSWERED: the answer came twice with the same bytes */
    const char *why;       /* DOUBTFUL, UNPAIRED: a short reason */
    rtu_frame_t request;   /* ANSWERED, UNANSWERED, DOUBTFUL */
    rtu_frame_t answer;    /* ANSWERED, DOUBTFUL, UNPAIRED, DAMAGED */
    uint64_t latency_ns;   /* ANSWERED, DOUBTFUL: answer's first byte - request's last byte;
                              UNANSWERED: the next request's first byte - its last byte (the
                              master's timeout, as heard) */
} rtu_pair_event_t;

typedef struct rtu_pair_stats {
    uint64_t requests, broadcasts, retries;
    uint64_t by_kind[RTU_PAIR_KIND_COUNT];
    uint64_t duplicates;   /* answers heard twice with the same bytes (used once) */
    uint64_t dropped;      /* events lost because the caller did not drain them */
    uint64_t late;         /* answers later than the master's timeout as heard (doubtful, never used) */
    uint64_t owed;         /* answers another owed request of the slave could own (doubtful, P5) */
    uint64_t heard_timeout_ns; /* the master's timeout as heard: the shortest wait with nothing in it
                                  from a request to the master's next (0: none heard yet) */
} rtu_pair_stats_t;

typedef struct rtu_pairer rtu_pairer_t;

/* hold_ns: how long the line must be quiet after an answer before it is vouched for (the
 * master's next request vouches at once); 0 picks 20 ms. One fixed allocation. */
rtu_pairer_t *rtu_pairer_new(uint64_t hold_ns);
/* P5's late bound: a slave sends what it sends for a request within factor x the master's
 * timeout as heard after it ([bus] listen_late_factor); 0 picks 4. */
void rtu_pairer_set_late_factor(rtu_pairer_t *p, unsigned factor);
void rtu_pairer_free(rtu_pairer_t *p);
/* A frame from a SNIFF framer, and the framer's noise_bytes count after it was taken out. */
void rtu_pairer_frame(rtu_pairer_t *p, const rtu_frame_t *f, uint64_t noise_bytes);
/* The line has been quiet up to now_ns; noise_bytes as above. */
void rtu_pairer_idle(rtu_pairer_t *p, uint64_t now_ns, uint64_t noise_bytes);
/* True while an answer waits to be vouched for (rtu_pairer_idle will settle it). */
bool rtu_pairer_holding(const rtu_pairer_t *p);
/* Next event: 1 and *ev filled, 0 when none is ready. */
int rtu_pairer_next(rtu_pairer_t *p, rtu_pair_event_t *ev);
void rtu_pairer_get_stats(const rtu_pairer_t *p, rtu_pair_stats_t *st);
const char *rtu_pair_kind_name(rtu_pair_kind_t kind);

/*
 * What a tap learns about the master (parser/learn.c): per slave, the requests it polls
 * (function, address, quantity), their intervals, the master's timeout and retries as
 * heard. Bounded: RTU_LEARN_POLLS distinct polls; more are counted in polls_dropped.
 */
#define RTU_LEARN_POLLS 256

typedef struct rtu_learn_poll {
    uint8_t slave, function;
    uint16_t address, quantity;   /* quantity: 0 when the function has none */
    uint64_t count;               /* requests heard */
    uint64_t answered;            /* of which ANSWERED */
    uint64_t first_ns, last_ns;   /* the request's last byte, first and last time */
    uint64_t interval_min_ns, interval_max_ns; /* between consecutive requests (retries excluded) */
    uint64_t intervals;           /* how many intervals the two above and the mean cover */
    uint64_t latency_max_ns;      /* slowest answer */
} rtu_learn_poll_t;

typedef struct rtu_learn_slave {
    uint64_t requests, answered, unanswered, doubtful, retries;
    uint64_t timeout_min_ns, timeout_max_ns; /* request -> the master's next request, unanswered */
    uint64_t latency_max_ns;
} rtu_learn_slave_t;

typedef struct rtu_learn rtu_learn_t;
rtu_learn_t *rtu_learn_new(void);
void rtu_learn_free(rtu_learn_t *l);
void rtu_learn_event(rtu_learn_t *l, const rtu_pair_event_t *ev);
/* The polls heard, in first-heard order: 1 and *out for index i, 0 past the end. */
int rtu_learn_poll(const rtu_learn_t *l, unsigned i, rtu_learn_poll_t *out);
/* NULL for a slave never asked. */
const rtu_learn_slave_t *rtu_learn_slave(const rtu_learn_t *l, uint8_t slave);
uint64_t rtu_learn_polls_dropped(const rtu_learn_t *l);

#endif
