/*
 * cli/cli.h -- the `rtugw` command line: main.c finds the subcommand, and
 * each subcommand is one file, a thin layer over the libraries it drives
 * (decode over parser/ and routing/, replay and sim over drivers/, bench
 * execs the program rtugw-bench (bench/), check over config/ and drivers/,
 * run and demo over gateway/, read over libmodbus and tags/, scan over
 * drivers/' serial backend and parser/). Owns the
 * `rtugw` program. Nothing outside cli/ includes this header; cli/ may
 * call every library, and no library calls cli/.
 *
 * Each command takes the argv that starts with its own name and returns
 * the exit code: 0 ok, 1 runtime failure, 2 usage or configuration error.
 */
#ifndef RTUGW_CLI_H
#define RTUGW_CLI_H

#include <stddef.h>

int cmd_decode(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_ports(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_passwd(int argc, char **argv);
int cmd_scan(int argc, char **argv);
int cmd_sniff(int argc, char **argv);
int cmd_reload(int argc, char **argv);

/* Loads FILE (NULL: the embedded demo configuration) with every rule `rtugw
 * run` applies before it opens a device: config/'s own and drivers/' (baud
 * rates, the simulator's slave list). Every error is printed on stderr;
 * NULL when there was one. check, run and demo all load through it. */
struct config *cli_load_config(const char *file);
/* The same rules for configuration TEXT named SOURCE in its messages (NULL
 * text: the file SOURCE): the demo with --mqtt's section added. */
struct config *cli_load_text(const char *text, const char *source);
/* drivers/' rules (a config_bus_rule_t): the daemon's reloads and its API
 * validate with them too, so they refuse what check refuses. */
/* A tags_lint line (what check warns of) on stderr: check and run say them alike. */
void cli_print_warning(void *ctx, const char *line);
struct config_bus;
int cli_driver_rules(const struct config_bus *bus, const char *key, char *why, size_t cap);

#endif
