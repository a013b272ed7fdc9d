/*
 * tests/fuzz/fuzz_config.c -- config_load_string() on arbitrary text.
 *
 * Invariants (abort() when broken):
 *   - no crash, no sanitizer report;
 *   - a rejected text reports at least one error, count <= CONFIG_MAX_ERRORS,
 *     count <= total, every message NUL-terminated;
 *   - a text that loads loads again to the same config_t, byte for byte
 *     (the loader is deterministic and starts from zeroed memory);
 *   - every value of a loaded config lies in its documented range
 *     (config/keys.c's tables and config/config.h): counts within
 *     their arrays, references to existing buses and devices, names and
 *     paths NUL-terminated inside their buffers, no name twice in a kind,
 *     a port's kind matching its text;
 *   - a bus rule that accepts everything changes nothing (same config, or
 *     the same errors); one that refuses everything is asked only about
 *     [bus] keys, with a whole bus, and adds exactly one error per call
 *     (a loaded config: at least one per bus, since port is required);
 *   - a loaded text written twice is refused: every section in it is then
 *     given twice (and a valid text has at least one section);
 *   - [tls] and the roles (config/security.c): every role grants at least
 *     one function class and one unit or bus, only classes and buses that
 *     exist, names unique and valid; default_role names a role or is -1;
 *     an enabled [tls] has its three files, a role and a bus.
 */
#include "config/config.h"
#include "tests/fuzz/fuzz.h"

#include <stdbool.h>
#include <string.h>

#define IN(v, lo, hi) ((v) >= (lo) && (v) <= (hi))

static const uint8_t *g_in;
static size_t g_len;

#define CHECK(cond, ...) FUZZ_CHECK((cond), g_in, g_len, __VA_ARGS__)

static void check_str(const char *s, size_t cap, const char *what)
{
    CHECK(memchr(s, '\0', cap) != NULL, "%s not NUL-terminated in its %zu bytes", what, cap);
}

/* "sim", "sim-paced", either with ":LIST" (not empty), or a device. */
static void check_port(const config_bus_t *b)
{
    const char *list = config_bus_sim_slaves(b);
    bool sim = strcmp(b->port, "sim") == 0 || strncmp(b->port, "sim:", 4) == 0;
    bool paced = strncmp(b->port, "sim-paced", 9) == 0;

    CHECK(b->port_line > 0, "bus %s: port given at line 0", b->name);
    CHECK(b->port_kind == (paced ? CONFIG_PORT_SIM_PACED : sim ? CONFIG_PORT_SIM : CONFIG_PORT_DEVICE),
          "bus %s: port '%s' of kind %d", b->name, b->port, (int)b->port_kind);
    if (b->port_kind == CONFIG_PORT_DEVICE) {
        CHECK(list == NULL, "bus %s: a device port with a slave list", b->name);
        return;
    }
    CHECK(paced ? b->port[9] == 0 || b->port[9] == ':' : true, "bus %s: port '%s' taken as sim-paced",
          b->name, b->port);
    if (list)
        CHECK(list > b->port && list[-1] == ':' && *list && list < b->port + sizeof b->port,
              "bus %s: slave list '%s' not after a colon in '%s'", b->name, list, b->port);
}

static void check_ranges(const config_t *c)
{
    check_str(c->source, sizeof c->source, "source");
    CHECK(c->workers <= 256, "workers %u", c->workers);
    CHECK(c->log_level <= CONFIG_LOG_DEBUG, "log_level %d", (int)c->log_level);
    CHECK(c->bus_count <= CONFIG_MAX_BUSES, "bus_count %u", c->bus_count);
    CHECK(c->device_count <= CONFIG_MAX_DEVICES, "device_count %u", c->device_count);
    CHECK(c->poll_count <= CONFIG_MAX_POLLS, "poll_count %u", c->poll_count);
    for (unsigned i = 0; i < c->bus_count; i++) {
        const config_bus_t *b = &c->buses[i];
        check_str(b->name, sizeof b->name, "bus name");
        check_str(b->port, sizeof b->port, "bus port");
        CHECK(b->name[0] && b->port[0], "bus %u without a name or port", i);
        CHECK(IN(b->baud, 300u, 4000000u), "bus %s baud %u", b->name, b->baud);
        CHECK(b->parity == 'N' || b->parity == 'E' || b->parity == 'O', "bus %s parity %d",
              b->name, b->parity);
        CHECK(IN(b->data_bits, 7u, 8u) && IN(b->stop_bits, 1u, 2u), "bus %s framing %u/%u",
              b->name, b->data_bits, b->stop_bits);
        CHECK(b->rs485 <= CONFIG_RS485_RTS, "bus %s rs485 %d", b->name, (int)b->rs485);
        check_port(b);
        CHECK(b->rts_delay_before_us <= 100000 && b->rts_delay_after_us <= 100000,
              "bus %s rts delays", b->name);
        CHECK(IN(b->response_timeout_ms, 1u, 60000u), "bus %s response_timeout_ms %u", b->name,
              b->response_timeout_ms);
        CHECK(b->retries <= 10, "bus %s retries %u", b->name, b->retries);
        CHECK(b->gap_us <= 1000000, "bus %s gap_us %u", b->name, b->gap_us);
        CHECK(IN(b->queue_depth, 1u, 4096u), "bus %s queue_depth %u", b->name, b->queue_depth);
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(c->buses[j].name, b->name) != 0, "bus name %s twice", b->name);
    }
    for (unsigned i = 0; i < c->device_count; i++) {
        const config_device_t *d = &c->devices[i];
        check_str(d->name, sizeof d->name, "device name");
        CHECK(d->bus < c->bus_count, "device %s on bus %u of %u", d->name, d->bus, c->bus_count);
        CHECK(IN(d->slave, 1u, 247u), "device %s slave %u", d->name, d->slave);
        CHECK(d->timeout_ms <= 60000 && d->dead_after <= 1000 && d->dead_backoff_ms <= 3600000,
              "device %s timing out of range", d->name);
        for (unsigned j = 0; j < i; j++) {
            CHECK(c->devices[j].bus != d->bus || c->devices[j].slave != d->slave,
                  "slave %u twice on bus %u", d->slave, d->bus);
            CHECK(strcmp(c->devices[j].name, d->name) != 0, "device name %s twice", d->name);
        }
    }
    for (unsigned i = 0; i < c->poll_count; i++) {
        const config_poll_t *p = &c->polls[i];
        check_str(p->name, sizeof p->name, "poll name");
        CHECK(p->device < c->device_count, "poll %s on device %u of %u", p->name, p->device,
              c->device_count);
        CHECK(IN(p->function, 1u, 4u), "poll %s function %u", p->name, p->function);
        CHECK(p->address <= 65535 && IN(p->count, 1u, 2000u), "poll %s address/count", p->name);
        CHECK(p->address + p->count <= 65536, "poll %s runs past address 65535", p->name);
        CHECK(p->count <= (p->function <= 2 ? 2000u : 125u), "poll %s count %u for function %u",
              p->name, p->count, p->function);
        CHECK(IN(p->interval_ms, 10u, 86400000u), "poll %s interval_ms %u", p->name,
              p->interval_ms);
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(c->polls[j].name, p->name) != 0, "poll name %s twice", p->name);
    }
    const config_tcp_t *t = &c->tcp;
    check_str(t->bind, sizeof t->bind, "tcp bind");
    if (t->enabled) {
        CHECK(IN(t->port, 1u, 65535u), "tcp port %u", t->port);
        CHECK(IN(t->max_clients, 1u, 1024u), "tcp max_clients %u", t->max_clients);
        CHECK(IN(t->max_pending, 1u, 64u), "tcp max_pending %u", t->max_pending);
        CHECK(t->idle_timeout_s <= 86400, "tcp idle_timeout_s %u", t->idle_timeout_s);
        CHECK(c->bus_count == 0 || t->default_bus < c->bus_count, "tcp default_bus %u of %u",
              t->default_bus, c->bus_count);
    }
    CHECK(t->allow_count <= CONFIG_MAX_ALLOW, "tcp allow_count %u", t->allow_count);
    for (unsigned i = 0; i < t->allow_count; i++)
        CHECK((t->allow[i].addr & ~t->allow[i].mask) == 0, "allow %u: address bits outside its mask", i);
    if (t->enabled)
        CHECK(c->bus_count >= 1, "tcp enabled without a bus");
    for (unsigned u = 0; u < 256; u++) {
        const config_route_t *r = &t->unit[u];
        if (r->set && !r->broadcast)
            CHECK(r->bus < c->bus_count && r->slave <= 247, "unit%u -> bus %u slave %u", u,
                  r->bus, r->slave);
    }
    const config_http_t *h = &c->http;
    check_str(h->bind, sizeof h->bind, "http bind");
    if (h->enabled)
        CHECK(IN(h->port, 1u, 65535u), "http port %u", h->port);
    const config_router_t *ro = &c->router;
    CHECK(ro->exploration >= 0 && ro->exploration <= 1, "router exploration %g", ro->exploration);
    CHECK(ro->verify_rate >= 0 && ro->verify_rate <= 1, "router verify_rate %g", ro->verify_rate);
    CHECK(IN(ro->sample_every, 1u, 1000000u), "router sample_every %u", ro->sample_every);
    CHECK(IN(ro->explore_run, 1u, 1024u), "router explore_run %u", ro->explore_run);
    CHECK(ro->bucket_count <= CONFIG_MAX_BUCKETS, "router bucket_count %u", ro->bucket_count);
    for (unsigned i = 0; i < ro->bucket_count; i++) {
        CHECK(IN(ro->buckets[i], 1u, 256u), "router bucket %u = %u", i, ro->buckets[i]);
        if (i)
            CHECK(ro->buckets[i] > ro->buckets[i - 1], "router buckets not ascending");
    }
    if (ro->bucket_count)
        CHECK(ro->buckets[ro->bucket_count - 1] == 256, "router last bucket %u",
              ro->buckets[ro->bucket_count - 1]);
    check_str(ro->state_file, sizeof ro->state_file, "router state_file");
    check_str(ro->policy, sizeof ro->policy, "router policy");
}

static bool name_ok(const char *n)
{
    if (!*n)
        return false;
    for (; *n; n++)
        if (!(*n == '_' || *n == '-' || *n == '.' || (*n >= '0' && *n <= '9') || (*n >= 'a' && *n <= 'z') ||
              (*n >= 'A' && *n <= 'Z')))
            return false;
    return true;
}

static void check_security(const config_t *c)
{
    const config_tls_t *t = &c->tls;
    check_str(t->bind, sizeof t->bind, "tls bind");
    check_str(t->cert_file, sizeof t->cert_file, "tls cert_file");
    check_str(t->key_file, sizeof t->key_file, "tls key_file");
    check_str(t->ca_file, sizeof t->ca_file, "tls ca_file");
    check_str(t->crl_file, sizeof t->crl_file, "tls crl_file");
    CHECK(t->min_version == 12 || t->min_version == 13, "tls min_version %u", t->min_version);
    CHECK(t->session_cache <= 10000, "tls session_cache %u", t->session_cache);
    CHECK(IN(t->handshake_timeout_ms, 100u, 60000u), "tls handshake_timeout_ms %u", t->handshake_timeout_ms);
    CHECK(c->role_count <= CONFIG_MAX_ROLES, "role_count %u", c->role_count);
    CHECK(t->default_role >= -1 && t->default_role < (int)c->role_count, "tls default_role %d of %u",
          t->default_role, c->role_count);
    if (t->enabled) {
        CHECK(IN(t->port, 1u, 65535u), "tls port %u", t->port);
        CHECK(t->cert_file[0] && t->key_file[0] && t->ca_file[0], "tls enabled without its files");
        CHECK(c->role_count >= 1 && c->bus_count >= 1, "tls enabled without a role or a bus");
        CHECK(!c->tcp.enabled || t->port != c->tcp.port || strcmp(t->bind, c->tcp.bind) != 0,
              "tls and tcp on one address");
    }
    for (unsigned i = 0; i < c->role_count && i < CONFIG_MAX_ROLES; i++) {
        const config_role_t *r = &c->roles[i];
        bool any_unit = false;
        for (size_t k = 0; k < sizeof r->units; k++)
            any_unit |= r->units[k] != 0;
        check_str(r->name, sizeof r->name, "role name");
        CHECK(name_ok(r->name), "role name '%s'", r->name);
        CHECK(r->functions && (r->functions & ~CONFIG_FN_ALL) == 0, "role %s functions %#x", r->name, r->functions);
        bool any_bus = false, beyond = false;
        for (unsigned b = 0; b < 8 * sizeof r->buses; b++)
            if (r->buses[b / 8] & (1u << (b % 8))) {
                any_bus = true;
                beyond |= b >= c->bus_count;
            }
        CHECK(any_unit || any_bus, "role %s grants no unit or bus", r->name);
        CHECK(!beyond, "role %s grants a bus beyond its %u buses", r->name, c->bus_count);
        CHECK(config_role_find(c, r->name) == (int)i, "role %s twice", r->name);
    }
}

/* Two loads of one text are the same: their tables entry by entry (they are
 * allocated now, so their pointers differ), the rest byte for byte. */
static bool same_table(const void *a, const void *b, size_t n, size_t size)
{
    return n == 0 || (a && b && memcmp(a, b, n * size) == 0);
}

static bool same_config(const config_t *a, const config_t *b)
{
    if (a->bus_count != b->bus_count || a->device_count != b->device_count || a->poll_count != b->poll_count ||
        a->serial_slave_count != b->serial_slave_count ||
        !same_table(a->buses, b->buses, a->bus_count, sizeof *a->buses) ||
        !same_table(a->devices, b->devices, a->device_count, sizeof *a->devices) ||
        !same_table(a->polls, b->polls, a->poll_count, sizeof *a->polls) ||
        !same_table(a->serial_slaves, b->serial_slaves, a->serial_slave_count, sizeof *a->serial_slaves) ||
        (a->tags ? tags_table_count(a->tags) : 0) != (b->tags ? tags_table_count(b->tags) : 0))
        return false;
    config_t x = *a, y = *b;
    x.buses = y.buses = NULL;
    x.devices = y.devices = NULL;
    x.polls = y.polls = NULL;
    x.serial_slaves = y.serial_slaves = NULL;
    x.tags = y.tags = NULL;
    return memcmp(&x, &y, sizeof x) == 0;
}

static void check_errors(const config_errors_t *e)
{
    CHECK(e->count >= 1, "rejected without an error message");
    CHECK(e->count <= CONFIG_MAX_ERRORS && e->count <= e->total, "errors count %u total %u",
          e->count, e->total);
    for (unsigned i = 0; i < e->count; i++) {
        check_str(e->text[i], sizeof e->text[i], "error message");
        CHECK(strncmp(e->text[i], "fuzz.ini", 8) == 0, "error without the file name: %s", e->text[i]);
    }
}

/* ---- bus rules ------------------------------------------------------------- */

static unsigned g_rule_calls;

static void check_rule_call(const config_bus_t *bus, const char *key)
{
    static const char *const bus_keys[] = {
        "port", "baud", "parity", "data_bits", "stop_bits", "rs485", "rts_after_send",
        "rts_delay_before_us", "rts_delay_after_us", "rx_during_tx", "echo_suppress",
        "response_timeout_ms", "retries", "gap_us", "queue_depth", "tcp_first",
    };
    bool known = false;
    for (size_t i = 0; i < sizeof bus_keys / sizeof bus_keys[0]; i++)
        known = known || strcmp(key, bus_keys[i]) == 0;
    CHECK(known, "bus rule asked about '%s'", key);
    check_str(bus->name, sizeof bus->name, "rule: bus name");
    check_str(bus->port, sizeof bus->port, "rule: bus port");
    CHECK(bus->name[0] && bus->line > 0, "rule: bus without a name or line");
    g_rule_calls++;
}

static int accept_all(const config_bus_t *bus, const char *key, char *why, size_t cap)
{
    (void)why;
    (void)cap;
    check_rule_call(bus, key);
    return 0;
}

static int refuse_all(const config_bus_t *bus, const char *key, char *why, size_t cap)
{
    check_rule_call(bus, key);
    snprintf(why, cap, "refused");
    return -1;
}

static config_errors_t g_errs, g_errs2;   /* 12 KiB each: kept off the stack */

/* The plain load's result (c, g_errs) against loads with a rule. */
static void check_rules(const char *text, const config_t *c)
{
    memset(&g_errs2, 0, sizeof g_errs2);
    g_rule_calls = 0;
    config_t *with = config_load_string_with(text, "fuzz.ini", accept_all, &g_errs2);
    unsigned calls = g_rule_calls;
    CHECK(!with == !c, "an accepting bus rule changes whether the text loads");
    if (c)
        CHECK(same_config(with, c), "an accepting bus rule changes the config");
    else
        CHECK(g_errs2.total == g_errs.total && memcmp(g_errs2.text, g_errs.text, sizeof g_errs.text) == 0,
              "an accepting bus rule changes the errors");
    config_free(with);

    memset(&g_errs2, 0, sizeof g_errs2);
    g_rule_calls = 0;
    config_t *refused = config_load_string_with(text, "fuzz.ini", refuse_all, &g_errs2);
    CHECK(g_rule_calls == calls, "the rule is asked %u times, then %u", calls, g_rule_calls);
    CHECK(g_errs2.total == g_errs.total + calls, "%u errors, %u calls: %u errors with a refusing rule",
          g_errs.total, calls, g_errs2.total);
    CHECK(!c || c->bus_count <= calls, "%u buses, the rule asked %u times", c ? c->bus_count : 0, calls);
    CHECK(refused == NULL || calls == 0, "loaded although the rule refused");
    if (refused == NULL)
        check_errors(&g_errs2);
    config_free(refused);
}

/* A loaded text twice over: its sections all come again. */
static void check_doubled(const char *text, size_t size)
{
    char *twice = malloc(2 * size + 2);
    if (!twice)
        return;
    memcpy(twice, text, size);
    twice[size] = '\n';
    memcpy(twice + size + 1, text, size);
    twice[2 * size + 1] = '\0';
    memset(&g_errs2, 0, sizeof g_errs2);
    config_t *c = config_load_string(twice, "fuzz.ini", &g_errs2);
    CHECK(c == NULL, "a loaded text written twice loads too");
    if (!c)
        check_errors(&g_errs2);
    config_free(c);
    free(twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    g_in = data;
    g_len = size;

    memset(&g_errs, 0, sizeof g_errs);
    config_t *c = config_load_string(text, "fuzz.ini", &g_errs);
    if (!c) {
        check_errors(&g_errs);
    } else {
        check_ranges(c);
        check_security(c);
        memset(&g_errs2, 0, sizeof g_errs2);
        config_t *again = config_load_string(text, "fuzz.ini", &g_errs2);
        CHECK(again != NULL, "loads once, then fails: %s", g_errs2.count ? g_errs2.text[0] : "?");
        CHECK(same_config(again, c), "a second load gives a different config_t");
        config_free(again);
    }
    check_rules(text, c);
    if (c)
        check_doubled(text, strlen(text));
    config_free(c);
    free(text);
    return 0;
}
