/*
 * drivers/layer.c -- what every layer (ascii.c, mbap.c) does the same way:
 * the inner driver carries the bytes, so opening, closing, the fd to poll
 * and any timed work are the inner driver's. A layer only translates what
 * its read and write see.
 */
#include "drivers/internal.h"

#include <stdio.h>
#include <stdlib.h>

driver_t *layer_inner(const driver_t *d)
{
    return ((const driver_layer_t *)driver_priv(d))->inner;
}

int layer_open(driver_t *d, char *err, size_t errcap)
{
    return driver_open(layer_inner(d), err, errcap);
}

int layer_open_finish(driver_t *d, char *err, size_t errcap)
{
    return driver_open_finish(layer_inner(d), err, errcap);
}

int layer_fd(const driver_t *d)
{
    return driver_fd(layer_inner(d));
}

uint64_t layer_next_deadline(const driver_t *d)
{
    return driver_next_deadline(layer_inner(d));
}

int layer_service(driver_t *d, uint64_t now_ns)
{
    return driver_service(layer_inner(d), now_ns);
}

int layer_describe(const driver_t *d, const char *prefix, char *buf, size_t cap)
{
    char inner[160];
    driver_describe(layer_inner(d), inner, sizeof inner);
    return snprintf(buf, cap, "%s%s", prefix, inner);
}

void layer_destroy(driver_t *d)
{
    driver_free(layer_inner(d));
    free(driver_priv(d));
}

driver_t *layer_new(const driver_backend_t *backend, driver_t *inner, void *priv, char *err, size_t errcap)
{
    driver_t *d = inner && priv ? driver_new(backend, priv) : NULL;
    if (!d) {
        snprintf(err, errcap, "%s: %s", backend->name, inner ? "out of memory" : "no driver below it");
        driver_free(inner);
        free(priv);
        return NULL;
    }
    ((driver_layer_t *)priv)->inner = inner;
    return d;
}
