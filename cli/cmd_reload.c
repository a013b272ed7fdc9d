/*
 * cli/cmd_reload.c -- `rtugw reload -c FILE [--pid PID]`: check the file,
 * signal the daemon that runs it (SIGHUP), wait for its verdict and print it.
 *
 * A SIGHUP sent by hand or by a configuration tool is answered nowhere the
 * sender can read; this command is that answer, and what systemd's reload
 * job runs (ExecReload), so `systemctl reload rtugw` fails on a file the
 * daemon refuses and says what waits for a restart.
 *
 * The verdict comes from the daemon's own report over its plain HTTP port
 * ([http], the address the file gives; HTTPS is not spoken here): /status
 * last_reload (time, revision, result, what applied, what waits, the first
 * error), or, where /status needs a login, /metrics'
 * rtugw_config_reloads_total{result=...} counters (which one moved). Before
 * the signal the report's time (or the counters) is read; after it, the
 * command waits until it moves (--timeout, default 10 s). The daemon is
 * found by --pid, else $MAINPID (systemd sets it for ExecReload), else the
 * one process whose command line is `rtugw run -c FILE` for this FILE.
 *
 * Exit: 0 applied (or applied in part: what waits is printed; or signalled
 * with no readable report, said so); 1 the daemon refused the file, did not
 * answer in time, or no daemon runs it; 2 usage, or the file fails check
 * (the daemon is then not signalled).
 */
#include "cli/cli.h"
#include "config/config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_MAX (8u << 20)   /* a /status or /metrics answer larger than this is not read */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* GET path from the daemon's plain HTTP port: the HTTP status (0: no answer)
 * and the body (malloc'd, NUL-terminated) in *body. */
static int http_get(const config_http_t *h, const char *path, char **body)
{
    *body = NULL;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)h->port) };
    const char *host = h->bind[0] && strcmp(h->bind, "0.0.0.0") != 0 ? h->bind : "127.0.0.1";
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    char req[CONFIG_TOKEN_MAX + 256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s%s\r\n", path,
                     h->write_token[0] ? "Authorization: Bearer " : "", h->write_token,
                     h->write_token[0] ? "\r\n" : "");
    struct timeval tv = { 3, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || write(fd, req, (size_t)n) != n) {
        close(fd);
        return 0;
    }
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap >= REPLY_MAX)
                break;
            char *p = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!p)
                break;
            buf = p;
        }
        ssize_t got = read(fd, buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    int status = 0;
    if (!buf || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        free(buf);
        return 0;
    }
    buf[len] = 0;
    char *start = strstr(buf, "\r\n\r\n");
    if (start) {
        memmove(buf, start + 4, strlen(start + 4) + 1);
        *body = buf;
    } else {
        free(buf);
    }
    return status;
}

/* What the daemon reports of its reloads: last_reload's time and, where
 * /status is closed, the sum of the counters with the count per result. */
typedef struct verdict {
    bool from_status;         /* else from /metrics, or nothing (none) */
    bool none;
    long long time_ms;        /* /status: last_reload.time_ms (0: none yet) */
    char result[32], applied[160], waits[576], error[384];
    unsigned warnings;
    double counts[4];         /* /metrics: applied, restart_needed, queued, invalid */
} verdict_t;

static const char *const results[4] = { "applied", "restart_needed", "queued", "invalid" };

static void copy_str(json_object *o, const char *key, char *out, size_t cap)
{
    json_object *v;
    snprintf(out, cap, "%s", json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                                 ? json_object_get_string(v) : "");
}

static void read_verdict(const config_http_t *h, verdict_t *v)
{
    memset(v, 0, sizeof *v);
    char *body;
    int st = http_get(h, "/status", &body);
    if (st == 200 && body) {
        json_object *root = json_tokener_parse(body), *lr;
        if (root && json_object_object_get_ex(root, "last_reload", &lr)) {
            v->from_status = true;
            if (lr && json_object_is_type(lr, json_type_object)) {
                json_object *t;
                if (json_object_object_get_ex(lr, "time_ms", &t))
                    v->time_ms = json_object_get_int64(t);
                if (json_object_object_get_ex(lr, "warnings", &t))
                    v->warnings = (unsigned)json_object_get_int(t);
                copy_str(lr, "result", v->result, sizeof v->result);
                copy_str(lr, "applied", v->applied, sizeof v->applied);
                copy_str(lr, "waits", v->waits, sizeof v->waits);
                copy_str(lr, "error", v->error, sizeof v->error);
            }
        }
        json_object_put(root);
        free(body);
        if (v->from_status)
            return;
    }
    free(body);
    st = http_get(h, "/metrics", &body);
    if (st != 200 || !body) {
        free(body);
        v->none = true;
        return;
    }
    for (int i = 0; i < 4; i++) {
        char key[96];
        snprintf(key, sizeof key, "rtugw_config_reloads_total{result=\"%s\"} ", results[i]);
        const char *at = strstr(body, key);
        v->counts[i] = at ? strtod(at + strlen(key), NULL) : -1;
    }
    free(body);
}

/* The pid of `rtugw run -c FILE` (or --config FILE) for this file: 0 none, -1 several. */
static pid_t find_daemon(const char *file)
{
    char want[PATH_MAX];
    if (!realpath(file, want))
        return 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid())
            continue;
        char path[64], argv[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, argv, sizeof argv - 1);
        close(fd);
        if (n <= 0)
            continue;
        argv[n] = 0;
        const char *a[16];
        int argc = 0;
        for (char *p = argv; p < argv + n && argc < 16; p += strlen(p) + 1)
            a[argc++] = p;
        const char *base = strrchr(a[0], '/');
        if (argc < 4 || strcmp(base ? base + 1 : a[0], "rtugw") != 0 || strcmp(a[1], "run") != 0)
            continue;
        for (int i = 2; i + 1 < argc; i++) {
            char real[PATH_MAX], cwd[64], there[PATH_MAX * 2];
            if (strcmp(a[i], "-c") != 0 && strcmp(a[i], "--config") != 0)
                continue;
            /* a relative name is the daemon's, from its own folder */
            snprintf(cwd, sizeof cwd, "/proc/%ld/cwd", pid);
            if (a[i + 1][0] == '/')
                snprintf(there, sizeof there, "%s", a[i + 1]);
            else
                snprintf(there, sizeof there, "%s/%s", cwd, a[i + 1]);
            if (realpath(there, real) && strcmp(real, want) == 0)
                found = found ? -1 : (pid_t)pid;
        }
    }
    closedir(d);
    return found;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw reload -c FILE [--pid PID] [--timeout SECONDS]\n"
            "\n"
            "Checks FILE as `rtugw check` does (and stops there, exit 2, when it fails),\n"
            "sends SIGHUP to the daemon running it, waits for the daemon's verdict on its\n"
            "HTTP port (/status last_reload, or /metrics' reload counters) and prints it.\n"
            "  -c, --config FILE  the configuration the daemon runs\n"
            "  --pid PID          the daemon (default: $MAINPID, else the `rtugw run -c FILE`)\n"
            "  --timeout SECONDS  how long to wait for the verdict (default 10)\n"
            "Exit: 0 applied (what waits for a restart is printed), 1 refused by the daemon,\n"
            "no answer in time or no daemon found, 2 usage or a file check refuses.\n");
}

static int report(const verdict_t *before, const verdict_t *after, const char *file)
{
    if (after->from_status) {
        printf("%s: %s", file, after->result);
        if (after->applied[0])
            printf("; applied: %s", after->applied);
        if (after->waits[0])
            printf("; waits: %s", after->waits);
        if (after->warnings)
            printf("; %u warnings (rtugw check lists them)", after->warnings);
        printf("\n");
        if (after->error[0])
            fprintf(stderr, "%s\n", after->error);
        return strcmp(after->result, "invalid") == 0 ? 1 : 0;
    }
    for (int i = 0; i < 4; i++)
        if (after->counts[i] > before->counts[i]) {
            printf("%s: %s (from /metrics; /status needs a login for the details)\n", file, results[i]);
            return i == 3 ? 1 : 0;
        }
    return -1;
}

static bool moved(const verdict_t *before, const verdict_t *now)
{
    if (now->from_status)
        return now->time_ms != before->time_ms && now->result[0];
    for (int i = 0; i < 4; i++)
        if (now->counts[i] > before->counts[i])
            return true;
    return false;
}

int cmd_reload(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "pid", required_argument, NULL, 'p' },
        { "timeout", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *pid_arg = NULL;
    double timeout = 10;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'p': pid_arg = optarg; break;
        case 't': timeout = strtod(optarg, NULL); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!file || optind < argc || !(timeout > 0 && timeout <= 3600)) {
        usage(stderr);
        return 2;
    }
    if (!pid_arg)
        pid_arg = getenv("MAINPID");
    config_t *cfg = cli_load_config(file);
    if (!cfg) {
        fprintf(stderr, "rtugw reload: %s fails check: the daemon is not signalled and keeps its configuration\n",
                file);
        return 2;
    }
    config_http_t http = cfg->http;
    if (cfg->tags)
        tags_lint(cfg->tags, cfg->source, cli_print_warning, NULL);
    config_free(cfg);

    char *end = NULL;
    long pid = pid_arg ? strtol(pid_arg, &end, 10) : find_daemon(file);
    if (pid_arg && (*end || pid <= 0)) {
        fprintf(stderr, "rtugw reload: --pid '%s': not a process id\n", pid_arg);
        return 2;
    }
    if (pid <= 0) {
        fprintf(stderr, pid ? "rtugw reload: several daemons run %s: give --pid\n"
                            : "rtugw reload: no `rtugw run -c %s` is running (give --pid)\n", file);
        return pid ? 2 : 1;
    }
    bool readable = http.enabled && !http.tls_cert[0];
    verdict_t before, now;
    if (readable)
        read_verdict(&http, &before);
    readable = readable && !before.none;
    if (kill((pid_t)pid, SIGHUP) != 0) {
        fprintf(stderr, "rtugw reload: cannot signal %ld: %s\n", pid, strerror(errno));
        return 1;
    }
    if (!readable) {
        printf("%s: SIGHUP sent to %ld; the daemon's verdict is in its log (no plain [http] port to read it from)\n",
               file, pid);
        return 0;
    }
    for (double deadline = now_s() + timeout; now_s() < deadline; usleep(50 * 1000)) {
        read_verdict(&http, &now);
        if (!now.none && moved(&before, &now)) {
            int rc = report(&before, &now, file);
            if (rc >= 0)
                return rc;
        }
    }
    fprintf(stderr, "rtugw reload: %ld did not report a reload of %s within %.0f s\n", pid, file, timeout);
    return 1;
}
