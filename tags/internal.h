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

/* A decimal number without sign or spaces, within [min, max]; -EINVAL if not. */
int tags_parse_decimal(const char *text, unsigned long min, unsigned long max, unsigned long *out);

/* What a type's raw value is, for the codec and the table (tags/types.c). */
typedef enum tags_kind {
    TAGS_KIND_OTHER = 0,         /* bool, string, raw */
    TAGS_KIND_SIGNED,            /* raw.i, an integer */
    TAGS_KIND_UNSIGNED,          /* raw.u, an integer (BCD: its decimal value) */
    TAGS_KIND_FIXED_SIGNED,      /* raw.i, the integer before the point */
    TAGS_KIND_FIXED_UNSIGNED,    /* raw.u, the same */
    TAGS_KIND_FLOAT,             /* raw.f */
} tags_kind_t;
tags_kind_t tags_type_kind(tags_type_t type);
/* raw.i holds it: the signed integers and signed fixed-point. */
bool tags_type_signed(tags_type_t type);
/* An integer type (BCD and the bytes too) with scale 1 and offset 0: its text is the integer. */
bool tags_exact_integer(const tags_tag_t *tag);
/* round(): half away from zero, exactly, without libm (tags/numbers.c). */
double tags_round_half_away(double v);

/* tags/numbers.c: BCD, float16 and fixed-point, exactly. */
double tags_pow10(unsigned point);
/* 0, or -EINVAL for a nibble above 9. */
int tags_bcd_decode(uint64_t bits, unsigned digits, uint64_t *value);
uint64_t tags_bcd_encode(uint64_t value);
double tags_half_to_double(uint16_t h);
/* Nearest, ties to even; beyond 65504 rounds to infinity (the caller refuses it). */
uint16_t tags_double_to_half(double x);
/* "1450.30": magnitude 145030, point 2. snprintf's return. */
int tags_format_fixed(uint64_t magnitude, bool negative, unsigned point, char *buf, size_t cap);
/* Plain decimal text times 10^point, rounded half away from zero: 0, -EINVAL, -ERANGE. */
int tags_parse_fixed(const char *text, unsigned point, bool *negative, uint64_t *magnitude);

/* Names of devices and tags: 1..max-1 bytes of [A-Za-z0-9_.:/-]. */
bool tags_name_ok(const char *name, size_t max);

/* The parts of a tag, in the CSV's column order: which one a refusal is about. */
typedef enum tags_field {
    TAGS_FIELD_NAME = 0, TAGS_FIELD_DEVICE, TAGS_FIELD_TABLE, TAGS_FIELD_ADDRESS, TAGS_FIELD_TYPE,
    TAGS_FIELD_ORDER, TAGS_FIELD_SCALE, TAGS_FIELD_OFFSET, TAGS_FIELD_UNIT, TAGS_FIELD_DEADBAND,
    TAGS_FIELD_WRITABLE, TAGS_FIELD_INTERVAL, TAGS_FIELD_DESCRIPTION, TAGS_FIELD_DECIMALS,
    TAGS_FIELD_CONFIRM, TAGS_FIELD_EXPR, TAGS_FIELD_INVERSE, TAGS_FIELD_INVERSE_TARGET,
} tags_field_t;
#define TAGS_FIELD_COUNT 18

/* tags_table_add that also says which part of the tag a refusal is about. */
int tags_table_add_at(tags_table_t *t, const tags_tag_t *tag, const char *device, tags_field_t *field,
                      char *msg, size_t cap);

/* Removes every tag from index `keep` on (a CSV load that failed). */
void tags_table_truncate(tags_table_t *t, size_t keep);
/* The file name later tags_table_add calls are stamped with (NULL: none). */
int tags_table_set_source(tags_table_t *t, const char *source);
/* The value slot of tag i, and the words behind a string or raw value. */
tags_value_t *tags_table_slot(tags_table_t *t, size_t index);
uint16_t *tags_table_words(tags_table_t *t, size_t index);
/* The engineering value last counted as a change (NaN: none yet). */
double *tags_table_reported(tags_table_t *t, size_t index);
/* Tells the table's store listener (tags_table_on_store) that tag i was stored. */
void tags_table_stored(tags_table_t *t, size_t index);
/* The note of computed tag i (NULL clears it). */
void tags_table_set_note(tags_table_t *t, size_t index, const char *note);

/* changes.c: the table's change numbers (tags.h, "changes"). Kept in the
 * table; its per-tag arrays grow with the table's others (table.c). */
#define TAGS_CHANGE_RING 2048    /* the last changes remembered in order (a power of two) */
typedef struct tags_changes {
    uint64_t seq;                /* the last change number given */
    int64_t next_stale;          /* no stale_at is below it: a sweep before it has nothing to do */
    unsigned ring[TAGS_CHANGE_RING];   /* ring[s % RING]: the tag that took number s */
    uint64_t base;               /* tags_table_seq_start's: every tag counts as changed at it */
    uint64_t *at;                /* per tag: the number of its last change a reader could see */
    int64_t *stale_at;           /* per tag: wall ms after which its good value reads stale;
                                    INT64_MAX: not good, or good and already told stale */
} tags_changes_t;
tags_changes_t *tags_table_changes(tags_table_t *t);
const tags_changes_t *tags_table_changes_const(const tags_table_t *t);
/* Tag i's slot went from old to now (words_moved: a string's or raw's words
 * differ): a new change number when a reader would see a difference. */
void tags_changes_note(tags_table_t *t, size_t i, const tags_value_t *old, const tags_value_t *now,
                       bool words_moved);
/* A reload carried tag si of src to di of dst: its staleness deadline with it. */
void tags_changes_carry(tags_table_t *dst, size_t di, const tags_table_t *src, size_t si);

/* values.c: decode tag i from words (its first register first; a bit: one word 0/1) and
 * store it, good, at now_ms. True when it changed (tags_table_apply's rule). */
bool tags_store_value(tags_table_t *t, size_t i, const uint16_t *words, int64_t now_ms);

#endif
