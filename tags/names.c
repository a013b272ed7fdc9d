/*
 * tags/names.c -- the names of tables and qualities, and the parsers the CSV
 * loader and the config share (types and orders: tags/types.c). Names are
 * matched without regard to case; every refusal names the value and what
 * would be accepted.
 */
#include "tags/internal.h"
#include "parser/rtu.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tags_fail(char *msg, size_t cap, int code, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

bool tags_name_ok(const char *name, size_t max)
{
    size_t n = strlen(name);
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-", name[i]))
            return false;
    return true;
}

static const char *const area_names[] = { "coil", "discrete", "holding", "input" };

int tags_parse_area(const char *text, tags_area_t *area, char *msg, size_t cap)
{
    int t = rtu_table_parse(text);   /* the one parser, shared with the simulator's --load */
    if (t >= 0) {
        *area = (tags_area_t)t;
        return 0;
    }
    return tags_fail(msg, cap, -EINVAL, "unknown table '%s' (" RTU_TABLE_NAMES ")", text);
}

/* A decimal number without sign or spaces, within [min, max]. */
int tags_parse_decimal(const char *text, unsigned long min, unsigned long max, unsigned long *out)
{
    if (*text < '0' || *text > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int tags_parse_address(const char *text, unsigned *address, int *bit, char *msg, size_t cap)
{
    const char *dot = strchr(text, '.');
    char head[16];
    size_t len = dot ? (size_t)(dot - text) : strlen(text);
    unsigned long v, b = 0;
    int rc = -EINVAL;

    if (len > 0 && len < sizeof head) {
        memcpy(head, text, len);
        head[len] = '\0';
        if (head[0] == '0' && (head[1] == 'x' || head[1] == 'X')) {
            const char *digits = head + 2;
            size_t n = strspn(digits, "0123456789abcdefABCDEF");
            v = strtoul(digits, NULL, 16);
            rc = n > 0 && n <= 4 && digits[n] == '\0' ? 0 : -EINVAL;
        } else {
            rc = tags_parse_decimal(head, 0, 65535, &v);
        }
    }
    if (rc < 0)
        return tags_fail(msg, cap, -EINVAL, "address '%s' is not 0..65535 (decimal, or hex 0x...)", text);
    if (dot) {
        if (!bit)
            return tags_fail(msg, cap, -EINVAL, "address '%s': no bit here", text);
        if (tags_parse_decimal(dot + 1, 0, 15, &b) < 0)
            return tags_fail(msg, cap, -EINVAL, "address '%s': the bit after '.' is 0..15", text);
    }
    *address = (unsigned)v;
    if (bit)
        *bit = dot ? (int)b : -1;
    return 0;
}

int tags_parse_bool(const char *text, bool *value, char *msg, size_t cap)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };
    for (unsigned i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *value = true;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *value = false;
            return 0;
        }
    }
    return tags_fail(msg, cap, -EINVAL, "'%s' is not a bool (true/false, yes/no, on/off, 1/0)", text);
}

const char *tags_area_name(tags_area_t area)
{
    return (unsigned)area < 4 ? area_names[area] : "?";
}

const char *tags_reason_name(tags_reason_t reason)
{
    static const char *const names[] = { "", "not read yet", "exception", "timeout", "port down",
                                         "short answer", "bad data", "expression", "input" };
    return (unsigned)reason < sizeof names / sizeof names[0] ? names[reason] : "?";
}

const char *tags_quality_name(tags_quality_t quality)
{
    static const char *const names[] = { "good", "bad", "stale" };
    return (unsigned)quality < 3 ? names[quality] : "?";
}

