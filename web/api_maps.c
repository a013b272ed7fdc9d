/*
 * web/api_maps.c -- GET /api/maps: each [map NAME] (the virtual slaves,
 * gateway/vslave.c) as the running configuration declares it, for the page
 * and for integrators checking their register map: its unit id, its
 * answers (gaps, stale, the quality register) and its entries (table,
 * address, count, tag, type, order, scale), each entry's tag marked
 * computed with its expression and inverse where it is one, and writable
 * or not, as a write through the map would find it.
 *
 * Read-only and a viewer's, like /tags (web/auth.c's route rule for reads
 * under /api/): the configuration's maps are no secret the tags are not.
 * Written from gw_config(gw) and the running tag table on the I/O thread, where
 * both are replaced (a reload), so nothing changes under it.
 */
#include "web/internal.h"

#include <event2/buffer.h>
#include <stdio.h>

static void add_entry(gw_t *gw, struct evbuffer *b, const config_map_entry_t *e, bool first)
{
    const tags_table_t *defs = gw_tags_defs(gw_tags(gw));
    int i = tags_table_find(defs, e->tag);
    const tags_tag_t *g = i >= 0 ? tags_table_tag(defs, (size_t)i) : NULL;
    evbuffer_add_printf(b, "%s{\"table\":\"%s\",\"address\":%u,\"count\":%u,\"tag\":", first ? "" : ",",
                        tags_area_name((tags_area_t)e->area), e->address, e->count);
    api_add_str(b, e->tag);
    evbuffer_add_printf(b, ",\"type\":\"%s\",\"order\":\"%s\",\"scale\":%.17g", tags_type_name((tags_type_t)e->type),
                        tags_order_name((tags_order_t)e->order, (tags_type_t)e->type), e->scale);
    /* a tag not in the running table (a change waiting for a restart) answers as a bad tag */
    evbuffer_add_printf(b, ",\"running\":%s,\"writable\":%s", g ? "true" : "false", g && g->writable ? "true" : "false");
    if (g && g->computed) {
        const char *target, *inverse = tags_table_inverse(defs, (size_t)i, &target);
        evbuffer_add_printf(b, ",\"expr\":");
        api_add_str(b, tags_table_expr(defs, (size_t)i));
        if (inverse) {
            evbuffer_add_printf(b, ",\"inverse\":");
            api_add_str(b, inverse);
        }
    }
    evbuffer_add_printf(b, "}");
}

void api_list_maps(gw_t *gw, struct evbuffer *b)
{
    const config_t *cfg = gw_config(gw);
    evbuffer_add_printf(b, "{\"maps\":[");
    for (unsigned m = 0; m < cfg->map_count; m++) {
        const config_map_t *mp = &cfg->maps[m];
        evbuffer_add_printf(b, "%s{\"name\":", m ? "," : "");
        api_add_str(b, mp->name);
        evbuffer_add_printf(b, ",\"unit\":%u,\"gaps\":\"%s\",\"stale\":\"%s\",\"quality_register\":", mp->unit,
                            mp->gaps_exception ? "exception" : "zero", mp->stale_last ? "last" : "exception");
        if (mp->quality_register >= 0)
            evbuffer_add_printf(b, "%d", mp->quality_register);
        else
            evbuffer_add_printf(b, "null");
        evbuffer_add_printf(b, ",\"entries\":[");
        for (unsigned k = 0; k < mp->entry_count; k++)
            add_entry(gw, b, &mp->entries[k], k == 0);
        evbuffer_add_printf(b, "]}");
    }
    evbuffer_add_printf(b, "]}\n");
}
