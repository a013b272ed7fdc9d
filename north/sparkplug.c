/*
 * north/sparkplug.c -- [mqtt] format = sparkplug: rtugw as a Sparkplug B
 * edge node (Eclipse Sparkplug 3.0). Each rtugw device is a Sparkplug
 * device, each tag a metric; docs/sparkplug.md has the whole picture.
 *
 * Topics: spBv1.0/GROUP/{NBIRTH,NDEATH,NCMD}/EDGE and
 * spBv1.0/GROUP/{DBIRTH,DDEATH,DDATA,DCMD}/EDGE/DEVICE; spBv1.0/STATE/HOST.
 *
 * The session, as the specification orders it:
 *   - every CONNECT carries the will NDEATH {bdSeq (Int64)}, bdSeq one more
 *     than the previous CONNECT's (0..255, wrapping; an attempt whose TCP
 *     connection failed sent none and reuses it); with spool_dir the last is kept in
 *     SPOOL_DIR/sparkplug-bdseq so a restart goes on from it, else it starts
 *     at 0 with each start of the daemon;
 *   - after CONNACK: subscribe NCMD, DCMD (of this node) and, with
 *     primary_host_id, STATE; then (at once, or once STATE says online) the
 *     births: NBIRTH (seq 0, bdSeq, Node Control/Rebirth) and one DBIRTH per
 *     device that is not down and has values, with every metric's name,
 *     alias, datatype and current value;
 *   - DDATA carries the metrics that changed (values.c: deadband, quality),
 *     by alias only; seq grows by one per message (DBIRTH, DDATA, DDEATH),
 *     0..255 wrapping, and starts over at 0 with each NBIRTH;
 *   - a device reported down (north_device_status: port down, slave silent
 *     or backed off) gets DDEATH; back up, its next values go out as a new
 *     DBIRTH. A new metric, or one whose datatype changed (an untyped value
 *     that turned from number to bool), is a new DBIRTH of its device too;
 *   - a reload that adds, removes or renames a device's metrics
 *     (north_define_done): DDEATH of the device, then a DBIRTH of its
 *     current set with its next values; a device left with no metric gets
 *     DDEATH and no birth; a Rebirth names the current set only;
 *   - NCMD Node Control/Rebirth = true: the births again (same bdSeq);
 *   - a clean stop publishes NDEATH before DISCONNECT (the broker drops the
 *     will then); a broken connection lets the broker publish the will.
 * Every Sparkplug message from the node is QoS 0, not retained, as the
 * specification wants (the will is QoS 1); [mqtt] qos applies to the JSON
 * formats only.
 *
 * While the node cannot publish (no session, or the primary host offline)
 * the DDATA it would have sent is kept, bounded by buffer_messages and
 * buffer_bytes (the oldest dropped and counted), its metrics flagged
 * is_historical; after the next births it goes out behind them, with new
 * seq numbers (the payload is encoded without seq; seq is appended when it
 * is sent). DBIRTH/DDEATH are not kept: the births carry the state.
 *
 * Primary host (primary_host_id): STATE is retained JSON {"online",
 * "timestamp"}; one older than the last seen is ignored (3.0). Offline: the
 * node stops publishing and keeps its data as above; online: births. With
 * a broker list (brokers = ...), offline also moves the node to the next
 * server (NDEATH, DISCONNECT; the next CONNECT has the next bdSeq, as any
 * CONNECT does, whichever server it goes to).
 *
 * Commands (NCMD, DCMD): sparkplug_cmd.c.
 */
#include "north/internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SP_NS "spBv1.0"
#define SP_TOPIC_MAX (NORTH_NAME_MAX * 3 + 32)
#define SP_STATE_MAX 1024            /* a STATE payload larger than this is not one */
#define SP_REBIRTH_LOG_NS 10000000000ull  /* rebirths a host asks for: one info line per 10 s at most */

typedef struct sp_held {
    struct sp_held *next;
    north_device_t *d;
    size_t len;
    unsigned char data[];            /* the DDATA payload without seq */
} sp_held_t;

struct north_sparkplug {
    char t_nbirth[SP_TOPIC_MAX], t_ndeath[SP_TOPIC_MAX], t_ncmd[SP_TOPIC_MAX];
    char t_dcmd[SP_TOPIC_MAX];       /* spBv1.0/G/DCMD/E/ (the device follows) */
    char t_state[SP_TOPIC_MAX];
    char bdseq_path[NORTH_PATH_MAX + 32];
    uint64_t bdseq;                  /* the current CONNECT's */
    uint64_t bdseq_next;
    unsigned seq;                    /* the last one used */
    bool connected;
    bool host_online;                /* always true without a primary host */
    uint64_t host_ts;
    bool born;                       /* NBIRTH went out and the node publishes */
    sp_held_t *held_head, *held_tail;
    unsigned held_count;
    uint64_t held_bytes;
    uint64_t rebirth_log_next_ns;    /* monotonic: the next rebirth logged at info level */
    unsigned rebirths_quiet;         /* rebirths since the last such line */
    struct evbuffer *b;
    sp_metric_t *ms;
    size_t ms_cap;
};

static bool active(const north_sparkplug_t *sp)
{
    return sp->connected && sp->host_online;
}

uint64_t sparkplug_seq(const north_t *n)
{
    return n->sp ? n->sp->seq : 0;
}

uint64_t sparkplug_bdseq_next(const north_t *n)
{
    return n->sp->bdseq_next;
}

void sparkplug_set_bdseq_next(north_t *n, uint64_t v)
{
    n->sp->bdseq_next = v % 256;
}

/* ---- bdSeq ----------------------------------------------------------------------------- */

static void bdseq_load(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    char text[32] = "";
    FILE *f = sp->bdseq_path[0] ? fopen(sp->bdseq_path, "r") : NULL;
    if (!f)
        return;
    if (fgets(text, sizeof text, f)) {
        char *end;
        unsigned long v = strtoul(text, &end, 10);
        if (end != text && (*end == '\n' || *end == 0) && v <= 255)
            sp->bdseq_next = (v + 1) % 256;
        else
            north_log(n, 1, "mqtt: sparkplug: %s does not hold a bdSeq (0..255); starting at 0", sp->bdseq_path);
    }
    fclose(f);
}

/* Written beside, then renamed: a crash leaves the old value or the new. */
static void bdseq_save(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    char tmp[sizeof sp->bdseq_path + 8];
    if (!sp->bdseq_path[0])
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", sp->bdseq_path);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fprintf(f, "%" PRIu64 "\n", sp->bdseq) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, sp->bdseq_path) != 0) {
        north_log(n, 1, "mqtt: sparkplug: cannot keep bdSeq in %s: %s", sp->bdseq_path, strerror(errno));
        unlink(tmp);
    }
}

/* ---- metrics --------------------------------------------------------------------------- */

uint32_t sparkplug_datatype(const north_tag_t *t)
{
    switch (t->type) {
    case NORTH_TYPE_INT16: return SP_INT16;
    case NORTH_TYPE_UINT16: return SP_UINT16;
    case NORTH_TYPE_INT32: return SP_INT32;
    case NORTH_TYPE_UINT32: return SP_UINT32;
    case NORTH_TYPE_INT64: return SP_INT64;
    case NORTH_TYPE_UINT64: return SP_UINT64;
    case NORTH_TYPE_FLOAT: return SP_FLOAT;
    case NORTH_TYPE_DOUBLE: return SP_DOUBLE;
    case NORTH_TYPE_BOOL: return SP_BOOLEAN;
    case NORTH_TYPE_STRING: return SP_STRING;
    case NORTH_TYPE_AUTO: break;
    }
    return t->kind == NORTH_BOOL ? SP_BOOLEAN : t->kind == NORTH_STRING ? SP_STRING : SP_DOUBLE;
}

/* Ignition's quality codes, as a "Quality" property (Int32). */
#define Q_BAD 0
#define Q_GOOD 192
#define Q_STALE 500

static void tag_metric(const north_tag_t *t, sp_metric_t *m, bool birth, bool historical, uint64_t ts)
{
    uint32_t dt = sparkplug_datatype(t);
    *m = (sp_metric_t){ .name = birth ? t->name : NULL, .has_alias = true, .alias = t->alias,
                        .has_timestamp = true, .timestamp = ts, .datatype = birth ? dt : 0,
                        .is_historical = historical, .quality = -1 };
    if (t->error[0]) {
        m->is_null = true;
        m->quality = Q_BAD;
        m->error = t->error;
        return;
    }
    if (t->stale)
        m->quality = Q_STALE;
    else if (!birth && t->published && (t->p_error[0] || t->p_stale))
        m->quality = Q_GOOD;   /* back to good: said once */
    switch (dt) {
    case SP_INT16:
        m->vtype = SPV_INT;
        /* sign-extended to 32 bits, as Eclipse Tahu's encoders write it: its
         * decoder reads int_value as a signed 32-bit number (Int32Array), so
         * the 16-bit form 65535 would read as 65535, not -1; a decoder that
         * cuts int_value to the width reads -1 from either (docs/sparkplug.md) */
        m->int_value = (uint32_t)(int32_t)(int16_t)t->i;
        break;
    case SP_INT32:
        m->vtype = SPV_INT;
        m->int_value = (uint32_t)(int32_t)t->i;
        break;
    case SP_UINT16:
    case SP_UINT32:
        m->vtype = SPV_INT;
        m->int_value = (uint32_t)t->u;
        break;
    case SP_INT64:
        m->vtype = SPV_LONG;
        m->long_value = (uint64_t)t->i;
        break;
    case SP_UINT64:
        m->vtype = SPV_LONG;
        m->long_value = t->u;
        break;
    case SP_FLOAT:
        m->vtype = SPV_FLOAT;
        m->float_value = (float)t->number;
        break;
    case SP_BOOLEAN:
        m->vtype = SPV_BOOL;
        m->boolean_value = t->kind == NORTH_BOOL ? t->flag : t->number != 0;
        break;
    case SP_STRING:
        m->vtype = SPV_STRING;
        m->string_value = t->text ? t->text : "";
        break;
    default:
        m->vtype = SPV_DOUBLE;
        m->double_value = t->number;
        break;
    }
}

static sp_metric_t *metrics(north_sparkplug_t *sp, size_t count)
{
    if (count > sp->ms_cap) {
        size_t cap = count < 64 ? 64 : count;
        sp_metric_t *bigger = realloc(sp->ms, cap * sizeof *bigger);
        if (!bigger)
            return NULL;
        sp->ms = bigger;
        sp->ms_cap = cap;
    }
    return sp->ms;
}

/* ---- sending ----------------------------------------------------------------------------- */

/* sp->b holds a payload without seq: seq appended (NBIRTH: 0), out at QoS 0. */
static void send_seq(north_t *n, const char *topic, bool nbirth)
{
    north_sparkplug_t *sp = n->sp;
    sp->seq = nbirth ? 0 : (sp->seq + 1) % 256;
    spc_append_seq(sp->b, sp->seq);
    size_t len = evbuffer_get_length(sp->b);
    const unsigned char *p = evbuffer_pullup(sp->b, -1);
    if (p)
        queue_publish(n, topic, p, len, 0, false, 0);
    else
        n->st.dropped++;
    evbuffer_drain(sp->b, len);
}

static void device_topic(const north_t *n, char *buf, size_t cap, const char *verb, const north_device_t *d)
{
    snprintf(buf, cap, SP_NS "/%s/%s/%s/%s", n->cfg.group_id, verb, n->cfg.edge_node_id, d->name);
}

static void dbirth(north_t *n, north_device_t *d, uint64_t ts)
{
    north_sparkplug_t *sp = n->sp;
    char topic[SP_TOPIC_MAX];
    sp_metric_t *m = metrics(sp, d->n);
    if (d->n && !m) {
        n->st.dropped++;
        return;
    }
    for (size_t i = 0; i < d->n; i++) {
        north_tag_t *t = d->list[i];
        tag_metric(t, &m[i], true, false, ts);
        t->sp_datatype = m[i].datatype;
    }
    evbuffer_drain(sp->b, evbuffer_get_length(sp->b));
    if (spc_encode(sp->b, ts, m, d->n) != 0) {
        n->st.dropped++;
        return;
    }
    for (size_t i = 0; i < d->n; i++)
        values_mark_published(d->list[i]);
    device_topic(n, topic, sizeof topic, "DBIRTH", d);
    send_seq(n, topic, false);
    d->sp_born = true;
}

static void ddeath(north_t *n, north_device_t *d, uint64_t ts)
{
    char topic[SP_TOPIC_MAX];
    evbuffer_drain(n->sp->b, evbuffer_get_length(n->sp->b));
    if (spc_encode(n->sp->b, ts, NULL, 0) != 0)
        return;
    device_topic(n, topic, sizeof topic, "DDEATH", d);
    send_seq(n, topic, false);
    d->sp_born = false;
}

/* The oldest kept message leaves: sent, or dropped (and counted). */
static void held_pop(north_t *n, bool dropped)
{
    north_sparkplug_t *sp = n->sp;
    sp_held_t *h = sp->held_head;
    sp->held_head = h->next;
    if (!sp->held_head)
        sp->held_tail = NULL;
    sp->held_count--;
    sp->held_bytes -= sizeof *h + h->len;
    free(h);
    n->st.dropped += dropped;
}

/* The DDATA in sp->b waits for the next births. */
static void hold(north_t *n, north_device_t *d)
{
    north_sparkplug_t *sp = n->sp;
    size_t len = evbuffer_get_length(sp->b);
    size_t size = sizeof(sp_held_t) + len;
    sp_held_t *h = size <= n->cfg.buffer_bytes ? malloc(size) : NULL;
    if (!h) {
        n->st.dropped++;
        return;
    }
    h->next = NULL;
    h->d = d;
    h->len = len;
    evbuffer_remove(sp->b, h->data, len);
    while (sp->held_head && (sp->held_count >= n->cfg.buffer_messages || sp->held_bytes + size > n->cfg.buffer_bytes))
        held_pop(n, true);
    if (sp->held_tail)
        sp->held_tail->next = h;
    else
        sp->held_head = h;
    sp->held_tail = h;
    sp->held_count++;
    sp->held_bytes += size;
}

/* After the births: what was kept, in order, for devices that are born. */
static void flush_held(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    char topic[SP_TOPIC_MAX];
    while (sp->held_head) {
        sp_held_t *h = sp->held_head;
        bool born = h->d->sp_born;   /* a device down now: its old data has no birth to refer to */
        if (born) {
            evbuffer_drain(sp->b, evbuffer_get_length(sp->b));
            evbuffer_add(sp->b, h->data, h->len);
            device_topic(n, topic, sizeof topic, "DDATA", h->d);
            send_seq(n, topic, false);
        }
        held_pop(n, !born);
    }
}

static void nbirth(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    uint64_t now = north_now_ms();
    sp_metric_t m[2] = {
        { .name = "bdSeq", .has_timestamp = true, .timestamp = now, .datatype = SP_INT64, .vtype = SPV_LONG,
          .long_value = sp->bdseq, .quality = -1 },
        { .name = SP_REBIRTH, .has_timestamp = true, .timestamp = now, .datatype = SP_BOOLEAN, .vtype = SPV_BOOL,
          .boolean_value = false, .quality = -1 },
    };
    evbuffer_drain(sp->b, evbuffer_get_length(sp->b));
    if (spc_encode(sp->b, now, m, 2) != 0) {
        n->st.dropped++;
        return;
    }
    send_seq(n, sp->t_nbirth, true);
}

/* The line that says births went out, at info level. Births of a new
 * session or of a primary host back online are rare and each is logged; a
 * rebirth is whatever a host's NCMD asks, as often as it asks, so those
 * are said in one line at most every SP_REBIRTH_LOG_NS with the number
 * since, the others at debug level (the counters count them all). */
static void log_births(north_t *n, bool requested)
{
    north_sparkplug_t *sp = n->sp;
    uint64_t now = north_mono_ns();
    char more[64] = "";
    if (requested && now < sp->rebirth_log_next_ns) {
        sp->rebirths_quiet++;
        north_log(n, 3, "mqtt: sparkplug: rebirth requested (NCMD): NBIRTH (bdSeq %" PRIu64 ") and DBIRTHs",
                  sp->bdseq);
        return;
    }
    if (requested) {
        if (sp->rebirths_quiet)
            snprintf(more, sizeof more, " (and %u more rebirths since the last line)", sp->rebirths_quiet);
        sp->rebirths_quiet = 0;
        sp->rebirth_log_next_ns = now + SP_REBIRTH_LOG_NS;
    }
    north_log(n, 2, "mqtt: sparkplug: %sNBIRTH (bdSeq %" PRIu64 ") and DBIRTH of the devices up; %u messages kept "
                    "go out behind them%s", requested ? "rebirth requested (NCMD): " : "", sp->bdseq,
              sp->held_count, more);
}

/* NBIRTH, the DBIRTHs, then what was kept; requested: a host's NCMD Rebirth. */
static void births(north_t *n, bool requested)
{
    north_sparkplug_t *sp = n->sp;
    uint64_t now = north_now_ms();
    nbirth(n);
    sp->born = true;
    for (size_t i = 0; i < n->n_devices; i++) {
        north_device_t *d = n->device_list[i];
        d->sp_born = false;
        if (d->sp_up != 0 && d->sp_has_values)
            dbirth(n, d, d->timestamp_ms ? d->timestamp_ms : now);
    }
    log_births(n, requested);
    flush_held(n);
}

static void unborn(north_t *n)
{
    n->sp->born = false;
    for (size_t i = 0; i < n->n_devices; i++)
        n->device_list[i]->sp_born = false;
}

/* ---- from values.c ------------------------------------------------------------------------ */

void sparkplug_emit(north_t *n, north_device_t *d, north_tag_t **tags, size_t k, uint64_t ts)
{
    north_sparkplug_t *sp = n->sp;
    char topic[SP_TOPIC_MAX];

    if (active(sp) && sp->born && d->sp_up != 0) {
        bool birth = !d->sp_born;
        for (size_t i = 0; i < k && !birth; i++)
            birth = tags[i]->sp_datatype != sparkplug_datatype(tags[i]);
        if (birth) {
            dbirth(n, d, ts);
            return;
        }
    }
    if (k == 0)
        return;
    if (d->sp_up == 0 || (active(sp) && !d->sp_born)) {
        /* down: DDEATH said so; its errors go nowhere */
        for (size_t i = 0; i < k; i++)
            values_mark_published(tags[i]);
        return;
    }
    bool historical = !active(sp) || !sp->born;
    sp_metric_t *m = metrics(sp, k);
    if (!m) {
        n->st.dropped++;
        return;
    }
    for (size_t i = 0; i < k; i++)
        tag_metric(tags[i], &m[i], false, historical, ts);
    evbuffer_drain(sp->b, evbuffer_get_length(sp->b));
    if (spc_encode(sp->b, ts, m, k) != 0) {
        n->st.dropped++;
        return;
    }
    for (size_t i = 0; i < k; i++)
        values_mark_published(tags[i]);
    if (historical) {
        hold(n, d);
        return;
    }
    device_topic(n, topic, sizeof topic, "DDATA", d);
    send_seq(n, topic, false);
}

int sparkplug_device_status(north_t *n, const char *device, bool online, uint64_t ts)
{
    north_device_t *d = values_find_device(n, device);
    if (!d)
        return 0;   /* born with its first values */
    if (!online && d->sp_born && active(n->sp))
        ddeath(n, d, ts);
    if (!online)
        d->sp_born = false;
    d->sp_up = online ? 1 : 0;   /* up: a DBIRTH with its next values */
    return 0;
}

void sparkplug_device_reset(north_t *n, north_device_t *d)
{
    north_sparkplug_t *sp = n->sp;
    if (d->sp_born && active(sp) && sp->born)
        ddeath(n, d, north_now_ms());
    d->sp_born = false;
    /* its kept DDATA, by alias, may name metrics the next DBIRTH will not */
    sp_held_t **pp = &sp->held_head, *last = NULL;
    while (*pp) {
        sp_held_t *h = *pp;
        if (h->d != d) {
            last = h;
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        sp->held_count--;
        sp->held_bytes -= sizeof *h + h->len;
        n->st.dropped++;
        free(h);
    }
    sp->held_tail = last;
}

/* ---- the session ---------------------------------------------------------------------------- */

int sparkplug_will(north_t *n, bool attempt, char *topic, size_t topic_cap, void *payload, size_t cap, size_t *len)
{
    north_sparkplug_t *sp = n->sp;
    if (attempt)
        sp->bdseq = sp->bdseq_next;   /* taken for good once the CONNECT leaves (sparkplug_connect_sent) */
    sp_metric_t m = { .name = "bdSeq", .has_timestamp = true, .timestamp = north_now_ms(), .datatype = SP_INT64,
                      .vtype = SPV_LONG, .long_value = sp->bdseq, .quality = -1 };
    struct evbuffer *b = evbuffer_new();
    if (!b || spc_encode(b, north_now_ms(), &m, 1) != 0 || evbuffer_get_length(b) > cap) {
        if (b)
            evbuffer_free(b);
        return -ENOMEM;
    }
    *len = evbuffer_get_length(b);
    evbuffer_remove(b, payload, *len);
    evbuffer_free(b);
    snprintf(topic, topic_cap, "%s", sp->t_ndeath);
    return 0;
}

/* 3.0: every CONNECT carries a bdSeq one more than the previous CONNECT's.
 * An attempt whose TCP connection never came up sent no CONNECT, so the
 * next one reuses its number; one that failed after (TLS, refused) has used
 * it: a number may be skipped, never sent twice. */
void sparkplug_connect_sent(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    sp->bdseq_next = (sp->bdseq + 1) % 256;
    bdseq_save(n);
}

void sparkplug_on_connect(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    char sub[SP_TOPIC_MAX + 2];
    sp->connected = true;
    client_subscribe(n, sp->t_ncmd);
    snprintf(sub, sizeof sub, "%s+", sp->t_dcmd);
    client_subscribe(n, sub);
    if (n->cfg.primary_host_id[0]) {
        client_subscribe(n, sp->t_state);   /* the retained STATE answers; births follow if online */
        return;
    }
    births(n, false);
}

void sparkplug_session_lost(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    sp->connected = false;
    if (n->cfg.primary_host_id[0])
        sp->host_online = false;   /* until the new session's STATE says so */
    if (n->cfg.n_brokers > 1)
        sp->host_ts = 0;   /* a host's STATE timestamps are those of its session on each server */
    unborn(n);
}

static void on_state(north_t *n, const void *payload, size_t len)
{
    north_sparkplug_t *sp = n->sp;
    struct json_object *root = NULL, *on, *ts;
    struct json_tokener *tok = len <= SP_STATE_MAX ? json_tokener_new_ex(4) : NULL;
    if (tok)
        root = json_tokener_parse_ex(tok, payload, (int)len);
    if (!root || !json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "online", &on) ||
        !json_object_is_type(on, json_type_boolean) || !json_object_object_get_ex(root, "timestamp", &ts) ||
        !json_object_is_type(ts, json_type_int) || json_object_get_int64(ts) < 0) {
        n->st.write_malformed++;
        north_log(n, 1, "mqtt: sparkplug: %s ignored: not {\"online\": true|false, \"timestamp\": ms}", sp->t_state);
    } else {
        uint64_t t = (uint64_t)json_object_get_int64(ts);
        bool online = json_object_get_boolean(on);
        if (t < sp->host_ts) {
            north_log(n, 3, "mqtt: sparkplug: an older STATE ignored");
        } else if (online != sp->host_online) {
            sp->host_ts = t;
            sp->host_online = online;
            north_log(n, 2, "mqtt: sparkplug: primary host %s is %s", n->cfg.primary_host_id,
                      online ? "online: births" : "offline: data is kept until it returns");
            if (online && sp->connected)
                births(n, false);
            else if (!online)
                unborn(n);
            /* 3.0: with several servers, the host offline here means this
             * server lost it: NDEATH, and the next server of the list */
            if (!online && n->cfg.n_brokers > 1)
                client_move_on(n, "the primary host went offline on this server");
        } else {
            sp->host_ts = t;
        }
    }
    if (root)
        json_object_put(root);
    if (tok)
        json_tokener_free(tok);
}

bool sparkplug_on_message(north_t *n, const char *topic, const void *payload, size_t len)
{
    north_sparkplug_t *sp = n->sp;
    size_t dl = strlen(sp->t_dcmd);
    bool ncmd = strcmp(topic, sp->t_ncmd) == 0;

    if (n->cfg.primary_host_id[0] && strcmp(topic, sp->t_state) == 0) {
        on_state(n, payload, len);
        return true;
    }
    if (!ncmd && strncmp(topic, sp->t_dcmd, dl) != 0)
        return false;
    north_device_t *d = ncmd || strchr(topic + dl, '/') ? NULL : values_find_device(n, topic + dl);
    if (sparkplug_command(n, ncmd, d, payload, len) && active(sp))
        births(n, true);
    return true;
}

/* ---- start and stop ---------------------------------------------------------------------------- */

int sparkplug_start(north_t *n, char *err, size_t errcap)
{
    north_sparkplug_t *sp = calloc(1, sizeof *sp);
    const north_config_t *c = &n->cfg;
    if (!sp || !(sp->b = evbuffer_new())) {
        free(sp);
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    n->sp = sp;
    snprintf(sp->t_nbirth, sizeof sp->t_nbirth, SP_NS "/%s/NBIRTH/%s", c->group_id, c->edge_node_id);
    snprintf(sp->t_ndeath, sizeof sp->t_ndeath, SP_NS "/%s/NDEATH/%s", c->group_id, c->edge_node_id);
    snprintf(sp->t_ncmd, sizeof sp->t_ncmd, SP_NS "/%s/NCMD/%s", c->group_id, c->edge_node_id);
    snprintf(sp->t_dcmd, sizeof sp->t_dcmd, SP_NS "/%s/DCMD/%s/", c->group_id, c->edge_node_id);
    snprintf(sp->t_state, sizeof sp->t_state, SP_NS "/STATE/%s", c->primary_host_id);
    sp->host_online = !c->primary_host_id[0];
    if (c->spool_dir[0])
        snprintf(sp->bdseq_path, sizeof sp->bdseq_path, "%s/sparkplug-bdseq", c->spool_dir);
    bdseq_load(n);
    return 0;
}

void sparkplug_free(north_t *n)
{
    north_sparkplug_t *sp = n->sp;
    if (!sp)
        return;
    while (sp->held_head) {
        sp_held_t *h = sp->held_head;
        sp->held_head = h->next;
        free(h);
    }
    if (sp->b)
        evbuffer_free(sp->b);
    free(sp->ms);
    free(sp);
    n->sp = NULL;
}
