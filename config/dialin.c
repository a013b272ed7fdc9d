/*
 * config/dialin.c -- dial-in devices: `[bus] port = listen://ADDR:PORT`,
 * where a DTU connects to rtugw and then carries RTU (or ASCII) frames, and
 * its two byte strings: `register = hex:...|text:...` (the prefix the DTU
 * must send first; anything else is rejected) and `heartbeat = hex:...|
 * text:...` (its keep-alive packet, dropped, never taken for a frame). Both
 * are refused on other ports, as is framing = tcp (a DTU carries a serial
 * line, not MBAP), and a listen address given to two buses (one bus per
 * listening port: drivers/dialin.c says why).
 */
#include "config/internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

bool dialin_set_port(loader_t *ld, const key_spec_t *k, const char *value, config_bus_t *bus)
{
    char text[sizeof bus->tcp_host];
    struct in_addr a;
    unsigned port;

    if (!transports_split_port(value, 9, bus, text, &port)) {
        config_bad_value(ld, k->name, value, "expected listen://ADDR:PORT, e.g. listen://0.0.0.0:7001 (PORT 1..65535)");
        return false;
    }
    if (inet_pton(AF_INET, text, &a) != 1) {
        config_bad_value(ld, k->name, value, "ADDR must be an IPv4 address to listen on (0.0.0.0: every interface)");
        return false;
    }
    snprintf(bus->tcp_host, sizeof bus->tcp_host, "%s", text);
    bus->tcp_port = port;
    snprintf(bus->port, sizeof bus->port, "%s", value);
    bus->port_kind = CONFIG_PORT_LISTEN;
    return true;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* hex:48656c6c6f or text:site-17 into out (1..CONFIG_DIAL_BYTES bytes). */
bool dialin_set_bytes(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_bus_t *bus = ld->target;
    bool reg = strcmp(k->name, "register") == 0;
    uint8_t *out = reg ? bus->dial_register : bus->dial_heartbeat;
    unsigned *out_len = reg ? &bus->dial_register_len : &bus->dial_heartbeat_len;
    size_t n = 0;
    (void)number;
    if (strncmp(value, "text:", 5) == 0) {
        n = strlen(value + 5);
        if (n >= 1 && n <= CONFIG_DIAL_BYTES) {
            memcpy(out, value + 5, n);
            *out_len = (unsigned)n;
            return true;
        }
    } else if (strncmp(value, "hex:", 4) == 0) {
        const char *h = value + 4;
        size_t digits = strlen(h);
        bool ok = digits >= 2 && digits % 2 == 0 && digits / 2 <= CONFIG_DIAL_BYTES;
        for (size_t i = 0; ok && i < digits; i += 2) {
            int hi = hex_digit(h[i]), lo = hex_digit(h[i + 1]);
            ok = hi >= 0 && lo >= 0;
            out[n++] = (uint8_t)(hi << 4 | lo);
        }
        if (ok) {
            *out_len = (unsigned)n;
            return true;
        }
    }
    config_bad_value(ld, k->name, value, "expected hex:BYTES (an even number of hex digits, e.g. hex:FEFE01) or "
                                         "text:CHARACTERS, 1 to 64 bytes");
    return false;
}

void dialin_check_bus(loader_t *ld, const config_bus_t *bus)
{
    static const char *const mine[] = { "register", "heartbeat" };
    for (unsigned i = 0; i < ld->seen_count; i++) {
        const seen_key_t *s = &ld->seen[i];
        for (size_t j = 0; j < sizeof mine / sizeof mine[0]; j++)
            if (s->accepted && strcmp(s->spec->name, mine[j]) == 0 && bus->port_kind != CONFIG_PORT_LISTEN)
                config_error_at(ld, s->line, "[%s] %s = '%s': only for port = listen://ADDR:PORT (a dial-in DTU)",
                                ld->section, mine[j], s->value);
        if (s->accepted && strcmp(s->spec->name, "framing") == 0 && bus->port_kind == CONFIG_PORT_LISTEN &&
            bus->framing == CONFIG_FRAMING_TCP)
            config_error_at(ld, s->line, "[%s] framing = 'tcp': a dial-in DTU carries a serial line's frames "
                            "(rtu or ascii)", ld->section);
    }
    const config_t *cfg = ld->cfg;
    for (unsigned b = 0; bus->port_kind == CONFIG_PORT_LISTEN && b < cfg->bus_count; b++)
        if (&cfg->buses[b] != bus && cfg->buses[b].port_kind == CONFIG_PORT_LISTEN &&
            cfg->buses[b].tcp_port == bus->tcp_port)
            config_error_at(ld, bus->port_line, "[%s] port = '%s': bus %s listens on port %u already (one bus per "
                            "listening port)", ld->section, bus->port, cfg->buses[b].name, bus->tcp_port);
}
