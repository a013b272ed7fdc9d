/*
 * cli/cmd_run.c -- `rtugw run -c FILE` (the daemon) and `rtugw demo`
 * (the daemon on the embedded demo configuration).
 */
#include "cli/cli.h"
#include "daemon/daemon.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run_config(config_t *cfg, const gw_options_t *opt)
{
    gw_t *gw = gw_new(cfg, opt);
    config_free(cfg);
    if (!gw)
        return 1;
    int rc = gw_run(gw);
    gw_free(gw);
    return rc;
}

static int parse_port(const char *text, const char *what, unsigned *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == 0 || *end || v < 1 || v > 65535) {
        fprintf(stderr, "rtugw: %s '%s': expected a port 1..65535\n", what, text);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        if (c == 'c') {
            file = optarg;
        } else if (c == 'h') {
            printf("usage: rtugw run -c FILE\n\n"
                   "Runs the gateway in the foreground on the configuration FILE (see rtugw.conf(5),\n"
                   "config/example.ini). SIGTERM/SIGINT stop it after answering what is in flight;\n"
                   "SIGHUP reloads FILE (a broken file is logged and the running config kept).\n"
                   "Exit: 0 after a clean stop, 1 on a runtime failure, 2 for a bad configuration.\n");
            return 0;
        } else {
            fprintf(stderr, "usage: rtugw run -c FILE\n");
            return 2;
        }
    }
    if (!file || optind < argc) {
        fprintf(stderr, "usage: rtugw run -c FILE\n");
        return 2;
    }
    config_t *cfg = cli_load_config(file);
    if (!cfg)
        return 2;
    gw_options_t opt = { .config_path = file, .install_signals = true };
    return run_config(cfg, &opt);
}

int cmd_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "tcp-port", required_argument, NULL, 't' },
        { "http-port", required_argument, NULL, 'p' },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned tcp_port = 0, http_port = 0;
    int quiet = 0, c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': if (parse_port(optarg, "--tcp-port", &tcp_port)) return 2; break;
        case 'p': if (parse_port(optarg, "--http-port", &http_port)) return 2; break;
        case 'q': quiet = 1; break;
        case 'h':
            printf("usage: rtugw demo [--tcp-port N] [--http-port N] [--quiet]\n\n"
                   "Runs the gateway on the embedded demo configuration (rtugw check --demo --print):\n"
                   "simulated PLCs (slaves 1, 2, 3) on a pseudo-terminal, polled; Modbus TCP on\n"
                   "127.0.0.1:1502 and HTTP /status and /metrics on 127.0.0.1:8502. Try:\n"
                   "  mbpoll -m tcp -p 1502 -a 1 -r 1 -c 10 -1 127.0.0.1   (-1: one poll, not forever)\n"
                   "  curl http://127.0.0.1:8502/status\n"
                   "Ctrl-C stops it. --quiet: no live status line.\n");
            return 0;
        default:
            fprintf(stderr, "usage: rtugw demo [--tcp-port N] [--http-port N] [--quiet]\n");
            return 2;
        }
    }
    config_t *cfg = cli_load_config(NULL);
    if (!cfg)
        return 2;
    if (tcp_port)
        cfg->tcp.port = tcp_port;
    if (http_port)
        cfg->http.port = http_port;
    gw_options_t opt = { .install_signals = true, .status_line = !quiet && isatty(STDERR_FILENO) };
    return run_config(cfg, &opt);
}
