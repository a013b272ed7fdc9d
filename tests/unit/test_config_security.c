/*
 * tests/unit/test_config_security.c -- the [tls] and [role NAME] sections: every
 * key's default, the rights a role grants, and every mistake reported with
 * its file, line, key and value.
 */
#include "config/config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSES "[bus a]\nport = sim\n[bus b]\nport = sim\n"
#define FILES "cert_file = server.pem\nkey_file = server.key\nca_file = ca.pem\n"

static config_t *load(const char *text, config_errors_t *errs)
{
    config_t *cfg = config_load_string(text, "t.ini", errs);
    if (!cfg)
        for (unsigned i = 0; i < errs->count; i++)
            fprintf(stderr, "  %s\n", errs->text[i]);
    return cfg;
}

/* Fails unless the load fails with an error message holding both fragments. */
static void expect_error(const char *text, const char *a, const char *b)
{
    config_errors_t errs;
    config_t *cfg = config_load_string(text, "t.ini", &errs);
    if (cfg) {
        config_free(cfg);
        fail_msg("loaded, expected '%s': %s", a, text);
    }
    for (unsigned i = 0; i < errs.count; i++)
        if (strstr(errs.text[i], a) && (!b || strstr(errs.text[i], b)))
            return;
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "  got: %s\n", errs.text[i]);
    fail_msg("no error containing '%s' and '%s'", a, b ? b : "");
}

static bool unit_granted(const config_role_t *r, unsigned u)
{
    return r->units[u / 8] & (1u << (u % 8));
}

/* The [tls] values a test expects; the rest of config_tls_t must be the defaults. */
static void expect_tls(const config_t *cfg, bool enabled, unsigned port, unsigned min_version, unsigned session_cache,
                       int default_role, const char *crl_file, unsigned roles)
{
    const config_tls_t *t = &cfg->tls;
    assert_int_equal(t->enabled, enabled);
    assert_int_equal(t->port, port);
    assert_string_equal(t->bind, "127.0.0.1");
    assert_int_equal(t->min_version, min_version);
    assert_int_equal(t->session_cache, session_cache);
    assert_int_equal(t->handshake_timeout_ms, 5000);
    assert_int_equal(t->default_role, default_role);
    assert_string_equal(t->crl_file, crl_file);
    assert_int_equal(cfg->role_count, roles);
}

static void test_defaults_without_tls(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load(BUSES, &errs);
    assert_non_null(cfg);
    expect_tls(cfg, false, 802, 12, 128, -1, "", 0);
    config_free(cfg);
}

static void test_tls_and_roles(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load(BUSES "[tls]\nenabled = true\nport = 8802\n" FILES "crl_file = crl.pem\n"
                               "min_version = 1.3\nsession_cache = 0\ndefault_role = reader\n"
                               "[role reader]\nfunctions = read\nunits = 1-3, 7, 255\n"
                               "[role operator]\nfunctions = read, write, diagnostics\nbuses = b\npriority = true\n"
                               "[role admin]\nfunctions = all\nunits = all\nbuses = all\n",
                         &errs);
    assert_non_null(cfg);
    assert_false(cfg->roles[0].priority);
    assert_true(cfg->roles[1].priority);   /* the operator's requests go first (front/backpressure.c) */
    expect_tls(cfg, true, 8802, 13, 0, 0, "crl.pem", 3);
    assert_int_equal(config_role_find(cfg, "operator"), 1);
    assert_int_equal(config_role_find(cfg, "nobody"), -1);

    const config_role_t *r = &cfg->roles[0];
    assert_string_equal(r->name, "reader");
    assert_int_equal(r->functions, CONFIG_FN_READ);
    assert_true(unit_granted(r, 1) && unit_granted(r, 2) && unit_granted(r, 3) && unit_granted(r, 7));
    assert_true(unit_granted(r, 255));
    assert_false(unit_granted(r, 0) || unit_granted(r, 4) || unit_granted(r, 254));
    for (size_t k = 0; k < sizeof r->buses; k++)
        assert_int_equal(r->buses[k], 0);

    r = &cfg->roles[1];
    assert_int_equal(r->functions, CONFIG_FN_READ | CONFIG_FN_WRITE | CONFIG_FN_DIAGNOSTICS);
    assert_int_equal(r->buses[0], 1u << 1);
    assert_false(unit_granted(r, 1));

    r = &cfg->roles[2];
    assert_int_equal(r->functions, CONFIG_FN_ALL);
    assert_int_equal(r->buses[0], 3u);
    for (unsigned u = 0; u < 256; u++)
        assert_true(unit_granted(r, u));
    config_free(cfg);
}

static void test_plain_listener_off_tls_on(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load(BUSES "[tcp]\nenabled = false\n[tls]\nenabled = yes\nport = 1502\n" FILES
                               "[role r]\nfunctions = read\nunits = 1\n",
                         &errs);
    assert_non_null(cfg);   /* port 1502 is free: the plain listener is off */
    config_free(cfg);
}

static void test_tls_mistakes(void **state)
{
    (void)state;
    expect_error(BUSES "[tls]\nenabled = true\n[role r]\nfunctions = read\nunits = 1\n", "t.ini:5: [tls]: cert_file is required",
                 NULL);
    expect_error(BUSES "[tls]\nenabled = true\n[role r]\nfunctions = read\nunits = 1\n", "key_file is required", NULL);
    expect_error(BUSES "[tls]\nenabled = true\n[role r]\nfunctions = read\nunits = 1\n", "ca_file is required", NULL);
    expect_error(BUSES "[tls]\nenabled = true\n" FILES, "[tls]: enabled, but there is no [role NAME]", NULL);
    expect_error("[tls]\nenabled = true\n" FILES "[role r]\nfunctions = read\nunits = 1\n",
                 "no [bus NAME] is configured", NULL);
    expect_error(BUSES "[tls]\nmin_version = 1.1\n", "t.ini:6: [tls] min_version = '1.1'", "expected 1.2 or 1.3");
    expect_error(BUSES "[tls]\nmin_version = TLSv1.2\n", "min_version = 'TLSv1.2'", NULL);
    expect_error(BUSES "[tls]\nport = 0\n", "t.ini:6: [tls] port = '0'", "1..65535");
    expect_error(BUSES "[tls]\nsession_cache = 10001\n", "session_cache = '10001'", "0..10000");
    expect_error(BUSES "[tls]\nhandshake_timeout_ms = 50\n", "handshake_timeout_ms = '50'", "100..60000");
    expect_error(BUSES "[tls]\ndefault_role = ghost\n", "t.ini:6: [tls] default_role = 'ghost': no such [role ghost]",
                 NULL);
    expect_error(BUSES "[tls]\ndefault_role = a b\n", "default_role = 'a b'", "name of a [role NAME]");
    /* ciphers is a key since issue 42 (to tighten Mozilla's intermediate list): its characters
     * are checked here, the list itself by OpenSSL when the context is made */
    expect_error(BUSES "[tls]\nciphers = ECDHE;rm\n", "t.ini:6: [tls] ciphers = 'ECDHE;rm'", "not in a cipher list");
    expect_error(BUSES "[tls]\nport = 1\n[http]\nport = 9\n[tls]\nport = 2\n", "t.ini:9: [tls]: section defined twice", NULL);
    expect_error(BUSES "[tls]\nenabled = true\nport = 1502\n" FILES "[role r]\nfunctions = read\nunits = 1\n",
                 "[tls] and [tcp] both use 127.0.0.1:1502", NULL);
    expect_error(BUSES "[tls]\nenabled = true\nport = 8502\n" FILES "[role r]\nfunctions = read\nunits = 1\n",
                 "[tls] and [http] both use 127.0.0.1:8502", NULL);
    expect_error(BUSES "[tls]\ncert_file = \n", "cert_file = ''", "1 to 255 characters");
}

static void test_role_mistakes(void **state)
{
    (void)state;
    expect_error(BUSES "[role r]\nunits = 1\n", "t.ini:5: [role r]: functions is required", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\n", "t.ini:5: [role r]: grants no unit", NULL);
    expect_error(BUSES "[role r]\nfunctions = read, erase\nunits = 1\n", "t.ini:6: [role r] functions = 'read, erase'",
                 "expected a list of read, write");
    expect_error(BUSES "[role r]\nfunctions = \nunits = 1\n", "functions = ''", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 256\n", "t.ini:7: [role r] units = '256'", "0..255");
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 9-3\n", "units = '9-3'", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = -3\n", "units = '-3'", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 1-\n", "units = '1-'", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 12345678-9\n", "units = '12345678-9'", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nbuses = a, c\n", "t.ini:7: [role r] buses = 'a, c': no such bus 'c'",
                 NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 1\nname = x\n", "[role r] name: unknown key", NULL);
    expect_error(BUSES "[role]\nfunctions = read\n", "[role]: needs a name", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 1\n[role s]\nfunctions = read\nunits = 1\n[role r]\nunits = 2\n",
                 "t.ini:11: [role r]: section defined twice", NULL);
    char text[4096] = BUSES;
    for (int i = 0; i < CONFIG_MAX_ROLES + 1; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "[role r%d]\nfunctions = read\nunits = 1\n", i);
    expect_error(text, "[role r16]: more than 16 roles", NULL);
}

/* A key given twice is an error with both lines, for the list keys too. */
static void test_role_key_repeated(void **state)
{
    (void)state;
    expect_error(BUSES "[role r]\nfunctions = write\nfunctions = read\nunits = 1\n",
                 "t.ini:7: [role r] functions = 'read': given twice in this section (first at line 6)", NULL);
    expect_error(BUSES "[role r]\nfunctions = read\nunits = 1\nbuses = a\nbuses = b\n",
                 "t.ini:9: [role r] buses = 'b': given twice", NULL);
    expect_error(BUSES "[tls]\nmin_version = 1.2\nmin_version = 1.3\n", "t.ini:7: [tls] min_version = '1.3': given twice",
                 NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_without_tls),
        cmocka_unit_test(test_tls_and_roles),
        cmocka_unit_test(test_plain_listener_off_tls_on),
        cmocka_unit_test(test_tls_mistakes),
        cmocka_unit_test(test_role_mistakes),
        cmocka_unit_test(test_role_key_repeated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
