/*
 * config/security.c -- the MB-TCP-Security half of the configuration: the
 * setters of [tls]'s and [role NAME]'s own keys (their tables are in
 * keys.c), the roles, and the checks once the whole file is read.
 *
 * A role grants function classes on units: a request passes when its
 * function's class is granted and either its MBAP unit is in units or the
 * bus that unit routes to is in buses. Everything is refused unless granted,
 * so a role without functions, or without a unit or bus, is an error rather
 * than a role that silently refuses everything.
 */
#include "config/internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void security_defaults(config_t *cfg)
{
    cfg->tls = (config_tls_t){ .bind = "127.0.0.1", .port = 802, .min_version = 12, .session_cache = 128,
                               .handshake_timeout_ms = 5000, .max_handshakes = 16,
                               .max_handshakes_per_address = 4, .default_role = -1 };
}

int config_role_find(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->role_count; i++)
        if (strcmp(cfg->roles[i].name, name) == 0)
            return (int)i;
    return -1;
}

config_role_t *security_new_role(loader_t *ld, const char *name)
{
    config_t *cfg = ld->cfg;
    if (cfg->role_count == CONFIG_MAX_ROLES) {
        config_error_at(ld, ld->header_line, "[%s]: more than %d roles", ld->section, CONFIG_MAX_ROLES);
        return NULL;
    }
    config_role_t *r = &cfg->roles[cfg->role_count++];
    *r = (config_role_t){ .line = ld->header_line };
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

/* Calls each(token) for every comma- or space-separated token of value;
 * false as soon as one returns false. */
static bool each_token(const char *value, bool (*each)(void *ctx, const char *tok), void *ctx)
{
    char list[CONFIG_LINE_MAX];
    snprintf(list, sizeof list, "%s", value);
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
        if (!each(ctx, tok))
            return false;
    return true;
}

static bool add_function_class(void *ctx, const char *tok)
{
    static const struct { const char *name; unsigned bits; } classes[] = {
        { "read", CONFIG_FN_READ }, { "write", CONFIG_FN_WRITE }, { "diagnostics", CONFIG_FN_DIAGNOSTICS },
        { "file", CONFIG_FN_FILE }, { "user", CONFIG_FN_USER }, { "all", CONFIG_FN_ALL },
    };
    unsigned *functions = ctx;
    for (size_t i = 0; i < COUNT(classes); i++)
        if (strcasecmp(tok, classes[i].name) == 0) {
            *functions |= classes[i].bits;
            return true;
        }
    return false;
}

/* "all", "N" or "LO-HI", units 0..255. */
static bool add_units(void *ctx, const char *tok)
{
    uint8_t *units = ctx;   /* 32 bytes: bit u for unit u */
    unsigned lo, hi;
    char first[8];
    const char *dash = strchr(tok, '-');

    if (strcasecmp(tok, "all") == 0) {
        memset(units, 0xFF, 32);
        return true;
    }
    if (dash) {
        if ((size_t)(dash - tok) >= sizeof first)
            return false;
        memcpy(first, tok, (size_t)(dash - tok));
        first[dash - tok] = 0;
        if (config_parse_uint(first, 0, 255, &lo) != 0 || config_parse_uint(dash + 1, 0, 255, &hi) != 0 || hi < lo)
            return false;
    } else if (config_parse_uint(tok, 0, 255, &lo) != 0) {
        return false;
    } else {
        hi = lo;
    }
    for (unsigned u = lo; u <= hi; u++)
        units[u / 8] |= (uint8_t)(1u << (u % 8));
    return true;
}

/* The one parser of function classes and of unit lists, for [role NAME]
 * and for [tcp] priority_functions and priority_units. */
bool config_parse_function_classes(const char *value, unsigned *functions)
{
    *functions = 0;
    if (each_token(value, add_function_class, functions) && *functions)
        return true;
    *functions = 0;
    return false;
}

bool config_parse_units(const char *value, uint8_t units[32])
{
    memset(units, 0, 32);
    if (each_token(value, add_units, units))
        return true;
    memset(units, 0, 32);
    return false;
}

bool security_set_functions(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_role_t *r = ld->target;
    (void)number;
    if (config_parse_function_classes(value, &r->functions))
        return true;
    config_bad_value(ld, k->name, value, "expected a list of read, write, diagnostics, file, user, or all");
    return false;
}

bool security_set_units(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_role_t *r = ld->target;
    (void)number;
    if (config_parse_units(value, r->units))
        return true;
    config_bad_value(ld, k->name, value, "expected a list of units 0..255 and ranges like 1-10, or all");
    return false;
}

/* Bus names are resolved once every [bus] is read. */
bool security_set_buses(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_role_t *r = ld->target;
    unsigned i = (unsigned)(r - ld->cfg->roles);
    (void)k;
    (void)number;
    snprintf(ld->security.role_buses[i], sizeof ld->security.role_buses[i], "%s", value);
    ld->security.role_buses_line[i] = ld->line;
    return true;
}

bool security_set_min_version(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    if (strcmp(value, "1.2") == 0 || strcmp(value, "1.3") == 0) {
        ld->cfg->tls.min_version = value[2] == '3' ? 13 : 12;
        return true;
    }
    config_bad_value(ld, k->name, value, "expected 1.2 or 1.3 (nothing older is offered)");
    return false;
}

bool security_set_default_role(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    pending_ref_t *ref = &ld->security.default_role;
    (void)number;
    snprintf(ref->name, sizeof ref->name, "%s", value);
    ref->line = ld->line;
    if (config_valid_name(value))
        return true;
    config_bad_value(ld, k->name, value, "expected the name of a [role NAME] section");
    return false;
}

typedef struct bus_list {
    const config_t *cfg;
    config_role_t *role;
    const char *bad;      /* the first name that is no bus */
    char bad_buf[CONFIG_NAME_MAX + 8];
} bus_list_t;

static bool add_bus(void *ctx, const char *tok)
{
    bus_list_t *bl = ctx;
    if (strcasecmp(tok, "all") == 0) {
        for (unsigned b = 0; b < bl->cfg->bus_count; b++)
            bl->role->buses[b / 8] |= (uint8_t)(1u << (b % 8));
        return true;
    }
    int b = config_find_bus(bl->cfg, tok);
    if (b < 0) {
        snprintf(bl->bad_buf, sizeof bl->bad_buf, "%s", tok);
        bl->bad = bl->bad_buf;
        return false;
    }
    bl->role->buses[b / 8] |= (uint8_t)(1u << (b % 8));
    return true;
}

static void resolve_role(loader_t *ld, unsigned i)
{
    const security_pending_t *p = &ld->security;
    config_role_t *r = &ld->cfg->roles[i];
    bool any_unit = false;

    if (p->role_buses[i][0]) {
        bus_list_t bl = { .cfg = ld->cfg, .role = r };
        memset(r->buses, 0, sizeof r->buses);
        if (!each_token(p->role_buses[i], add_bus, &bl))
            config_error_at(ld, p->role_buses_line[i], "[role %s] buses = '%s': no such bus '%s'", r->name,
                            p->role_buses[i], bl.bad ? bl.bad : "");
    }
    for (size_t k = 0; k < sizeof r->units; k++)
        any_unit |= r->units[k] != 0;
    for (size_t k = 0; k < sizeof r->buses; k++)
        any_unit |= r->buses[k] != 0;
    if (!r->functions)
        config_error_at(ld, r->line, "[role %s]: functions is required (read, write, diagnostics, file, user or all)",
                        r->name);
    if (!any_unit && !p->role_buses[i][0])
        config_error_at(ld, r->line, "[role %s]: grants no unit: units or buses is required", r->name);
}

static void same_address(loader_t *ld, const config_tls_t *t, const char *other, bool enabled, const char *bind,
                         unsigned port)
{
    if (enabled && port == t->port && strcmp(bind, t->bind) == 0)
        config_error_at(ld, t->line, "[tls] and [%s] both use %s:%u", other, t->bind, t->port);
}

static void resolve_listener(loader_t *ld)
{
    const config_t *cfg = ld->cfg;
    const config_tls_t *t = &cfg->tls;
    static const struct { const char *key; size_t offset; } required[] = {
        { "cert_file", offsetof(config_tls_t, cert_file) },
        { "key_file", offsetof(config_tls_t, key_file) },
        { "ca_file", offsetof(config_tls_t, ca_file) },
    };

    for (size_t i = 0; i < COUNT(required); i++)
        if (!((const char *)t + required[i].offset)[0])
            config_error_at(ld, t->line, "[tls]: %s is required (a section present is on; "
                            "enabled = false keeps it off)", required[i].key);
    if (cfg->role_count == 0)
        config_error_at(ld, t->line, "[tls]: enabled, but there is no [role NAME]: every client would be refused");
    if (cfg->bus_count == 0)
        config_error_at(ld, t->line, "[tls]: enabled, but no [bus NAME] is configured");
    same_address(ld, t, "tcp", cfg->tcp.enabled, cfg->tcp.bind, cfg->tcp.port);
    same_address(ld, t, "http", cfg->http.enabled, cfg->http.bind, cfg->http.port);
}

void security_resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;
    const pending_ref_t *dr = &ld->security.default_role;

    for (unsigned i = 0; i < cfg->role_count; i++)
        resolve_role(ld, i);
    if (dr->name[0] && config_valid_name(dr->name)) {
        cfg->tls.default_role = config_role_find(cfg, dr->name);
        if (cfg->tls.default_role < 0)
            config_error_at(ld, dr->line, "[tls] default_role = '%s': no such [role %s]", dr->name, dr->name);
    }
    if (cfg->tls.enabled)
        resolve_listener(ld);
}
