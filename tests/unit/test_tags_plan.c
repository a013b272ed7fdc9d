/*
 * tests/unit/test_tags_plan.c -- the read planner.
 *
 * The property test draws random layouts and limits (seeded: replay with
 * RTUGW_SEED=...): every item lands in exactly one read that holds it whole,
 * every read is within the limit, reads over no longer hole than the gap
 * and crosses no cut; on small cases the number of reads, and then the
 * words read, equal the optimum a brute force finds over every partition
 * of the items (not only the runs of consecutive items the planner tries).
 * Then plans over a tag table and poll groups, and splits after exception 02.
 */
#include "tags/tags.h"
#include "tests/lib/tagsutil.h"
#include "tests/lib/testutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_MAX 8

typedef struct layout {
    tags_area_t area;
    tags_limits_t lim;
    tags_range_t items[400];
    size_t n;
    unsigned cuts[4];
    size_t n_cuts;
} layout_t;

static unsigned pick(uint64_t *rs, unsigned n)
{
    return (unsigned)(test_rand(rs) % n);
}

static unsigned limit_of(const layout_t *L)
{
    return L->area == TAGS_AREA_COIL ? L->lim.max_read_bits : L->lim.max_read_registers;
}

static unsigned gap_of(const layout_t *L)
{
    return L->area == TAGS_AREA_COIL ? 16 * L->lim.max_gap : L->lim.max_gap;
}

/* A random layout of n items over `span` addresses: clusters, overlaps,
 * identical ranges (bits of one register), and cuts. */
static void draw(layout_t *L, uint64_t *rs, size_t n, unsigned span)
{
    memset(L, 0, sizeof *L);
    L->area = pick(rs, 4) == 0 ? TAGS_AREA_COIL : TAGS_AREA_HOLDING;
    unsigned longest = 1 + pick(rs, 6);
    L->lim.max_read_registers = longest + pick(rs, 20);
    L->lim.max_read_bits = longest + pick(rs, 24);
    L->lim.max_gap = pick(rs, 4) == 0 ? 0 : pick(rs, 6);
    if (L->area == TAGS_AREA_COIL)
        L->lim.max_gap = pick(rs, 2);   /* 0 or 16 bits */
    L->n = n;
    for (size_t i = 0; i < n; i++) {
        if (i && pick(rs, 6) == 0) {
            L->items[i] = L->items[pick(rs, (unsigned)i)];   /* the same range twice */
            continue;
        }
        unsigned count = 1 + (pick(rs, 3) == 0 ? pick(rs, longest) : 0);
        L->items[i] = (tags_range_t){ pick(rs, span), count };
    }
    L->n_cuts = pick(rs, 3) == 0 ? pick(rs, 4) : 0;
    for (size_t k = 0; k < L->n_cuts; k++)
        L->cuts[k] = 1 + pick(rs, span + 4);
}

/* A cut is in force unless an item spans it (start < c < end). */
static bool cut_in_force(const layout_t *L, unsigned c)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->items[i].address < c && L->items[i].address + L->items[i].count > c)
            return false;
    return true;
}

/* Whether the items with member[i] set form one valid read; *words its length. */
static bool valid_read(const layout_t *L, const bool *member, unsigned *words)
{
    unsigned lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < L->n; i++)
        if (member[i]) {
            lo = L->items[i].address < lo ? L->items[i].address : lo;
            unsigned e = L->items[i].address + L->items[i].count;
            hi = e > hi ? e : hi;
        }
    if (lo == UINT32_MAX || hi - lo > limit_of(L))
        return false;
    unsigned run = 0;                      /* the longest stretch no member covers */
    for (unsigned a = lo; a < hi; a++) {
        bool covered = false;
        for (size_t i = 0; i < L->n && !covered; i++)
            covered = member[i] && L->items[i].address <= a && a < L->items[i].address + L->items[i].count;
        run = covered ? 0 : run + 1;
        if (run > gap_of(L))
            return false;
    }
    for (size_t k = 0; k < L->n_cuts; k++) {
        unsigned c = L->cuts[k];
        bool left = false, right = false;
        for (size_t i = 0; i < L->n; i++)
            if (member[i]) {
                left = left || L->items[i].address < c;
                right = right || L->items[i].address >= c;
            }
        if (left && right && cut_in_force(L, c))
            return false;
    }
    *words = hi - lo;
    return true;
}

/* The brute force: every partition, as a restricted growth string. */
typedef struct search {
    const layout_t *L;
    unsigned block[SMALL_MAX];
    unsigned best_reads, best_words;
} search_t;

static void score(search_t *s, unsigned blocks)
{
    unsigned words = 0;
    for (unsigned b = 0; b < blocks; b++) {
        bool member[SMALL_MAX] = { 0 };
        for (size_t i = 0; i < s->L->n; i++)
            member[i] = s->block[i] == b;
        unsigned w;
        if (!valid_read(s->L, member, &w))
            return;
        words += w;
    }
    if (blocks < s->best_reads || (blocks == s->best_reads && words < s->best_words)) {
        s->best_reads = blocks;
        s->best_words = words;
    }
}

static void partitions(search_t *s, size_t i, unsigned blocks)
{
    if (blocks > s->best_reads)
        return;
    if (i == s->L->n) {
        score(s, blocks);
        return;
    }
    for (unsigned b = 0; b <= blocks; b++) {
        s->block[i] = b;
        partitions(s, i + 1, b == blocks ? blocks + 1 : blocks);
    }
}

/* Checks a plan against the rules; returns the words it reads. */
static unsigned check_plan(const layout_t *L, const tags_range_t *reads, int n_reads, const unsigned *assign)
{
    unsigned words = 0;
    assert_true(n_reads >= (L->n ? 1 : 0));
    for (int r = 0; r < n_reads; r++) {
        bool member[400] = { 0 };
        unsigned lo = UINT32_MAX, hi = 0, w = 0;
        for (size_t i = 0; i < L->n; i++)
            if (assign[i] == (unsigned)r) {
                member[i] = true;
                lo = L->items[i].address < lo ? L->items[i].address : lo;
                hi = L->items[i].address + L->items[i].count > hi ? L->items[i].address + L->items[i].count : hi;
            }
        assert_true(lo != UINT32_MAX);                  /* no empty read */
        assert_int_equal(reads[r].address, lo);          /* tight around its members */
        assert_int_equal(reads[r].address + reads[r].count, hi);
        assert_true(valid_read(L, member, &w));
        words += w;
    }
    for (size_t i = 0; i < L->n; i++) {
        assert_true(assign[i] < (unsigned)n_reads);
        const tags_range_t *r = &reads[assign[i]];
        assert_true(r->address <= L->items[i].address);
        assert_true(L->items[i].address + L->items[i].count <= r->address + r->count);
    }
    return words;
}

static void test_property_small_optimal(void **state)
{
    (void)state;
    uint64_t seed = test_seed("plan small"), rs = seed;
    layout_t L;
    tags_range_t reads[SMALL_MAX];
    unsigned assign[SMALL_MAX];
    unsigned with_cuts = 0, split = 0;
    for (unsigned round = 0; round < 3000; round++) {
        draw(&L, &rs, 1 + pick(&rs, SMALL_MAX), 8 + pick(&rs, 40));
        int n = tags_plan_ranges(&L.lim, L.area, L.items, L.n, L.cuts, L.n_cuts, reads, assign);
        unsigned words = check_plan(&L, reads, n, assign);
        search_t s = { .L = &L, .best_reads = UINT32_MAX, .best_words = UINT32_MAX };
        partitions(&s, 0, 0);
        if ((unsigned)n != s.best_reads || words != s.best_words)
            fail_msg("round %u (seed %llu): planner %d reads %u words, optimum %u reads %u words",
                     round, (unsigned long long)seed, n, words, s.best_reads, s.best_words);
        with_cuts += L.n_cuts > 0;
        split += n > 1;
    }
    /* the draws must exercise what they are meant to */
    assert_true(with_cuts > 300);
    assert_true(split > 1000);
}

static void test_property_large_valid(void **state)
{
    (void)state;
    uint64_t rs = test_seed("plan large");
    layout_t L;
    static tags_range_t reads[400];
    static unsigned assign[400];
    for (unsigned round = 0; round < 2000; round++) {
        draw(&L, &rs, 1 + pick(&rs, 400), 50 + pick(&rs, 3000));
        int n = tags_plan_ranges(&L.lim, L.area, L.items, L.n, L.cuts, L.n_cuts, reads, assign);
        check_plan(&L, reads, n, assign);
    }
}

static void test_ranges_refuses_what_cannot_be_read(void **state)
{
    (void)state;
    tags_limits_t lim = TAGS_LIMITS_DEFAULT;
    tags_range_t reads[2];
    unsigned assign[2];
    tags_range_t too_long[] = { { 0, 126 } }, past_end[] = { { 65535, 2 } }, empty[] = { { 5, 0 } };
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, too_long, 1, NULL, 0, reads, assign), -EINVAL);
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, past_end, 1, NULL, 0, reads, assign), -EINVAL);
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, empty, 1, NULL, 0, reads, assign), -EINVAL);
    tags_range_t bits[] = { { 0, 1 }, { 1999, 1 } };
    lim.max_gap = 125;   /* 2000 bits */
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_COIL, bits, 2, NULL, 0, reads, assign), 1);
    assert_int_equal(reads[0].count, 2000);
}

static void test_ranges_gap_rule(void **state)
{
    (void)state;
    tags_limits_t lim = TAGS_LIMITS_DEFAULT;   /* gap 8 */
    tags_range_t reads[3];
    unsigned assign[3];
    tags_range_t eight[] = { { 100, 2 }, { 110, 2 } }, nine[] = { { 100, 2 }, { 111, 2 } };
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, eight, 2, NULL, 0, reads, assign), 1);
    assert_int_equal(reads[0].address, 100);
    assert_int_equal(reads[0].count, 12);
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, nine, 2, NULL, 0, reads, assign), 2);
    /* coils: 8 registers' worth is 128 bits */
    tags_range_t c128[] = { { 0, 1 }, { 129, 1 } }, c129[] = { { 0, 1 }, { 130, 1 } };
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_COIL, c128, 2, NULL, 0, reads, assign), 1);
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_COIL, c129, 2, NULL, 0, reads, assign), 2);
}

/* ---- plans over a table and groups ---------------------------------------- */

static tags_tag_t reg_tag(const char *name, unsigned address, tags_type_t type, unsigned interval)
{
    tags_tag_t g = { .area = TAGS_AREA_HOLDING, .address = (uint16_t)address, .type = type,
                     .count = 8, .scale = 1, .interval_ms = interval };
    snprintf(g.name, sizeof g.name, "%s", name);
    return g;
}

/* Every tag and group shows up in exactly one read, by address, inside it. */
static void check_members(const tags_plan_t *plan, size_t n_tags, size_t n_groups)
{
    unsigned *seen_tag = calloc(n_tags + 1, sizeof *seen_tag);
    unsigned *seen_group = calloc(n_groups + 1, sizeof *seen_group);
    assert_non_null(seen_tag);
    assert_non_null(seen_group);
    for (size_t r = 0; r < tags_plan_read_count(plan); r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        size_t n;
        const tags_member_t *m = tags_plan_members(plan, r, &n);
        assert_int_equal(n, read->members);
        assert_true(n > 0);
        assert_int_equal(read->function, read->area + 1);
        assert_true(read->count <= (read->function <= 2 ? 2000 : 125));
        for (size_t k = 0; k < n; k++) {
            assert_true(m[k].address >= read->address);
            assert_true(m[k].address + m[k].count <= read->address + read->count);
            assert_true(k == 0 || m[k - 1].address <= m[k].address);
            if (m[k].is_group)
                seen_group[m[k].index]++;
            else
                seen_tag[m[k].index]++;
        }
    }
    for (size_t i = 0; i < n_tags; i++)
        assert_int_equal(seen_tag[i], 1);
    for (size_t i = 0; i < n_groups; i++)
        assert_int_equal(seen_group[i], 1);
    free(seen_tag);
    free(seen_group);
}

static void test_build_table_and_groups(void **state)
{
    tags_table_t *t = *state;
    char msg[256];
    tags_tag_t a = reg_tag("a", 100, TAGS_FLOAT32, 1000), b = reg_tag("b", 104, TAGS_INT16, 1000);
    tags_tag_t c = reg_tag("c", 102, TAGS_UINT16, 5000), d = reg_tag("d", 100, TAGS_UINT16, 1000);
    assert_int_equal(tags_table_add(t, &a, "plc1", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(t, &b, "plc1", msg, sizeof msg), 1);
    assert_int_equal(tags_table_add(t, &c, "plc1", msg, sizeof msg), 2);
    assert_int_equal(tags_table_add(t, &d, "plc2", msg, sizeof msg), 3);
    tags_group_t groups[] = {
        { "plc1", TAGS_AREA_HOLDING, 105, 10, 1000, 0 },   /* shares a's and b's read */
        { "plc1", TAGS_AREA_INPUT, 0, 4, 1000, 1 },
    };
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan;
    assert_int_equal(tags_plan_build(pl, t, groups, 2, &plan, msg, sizeof msg), 0);
    /* plc1 holding 1000 (a, b, group 7), plc1 holding 5000 (c), plc1 input, plc2 */
    assert_int_equal(tags_plan_read_count(plan), 4);
    const tags_read_t *r0 = tags_plan_read(plan, 0);
    assert_string_equal(r0->device, "plc1");
    assert_int_equal(r0->address, 100);
    assert_int_equal(r0->count, 15);
    assert_int_equal(r0->members, 3);
    assert_int_equal(tags_plan_read(plan, 1)->interval_ms, 5000);
    assert_int_equal(tags_plan_read(plan, 2)->function, 4);
    assert_string_equal(tags_plan_read(plan, 3)->device, "plc2");
    uint8_t pdu[5];
    assert_int_equal(tags_read_pdu(r0, pdu), 5);
    assert_memory_equal(pdu, ((uint8_t[]){ 3, 0, 100, 0, 15 }), 5);
    check_members(plan, 4, 2);
    tags_plan_free(plan);

    /* a device that reads at most 4 registers: a group of 10 cannot be planned */
    tags_limits_t small = { 4, 2000, 8 };
    assert_int_equal(tags_planner_set_limits(pl, "plc1", &small, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_build(pl, t, groups, 2, &plan, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "poll group 0"));
    assert_null(plan);
    tags_limits_t bad = { 126, 2000, 8 };
    assert_int_equal(tags_planner_set_limits(pl, "plc1", &bad, msg, sizeof msg), -ERANGE);
    tags_group_t broken = { "plc1", TAGS_AREA_HOLDING, 65530, 10, 1000, 9 };
    assert_int_equal(tags_plan_build(pl, NULL, &broken, 1, &plan, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "65530"));
    tags_planner_free(pl);
}

static void test_build_random_tables(void **state)
{
    (void)state;
    uint64_t rs = test_seed("plan tables");
    char msg[256], name[32];
    static const tags_type_t types[] = { TAGS_INT16, TAGS_FLOAT32, TAGS_UINT64, TAGS_STRING };
    for (unsigned round = 0; round < 200; round++) {
        tags_table_t *t = tags_table_new(500);
        size_t n = 1 + pick(&rs, 300);
        for (size_t i = 0; i < n; i++) {
            snprintf(name, sizeof name, "t%zu", i);
            tags_tag_t g = reg_tag(name, pick(&rs, 2000), types[pick(&rs, 4)], pick(&rs, 2) ? 1000 : 250);
            if (pick(&rs, 5) == 0) {
                g.area = TAGS_AREA_COIL;
                g.type = TAGS_BOOL;
            } else if (pick(&rs, 5) == 0) {
                g.type = TAGS_BOOL;
                g.in_register = true;
                g.bit = (uint8_t)pick(&rs, 16);
            }
            char dev[8];
            snprintf(dev, sizeof dev, "d%u", pick(&rs, 3));
            assert_int_equal(tags_table_add(t, &g, dev, msg, sizeof msg), (int)i);
        }
        tags_planner_t *pl = tags_planner_new(&(tags_limits_t){ 10 + pick(&rs, 116), 1 + pick(&rs, 2000), pick(&rs, 20) });
        tags_group_t groups[3];
        for (unsigned k = 0; k < 3; k++)
            groups[k] = (tags_group_t){ "d0", TAGS_AREA_HOLDING, pick(&rs, 2000), 1 + pick(&rs, 10), 1000, k };
        tags_plan_t *plan;
        assert_int_equal(tags_plan_build(pl, t, groups, 3, &plan, msg, sizeof msg), 0);
        check_members(plan, n, 3);
        tags_plan_free(plan);
        tags_planner_free(pl);
        tags_table_free(t);
    }
}

/* ---- splits after exception 02 ---------------------------------------------- */

static void test_split_holes_then_halves_then_none(void **state)
{
    tags_table_t *t = *state;
    char msg[256];
    /* 100..101, hole 102..104, 105..106, hole 107, 108 */
    tags_tag_t a = reg_tag("a", 100, TAGS_FLOAT32, 1000), b = reg_tag("b", 105, TAGS_INT32, 1000);
    tags_tag_t c = reg_tag("c", 108, TAGS_INT16, 1000);
    tags_table_add(t, &a, "plc1", msg, sizeof msg);
    tags_table_add(t, &b, "plc1", msg, sizeof msg);
    tags_table_add(t, &c, "plc1", msg, sizeof msg);
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan;
    tags_split_t what;

    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_read_count(plan), 1);
    assert_int_equal(tags_plan_split(pl, plan, 0, &what), 0);
    assert_int_equal(what.kind, TAGS_SPLIT_HOLES);
    assert_int_equal(what.cuts, 4);   /* both ends of both holes */
    assert_non_null(strstr(what.text, "plc1 holding 100+9: cut at 102, 105, 107, 108"));
    tags_plan_free(plan);

    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_read_count(plan), 3);
    tags_plan_free(plan);

    /* the cuts are per device and table: another device still merges */
    tags_tag_t a2 = reg_tag("a2", 100, TAGS_FLOAT32, 1000), c2 = reg_tag("c2", 108, TAGS_INT16, 1000);
    tags_table_add(t, &a2, "plc2", msg, sizeof msg);
    tags_table_add(t, &c2, "plc2", msg, sizeof msg);
    /* and a hole-free read on plc3: 200..203 */
    tags_tag_t d = reg_tag("d", 200, TAGS_FLOAT32, 1000), e = reg_tag("e", 202, TAGS_FLOAT32, 1000);
    tags_table_add(t, &d, "plc3", msg, sizeof msg);
    tags_table_add(t, &e, "plc3", msg, sizeof msg);
    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_read_count(plan), 5);
    assert_int_equal(tags_plan_read(plan, 3)->count, 9);   /* plc2 100+9 */
    const tags_read_t *r = tags_plan_read(plan, 4);
    assert_string_equal(r->device, "plc3");
    assert_int_equal(r->count, 4);
    assert_int_equal(tags_plan_split(pl, plan, 4, &what), 0);
    assert_int_equal(what.kind, TAGS_SPLIT_HALVES);
    assert_int_equal(what.cuts, 1);
    tags_plan_free(plan);

    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_read_count(plan), 6);
    assert_int_equal(tags_plan_split(pl, plan, 5, &what), 0);   /* plc3 202+2 alone */
    assert_int_equal(what.kind, TAGS_SPLIT_NONE);
    assert_int_equal(what.cuts, 0);
    assert_non_null(strstr(what.text, "nothing to cut"));
    assert_int_equal(tags_plan_split(pl, plan, 99, &what), -EINVAL);
    tags_plan_free(plan);
    tags_planner_free(pl);
}

/* A cut inside a multi-register tag cannot divide it: it is not in force. */
static void test_cut_inside_a_tag_is_ignored(void **state)
{
    (void)state;
    tags_limits_t lim = TAGS_LIMITS_DEFAULT;
    tags_range_t items[] = { { 10, 4 }, { 14, 1 } }, reads[2];
    unsigned assign[2], cut_inside[] = { 12 }, cut_between[] = { 14 };
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, items, 2, cut_inside, 1, reads, assign), 1);
    assert_int_equal(tags_plan_ranges(&lim, TAGS_AREA_HOLDING, items, 2, cut_between, 1, reads, assign), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_property_small_optimal),
        cmocka_unit_test(test_property_large_valid),
        cmocka_unit_test(test_ranges_refuses_what_cannot_be_read),
        cmocka_unit_test(test_ranges_gap_rule),
        cmocka_unit_test_setup_teardown(test_build_table_and_groups, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test(test_build_random_tables),
        cmocka_unit_test_setup_teardown(test_split_holes_then_halves_then_none, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test(test_cut_inside_a_tag_is_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
