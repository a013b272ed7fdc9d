/*
 * bench/main.c -- rtugw-bench, the program behind `rtugw bench KIND ...`:
 * finds the kind and runs it. The benchmarks are a program of their own so
 * that the daemon carries none of their code (issue 28): rtugw execs this
 * one with the same argv (cli/cmd_bench.c), so usage, output and exit codes
 * are the ones `rtugw bench` always had. Run directly it takes the same
 * arguments: rtugw-bench KIND [OPTIONS].
 */
#include "bench/bench.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} benches[] = {
    { "parse", bench_parse_main, "ns per response decode, per form, at 7/21/255 bytes" },
    { "actors", bench_actors_main, "ns per message, actor pairs ping-pong, 1 vs all workers vs mutex" },
    { "router", bench_router_main, "routed decode vs the faster arm, overhead, convergence" },
    { "gateway", bench_gateway_main, "rtugw rps and latency vs a direct RTU master, RSS, paced cycle" },
    { "wire", bench_wire_main, "one client on a paced line: rtugw vs a direct master, added latency, stage timeline" },
    { "hop", bench_hop_main, "a Modbus TCP device bus's answers/s through one or more rtugw builds, side by side" },
    { "cores", bench_cores_main, "many Modbus TCP clients served from the poll cache: answers/s with the gateway on given CPUs" },
    { "isolation", bench_isolation_main, "a live slave's rate while a client hammers a silent one, vs solo" },
    { "soak", bench_soak_main, "N mixed requests from many clients: answered once, RSS and fds flat" },
    { "crossover", bench_crossover_main, "fallback/native/routed on the same frames: gate, paired verdicts, crossover" },
    { "tags", bench_tags_main, "reads per poll cycle: planner vs per tag vs touching; ns per decoded value" },
    { "transports", bench_transports_main, "RTU over TCP, Modbus TCP devices, [rtu_tcp]: rtugw vs each direct arm" },
    { "expr", bench_expr_main, "computed tags: evaluations/s of a 5-operator expression, alone and per read, vs C" },
    { "mqtt", bench_mqtt_main, "MQTT values/s, latency and CPU per 1,000 values vs a plain libmosquitto publisher" },
};

static void usage(FILE *to)
{
    fprintf(to, "usage: rtugw bench KIND [OPTIONS]\n\nkinds:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(to, "  %-10s %s\n", benches[i].name, benches[i].summary);
    fprintf(to, "\n`rtugw bench KIND --help` describes each.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (strcmp(argv[1], benches[i].name) == 0)
            return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "rtugw bench: unknown kind '%s' (try rtugw bench --help)\n", argv[1]);
    return 2;
}
