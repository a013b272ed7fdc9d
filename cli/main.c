/*
 * cli/main.c -- the `rtugw` command: finds the subcommand and runs it.
 */
#include "config.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    { "run", cmd_run, "the gateway daemon, in the foreground (rtugw run -c FILE)" },
    { "demo", cmd_demo, "the gateway on simulated PLCs: Modbus TCP 127.0.0.1:1502, HTTP 8502" },
    { "decode", cmd_decode, "hex RTU frames (arguments or stdin) to JSON lines" },
    { "check", cmd_check, "validate a configuration file (rtugw check -c FILE)" },
    { "reload", cmd_reload, "check FILE, reload the daemon running it, print its verdict" },
    { "read", cmd_read, "a typed read of a device or through a gateway (commissioning)" },
    { "scan", cmd_scan, "find the slaves on a serial line: ids, baud, format, identity" },
    { "sim", cmd_sim, "a PLC simulator on a pseudo-terminal or port" }, { "replay", cmd_replay, "decode a capture (pcap, pcapng, text hex log)" }, { "ports", cmd_ports, "list serial ports (USB vendor:product)" },
    { "hash-password", cmd_passwd, "a password as the hash [user NAME] password_hash takes" },
    { "sniff", cmd_sniff, "decode a line another master polls, never writing to it" },
    { "bench", cmd_bench, "benchmarks: parse, actors, router, gateway, isolation, soak, crossover,\n"
                          "             tags, transports, mqtt (the program rtugw-bench; rtugw bench --help)" },
};

static void usage(FILE *to)
{
    fprintf(to, "usage: rtugw COMMAND [OPTIONS]\n\nModbus RTU gateway.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\n`rtugw COMMAND --help` describes each. Exit codes: 0 ok, 1 runtime failure,\n"
                "2 usage or configuration error.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("rtugw %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "rtugw: unknown command '%s' (try rtugw --help)\n", argv[1]);
    return 2;
}
