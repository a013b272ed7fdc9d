/*
 * cli/cmd_check.c -- `rtugw check`: validate a configuration file.
 */
#include "config/config.h"
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw check -c FILE\n"
            "       rtugw check --demo [--print]\n"
            "\n"
            "Validates a configuration file: every error is printed as FILE:LINE with the\n"
            "section, key and value that is wrong. Exit 0 when valid, 2 when not.\n"
            "  -c, --config FILE  the file to check\n"
            "  --demo             check the embedded demo configuration instead\n"
            "  --print            with --demo: print it (a complete example to start from)\n");
}

int cmd_check(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "demo", no_argument, NULL, 'd' },
        { "print", no_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL;
    int demo = 0, print = 0, c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'd': demo = 1; break;
        case 'p': print = 1; break;
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

    config_errors_t errs;
    config_t *cfg = demo ? config_load_string(config_demo_text(), "<demo>", &errs)
                         : config_load_file(file, &errs);
    if (!cfg) {
        for (unsigned i = 0; i < errs.count; i++)
            fprintf(stderr, "%s\n", errs.text[i]);
        if (errs.total > errs.count)
            fprintf(stderr, "(%u more errors not shown)\n", errs.total - errs.count);
        return 2;
    }
    char summary[256];
    config_summary(cfg, summary, sizeof summary);
    printf("%s: ok: %s\n", cfg->source, summary);
    config_free(cfg);
    return 0;
}
