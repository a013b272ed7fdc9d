/*
 * config/tags.c -- the tags part of the configuration: [tag NAME] sections,
 * the tag keys of [device NAME] (order, tags_file; the planner's limits are
 * plain keys of keys.c's device table), and the tags_file CSVs. Their keys
 * are in keys.c's tables like every other (so duplicates and unknown keys
 * are found the same way); their values are set and checked here.
 *
 * A [tag NAME] section's keys are parsed as they come, except `order`,
 * whose names depend on the type (which may come later), and `device`, a
 * name resolved once every device is read. When the whole file has been
 * read, the tags go into one table: the sections first, then the files. A
 * file named by several devices is read once, with all of them as its
 * defaults, so one plant-wide CSV can serve every device that names it.
 * Nothing is added when anything is wrong, and every problem is reported.
 *
 * [template NAME] is the other way to share a file: a register list whose
 * rows name no device, read once per device that says template = NAME, each
 * row becoming DEVICE.ROW. Names stay unique without a copy of the file per
 * device, and a device's tags are found by its own name. Defaults of a row
 * that leaves order or interval_ms empty: the device's key, else the
 * template's, else ABCD and 1000 ms. A bad template is reported once, not
 * once per device.
 */
#include "config/internal.h"
#include "expr/expr.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pending_tag {
    tags_tag_t tag;
    char device[CONFIG_NAME_MAX];
    char order[24];
    char address[24];            /* as written: read once the device's addressing is known */
    char *expr;                  /* a computed tag's expression (expr/), or NULL */
    char *inverse;               /* its inverse (a write through an input), or NULL */
    char inverse_target[TAGS_NAME_MAX];
    unsigned device_line, order_line, address_line;
    bool has_table, has_address, has_type, has_interval;
    bool bad;                    /* a key's value was refused: not added (nor reported again) */
} pending_tag_t;

typedef struct file_ref {
    char device[CONFIG_NAME_MAX];
    unsigned line;
} file_ref_t;

struct config_tags {
    pending_tag_t *tags;
    size_t n, cap;
    file_ref_t *files;           /* where each tags_file key was: grown as they are read */
    size_t n_files;
    unsigned files_cap;
};

config_tags_t *config_tags_new(void)
{
    return calloc(1, sizeof(config_tags_t));
}

void config_tags_free(config_tags_t *ct)
{
    if (!ct)
        return;
    for (size_t i = 0; i < ct->n; i++)
    {
        free(ct->tags[i].expr);
        free(ct->tags[i].inverse);
    }
    free(ct->tags);
    free(ct->files);
    free(ct);
}

void *config_tags_section(loader_t *ld, const char *name)
{
    config_tags_t *ct = ld->tags;
    if (strlen(name) >= TAGS_NAME_MAX) {
        config_error_at(ld, ld->header_line, "[tag %s]: a tag name is at most %d characters", name,
                        TAGS_NAME_MAX - 1);
        return NULL;
    }
    if (ct->n == ct->cap) {
        size_t cap = ct->cap ? 2 * ct->cap : 16;
        pending_tag_t *p = cap <= CONFIG_MAX_TAGS ? realloc(ct->tags, cap * sizeof *p) : NULL;
        if (!p) {
            config_error_at(ld, ld->header_line, "[tag %s]: more than %zu [tag] sections, or out of memory",
                            name, ct->cap);
            return NULL;
        }
        ct->tags = p;
        ct->cap = cap;
    }
    pending_tag_t *pt = &ct->tags[ct->n++];
    *pt = (pending_tag_t){ .tag = { .scale = 1, .interval_ms = 1000, .line = ld->header_line } };
    snprintf(pt->tag.name, sizeof pt->tag.name, "%s", name);
    return pt;
}

static int parse_number(const char *text, double *out, char *msg, size_t cap)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v)) {
        snprintf(msg, cap, "expected a finite number");
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int copy_text(const char *text, char *dst, size_t size, char *msg, size_t cap)
{
    if (strlen(text) >= size) {
        snprintf(msg, cap, "at most %zu bytes", size - 1);
        return -EINVAL;
    }
    strcpy(dst, text);
    return 0;
}

static int parse_interval(const char *text, unsigned *out, char *msg, size_t cap)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || errno || v < 1 || v > 86400000ul) {
        snprintf(msg, cap, "expected a whole number 1..86400000");
        return -EINVAL;
    }
    *out = (unsigned)v;
    return 0;
}

/* An expression's text (expr, inverse), kept until the tags are resolved. */
static int set_expression(char **dst, const char *value, char *msg, size_t cap)
{
    if (!*value || strlen(value) >= TAGS_EXPR_MAX) {
        snprintf(msg, cap, "expected an expression of 1..%d bytes", TAGS_EXPR_MAX - 1);
        return -EINVAL;
    }
    free(*dst);
    if (!(*dst = strdup(value))) {
        snprintf(msg, cap, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* One key of a [tag NAME] section into its pending tag; msg says why not. */
static int tag_key(pending_tag_t *pt, const char *key, const char *value, unsigned line, char *msg,
                   size_t cap)
{
    tags_tag_t *g = &pt->tag;
    unsigned u;

    if (strcmp(key, "device") == 0) {
        pt->device_line = line;
        return copy_text(value, pt->device, sizeof pt->device, msg, cap);
    }
    if (strcmp(key, "table") == 0) {
        int rc = tags_parse_area(value, &g->area, msg, cap);
        pt->has_table = rc == 0;
        return rc;
    }
    if (strcmp(key, "address") == 0) {
        pt->address_line = line;
        int rc = copy_text(value, pt->address, sizeof pt->address, msg, cap);
        pt->has_address = rc == 0;
        return rc;
    }
    if (strcmp(key, "type") == 0) {
        unsigned point;
        int rc = tags_parse_type_point(value, &g->type, &u, &point, msg, cap);
        if (rc == 0) {
            g->count = (uint16_t)u;
            g->point = (uint8_t)point;
            pt->has_type = true;
        }
        return rc;
    }
    if (strcmp(key, "order") == 0) {
        pt->order_line = line;
        return copy_text(value, pt->order, sizeof pt->order, msg, cap);
    }
    if (strcmp(key, "scale") == 0)
        return parse_number(value, &g->scale, msg, cap);
    if (strcmp(key, "offset") == 0)
        return parse_number(value, &g->offset, msg, cap);
    if (strcmp(key, "decimals") == 0)
        return tags_parse_decimals(value, &g->has_decimals, &g->decimals, msg, cap);
    if (strcmp(key, "deadband") == 0)
        return parse_number(value, &g->deadband, msg, cap);
    if (strcmp(key, "unit") == 0)
        return copy_text(value, g->unit, sizeof g->unit, msg, cap);
    if (strcmp(key, "description") == 0)
        return copy_text(value, g->description, sizeof g->description, msg, cap);
    if (strcmp(key, "writable") == 0)
        return tags_parse_bool(value, &g->writable, msg, cap);
    if (strcmp(key, "confirm_write") == 0)
        return tags_parse_confirm(value, &g->confirm_write, msg, cap);
    if (strcmp(key, "interval_ms") == 0) {
        pt->has_interval = true;
        return parse_interval(value, &g->interval_ms, msg, cap);
    }
    if (strcmp(key, "expr") == 0) {   /* compiled once every tag is known (config_tags_resolve) */
        g->computed = true;
        return set_expression(&pt->expr, value, msg, cap);
    }
    if (strcmp(key, "inverse") == 0)   /* compiled with the expression (expr/engine.c) */
        return set_expression(&pt->inverse, value, msg, cap);
    if (strcmp(key, "inverse_target") == 0)
        return copy_text(value, pt->inverse_target, sizeof pt->inverse_target, msg, cap);
    return -ENOENT;
}

/* Where a device's tags_file key is, for messages about that file. */
static void remember_file(config_tags_t *ct, const char *device, unsigned line)
{
    size_t i = 0;
    while (i < ct->n_files && strcmp(ct->files[i].device, device) != 0)
        i++;
    if (i == ct->n_files && config_grow((void **)&ct->files, sizeof *ct->files, NULL, 0, (unsigned)i, &ct->files_cap) != 0)
        return;   /* out of memory: its messages name the config file's line 0 */
    ct->n_files += i == ct->n_files;
    ct->files[i].line = line;
    snprintf(ct->files[i].device, sizeof ct->files[i].device, "%s", device);
}

bool config_tags_set(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    pending_tag_t *pt = ld->target;
    char msg[320] = "";
    (void)number;
    int rc = tag_key(pt, k->name, value, ld->line, msg, sizeof msg);
    if (rc < 0) {
        config_bad_value(ld, k->name, value, msg);
        pt->bad = true;
    }
    return rc == 0;
}

bool config_tags_set_device(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_device_t *dev = ld->target;
    char msg[320] = "";
    (void)number;
    if (strcmp(k->name, "order") == 0) {
        if (tags_parse_order(value, &dev->order, msg, sizeof msg) == 0)
            return dev->order_set = true;
    } else if (strcmp(k->name, "template") == 0) {
        if (config_valid_name(value)) {   /* resolved once every [template] is read */
            snprintf(dev->template_name, sizeof dev->template_name, "%s", value);
            return true;
        }
        snprintf(msg, sizeof msg, "expected the name of a [template NAME] section");
    } else if (!*value) {
        snprintf(msg, sizeof msg, "expected a file name");
    } else if (copy_text(value, dev->tags_file, sizeof dev->tags_file, msg, sizeof msg) == 0) {
        remember_file(ld->tags, dev->name, ld->line);
        return true;
    }
    config_bad_value(ld, k->name, value, msg);
    return false;
}

void *config_tags_new_template(loader_t *ld, const char *name, unsigned *first)
{
    config_t *cfg = ld->cfg;
    for (unsigned i = 0; i < cfg->template_count; i++)
        if (strcmp(cfg->templates[i].name, name) == 0) {
            *first = cfg->templates[i].line;
            return NULL;
        }
    if (cfg->template_count == CONFIG_MAX_TEMPLATES) {
        config_error_at(ld, ld->header_line, "[template %s]: more than %d templates", name, CONFIG_MAX_TEMPLATES);
        return NULL;
    }
    config_template_t *tp = &cfg->templates[cfg->template_count++];
    *tp = (config_template_t){ .line = ld->header_line };
    snprintf(tp->name, sizeof tp->name, "%s", name);
    return tp;
}

bool config_tags_set_template(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_template_t *tp = ld->target;
    char msg[320] = "";
    (void)number;
    if (strcmp(k->name, "order") == 0) {
        if (tags_parse_order(value, &tp->order, msg, sizeof msg) == 0)
            return tp->order_set = true;
    } else if (!*value) {
        snprintf(msg, sizeof msg, "expected a file name");
    } else if (copy_text(value, tp->tags_file, sizeof tp->tags_file, msg, sizeof msg) == 0) {
        tp->tags_file_line = ld->line;
        return true;
    }
    config_bad_value(ld, k->name, value, msg);
    return false;
}

bool config_tags_set_addressing(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    int mode = strcmp(value, "protocol") == 0 ? CONFIG_ADDRESSING_PROTOCOL
               : strcmp(value, "modicon") == 0 ? CONFIG_ADDRESSING_MODICON : -1;
    if (mode < 0) {
        config_bad_value(ld, k->name, value, "expected protocol (addresses from 0) or modicon (40101 is "
                         "holding register 100)");
        return false;
    }
    if (strcmp(ld->section, "gateway") == 0)
        ((config_t *)ld->target)->addressing = mode;
    else
        ((config_device_t *)ld->target)->addressing = mode;
    return true;
}

bool config_device_modicon(const config_t *cfg, const config_device_t *dev)
{
    return (dev->addressing >= 0 ? dev->addressing : cfg->addressing) == CONFIG_ADDRESSING_MODICON;
}

/* ---- once the file is read ---------------------------------------------------- */

static int device_index(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (strcmp(cfg->devices[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int by_name(const void *a, const void *b)
{
    const pending_tag_t *x = *(pending_tag_t *const *)a, *y = *(pending_tag_t *const *)b;
    int c = strcmp(x->tag.name, y->tag.name);
    return c ? c : (x->tag.line > y->tag.line) - (x->tag.line < y->tag.line);
}

/* A [tag NAME] given twice is reported at the second, whatever the first held. */
static void find_duplicates(loader_t *ld)
{
    config_tags_t *ct = ld->tags;
    pending_tag_t **sorted = malloc((ct->n + 1) * sizeof *sorted);
    if (!sorted) {
        config_error_at(ld, 0, "out of memory");
        return;
    }
    for (size_t i = 0; i < ct->n; i++)
        sorted[i] = &ct->tags[i];
    qsort(sorted, ct->n, sizeof *sorted, by_name);
    for (size_t i = 1; i < ct->n; i++)
        if (strcmp(sorted[i]->tag.name, sorted[i - 1]->tag.name) == 0) {
            size_t first = i - 1;
            while (first > 0 && strcmp(sorted[first - 1]->tag.name, sorted[i]->tag.name) == 0)
                first--;
            config_error_at(ld, sorted[i]->tag.line, "[tag %s]: section defined twice (first at line %u)",
                            sorted[i]->tag.name, sorted[first]->tag.line);
            sorted[i]->bad = true;
        }
    free(sorted);
}

/* One [tag NAME] section into t: its device, its order, the table's checks. */
static void add_section(loader_t *ld, const config_t *cfg, tags_table_t *t, pending_tag_t *pt)
{
    tags_tag_t *g = &pt->tag;
    char msg[320], section[CONFIG_NAME_MAX + 64];
    snprintf(section, sizeof section, "tag %s", g->name);
    /* its device is checked even when a key was refused (that key's error
     * says what is wrong with it): a tag wrong twice is told both */
    int d = pt->device[0] ? device_index(cfg, pt->device) : cfg->device_count == 1 ? 0 : -1;
    if (d < 0 && pt->device[0]) {
        config_error_at(ld, pt->device_line, "[%s] device = '%s': no such device", section, pt->device);
        return;
    }
    if (pt->bad)
        return;
    if (g->computed) {   /* its value is its expression's: no register, float64 unless it says */
        if (pt->has_table || pt->has_address)
            config_error_at(ld, g->line, "[%s]: a computed tag (expr) takes no table or address", section);
        else if (d < 0)
            config_error_at(ld, g->line, "[%s]: device is required (more than one device is configured)", section);
        else if (!pt->inverse && pt->inverse_target[0])
            config_error_at(ld, g->line, "[%s]: inverse_target without an inverse", section);
        else {
            g->type = pt->has_type ? g->type : TAGS_FLOAT64;
            int i = tags_table_add(t, g, cfg->devices[d].name, msg, sizeof msg);
            if (i < 0 || tags_table_set_expr(t, (size_t)i, pt->expr) < 0 ||
                (pt->inverse && tags_table_set_inverse(t, (size_t)i, pt->inverse, pt->inverse_target) < 0))
                config_error_at(ld, g->line, "[%s]: %s", section, i < 0 ? msg : "out of memory");
        }
        return;
    }
    if (pt->inverse || pt->inverse_target[0]) {
        config_error_at(ld, g->line, "[%s]: inverse and inverse_target belong to a computed tag (expr)", section);
        return;
    }
    bool modicon = d >= 0 && config_device_modicon(cfg, &cfg->devices[d]);
    if (d < 0 || (!pt->has_table && !modicon) || !pt->has_address || !pt->has_type) {
        config_error_at(ld, g->line, "[%s]: %s", section,
                        d < 0 ? "device is required (more than one device is configured)"
                        : modicon ? "address and type are required"
                                  : "table, address and type are required");
        return;
    }
    unsigned address;
    int bit;
    if (tags_parse_address_as(pt->address, modicon, pt->has_table, &g->area, &address, &bit, msg,
                              sizeof msg) < 0) {
        config_error_at(ld, pt->address_line, "[%s] address = '%s': %s", section, pt->address, msg);
        return;
    }
    g->address = (uint16_t)address;
    g->in_register = bit >= 0;
    g->bit = bit >= 0 ? (uint8_t)bit : 0;
    g->modicon = modicon;
    g->order = tags_device_order(cfg->devices[d].order, g->type);
    if (!pt->has_interval && cfg->devices[d].interval_ms)
        g->interval_ms = cfg->devices[d].interval_ms;
    if (pt->order[0] && tags_parse_order_for(pt->order, g->type, &g->order, msg, sizeof msg) < 0) {
        config_error_at(ld, pt->order_line, "[%s] order = '%s': %s", section, pt->order, msg);
        return;
    }
    if (tags_table_add(t, g, cfg->devices[d].name, msg, sizeof msg) < 0)
        config_error_at(ld, g->line, "[%s]: %s", section, msg);
}

/* dir of the config file + path, unless path is absolute or the source has no folder. */
void config_resolve_path(const char *source, const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(source, '/');
    if (path[0] == '/' || !slash)
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%.*s/%s", (int)(slash - source), source, path);
}

/* Whether two devices' tags_file are the same file ("tags.csv", "./tags.csv"). */
static bool same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb))
        return strcmp(ra, rb) == 0;
    return strcmp(a, b) == 0;
}

static unsigned file_line(const config_tags_t *ct, const char *device)
{
    for (size_t i = 0; i < ct->n_files; i++)
        if (strcmp(ct->files[i].device, device) == 0)
            return ct->files[i].line;
    return 0;
}

/* Where each file's tags start in the table, to name a tag's file later. */
typedef struct loaded_file {
    char path[2 * CONFIG_PATH_MAX];
    size_t first, end;
} loaded_file_t;

/* A tag file larger than this is refused (the API takes 4 MiB). */
#define TAGS_FILE_MAX (64u << 20)

/* The rows of a tags_file (value, as written) into t: read beneath the
 * configuration's folder (config/confine.c), so that no configuration
 * makes the daemon read a file elsewhere. LOAD_UNREADABLE with why when it
 * cannot be read (or lies outside); else the loader's result, its errors in te. */
#define LOAD_UNREADABLE INT_MIN
static int load_confined(loader_t *ld, tags_table_t *t, const char *value, const char *path,
                         const tags_device_defaults_t *defs, size_t n, tags_errors_t *te, char *why, size_t cap)
{
    size_t len;
    char *text = NULL, rel[PATH_MAX];
    if (ld->over && same_file(path, ld->over->path)) {
        /* the bytes a change would write, confined as the file on disk is */
        if (config_confine(ld->source, value, rel, sizeof rel, why, cap) != 0)
            return LOAD_UNREADABLE;
        if (ld->over->len > TAGS_FILE_MAX) {
            snprintf(why, cap, "larger than %u bytes", TAGS_FILE_MAX);
            return LOAD_UNREADABLE;
        }
        text = malloc(ld->over->len + 1);
        if (!text) {
            snprintf(why, cap, "out of memory");
            return LOAD_UNREADABLE;
        }
        memcpy(text, ld->over->text, ld->over->len);
        text[len = ld->over->len] = 0;
    } else {
        text = config_read_confined(ld->source, value, TAGS_FILE_MAX, &len, why, cap);
    }
    if (!text)
        return LOAD_UNREADABLE;
    int rc;
    if (memchr(text, 0, len)) {
        memset(te, 0, sizeof *te);
        snprintf(te->text[0], sizeof te->text[0], "%s: a NUL byte (a tag file is text)", path);
        te->count = te->total = 1;
        rc = -EINVAL;
    } else {
        rc = tags_load_csv_string(t, text, path, defs, n, te);
    }
    free(text);
    return rc;
}

/* The file of device i, with every device that names the same file as its defaults. */
static void load_file(loader_t *ld, const config_t *cfg, tags_table_t *t, unsigned i, bool *done,
                      tags_device_defaults_t *defs, loaded_file_t *lf)
{
    const config_device_t *dev = &cfg->devices[i];
    char other[2 * CONFIG_PATH_MAX];
    size_t n = 0;

    config_resolve_path(ld->source, dev->tags_file, lf->path, sizeof lf->path);
    for (unsigned j = i; j < cfg->device_count; j++) {
        if (!cfg->devices[j].tags_file[0] || done[j])
            continue;
        config_resolve_path(ld->source, cfg->devices[j].tags_file, other, sizeof other);
        if (!same_file(other, lf->path))
            continue;
        done[j] = true;
        defs[n++] = (tags_device_defaults_t){ cfg->devices[j].name, cfg->devices[j].order,
                                              cfg->devices[j].interval_ms, false,
                                              config_device_modicon(cfg, &cfg->devices[j]) };
    }
    lf->first = lf->end = tags_table_count(t);
    tags_errors_t *te = malloc(sizeof *te);
    if (!te) {
        config_error_at(ld, 0, "%s: out of memory", lf->path);
        return;
    }
    char why[2 * PATH_MAX];
    int rc = load_confined(ld, t, dev->tags_file, lf->path, defs, n, te, why, sizeof why);
    if (rc == LOAD_UNREADABLE) {
        config_error_at(ld, file_line(ld->tags, dev->name), "[device %s] tags_file = '%s': %s", dev->name,
                        dev->tags_file, why);
    } else if (rc < 0) {
        for (unsigned k = 0; k < te->count; k++)
            config_error_text(ld, "%s", te->text[k]);   /* each names the CSV's line and column */
        if (te->total > te->count)
            config_error_text(ld, "%s: %u more errors", lf->path, te->total - te->count);
    }
    lf->end = tags_table_count(t);
    free(te);
}

/* Device i's copy of its template's rows. A template that failed for one
 * device is not read again (*failed): its errors are the file's, the same for
 * every device, and one report of them is enough. */
static void load_template(loader_t *ld, const config_t *cfg, tags_table_t *t, unsigned i, bool *failed,
                          loaded_file_t *lf)
{
    const config_device_t *dev = &cfg->devices[i];
    const config_template_t *tp = &cfg->templates[dev->template_index];
    tags_device_defaults_t def = {
        .name = dev->name,
        .order = dev->order_set || !tp->order_set ? dev->order : tp->order,
        .interval_ms = dev->interval_ms ? dev->interval_ms : tp->interval_ms,
        .scoped = true,
        .modicon = config_device_modicon(cfg, dev),
    };

    config_resolve_path(ld->source, tp->tags_file, lf->path, sizeof lf->path);
    lf->first = lf->end = tags_table_count(t);
    if (*failed)
        return;
    tags_errors_t *te = malloc(sizeof *te);
    if (!te) {
        config_error_at(ld, 0, "%s: out of memory", lf->path);
        *failed = true;
        return;
    }
    char why[2 * PATH_MAX];
    int rc = load_confined(ld, t, tp->tags_file, lf->path, &def, 1, te, why, sizeof why);
    if (rc == LOAD_UNREADABLE) {
        config_error_at(ld, tp->tags_file_line, "[template %s] tags_file = '%s': %s", tp->name, tp->tags_file, why);
        *failed = true;
    } else if (rc < 0) {
        *failed = true;
        for (unsigned k = 0; k < te->count; k++)
            config_error_text(ld, "%s (template %s, for device %s)", te->text[k], tp->name, dev->name);
        if (te->total > te->count)
            config_error_text(ld, "%s: %u more errors", lf->path, te->total - te->count);
    }
    lf->end = tags_table_count(t);
    free(te);
}

/* A template no device uses is read and checked all the same (its own
 * order and interval, plain addressing, in a table of its own): the API
 * serves and replaces its file, so it must be a file check has seen. */
static void check_unused_template(loader_t *ld, const config_t *cfg, unsigned ti)
{
    const config_template_t *tp = &cfg->templates[ti];
    tags_device_defaults_t def = { .name = tp->name, .order = tp->order, .interval_ms = tp->interval_ms,
                                   .scoped = true, .modicon = false };
    char path[2 * CONFIG_PATH_MAX], why[2 * PATH_MAX];
    tags_table_t *t = tags_table_new(CONFIG_MAX_TAGS);
    tags_errors_t *te = malloc(sizeof *te);
    config_resolve_path(ld->source, tp->tags_file, path, sizeof path);
    if (!t || !te) {
        config_error_at(ld, 0, "%s: out of memory", path);
    } else {
        int rc = load_confined(ld, t, tp->tags_file, path, &def, 1, te, why, sizeof why);
        if (rc == LOAD_UNREADABLE) {
            config_error_at(ld, tp->tags_file_line, "[template %s] tags_file = '%s': %s", tp->name, tp->tags_file,
                            why);
        } else if (rc < 0) {
            for (unsigned k = 0; k < te->count; k++)
                config_error_text(ld, "%s (template %s, used by no device)", te->text[k], tp->name);
            if (te->total > te->count)
                config_error_text(ld, "%s: %u more errors", path, te->total - te->count);
        }
    }
    tags_table_free(t);
    free(te);
}

/* template = NAME of each device to an index; a template needs its file. */
static bool resolve_templates(loader_t *ld, config_t *cfg)
{
    bool any = false;
    for (unsigned i = 0; i < cfg->template_count; i++)
        if (!cfg->templates[i].tags_file[0])
            config_error_at(ld, cfg->templates[i].line, "[template %s]: tags_file is required (its register list)",
                            cfg->templates[i].name);
    for (unsigned i = 0; i < cfg->device_count; i++) {
        config_device_t *d = &cfg->devices[i];
        if (!d->template_name[0])
            continue;
        for (unsigned j = 0; j < cfg->template_count && d->template_index < 0; j++)
            if (strcmp(cfg->templates[j].name, d->template_name) == 0)
                d->template_index = (int)j;
        if (d->template_index < 0)
            config_error_at(ld, d->line, "[device %s] template = '%s': no such [template %s]", d->name,
                            d->template_name, d->template_name);
        else
            any = any || cfg->templates[d->template_index].tags_file[0];
    }
    return any;
}

static unsigned limit_of(const config_device_t *d, bool bits)
{
    return bits ? d->max_read_bits : d->max_read_registers;
}

/* A tag or poll group longer than one read of its device could never be read. */
static void check_limits(loader_t *ld, const config_t *cfg, const tags_table_t *t,
                         const loaded_file_t *files, size_t n_files, size_t n_sections)
{
    for (unsigned i = 0; i < cfg->poll_count; i++) {
        const config_poll_t *p = &cfg->polls[i];
        const config_device_t *d = &cfg->devices[p->device];
        if (p->device < cfg->device_count && p->count > limit_of(d, p->function <= 2))
            config_error_at(ld, p->line, "[poll %s] count = %u: more than [device %s] %s = %u", p->name,
                            p->count, d->name, p->function <= 2 ? "max_read_bits" : "max_read_registers",
                            limit_of(d, p->function <= 2));
    }
    for (size_t i = 0; t && i < tags_table_count(t); i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        int di = device_index(cfg, tags_table_device_name(t, g->device));
        bool bits = g->area == TAGS_AREA_COIL || g->area == TAGS_AREA_DISCRETE;
        if (di < 0 || g->count <= limit_of(&cfg->devices[di], bits))
            continue;
        const char *where = ld->source;
        for (size_t f = 0; i >= n_sections && f < n_files; f++)
            if (i >= files[f].first && i < files[f].end)
                where = files[f].path;
        config_error_text(ld, "%s:%u: tag %s: %u registers, more than [device %s] max_read_registers = %u", where,
                          g->line, g->name, g->count, cfg->devices[di].name, cfg->devices[di].max_read_registers);
    }
}

static void expr_error(void *ctx, const char *line)
{
    config_error_text(ctx, "%s", line);
}

/* The computed tags compiled once here, so that a wrong expression, an
 * unknown name or a cycle is a configuration error (FILE:LINE), and their
 * intervals are set from their inputs in the definitions the gateway copies. */
static void check_expressions(loader_t *ld, tags_table_t *t)
{
    bool any = false;
    for (size_t i = 0; i < tags_table_count(t) && !any; i++)
        any = tags_table_tag(t, i)->computed;
    if (!any)
        return;
    unsigned errors;
    expr_engine_t *e = expr_engine_new(t, NULL, ld->source, expr_error, ld, &errors);
    if (!e && errors == 0)
        config_error_at(ld, 0, "out of memory for the computed tags");
    expr_engine_free(e);
}

void config_tags_resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;
    config_tags_t *ct = ld->tags;
    /* Sized from the devices: a file read by many devices gets the
     * defaults of each (defs), and each device's file is read once (done). */
    bool *done = calloc(cfg->device_count + 1, sizeof *done), template_failed[CONFIG_MAX_TEMPLATES] = { false };
    tags_device_defaults_t *defs = calloc(cfg->device_count + 1, sizeof *defs);
    loaded_file_t *files = calloc(2 * cfg->device_count + 1, sizeof *files);
    size_t n_files = 0;
    tags_table_t *t = NULL;
    unsigned before = ld->errs->total;
    bool any_file = resolve_templates(ld, cfg);

    for (unsigned i = 0; i < cfg->device_count; i++)
        any_file = any_file || cfg->devices[i].tags_file[0];
    if (!files || !done || !defs || ((ct->n || any_file) && !(t = tags_table_new(CONFIG_MAX_TAGS)))) {
        config_error_at(ld, 0, "out of memory for the tags");
        free(files);
        free(done);
        free(defs);
        return;
    }
    find_duplicates(ld);
    for (size_t i = 0; i < ct->n; i++)
        add_section(ld, cfg, t, &ct->tags[i]);
    size_t n_sections = t ? tags_table_count(t) : 0;
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (cfg->devices[i].tags_file[0] && !done[i])
            load_file(ld, cfg, t, i, done, defs, &files[n_files++]);
    bool used[CONFIG_MAX_TEMPLATES] = { false };
    for (unsigned i = 0; i < cfg->device_count; i++) {
        int tp = cfg->devices[i].template_index;
        if (tp >= 0)
            used[tp] = true;
        if (tp >= 0 && cfg->templates[tp].tags_file[0])
            load_template(ld, cfg, t, i, &template_failed[tp], &files[n_files++]);
    }
    for (unsigned i = 0; i < cfg->template_count; i++)
        if (!used[i] && cfg->templates[i].tags_file[0])
            check_unused_template(ld, cfg, i);
    check_limits(ld, cfg, t, files, n_files, n_sections);
    free(files);
    free(done);
    free(defs);
    if (ld->errs->total == before && t)
        check_expressions(ld, t);
    if (ld->errs->total != before) {
        tags_table_free(t);
        return;
    }
    cfg->tags = t;
}

/* The daemon's reload says what check says (config.h): through here, as
 * daemon/ may call config/ but not tags/. */
unsigned config_lint(const config_t *cfg, tags_lint_fn warn, void *ctx)
{
    return cfg->tags ? tags_lint(cfg->tags, cfg->source, warn, ctx) : 0;
}
