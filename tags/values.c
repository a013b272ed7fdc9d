/*
 * tags/values.c -- answers into tag values: a read's words (or bits) cut
 * into its member tags, decoded, stamped; a failed read marks them bad.
 *
 * The plan says which tags a read answers; a member whose words are not all
 * in the answer (a short answer) is marked bad rather than decoded from what
 * is not there. Poll-group members are the caller's and are skipped here.
 */
#include "tags/internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* Whether the new value is a change worth telling: quality, or the value
 * beyond the deadband from the last one told (exact for the integers). */
static bool changed(tags_table_t *t, size_t i, const tags_value_t *old, const tags_value_t *now)
{
    const tags_tag_t *tag = tags_table_tag(t, i);
    double *reported = tags_table_reported(t, i);
    bool moved;

    if (old->quality != now->quality || old->reason != now->reason || old->exception != now->exception)
        moved = true;
    else if (now->quality != TAGS_GOOD)
        moved = false;
    else if (tag->type == TAGS_STRING || tag->type == TAGS_RAW)
        moved = old->n_words != now->n_words;   /* the words themselves: see store() */
    else if (tag->deadband == 0)
        moved = old->raw.u != now->raw.u;
    else
        moved = tags_deadband_exceeded(tag, *reported, now->eng);
    if (moved && now->quality == TAGS_GOOD)
        *reported = now->eng;
    return moved;
}

/* Decodes tag i from words (its own first register first) and stores it.
 * Also how an overheard answer is stored (observe.c): one way to store. */
bool tags_store_value(tags_table_t *t, size_t i, const uint16_t *words, int64_t now_ms)
{
    const tags_tag_t *tag = tags_table_tag(t, i);
    tags_value_t *slot = tags_table_slot(t, i);
    tags_value_t v = { .quality = TAGS_GOOD, .time_ms = now_ms };
    bool words_moved = false;

    tags_decode(tag, words, &v);
    if (v.words) {
        uint16_t *keep = tags_table_words(t, i);
        words_moved = slot->words == NULL || memcmp(keep, words, tag->count * sizeof *keep) != 0;
        memcpy(keep, words, tag->count * sizeof *keep);
        v.words = keep;
    }
    bool moved = changed(t, i, slot, &v) || words_moved;
    tags_changes_note(t, i, slot, &v, words_moved);
    *slot = v;
    tags_table_stored(t, i);
    return moved;
}

bool tags_table_store_computed(tags_table_t *t, size_t i, const tags_value_t *v, const char *note)
{
    tags_value_t *slot = tags_table_slot(t, i);
    if (!slot)
        return false;
    tags_value_t now = *v;
    now.words = NULL;
    now.n_words = 0;
    now.exception = 0;
    if (now.quality != TAGS_BAD)
        now.reason = TAGS_BAD_NONE;
    const char *old = tags_table_note(t, i);
    bool note_moved = (old == NULL) != (note == NULL) || (old && note && strcmp(old, note) != 0);
    bool moved = changed(t, i, slot, &now) || note_moved;
    /* a change number as a read's value gets one: GET /tags?since=N (the
     * page's refresh) lists a computed tag whose value or why moved */
    tags_changes_note(t, i, slot, &now, note_moved);
    *slot = now;
    tags_table_set_note(t, i, now.quality == TAGS_BAD ? note : NULL);
    return moved;
}

static bool mark_bad(tags_table_t *t, size_t i, tags_reason_t reason, uint8_t exception, int64_t now_ms)
{
    tags_value_t *slot = tags_table_slot(t, i);
    tags_value_t v = *slot;   /* the last value stays, for who wants "last known" */
    v.quality = TAGS_BAD;
    v.reason = reason;
    v.exception = reason == TAGS_BAD_EXCEPTION ? exception : 0;
    v.time_ms = now_ms;
    bool moved = changed(t, i, slot, &v);
    tags_changes_note(t, i, slot, &v, false);
    *slot = v;
    tags_table_stored(t, i);
    return moved;
}

/* The read and its members, checked against the table and the area kind. */
static const tags_member_t *members_of(const tags_table_t *t, const tags_plan_t *plan, size_t r,
                                       bool bits, const tags_read_t **read, size_t *n)
{
    *read = tags_plan_read(plan, r);
    if (!*read)
        return NULL;
    bool is_bits = (*read)->area == TAGS_AREA_COIL || (*read)->area == TAGS_AREA_DISCRETE;
    const tags_member_t *m = tags_plan_members(plan, r, n);
    for (size_t k = 0; k < *n; k++)
        if (!m[k].is_group && m[k].index >= tags_table_count(t))
            return NULL;
    return is_bits == bits ? m : NULL;
}

/* One answer into its member tags: registers (words) or packed bits. */
static int apply(tags_table_t *t, const tags_plan_t *plan, size_t r, const uint16_t *words,
                 const uint8_t *packed, size_t n_units, int64_t now_ms)
{
    const tags_read_t *read;
    size_t n;
    const tags_member_t *m = members_of(t, plan, r, packed != NULL, &read, &n);
    int moved = 0;
    if (!m)
        return -EINVAL;
    for (size_t k = 0; k < n; k++) {
        if (m[k].is_group)
            continue;
        size_t at = (size_t)(m[k].address - read->address);
        uint16_t bit = packed && at < n_units ? (packed[at / 8] >> (at % 8)) & 1 : 0;
        if (at + m[k].count > n_units)
            moved += mark_bad(t, m[k].index, TAGS_BAD_SHORT, 0, now_ms);
        else
            moved += tags_store_value(t, m[k].index, packed ? &bit : words + at, now_ms);
    }
    return moved;
}

int tags_table_apply(tags_table_t *t, const tags_plan_t *plan, size_t r, const uint16_t *words,
                     size_t n_words, int64_t now_ms)
{
    return apply(t, plan, r, words, NULL, n_words, now_ms);
}

int tags_table_apply_bits(tags_table_t *t, const tags_plan_t *plan, size_t r, const uint8_t *packed,
                          size_t n_bits, int64_t now_ms)
{
    return packed ? apply(t, plan, r, NULL, packed, n_bits, now_ms) : -EINVAL;
}

int tags_table_fail(tags_table_t *t, const tags_plan_t *plan, size_t r, tags_reason_t reason,
                    uint8_t exception, int64_t now_ms)
{
    const tags_read_t *read = tags_plan_read(plan, r);
    size_t n;
    const tags_member_t *m = tags_plan_members(plan, r, &n);
    int moved = 0;
    if (!read || reason == TAGS_BAD_NONE || (unsigned)reason > TAGS_BAD_SHORT)
        return -EINVAL;
    for (size_t k = 0; k < n; k++)
        if (!m[k].is_group && m[k].index < tags_table_count(t))
            moved += mark_bad(t, m[k].index, reason, exception, now_ms);
    return moved;
}
