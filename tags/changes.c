/*
 * tags/changes.c -- change numbers: which tags changed since a reader last
 * looked, so that a reader polling a large table pays for what changed, not
 * for the table (GET /tags?since=N, and its ETag, web/http_tags.c).
 *
 * The argument. A reader sees a tag through tags_table_value: its value,
 * quality, reason and exception, and its time. Every store into a value slot
 * goes through values.c (polled, failed and overheard answers alike), which
 * calls tags_changes_note with the old and the new slot under the table's
 * lock; a difference in anything but the time takes ++seq into the tag's
 * `at`. The one change no store makes is a good value growing stale (time
 * passing): tags_table_sweep, run by the reader under the same lock before it
 * reads seq, gives each such tag a number once (stale_at then INT64_MAX), and
 * the store that makes it good again gives another. So what a reader built at
 * number N shows differs from the table's state now only in tags whose at > N:
 * a reader who keeps what it saw and asks for those misses nothing.
 *
 * Cost, so that a reader asking often pays for what changed, not for the
 * table. A note is a few compares and a store into a ring of the last
 * TAGS_CHANGE_RING numbers (ring[s % RING] is the tag that took s). The
 * changes after N, when N is that recent, are read from the ring: a tag is
 * listed at its latest number only (at[i] == s), so once, in the order of
 * its last change; an older N reads one word per tag. A sweep does nothing
 * before next_stale, a bound below every deadline (lowered by each note,
 * made exact by each sweep that runs), so it reads the table about once per
 * shortest interval, not once per reader.
 */
#include "tags/internal.h"

#include <string.h>

static int64_t deadline(const tags_table_t *t, size_t i, const tags_value_t *v)
{
    return v->quality == TAGS_GOOD ? v->time_ms + 2 * (int64_t)tags_table_tag(t, i)->interval_ms : INT64_MAX;
}

static void tell(tags_changes_t *c, size_t i)
{
    c->at[i] = ++c->seq;
    c->ring[c->seq % TAGS_CHANGE_RING] = (unsigned)i;
}

void tags_changes_note(tags_table_t *t, size_t i, const tags_value_t *old, const tags_value_t *now,
                       bool words_moved)
{
    tags_changes_t *c = tags_table_changes(t);
    bool told_stale = old->quality == TAGS_GOOD && c->stale_at[i] == INT64_MAX;
    bool differs = old->quality != now->quality || old->reason != now->reason ||
                   old->exception != now->exception || old->raw.u != now->raw.u ||
                   memcmp(&old->eng, &now->eng, sizeof now->eng) != 0 || old->n_words != now->n_words ||
                   words_moved || (told_stale && now->quality == TAGS_GOOD);
    if (differs)
        tell(c, i);
    c->stale_at[i] = deadline(t, i, now);
    if (c->stale_at[i] < c->next_stale)
        c->next_stale = c->stale_at[i];
}

void tags_changes_carry(tags_table_t *dst, size_t di, const tags_table_t *src, size_t si)
{
    /* every tag of dst counts as changed at its base; a value stale in src
     * has its deadline past, and dst's first sweep tells it */
    (void)src;
    (void)si;
    tags_changes_t *c = tags_table_changes(dst);
    c->stale_at[di] = deadline(dst, di, tags_table_slot(dst, di));
    if (c->stale_at[di] < c->next_stale)
        c->next_stale = c->stale_at[di];
}

uint64_t tags_table_seq(const tags_table_t *t)
{
    return tags_table_changes_const(t)->seq;
}

uint64_t tags_table_seq_base(const tags_table_t *t)
{
    return tags_table_changes_const(t)->base;
}

void tags_table_seq_start(tags_table_t *t, uint64_t base)
{
    tags_changes_t *c = tags_table_changes(t);
    c->seq = c->base = base;
    c->next_stale = INT64_MIN;   /* the next sweep reads the table and makes it exact */
    for (size_t i = 0; i < tags_table_count(t); i++)
        c->at[i] = base;
}

/* One pass without branches (the compiler's vector loop: 10,000 deadlines in
 * a few microseconds) says whether any is due and which is next; only then
 * a second pass tells them. */
size_t tags_table_sweep(tags_table_t *t, int64_t now_ms)
{
    tags_changes_t *c = tags_table_changes(t);
    size_t n = tags_table_count(t), told = 0;
    if (now_ms <= c->next_stale)
        return 0;
    const int64_t *at = c->stale_at;
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        next = at[i] < next ? at[i] : next;
    if (now_ms > next) {
        next = INT64_MAX;
        for (size_t i = 0; i < n; i++) {
            if (now_ms > c->stale_at[i]) {
                c->stale_at[i] = INT64_MAX;
                tell(c, i);
                told++;
            }
            next = c->stale_at[i] < next ? c->stale_at[i] : next;
        }
    }
    c->next_stale = next;
    return told;
}

size_t tags_table_changed(const tags_table_t *t, uint64_t since, unsigned *out, size_t cap)
{
    const tags_changes_t *c = tags_table_changes_const(t);
    size_t n = tags_table_count(t), found = 0;
    if (since >= c->base && c->seq - since <= TAGS_CHANGE_RING) {
        for (uint64_t s = since + 1; s <= c->seq; s++) {
            unsigned i = c->ring[s % TAGS_CHANGE_RING];
            if (c->at[i] != s)
                continue;   /* changed again later: listed there */
            if (found < cap)
                out[found] = i;
            found++;
        }
        return found;
    }
    for (size_t i = 0; i < n; i++)
        if (c->at[i] > since) {
            if (found < cap)
                out[found] = (unsigned)i;
            found++;
        }
    return found;
}
