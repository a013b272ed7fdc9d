/*
 * drivers/internal.h -- shared between drivers/' own .c files only: the
 * plumbing of a layer (ascii.c, mbap.c), a driver that owns another one
 * (its inner driver, which carries the bytes) and passes opening, closing,
 * polling and timed work straight down to it.
 */
#ifndef RTUGW_DRIVERS_INTERNAL_H
#define RTUGW_DRIVERS_INTERNAL_H

#include "drivers/driver.h"

/* A layer's private data starts with this. */
typedef struct driver_layer {
    driver_t *inner;
} driver_layer_t;

/* Backend members that delegate to the inner driver. */
int layer_open(driver_t *d, char *err, size_t errcap);
int layer_open_finish(driver_t *d, char *err, size_t errcap);
int layer_fd(const driver_t *d);
uint64_t layer_next_deadline(const driver_t *d);
int layer_service(driver_t *d, uint64_t now_ns);
driver_t *layer_inner(const driver_t *d);
/* "PREFIX" + the inner driver's description. */
int layer_describe(const driver_t *d, const char *prefix, char *buf, size_t cap);
/* Frees the inner driver and the layer's private data. */
void layer_destroy(driver_t *d);

/* A layer of backend over inner with priv (whose first member is a
 * driver_layer_t); on failure inner and priv are freed and err says so. */
driver_t *layer_new(const driver_backend_t *backend, driver_t *inner, void *priv, char *err, size_t errcap);

/* ---- capture files (capture.c reads them; capture_write.c writes them) --- */

/* A pcap or pcapng record above this is an error, read or written. */
#define CAP_MAX_RECORD (256u * 1024u)

/* capture_link.c: link types 147-162 (USER0-15) and 250 (RTAC serial) carry
 * raw RTU bytes; 1, 113, 276, 101, 228, 229, 12 carry IP. */
bool capture_link_is_raw_rtu(uint32_t linktype);
bool capture_link_is_ip(uint32_t linktype);
/* The TCP payload of a packet for port 502: returns 1 and sets off, len and
 * dir (1: to port 502, a request), or 0 when the packet is not Modbus/TCP. */
int capture_tcp_payload(uint32_t linktype, const uint8_t *p, size_t n, size_t *off, size_t *len, int *dir);

#endif
