/*
 * gateway/commands.h -- the subcommands of `rtugw`. Each takes the argv
 * that starts with its own name and returns the exit code:
 * 0 ok, 1 runtime failure, 2 usage or configuration error.
 */
#ifndef RTUGW_GATEWAY_COMMANDS_H
#define RTUGW_GATEWAY_COMMANDS_H

int cmd_decode(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_sim(int argc, char **argv); int cmd_replay(int argc, char **argv); int cmd_ports(int argc, char **argv); /* drivers/ */

#endif
