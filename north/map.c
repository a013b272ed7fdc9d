/*
 * north/map.c -- a string-keyed hash table: open addressing, linear
 * probing, FNV-1a, grown at 3/4 full. Entries are never removed (devices
 * and tags live as long as the client), which keeps probing simple.
 */
#include "north/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct map_slot {
    char *key;
    void *value;
    uint32_t hash;
};

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static struct map_slot *find(const north_map_t *m, const char *key, uint32_t h)
{
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct map_slot *s = &m->slots[i];
        if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
            return s;
    }
}

void *map_get(const north_map_t *m, const char *key)
{
    if (!m->cap)
        return NULL;
    struct map_slot *s = find(m, key, fnv1a(key));
    return s->key ? s->value : NULL;
}

static int grow(north_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    north_map_t bigger = { calloc(cap, sizeof *bigger.slots), cap, m->count };
    if (!bigger.slots)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            *find(&bigger, m->slots[i].key, m->slots[i].hash) = m->slots[i];
    free(m->slots);
    *m = bigger;
    return 0;
}

int map_put(north_map_t *m, const char *key, void *value)
{
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return -ENOMEM;
    uint32_t h = fnv1a(key);
    struct map_slot *s = find(m, key, h);
    if (!s->key) {
        if (!(s->key = strdup(key)))
            return -ENOMEM;
        s->hash = h;
        m->count++;
    }
    s->value = value;
    return 0;
}

void map_free(north_map_t *m, void (*free_value)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key) {
            free(m->slots[i].key);
            if (free_value)
                free_value(m->slots[i].value);
        }
    free(m->slots);
    *m = (north_map_t){ 0 };
}
