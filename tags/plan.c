/*
 * tags/plan.c -- the read planner: the fewest reads that cover every tag
 * and poll group of a device, table and interval.
 *
 * The core (tags_plan_ranges) sorts the items by address and finds the best
 * split of that sorted list into consecutive runs, by dynamic programming
 * from the end: best[i] = min over j of 1 read for items i..j + best[j + 1].
 * A run i..j is a read when its span stays within the limit, no hole in it
 * (addresses no item of the run covers) is longer than the gap, and it holds
 * no cut. All three only get worse as j grows, so for each i the feasible j
 * are one range, found by a forward sweep that stops at the first failure:
 * O(n x items per read). Ties go to the plan that reads fewer words.
 *
 * Why consecutive runs suffice: if a read held items a and c but not b, with
 * a <= b <= c by address, b either ends inside the read's span (then adding
 * it costs nothing and only closes holes) or past it; tests/unit/test_tags.c
 * checks the claim against a brute force over all partitions of random sets.
 *
 * Cuts come from tags_plan_split: a device that answers exception 02 to a
 * read across a hole gets cuts at that hole's ends, remembered per device
 * and table, and every later plan keeps reads from crossing them.
 */
#include "tags/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLANNER_MAX_CUTS 4096

typedef struct cut {
    char device[TAGS_DEVICE_MAX];
    tags_area_t area;
    unsigned address;
} cut_t;

typedef struct device_limits {
    char device[TAGS_DEVICE_MAX];
    tags_limits_t limits;
} device_limits_t;

struct tags_planner {
    tags_limits_t limits;
    device_limits_t *per_device;
    size_t n_per_device;
    cut_t *cuts;
    size_t n_cuts;
};

struct tags_plan {
    tags_read_t *reads;
    size_t n_reads;
    size_t *first;                       /* members of read r: first[r] .. first[r + 1] */
    tags_member_t *members;
    char (*devices)[TAGS_DEVICE_MAX];    /* the names reads point at */
    size_t n_devices;
};

static bool is_bits(tags_area_t area)
{
    return area == TAGS_AREA_COIL || area == TAGS_AREA_DISCRETE;
}

static int check_limits(const tags_limits_t *l, char *msg, size_t cap)
{
    if (l->max_read_registers < 1 || l->max_read_registers > 125 || l->max_read_bits < 1 ||
        l->max_read_bits > 2000 || l->max_gap > 125)
        return tags_fail(msg, cap, -ERANGE, "limits %u registers, %u bits, gap %u: registers are "
                         "1..125, bits 1..2000, gap 0..125", l->max_read_registers,
                         l->max_read_bits, l->max_gap);
    return 0;
}

/* ---- the core ------------------------------------------------------------ */

typedef struct sorted {
    unsigned start, end;                 /* [start, end) */
    unsigned item;                       /* index in the caller's array */
} sorted_t;

static int by_range(const void *a, const void *b)
{
    const sorted_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->item > y->item) - (x->item < y->item);
}

/* wall[i]: no read may hold both s[i - 1] and s[i]. A cut is in force
 * unless an item spans it; then every item lies wholly on one side, and in
 * address order the sides are a prefix and a suffix. */
static void mark_walls(const sorted_t *s, size_t n, const unsigned *cuts, size_t n_cuts, bool *wall)
{
    for (size_t k = 0; k < n_cuts; k++) {
        unsigned c = cuts[k], reach = 0;
        size_t i = 0;
        while (i < n && s[i].start < c) {
            if (s[i].end > reach)
                reach = s[i].end;
            i++;
        }
        if (reach <= c && i > 0 && i < n)
            wall[i] = true;
    }
}

/* The last item a read starting at item i can reach. */
static size_t reach_of(const sorted_t *s, size_t n, size_t i, const bool *wall, unsigned limit,
                       unsigned gap)
{
    unsigned end = s[i].end;
    size_t j = i;
    while (j + 1 < n && !wall[j + 1]) {
        const sorted_t *next = &s[j + 1];
        unsigned new_end = next->end > end ? next->end : end;
        if (new_end - s[i].start > limit || (next->start > end && next->start - end > gap))
            break;
        end = new_end;
        j++;
    }
    return j;
}

int tags_plan_ranges(const tags_limits_t *lim, tags_area_t area, const tags_range_t *items,
                     size_t n, const unsigned *cuts, size_t n_cuts, tags_range_t *reads,
                     unsigned *assign)
{
    unsigned limit = is_bits(area) ? lim->max_read_bits : lim->max_read_registers;
    unsigned gap = is_bits(area) ? 16 * lim->max_gap : lim->max_gap;
    for (size_t i = 0; i < n; i++)
        if (items[i].count < 1 || items[i].count > limit || items[i].address + items[i].count > 65536u)
            return -EINVAL;
    if (n == 0)
        return 0;

    sorted_t *s = malloc(n * sizeof *s);
    bool *wall = calloc(n, sizeof *wall);
    uint64_t *best = malloc((n + 1) * sizeof *best);   /* reads << 32 | units read */
    size_t *next = malloc(n * sizeof *next);           /* best[i]'s read ends at item next[i] */
    if (!s || !wall || !best || !next) {
        free(s), free(wall), free(best), free(next);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        s[i] = (sorted_t){ items[i].address, items[i].address + items[i].count, (unsigned)i };
    qsort(s, n, sizeof *s, by_range);
    mark_walls(s, n, cuts, n_cuts, wall);

    best[n] = 0;
    for (size_t i = n; i-- > 0;) {
        size_t last = reach_of(s, n, i, wall, limit, gap);
        unsigned end = 0;
        best[i] = UINT64_MAX;
        for (size_t j = i; j <= last; j++) {
            end = s[j].end > end ? s[j].end : end;
            uint64_t cost = ((uint64_t)1 << 32) + (end - s[i].start) + best[j + 1];
            if (cost < best[i]) {
                best[i] = cost;
                next[i] = j;
            }
        }
    }

    int n_reads = 0;
    for (size_t i = 0; i < n; i = next[i] + 1) {
        unsigned end = 0;
        for (size_t j = i; j <= next[i]; j++) {
            end = s[j].end > end ? s[j].end : end;
            assign[s[j].item] = (unsigned)n_reads;
        }
        reads[n_reads++] = (tags_range_t){ s[i].start, end - s[i].start };
    }
    free(s), free(wall), free(best), free(next);
    return n_reads;
}

/* ---- the planner --------------------------------------------------------- */

tags_planner_t *tags_planner_new(const tags_limits_t *limits)
{
    tags_limits_t l = limits ? *limits : TAGS_LIMITS_DEFAULT;
    if (check_limits(&l, NULL, 0) < 0)
        return NULL;
    tags_planner_t *pl = calloc(1, sizeof *pl);
    if (pl)
        pl->limits = l;
    return pl;
}

void tags_planner_free(tags_planner_t *pl)
{
    if (!pl)
        return;
    free(pl->per_device);
    free(pl->cuts);
    free(pl);
}

int tags_planner_set_limits(tags_planner_t *pl, const char *device, const tags_limits_t *limits,
                            char *msg, size_t cap)
{
    int rc = check_limits(limits, msg, cap);
    if (rc < 0)
        return rc;
    if (!tags_name_ok(device, TAGS_DEVICE_MAX))
        return tags_fail(msg, cap, -EINVAL, "device '%s' is not a device name", device);
    for (size_t i = 0; i < pl->n_per_device; i++)
        if (strcmp(pl->per_device[i].device, device) == 0) {
            pl->per_device[i].limits = *limits;
            return 0;
        }
    device_limits_t *p = realloc(pl->per_device, (pl->n_per_device + 1) * sizeof *p);
    if (!p)
        return -ENOMEM;
    pl->per_device = p;
    strcpy(p[pl->n_per_device].device, device);
    p[pl->n_per_device++].limits = *limits;
    return 0;
}

static const tags_limits_t *limits_of(const tags_planner_t *pl, const char *device)
{
    for (size_t i = 0; i < pl->n_per_device; i++)
        if (strcmp(pl->per_device[i].device, device) == 0)
            return &pl->per_device[i].limits;
    return &pl->limits;
}

/* The cuts of one device and table, into out (at most PLANNER_MAX_CUTS). */
static size_t cuts_of(const tags_planner_t *pl, const char *device, tags_area_t area, unsigned *out)
{
    size_t n = 0;
    for (size_t i = 0; i < pl->n_cuts; i++)
        if (pl->cuts[i].area == area && strcmp(pl->cuts[i].device, device) == 0)
            out[n++] = pl->cuts[i].address;
    return n;
}

/* ---- building a plan ------------------------------------------------------ */

typedef struct entry {
    const char *device;
    tags_area_t area;
    unsigned interval_ms;
    tags_member_t m;
} entry_t;

static int by_key(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = strcmp(x->device, y->device);
    if (c)
        return c;
    if (x->area != y->area)
        return x->area < y->area ? -1 : 1;
    if (x->interval_ms != y->interval_ms)
        return x->interval_ms < y->interval_ms ? -1 : 1;
    if (x->m.address != y->m.address)
        return x->m.address < y->m.address ? -1 : 1;
    return (x->m.index > y->m.index) - (x->m.index < y->m.index);
}

static bool same_key(const entry_t *x, const entry_t *y)
{
    return x->area == y->area && x->interval_ms == y->interval_ms && strcmp(x->device, y->device) == 0;
}

static int collect(const tags_table_t *t, const tags_group_t *groups, size_t n_groups, entry_t *e,
                   char *msg, size_t cap)
{
    size_t n = 0, n_tags = t ? tags_table_count(t) : 0;
    for (size_t i = 0; i < n_tags; i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        if (g->computed)
            continue;   /* its value is an expression's (expr/): nothing to read */
        e[n++] = (entry_t){ tags_table_device_name(t, g->device), g->area, g->interval_ms,
                            { false, (unsigned)i, g->address, g->count } };
    }
    for (size_t i = 0; i < n_groups; i++) {
        const tags_group_t *g = &groups[i];
        if (!g->device || !tags_name_ok(g->device, TAGS_DEVICE_MAX) || (unsigned)g->area > 3 ||
            g->count < 1 || g->address + g->count > 65536u || g->interval_ms < 1)
            return tags_fail(msg, cap, -EINVAL, "poll group %u (%s %s %u+%u every %u ms) is not a "
                             "range of one device's table", g->id, g->device ? g->device : "?",
                             tags_area_name(g->area), g->address, g->count, g->interval_ms);
        e[n++] = (entry_t){ g->device, g->area, g->interval_ms,
                            { true, g->id, (uint16_t)g->address, (uint16_t)g->count } };
    }
    return (int)n;
}

static int add_device(tags_plan_t *p, const char *name)
{
    if (p->n_devices && strcmp(p->devices[p->n_devices - 1], name) == 0)
        return (int)p->n_devices - 1;
    strcpy(p->devices[p->n_devices], name);
    return (int)p->n_devices++;
}

/* Plans the entries e[0..n) of one key, appending reads and members. */
static int plan_key(const tags_planner_t *pl, tags_plan_t *p, const entry_t *e, size_t n,
                    size_t *n_members, unsigned *cuts, tags_range_t *ranges, tags_range_t *reads,
                    unsigned *assign, char *msg, size_t cap)
{
    for (size_t i = 0; i < n; i++)
        ranges[i] = (tags_range_t){ e[i].m.address, e[i].m.count };
    size_t n_cuts = cuts_of(pl, e[0].device, e[0].area, cuts);
    const tags_limits_t *lim = limits_of(pl, e[0].device);
    int n_reads = tags_plan_ranges(lim, e[0].area, ranges, n, cuts, n_cuts, reads, assign);
    if (n_reads == -EINVAL) {
        unsigned limit = is_bits(e[0].area) ? lim->max_read_bits : lim->max_read_registers;
        for (size_t i = 0; i < n; i++)
            if (e[i].m.count > limit)
                return tags_fail(msg, cap, -EINVAL, "%s %u (%s %s %u+%u) is longer than one read "
                                 "of that device (%u)", e[i].m.is_group ? "poll group" : "tag",
                                 e[i].m.index, e[i].device, tags_area_name(e[i].area),
                                 e[i].m.address, e[i].m.count, limit);
    }
    if (n_reads < 0)
        return tags_fail(msg, cap, n_reads, "planning %s %s failed", e[0].device,
                         tags_area_name(e[0].area));
    int dev = add_device(p, e[0].device);
    size_t base = p->n_reads;
    for (int r = 0; r < n_reads; r++)
        p->reads[base + (size_t)r] = (tags_read_t){ .device = p->devices[dev], .area = e[0].area,
                                                    .function = (uint8_t)(e[0].area + 1),
                                                    .address = (uint16_t)reads[r].address,
                                                    .count = (uint16_t)reads[r].count,
                                                    .interval_ms = e[0].interval_ms };
    for (size_t i = 0; i < n; i++)
        p->reads[base + assign[i]].members++;
    for (int r = 0; r < n_reads; r++) {
        p->first[base + (size_t)r] = *n_members;
        *n_members += p->reads[base + (size_t)r].members;
    }
    /* e is by address, so each read's members come out by address. */
    for (size_t i = 0, *fill = p->first + base; i < n; i++)
        p->members[fill[assign[i]]++] = e[i].m;
    for (int r = 0; r < n_reads; r++)
        p->first[base + (size_t)r] -= p->reads[base + (size_t)r].members;
    p->n_reads += (size_t)n_reads;
    return 0;
}

static tags_plan_t *plan_alloc(size_t n)
{
    tags_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->reads = calloc(n + 1, sizeof *p->reads);
    p->first = calloc(n + 1, sizeof *p->first);
    p->members = calloc(n + 1, sizeof *p->members);
    p->devices = calloc(n + 1, sizeof *p->devices);
    if (!p->reads || !p->first || !p->members || !p->devices) {
        tags_plan_free(p);
        return NULL;
    }
    return p;
}

int tags_plan_build(const tags_planner_t *pl, const tags_table_t *t, const tags_group_t *groups,
                    size_t n_groups, tags_plan_t **out, char *msg, size_t cap)
{
    size_t total = (t ? tags_table_count(t) : 0) + n_groups;
    entry_t *e = malloc((total + 1) * sizeof *e);
    tags_range_t *ranges = malloc((total + 1) * sizeof *ranges);
    tags_range_t *reads = malloc((total + 1) * sizeof *reads);
    unsigned *assign = malloc((total + 1) * sizeof *assign);
    unsigned *cuts = malloc(PLANNER_MAX_CUTS * sizeof *cuts);
    tags_plan_t *p = plan_alloc(total);
    int rc = -ENOMEM;

    *out = NULL;
    if (!e || !ranges || !reads || !assign || !cuts || !p) {
        tags_fail(msg, cap, rc, "planning %zu items: out of memory", total);
        goto done;
    }
    if ((rc = collect(t, groups, n_groups, e, msg, cap)) < 0)
        goto done;
    total = (size_t)rc;   /* computed tags are not planned */
    qsort(e, total, sizeof *e, by_key);
    size_t n_members = 0;
    for (size_t i = 0, j; i < total; i = j) {
        for (j = i + 1; j < total && same_key(&e[i], &e[j]); j++)
            ;
        if ((rc = plan_key(pl, p, e + i, j - i, &n_members, cuts, ranges, reads, assign, msg, cap)) < 0)
            goto done;
    }
    p->first[p->n_reads] = n_members;
    *out = p;
    p = NULL;
    rc = 0;
done:
    free(e), free(ranges), free(reads), free(assign), free(cuts);
    tags_plan_free(p);
    return rc;
}

void tags_plan_free(tags_plan_t *p)
{
    if (!p)
        return;
    free(p->reads), free(p->first), free(p->members), free(p->devices);
    free(p);
}

size_t tags_plan_read_count(const tags_plan_t *p)
{
    return p->n_reads;
}

const tags_read_t *tags_plan_read(const tags_plan_t *p, size_t r)
{
    return r < p->n_reads ? &p->reads[r] : NULL;
}

const tags_member_t *tags_plan_members(const tags_plan_t *p, size_t r, size_t *n)
{
    *n = r < p->n_reads ? p->first[r + 1] - p->first[r] : 0;
    return r < p->n_reads ? &p->members[p->first[r]] : NULL;
}

/* ---- splitting a read that got exception 02 ------------------------------ */

static int add_cut(tags_planner_t *pl, const char *device, tags_area_t area, unsigned address)
{
    for (size_t i = 0; i < pl->n_cuts; i++)
        if (pl->cuts[i].address == address && pl->cuts[i].area == area &&
            strcmp(pl->cuts[i].device, device) == 0)
            return 0;
    if (pl->n_cuts >= PLANNER_MAX_CUTS)
        return -ENOSPC;
    if (pl->n_cuts % 64 == 0) {
        cut_t *c = realloc(pl->cuts, (pl->n_cuts + 64) * sizeof *c);
        if (!c)
            return -ENOMEM;
        pl->cuts = c;
    }
    cut_t *c = &pl->cuts[pl->n_cuts++];
    strcpy(c->device, device);
    c->area = area;
    c->address = address;
    return 1;
}

/* Notes a cut in the planner and in what's text. */
static int split_at(tags_planner_t *pl, const tags_read_t *read, unsigned address, tags_split_t *what)
{
    int rc = add_cut(pl, read->device, read->area, address);
    if (rc <= 0)
        return rc;
    size_t len = strlen(what->text);
    if (len + 16 < sizeof what->text)
        snprintf(what->text + len, sizeof what->text - len, "%s%u", what->cuts ? ", " : "", address);
    what->cuts++;
    return 0;
}

/* The member start nearest the read's middle that no member spans; 0: none. */
static unsigned middle_boundary(const tags_read_t *read, const tags_member_t *m, size_t n)
{
    unsigned mid = read->address + read->count / 2u, best = 0, best_d = UINT32_MAX;
    for (size_t k = 1; k < n; k++) {
        unsigned c = m[k].address, d = c > mid ? c - mid : mid - c;
        bool spanned = false;
        for (size_t i = 0; i < n && !spanned; i++)
            spanned = m[i].address < c && m[i].address + m[i].count > c;
        if (c > read->address && !spanned && d < best_d) {
            best = c;
            best_d = d;
        }
    }
    return best;
}

int tags_plan_split(tags_planner_t *pl, const tags_plan_t *plan, size_t r, tags_split_t *what)
{
    const tags_read_t *read = tags_plan_read(plan, r);
    size_t n;
    const tags_member_t *m = tags_plan_members(plan, r, &n);
    int rc = 0;

    memset(what, 0, sizeof *what);
    if (!read || n == 0)
        return -EINVAL;
    snprintf(what->text, sizeof what->text, "%s %s %u+%u: cut at ", read->device,
             tags_area_name(read->area), read->address, read->count);
    unsigned end = m[0].address + m[0].count, holes = 0;
    for (size_t k = 1; k < n && rc == 0; k++) {
        unsigned start = m[k].address;
        if (start > end) {
            holes++;
            if ((rc = split_at(pl, read, end, what)) == 0)
                rc = split_at(pl, read, start, what);
        }
        if (start + m[k].count > end)
            end = start + m[k].count;
    }
    if (rc < 0)
        return rc;
    if (holes) {
        what->kind = TAGS_SPLIT_HOLES;
        if (!what->cuts)
            strcat(what->text, "none new (cut before)");
        return 0;
    }
    unsigned c = middle_boundary(read, m, n);
    if (c && (rc = split_at(pl, read, c, what)) < 0)
        return rc;
    what->kind = what->cuts ? TAGS_SPLIT_HALVES : TAGS_SPLIT_NONE;
    if (!what->cuts)
        snprintf(what->text, sizeof what->text, "%s %s %u+%u: nothing to cut (%zu member%s)",
                 read->device, tags_area_name(read->area), read->address, read->count, n,
                 n == 1 ? "" : "s");
    return 0;
}
