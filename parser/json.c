/*
 * parser/json.c -- envelopes and requests as JSON objects, with the field
 * names of shared/frames/README.md so output can be diffed against it.
 */
#include "parser/internal.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct json_out {
    char *buf;
    size_t cap;
    size_t len;
    bool overflow;
} json_out_t;

__attribute__((format(printf, 2, 3)))
static void emit(json_out_t *o, const char *fmt, ...)
{
    va_list ap;
    size_t room = o->len < o->cap ? o->cap - o->len : 0;

    va_start(ap, fmt);
    int n = vsnprintf(o->buf + (o->len < o->cap ? o->len : 0), room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room)
        o->overflow = true;
    o->len += n > 0 ? (size_t)n : 0;
}

static int finish(json_out_t *o)
{
    if (o->overflow)
        return -1;
    return (int)o->len;
}

static void emit_u16_array(json_out_t *o, const char *name, const uint16_t *v, size_t n)
{
    emit(o, ",\"%s\":[", name);
    for (size_t i = 0; i < n; i++)
        emit(o, i ? ",%u" : "%u", v[i]);
    emit(o, "]");
}

static void emit_hex(json_out_t *o, const char *name, const uint8_t *v, size_t n)
{
    emit(o, ",\"%s\":\"", name);
    for (size_t i = 0; i < n; i++)
        emit(o, "%02x", v[i]);
    emit(o, "\"");
}

int rtu_envelope_json(const rtu_envelope_t *env, const char *path, char *buf, size_t cap)
{
    json_out_t o = { buf, cap, 0, false };

    if (env->status != RTU_OK) {
        emit(&o, "{\"ok\":false,\"error\":\"%s\"", rtu_status_name((rtu_status_t)env->status));
    } else {
        emit(&o, "{\"ok\":true,\"slave\":%u,\"function\":%u", env->slave, env->function);
        switch ((rtu_kind_t)env->kind) {
        case RTU_KIND_EXCEPTION:
            emit(&o, ",\"exception\":%u", env->exception);
            break;
        case RTU_KIND_BITS:
            emit(&o, ",\"bits\":[");
            for (unsigned i = 0; i < env->count; i++)
                emit(&o, i ? ",%u" : "%u", (env->data.bytes[i / 8] >> (i % 8)) & 1u);
            emit(&o, "]");
            break;
        case RTU_KIND_REGISTERS:
            emit_u16_array(&o, "registers", env->data.regs, env->count);
            break;
        case RTU_KIND_SINGLE:
            emit(&o, ",\"address\":%u,\"value\":%u", env->address, env->value);
            break;
        case RTU_KIND_MULTIPLE:
            emit(&o, ",\"address\":%u,\"count\":%u", env->address, env->value);
            break;
        case RTU_KIND_MASK:
            emit(&o, ",\"address\":%u,\"and_mask\":%u,\"or_mask\":%u", env->address, env->value,
                 env->or_mask);
            break;
        case RTU_KIND_RAW:
            emit_hex(&o, "data", env->data.bytes, env->count);
            break;
        case RTU_KIND_NONE:
            break;
        }
    }
    if (path)
        emit(&o, ",\"path\":\"%s\"", path);
    emit(&o, "}");
    return finish(&o);
}

int rtu_request_json(const rtu_request_t *req, rtu_status_t status, char *buf, size_t cap)
{
    json_out_t o = { buf, cap, 0, false };

    if (status != RTU_OK) {
        emit(&o, "{\"ok\":false,\"error\":\"%s\",\"request\":true}", rtu_status_name(status));
        return finish(&o);
    }
    emit(&o, "{\"ok\":true,\"request\":true,\"slave\":%u,\"function\":%u", req->slave, req->function);
    switch (req->function) {
    case 1: case 2: case 3: case 4:
        emit(&o, ",\"address\":%u,\"count\":%u", req->address, req->quantity);
        break;
    case 5: case 6:
        emit(&o, ",\"address\":%u,\"value\":%u", req->address, req->quantity);
        break;
    case 15: case 16:
        emit(&o, ",\"address\":%u,\"count\":%u", req->write_address, req->write_quantity);
        emit_hex(&o, "data", req->data, req->data_len);
        break;
    case 22:
        emit(&o, ",\"address\":%u,\"and_mask\":%u,\"or_mask\":%u", req->address, req->quantity,
             req->or_mask);
        break;
    case 23:
        emit(&o, ",\"address\":%u,\"count\":%u,\"write_address\":%u,\"write_count\":%u",
             req->address, req->quantity, req->write_address, req->write_quantity);
        emit_hex(&o, "data", req->data, req->data_len);
        break;
    default:
        emit_hex(&o, "data", req->data, req->data_len);
        break;
    }
    emit(&o, "}");
    return finish(&o);
}
