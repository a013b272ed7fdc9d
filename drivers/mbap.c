/*
 * drivers/mbap.c -- the MBAP layer: rtugw as the Modbus TCP client of an
 * Ethernet device, over a tcp driver.
 *
 * Above it the bus sees an RTU line: write() takes an RTU request (slave,
 * PDU, CRC) and sends its PDU in an MBAP ADU whose unit id is the slave and
 * whose transaction id is the next of rtugw's own (the masters' ids never
 * reach the device: one connection serves every master routed to it, and
 * each master's ids are its front end's business). read() returns one RTU
 * frame per MBAP ADU (DRIVER_FRAMED), with a CRC computed here that is
 * good exactly when the ADU carries the transaction id of the request in
 * flight, seen for the first time. Then the frame's slave is the request's
 * unit, whatever unit id the device wrote: the transaction id is the
 * exact proof of which request it answers. An ADU with any other id (the
 * late answer to an attempt the bus gave up, a duplicate) comes up as a
 * frame whose CRC fails: counted (frame_errors) and never delivered (the
 * line discipline's fact F), so a retry is answered only by its own answer.
 *
 * A header that cannot be MBAP (protocol id not 0, a length outside 2..254)
 * leaves nothing to resynchronise on: read() fails with -EPROTO, and the
 * owner closes the connection and reconnects with its back-off.
 */
#include "drivers/internal.h"
#include "parser/rtu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mbap {
    driver_layer_t layer;
    uint16_t next_tid;
    uint16_t asked_tid;        /* the request in flight */
    uint8_t asked_unit;
    bool asking;               /* asked_tid not yet answered */
    uint8_t in[2 * MBAP_MAX_ADU];
    size_t in_len;
    uint64_t in_t_ns;          /* arrival of the bytes that completed the front ADU */
} mbap_t;

static void mbap_close(driver_t *d)
{
    mbap_t *m = driver_priv(d);
    m->in_len = 0;
    m->asking = false;
    driver_close(m->layer.inner);
}

static ssize_t mbap_write(driver_t *d, const uint8_t *adu, size_t len)
{
    mbap_t *m = driver_priv(d);
    uint8_t out[MBAP_MAX_ADU];

    if (len < RTU_MIN_ADU || len > RTU_MAX_ADU)
        return -EMSGSIZE;
    uint16_t tid = ++m->next_tid;
    int n = mbap_encode(tid, adu[0], adu + 1, len - 3, out, sizeof out);
    if (n < 0)
        return n;
    ssize_t w = driver_write(m->layer.inner, out, (size_t)n);
    if (w < 0)
        return w;
    m->asked_tid = tid;
    m->asked_unit = adu[0];
    m->asking = true;
    return (ssize_t)len;
}

/* The ADU at the front of in[] as an RTU frame into buf; its length. */
static size_t to_rtu(driver_t *d, mbap_t *m, const mbap_header_t *h, uint8_t *buf, size_t cap)
{
    size_t pdu_len = h->length - 1u;
    bool answers = m->asking && h->transaction == m->asked_tid;

    if (pdu_len + 3 > cap)
        return 0;
    buf[0] = answers ? m->asked_unit : h->unit;
    memcpy(buf + 1, m->in + MBAP_HEADER_LEN, pdu_len);
    uint16_t crc = rtu_crc16(buf, pdu_len + 1);
    if (answers) {
        m->asking = false;
    } else {
        crc ^= 1;   /* not the answer asked for: a frame that fails its CRC */
        DRIVER_COUNT(d, frame_errors, 1);
    }
    buf[pdu_len + 1] = (uint8_t)crc;
    buf[pdu_len + 2] = (uint8_t)(crc >> 8);
    return pdu_len + 3;
}

static ssize_t mbap_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    mbap_t *m = driver_priv(d);
    for (;;) {
        mbap_header_t h;
        size_t adu_len;
        int rc = mbap_stream_next(m->in, m->in_len, &h, &adu_len);
        if (rc < 0) {
            DRIVER_COUNT(d, frame_errors, 1);
            return -EPROTO;
        }
        if (rc == 1) {
            size_t n = to_rtu(d, m, &h, buf, cap);
            memmove(m->in, m->in + adu_len, m->in_len - adu_len);
            m->in_len -= adu_len;
            *t_ns = m->in_t_ns;
            if (n)
                return (ssize_t)n;
            continue;
        }
        ssize_t got = driver_read(m->layer.inner, m->in + m->in_len, sizeof m->in - m->in_len, &m->in_t_ns);
        if (got <= 0)
            return got;
        m->in_len += (size_t)got;
    }
}

static int mbap_describe(const driver_t *d, char *buf, size_t cap)
{
    return layer_describe(d, "modbus-tcp device, ", buf, cap);
}

static const driver_backend_t mbap_backend = {
    .name = "mbap",
    .open = layer_open,
    .close = mbap_close,
    .fd = layer_fd,
    .write = mbap_write,
    .read = mbap_read,
    .describe = mbap_describe,
    .next_deadline = layer_next_deadline,
    .service = layer_service,
    .destroy = layer_destroy,
    .open_finish = layer_open_finish,
    .flags = DRIVER_FRAMED,
};

driver_t *driver_mbap_new(driver_t *inner, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    return layer_new(&mbap_backend, inner, calloc(1, sizeof(mbap_t)), err, errcap);
}
