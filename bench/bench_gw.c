/*
 * bench/bench_gw.c -- a gateway under test, driven from the outside, shared
 * by bench gateway, bench soak and bench isolation: `rtugw run -c FILE` as a
 * subprocess (the rtugw that ran `rtugw bench`, or another one, e.g. an
 * older build), on the CPUs the bench names if any, on a config
 * in a temporary directory with free ports; libmodbus TCP clients on it; one
 * value from its /metrics; and what /proc says about a process (memory,
 * descriptors, CPU time and context switches of all its threads).
 *
 * Nothing here includes gateway/: the gateway is only ever seen the way an
 * operator sees it.
 */
#include "bench/bench.h"
#include "bench/internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

struct bench_gw {
    pid_t pid;
    unsigned tcp_port, http_port;
    char dir[128];
    char cfg[192];
    char log[192];
    char keep_log[PATH_MAX];   /* "" : the log goes with the directory */
};

pid_t bench_gw_pid(const bench_gw_t *gw) { return gw->pid; }
unsigned bench_gw_tcp_port(const bench_gw_t *gw) { return gw->tcp_port; }

unsigned bench_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    unsigned port = 0;

    if (s < 0)
        return 0;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

static void print_log_tail(const bench_gw_t *gw)
{
    FILE *f = fopen(gw->log, "r");
    if (!f)
        return;
    char line[512];
    fprintf(stderr, "--- gateway log %s ---\n", gw->log);
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

modbus_t *bench_gw_client(const bench_gw_t *gw, int slave)
{
    modbus_t *ctx = modbus_new_tcp("127.0.0.1", (int)gw->tcp_port);
    if (!ctx)
        return NULL;
    modbus_set_slave(ctx, slave);
    modbus_set_response_timeout(ctx, 3, 0);
    if (modbus_connect(ctx) != 0) {
        modbus_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The log is appended to keep_log (a debug log can be long, and a run of
 * several rounds keeps every gateway's), then the directory goes. */
static void remove_dir(const bench_gw_t *gw)
{
    if (!gw->dir[0])
        return;   /* adopted: no directory of ours */
    if (gw->keep_log[0]) {
        FILE *in = fopen(gw->log, "r"), *out = fopen(gw->keep_log, "a");
        char buf[8192];
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
        if (!in || !out)
            fprintf(stderr, "rtugw bench: cannot copy the gateway log to %s: %s\n", gw->keep_log,
                    strerror(errno));
        if (in)
            fclose(in);
        if (out)
            fclose(out);
    }
    unlink(gw->cfg);
    unlink(gw->log);
    rmdir(gw->dir);
}

/* A key given twice in a section is an error (rtugw.conf(5)), so a default
 * the spec sets is left out. */
bool bench_keys_set(const char *keys, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = keys; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n + strspn(p + n, " \t")] == '=')
            return true;
    return false;
}

static int write_config(const bench_gw_t *gw, const bench_gw_spec_t *spec)
{
    static const char *const tcp_defaults[][2] = {
        { "max_clients", "256" }, { "max_pending", "16" }, { "idle_timeout_s", "0" },
    };
    const char *tcp = spec->tcp ? spec->tcp : "";
    size_t tlen = strlen(tcp);
    FILE *f = fopen(gw->cfg, "w");
    if (!f)
        return -1;
    fprintf(f,
            "[gateway]\nlog_level = %s\n%s"
            "[bus line]\n%s"
            "%s"
            "[tcp]\nport = %u\ndefault_bus = line\n",
            spec->log_level ? spec->log_level : "warn", spec->gateway ? spec->gateway : "",
            spec->bus, spec->sections ? spec->sections : "", gw->tcp_port);
    for (size_t i = 0; i < sizeof tcp_defaults / sizeof tcp_defaults[0]; i++)
        if (!bench_keys_set(tcp, tcp_defaults[i][0]))
            fprintf(f, "%s = %s\n", tcp_defaults[i][0], tcp_defaults[i][1]);
    if (!bench_keys_set(tcp, "unit255"))
        fprintf(f, "unit255 = line:%u\n", spec->probe_slave);
    fprintf(f, "%s%s[http]\nport = %u\n", tcp, tlen && tcp[tlen - 1] != '\n' ? "\n" : "", gw->http_port);
    return fclose(f) == 0 ? 0 : -1;
}

static pid_t spawn(const bench_gw_t *gw, const char *binary, const cpu_set_t *cpus)
{
    static const char no_affinity[] = "rtugw bench: sched_setaffinity: the CPUs asked for are not available\n";
    int logfd = open(gw->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char *argv[] = { (char *)binary, (char *)"run", (char *)"-c", (char *)gw->cfg, NULL };
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent has threads. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (logfd >= 0) {
            dup2(logfd, STDOUT_FILENO);
            dup2(logfd, STDERR_FILENO);
        }
        /* Set here, so every thread the gateway starts inherits it. */
        if (cpus && sched_setaffinity(0, sizeof *cpus, cpus) != 0) {
            ssize_t w = write(STDERR_FILENO, no_affinity, sizeof no_affinity - 1);
            (void)w;
            _exit(126);
        }
        execv(binary, argv);
        _exit(127);
    }
    if (logfd >= 0)
        close(logfd);
    if (pid < 0)
        fprintf(stderr, "rtugw bench: fork: %s\n", strerror(errno));
    return pid;
}

/* Returns 0 once a read of one holding register from the probe slave came
 * back through the gateway, -1 if it exited or stayed silent for 10 s. */
static int wait_ready(bench_gw_t *gw, unsigned probe_slave)
{
    uint64_t deadline = bench_now_ns() + 10000000000ull;
    while (bench_now_ns() < deadline) {
        int st;
        if (waitpid(gw->pid, &st, WNOHANG) == gw->pid) {
            fprintf(stderr, "rtugw bench: the gateway exited at start (status %d)\n",
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            gw->pid = 0;
            return -1;
        }
        modbus_t *ctx = bench_gw_client(gw, (int)probe_slave);
        if (ctx) {
            uint16_t v;
            int rc = modbus_read_registers(ctx, 0, 1, &v);
            modbus_close(ctx);
            modbus_free(ctx);
            if (rc == 1)
                return 0;
        }
        usleep(20000);
    }
    fprintf(stderr, "rtugw bench: the gateway did not answer within 10 s\n");
    return -1;
}

/*
 * The gateway a bench starts by default is the rtugw that ran `rtugw bench`
 * (cli/cmd_bench.c names it in RTUGW_BENCH_DAEMON before it execs this
 * program), so a build benchmarks its own daemon. rtugw-bench started by
 * hand looks beside itself (the build tree), then where make install puts
 * rtugw.
 */
static int find_daemon(char *out, size_t cap)
{
    const char *named = getenv("RTUGW_BENCH_DAEMON");
    ssize_t n;

    if (named && *named) {
        snprintf(out, cap, "%s", named);
        return 0;
    }
    n = readlink("/proc/self/exe", out, cap - 1);
    if (n > 0) {
        out[n] = 0;
        char *slash = strrchr(out, '/');
        if (slash && (size_t)(slash + 1 - out) + sizeof "rtugw" <= cap) {
            memcpy(slash + 1, "rtugw", sizeof "rtugw");
            if (access(out, X_OK) == 0)
                return 0;
        }
    }
    snprintf(out, cap, "%s/rtugw", RTUGW_BINDIR);
    if (access(out, X_OK) == 0)
        return 0;
    fprintf(stderr, "rtugw bench: no rtugw to benchmark: not beside rtugw-bench, not at %s "
                    "(run it as rtugw bench)\n", out);
    return -1;
}

bench_gw_t *bench_gw_launch(const bench_gw_spec_t *spec)
{
    bench_gw_t *gw = calloc(1, sizeof *gw);
    char found[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    const char *binary = spec->binary;

    if (!gw)
        return NULL;
    if (!binary) {
        if (find_daemon(found, sizeof found) != 0) {
            free(gw);
            return NULL;
        }
        binary = found;
    }
    if (spec->keep_log)
        snprintf(gw->keep_log, sizeof gw->keep_log, "%s", spec->keep_log);
    snprintf(gw->dir, sizeof gw->dir, "%s/rtugw-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(gw->dir)) {
        fprintf(stderr, "rtugw bench: mkdtemp %s: %s\n", gw->dir, strerror(errno));
        free(gw);
        return NULL;
    }
    snprintf(gw->cfg, sizeof gw->cfg, "%s/rtugw.conf", gw->dir);
    snprintf(gw->log, sizeof gw->log, "%s/log", gw->dir);
    gw->tcp_port = bench_free_port();
    gw->http_port = bench_free_port();
    while (gw->http_port == gw->tcp_port)
        gw->http_port = bench_free_port();
    if (!gw->tcp_port || !gw->http_port || write_config(gw, spec) != 0) {
        fprintf(stderr, "rtugw bench: cannot write %s or find free ports\n", gw->cfg);
        remove_dir(gw);
        free(gw);
        return NULL;
    }
    gw->pid = spawn(gw, binary, spec->cpus);
    if (gw->pid > 0 && wait_ready(gw, spec->probe_slave) == 0)
        return gw;
    print_log_tail(gw);
    if (gw->pid > 0) {
        bench_gw_stop(gw);
        return NULL;
    }
    remove_dir(gw);
    free(gw);
    return NULL;
}

bench_gw_t *bench_gw_start(const char *bus_text, unsigned probe_slave, const char *extra)
{
    bench_gw_spec_t spec = { .bus = bus_text, .gateway = extra, .probe_slave = probe_slave };
    return bench_gw_launch(&spec);
}

bench_gw_t *bench_gw_adopt(pid_t pid, unsigned tcp_port)
{
    bench_gw_t *gw = calloc(1, sizeof *gw);
    if (gw) {
        gw->pid = pid;
        gw->tcp_port = tcp_port;
    }
    return gw;
}

/* SIGTERM, wait up to 5 s (then SIGKILL). 0 after a clean exit 0. */
int bench_gw_stop(bench_gw_t *gw)
{
    int st = 0, rc = 1;
    if (!gw)
        return 0;
    kill(gw->pid, SIGTERM);
    uint64_t deadline = bench_now_ns() + 5000000000ull;
    for (;;) {
        pid_t w = waitpid(gw->pid, &st, WNOHANG);
        if (w == gw->pid) {
            rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
            break;
        }
        if (w < 0 || bench_now_ns() > deadline) {
            kill(gw->pid, SIGKILL);
            waitpid(gw->pid, &st, 0);
            fprintf(stderr, "rtugw bench: the gateway did not stop within 5 s after SIGTERM\n");
            break;
        }
        usleep(5000);
    }
    if (rc != 0)
        print_log_tail(gw);
    remove_dir(gw);
    free(gw);
    return rc;
}

/* ---- /proc ----------------------------------------------------------------------- */

/* A "VmRSS:"-style field of /proc/PID/status in KiB, or -1; "Pss" and
 * "Pss_Anon" come from /proc/PID/smaps_rollup. */
long bench_gw_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t flen = strlen(field);
    long v = -1;

    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid,
             strncmp(field, "Pss", 3) == 0 ? "smaps_rollup" : "status");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            v = strtol(line + flen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

int bench_gw_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* utime + stime of /proc/PID/stat: the whole thread group, threads that
 * have exited included. The comm field may hold spaces and parentheses, so
 * the fields are counted from the last ')'. */
static int proc_cpu_s(pid_t pid, double *cpu_s)
{
    char path[64], buf[1024];
    unsigned long utime, stime;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    long hz = sysconf(_SC_CLK_TCK);
    if (!p || hz <= 0 ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    *cpu_s = (double)(utime + stime) / (double)hz;
    return 0;
}

/* voluntary + nonvoluntary context switches of one task (thread). */
static int task_ctx_switches(pid_t pid, const char *tid, uint64_t *out)
{
    char path[320], line[256];
    int found = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;   /* the thread has just exited */
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0 ||
            strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0) {
            *out += strtoull(strchr(line, ':') + 1, NULL, 10);
            found++;
        }
    fclose(f);
    return found == 2 ? 0 : -1;
}

int bench_proc_usage(pid_t pid, bench_proc_usage_t *out)
{
    char path[64];
    *out = (bench_proc_usage_t){ 0 };
    if (proc_cpu_s(pid, &out->cpu_s) != 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t n = 0;
        if (e->d_name[0] == '.' || task_ctx_switches(pid, e->d_name, &n) != 0)
            continue;
        out->ctx_switches += n;
        out->threads++;
        if (strtol(e->d_name, NULL, 10) == (long)pid)
            out->main_ctx_switches = n;
    }
    closedir(d);
    return 0;
}

/* ---- /metrics ---------------------------------------------------------------------- */

/* GET /metrics over a plain socket; the value of the sample line `name`. */
int bench_gw_metric(const bench_gw_t *gw, const char *name, double *value)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)gw->http_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct timeval tv = { 3, 0 };
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int rc = -1;

    if (s < 0 || !buf)
        goto out;
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(s, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1))
        goto out;
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto out;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = recv(s, buf + len, cap - len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = 0;
    size_t nlen = strlen(name);
    for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, nlen) == 0 && p[nlen] == ' ') {
            *value = strtod(p + nlen + 1, NULL);
            rc = 0;
            break;
        }
    }
out:
    if (s >= 0)
        close(s);
    free(buf);
    return rc;
}
