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
    /* what check warns of, said at start too (stderr: the journal) */
    if (cfg->tags)
        tags_lint(cfg->tags, cfg->source, cli_print_warning, NULL);
    gw_options_t opt = { .config_path = file, .install_signals = true, .bus_rule = cli_driver_rules };
    return run_config(cfg, &opt);
}

/* The demo with an [mqtt] section for HOST:PORT, through the same loader and
 * checks as any file: a bad host or port is refused by [mqtt]'s own rules.
 * publish = interval: every device's latest values each second, so a
 * subscriber that comes later sees every PLC, not only the values that move. */
static config_t *load_demo_mqtt(const char *host_port)
{
    const char *colon = strrchr(host_port, ':');
    unsigned port;
    if (!colon || colon == host_port || parse_port(colon + 1, "--mqtt", &port) != 0) {
        fprintf(stderr, "rtugw demo: --mqtt '%s': expected HOST:PORT, e.g. 127.0.0.1:1883\n", host_port);
        return NULL;
    }
    const char *demo = config_demo_text();
    size_t cap = strlen(demo) + strlen(host_port) + 160;
    char *text = malloc(cap);
    if (!text)
        return NULL;
    snprintf(text, cap, "%s\n[mqtt]\nhost = %.*s\nport = %u\ngateway = demo\nclient_id = rtugw-demo\n"
             "publish = interval\ninterval_ms = 1000\n", demo,
             (int)(colon - host_port), host_port, port);
    config_t *cfg = cli_load_text(text, "<demo --mqtt>");
    free(text);
    return cfg;
}

int cmd_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "tcp-port", required_argument, NULL, 't' },
        { "http-port", required_argument, NULL, 'p' },
        { "quiet", no_argument, NULL, 'q' },
        { "mqtt", required_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned tcp_port = 0, http_port = 0;
    const char *mqtt = NULL;
    int quiet = 0, c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': if (parse_port(optarg, "--tcp-port", &tcp_port)) return 2; break;
        case 'p': if (parse_port(optarg, "--http-port", &http_port)) return 2; break;
        case 'q': quiet = 1; break;
        case 'm': mqtt = optarg; break;
        case 'h':
            printf("usage: rtugw demo [--tcp-port N] [--http-port N] [--mqtt HOST:PORT] [--quiet]\n\n"
                   "Runs the gateway on the embedded demo configuration (rtugw check --demo --print):\n"
                   "simulated PLCs (slaves 1 boiler, 2 pump, 3 meter) on a pseudo-terminal, each\n"
                   "polled with typed tags; Modbus TCP on 127.0.0.1:1502, HTTP (/status, /tags,\n"
                   "/metrics, the web page with its frame monitor) on 127.0.0.1:8502. Try:\n"
                   "  mbpoll -m tcp -p 1502 -a 1 -r 1 -c 10 -1 127.0.0.1   (-1: one poll, not forever)\n"
                   "  curl http://127.0.0.1:8502/tags\n"
                   "  curl -X PUT -H 'Authorization: Bearer demo' -d '{\"value\": 1500}' \\\n"
                   "       http://127.0.0.1:8502/tags/pump_speed\n"
                   "--mqtt HOST:PORT also publishes every device's values each second to that MQTT\n"
                   "broker (gateway 'demo': topics rtugw/demo/DEVICE/data; writes on rtugw/demo/write).\n"
                   "Ctrl-C stops it. --quiet: no live status line.\n");
            return 0;
        default:
            fprintf(stderr, "usage: rtugw demo [--tcp-port N] [--http-port N] [--mqtt HOST:PORT] [--quiet]\n");
            return 2;
        }
    }
    config_t *cfg = mqtt ? load_demo_mqtt(mqtt) : cli_load_config(NULL);
    if (!cfg)
        return 2;
    if (tcp_port)
        cfg->tcp.port = tcp_port;
    if (http_port)
        cfg->http.port = http_port;
    gw_options_t opt = { .install_signals = true, .status_line = !quiet && isatty(STDERR_FILENO) };
    return run_config(cfg, &opt);
}
