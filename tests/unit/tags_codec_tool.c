/*
 * tests/unit/tags_codec_tool.c -- the tags codec on stdin/stdout, for
 * tests/unit/test_tags_codec.py to hold against Python's struct module.
 *
 * One request a line, one answer a line:
 *   decode TYPE ORDER SCALE OFFSET W1 W2 ...  -> ok RAW ENG
 *   encode TYPE ORDER SCALE OFFSET VALUE      -> ok W1 W2 ... | refused CODE MESSAGE
 *   text   TYPE ORDER SCALE OFFSET HEXBYTES   -> the same, through tags_encode_text
 *   format TYPE ORDER SCALE OFFSET W1 W2 ...  -> ok TEXT (tags_format of the decoded value)
 * A write of one byte of a register (int8h ...) answers the byte's mask and
 * bits: "ok WORD mask MASK" (tags_write_merge's inputs); a BCD that is no BCD
 * decodes to "ok bad bad data".
 * TYPE as in a CSV, plus bool:N for bit N of a register; ORDER a name or
 * '-'; numbers in any form strtod reads (Python sends float.hex()); words
 * in hex. RAW is exact: integers in decimal, floats and ENG in C's %a,
 * bool 0/1, strings as the hex of their text, raw as hex words; ENG is '-'
 * for strings and raw. A line the tool cannot read is answered "error ...".
 */
#include "tags/tags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS_MAX TAGS_MAX_REGISTERS

static int make_tag(tags_table_t *t, char *type, const char *order, const char *scale,
                    const char *offset, const tags_tag_t **out, char *msg, size_t cap)
{
    tags_tag_t g = { .name = "t", .area = TAGS_AREA_HOLDING, .writable = true, .interval_ms = 1000 };
    unsigned count, point;
    if (strncmp(type, "bool:", 5) == 0) {
        g.type = TAGS_BOOL;
        g.in_register = true;
        g.bit = (uint8_t)atoi(type + 5);
    } else if (tags_parse_type_point(type, &g.type, &count, &point, msg, cap) < 0) {
        return -1;
    } else {
        g.count = (uint16_t)count;
        g.point = (uint8_t)point;
    }
    if (strcmp(order, "-") != 0 && tags_parse_order_for(order, g.type, &g.order, msg, cap) < 0)
        return -1;
    g.scale = strtod(scale, NULL);
    g.offset = strtod(offset, NULL);
    int i = tags_table_add(t, &g, "dev", msg, cap);
    if (i < 0)
        return -1;
    *out = tags_table_tag(t, (size_t)i);
    return 0;
}

static void print_decoded(const tags_tag_t *tag, const tags_value_t *v)
{
    printf("ok ");
    switch (tag->type) {
    case TAGS_BOOL: printf("%d %a\n", v->raw.b, v->eng); return;
    case TAGS_INT16: case TAGS_INT32: case TAGS_INT64: printf("%" PRId64, v->raw.i); break;
    case TAGS_UINT16: case TAGS_UINT32: case TAGS_UINT64: printf("%" PRIu64, v->raw.u); break;
    case TAGS_FLOAT32: case TAGS_FLOAT64: printf("%a", v->raw.f); break;
    case TAGS_FLOAT16: printf("%a", v->raw.f); break;
    case TAGS_BCD16: case TAGS_BCD32: case TAGS_UINT8H: case TAGS_UINT8L: case TAGS_UFIXED16:
    case TAGS_UFIXED32:
        if (v->quality == TAGS_BAD) {
            printf("bad %s\n", tags_reason_name(v->reason));
            return;
        }
        printf("%" PRIu64, v->raw.u);
        break;
    case TAGS_INT8H: case TAGS_INT8L: case TAGS_FIXED16: case TAGS_FIXED32: printf("%" PRId64, v->raw.i); break;
    case TAGS_STRING: {
        char text[2 * WORDS_MAX + 1];
        size_t n = tags_string_text(tag, v, text, sizeof text);
        for (size_t i = 0; i < n; i++)
            printf("%02x", (unsigned char)text[i]);
        printf("%s -\n", n ? "" : "-");
        return;
    }
    case TAGS_RAW:
        for (unsigned i = 0; i < v->n_words; i++)
            printf("%s%04x", i ? "," : "", v->words[i]);
        printf(" -\n");
        return;
    }
    printf(" %a\n", v->eng);
}

static void print_write(int rc, const tags_write_t *w, const char *msg)
{
    if (rc < 0) {
        printf("refused %d %s\n", -rc, msg);
        return;
    }
    printf("ok");
    for (unsigned i = 0; i < w->count; i++)
        printf(" %04x", w->words[i]);
    if (w->needs_read)
        printf(" mask %04x", w->mask);
    printf("\n");
}

/* Hex pairs back into text (at most cap - 1 bytes). */
static int unhex(const char *hex, char *out, size_t cap)
{
    size_t n = strlen(hex);
    if (strcmp(hex, "-") == 0)
        n = 0;
    if (n % 2 || n / 2 >= cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned b;
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return -1;
        out[i] = (char)b;
    }
    out[n / 2] = '\0';
    return 0;
}

static void answer(char *line)
{
    char *argv[4 + WORDS_MAX + 1], *save = NULL, msg[256];
    int argc = 0;
    for (char *tok = strtok_r(line, " \t\r\n", &save); tok && argc < (int)(sizeof argv / sizeof *argv);
         tok = strtok_r(NULL, " \t\r\n", &save))
        argv[argc++] = tok;
    if (argc < 6) {
        printf("error too few fields\n");
        return;
    }
    tags_table_t *t = tags_table_new(1);
    const tags_tag_t *tag;
    if (make_tag(t, argv[1], argv[2], argv[3], argv[4], &tag, msg, sizeof msg) < 0) {
        printf("error %s\n", msg);
    } else if (strcmp(argv[0], "decode") == 0) {
        uint16_t words[WORDS_MAX];
        int n = argc - 5;
        for (int i = 0; i < n; i++)
            words[i] = (uint16_t)strtoul(argv[5 + i], NULL, 16);
        if (n != tag->count) {
            printf("error %d words for %u registers\n", n, tag->count);
        } else {
            tags_value_t v = { .quality = TAGS_GOOD };
            tags_decode(tag, words, &v);
            print_decoded(tag, &v);
        }
    } else if (strcmp(argv[0], "format") == 0) {
        uint16_t words[WORDS_MAX];
        char text[6 * WORDS_MAX + 8];
        int n = argc - 5;
        for (int i = 0; i < n && i < WORDS_MAX; i++)
            words[i] = (uint16_t)strtoul(argv[5 + i], NULL, 16);
        tags_value_t v = { .quality = TAGS_GOOD };
        if (n != tag->count) {
            printf("error %d words for %u registers\n", n, tag->count);
        } else {
            tags_decode(tag, words, &v);
            tags_format(tag, &v, text, sizeof text);
            printf("ok %s\n", text);
        }
    } else if (strcmp(argv[0], "encode") == 0) {
        tags_write_t w;
        int rc = tags_encode_number(tag, strtod(argv[5], NULL), TAGS_WRITE_MULTIPLE, &w, msg, sizeof msg);
        print_write(rc, &w, msg);
    } else if (strcmp(argv[0], "text") == 0) {
        char text[1024];
        tags_write_t w;
        if (unhex(argv[5], text, sizeof text) < 0) {
            printf("error bad hex\n");
        } else {
            int rc = tags_encode_text(tag, text, TAGS_WRITE_MULTIPLE, &w, msg, sizeof msg);
            print_write(rc, &w, msg);
        }
    } else {
        printf("error unknown request '%s'\n", argv[0]);
    }
    tags_table_free(t);
}

int main(void)
{
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        answer(line);
        fflush(stdout);
    }
    return 0;
}
