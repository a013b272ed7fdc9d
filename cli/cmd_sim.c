/*
 * cli/cmd_sim.c -- `rtugw sim`: a PLC simulator on a pseudo-terminal or
 * a serial port. A thin command around the simulator in drivers/.
 *
 * Signals: SIGINT, SIGTERM and SIGHUP are blocked and taken by a small
 * thread with sigwait(), which asks the simulator to stop; so no signal
 * handler and no global state.
 */
#include "cli/cli.h"
#include "drivers/driver.h"
#include "parser/rtu.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw sim [--port PATH | --link PATH] [--slaves 1,2,3] [--baud B]\n"
            "                 [--format 8E1] [--pace] [--turnaround-us N] [--registers N]\n"
            "                 [--live] [--live-period-ms N] [--load FILE] [--capture FILE]\n"
            "                 [--in-order] [faults...]\n"
            "\n"
            "A Modbus RTU slave simulator. Without --port it creates a pseudo-terminal and\n"
            "prints its path on standard output (one line), then serves until interrupted.\n"
            "Each slave has N coils, discrete inputs, holding and input registers at\n"
            "addresses 0..N-1 (default 1000); others answer exception 02. Functions 1, 2,\n"
            "3, 4, 5, 6, 15, 16, 22, 23; others answer exception 01.\n"
            "Initial values (docs/drivers.md): holding[a] = slave*1000 + a, input[a] =\n"
            "0x8000 + slave*1000 + a (mod 65536), coil[a] = (a+slave) %% 3 == 0,\n"
            "discrete[a] = (a+slave) %% 2.\n"
            "\n"
            "  --port PATH         serve an existing port (opened exclusively)\n"
            "  --link PATH         also make PATH a symlink to the pseudo-terminal\n"
            "  --slaves LIST       slave ids served (default 1,2,3)\n"
            "  --baud B            line speed for pacing and t3.5 (default 19200)\n"
            "  --format F          character format, 8N1, 8E1, ... (default 8E1)\n"
            "  --pace              model the wire: answers at wire speed, and on its own\n"
            "                      pseudo-terminal a master set to another baud or format\n"
            "                      is not heard (docs/drivers.md)\n"
            "  --turnaround-us N   wait N us after a request before answering (default 0)\n"
            "  --registers N       items per table (default 1000)\n"
            "  --live              input registers count up, discrete inputs toggle\n"
            "  --live-period-ms N  ... every N ms (default 1000)\n"
            "  --load FILE         initial values: lines 'SLAVE TABLE ADDRESS VALUE...'\n"
            "  --capture FILE      write every frame on the line to FILE (pcap, link type 147)\n"
            "  --clamp ADDR=MAX    holding register ADDR keeps at most MAX after a write, which\n"
            "                      is echoed as written (a drive limiting a set point; up to 8)\n"
            "  --in-order          keep reading while answering: requests wait in the\n"
            "                      simulator's own queue of 16 (arrival order, as always)\n"
            "faults (rates are probabilities 0..1 per answered request):\n"
            "  --silent LIST       slaves that never answer\n"
            "  --exception-rate R  answer exception --exception-code (default 4) instead\n"
            "  --exception-code C\n"
            "  --late-rate R       answer --late-ms later (default 1500)\n"
            "  --late-ms N\n"
            "  --noise-rate R      send --noise-bytes random bytes before the answer (default 8)\n"
            "  --noise-bytes N\n"
            "  --noise-first N     the first N answers get the noise, whatever the rate\n"
            "  --noise-lead-ms N   the noise starts N ms before the answer (default: t3.5)\n"
            "  --truncate-rate R   send only the first half of the answer\n"
            "  --crc-rate R        corrupt the answer's CRC\n"
            "  --split-rate R      send the answer in two halves --split-ms apart (default 10)\n"
            "  --split-ms N\n"
            "  --double-rate R     send the answer again --double-gap-ms after it (default 20)\n"
            "  --double-gap-ms N\n"
            "  --seed S            fault generator seed (default 1)\n"
            "\n"
            "Exit: 0 on SIGINT/SIGTERM, 1 on a runtime failure, 2 on a usage error.\n");
}

static int parse_rate(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0 && v <= 1))
        return -1;
    *out = v;
    return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 0);
    if (end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

typedef struct sig_waiter {
    driver_sim_t *sim;
    sigset_t set;
    int signo;
} sig_waiter_t;

static void *wait_signal(void *arg)
{
    sig_waiter_t *w = arg;
    int sig = 0;
    if (sigwait(&w->set, &sig) == 0)
        w->signo = sig;
    driver_sim_request_stop(w->sim);
    return NULL;
}

int cmd_sim(int argc, char **argv)
{
    enum {
        O_PORT = 256, O_LINK, O_SLAVES, O_BAUD, O_FORMAT, O_PACE, O_TURN, O_REGS, O_LIVE,
        O_LIVEP, O_LOAD, O_SILENT, O_EXR, O_EXC, O_LATER, O_LATEMS, O_NOISER, O_NOISEB,
        O_TRUNC, O_CRC, O_SEED, O_CAPTURE, O_INORDER, O_NOISEF, O_NOISEL, O_SPLITR, O_SPLITMS,
        O_DOUBLER, O_DOUBLEGAP, O_CLAMP, O_HELP
    };
    static const struct option opts[] = {
        { "port", required_argument, 0, O_PORT }, { "link", required_argument, 0, O_LINK },
        { "slaves", required_argument, 0, O_SLAVES }, { "baud", required_argument, 0, O_BAUD },
        { "format", required_argument, 0, O_FORMAT }, { "pace", no_argument, 0, O_PACE },
        { "turnaround-us", required_argument, 0, O_TURN },
        { "registers", required_argument, 0, O_REGS }, { "live", no_argument, 0, O_LIVE },
        { "live-period-ms", required_argument, 0, O_LIVEP },
        { "load", required_argument, 0, O_LOAD }, { "silent", required_argument, 0, O_SILENT },
        { "exception-rate", required_argument, 0, O_EXR },
        { "exception-code", required_argument, 0, O_EXC },
        { "late-rate", required_argument, 0, O_LATER }, { "late-ms", required_argument, 0, O_LATEMS },
        { "noise-rate", required_argument, 0, O_NOISER },
        { "noise-bytes", required_argument, 0, O_NOISEB },
        { "truncate-rate", required_argument, 0, O_TRUNC },
        { "crc-rate", required_argument, 0, O_CRC }, { "seed", required_argument, 0, O_SEED },
        { "capture", required_argument, 0, O_CAPTURE },
        { "in-order", no_argument, 0, O_INORDER },
        { "noise-first", required_argument, 0, O_NOISEF },
        { "noise-lead-ms", required_argument, 0, O_NOISEL },
        { "split-rate", required_argument, 0, O_SPLITR }, { "split-ms", required_argument, 0, O_SPLITMS },
        { "double-rate", required_argument, 0, O_DOUBLER },
        { "double-gap-ms", required_argument, 0, O_DOUBLEGAP },
        { "clamp", required_argument, 0, O_CLAMP },
        { "help", no_argument, 0, O_HELP }, { 0, 0, 0, 0 },
    };
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    const char *port = NULL, *link_path = NULL;
    int c, li = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        int bad = 0;
        unsigned u;
        switch (c) {
        case O_PORT: port = optarg; break;
        case O_LINK: link_path = optarg; break;
        case O_SLAVES: bad = driver_sim_parse_slaves(optarg, &cfg) != 0; break;
        case O_BAUD: bad = parse_uint(optarg, 4000000, &cfg.baud) != 0 || cfg.baud < 300; break;
        case O_FORMAT: bad = driver_serial_parse_format(optarg, &sc) != 0; break;
        case O_PACE: cfg.pace = true; break;
        case O_TURN: bad = parse_uint(optarg, 10000000, &cfg.turnaround_us) != 0; break;
        case O_REGS: bad = parse_uint(optarg, 65536, &cfg.registers) != 0 || !cfg.registers; break;
        case O_LIVE: cfg.live = true; break;
        case O_LIVEP: bad = parse_uint(optarg, 3600000, &cfg.live_period_ms) != 0 || !cfg.live_period_ms; break;
        case O_LOAD: cfg.load_path = optarg; break;
        case O_CAPTURE: cfg.capture_path = optarg; break;
        case O_SILENT: {
            driver_sim_config_t tmp;
            bad = driver_sim_parse_slaves(optarg, &tmp) != 0;
            if (!bad) {
                memcpy(cfg.faults.silent, tmp.slaves, tmp.n_slaves);
                cfg.faults.n_silent = tmp.n_slaves;
            }
            break;
        }
        case O_EXR: bad = parse_rate(optarg, &cfg.faults.exception_rate) != 0; break;
        case O_EXC:
            bad = parse_uint(optarg, 255, &u) != 0 || u == 0;
            cfg.faults.exception_code = (uint8_t)u;
            break;
        case O_LATER: bad = parse_rate(optarg, &cfg.faults.late_rate) != 0; break;
        case O_LATEMS: bad = parse_uint(optarg, 600000, &cfg.faults.late_ms) != 0; break;
        case O_NOISER: bad = parse_rate(optarg, &cfg.faults.noise_rate) != 0; break;
        case O_NOISEB: bad = parse_uint(optarg, 64, &cfg.faults.noise_bytes) != 0; break;
        case O_TRUNC: bad = parse_rate(optarg, &cfg.faults.truncate_rate) != 0; break;
        case O_CRC: bad = parse_rate(optarg, &cfg.faults.crc_rate) != 0; break;
        case O_INORDER: cfg.in_order = true; break;
        case O_NOISEF: bad = parse_uint(optarg, 1000000000, &cfg.faults.noise_first) != 0; break;
        case O_NOISEL: bad = parse_uint(optarg, 600000, &cfg.faults.noise_lead_ms) != 0; break;
        case O_SPLITR: bad = parse_rate(optarg, &cfg.faults.split_rate) != 0; break;
        case O_SPLITMS: bad = parse_uint(optarg, 600000, &cfg.faults.split_ms) != 0; break;
        case O_DOUBLER: bad = parse_rate(optarg, &cfg.faults.double_rate) != 0; break;
        case O_DOUBLEGAP: bad = parse_uint(optarg, 600000, &cfg.faults.double_gap_ms) != 0; break;
        case O_CLAMP: {
            unsigned a, m;
            char *eq = strchr(optarg, '=');
            bad = !eq || cfg.n_clamps == DRIVER_SIM_MAX_CLAMPS;
            if (!bad) {
                *eq = '\0';
                bad = parse_uint(optarg, 65535, &a) != 0 || parse_uint(eq + 1, 65535, &m) != 0;
                *eq = '=';
            }
            if (!bad) {
                cfg.clamp[cfg.n_clamps].address = (uint16_t)a;
                cfg.clamp[cfg.n_clamps++].max = (uint16_t)m;
            }
            break;
        }
        case O_SEED: {
            char *end;
            cfg.faults.seed = strtoull(optarg, &end, 0);
            bad = end == optarg || *end;
            break;
        }
        case 'h':
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "rtugw sim: bad value for --%s: '%s'\n", opts[li].name, optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rtugw sim: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (port && link_path) {
        fprintf(stderr, "rtugw sim: --port and --link exclude each other\n");
        return 2;
    }
    cfg.char_bits = rtu_char_bits(sc.data_bits, sc.parity, sc.stop_bits);
    cfg.parity = sc.parity;
    cfg.stop_bits = sc.stop_bits;
    /* --pace models the wire: on its own pty, also the line's speed and format
     * (a master at another one is not heard; docs/drivers.md). A real port's
     * UART checks that itself. */
    cfg.check_line = cfg.pace && !port;
    cfg.notes = stderr;

    char err[DRIVER_ERRLEN];
    driver_sim_t *sim = driver_sim_new(&cfg, err, sizeof err);
    if (!sim) {
        fprintf(stderr, "rtugw sim: %s\n", err);
        return cfg.load_path ? 2 : 1;
    }
    int rc = 1, fd = -1, master = -1, slave_hold = -1;
    driver_t *serial = NULL;
    char path[128];
    bool linked = false;
    if (port) {
        sc.path = port;
        sc.baud = cfg.baud;
        serial = driver_serial_new(&sc, err, sizeof err);
        if (!serial || driver_open(serial, err, sizeof err) != 0) {
            fprintf(stderr, "rtugw sim: %s\n", err);
            rc = serial ? 1 : 2;
            goto out;
        }
        fd = driver_fd(serial);
        snprintf(path, sizeof path, "%s", port);
    } else {
        int e = driver_pty_open(&master, &slave_hold, path, sizeof path);
        if (e) {
            fprintf(stderr, "rtugw sim: cannot create a pseudo-terminal: %s\n", strerror(-e));
            goto out;
        }
        fd = master;
        if (link_path) {
            struct stat st;
            if (lstat(link_path, &st) == 0) {
                if (!S_ISLNK(st.st_mode)) {
                    fprintf(stderr, "rtugw sim: --link %s exists and is not a symlink\n", link_path);
                    rc = 2;
                    goto out;
                }
                unlink(link_path);
            }
            if (symlink(path, link_path) != 0) {
                fprintf(stderr, "rtugw sim: --link %s: %s\n", link_path, strerror(errno));
                goto out;
            }
            linked = true;
        }
    }

    sig_waiter_t w = { .sim = sim, .signo = 0 };
    sigemptyset(&w.set);
    sigaddset(&w.set, SIGINT);
    sigaddset(&w.set, SIGTERM);
    sigaddset(&w.set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &w.set, NULL);
    pthread_t waiter;
    if (pthread_create(&waiter, NULL, wait_signal, &w) != 0) {
        fprintf(stderr, "rtugw sim: cannot start the signal thread\n");
        goto out;
    }

    printf("%s\n", path);
    fflush(stdout);
    fprintf(stderr, "rtugw sim: slaves");
    for (size_t i = 0; i < cfg.n_slaves; i++)
        fprintf(stderr, "%s%u", i ? "," : " ", cfg.slaves[i]);
    fprintf(stderr, " on %s%s%s, %u baud%s%s\n", path, linked ? " via " : "",
            linked ? link_path : "", cfg.baud, cfg.pace ? ", paced" : "",
            cfg.in_order ? ", in order" : "");

    int serve = driver_sim_serve(sim, fd);
    pthread_kill(waiter, SIGTERM); /* wakes sigwait if serve ended by itself */
    pthread_join(waiter, NULL);
    if (serve == 0) {
        rc = 0;
    } else {
        fprintf(stderr, "rtugw sim: %s: %s\n", path,
                serve == DRIVER_HANGUP ? "the line hung up" : strerror(-serve));
        rc = 1;
    }
    driver_sim_stats_t st;
    driver_sim_get_stats(sim, &st);
    fprintf(stderr,
            "rtugw sim: %llu requests, %llu answers, %llu exceptions, %llu for other slaves, "
            "%llu bad CRC, %llu bytes at another speed or format\n",
            (unsigned long long)st.requests, (unsigned long long)st.replies,
            (unsigned long long)st.exceptions, (unsigned long long)st.ignored,
            (unsigned long long)st.bad_crc, (unsigned long long)st.line_mismatch);
    fprintf(stderr,
            "rtugw sim: faults injected: %llu silent, %llu exception, %llu late, %llu noise, "
            "%llu truncated, %llu CRC, %llu split, %llu doubled\n",
            (unsigned long long)st.f_silent, (unsigned long long)st.f_exception,
            (unsigned long long)st.f_late, (unsigned long long)st.f_noise,
            (unsigned long long)st.f_truncate, (unsigned long long)st.f_crc,
            (unsigned long long)st.f_split, (unsigned long long)st.f_double);
    if (cfg.in_order)
        fprintf(stderr, "rtugw sim: in order: %llu requests queued, at most %llu waiting, %llu lost\n",
                (unsigned long long)st.queued, (unsigned long long)st.queue_max,
                (unsigned long long)st.queue_lost);
out:
    if (linked)
        unlink(link_path);
    driver_free(serial);
    if (master >= 0)
        close(master);
    if (slave_hold >= 0)
        close(slave_hold);
    driver_sim_free(sim);
    return rc;
}

/* `rtugw ports`: the serial ports libserialport finds, with USB vendor:product. */
int cmd_ports(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        printf("usage: rtugw ports\n\nLists serial ports: name, description, and for USB adapters\n"
               "vendor:product, manufacturer, product and serial number.\n");
        return strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ? 0 : 2;
    }
    int n = driver_ports_list(stdout);
    if (n < 0)
        return 1;
    if (n == 0)
        fprintf(stderr, "rtugw ports: no serial ports found\n");
    return 0;
}
