/*
 * config/listen.c -- `[bus NAME] mode = master | listen`.
 *
 * A listen-only bus taps a line another master owns: rtugw must never send a
 * byte on it, so every key that only shapes what rtugw sends (RS-485
 * direction control, its timing, retries, the queue) is refused on such a bus
 * rather than silently ignored, and so is a port that is not a line
 * (the built-in simulator answers only what rtugw asks; a Modbus TCP device is
 * no shared line). A serial device server (tcp:// with framing = rtu) can be
 * tapped: its byte stream is the line's. frame_silence_ms is taken on any
 * listen-only bus: a tap behind a relay or a pseudo-terminal hands bytes on
 * with more jitter than t3.5, and what would cut a frame there is the silence.
 * listen_late_factor (1-100, default 4) states the tap's late bound, parser/pair.c
 * P5: only a listen-only bus takes it.
 */
#include "config/internal.h"

#include <string.h>

bool listen_set_mode(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_bus_t *bus = ld->target;
    (void)number;
    if (strcmp(value, "master") == 0 || strcmp(value, "listen") == 0) {
        bus->listen = value[0] == 'l';
        return true;
    }
    config_bad_value(ld, k->name, value,
                     "expected master (rtugw polls the line, the default) or listen (rtugw only "
                     "listens to a line another master polls, and never writes to it)");
    return false;
}

static const seen_key_t *given_key(const loader_t *ld, const char *name)
{
    for (unsigned i = 0; i < ld->seen_count; i++)
        if (ld->seen[i].accepted && strcmp(ld->seen[i].spec->name, name) == 0)
            return &ld->seen[i];
    return NULL;
}

void listen_check_bus(loader_t *ld, const config_bus_t *bus)
{
    static const char *const sends[] = { "rs485", "rts_after_send", "rts_delay_before_us", "rts_delay_after_us",
                                         "rx_during_tx", "echo_suppress", "retries", "gap_us", "queue_depth",
                                         "tcp_first", "poll_share", "priority_hold_us" };
    const seen_key_t *mode = given_key(ld, "mode");
    const seen_key_t *late = given_key(ld, "listen_late_factor");
    if (late && !bus->listen)
        config_error_at(ld, late->line, "[%s] listen_late_factor = '%s': only a listen-only bus (mode = listen) "
                        "pairs what it hears; this bus polls", ld->section, late->value);
    if (!bus->listen || !mode)
        return;
    if (bus->port_kind == CONFIG_PORT_SIM || bus->port_kind == CONFIG_PORT_SIM_PACED ||
        bus->framing != CONFIG_FRAMING_RTU)
        config_error_at(ld, mode->line, "[%s] mode = 'listen': needs a serial port or a tcp:// serial device "
                        "server with framing = rtu (a line another master polls)", ld->section);
    for (size_t i = 0; i < sizeof sends / sizeof sends[0]; i++) {
        const seen_key_t *s = given_key(ld, sends[i]);
        if (s)
            config_error_at(ld, s->line, "[%s] %s = '%s': a listen-only bus (mode = listen) never sends",
                            ld->section, sends[i], s->value);
    }
}
