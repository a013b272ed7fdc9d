/*
 * drivers/capture_write.c -- writing a capture: a pcap file of link type 147
 * (USER0: raw Modbus RTU bytes, what `rtugw sniff --capture` and the capture
 * readers of capture.c agree on), one record per frame with its time
 * (CLOCK_REALTIME when the caller gives none). Records are bounded as the
 * readers bound them (CAP_MAX_RECORD).
 */
#include "drivers/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct driver_capture_writer {
    FILE *f;
    char *path;
};

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

driver_capture_writer_t *driver_capture_writer_open(const char *path, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    driver_capture_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        snprintf(err, errcap, "%s: out of memory", path);
        return NULL;
    }
    w->f = fopen(path, "wb");
    uint8_t h[24];
    le32(h, 0xa1b2c3d4u);
    h[4] = 2, h[5] = 0, h[6] = 4, h[7] = 0;
    le32(h + 8, 0);
    le32(h + 12, 0);
    le32(h + 16, 65535);
    le32(h + 20, 147);
    if (!w->f || fwrite(h, 1, sizeof h, w->f) != sizeof h) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        if (w->f)
            fclose(w->f);
        free(w->path);
        free(w);
        return NULL;
    }
    return w;
}

int driver_capture_write(driver_capture_writer_t *w, uint64_t ts_ns, const uint8_t *p, size_t n)
{
    if (n > CAP_MAX_RECORD)
        return -EMSGSIZE;
    if (ts_ns == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    uint8_t h[16];
    le32(h, (uint32_t)(ts_ns / 1000000000ull));
    le32(h + 4, (uint32_t)(ts_ns % 1000000000ull / 1000u));
    le32(h + 8, (uint32_t)n);
    le32(h + 12, (uint32_t)n);
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h || fwrite(p, 1, n, w->f) != n)
        return -EIO;
    return 0;
}

int driver_capture_writer_close(driver_capture_writer_t *w)
{
    if (!w)
        return 0;
    int rc = fclose(w->f) == 0 ? 0 : -errno;
    free(w->path);
    free(w);
    return rc;
}
