/*
 * tags/observe.c -- tag values from answers rtugw overheard rather than asked for.
 *
 * On a listen-only bus no plan says which read answers which tags: the master
 * asks what it asks. An answer (already paired with its request, whose
 * address and area it takes) covers a range; every tag of that device and area
 * whose registers all lie in it takes its value from it, through the same
 * store as a polled answer (values.c). A tag only partly covered is left as it
 * was: its other words were not heard, and half a float is not a value.
 */
#include "tags/internal.h"

#include <errno.h>

/* The one coverage rule, for storing and for telling who was stored. */
static bool covers(const tags_tag_t *tag, tags_area_t area, uint16_t address, size_t n)
{
    return !tag->computed && tag->area == area && tag->address >= address && (size_t)(tag->address - address) + tag->count <= n;
}

size_t tags_table_covered(const tags_table_t *t, size_t device, tags_area_t area, uint16_t address, size_t n,
                          unsigned *out, size_t cap)
{
    size_t count, found = 0;
    const unsigned *idx = tags_table_device_tags(t, device, &count);
    for (size_t k = 0; idx && k < count; k++)
        if (covers(tags_table_tag(t, idx[k]), area, address, n)) {
            if (found < cap)
                out[found] = idx[k];
            found++;
        }
    return found;
}

int tags_table_observe(tags_table_t *t, size_t device, tags_area_t area, uint16_t address,
                       const uint16_t *words, const uint8_t *packed, size_t n, int64_t now_ms)
{
    bool bits = area == TAGS_AREA_COIL || area == TAGS_AREA_DISCRETE;
    if (bits ? !packed : !words)
        return -EINVAL;
    size_t count;
    const unsigned *idx = tags_table_device_tags(t, device, &count);
    int moved = 0;
    for (size_t k = 0; idx && k < count; k++) {
        const tags_tag_t *tag = tags_table_tag(t, idx[k]);
        if (!covers(tag, area, address, n))
            continue;
        size_t at = (size_t)(tag->address - address);
        if (bits) {
            uint16_t bit = (packed[at / 8] >> (at % 8)) & 1;
            moved += tags_store_value(t, idx[k], &bit, now_ms);
        } else {
            moved += tags_store_value(t, idx[k], words + at, now_ms);
        }
    }
    return moved;
}
