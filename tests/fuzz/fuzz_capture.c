/*
 * tests/fuzz/fuzz_capture.c -- the capture readers (pcap, pcapng, text hex
 * log) on arbitrary file contents.
 *
 * The input is written to a temporary file (one per process, rewritten for
 * each input) and opened with driver_capture_open() four times: format
 * detected, and forced to pcap, pcapng and text. Every record is read until
 * the end or an error.
 *
 * Invariants (abort() when broken):
 *   - no crash, no sanitizer report, no leak (driver_capture_close frees all);
 *   - every record's len is at most sizeof rec.data;
 *   - direction is -1, 0 or 1;
 *   - the reader ends: at most (file size + 1) records from a finite file
 *     (every record consumes input);
 *   - an error return is -EBADMSG or -EIO, with a NUL-terminated message;
 *   - a failed open leaves a NUL-terminated message.
 */
#include "drivers/driver.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static char g_path[256];

static void cleanup(void)
{
    if (g_path[0])
        unlink(g_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("TMPDIR");
    snprintf(g_path, sizeof g_path, "%s/rtugw-fuzz-capture.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(g_path);
    if (fd < 0) {
        perror("fuzz_capture: mkstemp");
        abort();
    }
    close(fd);
    atexit(cleanup);
    return 0;
}

static void read_all(const uint8_t *data, size_t size, driver_capture_format_t format)
{
    char err[512];
    memset(err, 'x', sizeof err);
    driver_capture_t *c = driver_capture_open(g_path, format, err, sizeof err);
    if (!c) {
        FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, data, size,
                   "open (%s) failed without a terminated message",
                   driver_capture_format_name(format));
        return;
    }
    static driver_record_t rec;
    unsigned long records = 0;
    for (;;) {
        memset(&rec, 0xA5, sizeof rec);
        memset(err, 'x', sizeof err);
        int rc = driver_capture_next(c, &rec, err, sizeof err);
        if (rc == 0)
            break;
        if (rc < 0) {
            FUZZ_CHECK(rc == -EBADMSG || rc == -EIO, data, size, "%s: next returned %d",
                       driver_capture_format_name(format), rc);
            FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, data, size,
                       "%s: error without a terminated message", driver_capture_format_name(format));
            break;
        }
        FUZZ_CHECK(rc == 1, data, size, "%s: next returned %d", driver_capture_format_name(format), rc);
        records++;
        FUZZ_CHECK(rec.len <= sizeof rec.data, data, size, "%s: record %lu len %zu > %zu",
                   driver_capture_format_name(format), records, rec.len, sizeof rec.data);
        FUZZ_CHECK(rec.direction >= -1 && rec.direction <= 1, data, size,
                   "%s: record %lu direction %d", driver_capture_format_name(format), records,
                   rec.direction);
        FUZZ_CHECK(records <= size + 1, data, size, "%s: %lu records from %zu bytes: no end",
                   driver_capture_format_name(format), records, size);
    }
    (void)driver_capture_format(c);
    (void)driver_capture_skipped(c);
    driver_capture_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(g_path, "wb");
    if (!f) {
        perror("fuzz_capture: rewrite temp file");
        abort();
    }
    if (size && fwrite(data, 1, size, f) != size) {
        perror("fuzz_capture: write temp file");
        abort();
    }
    fclose(f);
    static const driver_capture_format_t formats[] = {
        DRIVER_CAPTURE_AUTO, DRIVER_CAPTURE_PCAP, DRIVER_CAPTURE_PCAPNG, DRIVER_CAPTURE_TEXT,
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        read_all(data, size, formats[i]);
    return 0;
}
