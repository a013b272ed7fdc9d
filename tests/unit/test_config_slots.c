/*
 * tests/unit/test_config_slots.c -- config/slots.c: a reload's file laid out
 * in the running copy's bus slots (issue 41). A bus keeps its slot whatever
 * is removed or added before it in the file; a new bus takes the lowest slot
 * free (and one the daemon says is still in its grace is not free); every
 * index into the table follows (devices, unit routes, default_bus); the
 * file's order is kept beside for what lists the buses.
 */
#include "tests/unit/configtest.h"

#define BUS(n, s) "[bus " n "]\nport = sim:" s "\nbaud = 19200\n"
#define DEV(n, b, s) "[device " n "]\nbus = " b "\nslave = " s "\n"

static bool grace = false;   /* slot 1 still in its grace when set */
static bool free_slot(void *ctx, unsigned slot)
{
    (void)ctx;
    return !(grace && slot == 1);
}

static int slot_of(const config_t *cfg, const char *name)
{
    for (unsigned k = 0; k < cfg->bus_count; k++)
        if (strcmp(cfg->buses[k].name, name) == 0)
            return (int)k;
    return -1;
}

/* a, b, c running; b removed from the middle: c keeps slot 2, slot 1 a gap,
 * c's device and route follow, the order lists a then c */
static void test_removed_from_the_middle(void **state)
{
    (void)state;
    char err[192];
    config_t *run = accepted(BUS("a", "1") BUS("b", "2") BUS("c", "3") DEV("dc", "c", "3")
                         "[tcp]\nport = 15020\ndefault_bus = c\nunit9 = c:3\n");
    config_t *fresh = accepted(BUS("a", "1") BUS("c", "3") DEV("dc", "c", "3")
                           "[tcp]\nport = 15020\ndefault_bus = c\nunit9 = c:3\n");
    assert_int_equal(fresh->devices[0].bus, 1);   /* c's place in the file */
    assert_int_equal(config_buses_to_slots(fresh, run, free_slot, NULL, err, sizeof err), 0);
    assert_int_equal(fresh->bus_count, 3);
    assert_int_equal(slot_of(fresh, "c"), 2);
    assert_string_equal(fresh->buses[1].name, "");   /* the gap */
    assert_false(config_bus_live(fresh, 1));
    assert_int_equal(fresh->devices[0].bus, 2);
    assert_int_equal(fresh->tcp.default_bus, 2);
    assert_int_equal(fresh->tcp.unit[9].bus, 2);
    assert_int_equal(config_bus_listed(fresh), 2);
    assert_int_equal(config_bus_at(fresh, 0), 0);
    assert_int_equal(config_bus_at(fresh, 1), 2);
    /* c's section compares equal to the running one: nothing to restart */
    assert_true(config_same_bus(&fresh->buses[2], &run->buses[2]));
    assert_true(config_same_devices(fresh, run));
    config_free(run);
    config_free(fresh);
}

/* a, gap, c running (as after the removal above); d added before c takes
 * the gap -- unless the gap is in its grace: then the slot after c */
static void test_added_takes_a_free_slot(void **state)
{
    (void)state;
    char err[192];
    config_t *run = accepted(BUS("a", "1") BUS("b", "2") BUS("c", "3"));
    config_t *gone = accepted(BUS("a", "1") BUS("c", "3"));
    assert_int_equal(config_buses_to_slots(gone, run, free_slot, NULL, err, sizeof err), 0);
    const char *text = BUS("a", "1") BUS("d", "4") BUS("c", "3") DEV("dd", "d", "4");
    for (int g = 0; g < 2; g++) {
        grace = g == 1;
        config_t *fresh = accepted(text);
        assert_int_equal(config_buses_to_slots(fresh, gone, free_slot, NULL, err, sizeof err), 0);
        assert_int_equal(slot_of(fresh, "c"), 2);
        assert_int_equal(slot_of(fresh, "d"), grace ? 3 : 1);
        assert_int_equal(fresh->devices[0].bus, grace ? 3u : 1u);
        assert_int_equal(config_bus_at(fresh, 1), grace ? 3u : 1u);   /* d second, as the file says */
        assert_int_equal(config_bus_at(fresh, 2), 2);
        config_free(fresh);
    }
    grace = false;
    config_free(run);
    config_free(gone);
}

/* a bus being removed keeps its slot from a new bus; a rename is a new bus */
static void test_leaving_slot_and_rename(void **state)
{
    (void)state;
    char err[192];
    config_t *run = accepted(BUS("a", "1") BUS("b", "2"));
    config_t *fresh = accepted(BUS("a", "1") BUS("b2", "2"));
    assert_int_equal(config_buses_to_slots(fresh, run, free_slot, NULL, err, sizeof err), 0);
    assert_int_equal(slot_of(fresh, "b2"), 2);   /* b's slot 1 is b's until its removal applies */
    assert_false(config_bus_live(fresh, 1));
    config_free(fresh);
    /* the same file in the same order: the identity */
    fresh = accepted(BUS("a", "1") BUS("b", "2"));
    assert_int_equal(config_buses_to_slots(fresh, run, free_slot, NULL, err, sizeof err), 0);
    assert_int_equal(fresh->bus_count, 2);
    assert_int_equal(slot_of(fresh, "a"), 0);
    assert_int_equal(slot_of(fresh, "b"), 1);
    config_free(fresh);
    config_free(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_removed_from_the_middle),
        cmocka_unit_test(test_added_takes_a_free_slot),
        cmocka_unit_test(test_leaving_slot_and_rename),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
