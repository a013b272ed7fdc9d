/*
 * north/sparkplug_codec.c -- Sparkplug B payloads through protobuf-c: the
 * only file that includes the header protoc-c makes of north/sparkplug.proto
 * (generated in the build tree, not committed).
 *
 * Encoding: sp_metric_t in, the packed Payload {timestamp, metrics} out,
 * without its seq. The session appends seq (field 3) when the message goes
 * out: protobuf decoders take fields in any order, and a message held while
 * the primary host is away gets its seq only when it is sent.
 *
 * Decoding (NCMD, DCMD): the payload was bounded by max_write_bytes before
 * it comes here; it is walked and its metrics counted before protobuf-c
 * unpacks one metric at a time into a bounded arena (spc_decode); the
 * .proto declares no message that nests, so the depth is at most four.
 */
#include "north/internal.h"
#include "north/sparkplug.pb-c.h"

#include <errno.h>
#include <stddef.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

typedef Rtugw__Sparkplug__SpPayload payload_t;
typedef Rtugw__Sparkplug__SpMetric metric_t;
typedef Rtugw__Sparkplug__SpPropertySet props_t;
typedef Rtugw__Sparkplug__SpPropertyValue prop_t;

/* Writes what protobuf-c packs straight into the evbuffer. */
typedef struct {
    ProtobufCBuffer base;
    struct evbuffer *b;
    bool failed;
} evb_sink_t;

static void sink_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data)
{
    evb_sink_t *s = (evb_sink_t *)buf;
    if (evbuffer_add(s->b, data, len) != 0)
        s->failed = true;
}

static void set_value(metric_t *o, const sp_metric_t *m)
{
    switch (m->vtype) {
    case SPV_NONE:
        break;
    case SPV_INT:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_INT_VALUE;
        o->int_value = m->int_value;
        break;
    case SPV_LONG:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_LONG_VALUE;
        o->long_value = m->long_value;
        break;
    case SPV_FLOAT:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_FLOAT_VALUE;
        o->float_value = m->float_value;
        break;
    case SPV_DOUBLE:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_DOUBLE_VALUE;
        o->double_value = m->double_value;
        break;
    case SPV_BOOL:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_BOOLEAN_VALUE;
        o->boolean_value = m->boolean_value;
        break;
    case SPV_STRING:
        o->value_case = RTUGW__SPARKPLUG__SP_METRIC__VALUE_STRING_VALUE;
        o->string_value.data = (uint8_t *)(m->string_value ? m->string_value : "");
        o->string_value.len = strlen((const char *)o->string_value.data);
        break;
    }
}

/* What one metric needs beside its message: its properties. */
typedef struct {
    props_t set;
    char *keys[2];
    prop_t values[2];
    prop_t *vptr[2];
} metric_props_t;

int spc_encode(struct evbuffer *b, uint64_t timestamp, const sp_metric_t *m, size_t count)
{
    payload_t p = RTUGW__SPARKPLUG__SP_PAYLOAD__INIT;
    metric_t *ms = count ? calloc(count, sizeof *ms) : NULL;
    metric_t **ptrs = count ? calloc(count, sizeof *ptrs) : NULL;
    metric_props_t *props = count ? calloc(count, sizeof *props) : NULL;
    int rc = 0;

    if (count && (!ms || !ptrs || !props)) {
        rc = -ENOMEM;
        goto out;
    }
    p.has_timestamp = true;
    p.timestamp = timestamp;
    p.n_metrics = count;
    p.metrics = ptrs;
    for (size_t i = 0; i < count; i++) {
        metric_t *o = &ms[i];
        rtugw__sparkplug__sp_metric__init(o);
        ptrs[i] = o;
        o->has_name = m[i].name != NULL;
        o->name.data = (uint8_t *)m[i].name;
        o->name.len = m[i].name ? strlen(m[i].name) : 0;
        o->has_alias = m[i].has_alias;
        o->alias = m[i].alias;
        o->has_timestamp = m[i].has_timestamp;
        o->timestamp = m[i].timestamp;
        o->has_datatype = m[i].datatype != 0;
        o->datatype = m[i].datatype;
        o->has_is_historical = m[i].is_historical;
        o->is_historical = m[i].is_historical;
        o->has_is_null = m[i].is_null;
        o->is_null = m[i].is_null;
        if (!m[i].is_null)
            set_value(o, &m[i]);
        metric_props_t *pp = &props[i];
        size_t k = 0;
        if (m[i].quality >= 0) {
            rtugw__sparkplug__sp_property_value__init(&pp->values[k]);
            pp->keys[k] = (char *)"Quality";
            pp->values[k].has_type = true;
            pp->values[k].type = SP_INT32;
            pp->values[k].value_case = RTUGW__SPARKPLUG__SP_PROPERTY_VALUE__VALUE_INT_VALUE;
            pp->values[k].int_value = (uint32_t)m[i].quality;
            k++;
        }
        if (m[i].error) {
            rtugw__sparkplug__sp_property_value__init(&pp->values[k]);
            pp->keys[k] = (char *)"Reason";
            pp->values[k].has_type = true;
            pp->values[k].type = SP_STRING;
            pp->values[k].value_case = RTUGW__SPARKPLUG__SP_PROPERTY_VALUE__VALUE_STRING_VALUE;
            pp->values[k].string_value = (char *)m[i].error;
            k++;
        }
        if (k) {
            rtugw__sparkplug__sp_property_set__init(&pp->set);
            for (size_t j = 0; j < k; j++)
                pp->vptr[j] = &pp->values[j];
            pp->set.n_keys = pp->set.n_values = k;
            pp->set.keys = pp->keys;
            pp->set.values = pp->vptr;
            o->properties = &pp->set;
        }
    }
    evb_sink_t sink = { .base = { .append = sink_append }, .b = b };
    rtugw__sparkplug__sp_payload__pack_to_buffer(&p, &sink.base);
    if (sink.failed)
        rc = -ENOMEM;
out:
    free(ms);
    free(ptrs);
    free(props);
    return rc;
}

void spc_append_seq(struct evbuffer *b, uint64_t seq)
{
    uint8_t v[11];
    size_t n = 0;
    v[n++] = 3 << 3 | 0;   /* field 3, varint */
    do {
        v[n++] = (uint8_t)((seq & 0x7f) | (seq > 0x7f ? 0x80 : 0));
        seq >>= 7;
    } while (seq);
    evbuffer_add(b, v, n);
}

/* ---- decoding: bounded before protobuf-c allocates --------------------------------------- */

/*
 * protobuf-c's unpack allocates per element (each metric, each property,
 * each unknown field, each string), so a 1 MiB payload of two-byte empty
 * metrics made half a million allocations on the I/O thread: 100 ms and
 * 10 MiB a command, Modbus TCP waiting meanwhile. So the payload is walked
 * here first, in the wire format, without allocating: its fields checked
 * and its metrics counted, and one with more metrics than max_metrics (a
 * command's writes, max_write_items) is refused before anything is
 * unpacked. Each metric is then unpacked alone into an arena on the stack:
 * a metric that needs more than METRIC_ARENA bytes unpacked (a long name,
 * a long string, many properties or unknown fields) fails its unpack, is
 * ignored and counted, and nothing of it reaches the heap. The cost of a
 * command is one pass over its bytes and at most max_metrics unpacks of a
 * bounded size, whatever max_write_bytes allows.
 */
#define METRIC_ARENA 4096   /* a metric rtugw takes: ~200 B of message, a 63-byte name, a 250-byte string */

typedef struct {
    const uint8_t *data;     /* wire type 2: the field's bytes */
    size_t len;
    uint32_t number;
    unsigned wire;
} wire_field_t;

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -EINVAL;
}

/* The field at *p, and *p past it; -EINVAL for what is not one (groups,
 * which Sparkplug B does not use, included). */
static int next_field(const uint8_t **p, const uint8_t *end, wire_field_t *f)
{
    uint64_t key, n = 0;
    if (read_varint(p, end, &key) != 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX)
        return -EINVAL;
    f->number = (uint32_t)(key >> 3);
    f->wire = key & 7;
    switch (f->wire) {
    case 0:
        f->data = NULL, f->len = 0;
        return read_varint(p, end, &n);
    case 1: n = 8; break;
    case 5: n = 4; break;
    case 2:
        if (read_varint(p, end, &n) != 0)
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    if (n > (uint64_t)(end - *p))
        return -EINVAL;
    f->data = *p;
    f->len = (size_t)n;
    *p += n;
    return 0;
}

typedef struct {
    ProtobufCAllocator base;
    size_t used;
    _Alignas(max_align_t) unsigned char buf[METRIC_ARENA];
} arena_t;

static void *arena_alloc(void *data, size_t size)
{
    arena_t *a = data;
    size_t at = (a->used + _Alignof(max_align_t) - 1) & ~(size_t)(_Alignof(max_align_t) - 1);
    if (at > sizeof a->buf || size > sizeof a->buf - at)
        return NULL;
    a->used = at + size;
    return a->buf + at;
}

static void arena_free(void *data, void *pointer)
{
    (void)data, (void)pointer;   /* the arena goes as a whole, with the next metric */
}

/* The metric's name as a C string of exactly its bytes, or why it is refused. */
static const char *take_name(const metric_t *o, char *name, size_t cap, sp_metric_t *m)
{
    if (!o->has_name)
        return NULL;
    if (memchr(o->name.data, 0, o->name.len))
        return "its name holds a NUL byte";
    if (o->name.len >= cap)
        return "its name is longer than any this node has";
    memcpy(name, o->name.data, o->name.len);
    name[o->name.len] = 0;
    m->name = name;
    return NULL;
}

static void take_value(const metric_t *o, char *text, size_t cap, sp_metric_t *m)
{
    switch (o->value_case) {
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_INT_VALUE:
        m->vtype = SPV_INT;
        m->int_value = o->int_value;
        break;
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_LONG_VALUE:
        m->vtype = SPV_LONG;
        m->long_value = o->long_value;
        break;
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_FLOAT_VALUE:
        m->vtype = SPV_FLOAT;
        m->float_value = o->float_value;
        break;
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_DOUBLE_VALUE:
        m->vtype = SPV_DOUBLE;
        m->double_value = o->double_value;
        break;
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_BOOLEAN_VALUE:
        m->vtype = SPV_BOOL;
        m->boolean_value = o->boolean_value;
        break;
    case RTUGW__SPARKPLUG__SP_METRIC__VALUE_STRING_VALUE:
        /* a C string of exactly its bytes, or no value: a NUL inside is refused */
        if (o->string_value.len < cap && !memchr(o->string_value.data, 0, o->string_value.len)) {
            memcpy(text, o->string_value.data, o->string_value.len);
            text[o->string_value.len] = 0;
            m->vtype = SPV_STRING;
            m->string_value = text;
        }
        break;
    default:
        m->vtype = SPV_NONE;   /* bytes, or none: no value rtugw takes */
        break;
    }
}

int spc_decode(const void *payload, size_t len, size_t max_metrics, void (*fn)(void *ctx, const sp_metric_t *m),
               void *ctx)
{
    const uint8_t *end = (const uint8_t *)payload + len, *p = payload;
    wire_field_t f;
    size_t metrics = 0;

    while (p < end) {
        if (next_field(&p, end, &f) != 0 || (f.number == 2 && f.wire != 2))
            return -EINVAL;
        if (f.number == 2 && ++metrics > max_metrics)
            return -E2BIG;
    }
    arena_t a = { .base = { .alloc = arena_alloc, .free = arena_free, .allocator_data = &a } };
    char name[NORTH_NAME_MAX], text[256];   /* the longest string a tag takes is 250 bytes */
    for (p = payload; p < end;) {
        next_field(&p, end, &f);   /* checked above */
        if (f.number != 2)
            continue;
        a.used = 0;
        const metric_t *o = rtugw__sparkplug__sp_metric__unpack(&a.base, f.len, f.data);
        sp_metric_t m = { .quality = -1 };
        if (!o) {
            m.refused = "it does not decode, or needs more than 4 KiB decoded";
        } else {
            m = (sp_metric_t){ .has_alias = o->has_alias, .alias = o->alias, .has_timestamp = o->has_timestamp,
                               .timestamp = o->timestamp, .datatype = o->has_datatype ? o->datatype : 0,
                               .is_null = o->has_is_null && o->is_null, .quality = -1 };
            m.refused = take_name(o, name, sizeof name, &m);
            take_value(o, text, sizeof text, &m);
        }
        fn(ctx, &m);
    }
    return 0;
}
