/*
 * tags/csv.c -- tag files: RFC 4180 records, a header that names the
 * columns, one tag per row.
 *
 * The reader is a byte-at-a-time state machine over a FILE (fmemopen for
 * text in memory), so a record may span lines inside quotes and nothing
 * is ever read into an unbounded buffer: a physical line is at most
 * TAGS_CSV_LINE_MAX bytes, a record at most four of them, 32 fields.
 * Unquoted fields are trimmed of spaces and tabs (a hand-written file lines
 * its columns up); quoted fields are kept as they are.
 *
 * A broken record (an unterminated quote, a quote inside an unquoted field,
 * a line too long, a NUL byte) stops the load: after one the reader cannot
 * tell where the next record starts. A bad value only fails its row, so
 * one run reports every bad value of the file.
 */
#include "tags/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RECORD_MAX (4 * TAGS_CSV_LINE_MAX)
#define FIELDS_MAX 32

static const char *const column_names[TAGS_FIELD_COUNT] = {
    "name", "device", "table", "address", "type", "order", "scale",
    "offset", "unit", "deadband", "writable", "interval_ms", "description", "decimals",
    "confirm_write", "expr", "inverse", "inverse_target",
};

typedef struct field {
    size_t at, len;               /* in the record buffer */
    unsigned line, col;           /* where it starts */
    bool quoted;
} field_t;

typedef struct reader {
    FILE *f;
    const char *name;
    unsigned line, col;           /* of the next byte */
    char buf[RECORD_MAX + 1];
    size_t used;
    field_t fields[FIELDS_MAX];
    unsigned n_fields;
    tags_errors_t *errs;
    int first_error;
} reader_t;

static void report(reader_t *r, int code, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void report(reader_t *r, int code, unsigned line, unsigned col, const char *fmt, ...)
{
    tags_errors_t *e = r->errs;
    if (!r->first_error)
        r->first_error = code;
    if (e->count < TAGS_MAX_ERRORS) {
        char *out = e->text[e->count++];
        size_t cap = sizeof e->text[0];
        int n = snprintf(out, cap, "%s:%u:%u: ", r->name, line, col);
        va_list ap;
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < cap)
            vsnprintf(out + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    e->total++;
}

/* The next byte, keeping line and column. */
static int next(reader_t *r)
{
    int c = getc(r->f);
    if (c == '\n') {
        r->line++;
        r->col = 1;
    } else if (c != EOF) {
        r->col++;
    }
    return c;
}

static int peek(reader_t *r)
{
    int c = getc(r->f);
    if (c != EOF)
        ungetc(c, r->f);
    return c;
}

static int put(reader_t *r, int c)
{
    if (r->used >= RECORD_MAX) {
        report(r, -E2BIG, r->line, r->col, "record longer than %u bytes", RECORD_MAX);
        return -E2BIG;
    }
    r->buf[r->used++] = (char)c;
    return 0;
}

static int broken(reader_t *r, int c)
{
    if (c == '\0') {
        report(r, -EINVAL, r->line, r->col - 1, "NUL byte in the file");
        return -EINVAL;
    }
    if (r->col > TAGS_CSV_LINE_MAX + 1) {
        report(r, -E2BIG, r->line, TAGS_CSV_LINE_MAX, "line longer than %u bytes", TAGS_CSV_LINE_MAX);
        return -E2BIG;
    }
    return 0;
}

/* A quoted field, its opening quote read. 0 at its end (before the ',' or
 * line end that follows it), or an error. */
static int quoted(reader_t *r, field_t *f)
{
    for (;;) {
        int c = next(r), rc;
        if (c == EOF) {
            report(r, -EINVAL, f->line, f->col, "unterminated quote (the field opened here)");
            return -EINVAL;
        }
        if ((rc = broken(r, c)) < 0)
            return rc;
        if (c == '"') {
            if (peek(r) != '"')
                break;
            next(r);
        }
        if ((rc = put(r, c)) < 0)
            return rc;
    }
    int c = peek(r);
    if (c == '\r')
        c = (next(r), peek(r)) == '\n' ? '\n' : '\r';
    if (c != ',' && c != '\n' && c != EOF) {
        report(r, -EINVAL, r->line, r->col, "'%c' after a closing quote (a field is \"...\" "
               "followed by ',' or the line's end)", c);
        return -EINVAL;
    }
    return 0;
}

/* An unquoted field, up to (not including) the ',' or line end. */
static int unquoted(reader_t *r)
{
    for (;;) {
        int c = peek(r), rc;
        if (c == ',' || c == '\n' || c == EOF)
            return 0;
        next(r);
        if ((rc = broken(r, c)) < 0)
            return rc;
        if (c == '\r' && peek(r) == '\n')
            return 0;
        if (c == '"') {
            report(r, -EINVAL, r->line, r->col - 1, "quote inside an unquoted field (quote the "
                   "whole field and double the quote)");
            return -EINVAL;
        }
        if ((rc = put(r, c)) < 0)
            return rc;
    }
}

static void trim(reader_t *r, field_t *f)
{
    while (f->len && (r->buf[f->at] == ' ' || r->buf[f->at] == '\t')) {
        f->at++;
        f->len--;
        f->col++;
    }
    while (f->len && (r->buf[f->at + f->len - 1] == ' ' || r->buf[f->at + f->len - 1] == '\t'))
        f->len--;
}

/* One record into r->fields: 1, 0 at the end of the file, or an error. */
static int record(reader_t *r)
{
    r->used = 0;
    r->n_fields = 0;
    if (peek(r) == EOF)
        return 0;
    for (;;) {
        if (r->n_fields == FIELDS_MAX) {
            report(r, -E2BIG, r->line, r->col, "more than %u fields", FIELDS_MAX);
            return -E2BIG;
        }
        field_t *f = &r->fields[r->n_fields++];
        *f = (field_t){ .at = r->used, .line = r->line, .col = r->col };
        int rc;
        if (peek(r) == '"') {
            next(r);
            f->quoted = true;
            rc = quoted(r, f);
        } else {
            rc = unquoted(r);
        }
        if (rc < 0)
            return rc;
        f->len = r->used - f->at;
        if (put(r, '\0') < 0)
            return -E2BIG;
        if (!f->quoted) {
            trim(r, f);
            r->buf[f->at + f->len] = '\0';
        }
        int c = next(r);
        if (c != ',')
            return 1;   /* '\n' or EOF: the record ends */
    }
}

static const char *text_of(const reader_t *r, unsigned i)
{
    return r->buf + r->fields[i].at;
}

static bool blank(const reader_t *r)
{
    return r->n_fields == 1 && !r->fields[0].quoted && r->fields[0].len == 0;
}

/* ---- the header ----------------------------------------------------------- */

typedef struct layout {
    int column[TAGS_FIELD_COUNT];   /* field index of each column, -1: absent */
    unsigned width;                 /* fields a row must have */
} layout_t;

static int header(reader_t *r, layout_t *lay)
{
    for (unsigned k = 0; k < TAGS_FIELD_COUNT; k++)
        lay->column[k] = -1;
    lay->width = r->n_fields;
    for (unsigned i = 0; i < r->n_fields; i++) {
        const char *name = text_of(r, i);
        unsigned k = 0;
        while (k < TAGS_FIELD_COUNT && strcasecmp(name, column_names[k]) != 0)
            k++;
        if (k == TAGS_FIELD_COUNT)
            report(r, -EINVAL, r->fields[i].line, r->fields[i].col,
                   "unknown column '%s' (name, device, table, address, type, order, scale, offset, "
                   "unit, deadband, writable, interval_ms, description, decimals, confirm_write, expr, inverse, "
                   "inverse_target)", name);
        else if (lay->column[k] >= 0)
            report(r, -EINVAL, r->fields[i].line, r->fields[i].col, "column '%s' twice", name);
        else
            lay->column[k] = (int)i;
    }
    static const tags_field_t required[] = { TAGS_FIELD_NAME, TAGS_FIELD_TABLE, TAGS_FIELD_ADDRESS,
                                             TAGS_FIELD_TYPE };
    for (unsigned k = 0; k < 4; k++)
        if (lay->column[required[k]] < 0)
            report(r, -EINVAL, r->fields[0].line, 1, "the header has no '%s' column (name, table, "
                   "address and type are required)", column_names[required[k]]);
    return r->first_error;
}

/* ---- one row ---------------------------------------------------------------- */

typedef struct row {
    const tags_device_defaults_t *devices;
    size_t n_devices;
    const char *device;
    tags_tag_t tag;
    bool have_order;
    const char *order_text;
    bool modicon;                 /* the device's addressing */
    bool have_table;
} row_t;

/* The field of column k in the row ("" when the file has no such column). */
static const char *cell(const reader_t *r, const layout_t *lay, tags_field_t k)
{
    return lay->column[k] < 0 ? "" : text_of(r, (unsigned)lay->column[k]);
}

static void cell_error(reader_t *r, const layout_t *lay, tags_field_t k, int code, const char *why)
{
    unsigned line = r->fields[0].line, col = 1;
    if (lay->column[k] >= 0) {
        line = r->fields[lay->column[k]].line;
        col = r->fields[lay->column[k]].col;
    }
    report(r, code, line, col, "%s: %s", column_names[k], why);
}

static int copy_text(const char *text, char *out, size_t cap, char *msg, size_t mcap)
{
    size_t n = strlen(text);
    if (n >= cap)
        return tags_fail(msg, mcap, -E2BIG, "'%.40s%s' is longer than %zu bytes", text,
                         n > 40 ? "..." : "", cap - 1);
    memcpy(out, text, n + 1);
    return 0;
}

static int parse_number(const char *text, double dflt, double *out, char *msg, size_t cap)
{
    if (!*text) {
        *out = dflt;
        return 0;
    }
    char *end;
    *out = strtod(text, &end);
    if (end == text || *end || !isfinite(*out))
        return tags_fail(msg, cap, -EINVAL, "'%s' is not a finite number", text);
    return 0;
}

static int find_defaults(row_t *w, const char *name, char *msg, size_t cap)
{
    if (w->n_devices == 0) {
        w->device = name;
        return *name ? 0 : tags_fail(msg, cap, -EINVAL, "no device (a device column, or one "
                                     "device default)");
    }
    if (w->devices[0].scoped && *name)
        return tags_fail(msg, cap, -EINVAL, "'%s': a template's rows name no device (each device using "
                         "the template gets its own copy of every row)", name);
    if (!*name && w->n_devices == 1)
        name = w->devices[0].name;
    for (size_t i = 0; i < w->n_devices; i++)
        if (strcmp(w->devices[i].name, name) == 0) {
            w->device = w->devices[i].name;
            w->tag.order = w->devices[i].order;
            w->modicon = w->devices[i].modicon;
            w->tag.interval_ms = w->devices[i].interval_ms ? w->devices[i].interval_ms : 1000;
            return 0;
        }
    /* The caller's devices are those this file is read for, not every device
     * it knows: say so, so that a configured device missing here reads as
     * "not one of this file's" rather than as unknown. */
    if (!*name)
        return tags_fail(msg, cap, -EINVAL, "empty, and this file is read for %zu devices ('%s', ...): "
                         "name one, or make the file a template", w->n_devices, w->devices[0].name);
    char list[160] = "";
    size_t used = 0;
    for (size_t i = 0; i < w->n_devices && used < sizeof list - 1; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", w->devices[i].name);
    return tags_fail(msg, cap, -EINVAL, "device '%s' does not read this file (it is read for %s%s)", name,
                     list, used >= sizeof list - 1 ? "..." : "");
}

static int parse_interval(const char *text, unsigned *out, char *msg, size_t cap)
{
    if (!*text)
        return 0;
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || v < 1 || v > 86400000ul)
        return tags_fail(msg, cap, -EINVAL, "'%s' is not 1..86400000 ms", text);
    *out = (unsigned)v;
    return 0;
}

/* One column of the row into w; 0 or an error code (message in msg). */
static int parse_cell(row_t *w, tags_field_t k, const char *v, char *msg, size_t cap)
{
    tags_tag_t *g = &w->tag;
    unsigned u, count, point;
    int bit, rc;
    switch (k) {
    case TAGS_FIELD_NAME:
        if (w->n_devices == 1 && w->devices[0].scoped && *v) {
            /* device first (row()): w->device is set when the row is good so far */
            int n = snprintf(g->name, sizeof g->name, "%s.%s", w->devices[0].name, v);
            if (n < 0 || (size_t)n >= sizeof g->name)
                return tags_fail(msg, cap, -E2BIG, "'%s.%s' is longer than %zu bytes (device name and row "
                                 "name)", w->devices[0].name, v, sizeof g->name - 1);
            return 0;
        }
        return copy_text(v, g->name, sizeof g->name, msg, cap);
    case TAGS_FIELD_DEVICE: return find_defaults(w, v, msg, cap);
    case TAGS_FIELD_TABLE:
    case TAGS_FIELD_ADDRESS:
        if (g->computed && *v)
            return tags_fail(msg, cap, -EINVAL, "'%s': a computed tag (expr) is read from no register", v);
        if (g->computed)
            return 0;
        if (k == TAGS_FIELD_ADDRESS)
            break;
        if (w->modicon && !*v)
            return 0;   /* the Modicon address names it */
        rc = tags_parse_area(v, &g->area, msg, cap);
        w->have_table = rc == 0;
        return rc;
    case TAGS_FIELD_EXPR:
        return strlen(v) < TAGS_EXPR_MAX ? 0 : tags_fail(msg, cap, -E2BIG, "longer than %d bytes", TAGS_EXPR_MAX - 1);
    case TAGS_FIELD_INVERSE:
    case TAGS_FIELD_INVERSE_TARGET:
        if (*v && !g->computed)
            return tags_fail(msg, cap, -EINVAL, "'%s': an inverse belongs to a computed tag (expr)", v);
        return strlen(v) < (k == TAGS_FIELD_INVERSE ? TAGS_EXPR_MAX : TAGS_NAME_MAX)
                   ? 0 : tags_fail(msg, cap, -E2BIG, "'%s' is too long", v);
    default:
        break;
    }
    switch (k) {
    case TAGS_FIELD_ADDRESS:
        if ((rc = tags_parse_address_as(v, w->modicon, w->have_table, &g->area, &u, &bit, msg, cap)) == 0) {
            g->address = (uint16_t)u;
            g->in_register = bit >= 0;
            g->bit = bit >= 0 ? (uint8_t)bit : 0;
            g->modicon = w->modicon;
        }
        return rc;
    case TAGS_FIELD_TYPE:
        if (g->computed && !*v)
            v = "float64";   /* what an expression's number is */
        if ((rc = tags_parse_type_point(v, &g->type, &count, &point, msg, cap)) == 0) {
            g->count = (uint16_t)count;
            g->point = (uint8_t)point;
        }
        return rc;
    case TAGS_FIELD_ORDER:
        w->have_order = *v != '\0';
        w->order_text = v;
        return 0;   /* checked once the type is known */
    case TAGS_FIELD_SCALE: return parse_number(v, 1, &g->scale, msg, cap);
    case TAGS_FIELD_OFFSET: return parse_number(v, 0, &g->offset, msg, cap);
    case TAGS_FIELD_DEADBAND: return parse_number(v, 0, &g->deadband, msg, cap);
    case TAGS_FIELD_UNIT: return copy_text(v, g->unit, sizeof g->unit, msg, cap);
    case TAGS_FIELD_DESCRIPTION: return copy_text(v, g->description, sizeof g->description, msg, cap);
    case TAGS_FIELD_WRITABLE: return *v ? tags_parse_bool(v, &g->writable, msg, cap) : 0;
    case TAGS_FIELD_INTERVAL: return parse_interval(v, &g->interval_ms, msg, cap);
    case TAGS_FIELD_DECIMALS: return *v ? tags_parse_decimals(v, &g->has_decimals, &g->decimals, msg, cap) : 0;
    case TAGS_FIELD_CONFIRM: return *v ? tags_parse_confirm(v, &g->confirm_write, msg, cap) : 0;
    default: break;
    }
    return 0;
}

/* One row into a tag of t; errors are reported, and the row is then skipped. */
static void row(reader_t *r, const layout_t *lay, tags_table_t *t, const tags_device_defaults_t *devices,
                size_t n_devices)
{
    row_t w = { .devices = devices, .n_devices = n_devices };
    char msg[256];
    unsigned before = r->errs->total;

    if (r->n_fields != lay->width) {
        report(r, -EINVAL, r->fields[0].line, 1, "%u fields, the header has %u", r->n_fields,
               lay->width);
        return;
    }
    w.tag.interval_ms = 1000;
    /* device first: it brings the defaults the other columns may override */
    static const tags_field_t order[TAGS_FIELD_COUNT] = {
        TAGS_FIELD_DEVICE, TAGS_FIELD_NAME, TAGS_FIELD_TABLE, TAGS_FIELD_ADDRESS, TAGS_FIELD_TYPE,
        TAGS_FIELD_ORDER, TAGS_FIELD_SCALE, TAGS_FIELD_OFFSET, TAGS_FIELD_UNIT, TAGS_FIELD_DEADBAND,
        TAGS_FIELD_WRITABLE, TAGS_FIELD_INTERVAL, TAGS_FIELD_DESCRIPTION, TAGS_FIELD_DECIMALS,
        TAGS_FIELD_CONFIRM, TAGS_FIELD_EXPR, TAGS_FIELD_INVERSE, TAGS_FIELD_INVERSE_TARGET,
    };
    const char *expr = cell(r, lay, TAGS_FIELD_EXPR), *inverse = cell(r, lay, TAGS_FIELD_INVERSE);
    w.tag.computed = *expr != '\0';
    bool type_ok = true;
    for (unsigned i = 0; i < TAGS_FIELD_COUNT; i++) {
        int rc = parse_cell(&w, order[i], cell(r, lay, order[i]), msg, sizeof msg);
        if (rc < 0) {
            cell_error(r, lay, order[i], rc, msg);
            type_ok = type_ok && order[i] != TAGS_FIELD_TYPE;
        }
    }
    if (w.have_order && type_ok) {
        int rc = tags_parse_order_for(w.order_text, w.tag.type, &w.tag.order, msg, sizeof msg);
        if (rc < 0)
            cell_error(r, lay, TAGS_FIELD_ORDER, rc, msg);
    } else {
        w.tag.order = tags_device_order(w.tag.order, w.tag.type);
    }
    if (r->errs->total != before)
        return;
    w.tag.line = r->fields[0].line;
    tags_field_t at;
    int rc = tags_table_add_at(t, &w.tag, w.device, &at, msg, sizeof msg);
    if (rc < 0)
        cell_error(r, lay, at, rc, msg);
    else if (w.tag.computed && tags_table_set_expr(t, (size_t)rc, expr) < 0)
        cell_error(r, lay, TAGS_FIELD_EXPR, -ENOMEM, "out of memory");
    else if (*inverse && tags_table_set_inverse(t, (size_t)rc, inverse, cell(r, lay, TAGS_FIELD_INVERSE_TARGET)) < 0)
        cell_error(r, lay, TAGS_FIELD_INVERSE, -ENOMEM, "out of memory");
    else if (!*inverse && *cell(r, lay, TAGS_FIELD_INVERSE_TARGET))
        cell_error(r, lay, TAGS_FIELD_INVERSE_TARGET, -EINVAL, "inverse_target without an inverse");
}

static int load(reader_t *r, tags_table_t *t, const tags_device_defaults_t *devices, size_t n_devices)
{
    layout_t lay;
    int rc;
    size_t keep = tags_table_count(t);

    if (tags_table_set_source(t, r->name) < 0)
        return -ENOMEM;
    if (peek(r) == 0xEF) {   /* a UTF-8 byte order mark, as spreadsheets write */
        int b1 = getc(r->f), b2 = getc(r->f), b3 = getc(r->f);
        if (b1 != 0xEF || b2 != 0xBB || b3 != 0xBF) {
            report(r, -EINVAL, 1, 1, "the file starts with a broken byte order mark");
            goto done;
        }
    }
    while ((rc = record(r)) == 1 && blank(r))
        ;
    if (rc == 0)
        report(r, -EINVAL, r->line, 1, "no header row (an empty file)");
    if (rc <= 0 || header(r, &lay) < 0)
        goto done;
    while ((rc = record(r)) == 1)
        if (!blank(r))
            row(r, &lay, t, devices, n_devices);
done:
    tags_table_set_source(t, NULL);
    if (r->first_error) {
        tags_table_truncate(t, keep);
        return r->first_error;
    }
    return (int)(tags_table_count(t) - keep);
}

static int load_stream(FILE *f, const char *name, tags_table_t *t, const tags_device_defaults_t *devices,
                       size_t n_devices, tags_errors_t *errs)
{
    reader_t *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(f);
        return -ENOMEM;
    }
    r->f = f;
    r->name = name;
    r->line = 1;
    r->col = 1;
    r->errs = errs;
    int rc = load(r, t, devices, n_devices);
    if (ferror(f) && rc >= 0) {
        report(r, -EIO, r->line, r->col, "read error");
        tags_table_truncate(t, tags_table_count(t) - (size_t)rc);
        rc = -EIO;
    }
    fclose(f);
    free(r);
    return rc;
}

int tags_load_csv(tags_table_t *t, const char *path, const tags_device_defaults_t *devices,
                  size_t n_devices, tags_errors_t *errs)
{
    memset(errs, 0, sizeof *errs);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int code = -errno;
        snprintf(errs->text[0], sizeof errs->text[0], "%s: %s", path, strerror(-code));
        errs->count = errs->total = 1;
        return code;
    }
    return load_stream(f, path, t, devices, n_devices, errs);
}

int tags_load_csv_string(tags_table_t *t, const char *text, const char *name,
                         const tags_device_defaults_t *devices, size_t n_devices, tags_errors_t *errs)
{
    memset(errs, 0, sizeof *errs);
    size_t len = strlen(text);
    /* fmemopen refuses a size of 0; an empty text is read as one with no header */
    FILE *f = len ? fmemopen((void *)text, len, "rb") : fmemopen((void *)"\n", 1, "rb");
    if (!f)
        return -errno;
    return load_stream(f, name, t, devices, n_devices, errs);
}
