/*
 * parser/hex.c -- hex text to bytes, as people paste it from bus monitors:
 * "01 03 02 44 CB", "01:03:02", "01-03-02" or "010302".
 */
#include "parser/internal.h"

#include <errno.h>

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool is_separator(char c)
{
    return c == ' ' || c == '\t' || c == ':' || c == '-';
}

int rtu_hex_parse(const char *text, uint8_t *out, size_t cap, size_t *bad_col)
{
    size_t n = 0;
    int high = -1;   /* first digit of a byte still waiting for its second */

    for (size_t i = 0; text[i] && text[i] != '\n' && text[i] != '\r'; i++) {
        int d = hex_digit(text[i]);
        if (d < 0) {
            /* A separator only between bytes, never inside one. */
            if (is_separator(text[i]) && high < 0)
                continue;
            if (bad_col)
                *bad_col = i + 1;
            return -EINVAL;
        }
        if (high < 0) {
            high = d;
            continue;
        }
        if (n >= cap)
            return -ENOSPC;
        out[n++] = (uint8_t)(high << 4 | d);
        high = -1;
    }
    if (high >= 0) {
        if (bad_col)
            *bad_col = 0;
        return -EINVAL;
    }
    return (int)n;
}
