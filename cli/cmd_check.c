/*
 * cli/cmd_check.c -- `rtugw check`: validate a configuration file, with every
 * rule `rtugw run` applies before it opens a device; `--open` then opens each
 * port too.
 *
 * config/ checks what is its own; what a driver accepts (the baud rates the
 * serial driver can set, the simulator's slave list) is drivers/' to say, and
 * config/ does not depend on drivers/. The command line sits above both, so
 * it hands drivers/' rules to the loader here (config_bus_rule_t), and run
 * and demo load through cli_load_config too: one validation, one set of
 * messages, for check and run alike.
 */
#include "config/config.h"
#include "drivers/driver.h"
#include "cli/cli.h"
#include "gateway/gateway.h"
#include "tags/tags.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* A driver's message without the "PATH: " it starts with (the error names the key). */
static void copy_reason(char *why, size_t cap, const char *err, const char *path)
{
    size_t n = strlen(path);
    if (strncmp(err, path, n) == 0 && err[n] == ':' && err[n + 1] == ' ')
        err += n + 2;
    snprintf(why, cap, "%s", err);
}

/*
 * drivers/' rules (config_bus_rule_t), through the functions the daemon's
 * bus calls when it builds its driver: driver_sim_parse_slaves for a
 * simulator's slave list, driver_serial_new (which checks, allocates and
 * opens nothing) for the line settings. Every bus, the simulator's too,
 * ends in a serial driver at the bus's baud rate.
 */
int cli_driver_rules(const config_bus_t *bus, const char *key, char *why, size_t cap)
{
    const char *slaves = config_bus_sim_slaves(bus);

    if (strcmp(key, "port") == 0 && slaves) {
        driver_sim_config_t sim;
        driver_sim_defaults(&sim);
        if (driver_sim_parse_slaves(slaves, &sim) != 0) {
            snprintf(why, cap, "expected sim:SLAVE,SLAVE,... (1 to %d slaves 1..247, each once)",
                     DRIVER_SIM_MAX_SLAVES);
            return -EINVAL;
        }
    }
    if (strcmp(key, "baud") == 0) {
        driver_serial_config_t sc = gw_serial_config(bus);
        char err[DRIVER_ERRLEN];
        driver_t *d = driver_serial_new(&sc, err, sizeof err);
        if (!d) {
            copy_reason(why, cap, err, sc.path);
            return -EINVAL;
        }
        driver_free(d);
    }
    return 0;
}

config_t *cli_load_config(const char *file)
{
    return file ? cli_load_text(NULL, file) : cli_load_text(config_demo_text(), "<demo>");
}

config_t *cli_load_text(const char *text, const char *source)
{
    config_errors_t errs;
    config_t *cfg = !text ? config_load_file_with(source, cli_driver_rules, &errs)
                          : config_load_string_with(text, source, cli_driver_rules, &errs);
    if (!cfg) {
        for (unsigned i = 0; i < errs.count; i++)
            fprintf(stderr, "%s\n", errs.text[i]);
        if (errs.total > errs.count)
            fprintf(stderr, "(%u more errors not shown)\n", errs.total - errs.count);
    }
    return cfg;
}

/* --open: each device port opened as the daemon opens it (a tcp:// port
 * connected, within its connect timeout; a listen:// port bound), then closed. Returns how many
 * could not be opened. */
static unsigned open_ports(const config_t *cfg)
{
    unsigned failed = 0;

    for (unsigned i = 0; i < cfg->bus_count; i++) {
        const config_bus_t *bus = &cfg->buses[i];
        if (bus->port_kind == CONFIG_PORT_SIM || bus->port_kind == CONFIG_PORT_SIM_PACED) {
            printf("[bus %s] port = '%s': the built-in simulator, nothing to open\n", bus->name, bus->port);
            continue;
        }
        char err[DRIVER_ERRLEN], why[DRIVER_ERRLEN];
        driver_t *d = gw_bus_driver_new(bus, err, sizeof err);
        bool dialin = bus->port_kind == CONFIG_PORT_LISTEN;
        int rc = !d ? -EINVAL : dialin ? driver_open(d, err, sizeof err)   /* bound: a DTU dials in later */
                                       : driver_open_wait(d, bus->connect_timeout_ms, err, sizeof err);
        if (rc == 0 || (dialin && rc == DRIVER_INPROGRESS)) {
            printf("[bus %s] port = '%s': %s\n", bus->name, bus->port,
                   bus->port_kind == CONFIG_PORT_TCP ? "connected" : dialin ? "listening" : "opened");
        } else {
            copy_reason(why, sizeof why, err, bus->port);
            fprintf(stderr, "%s:%u: [bus %s] port = '%s': %s\n", cfg->source, bus->port_line, bus->name,
                    bus->port, why);
            failed++;
        }
        driver_free(d);   /* closes it */
    }
    return failed;
}

/* Which DTU goes to which bus: one line per listen:// bus, by address, with
 * its registration in hex and as text (other bytes as '.'), so that an
 * integrator can match the DTUs' settings against it. */
static void print_dialin(const config_t *cfg)
{
    for (unsigned i = 0; i < cfg->bus_count; i++) {
        const config_bus_t *bus = &cfg->buses[i];
        if (bus->port_kind != CONFIG_PORT_LISTEN)
            continue;
        unsigned sharing = 0;
        for (unsigned j = 0; j < cfg->bus_count; j++)
            sharing += cfg->buses[j].port_kind == CONFIG_PORT_LISTEN && cfg->buses[j].tcp_port == bus->tcp_port &&
                       strcmp(cfg->buses[j].tcp_host, bus->tcp_host) == 0;
        printf("dial-in %s:%u", bus->tcp_host, bus->tcp_port);
        if (!bus->dial_register_len) {
            printf(": any DTU -> bus %s\n", bus->name);
            continue;
        }
        printf(": registration hex:");
        for (unsigned k = 0; k < bus->dial_register_len; k++)
            printf("%02x", bus->dial_register[k]);
        printf(" (\"");
        for (unsigned k = 0; k < bus->dial_register_len; k++)
            putchar(bus->dial_register[k] >= 0x20 && bus->dial_register[k] < 0x7f ? bus->dial_register[k] : '.');
        printf("\") -> bus %s", bus->name);
        if (sharing > 1)
            printf(" (%u buses share the port)", sharing);
        putchar('\n');
    }
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw check [--open] -c FILE\n"
            "       rtugw check --demo [--print]\n"
            "\n"
            "Validates a configuration file with every rule `rtugw run` applies before it\n"
            "opens a device: every error is printed as FILE:LINE with the section, key and\n"
            "value that is wrong. Exit 0 when valid, 2 when not.\n"
            "  -c, --config FILE  the file to check\n"
            "  --open             then open each serial port and close it again (exit 1 when\n"
            "                     one cannot be opened, with the system's reason)\n"
            "  --demo             check the embedded demo configuration instead\n"
            "  --print            with --demo: print it (a complete example to start from)\n");
}

void cli_print_warning(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

int cmd_check(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "demo", no_argument, NULL, 'd' },
        { "print", no_argument, NULL, 'p' },
        { "open", no_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL;
    int demo = 0, print = 0, open_ports_too = 0, c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'd': demo = 1; break;
        case 'p': print = 1; break;
        case 'o': open_ports_too = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || (!file == !demo) || (print && !demo)) {
        usage(stderr);
        return 2;
    }
    if (print) {
        fputs(config_demo_text(), stdout);
        return 0;
    }

    config_t *cfg = cli_load_config(demo ? NULL : file);
    if (!cfg)
        return 2;
    char summary[256];
    config_summary(cfg, summary, sizeof summary);
    printf("%s: ok: %s\n", cfg->source, summary);
    print_dialin(cfg);
    /* valid, but likely misread: Modicon or one-based numbers where the
     * device reads protocol addresses, overlapping tags (tags_lint). Said,
     * not refused: the configuration may mean it. */
    if (cfg->tags)
        tags_lint(cfg->tags, cfg->source, cli_print_warning, NULL);
    unsigned failed = open_ports_too ? open_ports(cfg) : 0;
    config_free(cfg);
    return failed ? 1 : 0;
}
