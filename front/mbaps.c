/*
 * front/mbaps.c -- MB-TCP-Security (Modbus/TCP over TLS, port 802) for
 * tcp.c's second listener, on the I/O thread.
 *
 * The MBAP frames inside the TLS session are those of plain Modbus/TCP, and
 * so is their path: tcp.c serves both listeners with the same connections,
 * reply slots, bounds and exactly-once answers. What this file adds:
 *   - the TLS module (front/tls.c, rtugw-tls.so), loaded with dlopen()
 *     only when [tls] is enabled, so that a daemon without it never maps
 *     libssl and libcrypto (1.8 MiB resident, 0.5 MiB of it anonymous);
 *   - handshakes counted, and refusals counted by reason and logged with
 *     the reason and the peer's address (at most LOG_BURST a second: a
 *     scanner must not flood the log; the counters see every one);
 *   - the role check of every request of a TLS connection: its function's
 *     class and its unit (or bus) must be granted by the role, else
 *     exception 01, counted per role;
 *   - SIGHUP: a new context from the files, or the old one kept.
 *
 * The module is looked for next to the executable first (the build tree:
 * ./front/rtugw-tls.so beside ./rtugw), then in RTUGW_MODULEDIR, where
 * make install puts it. It is never unloaded: OpenSSL pins itself for its
 * exit handler anyway, and a daemon loads it once.
 */
#include "front/internal.h"
#include "module/module.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RTUGW_MODULEDIR
#define RTUGW_MODULEDIR "/usr/local/lib/rtugw"
#endif
#define MODULE_FILE "rtugw-tls.so"
#define LOG_BURST 10                 /* refusals logged per second, at most */
#define EXPIRY_WARN_S (30 * 86400)   /* the server certificate's warning horizon */

const char *const gw_tls_refusal_names[GW_TLS_REFUSAL_COUNT] = {
    [GW_TLS_NO_CERTIFICATE] = "no_certificate", [GW_TLS_UNTRUSTED] = "untrusted",
    [GW_TLS_EXPIRED] = "expired",               [GW_TLS_REVOKED] = "revoked",
    [GW_TLS_NO_ROLE] = "no_role",               [GW_TLS_UNKNOWN_ROLE] = "unknown_role",
    [GW_TLS_VERSION] = "version",               [GW_TLS_TIMEOUT] = "timeout",
    [GW_TLS_CLOSED] = "closed",                 [GW_TLS_OTHER] = "other",
};

struct gw_mbaps {
    gw_t *gw;
    const gw_tls_module_t *tls;
    tls_env_t *env;
    tls_ctx_t *ctx;                 /* what new connections get */
    gw_tls_metrics_t metrics;
    char subject[256];              /* of the server certificate in force */
    int64_t not_after;
    uint64_t log_second;            /* the refusal log's budget: this second's */
    unsigned logged, unlogged;
};

/* The server certificate now in force: remembered for /status, and a
 * warning in the log when it expires within 30 days. */
static void take_certificate(gw_mbaps_t *t)
{
    t->tls->ctx_certificate(t->ctx, t->subject, sizeof t->subject, &t->not_after);
    int64_t left = t->not_after - (int64_t)time(NULL);
    if (left < EXPIRY_WARN_S)
        gw_log(t->gw, CONFIG_LOG_WARN, "tls: the server certificate %s %s %.1f days", t->subject,
               left < 0 ? "expired" : "expires in", (double)(left < 0 ? -left : left) / 86400.0);
}

/*
 * The certificate, key, CA and CRL files are opened here, under the
 * configuration's folder or a [gateway] data_dirs folder, relative to an
 * open descriptor of it (config/paths.c: a symbolic link out, swapped in
 * after the load, is refused), and the module reads those very files
 * through /proc/self/fd/N; its messages name the configured paths again.
 */
static tls_ctx_t *ctx_confined(gw_mbaps_t *t, const config_t *cfg, char *err, size_t errcap)
{
    config_tls_t *tls = malloc(sizeof *tls);
    char *fields[4], given[4][CONFIG_PATH_MAX], why[384];
    const char *keys[4] = { "cert_file", "key_file", "ca_file", "crl_file" };
    int fds[4] = { -1, -1, -1, -1 };
    tls_ctx_t *ctx = NULL;

    if (!tls) {
        snprintf(err, errcap, "tls: out of memory");
        return NULL;
    }
    *tls = cfg->tls;
    fields[0] = tls->cert_file, fields[1] = tls->key_file, fields[2] = tls->ca_file, fields[3] = tls->crl_file;
    for (int i = 0; i < 4; i++) {
        snprintf(given[i], sizeof given[i], "%s", fields[i]);
        if (given[i][0] && config_open_for_name(cfg, given[i], &fds[i], fields[i], CONFIG_PATH_MAX, why,
                                                sizeof why) != 0) {
            snprintf(err, errcap, "[tls] %s = '%s': %s", keys[i], given[i], why);
            goto out;
        }
    }
    if (!(ctx = t->tls->ctx_new(t->env, tls, err, errcap)))
        for (int i = 0; i < 4; i++)
            if (given[i][0])
                config_name_again(err, errcap, fields[i], given[i]);
out:
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(tls);
    return ctx;
}

gw_mbaps_t *mbaps_new(gw_t *gw, char *err, size_t errcap)
{
    gw_mbaps_t *t = calloc(1, sizeof *t);
    char path[PATH_MAX + 64], why[PATH_MAX + 128];

    if (!t) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    t->gw = gw;
    /* beside the binary in the build tree (front/), else where `make install` put it (module/) */
    t->tls = module_load("front", MODULE_FILE, RTUGW_MODULEDIR, "rtugw_tls_module", path, sizeof path, why,
                         sizeof why);
    if (!t->tls) {
        snprintf(err, errcap, "tls: cannot load the TLS module: %s", why);
        free(t);
        return NULL;
    }
    if (t->tls->abi != GW_TLS_MODULE_ABI) {
        snprintf(err, errcap, "tls: the TLS module %s is not this rtugw's (ABI %u, want %u)", path, t->tls->abi,
                 GW_TLS_MODULE_ABI);
        free(t);
        return NULL;
    }
    if (!(t->env = t->tls->env_new(gw_config(gw), config_role_find))) {
        snprintf(err, errcap, "tls: cannot initialise OpenSSL");
        free(t);
        return NULL;
    }
    if (!(t->ctx = ctx_confined(t, gw_config(gw), err, errcap))) {
        mbaps_free(t);
        return NULL;
    }
    take_certificate(t);
    return t;
}

void mbaps_free(gw_mbaps_t *t)
{
    if (!t)
        return;
    if (t->ctx)
        t->tls->ctx_free(t->ctx);
    t->tls->env_free(t->env);
    free(t);
}

/*
 * An unauthenticated socket costs a handshake slot until it finishes or
 * handshake_timeout_ms passes: [tls] max_handshakes bounds them all and
 * max_handshakes_per_address those of one address, so a flood from one
 * host leaves slots to the others (tcp.c keeps them apart from the
 * clients' max_clients). A refusal is counted, not logged: a flood would
 * be all the log said.
 */
bool mbaps_admit(gw_mbaps_t *t, unsigned in_handshake, unsigned from_address)
{
    const config_tls_t *c = &gw_config(t->gw)->tls;
    if (in_handshake >= c->max_handshakes) {
        gw_count(&t->metrics.handshakes_refused_full);
        return false;
    }
    if (c->max_handshakes_per_address && from_address >= c->max_handshakes_per_address) {
        gw_count(&t->metrics.handshakes_refused_address);
        return false;
    }
    return true;
}

void mbaps_handshaking(gw_mbaps_t *t, unsigned in_handshake)
{
    gw_set(&t->metrics.handshaking, in_handshake);
}

struct bufferevent *mbaps_accept(gw_mbaps_t *t, int fd)
{
    struct bufferevent *bev = t->tls->accept(t->ctx, loop_base(gw_loop(t->gw)), fd);
    if (bev) {
        gw_count(&t->metrics.accepted);
        gw_count(&t->metrics.active);
    }
    return bev;
}

void mbaps_closed(gw_mbaps_t *t, struct bufferevent *bev)
{
    t->tls->close_notify(bev);
    atomic_fetch_sub_explicit(&t->metrics.active, 1, memory_order_relaxed);
}

static void peer_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    char ip[INET_ADDRSTRLEN] = "?";
    if (sa->sa_family != AF_INET) {
        snprintf(buf, cap, "(address family %d)", sa->sa_family);
        return;
    }
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    snprintf(buf, cap, "%s:%u", ip, ntohs(in->sin_port));
}

/* May one more refusal be logged this second? Says how many were not. */
static bool log_budget(gw_mbaps_t *t)
{
    uint64_t second = gw_now_ns() / 1000000000ull;
    if (second != t->log_second) {
        if (t->unlogged)
            gw_log(t->gw, CONFIG_LOG_WARN, "tls: %u more refused handshakes not logged (at most %d a second; "
                   "/metrics counts all)", t->unlogged, LOG_BURST);
        t->log_second = second;
        t->logged = t->unlogged = 0;
    }
    if (t->logged < LOG_BURST) {
        t->logged++;
        return true;
    }
    t->unlogged++;
    return false;
}

void mbaps_refused(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer, bool timed_out)
{
    char detail[256], addr[64];
    gw_tls_refusal_t why;

    if (timed_out) {
        why = GW_TLS_TIMEOUT;
        snprintf(detail, sizeof detail, "no complete handshake within %u ms", gw_config(t->gw)->tls.handshake_timeout_ms);
    } else {
        why = t->tls->refusal(bev, detail, sizeof detail);
    }
    gw_count(&t->metrics.refused[why]);
    if (log_budget(t)) {
        peer_text(peer, addr, sizeof addr);
        gw_log(t->gw, CONFIG_LOG_WARN, "tls: refused %s: %s (%s)", addr, gw_tls_refusal_names[why], detail);
    }
}

int mbaps_connected(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer)
{
    char detail[512], addr[64];
    bool resumed;
    int role = t->tls->peer(bev, &resumed, detail, sizeof detail);

    if (role < 0 || (unsigned)role >= gw_config(t->gw)->role_count) {
        mbaps_refused(t, bev, peer, false);
        return -1;
    }
    gw_count(&t->metrics.handshakes);
    if (resumed)
        gw_count(&t->metrics.resumed);
    peer_text(peer, addr, sizeof addr);
    gw_log(t->gw, CONFIG_LOG_INFO, "tls: %s is role %s (%s)", addr, gw_config(t->gw)->roles[role].name, detail);
    return role;
}

/* The classes a request needs: the one classifier's (parser/function.c),
 * whose class bits are config/'s CONFIG_FN_*; 0: no role has it. */
_Static_assert(RTU_FN_READ == CONFIG_FN_READ && RTU_FN_WRITE == CONFIG_FN_WRITE &&
               RTU_FN_DIAGNOSTICS == CONFIG_FN_DIAGNOSTICS && RTU_FN_FILE == CONFIG_FN_FILE &&
               RTU_FN_USER == CONFIG_FN_USER, "a role's classes are the classifier's");

static unsigned function_class(const uint8_t *pdu, size_t len)
{
    return rtu_function_class(pdu, len) & CONFIG_FN_ALL;
}

bool mbaps_allows(gw_mbaps_t *t, int role, uint8_t unit, int bus, const uint8_t *pdu, size_t len)
{
    const config_role_t *r = &gw_config(t->gw)->roles[role];
    unsigned need = len ? function_class(pdu, len) : 0;
    bool where = (r->units[unit / 8] >> (unit % 8) & 1) || (bus >= 0 && config_role_has_bus(r, (unsigned)bus));
    bool ok = need && (r->functions & need) == need && where;

    gw_count(&t->metrics.role_requests[role]);
    if (!ok)
        gw_count(&t->metrics.role_refused[role]);
    return ok;
}

bool mbaps_role_priority(gw_mbaps_t *t, int role)
{
    return role >= 0 && gw_config(t->gw)->roles[role].priority;
}

int mbaps_reload(gw_mbaps_t *t, const config_t *fresh)
{
    char err[512];
    tls_ctx_t *next = ctx_confined(t, fresh, err, sizeof err);

    if (!next) {
        gw_count(&t->metrics.reload_failures);
        gw_log(t->gw, CONFIG_LOG_ERROR, "SIGHUP: %s; keeping [tls] and the certificates, key and CRL in force",
               err);
        return -1;
    }
    t->tls->ctx_free(t->ctx);
    t->ctx = next;
    gw_count(&t->metrics.reloads);
    take_certificate(t);
    gw_log(t->gw, CONFIG_LOG_INFO, "SIGHUP: tls: reloaded %s, %s%s, serving %s", fresh->tls.cert_file,
           fresh->tls.ca_file, fresh->tls.crl_file[0] ? " and its CRL" : "", t->subject);
    return 0;
}

/* The per-role counters of /metrics are indexed as the roles are: after a
 * reload that renamed, added or removed roles, each old role's counts move
 * to its new index (map[old]; -1: the role is gone and so are its counts),
 * the new roles start at 0. I/O thread, the counters' one writer. */
void mbaps_roles_remap(gw_mbaps_t *t, const int *map, unsigned old_count)
{
    uint64_t req[CONFIG_MAX_ROLES] = { 0 }, ref[CONFIG_MAX_ROLES] = { 0 };
    for (unsigned i = 0; i < old_count && i < CONFIG_MAX_ROLES; i++)
        if (map[i] >= 0 && map[i] < CONFIG_MAX_ROLES) {
            req[map[i]] = gw_read(&t->metrics.role_requests[i]);
            ref[map[i]] = gw_read(&t->metrics.role_refused[i]);
        }
    for (unsigned i = 0; i < CONFIG_MAX_ROLES; i++) {
        gw_set(&t->metrics.role_requests[i], req[i]);
        gw_set(&t->metrics.role_refused[i], ref[i]);
    }
}

bool mbaps_still_trusted(gw_mbaps_t *t, struct bufferevent *bev, const struct sockaddr *peer)
{
    char addr[64];
    if (t->tls->still_trusted(t->ctx, bev))
        return true;
    peer_text(peer, addr, sizeof addr);
    gw_log(t->gw, CONFIG_LOG_WARN, "SIGHUP: tls: %s: its certificate no longer verifies (revoked, expired or "
           "no longer under ca_file); closing that session", addr);
    return false;
}

const gw_tls_metrics_t *mbaps_metrics(const gw_mbaps_t *t)
{
    return &t->metrics;
}

void mbaps_certificate(const gw_mbaps_t *t, const char **subject, int64_t *not_after)
{
    *subject = t->subject;
    *not_after = t->not_after;
}
