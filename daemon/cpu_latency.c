/*
 * daemon/cpu_latency.c -- [gateway] cpu_latency_us: a CPU latency request
 * held while the daemon runs (Linux's PM QoS: /dev/cpu_dma_latency).
 *
 * Why: a transaction on a serial bus crosses between the I/O thread and the
 * line thread twice (the request, then its answer), and each crossing wakes
 * a thread whose CPU went idle while the line answered. An idle CPU's wake
 * is the CPU's to pay, not the scheduler's: on the 2-core test VM a process
 * blocked for 2 ms in read() woke 64.7 us (45.7-84.1) after the write that
 * woke it from the other CPU, 30.8 us with that CPU kept from idling, and
 * 12.0 us with a request of 0 us held (bench/wakeup.py; docs/bench-wire.md).
 * That is most of what the line thread adds to a transaction.
 *
 * How: the kernel keeps every CPU out of the idle states whose exit latency
 * exceeds the smallest request any process holds, as long as it holds the
 * file open; the value is written once as a 32-bit integer. The request
 * goes when the descriptor closes, so a daemon that dies drops it too.
 * What it costs: the idle CPUs' power saving (a request of 0 keeps them
 * polling), which is why it is off unless configured.
 *
 * Who may: the device is root's (0600). A daemon that cannot open it says
 * so and runs without it. I/O thread (start and reload), and gw_free.
 */
#include "daemon/internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CPU_LATENCY_DEVICE "/dev/cpu_dma_latency"

int cpu_latency_hold(gw_t *gw, int us, char *err, size_t errcap)
{
    int fd = -1;

    if (us >= 0) {
        int32_t v = us;
        fd = open(CPU_LATENCY_DEVICE, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, &v, sizeof v) != (ssize_t)sizeof v) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            snprintf(err, errcap, "[gateway] cpu_latency_us = %d not applied: %s: %s (it needs write access to "
                     "the device: root, or a udev rule and DeviceAllow=; man rtugw.conf(5))", us,
                     CPU_LATENCY_DEVICE, strerror(e));
            return -1;   /* the request held before stays */
        }
    }
    if (gw->cpu_latency_fd >= 0)   /* the new one is held first: no moment without one */
        close(gw->cpu_latency_fd);
    gw->cpu_latency_fd = fd;
    if (us >= 0)
        gw_log(gw, CONFIG_LOG_INFO, "cpu latency: a request of %d us held (%s): idle CPUs wake within it, at "
               "the cost of their power saving", us, CPU_LATENCY_DEVICE);
    return 0;
}

void cpu_latency_drop(gw_t *gw)
{
    if (gw->cpu_latency_fd >= 0)
        close(gw->cpu_latency_fd);
    gw->cpu_latency_fd = -1;
}

/* The request in force for this daemon, or -1: the running copy's value
 * while a descriptor is held. A start that could not hold it holds none; a
 * reload that could not replace it keeps both the old descriptor and the old
 * value (reload_parts.c sets the running copy only after a hold succeeded). */
static int held_us(const gw_t *gw)
{
    return gw->cpu_latency_fd >= 0 ? gw->cfg->cpu_latency_us : -1;
}

/* /status's "cpu_latency_us" (null: none held) and /metrics's gauge (-1: none). */
static void latency_status(void *ctx, struct evbuffer *b)
{
    const gw_t *gw = ctx;
    if (held_us(gw) >= 0)
        evbuffer_add_printf(b, ",\"cpu_latency_us\":%d", held_us(gw));
    else
        evbuffer_add_printf(b, ",\"cpu_latency_us\":null");
}

static void latency_fold(void *ctx, uint64_t *h)
{
    const gw_t *gw = ctx;
    report_fold(h, (uint64_t)(int64_t)held_us(gw));
}

static void latency_metrics(void *ctx, struct evbuffer *b)
{
    const gw_t *gw = ctx;
    evbuffer_add_printf(b, "# HELP rtugw_cpu_latency_request_us The CPU latency request this daemon holds "
                        "([gateway] cpu_latency_us), in microseconds; -1: none\n"
                        "# TYPE rtugw_cpu_latency_request_us gauge\nrtugw_cpu_latency_request_us %d\n",
                        held_us(gw));
}

gw_report_part_t cpu_latency_report(gw_t *gw)
{
    return (gw_report_part_t){ .name = "cpu_latency", .status_json = latency_status, .status_fold = latency_fold,
                               .metrics_text = latency_metrics, .ctx = gw };
}
