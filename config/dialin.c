/*
 * config/dialin.c -- dial-in devices: `[bus] port = listen://ADDR:PORT`,
 * where a DTU connects to rtugw and then carries RTU (or ASCII) frames, and
 * its two byte strings: `register = hex:...|text:...` (the prefix the DTU
 * must send first; anything else is rejected) and `heartbeat = hex:...|
 * text:...` (its keep-alive packet, dropped, never taken for a frame). Both
 * are refused on other ports, as is framing = tcp (a DTU carries a serial
 * line, not MBAP). Several buses may listen on one ADDR:PORT, told apart
 * by their registrations (check_shared says what they must be).
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

static void bytes_text(const uint8_t *p, unsigned n, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "hex:");
    for (unsigned i = 0; i < n && k + 3 <= cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x", p[i]);
}

/* a's registration begins b's (or is b's) */
static bool begins(const config_bus_t *a, const config_bus_t *b)
{
    return a->dial_register_len <= b->dial_register_len &&
           memcmp(a->dial_register, b->dial_register, a->dial_register_len) == 0;
}

/*
 * Two buses listening on one port (bus, the one being read; o, an earlier
 * one). On one address they share its listening socket, and the first bytes
 * of a connection say whose it is (drivers/dialin_hub.c): so each needs a
 * registration, and none may begin another's (a DTU's first bytes would
 * fit both). 0.0.0.0 takes in every address, so it shares a port with no
 * other address; two other addresses are two sockets.
 */
static void check_shared(loader_t *ld, const config_bus_t *bus, const config_bus_t *o)
{
    unsigned line = bus->port_line;
    for (unsigned i = 0; i < ld->seen_count; i++)
        if (ld->seen[i].accepted && strcmp(ld->seen[i].spec->name, "register") == 0)
            line = ld->seen[i].line;
    bool any = strcmp(bus->tcp_host, "0.0.0.0") == 0 || strcmp(o->tcp_host, "0.0.0.0") == 0;
    if (strcmp(bus->tcp_host, o->tcp_host) != 0) {
        if (any)
            config_error_at(ld, bus->port_line, "[%s] port = '%s': bus %s listens on %s:%u, and 0.0.0.0 takes in "
                            "every address: buses sharing a port give the same ADDR", ld->section, bus->port,
                            o->name, o->tcp_host, o->tcp_port);
        return;
    }
    char mine[2 * CONFIG_DIAL_BYTES + 8], theirs[2 * CONFIG_DIAL_BYTES + 8];
    bytes_text(bus->dial_register, bus->dial_register_len, mine, sizeof mine);
    bytes_text(o->dial_register, o->dial_register_len, theirs, sizeof theirs);
    if (!bus->dial_register_len || !o->dial_register_len)
        config_error_at(ld, line, "[%s] port = '%s': shared with bus %s, so both buses need a register = ... "
                        "(bus %s has none): a DTU's registration tells whose connection it is", ld->section,
                        bus->port, o->name, !bus->dial_register_len ? bus->name : o->name);
    else if (bus->dial_register_len == o->dial_register_len && begins(bus, o))
        config_error_at(ld, line, "[%s] register = '%s': bus %s on the same port %s:%u has the same registration",
                        ld->section, mine, o->name, o->tcp_host, o->tcp_port);
    else if (begins(bus, o) || begins(o, bus))
        config_error_at(ld, line, "[%s] register = '%s': bus %s on the same port %s:%u has register = '%s'; one "
                        "begins the other, so a DTU's first bytes would fit both", ld->section, mine, o->name,
                        o->tcp_host, o->tcp_port, theirs);
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
            check_shared(ld, bus, &cfg->buses[b]);
}
