/*
 * tags/internal.h -- shared between tags/'s own files only.
 */
#ifndef RTUGW_TAGS_INTERNAL_H
#define RTUGW_TAGS_INTERNAL_H

#include "tags/tags.h"

#include <stdarg.h>

/* Writes one message line into msg (when not NULL) and returns code. */
int tags_fail(char *msg, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Names of devices and tags: 1..max-1 bytes of [A-Za-z0-9_.:/-]. */
bool tags_name_ok(const char *name, size_t max);

/* The parts of a tag, in the CSV's column order: which one a refusal is about. */
typedef enum tags_field {
    TAGS_FIELD_NAME = 0, TAGS_FIELD_DEVICE, TAGS_FIELD_TABLE, TAGS_FIELD_ADDRESS, TAGS_FIELD_TYPE,
    TAGS_FIELD_ORDER, TAGS_FIELD_SCALE, TAGS_FIELD_OFFSET, TAGS_FIELD_UNIT, TAGS_FIELD_DEADBAND,
    TAGS_FIELD_WRITABLE, TAGS_FIELD_INTERVAL, TAGS_FIELD_DESCRIPTION,
} tags_field_t;
#define TAGS_FIELD_COUNT 13

/* tags_table_add that also says which part of the tag a refusal is about. */
int tags_table_add_at(tags_table_t *t, const tags_tag_t *tag, const char *device, tags_field_t *field,
                      char *msg, size_t cap);

/* Removes every tag from index `keep` on (a CSV load that failed). */
void tags_table_truncate(tags_table_t *t, size_t keep);
/* Where tag i came from, for "already defined at" messages; NULL for code. */
const char *tags_table_source(const tags_table_t *t, size_t index);
/* The file name later tags_table_add calls are stamped with (NULL: none). */
int tags_table_set_source(tags_table_t *t, const char *source);
/* The value slot of tag i, and the words behind a string or raw value. */
tags_value_t *tags_table_slot(tags_table_t *t, size_t index);
uint16_t *tags_table_words(tags_table_t *t, size_t index);
/* The engineering value last counted as a change (NaN: none yet). */
double *tags_table_reported(tags_table_t *t, size_t index);

/* values.c: decode tag i from words (its first register first; a bit: one word 0/1) and
 * store it, good, at now_ms. True when it changed (tags_table_apply's rule). */
bool tags_store_value(tags_table_t *t, size_t i, const uint16_t *words, int64_t now_ms);

#endif
