/*
 * config/maps.c -- [map NAME]: a virtual slave's register table.
 *
 * The argument. An integrator already describes registers in one form, the
 * tags' CSV (address, table, type, order, scale): a map's register table is
 * written in that same form, and read by the same loader (tags/csv.c, into a
 * scratch table of one device named after the map), so a map entry's type,
 * order, scale and address mean exactly what they mean on a tag, with the
 * same file:line:column messages. The row's `name` is the tag it serves.
 * What the loader cannot know is checked here, each error at FILE:LINE:
 *   - the tag exists (a [tag] section or a device's tags_file row);
 *   - a string or raw entry has its tag's type and length (its words are
 *     served as read; no other encoding of a text exists);
 *   - a bool entry is a coil or a discrete input (a bit of a register would
 *     make two entries share a register: refused rather than merged);
 *   - no two entries of one table overlap, nor the quality register an
 *     entry (overlaps are errors here, not the tags' warnings: a register
 *     served twice would have two values);
 *   - a tag appears once per map (the loader's duplicate-name rule).
 * Inline entries (entryN = NAME, TABLE, ADDRESS, TYPE[, ORDER[, SCALE]]) are
 * rows of the same CSV, built here with blank lines so that each row stands
 * on its key's line of the configuration file: the loader's messages then
 * name that file and line. A map takes a registers file or entries, not both.
 * Devices made from one template (DEVICE.ROW tags) are served alike:
 * device_registers is a registers file whose rows name the template's rows
 * (`voltage`), and each deviceN = DEVICE, BASE places one copy of them,
 * serving DEVICE.ROW at BASE + the row's address: fifteen meters at 0, 10,
 * 20 ... from one file of ten rows, each meter's entries its own tags, and
 * checked as every entry is (the tag exists, no overlap, FILE:LINE of the
 * row, the deviceN's line for what only the placement gets wrong).
 * The unit: 1..255, one map per unit, and never a unit a front end routes
 * (an explicit unitN of [tcp], [rtu_tcp] or a [serial_slave], or a device
 * on [tcp]'s or [rtu_tcp]'s default bus at that slave id, which the default
 * route reaches): a unit id has one meaning on every front end.
 */
#include "config/internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* A registers file larger than this is refused. */
#define MAP_FILE_MAX (16u << 20)

void *config_maps_new(loader_t *ld, const char *name, unsigned *first)
{
    config_t *cfg = ld->cfg;
    for (unsigned i = 0; i < cfg->map_count; i++) {
        if (strcmp(cfg->maps[i].name, name) == 0) {
            *first = cfg->maps[i].line;
            return NULL;
        }
    }
    if (cfg->map_count == CONFIG_MAX_MAPS) {
        config_error_at(ld, ld->header_line, "[%s]: more than %d maps (the limit of one configuration)", ld->section,
                        CONFIG_MAX_MAPS);
        return NULL;
    }
    if (config_grow((void **)&cfg->maps, sizeof *cfg->maps, NULL, 0, cfg->map_count, &ld->map_cap) != 0) {
        config_error_at(ld, ld->header_line, "[%s]: out of memory", ld->section);
        return NULL;
    }
    config_map_t *m = &cfg->maps[cfg->map_count++];
    *m = (config_map_t){ .quality_register = -1, .line = ld->header_line };
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

/* entryN: a row of m's inline CSV, on the line of its key (blank lines before it). */
static bool add_row(loader_t *ld, config_map_t *m, const char *value)
{
    unsigned i = (unsigned)(m - ld->cfg->maps), *lines = &ld->map_rows_lines[i];
    char **rows = &ld->map_rows[i];
    size_t used = *rows ? strlen(*rows) : 0;
    unsigned pad = !*rows ? 0 : ld->line > *lines ? ld->line - *lines - 1 : 0;
    static const char header[] = "name,table,address,type,order,scale\n";
    if (!*rows)
        pad = ld->line > 2 ? ld->line - 2 : 0;
    unsigned commas = 0;   /* the row padded to the header's six fields (order and scale optional) */
    for (const char *c = value; *c; c++)
        commas += *c == ',';
    unsigned fill = commas < 5 ? 5 - commas : 0;
    size_t need = used + (*rows ? 0 : sizeof header) + pad + strlen(value) + fill + 2;
    char *n = realloc(*rows, need);
    if (!n) {
        config_bad_value(ld, "entry", value, "out of memory");
        return false;
    }
    if (!*rows)
        used = (size_t)snprintf(n, need, "%s", header);
    memset(n + used, '\n', pad);
    snprintf(n + used + pad, need - used - pad, "%s%.*s\n", value, (int)fill, ",,,,,");
    *rows = n;
    *lines = ld->line;
    return true;
}

/* deviceN = DEVICE, BASE: one copy of device_registers' rows for DEVICE, at BASE. */
static bool add_place(loader_t *ld, config_map_t *m, const char *value)
{
    unsigned i = (unsigned)(m - ld->cfg->maps), n = ld->n_map_places[i], base;
    const char *comma = strchr(value, ',');
    char device[CONFIG_NAME_MAX];
    size_t dl = comma ? (size_t)(comma - value) : 0;
    while (dl && (value[dl - 1] == ' ' || value[dl - 1] == '\t'))
        dl--;
    const char *b = comma ? comma + 1 : "";
    while (*b == ' ' || *b == '\t')
        b++;
    if (!comma || dl == 0 || dl >= sizeof device || config_parse_uint(b, 0, 65535, &base) != 0) {
        config_bad_value(ld, "device", value, "expected DEVICE, BASE (a device whose tags come from a template, "
                         "and the address 0..65535 its rows start at)");
        return false;
    }
    memcpy(device, value, dl);
    device[dl] = '\0';
    for (unsigned k = 0; k < n; k++) {
        if (strcmp(ld->map_places[i][k].device, device) == 0) {
            config_bad_value(ld, "device", value, "this device is placed already (a tag appears once per map)");
            return false;
        }
    }
    config_map_place_t *p = realloc(ld->map_places[i], (n + 1) * sizeof *p);
    if (!p) {
        config_bad_value(ld, "device", value, "out of memory");
        return false;
    }
    ld->map_places[i] = p;
    p[n] = (config_map_place_t){ .base = base, .line = ld->line };
    snprintf(p[n].device, sizeof p[n].device, "%s", device);
    ld->n_map_places[i] = n + 1;
    return true;
}

bool config_maps_set(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_map_t *m = ld->target;
    unsigned u;
    (void)number;
    if (strcmp(k->name, "entry") == 0)
        return add_row(ld, m, value);
    if (strcmp(k->name, "device") == 0)
        return add_place(ld, m, value);
    if (strcmp(k->name, "device_registers") == 0) {
        if (!value[0] || strlen(value) >= sizeof m->device_registers) {
            config_bad_value(ld, k->name, value, "expected a CSV file's name");
            return false;
        }
        snprintf(m->device_registers, sizeof m->device_registers, "%s", value);
        return true;
    }
    if (strcmp(k->name, "registers") == 0) {
        if (!value[0] || strlen(value) >= sizeof m->registers) {
            config_bad_value(ld, k->name, value, "expected a CSV file's name");
            return false;
        }
        snprintf(m->registers, sizeof m->registers, "%s", value);
    } else if (strcmp(k->name, "gaps") == 0) {
        if (strcmp(value, "zero") != 0 && strcmp(value, "exception") != 0) {
            config_bad_value(ld, k->name, value, "expected zero or exception");
            return false;
        }
        m->gaps_exception = value[0] == 'e';
    } else if (strcmp(k->name, "stale") == 0) {
        if (strcmp(value, "exception") != 0 && strcmp(value, "last") != 0) {
            config_bad_value(ld, k->name, value, "expected exception or last");
            return false;
        }
        m->stale_last = value[0] == 'l';
    } else {
        if (strcmp(value, "none") == 0) {
            m->quality_register = -1;
            return true;
        }
        if (config_parse_uint(value, 0, 65535, &u) != 0) {
            config_bad_value(ld, k->name, value, "expected a register address 0..65535 or none");
            return false;
        }
        m->quality_register = (int)u;
    }
    return true;
}

static int by_place(const void *pa, const void *pb)
{
    const config_map_entry_t *a = pa, *b = pb;
    if (a->area != b->area)
        return a->area < b->area ? -1 : 1;
    return a->address < b->address ? -1 : a->address > b->address;
}

/* One row of the scratch table as an entry, or false with the error reported. */
static bool entry_of(loader_t *ld, const config_map_t *m, const char *file, const tags_tag_t *g,
                     config_map_entry_t *e)
{
    const config_t *cfg = ld->cfg;
    int src = cfg->tags ? tags_table_find(cfg->tags, g->name) : -ENOENT;

    if (src < 0) {
        config_error_text(ld, "%s:%u: [map %s] name '%s': no such tag", file, g->line, m->name, g->name);
        return false;
    }
    const tags_tag_t *t = tags_table_tag(cfg->tags, (size_t)src);
    if (g->in_register) {
        config_error_text(ld, "%s:%u: [map %s] '%s': a bit of a register is not served; map the bool as a coil "
                          "or a discrete input", file, g->line, m->name, g->name);
        return false;
    }
    if ((g->type == TAGS_STRING || g->type == TAGS_RAW) && (t->type != g->type || t->count != g->count)) {
        config_error_text(ld, "%s:%u: [map %s] '%s': a %s entry serves its tag's words as read: the tag is %s:%u",
                          file, g->line, m->name, g->name, tags_type_name(g->type), tags_type_name(t->type),
                          t->count);
        return false;
    }
    if ((t->type == TAGS_STRING || t->type == TAGS_RAW) && t->type != g->type) {
        config_error_text(ld, "%s:%u: [map %s] '%s': a %s tag is served only as %s:%u", file, g->line, m->name,
                          g->name, tags_type_name(t->type), tags_type_name(t->type), t->count);
        return false;
    }
    *e = (config_map_entry_t){ .address = g->address, .count = g->count, .area = (uint8_t)g->area,
                               .type = (uint8_t)g->type, .order = (uint8_t)g->order, .point = g->point,
                               .scale = g->scale, .offset = g->offset, .line = g->line };
    snprintf(e->tag, sizeof e->tag, "%s", g->name);
    return true;
}

/* A registers CSV (a file's text, or the inline rows) into a scratch table of
 * one device named after the map; NULL with the errors reported. */
static tags_table_t *scratch(loader_t *ld, const config_map_t *m, const char *key, const char *path, const char *rows,
                             const char *file)
{
    char why[256];
    size_t len = 0;
    tags_errors_t te;
    char *text = rows ? strdup(rows) : config_read_confined(ld->source, path, MAP_FILE_MAX, &len, why, sizeof why);
    if (rows && text)
        len = strlen(text);
    if (!text) {
        config_error_at(ld, m->line, "[map %s] %s = '%s': %s", m->name, key, path, rows ? "out of memory" : why);
        return NULL;
    }
    tags_table_t *t = tags_table_new(CONFIG_MAP_ENTRIES_MAX);
    tags_device_defaults_t def = { .name = m->name, .order = TAGS_ORDER_ABCD, .interval_ms = 1000 };
    const char *refused = !t ? "out of memory" : memchr(text, 0, len) ? "a NUL byte (a registers file is text)" : NULL;
    int rc = refused ? -EINVAL : tags_load_csv_string(t, text, file, &def, 1, &te);
    free(text);
    if (refused)
        config_error_at(ld, m->line, "[map %s] %s = '%s': %s", m->name, key, path, refused);
    for (unsigned i = 0; !refused && rc < 0 && i < te.count; i++)
        config_error_text(ld, "%s", te.text[i]);
    if (rc < 0) {
        tags_table_free(t);
        return NULL;
    }
    return t;
}

/* device_registers' rows placed for each deviceN: DEVICE.ROW at BASE + address. */
static unsigned place_devices(loader_t *ld, config_map_t *m, const tags_table_t *rows, unsigned ok)
{
    unsigned i = (unsigned)(m - ld->cfg->maps);
    for (unsigned p = 0; p < ld->n_map_places[i]; p++) {
        const config_map_place_t *pl = &ld->map_places[i][p];
        for (size_t r = 0; r < tags_table_count(rows); r++) {
            tags_tag_t g = *tags_table_tag(rows, r);
            unsigned end = pl->base + g.address + g.count;
            int n = snprintf(g.name, sizeof g.name, "%s.%s", pl->device, tags_table_tag(rows, r)->name);
            if (n < 0 || (size_t)n >= sizeof g.name || end > 65536) {
                config_error_at(ld, pl->line, "[map %s] device = %s, %u: row '%s' (%s:%u) %s", m->name, pl->device,
                                pl->base, tags_table_tag(rows, r)->name, m->device_registers, g.line,
                                end > 65536 ? "ends past address 65535" : "makes a name longer than 47 bytes");
                continue;
            }
            g.address = (uint16_t)(pl->base + g.address);
            if (entry_of(ld, m, m->device_registers, &g, &m->entries[ok])) {
                m->entries[ok].per_device = true;
                ok++;
            }
        }
    }
    return ok;
}

/* The registers file (or the inline rows) of m, and its devices' rows, into its entries. */
static void load_registers(loader_t *ld, config_map_t *m)
{
    unsigned mi = (unsigned)(m - ld->cfg->maps), places = ld->n_map_places[mi];
    char *rows = ld->map_rows[mi];
    const char *file = rows ? ld->source : m->registers;
    if ((m->registers[0] && rows) || (!m->registers[0] && !rows && !m->device_registers[0])) {
        config_error_at(ld, m->line, "[map %s]: %s", m->name, rows ? "registers or entryN, not both"
                        : "registers (a CSV of the tags it serves), entryN or device_registers keys are required");
        return;
    }
    if (!m->device_registers[0] != !places) {
        config_error_at(ld, m->line, "[map %s]: device_registers and deviceN = DEVICE, BASE go together", m->name);
        return;
    }
    tags_table_t *t = m->registers[0] || rows ? scratch(ld, m, "registers", m->registers, rows, file) : NULL;
    tags_table_t *dt = places ? scratch(ld, m, "device_registers", m->device_registers, NULL, m->device_registers)
                              : NULL;
    if ((!t && (m->registers[0] || rows)) || (!dt && places)) {
        tags_table_free(t);
        tags_table_free(dt);
        return;
    }
    size_t n = (t ? tags_table_count(t) : 0) + (dt ? tags_table_count(dt) * places : 0);
    m->entries = n && n <= CONFIG_MAP_ENTRIES_MAX ? calloc(n, sizeof *m->entries) : NULL;
    if (n && !m->entries) {
        config_error_at(ld, m->line, "[map %s]: %s", m->name, n > CONFIG_MAP_ENTRIES_MAX ? "more than 65536 entries"
                                                                                       : "out of memory");
        tags_table_free(t);
        tags_table_free(dt);
        return;
    }
    unsigned ok = 0;
    for (size_t i = 0; t && i < tags_table_count(t); i++)
        ok += entry_of(ld, m, file, tags_table_tag(t, i), &m->entries[ok]);
    if (dt)
        ok = place_devices(ld, m, dt, ok);
    tags_table_free(t);
    tags_table_free(dt);
    m->entry_count = ok;
    qsort(m->entries, ok, sizeof *m->entries, by_place);
    for (unsigned i = 1; i < ok; i++) {
        const config_map_entry_t *a = &m->entries[i - 1], *b = &m->entries[i];
        if (a->area == b->area && (unsigned)a->address + a->count > b->address)
            config_error_text(ld, "%s:%u: [map %s] '%s' at %s %u overlaps '%s' (line %u) at %u..%u",
                              b->per_device ? m->device_registers : file, b->line, m->name, b->tag,
                              tags_area_name(b->area), b->address, a->tag, a->line, a->address,
                              a->address + a->count - 1);
    }
    for (unsigned i = 0; m->quality_register >= 0 && i < ok; i++) {
        const config_map_entry_t *e = &m->entries[i];
        if ((e->area == TAGS_AREA_HOLDING || e->area == TAGS_AREA_INPUT) &&
            (unsigned)m->quality_register >= e->address && (unsigned)m->quality_register < e->address + e->count)
            config_error_text(ld, "%s:%u: [map %s] '%s' at %s %u overlaps quality_register = %d",
                              e->per_device ? m->device_registers : file, e->line, m->name, e->tag,
                              tags_area_name(e->area), e->address, m->quality_register);
    }
}

/* Does a front end route unit u (explicitly, or by its default route to a device)? */
static const char *routed_by(const config_t *cfg, unsigned u, char *why, size_t cap)
{
    const config_tcp_t *fronts[2] = { &cfg->tcp, &cfg->rtu_tcp };
    const char *names[2] = { "tcp", "rtu_tcp" };
    for (unsigned f = 0; f < 2; f++) {
        if (fronts[f]->unit[u].set) {
            snprintf(why, cap, "[%s] unit%u routes it", names[f], u);
            return why;
        }
        for (unsigned d = 0; fronts[f]->enabled && u <= 247 && d < cfg->device_count; d++) {
            if (cfg->devices[d].bus == fronts[f]->default_bus && cfg->devices[d].slave == u) {
                snprintf(why, cap, "[%s]'s default route reaches [device %s] at slave %u", names[f],
                         cfg->devices[d].name, u);
                return why;
            }
        }
    }
    for (unsigned s = 0; s < cfg->serial_slave_count; s++) {
        if (cfg->serial_slaves[s].unit[u].set) {
            snprintf(why, cap, "[serial_slave %s] unit%u routes it", cfg->serial_slaves[s].name, u);
            return why;
        }
    }
    return NULL;
}

void config_maps_resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;
    char why[160];
    for (unsigned i = 0; i < cfg->map_count; i++) {
        config_map_t *m = &cfg->maps[i];
        if (!m->unit) {
            config_error_at(ld, m->line, "[map %s]: unit is required (1..255)", m->name);
        } else if (routed_by(cfg, m->unit, why, sizeof why)) {
            config_error_at(ld, m->line, "[map %s] unit = %u: %s; a map's unit must be its own", m->name, m->unit,
                            why);
        }
        for (unsigned j = 0; j < i; j++)
            if (m->unit && cfg->maps[j].unit == m->unit)
                config_error_at(ld, m->line, "[map %s] unit = %u: already [map %s]'s (line %u)", m->name, m->unit,
                                cfg->maps[j].name, cfg->maps[j].line);
        load_registers(ld, m);
    }
    /* The loader's scratch table costs ~300 bytes a row (a tag's whole
     * definition) for an entry kept in 80: a 10,000-row file's megabytes
     * are given back now rather than kept in the heap. */
    if (cfg->map_count)
        malloc_trim(0);
}
