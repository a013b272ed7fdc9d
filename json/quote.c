/*
 * json/quote.c -- json_quote(): RFC 8259 string escaping with UTF-8
 * validation (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF). An invalid byte is replaced by U+FFFD, one per byte, so the
 * output is always valid UTF-8 and a reader sees where the damage was.
 */
#include "json/json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct out {
    char *dst;
    size_t cap, len;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, o->len++)
        if (o->len + 1 < o->cap)
            o->dst[o->len] = s[i];
}

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    uint32_t cp, min;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

size_t json_quote(char *dst, size_t cap, const char *src)
{
    out_t o = { dst, cap, 0 };
    const unsigned char *p = (const unsigned char *)src;
    size_t n = strlen(src);
    size_t done = 0;   /* output length after the last whole character */

    put(&o, "\"", 1);
    done = o.len;
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t len = utf8_len(p + i, n - i);
        if (len == 0) {
            put(&o, "\\ufffd", 6);
            i++;
        } else if (p[i] == '"' || p[i] == '\\') {
            esc[0] = '\\';
            esc[1] = (char)p[i];
            put(&o, esc, 2);
            i++;
        } else if (p[i] < 0x20 || p[i] == 0x7F) {
            snprintf(esc, sizeof esc, "\\u%04x", p[i]);
            put(&o, esc, 6);
            i++;
        } else {
            put(&o, (const char *)p + i, len);
            i += len;
        }
        if (o.len + 2 <= cap)
            done = o.len;
    }
    put(&o, "\"", 1);
    if (cap) {
        if (o.len < cap) {
            dst[o.len] = 0;
        } else if (cap >= 3) {   /* cut at a whole character, still a valid string */
            dst[done] = '"';
            dst[done + 1] = 0;
        } else {
            dst[0] = 0;
        }
    }
    return o.len;
}
